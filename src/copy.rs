//! The copy engine: executes a `JoinPlan`, moving the inputs' bytes into the output front to
//! back while reading each input front to back. The only place data moves.
//!
//! - A round with one input (`outer == 1`) is one large copy per input, done inside the
//!   kernel when it can be.
//! - Runs of at least `DIRECT_RUN` bytes are written straight from the memory map.
//! - Tiny runs that need no change (a last-axis join of width 3) are packed a buffer's worth
//!   of rounds at a time, one input at a time, by copy loops specialised on the run's size.
//! - Other small runs, byte-swapped runs and gathered (re-laid-out) runs are packed into one
//!   reused buffer and written in large blocks.
//! - Pages behind the read cursors are released whenever `RELEASE_BUDGET` bytes have been read
//!   since the last release, whatever the number of inputs, so resident memory stays bounded
//!   however large the inputs are.

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
/// How many bytes may be read from all inputs together between releases of the pages behind
/// the cursors.
const RELEASE_BUDGET: u64 = 16 << 20;

/// Writes the data of `plan` from `inputs` (one tensor per entry of `plan.inputs`) to `out`.
pub fn execute(plan: &JoinPlan, inputs: &[&Tensor], out: &mut dyn Sink) -> Result<()> {
    if plan.bytes == 0 {
        return Ok(());
    }
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
    let mut cursors = Cursors::new(&regions);
    if plan.outer == 1 {
        for (((input, p), region), index) in inputs.iter().zip(&plan.inputs).zip(&regions).zip(0..)
        {
            sink.whole_input(&input.file, p, region, index, &mut cursors)?;
        }
    } else if packable(plan) {
        sink.packed_rounds(plan, &regions, &mut cursors)?;
    } else {
        for round in 0..plan.outer {
            for ((p, region), index) in plan.inputs.iter().zip(&regions).zip(0..) {
                sink.run(p, region, round, index, &mut cursors)?;
            }
        }
    }
    sink.flush()
}

/// Whether every run is tiny and needs no change, so rounds can be packed in bulk.
fn packable(plan: &JoinPlan) -> bool {
    let round_bytes: u64 = plan.inputs.iter().map(|p| p.run_bytes).sum();
    (1..=BUFFER as u64 / 4).contains(&round_bytes)
        && plan
            .inputs
            .iter()
            .all(|p| p.gather.is_none() && p.swaps.is_none())
}

/// How far the engine has read each input, and where it last released each one's pages.
struct Cursors<'r> {
    regions: &'r [Region],
    read: Vec<u64>,
    released: Vec<u64>,
    /// Whether an input is read out of order (gathered), so that all of it is released.
    scattered: Vec<bool>,
    pending: u64,
}

