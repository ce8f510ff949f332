//! numpy's .npz: a zip archive of .npy files, one per array, named `NAME.npy`
//! (`numpy.savez`, `numpy.savez_compressed`).
//!
//! Reading: a member stored uncompressed is read in place, its data an offset into the
//! archive, and its CRC-32 is checked by the copy engine as it reads the data (see
//! [`StoredCrc`]); a deflated member's .npy header is read from the start of the inflating
//! stream and checked against the member's size, then the member is inflated once into an
//! unlinked temporary file (checking its CRC-32 and size) and read from there. Writing: members stored (or deflated with
//! `--compress`) front to back, the CRC-32 computed as the data streams by, sizes and CRC in
//! a data descriptor after each member, then the central directory: what Python's `zipfile`
//! writes on a stream it cannot seek, so `numpy.load` reads it.
//!
//! The zip crate would also compute a member's CRC-32 as its data streams through, but frames
//! members differently from `zipfile` (see `zip/mod.rs`), so the framing is written here and the
//! deflate stream comes from flate2.

use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use flate2::{Compress, Compression, FlushCompress, Status};

use crate::error::{Error, InputRef, Refusal, Result};
use crate::format::Sink;
use crate::format::npy::{HeaderBytes, PastEnd};
use crate::format::zip::{self, DEFLATED, Member, ReadRange, STORED, Written};
use crate::format::{
    Archive, Claim, Contents, Descriptor, Found, OutTensor, OwnData, TensorInfo, Writer, Writing,
    no_such_tensor, npy,
};
use crate::messages::excerpt;

/// numpy's .npz: a ZIP archive of .npy members, read in place or inflated; read and
/// written. It reads the archives no other format claims by their members.
pub const FORMAT: Descriptor = Descriptor {
    name: "npz",
    extensions: &[".npz"],
    files: ".npz archives",
    magic: Some(zip::is_signature),
    looks_like: None,
    reader: None,
    archive: Some(Archive {
        claims: Claim::Rest,
        unclaimed: "it is not a ZIP archive of .npy members",
        read: |file, input, members, select| read(members, file, input, select),
    }),
    writing: Writing::By(|options| Box::new(NpzWriter::new(options.compress))),
    holds_names: true,
    c_order_only: false,
    reads_in_place: true,
    cannot_grow: Some(
        "an .npz archive lists its members in a directory at its end, and a member cannot \
         grow without moving everything after it",
    ),
};

/// Reads each member's .npy header, the archive's directory `members` already read
/// ([`zip::read_directory`]), from `source` (a local file, bytes, any [`ReadRange`]); with
/// `select`, only that member (inflating only its header).
pub fn read(
    members: Vec<Member>,
    source: &dyn ReadRange,
    input: &InputRef,
    select: Option<&str>,
) -> Result<Contents> {
    let members: Vec<Member> = members
        .into_iter()
        .filter(|m| !m.name.ends_with('/'))
        .collect();
    let names: Vec<String> = members.iter().map(|m| array_name(&m.name)).collect();
    if let Some(wanted) = select
        && !names.iter().any(|n| n == wanted)
    {
        return Err(no_such_tensor(input, wanted, &names));
    }
    // Read in the order the members lie in the archive (see `zip::read_directory`), kept
    // in the directory's.
    let mut by_offset: Vec<usize> = (0..members.len()).collect();
    by_offset.sort_by_key(|&i| members[i].data_start);
    let mut tensors: Vec<Option<Found>> = members.iter().map(|_| None).collect();
    for i in by_offset {
        let name = &names[i];
        if select.is_some_and(|wanted| wanted != name) {
            continue;
        }
        let tensor_ref = InputRef {
            tensor: Some(name.as_str().into()),
            ..input.clone()
        };
        tensors[i] = Some(read_member(source, &members[i], name.clone(), &tensor_ref)?);
    }
    Ok(Contents::of_tensors(
        tensors.into_iter().flatten().collect(),
    ))
}

/// numpy's name for a member: its file name without `.npy`.
fn array_name(member: &str) -> String {
    member.strip_suffix(".npy").unwrap_or(member).to_string()
}

