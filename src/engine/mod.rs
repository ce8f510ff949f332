//! The copy engine: executes a `JoinPlan`, moving the inputs' bytes into the output front to
//! back while reading each input front to back. The only place data moves.
//!
//! - A round with one input (`outer == 1`) is one large copy per input, done inside the
//!   kernel when it can be (page-aligned offsets); inputs of at most `SMALL_INPUT` bytes,
//!   and those of at most `READ_INPUT` that the kernel declines, are read with positional
//!   reads into the output buffer instead of being mapped, as `cat` reads.
//! - Runs of at least `DIRECT_RUN` bytes that need no change are copied inside the kernel
//!   (`copy_file_range`) when the output allows it, the inputs are few and both offsets are
//!   page-aligned (`sys::copy_in_kernel`), else written straight from the memory map.
//! - A member stored in an .npz archive has its CRC-32 computed as its bytes pass the read
//!   cursor (`Cursors::advance`), on whichever thread packs, and checked before the engine
//!   returns, so before the output is committed. Its bytes never take a kernel copy, which
//!   would not show them to the check: its long runs and whole data are written from its
//!   map, which the check reads.
//! - Tiny runs that need no change (a last-axis join of width 3) are packed a buffer's worth
//!   of rounds at a time, one input at a time, by copy loops specialised on the run's size.
//! - Other small runs, byte-swapped runs, cast runs (`--cast`) and gathered (re-laid-out)
//!   runs are packed into one reused buffer and written in large blocks.
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

use std::fs::File;
pub mod blocks;
pub mod early;
mod gather;
#[cfg(test)]
mod slice_tests;

use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};

use crate::dtype::cast;
use crate::dtype::{ByteOrder, DType, Swaps, swap_in_place};
use crate::error::{Error, InputRef, Result};
use crate::format::npz::StoredCrc;
use crate::format::{Layout, TensorInfo};
use crate::input::{DataFile, Tensor};
use crate::output::{Scratch, Sink};
use crate::plan::{Gather, InputPlan, JoinPlan};
use crate::sys::{self, Region};
use gather::Walk;

/// Size of the reused output buffer.
const BUFFER: usize = 1 << 20;
/// Runs at least this long skip the buffer.
const DIRECT_RUN: u64 = 256 << 10;
/// How many bytes may be read from all inputs together between releases of the pages behind
/// the cursors.
const RELEASE_BUDGET: u64 = 16 << 20;
/// Inputs at most this long are read rather than mapped or copied apart.
const SMALL_INPUT: u64 = 64 << 10;
/// Inputs at most this long that the kernel does not copy (their offsets are not
/// page-aligned) are read into the buffer rather than written from a map: for a few MiB, a
/// map's setup and faults cost more than the reads' copy (benches/README.md).
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
    // A map outlives its file descriptor: reopened inputs are closed again at once, unless
    // their runs are long enough to be copied inside the kernel, and they are few.
    let regions = inputs
        .iter()
        .zip(&plan.inputs)
        .map(|(input, p)| map(input, p))
        .collect::<Result<Vec<Region>>>()?;
    let files = inputs
        .iter()
        .zip(&plan.inputs)
        .map(|(input, p)| {
            // A stored .npz member's runs are written from its map, which its CRC-32 check
            // reads anyway (`Cursors::advance`): a kernel copy would read them twice.
            let keep = inputs.len() <= KEEP_OPEN
                && direct(p, &plan.dtype)
                && p.data_len > 0
                && input.stored_crc.is_none();
            keep.then(|| input.file.open(&input.name)).transpose()
        })
        .collect::<Result<Vec<Option<Arc<File>>>>>()?;
    let threaded = threads(plan, plan.inputs.iter().any(|p| !direct(p, &plan.dtype)));
    with_packer(&plan.dtype, threaded, out, |sink| {
        let mut cursors = Cursors::new(&regions, inputs);
        if packable(plan) {
            sink.packed_rounds(plan, &regions, &mut cursors)?;
            return cursors.verify();
        }
        for round in 0..plan.outer {
            let each = inputs.iter().zip(&plan.inputs).zip(&regions).zip(&files);
            for (index, (((input, p), region), file)) in each.enumerate() {
                let file = file.as_ref();
                sink.run(input, p, region, file, round, index, &mut cursors)?;
            }
        }
        cursors.verify()
    })
}

/// Whether an input's runs are copied as they are, straight from the file, rather than
/// through the buffer.
fn direct(p: &InputPlan, dtype: &DType) -> bool {
    p.run_bytes >= DIRECT_RUN && p.gather().is_none() && p.swaps.is_none() && &p.dtype == dtype
}

/// Whether an input's bytes change on their way to the output (cast, byte-swapped or
/// gathered into another layout): work for a core, done in the buffer.
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

