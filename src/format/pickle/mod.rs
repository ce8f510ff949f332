//! PyTorch checkpoints (`torch.save`: `.pt`, `.pth`, `.bin`), read without running their
//! code.
//!
//! A checkpoint is a pickle whose tensors name their storages by persistent ID; the storages'
//! bytes lie beside it. tjoin runs the pickle on a machine of its own ([`vm`]) that mirrors
//! torch's `torch/_weights_only_unpickler.py`: the same opcodes (and the data opcodes of
//! protocols 3 to 5, which `torch.save(pickle_protocol=4)` writes), and an allowlist of
//! globals ([`globals`]) in which each entry only builds data ([`value`]): `_rebuild_tensor_v2`
//! gives a record of a storage key, dtype, offset, shape and strides, `OrderedDict` a dict. An
//! instance of a listed data class ([`classes`]: a DTensor's placements, DCP's metadata) is
//! recorded as its class, arguments and state, for the reader of its format to read. Nothing is
//! imported or called; any other global (`os.system`, `builtins.eval`) is refused by name.
//!
//! Why a machine of its own: tjoin must refuse, by name and byte, whatever it does not
//! understand, and no crate is built to. Candle's reader (`candle-core/src/pickle.rs`, read at
//! commit 0391577) knows protocol 2's opcodes only (no FRAME, MEMOIZE, STACK_GLOBAL,
//! SHORT_BINUNICODE or BINBYTES, so a `pickle_protocol=4` file fails); maps six storage classes
//! (float32/64/16, bfloat16, uint8, int64: no int32, int16, int8, bool, and no
//! `_rebuild_tensor_v3`, so no uint16..uint64 or float8); copies a memo entry when it is stored,
//! so a dict memoized before its SETITEMS is fetched empty; reads the ZIP form only; and skips a
//! tensor it cannot read with a line on stderr, a checkpoint converted with tensors missing.
//! serde-pickle's documentation names no way to resolve persistent IDs, through which every
//! tensor of a checkpoint is reached. burn's reader was not checked here (the search index had
//! none of its source); the issue reports it reads uint8 as int8 and unknown storages as
//! float32.
//!
//! The file forms of `torch.save` (`torch/serialization.py`):
//! - ZIP (torch 1.6 and later): `ARCHIVE/data.pkl`, each storage in `ARCHIVE/data/KEY`,
//!   stored uncompressed (64-byte aligned since torch 2.x), and `ARCHIVE/byteorder`. Storages
//!   are read in place, as .npz members are; a compressed storage is refused.
//! - legacy (`_use_new_zipfile_serialization=False`, torch 1.5 and before): five pickles
//!   (a magic number, the protocol version 1001, `sys_info`, the data, the storage keys), then
//!   each storage as a little-endian u64 element count and its bytes.
//! - TAR (torch before 0.4): refused, naming it.

pub mod classes;
pub mod dtensor;
pub mod globals;
mod legacy;
pub mod state;
pub mod value;
mod view;

pub use legacy::read_legacy;
pub mod vm;

use std::collections::HashMap;

use crate::dtype::{ByteOrder, Swaps};
use crate::error::{Error, InputRef, Refusal, Result};
use crate::format::npz::StoredCrc;
use crate::format::zip::{self, DEFLATED, Member, ReadRange, STORED};
use crate::format::{
    Archive, Claim, Contents, Descriptor, Found, Layout, TensorInfo, Writing, byte_count,
};
use crate::messages::excerpt;
use crate::sys::spill::Spill;

use value::TensorRecord;
use vm::{Fault, Pickled};

/// Why a ZIP archive is not a `torch.save` checkpoint.
const NO_DATA_PKL: &str =
    "it is a zip archive without a data.pkl member, which every torch.save archive has";

