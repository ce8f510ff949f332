//! The copy engine: executes a `JoinPlan`, moving the inputs' bytes into the output front to
//! back while reading each input front to back. The only place data moves.
//!
//! - A round with one input (`outer == 1`) is one large copy per input, done inside the
//!   kernel when it can be; inputs of at most `SMALL_INPUT` bytes are read with one
//!   positional read into the output buffer instead of being mapped.
//! - Runs of at least `DIRECT_RUN` bytes are written straight from the memory map.
//! - Tiny runs that need no change (a last-axis join of width 3) are packed a buffer's worth
//!   of rounds at a time, one input at a time, by copy loops specialised on the run's size.
//! - Other small runs, byte-swapped runs, cast runs (`--cast`) and gathered (re-laid-out)
//!   runs are packed into one reused buffer and written in large blocks.
//! - Pages behind the read cursors are released whenever `RELEASE_BUDGET` bytes have been read
//!   since the last release, whatever the number of inputs, so resident memory stays bounded
//!   however large the inputs are.
//! - Inputs are opened and mapped only when the engine gets to them: one at a time when
//!   `outer == 1`, and at most `GROUP` at once otherwise. A join of more inputs than that
//!   with `outer > 1` first joins groups of them into temporary files, so that neither file
//!   descriptors nor the kernel's limit on memory maps (`vm.max_map_count`) run out.

pub mod blocks;

use std::sync::Arc;

use crate::cast;
use crate::dtype::{ByteOrder, DType, Swaps, swap_in_place};
use crate::error::{Error, InputRef, Result};
use crate::format::npz::{self, StoredCrc};
use crate::format::{Layout, TensorInfo};
use crate::input::{DataFile, Tensor};
use crate::output::{Scratch, Sink};
use crate::plan::{Gather, InputPlan, JoinPlan};
use crate::source::{self, Region};

/// Size of the reused output buffer.
const BUFFER: usize = 1 << 20;
/// Runs at least this long skip the buffer.
const DIRECT_RUN: u64 = 256 << 10;
/// How many bytes may be read from all inputs together between releases of the pages behind
/// the cursors.
const RELEASE_BUDGET: u64 = 16 << 20;
/// Inputs at most this long are read with one call rather than mapped or copied apart.
const SMALL_INPUT: u64 = 64 << 10;
/// The most inputs mapped at once; far below the kernel's default limit of 65,530 maps and
/// a hard limit of file descriptors of a few thousand.
const GROUP: usize = 4096;

/// Writes the data of `plan` from `inputs` (one tensor per entry of `plan.inputs`) to `out`.
pub fn execute(plan: &JoinPlan, inputs: &[&Tensor], out: &mut dyn Sink) -> Result<()> {
    if plan.bytes == 0 {
        return Ok(());
    }
    if plan.outer > 1 && inputs.len() > GROUP {
        return execute_in_groups(plan, inputs, out);
    }
    if plan.outer == 1 {
        return execute_rest(plan, inputs, 0, out);
    }
    let mut sink = Packer::new(out, &plan.dtype);
    // A map outlives its file descriptor: reopened inputs are closed again at once.
    let regions = inputs
        .iter()
        .zip(&plan.inputs)
        .map(|(input, p)| map(input, p))
        .collect::<Result<Vec<Region>>>()?;
    let mut cursors = Cursors::new(&regions, inputs);
    if packable(plan) {
        sink.packed_rounds(plan, &regions, &mut cursors)?;
    } else {
        for round in 0..plan.outer {
            let each = inputs.iter().zip(&plan.inputs).zip(&regions).zip(0..);
            for (((input, p), region), index) in each {
                sink.run(input, p, region, round, index, &mut cursors)?;
            }
        }
    }
    cursors.verify()?;
    sink.flush()
}

/// Writes the data of the inputs from `first` on, for a plan of one round (`outer == 1`) in
/// which each input is one run: the rest of a join whose first inputs the early copy wrote.
pub fn execute_rest(
    plan: &JoinPlan,
    inputs: &[&Tensor],
    first: usize,
    out: &mut dyn Sink,
) -> Result<()> {
    debug_assert!(plan.outer <= 1);
    let mut sink = Packer::new(out, &plan.dtype);
    for (input, p) in inputs.iter().zip(&plan.inputs).skip(first) {
        sink.whole_input(input, p)?;
    }
    sink.flush()
}

