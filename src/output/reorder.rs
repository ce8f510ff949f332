//! A sink that stores elements in a byte order of their own, for `--append` to a file that
//! is not little-endian (`src/flow/append.rs`): the engine writes little-endian elements.

use crate::dtype::{DType, Swaps, swap_in_place};
use crate::format::Sink;

/// The most bytes held before they are passed on: the engine's buffer's size.
const PENDING: usize = 1 << 20;

/// A sink that stores elements in a byte order of their own: the engine writes little-endian
/// elements, and this reverses `swaps` in each before passing it on (`--append` to a
/// big-endian file keeps the file's order). Elements may arrive split across writes; kernel
/// copies are declined, so that every byte passes through here.
pub struct Reordered<'a> {
    out: &'a mut dyn Sink,
    itemsize: usize,
    swaps: Swaps,
    /// Bytes not yet passed on: at most one buffer's worth, then less than an element.
    pending: Vec<u8>,
}

impl<'a> Reordered<'a> {
    /// Reverses `swaps` in each element of `dtype` written to `out`.
    pub fn new(out: &'a mut dyn Sink, dtype: &DType, swaps: Swaps) -> Reordered<'a> {
        Reordered {
            out,
            itemsize: (dtype.itemsize() as usize).max(1),
            swaps,
            pending: Vec::with_capacity(PENDING),
        }
    }

    /// Fails if the bytes written did not end with a whole element.
    pub fn finish(self) -> std::io::Result<()> {
        if self.pending.is_empty() {
            Ok(())
        } else {
            let why = format!("{} bytes of a last element are missing", self.itemsize);
            Err(std::io::Error::other(why))
        }
    }
}

impl Sink for Reordered<'_> {
    fn write_all(&mut self, mut bytes: &[u8]) -> std::io::Result<()> {
        while !bytes.is_empty() {
            let take = (PENDING - self.pending.len().min(PENDING))
                .max(1)
                .min(bytes.len());
            self.pending.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            let whole = self.pending.len() / self.itemsize * self.itemsize;
            if whole > 0 {
                swap_in_place(&mut self.pending[..whole], self.itemsize, &self.swaps);
                self.out.write_all(&self.pending[..whole])?;
                self.pending.drain(..whole);
            }
        }
        Ok(())
    }

    fn name(&self) -> &std::path::Path {
        self.out.name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reordering_reverses_whole_elements_across_writes() {
        struct Collect(Vec<u8>);
        impl Sink for Collect {
            fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
                self.0.extend_from_slice(bytes);
                Ok(())
            }
            fn name(&self) -> &std::path::Path {
                std::path::Path::new("collected")
            }
        }
        let mut out = Collect(Vec::new());
        let mut sink = Reordered::new(&mut out, &DType::Float32, Swaps::Uniform(4));
        for piece in [&[1u8, 2, 3][..], &[4, 5], &[6, 7, 8, 9, 10, 11, 12]] {
            sink.write_all(piece).unwrap();
        }
        sink.finish().unwrap();
        assert_eq!(out.0, [4, 3, 2, 1, 8, 7, 6, 5, 12, 11, 10, 9]);
        let mut sink = Reordered::new(&mut out, &DType::Float32, Swaps::Uniform(4));
        sink.write_all(&[1, 2]).unwrap();
        assert!(sink.finish().is_err());
    }
}