/// PyTorch's `torch.save` checkpoints: a ZIP archive with a `data.pkl` member, or the legacy
/// form; read without running them, never written.
pub const FORMAT: Descriptor = Descriptor {
    name: "pt",
    extensions: &[".pt", ".pth", ".bin"],
    files: "PyTorch checkpoints",
    magic: Some(|head| head.starts_with(LEGACY_MAGIC) || is_tar(head)),
    looks_like: None,
    reader: Some(|opened, select, _| {
        read_unzipped(opened.file, (opened.len, opened.head), opened.name, select)
    }),
    archive: Some(Archive {
        claims: Claim::Members(|members| archive_of(members).is_some()),
        unclaimed: NO_DATA_PKL,
        read: |file, input, members, select| match archive_of(&members) {
            Some(archive) => read_zip(file, input, &members, &archive, select),
            None => Err(Error::Malformed {
                input: input.clone(),
                format: ".pt",
                reason: NO_DATA_PKL.to_string(),
            }),
        },
    }),
    writing: Writing::ReadOnly {
        instead: "write safetensors (-o model.safetensors), which torch and transformers load \
                  without running code from the file",
    },
    holds_names: true,
    c_order_only: false,
    reads_in_place: true,
    cannot_grow: None,
};

/// Reads a checkpoint that is not in the ZIP form, from any source read by position (a
/// local file, a remote object), its first bytes `head`: the legacy form, a TAR archive
/// refused; with `select`, only that tensor.
pub fn read_unzipped(
    source: &dyn ReadRange,
    (len, head): (u64, &[u8]),
    input: &InputRef,
    select: Option<&str>,
) -> Result<Contents> {
    if is_tar(head) {
        return Err(tar_refused(input));
    }
    read_legacy(source, len, input, select)
}

/// How messages name the format.
const CHECKPOINT: &str = "PyTorch checkpoint";

/// The first bytes of a legacy checkpoint: `PROTO 2`, then `LONG1` of torch's magic number
/// 0x1950a86a20f9469cfc6c.
pub const LEGACY_MAGIC: &[u8] = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19";

/// The version the legacy form writes after its magic number.
const LEGACY_PROTOCOL: i128 = 1001;

/// Whether the first bytes are those of a TAR archive (`ustar` at byte 257).
pub fn is_tar(head: &[u8]) -> bool {
    head.get(257..262) == Some(b"ustar")
}

/// The ZIP form's archive folder (`ARCHIVE` of `ARCHIVE/data.pkl`), if `members` are those
/// of a `torch.save` file: the folder of the first record, as torch takes it
/// (`caffe2/serialize/inline_container.cc`), holding a member `data.pkl`, and no `.npy`
/// member (an .npz holds only those). [`read_zip`] refuses records outside that folder, as
/// torch does.
pub fn archive_of(members: &[Member]) -> Option<String> {
    if members.iter().any(|m| m.name.ends_with(".npy")) {
        return None;
    }
    let (folder, _) = members.first()?.name.split_once('/')?;
    let pkl = format!("{folder}/data.pkl");
    members
        .iter()
        .any(|m| m.name == pkl)
        .then(|| folder.to_string())
}