/// Runs `work` with a packer that writes to `out`: on this thread; or, when `threaded`, on a
/// second thread that packs while this one writes the blocks it hands over, in order, so
/// that the output is still written front to back through `out` (a pipe as well as a
/// file). A failure on either side stops both, and the first failure is returned: the
/// writer's, which stops the packer, or the packer's.
fn with_packer<W>(dtype: &DType, threaded: bool, out: &mut dyn Sink, work: W) -> Result<()>
where
    W: FnOnce(&mut Packer) -> Result<()> + Send,
{
    if !threaded {
        let mut packer = Packer::new(Out::Here(out), dtype);
        work(&mut packer)?;
        return packer.flush();
    }
    let (blocks, received) = mpsc::sync_channel(BUFFERS - 1);
    let (spares, spare) = mpsc::channel();
    for _ in 1..BUFFERS {
        let _ = spares.send(empty_buffer(dtype));
    }
    std::thread::scope(|scope| {
        let packer = scope.spawn(move || {
            let mut packer = Packer::new(Out::Sent { blocks, spare }, dtype);
            work(&mut packer)?;
            packer.flush()
        });
        // Returning drops the channels' ends, which wakes a packer waiting on them.
        let written = write_blocks(received, spares, out);
        let packed = packer
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        written.and(packed)
    })
}

/// The writing side of a threaded packer: writes each block as it comes and gives the
/// buffers back, until the packer is done or a write fails.
fn write_blocks(
    blocks: Receiver<Block>,
    spares: Sender<Vec<u8>>,
    out: &mut dyn Sink,
) -> Result<()> {
    for block in blocks {
        match block {
            Block::Packed(buffer, len) => {
                let written = out.write_all(&buffer[..len]);
                written.map_err(|e| Error::io("write the output", out.name(), e))?;
                let _ = spares.send(buffer);
            }
            Block::File {
                name,
                file,
                offset,
                len,
            } => {
                // Inside the kernel where the output allows it, else from a map.
                let copied = out.copy_from(&file, offset, len);
                let copied = copied.map_err(|e| Error::io("write the output", out.name(), e))?;
                write_from_map(out, &name, &file, offset + copied, len - copied)?;
            }
        }
    }
    Ok(())
}

/// What a threaded packer hands the writing thread.
enum Block {
    /// The first bytes of a buffer, which comes back to be filled again.
    Packed(Vec<u8>, usize),
    /// `len` bytes of an input's file from `offset`, as they are.
    File {
        name: InputRef,
        file: Arc<File>,
        offset: u64,
        len: u64,
    },
}

/// Where a packer's output goes.
enum Out<'a> {
    /// Written on the packer's own thread.
    Here(&'a mut dyn Sink),
    /// Handed to the writing thread, which gives each buffer back once written.
    Sent {
        blocks: SyncSender<Block>,
        spare: Receiver<Vec<u8>>,
    },
}

impl Out<'_> {
    /// Hands over the first `len` bytes of `buffer`, which then holds a buffer to fill again:
    /// the same one, or, when another thread writes, one it gave back. Its length and bytes
    /// are left as they were.
    fn emit(&mut self, buffer: &mut Vec<u8>, len: usize) -> Result<()> {
        match self {
            Out::Here(out) => {
                let written = out.write_all(&buffer[..len]);
                written.map_err(|e| Error::io("write the output", out.name(), e))
            }
            Out::Sent { blocks, spare } => {
                let full = std::mem::take(buffer);
                blocks
                    .send(Block::Packed(full, len))
                    .map_err(|_| stopped())?;
                *buffer = spare.recv().map_err(|_| stopped())?;
                Ok(())
            }
        }
    }
}

/// What a threaded packer returns when the writing thread has stopped: never reported, as
/// the writer's own failure is.
fn stopped() -> Error {
    let why = std::io::Error::other("the writing thread stopped");
    Error::io("write the output", std::path::Path::new("-"), why)
}

/// Writes `len` bytes of `file` from `offset` to `out` from a map of them, in pieces,
/// releasing the pages behind.
fn write_from_map(
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
fn shrunk_or(error: Error, name: &InputRef, file: &File, end: u64) -> Error {
    sys::shrank(file, end).map_or(error, |why| name.io_error("read", why))
}

/// Writes mapped bytes in pieces of `BUFFER`: the kernel copies 1 MiB from a map as fast as
/// it copies between aligned files, and 16 MiB at a time 50% slower (benches/README.md).
fn write_in_pieces(out: &mut dyn Sink, bytes: &[u8]) -> Result<()> {
    for piece in bytes.chunks(BUFFER) {
        let written = out.write_all(piece);
        written.map_err(|e| Error::io("write the output", out.name(), e))?;
    }
    Ok(())
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

/// How far the engine has read each input, and where it last released each one's pages.
/// A source that is a slice reads its runs with gaps between them (`skip_to`); a gathered
/// one counts its bytes as if read in order.
struct Cursors<'r> {
    regions: &'r [Region],
    /// Where each input's cursor is in its data.
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
            checks: inputs.iter().map(|t| t.crc_check()).collect(),
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

    /// Moves input `index`'s cursor forward to byte `at` of its data, where a slice's next
    /// run starts. The bytes passed over go through its CRC-32 check, if it has one; else
    /// they are not read at all.
    fn skip_to(&mut self, index: usize, at: u64) {
        if self.checks[index].is_some() {
            self.pass_over(index, at);
        } else {
            self.read[index] = self.read[index].max(at);
        }
    }

    /// Advances input `index`'s cursor to `at` a budget's worth at a time, so that the
    /// pages read for its CRC-32 check are released as it goes.
    fn pass_over(&mut self, index: usize, at: u64) {
        while self.read[index] < at {
            let len = (at - self.read[index]).min(RELEASE_BUDGET);
            self.advance(index, len);
        }
    }

    /// Fails if an input fails its CRC-32 check, once the bytes after its cursor (the end
    /// of its tensor that a slice leaves out) have gone through it too.
    fn verify(&mut self) -> Result<()> {
        for index in 0..self.checks.len() {
            if self.checks[index].is_some() {
                self.pass_over(index, self.regions[index].bytes().len() as u64);
            }
            if let Some((name, check)) = self.checks[index].take() {
                check.verify(&name)?;
            }
        }
        Ok(())
    }
}

/// The output and the buffer that packs small runs.
struct Packer<'a> {
    out: Out<'a>,
    /// The output's element type, and its size (at least 1).
    dtype: DType,
    itemsize: usize,
    buffer: Vec<u8>,
    capacity: usize,
    /// Input elements being cast, after their bytes are swapped.
    scratch: Vec<u8>,
}