fn read_member(
    source: &dyn ReadRange,
    member: &Member,
    name: String,
    input: &InputRef,
) -> Result<Found> {
    let malformed = |reason: String| Error::Malformed {
        input: input.clone(),
        format: ".npz",
        reason,
    };
    match member.method {
        STORED => {
            if member.compressed != member.size {
                return Err(malformed(format!(
                    "its member {} is stored uncompressed but declares {} bytes stored and {} \
                     bytes uncompressed",
                    excerpt(&member.name),
                    member.compressed,
                    member.size
                )));
            }
            // The CRC-32 covers the .npy header too: hashed here, as it is read.
            let mut header = Recording {
                inner: At {
                    source,
                    at: member.data_start,
                    end: member.data_start.saturating_add(member.size),
                },
                seen: Vec::new(),
            };
            let info =
                npy::read_header(member_header(&mut header, member.data_start, member), input)?;
            let mut check = StoredCrc::new(member.name.clone(), member.crc, ".npz");
            check.hasher.update(&header.seen);
            let stored_crc = if info.data_len == 0 {
                check.verify(input)?;
                None
            } else {
                Some(Box::new(check))
            };
            Ok(Found {
                name: Some(name),
                info,
                file: None,
                stored_crc,
            })
        }
        DEFLATED => {
            let info = inflated_header(source, member, input)?;
            let archive = source.detached().map_err(|e| input.io_error("read", e))?;
            Ok(Found {
                name: Some(name),
                info,
                file: Some(OwnData::Inflated(Arc::new(Inflation {
                    archive,
                    member: member.clone(),
                    input: input.clone(),
                    done: Mutex::new(None),
                }))),
                stored_crc: None,
            })
        }
        method => Err(Error::Unsupported {
            input: input.clone(),
            reason: format!(
                "its member {} is compressed with zip method {method}; tjoin reads stored and \
                 deflated members, the two numpy writes",
                excerpt(&member.name)
            ),
        }),
    }
}

/// A deflated member whose .npy header was read, inflated into an unlinked temporary file
/// when its data is first read (a `--dry-run` never does): the member's bytes are written
/// once, by the run that needs them.
pub struct Inflation {
    /// The archive (its own handle, read by position).
    archive: Box<dyn ReadRange>,
    member: Member,
    input: InputRef,
    /// The inflated file, once made.
    done: Mutex<Option<Arc<File>>>,
}

impl Inflation {
    /// The member's inflated bytes (.npy header and data), inflating them the first time.
    pub fn file(&self) -> Result<Arc<File>> {
        let mut done = self.done.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(file) = done.as_ref() {
            return Ok(Arc::clone(file));
        }
        let (_, temp) = inflate(&*self.archive, &self.member, &self.input)?;
        let temp = Arc::new(temp);
        *done = Some(Arc::clone(&temp));
        Ok(temp)
    }
}

/// How many compressed bytes a member's stream reads at once when it is inflated whole.
const INFLATE_READ: usize = 1 << 20;

/// How many compressed bytes a member's stream reads at once when only its .npy header is
/// wanted (a dry run): a header's deflated bytes are a few hundred, and each read of a
/// remote archive is a request of this size.
const HEADER_READ: usize = 16 << 10;

/// The deflating stream of `member`, read by position (the archive's handle may be shared)
/// `capacity` compressed bytes at a time, at most one byte past its declared size.
fn inflating<'a>(source: &'a dyn ReadRange, member: &Member, capacity: usize) -> impl Read + 'a {
    let compressed = BufReader::with_capacity(
        capacity,
        At {
            source,
            at: member.data_start,
            end: member.data_start.saturating_add(member.compressed),
        },
    );
    // One byte more than declared, to notice a member that inflates to more.
    flate2::read::DeflateDecoder::new(compressed).take(member.size.saturating_add(1))
}

/// What a deflated member's .npy header says, read from the start of its stream and checked
/// against the member's declared size; nothing else is inflated.
fn inflated_header(
    source: &dyn ReadRange,
    member: &Member,
    input: &InputRef,
) -> Result<TensorInfo> {
    npy::read_header(
        member_header(&mut inflating(source, member, HEADER_READ), 0, member),
        input,
    )
}

/// Where a member's .npy header is read from: `rest` from its start on, at `start` of the
/// file its data is read from. A member holds exactly one array: bytes after its data are
/// damage.
fn member_header<'a>(rest: &'a mut dyn Read, start: u64, member: &Member) -> HeaderBytes<'a> {
    HeaderBytes {
        head: &[],
        rest,
        start,
        len: member.size,
        past_end: PastEnd::Malformed,
    }
}

