//! Writes straight from an input's memory map, in pieces, releasing the pages behind.

use std::fs::File;

use super::{BUFFER, RELEASE_BUDGET};
use crate::error::{Error, InputRef, Result};
use crate::format::Sink;
use crate::sys::{self, Region};

/// Writes `len` bytes of `file` from `offset` to `out` from a map of them, in pieces,
/// releasing the pages behind.
pub(super) fn write_from_map(
    out: &mut dyn Sink,
    name: &InputRef,
    file: &File,
    offset: u64,
    len: u64,
) -> Result<()> {
    let region = Region::map(file, offset, len).map_err(|e| name.io_error("map", e))?;
    let bytes = region.bytes();
    for start in (0..bytes.len()).step_by(RELEASE_BUDGET as usize) {
        let end = (start + RELEASE_BUDGET as usize).min(bytes.len());
        write_in_pieces(out, &bytes[start..end])
            .map_err(|e| shrunk_or(e, name, file, offset + len))?;
        region.release(start, end);
    }
    Ok(())
}

/// The error of a failed write from the map of input `name`'s `file`: that the input is now
/// shorter than `end`, if it is (Linux fails a write from a map's lost pages with EFAULT,
/// which would otherwise read as the output's fault), else `error` itself.
pub(super) fn shrunk_or(error: Error, name: &InputRef, file: &File, end: u64) -> Error {
    sys::shrank(file, end).map_or(error, |why| name.io_error("read", why))
}

/// Writes mapped bytes in pieces of `BUFFER`: the kernel copies 1 MiB from a map faster
/// than 16 MiB at a time, which measured 50% slower (benches/README.md).
#[inline]
pub(super) fn write_in_pieces(out: &mut dyn Sink, bytes: &[u8]) -> Result<()> {
    for piece in bytes.chunks(BUFFER) {
        let written = out.write_all(piece);
        written.map_err(|e| Error::io("write the output", out.name(), e))?;
    }
    Ok(())
}