impl<'a> Packer<'a> {
    fn new(out: Out<'a>, dtype: &DType) -> Packer<'a> {
        let capacity = capacity(dtype);
        Packer {
            out,
            dtype: dtype.clone(),
            itemsize: itemsize(dtype),
            buffer: empty_buffer(dtype),
            capacity,
            scratch: Vec::new(),
        }
    }

    /// Copies all of one source in a plan of one round (all of its tensor's data, or its
    /// slice's one run): small ones by reads, large ones in the kernel when nothing needs
    /// changing and their offsets allow it, else by reads up to `READ_INPUT` and from a map
    /// beyond.
    fn whole_input(&mut self, input: &Tensor, p: &InputPlan) -> Result<()> {
        let (skip, len) = p.one_round();
        if len == 0 {
            return Ok(());
        }
        // A slice of a stored .npz member goes through the cursors, which check the CRC-32
        // of all of the member's data, also the bytes the slice leaves out.
        if changes(p, &self.dtype) || (p.sliced() && input.stored_crc.is_some()) {
            let region = map(input, p)?;
            let mut cursors = Cursors::new(std::slice::from_ref(&region), &[input]);
            self.run(input, p, &region, None, 0, 0, &mut cursors)?;
            return cursors.verify();
        }
        let file = input.file.open(&input.name)?;
        let check = input.crc_check();
        let offset = p.data_offset + skip;
        if len <= SMALL_INPUT {
            return self.read_input(input, &file, p, (offset, len), check);
        }
        // Readahead advice only for inputs past a single read: given to every one, a
        // whole-file join of 20,000 tiny tensors per input made 40,000 calls for nothing
        // (231 ms against 245 without them).
        sys::advise_sequential(&file);
        if check.is_some() {
            // A kernel copy never shows the bytes a CRC-32 check must see: a stored .npz
            // member is written from its map, through the check.
            let region =
                Region::map(&file, offset, len).map_err(|e| input.name.io_error("map", e))?;
            let mut cursors = Cursors::new(std::slice::from_ref(&region), &[input]);
            for piece in region.bytes().chunks(RELEASE_BUDGET as usize) {
                self.write_mapped(input, p, piece)?;
                cursors.advance(0, piece.len() as u64);
            }
            return cursors.verify();
        }
        let copied = self.copy_in_kernel(&input.name, &file, offset, len)?;
        if copied == 0 && len <= READ_INPUT {
            return self.read_input(input, &file, p, (offset, len), None);
        }
        match &mut self.out {
            Out::Here(out) => {
                write_from_map(*out, &input.name, &file, offset + copied, len - copied)
            }
            Out::Sent { .. } => Ok(()),
        }
    }

    /// Copies the `len` bytes of a small input's file from `offset` (all of its data, or
    /// the one run of a slice) through the buffer with positional reads, as `cat` does,
    /// checking its CRC-32 if it is a stored .npz member read whole.
    fn read_input(
        &mut self,
        input: &Tensor,
        file: &File,
        p: &InputPlan,
        (offset, len): (u64, u64),
        mut check: Option<(InputRef, StoredCrc)>,
    ) -> Result<()> {
        let total = len;
        let mut done = 0;
        while done < total {
            if self.buffer.len() == self.capacity {
                self.flush()?;
            }
            let start = self.buffer.len();
            let len = ((self.capacity - start) as u64).min(total - done) as usize;
            let at = offset + done;
            sys::read_appending(file, &mut self.buffer, len, at).map_err(|e| {
                let why = sys::shrank(file, p.data_offset + p.data_len).unwrap_or(e);
                input.name.io_error("read", why)
            })?;
            if let Some((_, check)) = &mut check {
                check.hasher.update(&self.buffer[start..]);
            }
            done += len as u64;
        }
        match check {
            Some((name, check)) => check.verify(&name),
            None => Ok(()),
        }
    }

    /// Copies `len` bytes of an input's file from `offset` as they are, after what is
    /// buffered, inside the kernel where the output allows it; returns how many it copied,
    /// the caller writing the rest. When another thread writes, it hands that thread the
    /// whole copy, which it completes.
    fn copy_in_kernel(
        &mut self,
        name: &InputRef,
        file: &Arc<File>,
        offset: u64,
        len: u64,
    ) -> Result<u64> {
        self.flush()?;
        match &mut self.out {
            Out::Here(out) => out
                .copy_from(file, offset, len)
                .map_err(|e| Error::io("write the output", out.name(), e)),
            Out::Sent { blocks, .. } => {
                let block = Block::File {
                    name: name.clone(),
                    file: Arc::clone(file),
                    offset,
                    len,
                };
                blocks.send(block).map_err(|_| stopped())?;
                Ok(len)
            }
        }
    }

    /// Writes bytes of `input`'s map (planned as `p`) as they are, after what is buffered:
    /// from the map itself here, through the buffer when another thread writes.
    fn write_mapped(&mut self, input: &Tensor, p: &InputPlan, mut bytes: &[u8]) -> Result<()> {
        if let Out::Here(out) = &mut self.out {
            if !self.buffer.is_empty() {
                let written = out.write_all(&self.buffer);
                written.map_err(|e| Error::io("write the output", out.name(), e))?;
                self.buffer.clear();
            }
            return write_in_pieces(*out, bytes).map_err(|e| match input.file.open(&input.name) {
                Ok(file) => shrunk_or(e, &input.name, &file, p.data_offset + p.data_len),
                Err(_) => e,
            });
        }
        while !bytes.is_empty() {
            let take = (self.capacity - self.buffer.len()).min(bytes.len());
            self.buffer.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.buffer.len() == self.capacity {
                self.flush()?;
            }
        }
        Ok(())
    }

    /// Copies round `round`'s run of one input, whose `file` is kept open if its runs are
    /// to be copied inside the kernel.
    #[allow(clippy::too_many_arguments)]
    fn run(
        &mut self,
        input: &Tensor,
        p: &InputPlan,
        region: &Region,
        file: Option<&Arc<File>>,
        round: u64,
        index: usize,
        cursors: &mut Cursors,
    ) -> Result<()> {
        if p.run_bytes == 0 {
            return Ok(());
        }
        if let Some(gather) = p.gather() {
            cursors.scattered[index] = true;
            self.gathered_run(input, p, gather, region, round)?;
            cursors.advance(index, p.run_bytes);
            return Ok(());
        }
        let mut start = p.run_at(round) as usize;
        cursors.skip_to(index, start as u64);
        let mut run = &region.bytes()[start..start + p.run_bytes as usize];
        let direct = p.run_bytes >= DIRECT_RUN && p.swaps.is_none() && p.dtype == self.dtype;
        if let (true, Some(file)) = (direct, file) {
            let at = p.data_offset + start as u64;
            let copied = self.copy_in_kernel(&input.name, file, at, p.run_bytes)?;
            // What the kernel declined is written from the map below.
            cursors.advance(index, copied);
            run = &run[copied as usize..];
            start += copied as usize;
        }
        // A run can be a whole input: in pieces, so the pages behind are released as it goes.
        let in_size = p.dtype.itemsize().max(1) as usize;
        let piece_len = (RELEASE_BUDGET as usize / in_size).max(1) * in_size;
        for (k, piece) in run.chunks(piece_len).enumerate() {
            if direct {
                self.write_mapped(input, p, piece)?;
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

    /// Copies one run of an input whose layout differs from the output's: its elements in
    /// the output's order (`gather::Walk`), a buffer's worth at a time, byte-swapped and cast
    /// as they land.
    fn gathered_run(
        &mut self,
        input: &Tensor,
        p: &InputPlan,
        gather: &Gather,
        region: &Region,
        round: u64,
    ) -> Result<()> {
        let bytes = region.bytes();
        let base = gather.start + offset_of(round, &gather.outer_dims, &gather.outer_strides);
        let (dims, strides) = (&gather.run_dims, &gather.run_strides);
        let count: u64 = dims.iter().product();
        let cast = p.dtype != self.dtype;
        let in_size = p.dtype.itemsize() as usize;
        // Gathering jumps across the whole input: within a long run, release all of it
        // whenever a budget's worth has been read, so that the map does not come to hold the
        // whole input. It still holds what each fault maps around every column it touches
        // (64-128 KiB a column: benches/README.md, "Gathers"), whatever the interval.
        let release_every = (RELEASE_BUDGET / in_size.max(1) as u64).max(1);
        let mut until_release = release_every;
        let mut walk = Walk::new(dims, strides, base);
        let mut done = 0;
        while done < count {
            let room = ((self.capacity - self.buffer.len()) / self.itemsize) as u64;
            if room == 0 {
                self.flush()?;
                continue;
            }
            let take = room.min(count - done).min(until_release);
            if cast {
                self.scratch.clear();
                walk.gather(bytes, in_size, take, &mut self.scratch);
                swap_in_place(&mut self.scratch, in_size, &p.swaps);
                cast::convert(&p.dtype, &self.dtype, &self.scratch, &mut self.buffer).map_err(
                    |e| {
                        let at = base + offset_of(done + e.index as u64, dims, strides);
                        cast_refused(input, at / in_size as u64, &self.dtype, e)
                    },
                )?;
            } else {
                let start = self.buffer.len();
                walk.gather(bytes, in_size, take, &mut self.buffer);
                swap_in_place(&mut self.buffer[start..], in_size, &p.swaps);
            }
            done += take;
            until_release -= take;
            if until_release == 0 {
                region.release(0, bytes.len());
                until_release = release_every;
            }
        }
        Ok(())
    }

    /// Copies every round of a plan whose runs are all tiny and unchanged: a buffer's worth
    /// of rounds at a time, each input's runs of that chunk in one specialised strided loop
    /// (which reads a slice's runs `pitch` bytes apart).
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
        // Every byte of a chunk is overwritten by the runs, so each buffer is zeroed once, the
        // first time it is used, and never again: zeroing it per chunk was half of this
        // path's instructions.
        let mut packed = std::mem::take(&mut self.buffer);
        let mut first = 0u64;
        while first < plan.outer {
            if packed.len() < chunk as usize * round_bytes {
                packed.resize(chunk as usize * round_bytes, 0);
            }
            let rounds = chunk.min(plan.outer - first) as usize;
            let mut offset = 0;
            let each = runs.iter().zip(regions).zip(&plan.inputs);
            for (index, ((&run, region), p)) in each.enumerate() {
                let start = p.run_at(first) as usize;
                let pitch = p.pitch() as usize;
                // From the first run's start to the last one's end: for a slice, the gaps
                // between its runs too.
                let span = if run == 0 {
                    0
                } else {
                    (rounds - 1) * pitch + run
                };
                let src = &region.bytes()[start..start + span];
                strided_copy(&mut packed[offset..], round_bytes, src, pitch, run);
                offset += run;
                cursors.skip_to(index, start as u64);
                cursors.advance(index, span as u64);
            }
            self.out.emit(&mut packed, rounds * round_bytes)?;
            first += rounds as u64;
        }
        packed.clear();
        self.buffer = packed;
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if !self.buffer.is_empty() {
            let len = self.buffer.len();
            self.out.emit(&mut self.buffer, len)?;
            self.buffer.clear();
        }
        Ok(())
    }
}

/// The size of a packer's buffers: about `BUFFER`, and at least one element, so that whole
/// elements fit and swaps never straddle a flush.
fn capacity(dtype: &DType) -> usize {
    BUFFER.max(itemsize(dtype))
}

/// The size of an element of `dtype` in bytes: at least 1, and as large as memory can be
/// where the type declares more.
fn itemsize(dtype: &DType) -> usize {
    usize::try_from(dtype.itemsize())
        .unwrap_or(usize::MAX)
        .max(1)
}

/// An empty buffer for a packer. One larger than usual is left to grow as elements arrive:
/// an element type of gigabytes (a hostile `<U4611686018427387903` of shape (0, 3)) costs
/// nothing until data backs it.
fn empty_buffer(dtype: &DType) -> Vec<u8> {
    Vec::with_capacity(if capacity(dtype) == BUFFER { BUFFER } else { 0 })
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

/// Copies runs of `run` bytes from `src`, where they start every `pitch` bytes (`run` for
/// runs back to back, more for a slice's), into `dst` with one run every `stride` bytes.
/// Common run sizes get a loop whose copy size is a constant, which compiles to a few moves
/// instead of a call to memcpy per run.
fn strided_copy(dst: &mut [u8], stride: usize, src: &[u8], pitch: usize, run: usize) {
    macro_rules! specialised {
        ($($n:literal)*) => {
            match run {
                $($n => strided_copy_n::<$n>(dst, stride, src, pitch),)*
                0 => {}
                _ if pitch == run => {
                    for (k, piece) in src.chunks_exact(run).enumerate() {
                        dst[k * stride..k * stride + run].copy_from_slice(piece);
                    }
                }
                _ => {
                    for (k, piece) in src.chunks(pitch).enumerate() {
                        dst[k * stride..k * stride + run].copy_from_slice(&piece[..run]);
                    }
                }
            }
        };
    }
    specialised!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 18 20 24 28 32 36 40 48 56 64 80 96 128);
}

fn strided_copy_n<const N: usize>(dst: &mut [u8], stride: usize, src: &[u8], pitch: usize) {
    if pitch == N {
        for (k, piece) in src.chunks_exact(N).enumerate() {
            let at = k * stride;
            let piece: &[u8; N] = piece.try_into().expect("chunks_exact yields N bytes");
            dst[at..at + N].copy_from_slice(piece);
        }
        return;
    }
    // A slice's runs: each chunk of `pitch` bytes starts with one (the last is the run alone).
    for (k, piece) in src.chunks(pitch).enumerate() {
        let at = k * stride;
        let piece: &[u8; N] = piece[..N].try_into().expect("a chunk holds a run");
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::{Input, OpenOptions};
    use crate::plan::job::{self, JobOptions};
    use crate::sys::spill::Spill;
    use std::path::{Path, PathBuf};

    thread_local! {
        /// Makes every job that packs use a second thread, however small, on this thread.
        pub(super) static FORCE_THREADS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    /// An output in memory that declines kernel copies, as a pipe does, and fails once it
    /// holds `fail_at` bytes.
    struct Memory {
        bytes: Vec<u8>,
        fail_at: usize,
    }

    impl Sink for Memory {
        fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
            if self.bytes.len() + bytes.len() > self.fail_at {
                return Err(std::io::Error::other("the disk is full"));
            }
            self.bytes.extend_from_slice(bytes);
            Ok(())
        }

        fn name(&self) -> &Path {
            Path::new("memory")
        }
    }

    /// Writes a C-order .npy file of `descr` and `shape` whose data is `data`.
    fn npy(dir: &Path, name: &str, descr: &str, shape: &[u64], data: &[u8]) -> PathBuf {
        let dtype = DType::from_name(descr).expect("a type");
        let mut bytes = crate::format::npy::header(&dtype, shape, Layout::C).expect("a header");
        bytes.extend_from_slice(data);
        let path = dir.join(name);
        std::fs::write(&path, bytes).expect("written");
        path
    }

    /// Joins `paths` along `axis` (cast to `cast`) with the engine, on one thread or on two,
    /// into memory that fails at `fail_at` bytes or, for 0, into a file.
    fn join(
        paths: &[PathBuf],
        axis: i64,
        cast: Option<&str>,
        two: bool,
        fail_at: usize,
    ) -> Result<Vec<u8>> {
        let mut head = Vec::new();
        let mut spill = Spill::default();
        let options = OpenOptions {
            format: None,
            keep_open: 0,
            read_whole_up_to: 0,
        };
        let inputs: Vec<Input> = paths
            .iter()
            .enumerate()
            .map(|(i, path)| {
                let path = path.as_path().into();
                Input::open(i + 1, path, options, &mut spill, &mut head, None).unwrap()
            })
            .collect();
        let cast = cast.map(|name| DType::from_name(name).expect("a type"));
        let job = job::build(&inputs, &JobOptions::along(axis, cast.as_ref())).unwrap();
        FORCE_THREADS.set(two);
        let done = if fail_at == 0 {
            // A file, which takes kernel copies.
            let mut out = Scratch::new().unwrap();
            let done = execute(&job[0].plan, &job[0].sources, &mut out);
            let mut file = out.into_file();
            let mut bytes = Vec::new();
            std::io::Seek::rewind(&mut file).unwrap();
            std::io::Read::read_to_end(&mut file, &mut bytes).unwrap();
            done.map(|()| bytes)
        } else {
            let mut out = Memory {
                bytes: Vec::new(),
                fail_at,
            };
            execute(&job[0].plan, &job[0].sources, &mut out).map(|()| out.bytes)
        };
        FORCE_THREADS.set(false);
        done
    }

    /// Little-endian float32 bytes of `0, 1, 2, ...` plus `base`, `count` of them.
    fn floats(count: usize, base: f32) -> Vec<u8> {
        (0..count)
            .flat_map(|i| (i as f32 + base).to_le_bytes())
            .collect()
    }

    /// The rows of `a` (`wa` bytes each) and `b` (`wb` bytes each) side by side.
    fn side_by_side(a: &[u8], wa: usize, b: &[u8], wb: usize) -> Vec<u8> {
        a.chunks(wa)
            .zip(b.chunks(wb))
            .flat_map(|(x, y)| [x, y].concat())
            .collect()
    }

    #[test]
    fn two_threads_write_what_one_writes() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let rows = 50_000;
        // Tiny runs packed in bulk (a last-axis join of widths 3 and 5).
        let (a, b) = (floats(rows * 3, 0.0), floats(rows * 5, 0.5));
        let last = [
            npy(d, "a.npy", "float32", &[rows as u64, 3], &a),
            npy(d, "b.npy", "float32", &[rows as u64, 5], &b),
        ];
        // A run of 512 KiB copied as it is, beside a small one packed.
        let (c, e) = (floats(4 * 131_072, 1.0), floats(4 * 3, 2.0));
        let mixed = [
            npy(d, "c.npy", "float32", &[4, 131_072], &c),
            npy(d, "e.npy", "float32", &[4, 3], &e),
        ];
        // A cast, one input at a time.
        // Integers up to 2048, which float16 holds exactly.
        let small = |i: usize| (i % 2048) as f32;
        let half: Vec<u8> = (0..rows)
            .flat_map(|i| half::f16::from_f32(small(i)).to_le_bytes())
            .collect();
        let cast = [
            npy(d, "h.npy", "float16", &[rows as u64], &half),
            npy(d, "f.npy", "float32", &[rows as u64], &a[..rows * 4]),
        ];
        let widened: Vec<u8> = (0..rows).flat_map(|i| small(i).to_le_bytes()).collect();
        // Inputs, axis, cast, and the expected output.
        type Case<'p> = (&'p [PathBuf], i64, Option<&'static str>, Vec<u8>);
        let cases: [Case; 3] = [
            (&last, 1, None, side_by_side(&a, 12, &b, 20)),
            (&mixed, 1, None, side_by_side(&c, 4 * 131_072, &e, 12)),
            (
                &cast,
                0,
                Some("float32"),
                [widened, a[..rows * 4].to_vec()].concat(),
            ),
        ];
        for (paths, axis, cast, expected) in cases {
            for (two, fail_at) in [
                (false, usize::MAX),
                (true, usize::MAX),
                (false, 0),
                (true, 0),
            ] {
                let joined = join(paths, axis, cast, two, fail_at).unwrap();
                assert!(
                    joined == expected,
                    "{} on {} threads, into {}",
                    crate::messages::path(&paths[0]),
                    1 + two as u8,
                    if fail_at == 0 { "a file" } else { "memory" }
                );
            }
        }
    }

    #[test]
    fn inputs_read_through_the_buffer_keep_their_order_across_flushes() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        // A small input, one read in pieces (past the buffer, under `READ_INPUT`; its data
        // starts 128 bytes into a page, so the kernel declines it), and a small one again.
        let sizes = [1000, (BUFFER + BUFFER / 2) / 4, 10];
        let data: Vec<Vec<u8>> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| floats(n, i as f32 * 0.25))
            .collect();
        let paths: Vec<PathBuf> = data
            .iter()
            .enumerate()
            .map(|(i, bytes)| {
                let name = format!("{i}.npy");
                npy(d, &name, "float32", &[bytes.len() as u64 / 4], bytes)
            })
            .collect();
        for fail_at in [usize::MAX, 0] {
            let joined = join(&paths, 0, None, false, fail_at).unwrap();
            assert!(joined == data.concat(), "into {}", fail_at == 0);
        }
    }

    #[test]
    fn a_failed_write_stops_both_threads_with_its_error() {
        let dir = tempfile::tempdir().unwrap();
        let rows = 100_000;
        let paths = [
            npy(
                dir.path(),
                "a.npy",
                "float32",
                &[rows, 3],
                &floats(rows as usize * 3, 0.0),
            ),
            npy(
                dir.path(),
                "b.npy",
                "float32",
                &[rows, 5],
                &floats(rows as usize * 5, 0.0),
            ),
        ];
        for two in [false, true] {
            let Err(error) = join(&paths, 1, None, two, 3 << 20) else {
                panic!("the write did not fail");
            };
            assert!(error.to_string().contains("the disk is full"), "{error}");
        }
    }

    #[test]
    fn a_refused_cast_on_the_packing_thread_is_the_error() {
        let dir = tempfile::tempdir().unwrap();
        let rows = 300_000usize;
        let mut data: Vec<u8> = (0..rows)
            .flat_map(|i| ((i % 100) as i32).to_le_bytes())
            .collect();
        data[rows * 4 - 4..].copy_from_slice(&1000i32.to_le_bytes());
        let paths = [npy(dir.path(), "a.npy", "int32", &[rows as u64], &data)];
        for two in [false, true] {
            let Err(error) = join(&paths, 0, Some("int8"), two, usize::MAX) else {
                panic!("the cast was not refused");
            };
            assert!(
                error.to_string().contains(&format!("number {}", rows - 1)),
                "{error}"
            );
        }
    }

    /// Writes an .npz archive holding one member `x.npy`, stored: a float32 .npy file of
    /// `shape` whose data is `data` followed by `zeros` zero bytes (left a hole in the file,
    /// so that a large member costs no writing). Its recorded CRC-32 is right, or, when
    /// `damaged`, one bit off.
    pub(super) fn stored_npz(
        dir: &Path,
        name: &str,
        shape: &[u64],
        data: &[u8],
        zeros: u64,
        damaged: bool,
    ) -> PathBuf {
        use std::io::{Seek, SeekFrom, Write};
        const NAME: &[u8] = b"x.npy";
        let header = crate::format::npy::header(&DType::Float32, shape, Layout::C).unwrap();
        let mut crc = crc32fast::Hasher::new();
        crc.update(&header);
        crc.update(data);
        let block = vec![0u8; 1 << 20];
        let mut left = zeros;
        while left > 0 {
            let n = left.min(block.len() as u64);
            crc.update(&block[..n as usize]);
            left -= n;
        }
        let crc = crc.finalize() ^ u32::from(damaged);
        let size = (header.len() + data.len()) as u64 + zeros;
        // The fields a local header and a central directory entry share, from the version
        // needed to the extra field's length.
        let mut fields = Vec::new();
        for half in [20u16, 0, 0, 0, 0x21] {
            fields.extend_from_slice(&half.to_le_bytes()); // version, flags, stored, time, date
        }
        fields.extend_from_slice(&crc.to_le_bytes());
        fields.extend_from_slice(&(size as u32).to_le_bytes());
        fields.extend_from_slice(&(size as u32).to_le_bytes());
        fields.extend_from_slice(&(NAME.len() as u16).to_le_bytes());
        fields.extend_from_slice(&0u16.to_le_bytes());
        let path = dir.join(name);
        let mut file = std::fs::File::create(&path).unwrap();
        file.write_all(&[b"PK\x03\x04", &fields[..], NAME, &header, data].concat())
            .unwrap();
        let directory_at = 4 + fields.len() as u64 + NAME.len() as u64 + size;
        file.set_len(directory_at).unwrap();
        file.seek(SeekFrom::Start(directory_at)).unwrap();
        let mut directory = [b"PK\x01\x02", &20u16.to_le_bytes()[..], &fields].concat();
        directory.extend_from_slice(&[0; 14]); // comment, disk, attributes, local header at 0
        directory.extend_from_slice(NAME);
        let mut end = b"PK\x05\x06\0\0\0\0\x01\0\x01\0".to_vec();
        end.extend_from_slice(&(directory.len() as u32).to_le_bytes());
        end.extend_from_slice(&(directory_at as u32).to_le_bytes());
        end.extend_from_slice(&0u16.to_le_bytes());
        file.write_all(&[directory, end].concat()).unwrap();
        path
    }

    /// Joins `paths` on `axis` on one thread and on two, into memory and into a file, and
    /// checks that each join fails the CRC-32 check of input 2's member.
    fn refused_for_its_crc(paths: &[PathBuf], axis: i64) {
        for (two, fail_at) in [
            (false, usize::MAX),
            (true, usize::MAX),
            (false, 0),
            (true, 0),
        ] {
            let Err(error) = join(paths, axis, None, two, fail_at) else {
                let into = if fail_at == 0 { "a file" } else { "memory" };
                panic!("a damaged member was joined, two threads: {two}, into {into}");
            };
            let error = error.to_string();
            assert!(error.starts_with("input 2 ("), "{error}");
            assert!(error.contains("bad.npz:x)"), "{error}");
            assert!(error.contains("x.npy fails its CRC-32 check"), "{error}");
        }
    }

    #[test]
    #[allow(clippy::disallowed_macros)] // its note of a skip is the test's, not tjoin's
    fn jobs_that_change_bytes_or_pack_tiny_runs_take_a_second_thread_from_thread_min() {
        if !std::thread::available_parallelism().is_ok_and(|n| n.get() > 1) {
            eprintln!("skipped: one core, where no job takes a second thread");
            return;
        }
        let f32 = DType::from_name("float32").unwrap();
        let input = |dtype: &str, run_bytes: u64, swaps: Swaps| InputPlan {
            data_offset: 128,
            data_len: THREAD_MIN,
            run_bytes,
            dtype: DType::from_name(dtype).unwrap(),
            swaps,
            runs: None,
        };
        let plan = |inputs: Vec<InputPlan>, bytes: u64| JoinPlan {
            axis: 1,
            dtype: f32.clone(),
            shape: vec![bytes / 4],
            layout: Layout::C,
            outer: THREAD_MIN / 4096,
            inputs,
            bytes,
        };
        let decide = |inputs: Vec<InputPlan>, bytes| threads(&plan(inputs, bytes), true);
        let kib = |k: u64| k << 10;
        // A cast (float16 to float32) and a byte swap, beside an input as it is.
        let cast = || {
            vec![
                input("float16", kib(2), Swaps::None),
                input("float32", kib(4), Swaps::None),
            ]
        };
        let swap = || {
            vec![
                input("float32", kib(4), Swaps::Uniform(4)),
                input("float32", kib(4), Swaps::None),
            ]
        };
        assert!(decide(cast(), THREAD_MIN));
        assert!(decide(swap(), THREAD_MIN));
        // Tiny runs as they are, packed in bulk.
        assert!(decide(
            vec![
                input("float32", 12, Swaps::None),
                input("float32", 20, Swaps::None)
            ],
            THREAD_MIN
        ));
        // Below THREAD_MIN a thread costs more than it saves.
        assert!(!decide(cast(), THREAD_MIN - 1));
        // Runs of a few KiB as they are: too long to pack in bulk, and nothing to change.
        let plain = vec![
            input("float32", kib(200), Swaps::None),
            input("float32", kib(200), Swaps::None),
        ];
        assert!(!decide(plain, THREAD_MIN));
    }

    #[test]
    fn a_damaged_member_is_refused_by_the_packing_thread_of_a_large_join() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        // A last-axis join of widths 3 and 5 of at least THREAD_MIN bytes: the size at which
        // the packing moves to a second thread of its own (with a second core).
        let rows = THREAD_MIN / 32;
        let good = stored_npz(d, "good.npz", &[rows, 3], &[], rows * 12, false);
        let bad = stored_npz(d, "bad.npz", &[rows, 5], &[], rows * 20, true);
        refused_for_its_crc(&[good.clone(), bad], 1);
        let fixed = stored_npz(d, "bad.npz", &[rows, 5], &[], rows * 20, false);
        let joined = join(&[good, fixed], 1, None, false, usize::MAX).unwrap();
        assert_eq!(joined.len() as u64, THREAD_MIN);
    }

    #[test]
    fn a_damaged_member_is_refused_where_long_runs_take_a_kernel_copy() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        // Runs of 512 KiB, long enough to be copied inside the kernel, beside tiny ones.
        let (c, e) = (floats(4 * 131_072, 1.0), floats(4 * 3, 2.0));
        let tiny = stored_npz(d, "tiny.npz", &[4, 3], &e, 0, false);
        let bad = stored_npz(d, "bad.npz", &[4, 131_072], &c, 0, true);
        refused_for_its_crc(&[tiny.clone(), bad], 1);
        // Each joined whole, on axis 0, as one copy of each input.
        let first = stored_npz(d, "first.npz", &[4, 131_072], &c, 0, false);
        let bad = stored_npz(d, "bad.npz", &[4, 131_072], &c, 0, true);
        refused_for_its_crc(&[first.clone(), bad], 0);
        let fixed = stored_npz(d, "bad.npz", &[4, 131_072], &c, 0, false);
        let joined = join(&[tiny, fixed], 1, None, false, 0).unwrap();
        assert!(joined == side_by_side(&e, 12, &c, 4 * 131_072));
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
            strided_copy(&mut dst, stride, &src, run, run);
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
