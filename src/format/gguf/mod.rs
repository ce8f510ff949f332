//! GGUF, llama.cpp's format: keys and values, then tensor infos, then the data section.
//! `header` parses and encodes the header from bytes; `types` holds ggml's types. This
//! module reads a header from a file (the one driver that reads more bytes when the parser
//! asks), checks every tensor's data against the file, and declares what tjoin can do with
//! GGUF files: read their plain tensors into a join (`FILE:NAME` to `.npy`, a whole file to
//! safetensors); GGUF to GGUF (merge and split, quantized tensors included) is
//! `flow::gguf`'s, which `-o *.gguf` and `tjoin split` choose.

pub mod header;
pub mod types;

use std::fs::File;
use std::path::Path;

use super::{Contents, Descriptor, Found, Layout, Opened, TensorInfo, Writing};
use crate::dtype::{ByteOrder, Swaps};
use crate::error::{Error, InputRef, Result};
pub use header::{Header, Parsed, parse_header};

/// GGUF's descriptor. It reads plain tensors into joins; writing GGUF is the GGUF flow's.
pub const FORMAT: Descriptor = Descriptor {
    name: "gguf",
    extensions: &[".gguf"],
    files: "GGUF files",
    magic: Some(|head| head.starts_with(header::MAGIC)),
    looks_like: None,
    reader: Some(|opened, select, _| read(opened, select)),
    archive: None,
    writing: Writing::ReadOnly {
        instead: "a join writes GGUF only from GGUF inputs, carried as they are (tjoin \
                  model-00001-of-00003.gguf -o model.gguf); write .npy or .safetensors \
                  otherwise",
    },
    holds_names: true,
    c_order_only: true,
    reads_in_place: true,
    cannot_grow: Some("a GGUF header lists every tensor's offset"),
};

/// Whether `path` names a GGUF file by its extension.
pub fn is_gguf_name(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
}

/// The first bytes read of a header; more are read when the parser asks.
const FIRST_READ: u64 = 1 << 20;

/// Reads and checks the header of the GGUF file `file`, `len` bytes long, that messages
/// call `name`: every tensor's data must lie inside the file, no two overlapping.
pub fn read_header(file: &File, len: u64, name: &InputRef) -> Result<Header> {
    let malformed = |reason: String| Error::Malformed {
        input: name.clone(),
        format: ".gguf",
        reason,
    };
    let mut want = len.min(FIRST_READ);
    let mut bytes = Vec::new();
    let header = loop {
        bytes.resize(want as usize, 0);
        crate::sys::read_exact_at(file, &mut bytes, 0)
            .map_err(|e| name.io_error("read the header of", e))?;
        match parse_header(&bytes, len).map_err(malformed)? {
            Parsed::Header(header) => break header,
            // Reading at least twice as much each time keeps a long header's reads (and
            // parses) few.
            Parsed::Need(n) => want = n.max(want.saturating_mul(2)).min(len),
        }
    };
    check_data(&header, len).map_err(malformed)?;
    Ok(header)
}

/// Refuses a tensor whose data runs past the file's end or overlaps another's.
pub fn check_data(header: &Header, len: u64) -> std::result::Result<(), String> {
    let mut ranges = Vec::with_capacity(header.tensors.len());
    for info in &header.tensors {
        ranges.push((header::data_range(header, info, len)?, &info.name));
    }
    ranges.sort_by_key(|(range, _)| (range.start, range.end));
    for pair in ranges.windows(2) {
        let ((a, a_name), (b, b_name)) = (&pair[0], &pair[1]);
        if b.start < a.end && !b.is_empty() && !a.is_empty() {
            return Err(format!(
                "tensors `{a_name}` (bytes {}..{}) and `{b_name}` (bytes {}..{}) overlap",
                a.start, a.end, b.start, b.end
            ));
        }
    }
    Ok(())
}

