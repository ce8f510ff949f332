//! The copy engine: executes a `JoinPlan`, moving the inputs' bytes into the output front to
//! back while reading each input front to back. The only place data moves.
//!
//! - A round with one input (`outer == 1`) is one large copy per input, done inside the
//!   kernel when it can be.
//! - Runs of at least `DIRECT_RUN` bytes are written straight from the memory map.
//! - Smaller runs, byte-swapped runs and gathered (re-laid-out) runs are packed into one
//!   reused buffer and written in large blocks.
//! - Pages behind the read cursor are released every `RELEASE_STEP` bytes, so resident memory
//!   stays bounded however large the inputs are.

use std::fs::File;

use crate::dtype::Swaps;
use crate::error::{Error, Result};
use crate::input::Tensor;
use crate::output::Sink;
use crate::plan::{Gather, InputPlan, JoinPlan};
use crate::source::Region;

/// Size of the reused output buffer.
const BUFFER: usize = 1 << 20;
/// Runs at least this long skip the buffer.
const DIRECT_RUN: u64 = 256 << 10;
/// How many bytes an input's cursor advances between releases of the pages behind it.
const RELEASE_STEP: u64 = 16 << 20;

/// Writes the data of `plan` from `inputs` (one tensor per entry of `plan.inputs`) to `out`.
pub fn execute(plan: &JoinPlan, inputs: &[&Tensor], out: &mut dyn Sink) -> Result<()> {
    let regions = inputs
        .iter()
        .zip(&plan.inputs)
        .map(|(input, p)| {
            Region::map(&input.file, p.data_offset, p.data_len)
                .map_err(|e| input.name.io_error("map", e))
        })
        .collect::<Result<Vec<Region>>>()?;
    let itemsize = plan.dtype.itemsize() as usize;
    let mut sink = Packer::new(out, itemsize);
    if plan.outer == 1 {
        for ((input, p), region) in inputs.iter().zip(&plan.inputs).zip(&regions) {
            sink.whole_input(&input.file, p, region)?;
        }
    } else {
        let mut cursors: Vec<Cursor> = plan.inputs.iter().map(|_| Cursor::default()).collect();
        for round in 0..plan.outer {
            for ((p, region), cursor) in plan.inputs.iter().zip(&regions).zip(&mut cursors) {
                sink.run(p, region, round, cursor)?;
            }
        }
    }
    sink.flush()
}

/// How far the engine has read one input, and where it last released pages.
#[derive(Default)]
struct Cursor {
    read: u64,
    released: u64,
}

impl Cursor {
    /// Advances by `len` bytes and releases the pages behind when a step has passed.
    fn advance(&mut self, len: u64, region: &Region) {
        self.read += len;
        if self.read - self.released >= RELEASE_STEP {
            region.release(self.released as usize, self.read as usize);
            self.released = self.read;
        }
    }
}

/// The output and the buffer that packs small runs.
struct Packer<'a> {
    out: &'a mut dyn Sink,
    itemsize: usize,
    buffer: Vec<u8>,
    capacity: usize,
}