impl<'r> Cursors<'r> {
    fn new(regions: &'r [Region]) -> Cursors<'r> {
        Cursors {
            regions,
            read: vec![0; regions.len()],
            released: vec![0; regions.len()],
            scattered: vec![false; regions.len()],
            pending: 0,
        }
    }

    /// Notes that `len` more bytes of input `index` were read; past the budget, releases the
    /// pages behind every cursor.
    fn advance(&mut self, index: usize, len: u64) {
        self.read[index] += len;
        self.pending += len;
        if self.pending < RELEASE_BUDGET {
            return;
        }
        for (i, region) in self.regions.iter().enumerate() {
            let (start, end) = if self.scattered[i] {
                (0, region.bytes().len() as u64)
            } else {
                (self.released[i], self.read[i])
            };
            region.release(start as usize, end as usize);
            self.released[i] = self.read[i];
        }
        self.pending = 0;
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
    fn whole_input(
        &mut self,
        file: &File,
        p: &InputPlan,
        region: &Region,
        index: usize,
        cursors: &mut Cursors,
    ) -> Result<()> {
        if p.gather.is_some() || !p.swaps.is_none() {
            return self.run(p, region, 0, index, cursors);
        }
        self.flush()?;
        let copied = self
            .out
            .copy_from(file, p.data_offset, p.data_len)
            .map_err(|e| self.write_error(e))?;
        cursors.read[index] = copied;
        cursors.released[index] = copied;
        let rest = &region.bytes()[copied as usize..];
        for piece in rest.chunks(RELEASE_BUDGET as usize) {
            self.out.write_all(piece).map_err(|e| self.write_error(e))?;
            cursors.advance(index, piece.len() as u64);
        }
        Ok(())
    }

    /// Copies round `round`'s run of one input.
    fn run(
        &mut self,
        p: &InputPlan,
        region: &Region,
        round: u64,
        index: usize,
        cursors: &mut Cursors,
    ) -> Result<()> {
        if p.run_bytes == 0 {
            return Ok(());
        }
        if let Some(gather) = &p.gather {
            cursors.scattered[index] = true;
            self.gathered_run(p, gather, region, round)?;
            cursors.advance(index, p.run_bytes);
            return Ok(());
        }
        let start = (round * p.run_bytes) as usize;
        let run = &region.bytes()[start..start + p.run_bytes as usize];
        if p.run_bytes >= DIRECT_RUN && p.swaps.is_none() {
            self.flush()?;
            self.out.write_all(run).map_err(|e| self.write_error(e))?;
        } else {
            self.append(run, &p.swaps)?;
        }
        cursors.advance(index, p.run_bytes);
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
        Ok(())
    }

    /// Copies every round of a plan whose runs are all tiny and unchanged: a buffer's worth
    /// of rounds at a time, each input's runs of that chunk in one specialised strided loop.
    fn packed_rounds(
        &mut self,
        plan: &JoinPlan,
        regions: &[Region],
        cursors: &mut Cursors,
    ) -> Result<()> {
        let runs: Vec<usize> = plan.inputs.iter().map(|p| p.run_bytes as usize).collect();
        let round_bytes: usize = runs.iter().sum();
        let chunk = (self.capacity / round_bytes) as u64;
        self.flush()?;
        // Every byte of a chunk is overwritten by the runs, so the buffer is zeroed once here
        // and never again: zeroing it per chunk was half of this path's instructions.
        let mut packed = std::mem::take(&mut self.buffer);
        packed.resize(chunk as usize * round_bytes, 0);
        let mut first = 0u64;
        while first < plan.outer {
            let rounds = chunk.min(plan.outer - first) as usize;
            let mut offset = 0;
            for (index, (&run, region)) in runs.iter().zip(regions).enumerate() {
                let start = first as usize * run;
                let src = &region.bytes()[start..start + rounds * run];
                strided_copy(&mut packed[offset..], round_bytes, src, run);
                offset += run;
                cursors.advance(index, (rounds * run) as u64);
            }
            let written = self.out.write_all(&packed[..rounds * round_bytes]);
            written.map_err(|e| self.write_error(e))?;
            first += rounds as u64;
        }
        packed.clear();
        self.buffer = packed;
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

/// Copies `src`, a sequence of runs of `run` bytes, into `dst` with one run every `stride`
/// bytes. Common run sizes get a loop whose copy size is a constant, which compiles to a few
/// moves instead of a call to memcpy per run.
fn strided_copy(dst: &mut [u8], stride: usize, src: &[u8], run: usize) {
    macro_rules! specialised {
        ($($n:literal)*) => {
            match run {
                $($n => strided_copy_n::<$n>(dst, stride, src),)*
                0 => {}
                _ => {
                    for (k, piece) in src.chunks_exact(run).enumerate() {
                        dst[k * stride..k * stride + run].copy_from_slice(piece);
                    }
                }
            }
        };
    }
    specialised!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 18 20 24 28 32 36 40 48 56 64 80 96 128);
}

fn strided_copy_n<const N: usize>(dst: &mut [u8], stride: usize, src: &[u8]) {
    for (k, piece) in src.chunks_exact(N).enumerate() {
        let at = k * stride;
        let piece: &[u8; N] = piece.try_into().expect("chunks_exact yields N bytes");
        dst[at..at + N].copy_from_slice(piece);
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
pub(crate) fn swap_in_place(bytes: &mut [u8], itemsize: usize, swaps: &Swaps) {
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
    fn strided_copies_interleave_runs_for_every_size() {
        for run in [1, 3, 12, 17, 20, 128, 200] {
            let src: Vec<u8> = (0..run * 5).map(|b| b as u8).collect();
            let stride = run + 3;
            let mut dst = vec![0xAA; stride * 5];
            strided_copy(&mut dst, stride, &src, run);
            for k in 0..5 {
                assert_eq!(
                    dst[k * stride..k * stride + run],
                    src[k * run..(k + 1) * run]
                );
                assert!(
                    dst[k * stride + run..(k + 1) * stride]
                        .iter()
                        .all(|&b| b == 0xAA)
                );
            }
        }
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