/// Bytes `at..end` of an archive, read by position; the directory's reader checked that
/// they lie inside it.
struct At<'a> {
    source: &'a dyn ReadRange,
    at: u64,
    end: u64,
}

impl Read for At<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = usize::try_from(self.end.saturating_sub(self.at)).unwrap_or(usize::MAX);
        let len = buf.len().min(left);
        self.source.read_range(self.at, &mut buf[..len])?;
        self.at += len as u64;
        Ok(len)
    }
}

/// Inflates a deflated member into an unlinked temporary file, checking size and CRC-32, and
/// returns what its .npy header says. The header is read from the start of the stream and
/// checked against the member's declared size first: a member whose header does not fit it
/// is refused before anything is inflated to disk.
fn inflate(
    source: &dyn ReadRange,
    member: &Member,
    input: &InputRef,
) -> Result<(TensorInfo, File)> {
    let malformed = |reason: String| Error::Malformed {
        input: input.clone(),
        format: ".npz",
        reason,
    };
    let io_failed = |e: io::Error| {
        malformed(format!(
            "inflating its member {} failed: {e}",
            excerpt(&member.name)
        ))
    };
    let mut header = Recording {
        inner: inflating(source, member, INFLATE_READ),
        seen: Vec::new(),
    };
    let info = npy::read_header(member_header(&mut header, 0, member), input)?;
    let Recording {
        inner: mut decoder,
        seen,
    } = header;
    let mut temp = tempfile::tempfile().map_err(|e| {
        malformed(format!(
            "cannot create a temporary file to inflate its member {} into: {e}",
            excerpt(&member.name)
        ))
    })?;
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&seen);
    temp.write_all(&seen).map_err(io_failed)?;
    let mut total = seen.len() as u64;
    drop(seen);
    let mut buffer = vec![0; 1 << 20];
    loop {
        let n = match decoder.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(malformed(zip::inflate_error(&member.name, e))),
        };
        hasher.update(&buffer[..n]);
        temp.write_all(&buffer[..n]).map_err(io_failed)?;
        total += n as u64;
    }
    if total != member.size {
        return Err(malformed(format!(
            "its member {} inflates to {}{total} bytes but declares {}; the file is damaged",
            excerpt(&member.name),
            if total > member.size {
                "more than "
            } else {
                ""
            },
            member.size
        )));
    }
    let mut check = StoredCrc::new(member.name.clone(), member.crc, ".npz");
    check.hasher = hasher;
    check.verify(input)?;
    Ok((info, temp))
}

/// A reader that keeps a copy of what it reads: a member's .npy header, to hash it (and to
/// write it out again, for a deflated member).
struct Recording<R> {
    inner: R,
    seen: Vec<u8>,
}

impl<R: Read> Read for Recording<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.seen.extend_from_slice(&buf[..n]);
        Ok(n)
    }
}

/// The CRC-32 check of a member: its recorded value, and the hash of the bytes read so far.
///
/// A stored member's data is read in place by the copy engine, which finishes the hash as it
/// reads (`copy.rs`), so that the check costs no second pass over the data; a mismatch fails
/// the run before the output is committed. The reader hands the check over with the tensor
/// it found (`Found::stored_crc`), whose data it covers, and which may be copied on any
/// thread.
#[derive(Clone)]
pub struct StoredCrc {
    member: String,
    recorded: u32,
    /// The format the member's archive is, for the message: `.npz`.
    format: &'static str,
    /// The hash so far: of the member's .npy header, before the data.
    pub hasher: crc32fast::Hasher,
}

impl StoredCrc {
    /// The check of the member `member` of an archive of `format`, whose recorded CRC-32 is
    /// `recorded`, before any of its bytes are hashed.
    pub fn new(member: String, recorded: u32, format: &'static str) -> StoredCrc {
        StoredCrc {
            member,
            recorded,
            format,
            hasher: crc32fast::Hasher::new(),
        }
    }

    /// Fails unless the hash of everything fed to it is the recorded CRC-32.
    pub fn verify(self, input: &InputRef) -> Result<()> {
        let computed = self.hasher.finalize();
        if computed == self.recorded {
            return Ok(());
        }
        Err(Error::Malformed {
            input: input.clone(),
            format: self.format,
            reason: format!(
                "its member {} fails its CRC-32 check (computed {computed:08x}, recorded \
                 {:08x}); the file is damaged",
                excerpt(&self.member),
                self.recorded
            ),
        })
    }
}