/// Appends `bytes` to `buffer`, first writing what it holds to `out` when they would not
/// fit in its capacity: the early copy's writes (`early.rs`), in blocks of the engine's size
/// (its inputs are far smaller than the buffer).
pub(crate) fn append_buffered(
    buffer: &mut Vec<u8>,
    bytes: &[u8],
    out: &mut dyn Sink,
) -> std::io::Result<()> {
    if buffer.capacity() - buffer.len() < bytes.len() {
        out.write_all(buffer)?;
        buffer.clear();
    }
    buffer.extend_from_slice(bytes);
    Ok(())
}

/// A buffer for `append_buffered`.
pub(crate) fn append_buffer() -> Vec<u8> {
    Vec::with_capacity(BUFFER)
}

/// Maps an input's data, opening it again if it was closed after its header was read.
pub(crate) fn map(input: &Tensor, p: &InputPlan) -> Result<Region> {
    if p.data_len == 0 {
        return Ok(Region::map_nothing());
    }
    let file = input.file.open(&input.name)?;
    Region::map(&file, p.data_offset, p.data_len).map_err(|e| input.name.io_error("map", e))
}

/// Joins each group of `GROUP` inputs into a temporary file, then joins those: every round
/// of a group's result is the group's runs back to back, so the final join's rounds are
/// the same bytes in the same order.
fn execute_in_groups(plan: &JoinPlan, inputs: &[&Tensor], out: &mut dyn Sink) -> Result<()> {
    let mut parts = Vec::new();
    let mut part_plans = Vec::new();
    for (group, plans) in inputs.chunks(GROUP).zip(plan.inputs.chunks(GROUP)) {
        let run_bytes: u64 = plans.iter().map(|p| p.out_run_bytes(&plan.dtype)).sum();
        let bytes = run_bytes * plan.outer;
        let sub_plan = JoinPlan {
            inputs: plans.to_vec(),
            bytes,
            ..plan.clone_without_inputs()
        };
        let mut scratch = Scratch::new()?;
        execute(&sub_plan, group, &mut scratch)?;
        parts.push(Tensor {
            name: group[0].name.clone(),
            info: TensorInfo {
                dtype: plan.dtype.clone(),
                byte_order: plan.dtype.byte_order_or_na(ByteOrder::Little),
                swaps: Swaps::None,
                shape: Vec::new(),
                layout: plan.layout,
                data_offset: 0,
                data_len: bytes,
            },
            file: DataFile::Open(Arc::new(scratch.into_file())),
        });
        part_plans.push(InputPlan {
            data_offset: 0,
            data_len: bytes,
            run_bytes,
            dtype: plan.dtype.clone(),
            swaps: Swaps::None,
            gather: None,
        });
    }
    let joined = JoinPlan {
        inputs: part_plans,
        ..plan.clone_without_inputs()
    };
    let parts: Vec<&Tensor> = parts.iter().collect();
    execute(&joined, &parts, out)
}

impl JoinPlan {
    /// The plan's own fields, with no inputs (to build the plans of parts of a join).
    fn clone_without_inputs(&self) -> JoinPlan {
        JoinPlan {
            axis: self.axis,
            dtype: self.dtype.clone(),
            shape: self.shape.clone(),
            layout: self.layout,
            outer: self.outer,
            inputs: Vec::new(),
            bytes: self.bytes,
        }
    }
}

/// Whether every run is tiny and needs no change, so rounds can be packed in bulk.
fn packable(plan: &JoinPlan) -> bool {
    let round_bytes: u64 = plan.inputs.iter().map(|p| p.run_bytes).sum();
    (1..=BUFFER as u64 / 4).contains(&round_bytes)
        && plan
            .inputs
            .iter()
            .all(|p| p.gather.is_none() && p.swaps.is_none() && p.dtype == plan.dtype)
}

/// How far the engine has read each input, and where it last released each one's pages.
struct Cursors<'r> {
    regions: &'r [Region],
    read: Vec<u64>,
    released: Vec<u64>,
    /// Whether an input is read out of order (gathered), so that all of it is released.
    scattered: Vec<bool>,
    pending: u64,
    /// The CRC-32 of each input that is a stored .npz member, finished over its data as the
    /// cursor passes it (for a gathered input, a second, sequential read).
    checks: Vec<Option<(InputRef, StoredCrc)>>,
}

