//! The copy engine: executes a `JoinPlan`, moving the inputs' bytes into the output front to
//! back while reading each input front to back. The only place data moves.
//!
//! - A round with one input (`outer == 1`) is one large copy per input, done inside the
//!   kernel when the output allows it, at whatever offsets, as `cat` copies; inputs of at
//!   most `SMALL_INPUT` bytes, and those of at most `READ_INPUT` that the kernel declines
//!   (a pipe as the output), are read with positional reads into the output buffer instead
//!   of being mapped, as `cat` reads.
//! - Runs of at least `DIRECT_RUN` bytes that need no change are copied inside the kernel
//!   (`copy_file_range`) when the output allows it and the inputs are few, at any offsets
//!   (`sys::copy_in_kernel`), else written straight from the memory map; what the kernel
//!   declines midway is written from the map too.
//! - A member stored in an .npz archive has its CRC-32 computed as its bytes pass the read
//!   cursor (`Cursors::advance`), on whichever thread packs, and checked before the engine
//!   returns, so before the output is committed. Its bytes never take a kernel copy, which
//!   would not show them to the check: its long runs and whole data are written from its
//!   map, which the check reads.
//! - Tiny runs that need no change (a last-axis join of width 3) are packed a buffer's worth
//!   of rounds at a time, one input at a time, by copy loops specialised on the run's size.
//! - Other small runs, byte-swapped runs, cast runs (`--cast`) and gathered (re-laid-out)
//!   runs are packed into one reused buffer and written in large blocks. Gathered runs of
//!   at least a MiB are read by positional reads of tiles rather than through the map
//!   (`gather::Tiles`), which keeps what is resident bounded.
//! - A job of at least `THREAD_MIN` bytes that packs tiny runs in bulk or changes bytes
//!   (casts, byte swaps, gathers) packs on a second thread while this one writes the packed
//!   buffers, in order, through the same `Sink`: the output is still written front to back,
//!   so a pipe works as a file does, and a failure on either side stops both. Other jobs keep
//!   one thread, where a second measured no faster.
//! - Pages behind the read cursors are released whenever `RELEASE_BUDGET` bytes have been read
//!   since the last release, whatever the number of inputs, so resident memory stays bounded
//!   however large the inputs are.
//! - Inputs are opened and mapped only when the engine gets to them: one at a time when
//!   `outer == 1`, and at most `GROUP` at once otherwise. A join of more inputs than that
//!   with `outer > 1` first joins groups of them into temporary files, so that neither file
//!   descriptors nor the kernel's limit on memory maps (`vm.max_map_count`) run out.
//! - A tensor cut into parts (`tjoin split`) is read once for all of them (`splitter/`).

pub mod blocks;
mod cursors;
mod direct;
pub mod early;
mod gather;
mod packer;
mod ranged;
pub mod ranges;
pub mod splitter;
#[cfg(test)]
mod tests;
mod threads;

use std::fs::File;
use std::sync::Arc;

use crate::dtype::{ByteOrder, DType, Swaps};
use crate::error::Result;
use crate::format::Sink;
use crate::format::TensorInfo;
use crate::input::{DataFile, Tensor};
use crate::output::Scratch;
use crate::plan::{InputPlan, JoinPlan};
use crate::sys::Region;
use cursors::Cursors;
use packer::with_packer;