/// Writes tensors as members `NAME.npy` of a zip archive.
pub struct NpzWriter {
    compress: bool,
    /// Bytes written so far.
    offset: u64,
    /// The members written so far.
    written: Vec<Written>,
    /// The member being written.
    current: Option<MemberState>,
}

impl NpzWriter {
    /// A writer of stored members, or deflated ones with `compress`.
    pub fn new(compress: bool) -> NpzWriter {
        NpzWriter {
            compress,
            offset: 0,
            written: Vec::new(),
            current: None,
        }
    }

    fn write(&mut self, sink: &mut dyn Sink, bytes: &[u8]) -> io::Result<()> {
        sink.write_all(bytes)?;
        self.offset += bytes.len() as u64;
        Ok(())
    }
}

/// The CRC, counts and compressor of the member being written.
struct MemberState {
    member: Written,
    hasher: crc32fast::Hasher,
    deflate: Option<(Compress, Vec<u8>)>,
}

impl MemberState {
    /// Passes uncompressed bytes of the member on to `sink`.
    fn feed(&mut self, sink: &mut dyn Sink, bytes: &[u8]) -> io::Result<()> {
        self.hasher.update(bytes);
        self.member.size += bytes.len() as u64;
        match &mut self.deflate {
            None => {
                self.member.compressed += bytes.len() as u64;
                sink.write_all(bytes)
            }
            Some(_) => self.deflate(sink, bytes, FlushCompress::None),
        }
    }

    /// Compresses `input` into `sink`; with `Finish`, until the stream is complete.
    fn deflate(
        &mut self,
        sink: &mut dyn Sink,
        mut input: &[u8],
        flush: FlushCompress,
    ) -> io::Result<()> {
        let Some((compress, buffer)) = &mut self.deflate else {
            return Ok(());
        };
        loop {
            let (read, wrote) = (compress.total_in(), compress.total_out());
            let status = compress
                .compress(input, buffer, flush)
                .map_err(io::Error::other)?;
            let consumed = (compress.total_in() - read) as usize;
            let produced = (compress.total_out() - wrote) as usize;
            sink.write_all(&buffer[..produced])?;
            self.member.compressed += produced as u64;
            input = &input[consumed..];
            let done = match flush {
                FlushCompress::Finish => status == Status::StreamEnd,
                _ => input.is_empty() && produced < buffer.len(),
            };
            if done {
                return Ok(());
            }
        }
    }
}

/// The sink the copy engine writes a member's data through.
struct MemberSink<'a> {
    state: &'a mut MemberState,
    sink: &'a mut dyn Sink,
}

impl Sink for MemberSink<'_> {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.state.feed(self.sink, bytes)
    }

    fn name(&self) -> &Path {
        self.sink.name()
    }
}

impl Writer for NpzWriter {
    fn check(&self, tensors: &[OutTensor]) -> std::result::Result<(), Refusal> {
        let mut problems: Vec<String> = tensors
            .iter()
            .filter_map(|t| {
                npy::check_dtype(t)
                    .err()
                    .map(|e| format!("tensor `{}`: {e}", excerpt(&t.name)))
            })
            .collect();
        let mut names = std::collections::HashSet::new();
        for tensor in tensors {
            if !names.insert(&tensor.name) {
                problems.push(format!("two tensors are named `{}`", excerpt(&tensor.name)));
            }
            if tensor.name.len() + 4 > usize::from(u16::MAX) {
                problems.push(format!(
                    "the name of tensor `{}` is too long for a zip",
                    excerpt(&tensor.name)
                ));
            }
        }
        if tensors.len() > usize::from(u16::MAX) * 16 {
            problems.push(format!(
                "{} tensors are too many for one archive",
                tensors.len()
            ));
        }
        super::cannot_hold(problems)
    }

    fn start_tensor(&mut self, sink: &mut dyn Sink, tensor: &OutTensor) -> io::Result<()> {
        let name = format!("{}.npy", tensor.name);
        let method = if self.compress { DEFLATED } else { STORED };
        let local = self.offset;
        self.write(sink, &zip::local_header(&name, method))?;
        let mut state = MemberState {
            member: Written {
                name,
                method,
                crc: 0,
                compressed: 0,
                size: 0,
                local,
            },
            hasher: crc32fast::Hasher::new(),
            deflate: self.compress.then(|| {
                (
                    Compress::new(Compression::default(), false),
                    vec![0; 1 << 16],
                )
            }),
        };
        state.feed(
            sink,
            &npy::header(&tensor.dtype, &tensor.shape, tensor.layout)?,
        )?;
        self.current = Some(state);
        Ok(())
    }