impl<'r> Cursors<'r> {
    fn new(regions: &'r [Region], inputs: &[&Tensor]) -> Cursors<'r> {
        Cursors {
            regions,
            read: vec![0; regions.len()],
            released: vec![0; regions.len()],
            scattered: vec![false; regions.len()],
            pending: 0,
            checks: inputs.iter().map(|t| stored_crc(t)).collect(),
        }
    }

    /// Notes that `len` more bytes of input `index` were read; past the budget, releases the
    /// pages behind every cursor.
    fn advance(&mut self, index: usize, len: u64) {
        if let Some((_, check)) = &mut self.checks[index] {
            let start = self.read[index] as usize;
            check
                .hasher
                .update(&self.regions[index].bytes()[start..start + len as usize]);
        }
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

    /// Fails if an input read to its end fails its CRC-32 check.
    fn verify(&mut self) -> Result<()> {
        for (index, check) in self.checks.iter_mut().enumerate() {
            if self.read[index] == self.regions[index].bytes().len() as u64
                && let Some((name, check)) = check.take()
            {
                check.verify(&name)?;
            }
        }
        Ok(())
    }
}

/// The CRC-32 check to finish over the data of `tensor`, if it is a stored .npz member, with
/// the name its failure gives.
fn stored_crc(tensor: &Tensor) -> Option<(InputRef, StoredCrc)> {
    let check = npz::stored_crc(&tensor.name, tensor.info.data_offset)?;
    Some((tensor.name.clone(), check))
}

/// The output and the buffer that packs small runs.
struct Packer<'a> {
    out: &'a mut dyn Sink,
    /// The output's element type, and its size (at least 1).
    dtype: DType,
    itemsize: usize,
    buffer: Vec<u8>,
    capacity: usize,
    /// Input elements being cast, after their bytes are swapped.
    scratch: Vec<u8>,
}

impl<'a> Packer<'a> {
    fn new(out: &'a mut dyn Sink, dtype: &DType) -> Packer<'a> {
        // Whole elements must fit, so that swaps never straddle a flush. A buffer larger than
        // usual is left to grow as elements arrive: an element type of gigabytes (a hostile
        // `<U4611686018427387903` of shape (0, 3)) costs nothing until data backs it.
        let itemsize = usize::try_from(dtype.itemsize())
            .unwrap_or(usize::MAX)
            .max(1);
        let capacity = BUFFER.max(itemsize);
        Packer {
            out,
            dtype: dtype.clone(),
            itemsize,
            buffer: Vec::with_capacity(if capacity == BUFFER { BUFFER } else { 0 }),
            capacity,
            scratch: Vec::new(),
        }
    }

    /// Copies all of one input: small ones with one read, large ones in the kernel when
    /// nothing needs changing, else in pieces.
    fn whole_input(&mut self, input: &Tensor, p: &InputPlan) -> Result<()> {
        if p.data_len == 0 {
            return Ok(());
        }
        if p.gather.is_some() || !p.swaps.is_none() || p.dtype != self.dtype {
            let region = map(input, p)?;
            let mut cursors = Cursors::new(std::slice::from_ref(&region), &[input]);
            self.run(input, p, &region, 0, 0, &mut cursors)?;
            return cursors.verify();
        }
        let file = input.file.open(&input.name)?;
        let check = stored_crc(input);
        if p.data_len <= SMALL_INPUT {
            let len = p.data_len as usize;
            if self.capacity - self.buffer.len() < len {
                self.flush()?;
            }
            let start = self.buffer.len();
            self.buffer.resize(start + len, 0);
            source::read_exact_at(&file, &mut self.buffer[start..], p.data_offset)
                .map_err(|e| input.name.io_error("read", e))?;
            if let Some((name, mut check)) = check {
                check.hasher.update(&self.buffer[start..]);
                check.verify(&name)?;
            }
            return Ok(());
        }
        self.flush()?;
        // A kernel copy never shows the bytes a CRC-32 check must see.
        let copied = match check {
            Some(_) => 0,
            None => self
                .out
                .copy_from(&file, p.data_offset, p.data_len)
                .map_err(|e| self.write_error(e))?,
        };
        if copied == p.data_len {
            return Ok(());
        }
        let region = Region::map(&file, p.data_offset, p.data_len)
            .map_err(|e| input.name.io_error("map", e))?;
        let mut cursors = Cursors::new(std::slice::from_ref(&region), &[input]);
        cursors.read[0] = copied;
        cursors.released[0] = copied;
        let rest = &region.bytes()[copied as usize..];
        for piece in rest.chunks(RELEASE_BUDGET as usize) {
            self.out.write_all(piece).map_err(|e| self.write_error(e))?;
            cursors.advance(0, piece.len() as u64);
        }
        cursors.verify()
    }

    /// Copies round `round`'s run of one input.
    fn run(
        &mut self,
        input: &Tensor,
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
            self.gathered_run(input, p, gather, region, round)?;
            cursors.advance(index, p.run_bytes);
            return Ok(());
        }
        let start = (round * p.run_bytes) as usize;
        let run = &region.bytes()[start..start + p.run_bytes as usize];
        let direct = p.run_bytes >= DIRECT_RUN && p.swaps.is_none() && p.dtype == self.dtype;
        // A run can be a whole input: in pieces, so the pages behind are released as it goes.
        let in_size = p.dtype.itemsize().max(1) as usize;
        let piece_len = (RELEASE_BUDGET as usize / in_size).max(1) * in_size;
        for (k, piece) in run.chunks(piece_len).enumerate() {
            if direct {
                self.flush()?;
                self.out.write_all(piece).map_err(|e| self.write_error(e))?;
            } else {
                self.append(piece, input, p, (start + k * piece_len) as u64)?;
            }
            cursors.advance(index, piece.len() as u64);
        }
        Ok(())
    }

