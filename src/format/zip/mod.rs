//! Just enough of the ZIP format for .npz files: reading the central directory (ZIP64
//! included) to find each member's data, and writing members front to back with data
//! descriptors, as Python's `zipfile` does on a stream it cannot seek (compared on a fixture:
//! the same bytes but for the permissions in the external attributes, rw-r--r-- here and
//! rw------- there).
//! <https://pkware.cachefly.net/webdocs/casestudies/APPNOTE.TXT>
//!
//! Why not the zip crate (9.8, tried on a `numpy.savez` fixture): its reader would serve
//! (`by_index_raw(i).data_start()` is the offset to map), but its writer cannot lay members out
//! as `zipfile` does for numpy: `large_file(true)` puts ZIP64 sizes in every central directory
//! entry (numpy's have none below 2 GiB), without it the local header lacks the ZIP64 field
//! numpy forces, and its streaming mode writes local sizes of 0 where `zipfile` writes 0xFFFFFFFF.
//! With the writer hand-written, the reader stays too: it shares the writer's record layouts,
//! and the crate's reader alone would bring about ten more crates into the build.

mod parse;
mod write;

use std::fs::File;
use std::io;

use crate::messages::excerpt;

pub use parse::{
    CENTRAL_HEADER_LEN, Central, End, Entries, FIRST_TAIL, Listing, Parse, entries, parse_end,
    parse_local,
};
pub use write::{Written, central_directory, data_descriptor, local_header};

const LOCAL_HEADER: u32 = 0x0403_4b50;
const CENTRAL_HEADER: u32 = 0x0201_4b50;
const DATA_DESCRIPTOR: u32 = 0x0807_4b50;
const END_OF_DIRECTORY: u32 = 0x0605_4b50;
const ZIP64_END_OF_DIRECTORY: u32 = 0x0606_4b50;
const ZIP64_LOCATOR: u32 = 0x0706_4b50;
const ZIP64_EXTRA: u16 = 0x0001;
/// Stored (no compression) and deflate, the two methods numpy writes.
pub const STORED: u16 = 0;
/// See [`STORED`].
pub const DEFLATED: u16 = 8;
/// Python's `zipfile.ZIP64_LIMIT`: values above it go in ZIP64 fields (some readers take
/// the 32-bit fields as signed).
const ZIP64_LIMIT: u64 = (1 << 31) - 1;
/// A central directory larger than this is refused before it is read.
const MAX_DIRECTORY: u64 = 1 << 30;
/// The end-of-directory record is 22 bytes plus a comment of at most 65535.
const MAX_END_SEARCH: u64 = 22 + 0xFFFF;

/// One member of an archive, as its central directory entry and local header describe it.
#[derive(Debug, Clone)]
pub struct Member {
    /// Its name in the archive (`x.npy`).
    pub name: String,
    /// `STORED`, `DEFLATED` or another method.
    pub method: u16,
    /// The CRC-32 of its uncompressed bytes.
    pub crc: u32,
    /// Bytes of (possibly compressed) data in the archive.
    pub compressed: u64,
    /// Bytes once uncompressed.
    pub size: u64,
    /// Where its data starts in the archive.
    pub data_start: u64,
}

/// Whether a file's first bytes are a ZIP archive's signature: its first local header, or
/// the end record of an empty archive.
pub fn is_signature(head: &[u8]) -> bool {
    head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06")
}

/// Whether a file read as a format that has both a ZIP form and another (a `torch.save`
/// checkpoint) is in its ZIP form: it starts as every ZIP record does.
pub fn is_archive(head: &[u8]) -> bool {
    head.starts_with(b"PK")
}