    fn data_sink<'a>(&'a mut self, sink: &'a mut dyn Sink) -> Box<dyn Sink + 'a> {
        match &mut self.current {
            Some(state) => Box::new(MemberSink { state, sink }),
            None => Box::new(super::PassThrough(sink)),
        }
    }

    fn end_tensor(&mut self, sink: &mut dyn Sink, _tensor: &OutTensor) -> io::Result<()> {
        let Some(mut state) = self.current.take() else {
            return Ok(());
        };
        state.deflate(sink, &[], FlushCompress::Finish)?;
        let mut member = state.member;
        member.crc = state.hasher.finalize();
        self.offset += member.compressed;
        self.write(sink, &zip::data_descriptor(&member))?;
        self.written.push(member);
        Ok(())
    }

    fn finish(&mut self, sink: &mut dyn Sink) -> io::Result<()> {
        let directory = zip::central_directory(&self.written, self.offset);
        self.write(sink, &directory)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::format::Layout;

    /// An .npz of `x` stored and `y` deflated, as `numpy.savez` frames members.
    fn archive() -> Vec<u8> {
        let mut bytes = Vec::new();
        let mut written = Vec::new();
        for (name, values, method) in [
            ("x.npy", &[1.0f32, 2.0, 3.0][..], STORED),
            ("y.npy", &[4.0f32; 40][..], DEFLATED),
        ] {
            let mut npy = npy::header(&DType::Float32, &[values.len() as u64], Layout::C).unwrap();
            values.iter().for_each(|v| npy.extend(v.to_le_bytes()));
            let data = match method {
                STORED => npy.clone(),
                _ => {
                    let mut deflate = flate2::write::DeflateEncoder::new(
                        Vec::new(),
                        flate2::Compression::default(),
                    );
                    deflate.write_all(&npy).unwrap();
                    deflate.finish().unwrap()
                }
            };
            let local = bytes.len() as u64;
            bytes.extend(zip::local_header(name, method));
            bytes.extend_from_slice(&data);
            let member = Written {
                name: name.to_string(),
                method,
                crc: crc32fast::hash(&npy),
                compressed: data.len() as u64,
                size: npy.len() as u64,
                local,
            };
            bytes.extend(zip::data_descriptor(&member));
            written.push(member);
        }
        let start = bytes.len() as u64;
        bytes.extend(zip::central_directory(&written, start));
        bytes
    }

    fn input() -> InputRef {
        InputRef {
            position: 1,
            location: Path::new("a.npz").into(),
            tensor: None,
        }
    }

    #[test]
    fn members_read_from_bytes_are_those_read_from_a_file() {
        let bytes = archive();
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&bytes).unwrap();
        let len = bytes.len() as u64;
        let from_bytes = {
            let members = zip::read_directory(&bytes.as_slice(), len).unwrap();
            read(members, &bytes.as_slice(), &input(), None).unwrap()
        };
        let from_file = read(zip::directory(&file, len).unwrap(), &file, &input(), None).unwrap();
        let infos = |c: &Contents| -> Vec<(Option<String>, TensorInfo)> {
            c.tensors
                .iter()
                .map(|t| (t.name.clone(), t.info.clone()))
                .collect()
        };
        assert_eq!(infos(&from_bytes), infos(&from_file));
        assert_eq!(from_bytes.tensors[0].info.shape.as_ref(), &[3]);
        // The deflated member inflates from the bytes' own copy.
        let Some(OwnData::Inflated(inflation)) = &from_bytes.tensors[1].file else {
            panic!("y.npy is deflated");
        };
        let inflated = inflation.file().unwrap();
        let mut all = vec![0; inflated.metadata().unwrap().len() as usize];
        crate::sys::read_exact_at(&inflated, &mut all, 0).unwrap();
        let data_at = from_bytes.tensors[1].info.data_offset as usize;
        assert_eq!(&all[data_at..data_at + 4], &4.0f32.to_le_bytes());
        assert_eq!(all.len() - data_at, 160);
    }
}