/// Reads the ZIP form, its `members` already listed; with `select`, only that tensor.
pub fn read_zip(
    source: &dyn ReadRange,
    input: &InputRef,
    members: &[Member],
    archive: &str,
    select: Option<&str>,
) -> Result<Contents> {
    let inside = format!("{archive}/");
    if let Some(outside) = members.iter().find(|m| !m.name.starts_with(&inside)) {
        return Err(malformed(
            input,
            format!(
                "its record {} lies outside its archive folder {} (the folder of its first \
                 record, which torch reads): torch refuses such a file (\"file in archive is \
                 not in a subdirectory\"), and a reader that took another folder would read \
                 another model",
                excerpt(&outside.name),
                excerpt(&inside)
            ),
        ));
    }
    let by_name: HashMap<&str, &Member> = members.iter().map(|m| (m.name.as_str(), m)).collect();
    let pickled = run_data_pkl(source, input, &by_name, archive)?;
    let order = byte_order(source, input, &by_name, archive)?;
    let locate = |storage: &value::Storage, unit: u64| -> Result<Located> {
        let name = format!("{archive}/data/{}", storage.key);
        let Some(member) = by_name.get(name.as_str()) else {
            return Err(malformed(
                input,
                format!(
                    "its pickle names the storage {}, but it has no member {}",
                    excerpt(&storage.key),
                    excerpt(&name)
                ),
            ));
        };
        if member.method != STORED || member.compressed != member.size {
            return Err(Error::Unsupported {
                input: input.clone(),
                reason: format!(
                    "its member {} is compressed (zip method {}); torch.save stores storages \
                     uncompressed so that they can be read in place: unzip the file and zip it \
                     again without compression (zip -0), or load and save it with torch",
                    excerpt(&name),
                    member.method
                ),
            });
        }
        let needed = storage.numel.saturating_mul(unit);
        if member.size != needed {
            return Err(malformed(
                input,
                format!(
                    "its member {} holds {} bytes, but its storage counts {} elements of {unit} \
                     byte{}, {needed} bytes",
                    excerpt(&name),
                    member.size,
                    storage.numel,
                    if unit == 1 { "" } else { "s" }
                ),
            ));
        }
        Ok(Located {
            start: member.data_start,
            crc: Some((name, member.crc)),
        })
    };
    let holdings = holdings(&pickled, input)?;
    tensors(holdings, input, select, order, locate, source)
}

/// A `torch.save` archive read as records: its pickle run, and where each storage's bytes lie.
/// What a reader of a format built on `torch.save` (DeepSpeed's ZeRO checkpoints) interprets;
/// no storage's bytes are read.
pub struct Saved {
    /// The pickle, run.
    pub pickled: Pickled,
    /// Whether the archive records big-endian storages.
    pub big_endian: bool,
    /// Each storage member's data start and length, by the storage's key.
    storages: HashMap<String, (u64, u64)>,
    /// Its storage members that are compressed, by key.
    compressed: Vec<String>,
}

impl Saved {
    /// Where the storage `key`'s bytes start in the file and how many there are; `None` if the
    /// archive has no such member.
    pub fn storage(&self, key: &str) -> Option<(u64, u64)> {
        self.storages.get(key).copied()
    }

    /// A pickle's records alone, with no storage: what the unit tests of a reader of records
    /// give it.
    #[cfg(test)]
    pub(crate) fn records_only(pickled: Pickled) -> Saved {
        Saved {
            pickled,
            big_endian: false,
            storages: HashMap::new(),
            compressed: Vec::new(),
        }
    }

    /// Whether the storage `key` is compressed, so cannot be read in place.
    pub fn is_compressed(&self, key: &str) -> bool {
        self.compressed.iter().any(|k| k == key)
    }
}

/// Reads the ZIP form of the `torch.save` file `source` of `len` bytes as records (see
/// [`Saved`]). Errors name `input`.
pub fn read_saved(source: &dyn ReadRange, len: u64, input: &InputRef) -> Result<Saved> {
    let members = zip::read_directory(source, len).map_err(|reason| malformed(input, reason))?;
    let Some(archive) = archive_of(&members) else {
        return Err(malformed(input, NO_DATA_PKL.to_string()));
    };
    let by_name: HashMap<&str, &Member> = members.iter().map(|m| (m.name.as_str(), m)).collect();
    let pickled = run_data_pkl(source, input, &by_name, &archive)?;
    let big_endian = byte_order(source, input, &by_name, &archive)? == ByteOrder::Big;
    let prefix = format!("{archive}/data/");
    let mut storages = HashMap::new();
    let mut compressed = Vec::new();
    for member in &members {
        let Some(key) = member.name.strip_prefix(&prefix) else {
            continue;
        };
        if member.method != STORED || member.compressed != member.size {
            compressed.push(key.to_string());
        }
        storages.insert(key.to_string(), (member.data_start, member.size));
    }
    Ok(Saved {
        pickled,
        big_endian,
        storages,
        compressed,
    })
}