/// Bytes read by position: an archive's source, whatever holds it (a local file, bytes in
/// memory, a remote object behind the input stage's `Source::read_at`). The ZIP driver
/// ([`read_directory`]), the .npz member reader and the `torch.save` reader read through it.
pub trait ReadRange: Send + Sync {
    /// Fills `buf` with the bytes from `offset` on; an error when fewer are there.
    fn read_range(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;

    /// The local file behind these bytes, if any, for a reader that maps them.
    fn file(&self) -> Option<&File> {
        None
    }

    /// A handle of its own on the same bytes, for a reader that keeps them past this borrow
    /// (a deflated member inflated when its data is first read).
    fn detached(&self) -> io::Result<Box<dyn ReadRange>>;
}

impl ReadRange for File {
    fn read_range(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        crate::sys::read_exact_at(self, buf, offset)
    }

    fn file(&self) -> Option<&File> {
        Some(self)
    }

    fn detached(&self) -> io::Result<Box<dyn ReadRange>> {
        Ok(Box::new(self.try_clone()?))
    }
}

/// A shared handle (an input's file, kept open by several readers).
impl<T: ReadRange + 'static> ReadRange for std::sync::Arc<T> {
    fn read_range(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        (**self).read_range(offset, buf)
    }

    fn file(&self) -> Option<&File> {
        (**self).file()
    }

    fn detached(&self) -> io::Result<Box<dyn ReadRange>> {
        Ok(Box::new(std::sync::Arc::clone(self)))
    }
}

impl ReadRange for Vec<u8> {
    fn read_range(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.as_slice().read_range(offset, buf)
    }

    fn detached(&self) -> io::Result<Box<dyn ReadRange>> {
        Ok(Box::new(self.clone()))
    }
}

impl ReadRange for &[u8] {
    fn read_range(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let bytes = usize::try_from(offset)
            .ok()
            .and_then(|at| self.get(at..at.checked_add(buf.len())?))
            .ok_or(io::ErrorKind::UnexpectedEof)?;
        buf.copy_from_slice(bytes);
        Ok(())
    }

    fn detached(&self) -> io::Result<Box<dyn ReadRange>> {
        Ok(Box::new(self.to_vec()))
    }
}

/// An archive that lies inside a larger source, from byte `base` (a chunk of a PyTorch
/// distributed checkpoint's `.distcp` file is a `torch.save` archive at an offset).
struct Within<'a> {
    source: &'a dyn ReadRange,
    base: u64,
}

