//! A strided view of a checkpoint's storage (torch's expand, narrow, step slices, permutes,
//! the `torch.chunk` pieces tensor-parallel scripts save per rank), gathered in C order into
//! the spill file by the copy engine's walk: byte for byte what `tensor.contiguous()` holds.

use std::fs::File;
use std::sync::Arc;

use crate::error::{Error, InputRef, Result};
use crate::format::zip::ReadRange;
use crate::sys::spill::Spill;

/// A strided view of a storage: its first element's byte offset in the file, the bytes from
/// there to the end of its last element, its shape and strides (in elements).
pub(super) struct View<'a> {
    pub start: u64,
    pub span: u64,
    pub shape: &'a [u64],
    pub stride: &'a [u64],
    pub itemsize: u64,
}

/// Bytes gathered per write into the spill file.
const GATHER_CHUNK: u64 = 1 << 20;
/// The most bytes a view that repeats its storage's elements is gathered into.
const REPEATED_LIMIT: u64 = 256 << 20;

/// Gathers the elements of `view` in `source` in C order into `spill` by the copy engine's
/// walk ([`crate::format::walk::Walk`]): byte for byte what `tensor.contiguous()` holds.
/// Returns the spill file and where the elements start in it. The caller checked that the
/// view stays inside its storage. A local file's view is mapped; another source's (bytes in
/// memory) is read whole, up to [`READ_LIMIT`].
pub(super) fn gather(
    input: &InputRef,
    source: &dyn ReadRange,
    spill: &mut Spill,
    view: &View,
) -> Result<(Arc<File>, u64)> {
    let elements: u64 = view.shape.iter().product();
    let bytes = elements * view.itemsize;
    // A view that repeats its elements (stride 0, as expand makes) gathers into more bytes
    // than the file holds: a few bytes could otherwise ask for terabytes of copy.
    if bytes > view.span && bytes > REPEATED_LIMIT {
        return Err(Error::Unsupported {
            input: input.clone(),
            reason: format!(
                "it is a view of shape {} with strides {} that repeats {} bytes of its \
                 storage into {bytes} bytes; tjoin gathers a view that repeats its elements \
                 up to {REPEATED_LIMIT} bytes: save tensor.contiguous() instead",
                crate::messages::shape_text(view.shape),
                crate::messages::shape_text(view.stride),
                view.span
            ),
        });
    }
    let spilled = spill.file(input)?;
    if let Some(free) = crate::sys::free_space(&spilled)
        && free < bytes
    {
        return Err(input.io_error(
            "make a temporary copy of",
            std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                format!(
                    "it is a strided view whose {bytes} bytes tjoin gathers into a temporary \
                     copy, more than the {free} free in the temporary folder (TMPDIR): set \
                     TMPDIR to a folder with room"
                ),
            ),
        ));
    }
    let region = Span::of(input, source, view)?;
    // A dimension of one element is never stepped along: its stride, which torch leaves
    // free, is taken as 0 so that the walk's arithmetic stays inside the span.
    let strides: Vec<u64> = view
        .shape
        .iter()
        .zip(view.stride)
        .map(|(&d, &s)| if d > 1 { s * view.itemsize } else { 0 })
        .collect();
    let per_write = (GATHER_CHUNK / view.itemsize).max(1);
    let size = view.itemsize as usize;
    let mut walk = crate::format::walk::Walk::new(view.shape, &strides, 0);
    let mut out = Vec::new();
    let mut writer = spill.writer(input)?;
    let failed = |e| input.io_error("make a temporary copy of", e);
    // Read in C order, a view whose every stride steps past all the dimensions after it
    // (narrow, step slices, chunk pieces) moves only forward through its storage: the pages
    // behind the walk are released as it goes, so that what stays resident is bounded
    // however large the storage.
    let forward = ascending(view.shape, &strides, view.itemsize);
    let mut done = 0;
    while done < elements {
        let count = per_write.min(elements - done);
        out.clear();
        walk.gather(region.bytes(), size, count, &mut out);
        writer.write(&out).map_err(failed)?;
        done += count;
        if forward && let Span::Mapped(region) = &region {
            region.release(0, walk.position() as usize);
        }
    }
    let (at, _) = writer.finish().map_err(failed)?;
    Ok((spilled, at))
}

/// The most bytes of a view read into memory from a source that is not a local file.
const READ_LIMIT: u64 = 256 << 20;

/// A view's bytes: mapped from a local file, or read from another source.
enum Span {
    Mapped(crate::sys::Region),
    Read(Vec<u8>),
}

impl Span {
    fn of(input: &InputRef, source: &dyn ReadRange, view: &View) -> Result<Span> {
        if let Some(file) = source.file() {
            let region = crate::sys::Region::map(file, view.start, view.span)
                .map_err(|e| input.io_error("map", e))?;
            return Ok(Span::Mapped(region));
        }
        let len = usize::try_from(view.span)
            .ok()
            .filter(|_| view.span <= READ_LIMIT);
        let Some(len) = len else {
            return Err(Error::Unsupported {
                input: input.clone(),
                reason: format!(
                    "it is a strided view spanning {} bytes of its storage; tjoin gathers a \
                     view spanning more than {READ_LIMIT} bytes from a local file only: copy \
                     the file to a local disk",
                    view.span
                ),
            });
        };
        let mut bytes = vec![0; len];
        source
            .read_range(view.start, &mut bytes)
            .map_err(|e| input.io_error("read", e))?;
        Ok(Span::Read(bytes))
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Span::Mapped(region) => region.bytes(),
            Span::Read(bytes) => bytes,
        }
    }
}

/// Whether walking `shape` in C order by byte `strides` (0 for dimensions of one element)
/// only ever moves forward: each stride reaches past the last element of the dimensions after
/// it.
fn ascending(shape: &[u64], strides: &[u64], itemsize: u64) -> bool {
    let mut reach = itemsize;
    for (&d, &s) in shape.iter().zip(strides).rev() {
        if d <= 1 {
            continue;
        }
        if s < reach {
            return false;
        }
        reach = s.saturating_mul(d - 1).saturating_add(reach);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_view_is_gathered_from_a_local_file_only() {
        let input = InputRef {
            position: 1,
            location: std::path::Path::new("model.pt").into(),
            tensor: None,
        };
        let view = |span| View {
            start: 0,
            span,
            shape: &[2],
            stride: &[1],
            itemsize: 1,
        };
        let bytes: &[u8] = &[1, 2, 3];
        let read = Span::of(&input, &bytes, &view(2)).ok().unwrap();
        assert_eq!(read.bytes(), &[1, 2]);
        // Refused before a byte is read or allocated: the source could not even serve it.
        let why = Span::of(&input, &bytes, &view(READ_LIMIT + 1))
            .err()
            .unwrap();
        assert!(why.to_string().contains("from a local file only"), "{why}");
    }
}