/// Reads a GGUF file's plain tensors for a join (numpy's shape order). A quantized tensor,
/// or a file of a split set, is refused here only when the join reads it: `FILE:NAME` of a
/// plain tensor works in any file, and a whole file is refused naming every quantized
/// tensor in it.
fn read(opened: Opened<'_>, wanted: Option<&str>) -> Result<Contents> {
    let header = read_header(opened.file, opened.len, opened.name)?;
    contents(&header, (opened.len, opened.name), wanted)
}

/// Reads a GGUF file's plain tensors for a join from its first `bytes` (of a file `len`
/// bytes long): the contents, or how many bytes in all its header needs first.
pub fn read_bytes(
    bytes: &[u8],
    len: u64,
    name: &InputRef,
    wanted: Option<&str>,
) -> Result<std::result::Result<Contents, u64>> {
    let malformed = |reason: String| Error::Malformed {
        input: name.clone(),
        format: ".gguf",
        reason,
    };
    let header = match parse_header(bytes, len).map_err(malformed)? {
        Parsed::Header(header) => header,
        // At least twice as much each time, as `read_header` does.
        Parsed::Need(n) => return Ok(Err(n.max((bytes.len() as u64).saturating_mul(2)).min(len))),
    };
    check_data(&header, len).map_err(malformed)?;
    contents(&header, (len, name), wanted).map(Ok)
}

/// The plain tensors of the checked `header` of a file `len` bytes long that messages call
/// `name`, for a join.
fn contents(
    header: &Header,
    (len, name): (u64, &InputRef),
    wanted: Option<&str>,
) -> Result<Contents> {
    if let Some(header::Value::Unsigned(count)) = header.get("split.count")
        && *count > 1
    {
        return Err(Error::Unsupported {
            input: name.clone(),
            reason: format!(
                "it is one file of a GGUF set of {count} (split.count); merge the set into \
                 one GGUF file first (tjoin {} -o model.gguf), then read that",
                name.location
            ),
        });
    }
    let mut tensors = Vec::with_capacity(header.tensors.len());
    let mut quantized = Vec::new();
    for info in &header.tensors {
        let Some(dtype) = info.ggml_type.dtype() else {
            quantized.push(info);
            continue;
        };
        let range = header::data_range(header, info, len).map_err(|reason| Error::Malformed {
            input: name.clone(),
            format: ".gguf",
            reason,
        })?;
        tensors.push(Found {
            name: Some(info.name.clone()),
            info: TensorInfo {
                dtype,
                byte_order: ByteOrder::Little,
                swaps: Swaps::default(),
                shape: info.shape().into_boxed_slice(),
                layout: Layout::C,
                data_offset: range.start,
                data_len: info.bytes,
            },
            file: None,
            stored_crc: None,
        });
    }
    let refused: Vec<_> = quantized
        .iter()
        .filter(|info| wanted.is_none_or(|w| w == info.name))
        .collect();
    if !refused.is_empty() {
        return Err(refuse_quantized(name, &refused));
    }
    Ok(Contents::of_tensors(tensors))
}

/// The refusal of quantized tensors a join was asked to read, naming each and its type.
fn refuse_quantized(input: &InputRef, infos: &[&&header::TensorInfo]) -> Error {
    const SHOWN: usize = 10;
    let mut details: Vec<String> = infos
        .iter()
        .take(SHOWN)
        .map(|info| {
            format!(
                "{} {} {}",
                crate::messages::name(&info.name),
                info.ggml_type.name(),
                crate::messages::shape_text(&info.shape())
            )
        })
        .collect();
    if infos.len() > SHOWN {
        details.push(format!("... and {} more", infos.len() - SHOWN));
    }
    Error::Refused(vec![crate::error::Refusal {
        headline: format!(
            "{input} holds {} quantized tensor{} (blocks of ggml's types), which .npy, .npz, \
             .safetensors and JSON cannot hold:",
            infos.len(),
            if infos.len() == 1 { "" } else { "s" }
        ),
        details,
        hint: Some(
            "read plain tensors one by one (FILE:NAME: F32, F16, BF16, F64 and the integer \
             types), or write GGUF (-o out.gguf), which carries quantized tensors as they are"
                .to_string(),
        ),
    }])
}

#[cfg(test)]
mod tests;