/// Reads and runs the archive's `ARCHIVE/data.pkl`, which must end at its `STOP`.
fn run_data_pkl(
    source: &dyn ReadRange,
    input: &InputRef,
    by_name: &HashMap<&str, &Member>,
    archive: &str,
) -> Result<Pickled> {
    let pkl_name = format!("{archive}/data.pkl");
    let pkl = by_name[pkl_name.as_str()];
    let bytes = read_member(source, pkl, input, &crate::limits::PICKLE)?;
    let pickled = run_pickle(&bytes, input, &pkl_name, 0)?;
    if pickled.len != bytes.len() {
        return Err(malformed(
            input,
            format!(
                "its member {} has {} bytes after the pickle's STOP",
                excerpt(&pkl_name),
                bytes.len() - pickled.len
            ),
        ));
    }
    Ok(pickled)
}

/// The byte order the archive's `ARCHIVE/byteorder` records (little when it has none).
fn byte_order(
    source: &dyn ReadRange,
    input: &InputRef,
    by_name: &HashMap<&str, &Member>,
    archive: &str,
) -> Result<ByteOrder> {
    Ok(match by_name.get(format!("{archive}/byteorder").as_str()) {
        None => ByteOrder::Little,
        Some(member) => {
            let text = read_member(source, member, input, &BYTEORDER)?;
            match text.as_slice() {
                b"little" => ByteOrder::Little,
                b"big" => ByteOrder::Big,
                other => {
                    return Err(malformed(
                        input,
                        format!(
                            "its byteorder member says {}, not little or big",
                            excerpt(&String::from_utf8_lossy(other))
                        ),
                    ));
                }
            }
        }
    })
}

/// Where a storage's bytes start in the file, and its member's CRC-32 (the ZIP form).
struct Located {
    start: u64,
    crc: Option<(String, u32)>,
}

fn holdings(pickled: &Pickled, input: &InputRef) -> Result<state::Holdings> {
    state::holdings(pickled).map_err(|why| Error::Unsupported {
        input: input.clone(),
        reason: why,
    })
}

/// The tensors of `holdings` as a format's reader returns them; with `select`, only that one.
fn tensors(
    holdings: state::Holdings,
    input: &InputRef,
    select: Option<&str>,
    order: ByteOrder,
    locate: impl Fn(&value::Storage, u64) -> Result<Located>,
    source: &dyn ReadRange,
) -> Result<Contents> {
    // The strided views' elements, gathered in order.
    let mut spill = Spill::default();
    let state::Holdings {
        tensors: records,
        skipped,
        unreadable,
        distributed: mut layouts,
    } = holdings;
    let mut notes = Vec::new();
    if let Some(wanted) = select {
        if let Some((name, why)) = unreadable.iter().find(|(n, _)| n == wanted) {
            return Err(unreadable_error(input, name, why));
        }
        if !records.iter().any(|(n, _)| n.as_deref() == Some(wanted)) {
            let names: Vec<String> = records.iter().filter_map(|(n, _)| n.clone()).collect();
            return Err(crate::format::no_such_tensor(input, wanted, &names));
        }
    } else if let Some((name, why)) = unreadable.first() {
        return Err(unreadable_error(input, name, why));
    }
    let mut left_out = Vec::new();
    if select.is_none() && !skipped.is_empty() {
        left_out.push(match skipped.len() {
            1 => "1 value that is not a tensor".to_string(),
            n => format!("{n} values that are not tensors"),
        });
        notes.extend(skipped.iter().map(|s| format!("skipped {s}")));
    }
    // Tensors that share a storage (tied weights) are each written whole.
    let mut by_storage: HashMap<&str, Vec<&str>> = HashMap::new();
    for (name, record) in &records {
        by_storage
            .entry(&record.storage.key)
            .or_default()
            .push(name.as_deref().unwrap_or("the tensor"));
    }
    let mut found = Vec::new();
    let mut distributed = Vec::new();
    layouts.reverse();
    for (at, (name, record)) in records.iter().enumerate() {
        let layout = match layouts.last() {
            Some((place, _)) if *place == at => layouts.pop().map(|(_, layout)| layout),
            _ => None,
        };
        if select.is_some_and(|wanted| name.as_deref() != Some(wanted)) {
            continue;
        }
        if let Some(layout) = layout {
            distributed.push((found.len(), layout));
        }
        let tensor_ref = InputRef {
            tensor: name.as_deref().map(Into::into),
            ..input.clone()
        };
        let described = describe(&tensor_ref, record, order, &locate, (source, &mut spill))?;
        if described.file.is_some() {
            notes.push(format!(
                "{} is a strided view (shape {}, strides {}): its elements were gathered in \
                 order, as tensor.contiguous() holds them",
                name.as_deref()
                    .map_or("the tensor".into(), |n| format!("`{}`", excerpt(n))),
                crate::messages::shape_text(&record.shape),
                crate::messages::shape_text(&record.stride)
            ));
        }
        found.push(described);
        if let Some(sharing) = by_storage.get(&*record.storage.key)
            && sharing.len() > 1
            && sharing.first().copied() == name.as_deref()
        {
            let names: Vec<String> = sharing
                .iter()
                .map(|n| format!("`{}`", excerpt(n)))
                .collect();
            notes.push(format!(
                "{} share one storage (tied weights, or views of one tensor): each is written \
                 as a tensor of its own",
                names.join(", ")
            ));
        }
    }
    if found.is_empty() && select.is_none() {
        return Err(Error::Unsupported {
            input: input.clone(),
            reason: "it holds no tensor".to_string(),
        });
    }
    Ok(Contents {
        tensors: found,
        metadata: Some(vec![("format".to_string(), "pt".to_string())]),
        notes,
        left_out,
        format: None,
        distributed,
    })
}