/// Size of the reused output buffer.
const BUFFER: usize = 1 << 20;
/// Runs at least this long skip the buffer.
const DIRECT_RUN: u64 = 256 << 10;
/// How many bytes may be read from all inputs together between releases of the pages behind
/// the cursors.
const RELEASE_BUDGET: u64 = 16 << 20;
/// Pieces at least this long of an input whose CRC-32 is checked are hashed on a second
/// thread while they are written; a thread's start costs about as much as hashing 64 KiB.
const HASH_APART: usize = 1 << 20;
/// Inputs at most this long are read rather than mapped or copied apart.
const SMALL_INPUT: u64 = 64 << 10;
/// Inputs at most this long that the kernel does not copy (the output is a pipe, or the
/// file system declines) are read into the buffer rather than written from a map: for a
/// few MiB, a map's setup and faults cost more than the reads' copy (benches/README.md).
const READ_INPUT: u64 = 4 << 20;
/// Jobs that pack tiny runs in bulk or change bytes, of at least this many bytes, pack on a
/// second thread while this one writes what it packs; below it a thread costs more than it
/// saves (benches/README.md).
const THREAD_MIN: u64 = 64 << 20;
/// Buffers in flight between the packing thread and the writing one.
const BUFFERS: usize = 3;
/// The most inputs kept open for in-kernel copies of their long runs; more are written from
/// their maps, sparing file descriptors.
const KEEP_OPEN: usize = 64;
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
    // Inputs in object storage are read by range, front to back, each through a window.
    let mut streams = ranged::streams(inputs, &plan.inputs);
    // A map outlives its file descriptor: reopened inputs are closed again at once, unless
    // their runs are long enough to be copied inside the kernel, and they are few.
    let regions = inputs
        .iter()
        .zip(&plan.inputs)
        .zip(&streams)
        .map(|((input, p), stream)| match stream {
            Some(_) => Ok(Region::map_nothing()),
            None => map(input, p),
        })
        .collect::<Result<Vec<Region>>>()?;
    let files = inputs
        .iter()
        .zip(&plan.inputs)
        .zip(&streams)
        .map(|((input, p), stream)| {
            // A stored .npz member's runs are written from its map, which its CRC-32 check
            // reads anyway (`Cursors::advance`): a kernel copy would read them twice.
            let keep = inputs.len() <= KEEP_OPEN
                && direct(p, &plan.dtype)
                && p.data_len > 0
                && input.stored_crc.is_none()
                && stream.is_none();
            keep.then(|| input.file.open(&input.name)).transpose()
        })
        .collect::<Result<Vec<Option<Arc<File>>>>>()?;
    let threaded = threads(plan, plan.inputs.iter().any(|p| !direct(p, &plan.dtype)));
    with_packer(&plan.dtype, threaded, out, |sink| {
        let mut cursors = Cursors::new(&regions, inputs);
        ranged::check_apart(&mut cursors, &streams);
        if packable(plan) && streams.iter().all(Option::is_none) {
            sink.packed_rounds(plan, &regions, &mut cursors)?;
            return cursors.verify();
        }
        for round in 0..plan.outer {
            let each = inputs.iter().zip(&plan.inputs).zip(&regions).zip(&files);
            for (index, (((input, p), region), file)) in each.enumerate() {
                if let Some(stream) = &mut streams[index] {
                    let run = (p.run_at(round), p.run_bytes);
                    stream.run(run, &mut |bytes, at| sink.append(bytes, input, p, at))?;
                    continue;
                }
                let file = file.as_ref();
                sink.run(input, p, region, file, round, index, &mut cursors)?;
            }
        }
        for stream in streams.iter_mut().flatten() {
            stream.finish()?;
        }
        cursors.verify()
    })
}

/// Whether an input's runs are copied as they are, straight from the file, rather than
/// through the buffer.
#[inline]
fn direct(p: &InputPlan, dtype: &DType) -> bool {
    p.run_bytes >= DIRECT_RUN && p.gather().is_none() && p.swaps.is_none() && &p.dtype == dtype
}

/// Whether an input's bytes change on their way to the output (cast, byte-swapped or
/// gathered into another layout): work for a core, done in the buffer.
#[inline]
fn changes(p: &InputPlan, dtype: &DType) -> bool {
    p.gather().is_some() || !p.swaps.is_none() || &p.dtype != dtype
}

/// Whether a job that packs (`packs`: some input goes through the buffer) does it on a
/// second thread: where that was measured to pay (benches/README.md), a job of at least
/// `THREAD_MIN` bytes that packs tiny runs in bulk or changes bytes (a cast, a byte swap, a
/// gather), with a second core. Other packing (runs of a few KiB as they are) keeps one
/// thread: there a second measured slower.
fn threads(plan: &JoinPlan, packs: bool) -> bool {
    #[cfg(test)]
    if tests::FORCE_THREADS.get() {
        return packs;
    }
    packs
        && (packable(plan) || plan.inputs.iter().any(|p| changes(p, &plan.dtype)))
        && plan.bytes >= THREAD_MIN
        && std::thread::available_parallelism().is_ok_and(|n| n.get() > 1)
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
    let rest = || inputs.iter().zip(&plan.inputs).skip(first);
    let threaded = threads(plan, rest().any(|(_, p)| changes(p, &plan.dtype)));
    with_packer(&plan.dtype, threaded, out, |sink| {
        for (input, p) in rest() {
            sink.whole_input(input, p)?;
        }
        Ok(())
    })
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
                shape: Box::default(),
                layout: plan.layout,
                data_offset: 0,
                data_len: bytes,
            },
            file: DataFile::Open(Arc::new(scratch.into_file())),
            stored_crc: None,
        });
        part_plans.push(InputPlan {
            data_offset: 0,
            data_len: bytes,
            run_bytes,
            dtype: plan.dtype.clone(),
            swaps: Swaps::None,
            runs: None,
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
            .all(|p| p.gather().is_none() && p.swaps.is_none() && p.dtype == plan.dtype)
}