impl ReadRange for Within<'_> {
    fn read_range(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let at = self.base.checked_add(offset);
        let at = at.ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        self.source.read_range(at, buf)
    }

    fn detached(&self) -> io::Result<Box<dyn ReadRange>> {
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// Reads the central directory of the archive `source` of `file_len` bytes (the length of a
/// local file, a remote object's head, a slice): its one driver, which reads the ranges the
/// stages of [`parse`] ask for. Errors are reasons for a message that names the file.
pub fn read_directory(source: &dyn ReadRange, file_len: u64) -> Result<Vec<Member>, String> {
    let end = read_end(source, file_len)?;
    let mut entries = parse::entries(&end, file_len)?;
    let mut listing = Listing::default();
    let mut window = Window::default();
    let mut header = Window::default();
    let mut centrals = Vec::new();
    // A failed read of the directory (which `entries` checked lies in the file) is the
    // source's failure (an object replaced since its head, a lost connection), not damage.
    while let Some(central) =
        window.feed(source, read_failed, |bytes, at| entries.next(bytes, at))?
    {
        centrals.push(central);
    }
    // The local headers are read in the order they lie in the archive, whatever the
    // directory's: a remote source (`input::objects::Object`) keeps one window of bytes, so
    // that a directory that jumps back and forth would cost a ranged GET per member; in
    // order, one GET serves every header it holds.
    let mut by_offset: Vec<usize> = (0..centrals.len()).collect();
    by_offset.sort_by_key(|&i| centrals[i].local);
    let mut data_starts = vec![0; centrals.len()];
    for i in by_offset {
        let central = &centrals[i];
        header.at = central.local;
        header.bytes.clear();
        data_starts[i] = header.feed(source, read_failed, |bytes, at| {
            let bytes = if at == central.local { bytes } else { &[] };
            parse::parse_local(bytes, central, file_len)
        })?;
    }
    for (central, data_start) in centrals.into_iter().zip(data_starts) {
        listing.add(central, data_start, file_len)?;
    }
    listing.finish()
}

/// Reads the central directory of the archive `source` of `file_len` bytes (see
/// [`read_directory`]).
pub fn directory(source: &dyn ReadRange, file_len: u64) -> Result<Vec<Member>, String> {
    read_directory(source, file_len)
}

/// Reads the central directory of an archive that lies inside `source`, its `file_len` bytes
/// from byte `base` (a chunk of a `.distcp` file). The archive's own offsets count from
/// `base`; the members' `data_start` count from the start of `source`.
pub fn directory_in(
    source: &dyn ReadRange,
    base: u64,
    file_len: u64,
) -> Result<Vec<Member>, String> {
    let mut members = read_directory(&Within { source, base }, file_len)?;
    for member in &mut members {
        member.data_start += base;
    }
    Ok(members)
}

/// The end records, read as [`parse_end`] asks: the last [`FIRST_TAIL`] bytes first, then
/// the rest of a comment's 64 KiB, the ZIP64 locator or record.
fn read_end(source: &dyn ReadRange, file_len: u64) -> Result<End, String> {
    let first = file_len.min(FIRST_TAIL);
    let mut tail = read_range(source, file_len - first..file_len)?;
    let mut record = Vec::new();
    for _ in 0..MAX_ROUNDS {
        match parse_end(&tail, &record, file_len) {
            Ok(end) => return Ok(end),
            Err(Parse::Refused(why)) => return Err(why),
            Err(Parse::Need(range)) if range.end == file_len => {
                tail = read_range(source, range)?;
            }
            Err(Parse::Need(range)) => record = read_range(source, range)?,
        }
    }
    Err(asked_again())
}

/// The most reads one stage asks for before it answers (the end records: a longer tail, a
/// locator before it, a ZIP64 record elsewhere); past it, a stage that keeps asking is
/// stopped rather than looping.
const MAX_ROUNDS: usize = 4;

fn asked_again() -> String {
    "its zip directory could not be read: its parser kept asking for more bytes".to_string()
}

fn read_failed(e: io::Error) -> String {
    format!("reading its zip directory failed: {e}")
}

fn read_range(source: &dyn ReadRange, range: std::ops::Range<u64>) -> Result<Vec<u8>, String> {
    let len = usize::try_from(range.end - range.start).map_err(|_| asked_again())?;
    let mut bytes = vec![0; len];
    source
        .read_range(range.start, &mut bytes)
        .map_err(read_failed)?;
    Ok(bytes)
}

/// Bytes of the archive from `at`, replaced by the range a stage asks for.
#[derive(Default)]
struct Window {
    at: u64,
    bytes: Vec<u8>,
}

impl Window {
    /// Runs `stage` on the window, reading the range it asks for into it until it answers;
    /// `failed` says why a read failed.
    fn feed<T>(
        &mut self,
        source: &dyn ReadRange,
        failed: impl Fn(io::Error) -> String,
        mut stage: impl FnMut(&[u8], u64) -> Result<T, Parse>,
    ) -> Result<T, String> {
        for _ in 0..MAX_ROUNDS {
            match stage(&self.bytes, self.at) {
                Ok(answer) => return Ok(answer),
                Err(Parse::Refused(why)) => return Err(why),
                Err(Parse::Need(range)) => {
                    let len =
                        usize::try_from(range.end - range.start).map_err(|_| asked_again())?;
                    self.bytes.resize(len, 0);
                    self.at = range.start;
                    source
                        .read_range(range.start, &mut self.bytes)
                        .map_err(&failed)?;
                }
            }
        }
        Err(asked_again())
    }
}

pub(crate) fn le16(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}

pub(crate) fn le32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

pub(crate) fn le64(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

/// Wraps an `io::Error` from decompressing with the member's name.
pub fn inflate_error(name: &str, e: io::Error) -> String {
    format!("its member {} cannot be decompressed: {e}", excerpt(name))
}

#[cfg(test)]
mod tests;