fn unreadable_error(input: &InputRef, name: &str, why: &str) -> Error {
    Error::Unsupported {
        input: InputRef {
            tensor: Some(name.into()),
            ..input.clone()
        },
        reason: format!("it is {why}"),
    }
}

/// The bytes from the first element of the view `record` to the end of its last (of
/// `elements` elements of `itemsize` bytes), refused unless all are inside its storage's
/// view of `view_bytes` bytes.
fn view_span(
    input: &InputRef,
    record: &TensorRecord,
    (elements, itemsize): (u64, u64),
    view_bytes: u64,
) -> Result<u64> {
    let shape_text = crate::messages::shape_text(&record.shape);
    let start = record.offset.checked_mul(itemsize);
    let reach = if elements == 0 {
        Some(0)
    } else {
        record
            .shape
            .iter()
            .zip(&record.stride)
            .try_fold(1u64, |n, (&d, &s)| n.checked_add((d - 1).checked_mul(s)?))
            .and_then(|n| n.checked_mul(itemsize))
    };
    match (start, reach) {
        (Some(start), Some(reach)) if start.checked_add(reach).is_some_and(|e| e <= view_bytes) => {
            Ok(reach)
        }
        _ => Err(malformed(
            input,
            format!(
                "its view (offset {}, shape {shape_text}, strides {}) reaches past the end \
                     of its storage {} of {} bytes",
                record.offset,
                crate::messages::shape_text(&record.stride),
                excerpt(&record.storage.key),
                view_bytes
            ),
        )),
    }
}