    /// Appends `bytes` (whole elements of the input, from byte `at` of its data), reversing
    /// its swaps in each element and casting it on the way.
    fn append(&mut self, mut bytes: &[u8], input: &Tensor, p: &InputPlan, at: u64) -> Result<()> {
        if p.dtype != self.dtype {
            return self.append_cast(bytes, input, p, at);
        }
        while !bytes.is_empty() {
            let room = self.capacity - self.buffer.len();
            let take = room.min(bytes.len()) / self.itemsize * self.itemsize;
            if take == 0 {
                self.flush()?;
                continue;
            }
            let start = self.buffer.len();
            self.buffer.extend_from_slice(&bytes[..take]);
            swap_in_place(&mut self.buffer[start..], self.itemsize, &p.swaps);
            bytes = &bytes[take..];
            if self.buffer.len() == self.capacity {
                self.flush()?;
            }
        }
        Ok(())
    }

    /// Appends whole input elements converted to the output's type, refusing the first that
    /// does not fit it with its position.
    fn append_cast(
        &mut self,
        mut bytes: &[u8],
        input: &Tensor,
        p: &InputPlan,
        at: u64,
    ) -> Result<()> {
        let in_size = p.dtype.itemsize() as usize;
        let mut element = at / in_size as u64;
        while !bytes.is_empty() {
            let room = (self.capacity - self.buffer.len()) / self.itemsize;
            if room == 0 {
                self.flush()?;
                continue;
            }
            let take = room.min(bytes.len() / in_size);
            let source = if p.swaps.is_none() {
                &bytes[..take * in_size]
            } else {
                // Swapped into a copy: the input is a read-only map.
                self.scratch.clear();
                self.scratch.extend_from_slice(&bytes[..take * in_size]);
                swap_in_place(&mut self.scratch, in_size, &p.swaps);
                &self.scratch
            };
            cast::convert(&p.dtype, &self.dtype, source, &mut self.buffer)
                .map_err(|e| cast_refused(input, element + e.index as u64, &self.dtype, e))?;
            bytes = &bytes[take * in_size..];
            element += take as u64;
        }
        Ok(())
    }

