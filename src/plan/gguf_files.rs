//! The plan of GGUF outputs, from the input set's headers alone: a merge is one file with
//! the first file's keys but `split.*` and every tensor in order; a split cuts the tensors
//! into files by count or by size, as gguf-split does, the first file with every key and
//! the `split.*` keys after them, the others with only those. Each file is its header, then
//! each tensor's bytes padded with zeros to the alignment: the layout gguf-py and ggml write,
//! so that a file they wrote, split and merged again, is the same file byte for byte.

use crate::error::{Error, Result};
use crate::format::gguf::header::{
    ALIGNMENT_KEY, DEFAULT_ALIGNMENT, Placed, TensorInfo, encode_header, encode_int_kv,
    packed_offsets,
};
use crate::format::gguf::types::ValueType;
use crate::input::gguf_set::{GgufSet, SPLIT_COUNT, SPLIT_NO, SPLIT_TENSORS};

/// One GGUF output file, planned.
#[derive(Debug)]
pub struct OutFile {
    /// Its header, up to the padding before the data section.
    pub header: Vec<u8>,
    /// The zeros between the header and the data section.
    pub header_pad: u64,
    /// Its tensors: their indexes in the set's order, each with the zeros after its data.
    pub tensors: Vec<(usize, u64)>,
    /// Its length in bytes.
    pub len: u64,
}

/// How a split cuts the tensors into files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitBy {
    /// At most this many tensors a file (`--max-tensors`).
    Tensors(u64),
    /// At most this many bytes of tensor data a file, padding included, unless one tensor
    /// alone is larger (`--max-shard-size`).
    Bytes(u64),
}

/// The most files of a set: `split.count` is a uint16.
pub const MAX_FILES: u64 = u16::MAX as u64;

/// The merge of `set` into one file.
pub fn merge(set: &GgufSet) -> Result<OutFile> {
    let first = &set.first().header;
    let kvs: Vec<&[u8]> = first
        .kvs
        .iter()
        .filter(|kv| !kv.key.starts_with("split."))
        .map(|kv| &kv.raw[..])
        .collect();
    let infos: Vec<&TensorInfo> = set.tensors().map(|t| t.info).collect();
    let indexes: Vec<usize> = (0..infos.len()).collect();
    out_file(first.version, &kvs, &infos, &indexes, first.alignment)
}

/// The files of `set` split by `by`, in order.
pub fn split(set: &GgufSet, by: SplitBy) -> Result<Vec<OutFile>> {
    let first = &set.first().header;
    let alignment = first.alignment;
    let infos: Vec<&TensorInfo> = set.tensors().map(|t| t.info).collect();
    let groups = groups(&infos, by, alignment);
    let count = groups.len() as u64;
    if count > MAX_FILES {
        return Err(Error::refused(
            format!(
                "the split would make {count} files; a GGUF set has at most {MAX_FILES} \
                 (`split.count` is a uint16)"
            ),
            "raise --max-tensors or --max-shard-size",
        ));
    }
    let total = i32::try_from(infos.len()).map_err(|_| {
        Error::refused(
            format!(
                "the input has {} tensors; `split.tensors.count` is an int32",
                infos.len()
            ),
            "a GGUF set cannot hold that many tensors",
        )
    })?;
    let mut files = Vec::with_capacity(groups.len());
    for (no, indexes) in groups.iter().enumerate() {
        let split_keys = [
            encode_int_kv(SPLIT_NO, ValueType::UInt16, no as i64),
            encode_int_kv(SPLIT_COUNT, ValueType::UInt16, count as i64),
            encode_int_kv(SPLIT_TENSORS, ValueType::Int32, total as i64),
        ];
        let mut kvs: Vec<&[u8]> = Vec::new();
        for kv in &first.kvs {
            let kept = match no {
                0 => !kv.key.starts_with("split."),
                // Later files read with ggml's default alignment unless they say another.
                _ => kv.key == ALIGNMENT_KEY && alignment != DEFAULT_ALIGNMENT,
            };
            if kept {
                kvs.push(&kv.raw);
            }
        }
        kvs.extend(split_keys.iter().map(|kv| &kv[..]));
        files.push(out_file(first.version, &kvs, &infos, indexes, alignment)?);
    }
    Ok(files)
}

/// The tensors (by index) of each file of a split: never an empty file, but one file for an
/// input without tensors.
fn groups(infos: &[&TensorInfo], by: SplitBy, alignment: u64) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = vec![Vec::new()];
    let mut bytes = 0u64;
    for (index, info) in infos.iter().enumerate() {
        let padded = info
            .bytes
            .checked_next_multiple_of(alignment)
            .unwrap_or(u64::MAX);
        let current = groups.last().map_or(0, Vec::len);
        let full = current > 0
            && match by {
                SplitBy::Tensors(n) => current as u64 >= n,
                SplitBy::Bytes(n) => bytes.saturating_add(padded) > n,
            };
        if full {
            groups.push(Vec::new());
            bytes = 0;
        }
        bytes = bytes.saturating_add(padded);
        if let Some(group) = groups.last_mut() {
            group.push(index);
        }
    }
    groups
}

/// One file: its header with `kvs` and the tensors `indexes` of `infos` packed in order.
fn out_file(
    version: u32,
    kvs: &[&[u8]],
    infos: &[&TensorInfo],
    indexes: &[usize],
    alignment: u64,
) -> Result<OutFile> {
    let too_big = || {
        Error::refused(
            "the output's tensors add up to more than 2^64 bytes",
            "split it into more files",
        )
    };
    let chosen: Vec<&TensorInfo> = indexes.iter().map(|&i| infos[i]).collect();
    let (offsets, data_len) = packed_offsets(&chosen, alignment).ok_or_else(too_big)?;
    let placed: Vec<Placed<'_>> = chosen
        .iter()
        .zip(&offsets)
        .map(|(info, &offset)| Placed { info, offset })
        .collect();
    let header = encode_header(version, kvs, &placed);
    let header_len = header.len() as u64;
    let data_offset = header_len
        .checked_next_multiple_of(alignment)
        .ok_or_else(too_big)?;
    let tensors = indexes
        .iter()
        .zip(&chosen)
        .map(|(&index, info)| {
            let pad = info.bytes.next_multiple_of(alignment) - info.bytes;
            (index, pad)
        })
        .collect();
    Ok(OutFile {
        header,
        header_pad: data_offset - header_len,
        tensors,
        len: data_offset.checked_add(data_len).ok_or_else(too_big)?,
    })
}