/// What the tensor `record` is as a format's reader describes it: where its bytes are, in
/// which layout.
fn describe(
    input: &InputRef,
    record: &TensorRecord,
    order: ByteOrder,
    locate: &impl Fn(&value::Storage, u64) -> Result<Located>,
    (source, spill): (&dyn ReadRange, &mut Spill),
) -> Result<Found> {
    let unsupported = |reason: String| Error::Unsupported {
        input: input.clone(),
        reason,
    };
    let Some(dtype) = record.dtype.dtype() else {
        return Err(unsupported(format!(
            "it is of torch.{}, which neither safetensors nor numpy has a type for; convert it \
             (tensor.to(torch.float32), or dequantize() a quantized one) and save it again",
            record.dtype.name()
        )));
    };
    let itemsize = dtype.itemsize();
    let storage = &record.storage;
    let unit = storage.dtype.map_or(1, |d| d.itemsize());
    let located = locate(storage, unit)?;
    let shape_text = crate::messages::shape_text(&record.shape);
    let elements = record.shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d));
    let data_len = byte_count(&record.shape, itemsize);
    let (Some(elements), Some(data_len)) = (elements, data_len) else {
        return Err(malformed(
            input,
            format!("its shape {shape_text} holds more bytes than 64 bits count"),
        ));
    };
    // Bytes from the start of the view of the storage, and how many the view has.
    let view_start = storage.view_offset.saturating_mul(unit);
    let view_bytes = storage.view_numel.saturating_mul(unit);
    let span = view_span(input, record, (elements, itemsize), view_bytes)?;
    let mut data_offset = located.start + view_start + record.offset * itemsize;
    let swaps = match (order, dtype.swap_width()) {
        (ByteOrder::Big, Some(width)) => Swaps::Uniform(width),
        _ => Swaps::default(),
    };
    let mut file = None;
    let layout = match layout_of(&record.shape, &record.stride) {
        Some(layout) => layout,
        None => {
            // A view torch reads (expand, narrow, a step slice, a permute, a chunk piece):
            // its elements in C order, as tensor.contiguous() holds them, in a copy of its own.
            let view = view::View {
                start: data_offset,
                span,
                shape: &record.shape,
                stride: &record.stride,
                itemsize,
            };
            let (spilled, at) = view::gather(input, source, spill, &view)?;
            (file, data_offset) = (Some(spilled), at);
            Layout::C
        }
    };
    // The CRC-32 of a member can be checked only by a read of the whole member in order.
    let whole = file.is_none()
        && view_start == 0
        && record.offset == 0
        && data_len == storage.numel.saturating_mul(unit)
        && layout == Layout::C;
    let stored_crc = match located.crc {
        Some((member, crc)) if whole && data_len > 0 => {
            Some(Box::new(StoredCrc::new(member, crc, CHECKPOINT)))
        }
        _ => None,
    };
    Ok(Found {
        name: input.tensor.as_deref().map(str::to_string),
        info: TensorInfo {
            byte_order: dtype.byte_order_or_na(order),
            dtype,
            swaps,
            shape: record.shape.clone().into_boxed_slice(),
            layout,
            data_offset,
            data_len,
        },
        file: file.map(crate::format::OwnData::File),
        stored_crc,
    })
}

/// C when the strides are a row-major tensor's, Fortran when a column-major's (a transposed
/// matrix); `None` otherwise. Dimensions of one element have any stride in torch.
fn layout_of(shape: &[u64], stride: &[u64]) -> Option<Layout> {
    if shape.contains(&0) {
        return Some(Layout::C);
    }
    let matches = |axes: &mut dyn Iterator<Item = usize>| {
        let mut expected = 1u64;
        for axis in axes {
            if shape[axis] == 1 {
                continue;
            }
            if stride[axis] != expected {
                return false;
            }
            expected = expected.saturating_mul(shape[axis]);
        }
        true
    };
    if matches(&mut (0..shape.len()).rev()) {
        Some(Layout::C)
    } else if matches(&mut (0..shape.len())) {
        Some(Layout::Fortran)
    } else {
        None
    }
}

/// The limit on the ZIP form's `byteorder` record.
const BYTEORDER: crate::sys::Limit = crate::sys::Limit {
    bytes: 16,
    of: "a checkpoint's byteorder record",
    advice: "torch writes `little` or `big` there",
};