    /// Copies one run of an input whose layout differs from the output's, element by element.
    fn gathered_run(
        &mut self,
        input: &Tensor,
        p: &InputPlan,
        gather: &Gather,
        region: &Region,
        round: u64,
    ) -> Result<()> {
        let bytes = region.bytes();
        let itemsize = self.itemsize;
        let base = offset_of(round, &gather.outer_dims, &gather.outer_strides);
        let count: u64 = gather.run_dims.iter().product();
        let cast = p.dtype != self.dtype;
        let in_size = p.dtype.itemsize() as usize;
        // Gathering jumps across the whole input: within a long run, release all of it
        // whenever a budget's worth has been read, so resident memory stays bounded.
        let release_every = (RELEASE_BUDGET as usize / in_size.max(1)).max(1);
        let mut until_release = release_every;
        for index in 0..count {
            until_release -= 1;
            if until_release == 0 {
                region.release(0, bytes.len());
                until_release = release_every;
            }
            let at = (base + offset_of(index, &gather.run_dims, &gather.run_strides)) as usize;
            if cast {
                self.append_cast(&bytes[at..at + in_size], input, p, at as u64)?;
                continue;
            }
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

/// The refusal of a cast of element `index` (in the order the input's file stores them).
fn cast_refused(input: &Tensor, index: u64, to: &DType, e: cast::CastError) -> Error {
    let position = element_position(index, &input.info.shape, input.info.layout);
    Error::Unsupported {
        input: input.name.clone(),
        reason: format!(
            "--cast {to} stops at its element {position}: {} is {}; nothing was converted \
             silently (choose a wider type, or fix the data)",
            e.value, e.reason
        ),
    }
}

/// `[1, 2] (number 5 in file order)`: an element's index along each dimension.
fn element_position(index: u64, shape: &[u64], layout: Layout) -> String {
    let mut rest = index;
    let mut dims = vec![0; shape.len()];
    let order: Vec<usize> = match layout {
        Layout::C => (0..shape.len()).rev().collect(),
        Layout::Fortran => (0..shape.len()).collect(),
    };
    for axis in order {
        let size = shape[axis].max(1);
        dims[axis] = rest % size;
        rest /= size;
    }
    format!(
        "{} (number {index} in the order the file stores them)",
        crate::format::shape_text(&dims)
    )
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

/// How tensor `b` differs from `a`, if it does: type, shape, or the first differing byte.
/// Reads both tensors' data front to back in blocks and stops at the first block that
/// differs: the pieces of a split tensor differ in their first bytes and cost one small
/// read each, and only tensors that are identical are read whole (`--keep`, and the
/// replicated tensors a whole-file join refuses). `b`, which is only read here (`a` is
/// copied, and checked then), has its stored .npz member's CRC-32 checked when read whole.
pub fn differs(a: &Tensor, b: &Tensor) -> Result<Option<String>> {
    let (x, y) = (&a.info, &b.info);
    if x.dtype != y.dtype || x.swaps != y.swaps {
        return Ok(Some(format!("{} instead of {}", y.dtype, x.dtype)));
    }
    if x.shape != y.shape || x.layout != y.layout {
        return Ok(Some(format!(
            "shape {} instead of {}",
            y.shape_text(),
            x.shape_text()
        )));
    }
    let (fa, fb) = (a.file.open(&a.name)?, b.file.open(&b.name)?);
    // The first block is small, so that tensors differing early cost little (a read from a
    // cold disk pulls in the kernel's readahead too); blocks then double up to 4 MiB.
    const FIRST: u64 = 4 << 10;
    const LARGEST: u64 = 4 << 20;
    let (mut ba, mut bb) = (Vec::new(), Vec::new());
    let (mut done, mut block) = (0, FIRST);
    let mut check = stored_crc(b);
    while done < x.data_len {
        let n = block.min(x.data_len - done) as usize;
        ba.resize(n, 0);
        bb.resize(n, 0);
        source::read_exact_at(&fa, &mut ba, x.data_offset + done)
            .map_err(|e| a.name.io_error("read", e))?;
        source::read_exact_at(&fb, &mut bb, y.data_offset + done)
            .map_err(|e| b.name.io_error("read", e))?;
        if ba != bb {
            let at = ba.iter().zip(&bb).position(|(p, q)| p != q).unwrap_or(0);
            let byte = done + at as u64;
            return Ok(Some(format!(
                "its data differs from byte {byte} (element {})",
                byte * 8 / x.dtype.bits().max(1)
            )));
        }
        if let Some((_, check)) = &mut check {
            check.hasher.update(&bb);
        }
        done += n as u64;
        block = (block * 2).min(LARGEST);
    }
    if let Some((name, check)) = check {
        check.verify(&name)?;
    }
    Ok(None)
}

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
            pending: Vec::with_capacity(BUFFER),
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
            let take = (BUFFER - self.pending.len().min(BUFFER))
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
}