impl<'a> Packer<'a> {
    fn new(out: &'a mut dyn Sink, itemsize: usize) -> Packer<'a> {
        // Whole elements must fit, so that swaps never straddle a flush.
        let itemsize = itemsize.max(1);
        let capacity = BUFFER.max(itemsize);
        Packer {
            out,
            itemsize,
            buffer: Vec::with_capacity(capacity),
            capacity,
        }
    }

    /// Copies all of one input: in the kernel when nothing needs changing, else in pieces.
    fn whole_input(&mut self, file: &File, p: &InputPlan, region: &Region) -> Result<()> {
        if p.gather.is_some() || !p.swaps.is_none() {
            return self.run(p, region, 0, &mut Cursor::default());
        }
        self.flush()?;
        let copied = self
            .out
            .copy_from(file, p.data_offset, p.data_len)
            .map_err(|e| self.write_error(e))?;
        let mut cursor = Cursor {
            read: copied,
            released: copied,
        };
        let rest = &region.bytes()[copied as usize..];
        for piece in rest.chunks(RELEASE_STEP as usize) {
            self.out.write_all(piece).map_err(|e| self.write_error(e))?;
            cursor.advance(piece.len() as u64, region);
        }
        Ok(())
    }

    /// Copies round `round`'s run of one input.
    fn run(
        &mut self,
        p: &InputPlan,
        region: &Region,
        round: u64,
        cursor: &mut Cursor,
    ) -> Result<()> {
        if p.run_bytes == 0 {
            return Ok(());
        }
        if let Some(gather) = &p.gather {
            return self.gathered_run(p, gather, region, round, cursor);
        }
        let start = (round * p.run_bytes) as usize;
        let run = &region.bytes()[start..start + p.run_bytes as usize];
        if p.run_bytes >= DIRECT_RUN && p.swaps.is_none() {
            self.flush()?;
            self.out.write_all(run).map_err(|e| self.write_error(e))?;
        } else {
            self.append(run, &p.swaps)?;
        }
        cursor.advance(p.run_bytes, region);
        Ok(())
    }

    /// Appends `bytes` (whole elements), reversing `swaps` in each element on the way.
    fn append(&mut self, mut bytes: &[u8], swaps: &Swaps) -> Result<()> {
        while !bytes.is_empty() {
            let room = self.capacity - self.buffer.len();
            let take = room.min(bytes.len()) / self.itemsize * self.itemsize;
            if take == 0 {
                self.flush()?;
                continue;
            }
            let start = self.buffer.len();
            self.buffer.extend_from_slice(&bytes[..take]);
            swap_in_place(&mut self.buffer[start..], self.itemsize, swaps);
            bytes = &bytes[take..];
            if self.buffer.len() == self.capacity {
                self.flush()?;
            }
        }
        Ok(())
    }

    /// Copies one run of an input whose layout differs from the output's, element by element.
    fn gathered_run(
        &mut self,
        p: &InputPlan,
        gather: &Gather,
        region: &Region,
        round: u64,
        cursor: &mut Cursor,
    ) -> Result<()> {
        let bytes = region.bytes();
        let itemsize = self.itemsize;
        let base = offset_of(round, &gather.outer_dims, &gather.outer_strides);
        let count: u64 = gather.run_dims.iter().product();
        for index in 0..count {
            let at = (base + offset_of(index, &gather.run_dims, &gather.run_strides)) as usize;
            if self.capacity - self.buffer.len() < itemsize {
                self.flush()?;
            }
            let start = self.buffer.len();
            self.buffer.extend_from_slice(&bytes[at..at + itemsize]);
            swap_in_place(&mut self.buffer[start..], itemsize, &p.swaps);
        }
        // Gathering jumps across the whole input: release all of it now and then.
        cursor.read += p.run_bytes;
        if cursor.read - cursor.released >= RELEASE_STEP {
            region.release(0, bytes.len());
            cursor.released = cursor.read;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if !self.buffer.is_empty() {
            let written = self.out.write_all(&self.buffer);
            written.map_err(|e| self.write_error(e))?;
            self.buffer.clear();
        }
        Ok(())
    }

    fn write_error(&self, e: std::io::Error) -> Error {
        Error::io("write the output", self.out.name(), e)
    }
}

/// The byte offset of the `index`-th element (in C order) of a block with these dims.
fn offset_of(mut index: u64, dims: &[u64], strides: &[u64]) -> u64 {
    let mut offset = 0;
    for (&dim, &stride) in dims.iter().zip(strides).rev() {
        offset += (index % dim) * stride;
        index /= dim;
    }
    offset
}

/// Reverses the byte ranges `swaps` names in every element of `bytes` (whole elements of
/// `itemsize` bytes).
fn swap_in_place(bytes: &mut [u8], itemsize: usize, swaps: &Swaps) {
    match swaps {
        Swaps::None => {}
        Swaps::Uniform(width) => bytes.chunks_exact_mut(*width).for_each(<[u8]>::reverse),
        Swaps::Ranges(ranges) => {
            for element in bytes.chunks_exact_mut(itemsize) {
                for &(offset, width) in ranges {
                    element[offset..offset + width].reverse();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_follow_strides_in_c_order() {
        // A 2x3 Fortran-ordered float32 block read in C order.
        let offsets: Vec<u64> = (0..6).map(|i| offset_of(i, &[2, 3], &[4, 8])).collect();
        assert_eq!(offsets, [0, 8, 16, 4, 12, 20]);
    }

    #[test]
    fn swaps_reverse_each_unit_of_each_element() {
        let mut bytes = [1, 2, 3, 4, 5, 6, 7, 8];
        swap_in_place(&mut bytes, 4, &Swaps::Uniform(2));
        assert_eq!(bytes, [2, 1, 4, 3, 6, 5, 8, 7]);
        let mut records = [1, 2, 3, 9, 4, 5, 6, 9];
        swap_in_place(&mut records, 4, &Swaps::Ranges(vec![(0, 3)]));
        assert_eq!(records, [3, 2, 1, 9, 6, 5, 4, 9]);
    }
}