/// Reads a stored (or deflated) member whole, up to `limit`.
fn read_member(
    source: &dyn ReadRange,
    member: &Member,
    input: &InputRef,
    limit: &crate::sys::Limit,
) -> Result<Vec<u8>> {
    if member.size > limit.bytes || member.compressed > limit.bytes {
        let why = limit.exceeded();
        return Err(Error::InputIo {
            action: "read",
            input: input.clone(),
            source: std::io::Error::new(
                why.kind(),
                format!("its member {}: {why}", excerpt(&member.name)),
            ),
        });
    }
    let len = usize::try_from(member.size).unwrap_or(usize::MAX);
    match member.method {
        STORED if member.compressed == member.size => {
            let mut bytes = vec![0; len];
            source
                .read_range(member.data_start, &mut bytes)
                .map_err(|e| input.io_error("read", e))?;
            check_crc(&bytes, member, input)?;
            Ok(bytes)
        }
        DEFLATED => {
            use std::io::Read;
            let mut raw = vec![0; usize::try_from(member.compressed).unwrap_or(usize::MAX)];
            source
                .read_range(member.data_start, &mut raw)
                .map_err(|e| input.io_error("read", e))?;
            let mut bytes = Vec::with_capacity(len);
            flate2::read::DeflateDecoder::new(raw.as_slice())
                .take(member.size + 1)
                .read_to_end(&mut bytes)
                .map_err(|e| malformed(input, zip::inflate_error(&member.name, e)))?;
            if bytes.len() as u64 != member.size {
                return Err(malformed(
                    input,
                    format!(
                        "its member {} inflates to {}{} bytes but declares {}",
                        excerpt(&member.name),
                        if bytes.len() as u64 > member.size {
                            "more than "
                        } else {
                            ""
                        },
                        bytes.len(),
                        member.size
                    ),
                ));
            }
            check_crc(&bytes, member, input)?;
            Ok(bytes)
        }
        method => Err(Error::Unsupported {
            input: input.clone(),
            reason: format!(
                "its member {} is compressed with zip method {method}, which tjoin does not \
                 read; torch.save stores its members uncompressed",
                excerpt(&member.name)
            ),
        }),
    }
}

fn check_crc(bytes: &[u8], member: &Member, input: &InputRef) -> Result<()> {
    let computed = crc32fast::hash(bytes);
    if computed == member.crc {
        return Ok(());
    }
    Err(malformed(
        input,
        format!(
            "its member {} fails its CRC-32 check (computed {computed:08x}, recorded {:08x}); \
             the file is damaged",
            excerpt(&member.name),
            member.crc
        ),
    ))
}

/// Runs a pickle, turning a fault into an error that names the input, the member and the
/// byte of the opcode at fault.
fn run_pickle(bytes: &[u8], input: &InputRef, member: &str, base: u64) -> Result<Pickled> {
    vm::run(bytes, vm::LIMITS).map_err(|mut fault| {
        fault.at += base;
        fault_error(input, member, &fault)
    })
}

fn fault_error(input: &InputRef, member: &str, fault: &Fault) -> Error {
    let place = if member.is_empty() {
        "its pickle".to_string()
    } else {
        format!("the pickle {}", excerpt(member))
    };
    if fault.is_damage() {
        return malformed(input, format!("{place}, {}", fault.describe()));
    }
    Error::Refused(vec![Refusal {
        headline: format!("{input}: {place}, {}", fault.describe()),
        details: Vec::new(),
        hint: Some(
            "tjoin runs no code from a file: it reads tensors, dicts, lists and plain values, \
             what torch.load(weights_only=True) allows; torch.save(model.state_dict()) writes \
             nothing else"
                .to_string(),
        ),
    }])
}

fn malformed(input: &InputRef, reason: String) -> Error {
    Error::Malformed {
        input: input.clone(),
        format: CHECKPOINT,
        reason,
    }
}

/// The refusal of a TAR checkpoint.
pub fn tar_refused(input: &InputRef) -> Error {
    Error::Unsupported {
        input: input.clone(),
        reason: "it is a TAR archive: the form torch.save wrote before PyTorch 0.4, which \
                 tjoin does not read; load it with torch and save it again (torch.save, or \
                 safetensors' save_file)"
            .to_string(),
    }
}

#[cfg(test)]
mod tests;
