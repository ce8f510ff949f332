//! One tensor cut into parts (`tjoin split`) in one pass over its data: each part is a job
//! whose one source is a slice of the tensor along the split axis, and written one after
//! another each would read every page of the tensor once per part when the axis is not the
//! first (a round holds a run of every part). Here the tensor is read once, front to back:
//! each round's runs go to their parts' sinks in order, through a buffer per part, flushed
//! when full; runs of at least `DIRECT_RUN` bytes are written straight from the map. For a
//! large tensor, where a second core is free, two threads share the work (`Mode`): each
//! copies and writes half of the parts, or, where the halves would be uneven, one copies
//! while the other writes. The buffers are kept from one tensor to the next (`Splitter`).
//!
//! What the pass does not do is left to the per-part path (`super::execute`), part after
//! part, with the same bytes as a result: parts of one round (a split on the first axis)
//! whose data start on a page, where the kernel may copy them, or whose CRC-32 is checked
//! (that path reads it apart from the writes); byte swaps, casts and gathered (re-laid-out)
//! sources; and parts that are not slices of one tensor in order. Other first-axis parts go
//! through the pass, which writes each from one map of the tensor.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};

use super::threads::stopped;
use super::{Cursors, DIRECT_RUN, RELEASE_BUDGET, map};
use crate::error::{Error, Result};
use crate::format::Sink;
use crate::input::Tensor;
use crate::plan::{InputPlan, JoinPlan};
use crate::sys::Region;

/// The bytes of all the parts' buffers together, at most.
const BUFFERS_TOTAL: usize = 16 << 20;
/// The largest buffer of a part.
const PART_BUFFER: usize = 1 << 20;
/// The smallest buffer of a part: below it a write costs more than its bytes' copy.
const PART_BUFFER_MIN: usize = 64 << 10;
/// Tensors of at least this many bytes to split take two threads; below it a thread costs
/// more than it saves.
const THREAD_MIN: u64 = 4 << 20;
/// The page size the kernel copies whole pages of. A first-axis part goes to the kernel's
/// copy only where its data start on one: unlike the join's engine, which copies at any
/// offset, the split keeps the rule, as measured on Linux 6.18 (two cores at a load of 11 to
/// 14, whole process, 21 pairs, 512 MiB of float32 into 2 parts). From data 128 bytes into
/// a page into .npy parts (data 128 bytes in too: the same place in a page), the kernel's
/// copy took the CPU of the pass's writes from one map (median of pairs 1.00; 0.197 s
/// against 0.236 s) and 0.89 of its wall time, with 30 MiB less resident; into .safetensors
/// parts (data 136 bytes in), 1.29 times its CPU (0.302 s against 0.240 s) and 1.13 its
/// wall time. A split's outputs seldom hold their data at the input's place in a page (a
/// safetensors header's length is anyone's), so an odd offset stays the pass's.
const PAGE: u64 = 4096;
/// The most parts the pass writes at once; more go part after part, whose buffers would
/// otherwise pass `BUFFERS_TOTAL`.
const MOST_PARTS: usize = BUFFERS_TOTAL / PART_BUFFER_MIN;

/// One part of a split tensor: its plan and its sources (a job's), and where it goes.
pub struct Part<'p, 'a> {
    /// The job's plan.
    pub plan: &'p JoinPlan,
    /// The job's sources, one per entry of `plan.inputs`.
    pub sources: &'p [&'a Tensor],
}

/// The CPU engine of a split, kept for all of its tensors: the parts' buffers of one
/// tensor's pass are given back to it and lent to the next tensor's, so that a split of many
/// tensors does not take fresh pages for every one (a 1 GiB checkpoint into 4 ranks faulted in
/// 35,000 pages instead of 5,000, 20% of its time).
#[derive(Default)]
pub struct Splitter {
    /// Empty buffers of one capacity, the last pass's.
    pool: Vec<Vec<u8>>,
}

impl Splitter {
    /// Writes the data of every part of one split tensor, each into its sink (`outs[k]` for
    /// `parts[k]`): in one pass over the tensor when the parts are slices of it along one
    /// axis in order, as they are, else part after part. Fails with the first failure of a
    /// sink or of the input (a stored .npz member's CRC-32 check, checked before it returns).
    pub fn execute(&mut self, parts: &[Part], outs: &mut [&mut dyn Sink]) -> Result<()> {
        debug_assert_eq!(parts.len(), outs.len());
        match one_pass(parts) {
            Some(pass) => pass.run(parts, outs, self),
            None => {
                for (part, out) in parts.iter().zip(outs.iter_mut()) {
                    super::execute(part.plan, part.sources, *out)?;
                }
                Ok(())
            }
        }
    }

    /// An empty buffer of `size` bytes' capacity: one given back, or a new one. Buffers of
    /// another capacity are let go.
    fn take(&mut self, size: usize) -> Vec<u8> {
        if self.pool.last().is_some_and(|b| b.capacity() != size) {
            self.pool.clear();
        }
        self.pool.pop().unwrap_or_else(|| Vec::with_capacity(size))
    }

    /// Keeps `buffers` for the next pass.
    fn give(&mut self, buffers: impl IntoIterator<Item = Vec<u8>>) {
        self.pool.extend(buffers.into_iter().map(|mut b| {
            b.clear();
            b
        }));
    }
}

/// Writes the data of every part of one split tensor, each into its sink, as
/// `Splitter::execute` does, with buffers of its own.
#[cfg(test)]
pub(super) fn execute(parts: &[Part], outs: &mut [&mut dyn Sink]) -> Result<()> {
    Splitter::default().execute(parts, outs)
}

/// Whether `parts` are written in one pass (else part after part).
#[cfg(test)]
pub(super) fn takes_one_pass(parts: &[Part]) -> bool {
    one_pass(parts).is_some()
}

/// The mode the pass that writes `parts` takes, if one does: "one", "halves" or "packer".
#[cfg(test)]
pub(super) fn pass_mode(parts: &[Part]) -> Option<&'static str> {
    let pass = one_pass(parts)?;
    let plans: Vec<&InputPlan> = pass
        .active
        .iter()
        .map(|&k| &parts[k].plan.inputs[0])
        .collect();
    Some(match pass.mode(&plans) {
        Mode::One => "one",
        Mode::Halves(_) => "halves",
        Mode::Packer => "packer",
    })
}

/// A pass over one tensor: the tensor, its rounds, and which parts have bytes.
struct Pass<'a> {
    tensor: &'a Tensor,
    outer: u64,
    /// The parts with bytes, in order.
    active: Vec<usize>,
}

/// The pass that writes `parts`, if one does: at least two of them have bytes; each is one
/// slice, as it is stored (no swap, cast or gather), of the same tensor, in rounds of the
/// same count, more than one, and the same pitch; and within a round their runs follow one
/// another in the parts' order without overlapping.
fn one_pass<'a>(parts: &[Part<'_, 'a>]) -> Option<Pass<'a>> {
    if parts.len() > MOST_PARTS {
        return None;
    }
    let active: Vec<usize> = (0..parts.len())
        .filter(|&k| parts[k].plan.bytes > 0)
        .collect();
    if active.len() < 2 {
        return None;
    }
    let first = &parts[active[0]];
    let tensor = *first.sources.first()?;
    let outer = first.plan.outer;
    let pitch = first.plan.inputs.first()?.pitch();
    // A split on the first axis (one round) is the per-part path's where the kernel may copy
    // its parts (the data start on a page) or a CRC-32 check is read apart from the writes
    // (`Packer::whole_input`); elsewhere the pass writes each part from one map of the
    // tensor, where the per-part path reads a part of up to `READ_INPUT` through a buffer.
    let first_axis = outer == 1
        && (first.plan.inputs.first()?.data_offset % PAGE == 0 || tensor.stored_crc.is_some());
    if outer == 0 || first_axis {
        return None;
    }
    let mut end = 0;
    for &k in &active {
        let Part { plan, sources } = &parts[k];
        let [p] = &plan.inputs[..] else { return None };
        let as_stored = p.gather().is_none() && p.swaps.is_none() && p.dtype == plan.dtype;
        let same = sources.len() == 1 && std::ptr::eq(sources[0], tensor);
        if !as_stored || !same || plan.outer != outer || p.pitch() != pitch {
            return None;
        }
        let start = p.run_at(0);
        if start < end || p.run_bytes == 0 {
            return None;
        }
        end = start + p.run_bytes;
    }
    (end <= pitch).then_some(Pass {
        tensor,
        outer,
        active,
    })
}

impl Pass<'_> {
    /// Reads the tensor once, front to back, handing each round's runs to their parts: on
    /// this thread; or, for a large tensor where a second core is free, on two threads
    /// (`Mode`), so that the copies and the writes of the parts' runs take both cores.
    fn run(&self, parts: &[Part], outs: &mut [&mut dyn Sink], pool: &mut Splitter) -> Result<()> {
        let plans: Vec<&InputPlan> = self
            .active
            .iter()
            .map(|&k| &parts[k].plan.inputs[0])
            .collect();
        let regions = [map(self.tensor, plans[0])?];
        let size = (BUFFERS_TOTAL / self.active.len()).clamp(PART_BUFFER_MIN, PART_BUFFER);
        let mut buffers: Vec<Vec<u8>> = plans.iter().map(|_| pool.take(size)).collect();
        let all = 0..plans.len();
        let done = match self.mode(&plans) {
            Mode::One => {
                let mut to = To::Here { outs, first: 0 };
                self.pack(&plans, all, &regions, &mut buffers, &mut to, None)
            }
            Mode::Halves(second) => self.halves(&plans, second, &regions, &mut buffers, outs),
            Mode::Packer => {
                let (done, spares) = self.packer(&plans, &regions, &mut buffers, outs, size, pool);
                pool.give(spares);
                done
            }
        };
        pool.give(buffers);
        done
    }

    /// How the pass runs: on this thread below `THREAD_MIN` bytes or without a second core;
    /// else in two halves where they come out even enough (neither has more than 2/3 of the
    /// bytes) and no CRC-32 must be read in order; else with a copying thread where at least
    /// `THREAD_MIN` bytes are copied into buffers. Tests can force two threads.
    fn mode(&self, plans: &[&InputPlan]) -> Mode {
        let runs: Vec<u64> = plans.iter().map(|p| p.run_bytes).collect();
        let total: u64 = runs.iter().sum();
        // The bytes copied into buffers (longer runs are written from the map).
        let copied: u64 = runs.iter().filter(|&&run| run < DIRECT_RUN).sum();
        #[cfg(test)]
        let forced = super::tests::FORCE_THREADS.get();
        #[cfg(not(test))]
        let forced = false;
        let cores = std::thread::available_parallelism().is_ok_and(|n| n.get() > 1);
        if !forced && (total * self.outer < THREAD_MIN || !cores) {
            return Mode::One;
        }
        // The parts cut in two halves in order, where the halves' bytes come closest.
        let (mut first, mut best) = (0, (0, u64::MAX));
        for (slot, run) in runs.iter().enumerate().take(runs.len() - 1) {
            first += run;
            let larger = first.max(total - first);
            if larger < best.1 {
                best = (slot + 1, larger);
            }
        }
        if self.tensor.stored_crc.is_none() && best.1 * 3 <= total * 2 {
            Mode::Halves(best.0)
        } else if forced || copied * self.outer >= THREAD_MIN {
            Mode::Packer
        } else {
            Mode::One
        }
    }

    /// Each half of the parts (slots `..second` and `second..`) on a thread of its own, each
    /// copying and writing its parts' runs as `Mode::One` does (first-axis parts, written
    /// from the map, are written by both cores so too); a failure on either stops both, and
    /// the first is returned.
    fn halves(
        &self,
        plans: &[&InputPlan],
        second: usize,
        regions: &[Region; 1],
        buffers: &mut [Vec<u8>],
        outs: &mut [&mut dyn Sink],
    ) -> Result<()> {
        let stop = AtomicBool::new(false);
        let (left, right) = outs.split_at_mut(self.active[second]);
        let (buffers_left, buffers_right) = buffers.split_at_mut(second);
        let half = |slots: Range<usize>, outs, first, buffers: &mut [Vec<u8>]| {
            let mut to = To::Here { outs, first };
            let done = self.pack(plans, slots, regions, buffers, &mut to, Some(&stop));
            // The first failure stops the other half; whether it was first is kept.
            let first = done.is_err() && !stop.swap(true, Ordering::Relaxed);
            (done, first)
        };
        std::thread::scope(|scope| {
            let other = scope.spawn(|| {
                half(
                    second..plans.len(),
                    right,
                    self.active[second],
                    buffers_right,
                )
            });
            let (mine, mine_first) = half(0..second, left, 0, buffers_left);
            let (theirs, _) = other
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            if mine_first {
                mine.and(theirs)
            } else {
                theirs.and(mine)
            }
        })
    }

    /// A second thread copies the runs into the parts' buffers while this one writes what it
    /// fills, as the join's packer does. Returns the spare buffers, for the next tensor.
    fn packer(
        &self,
        plans: &[&InputPlan],
        regions: &[Region; 1],
        buffers: &mut [Vec<u8>],
        outs: &mut [&mut dyn Sink],
        size: usize,
        pool: &mut Splitter,
    ) -> (Result<()>, Vec<Vec<u8>>) {
        let (pieces, received) = mpsc::sync_channel(SPARE_BUFFERS);
        let (spares, spare) = mpsc::channel();
        for _ in 0..SPARE_BUFFERS {
            let _ = spares.send(pool.take(size));
        }
        std::thread::scope(|scope| {
            let packer = scope.spawn(move || {
                let mut to = To::Sent {
                    pieces,
                    spare: &spare,
                };
                let done = self.pack(plans, 0..plans.len(), regions, buffers, &mut to, None);
                // The end of the pieces' channel closes here, which ends the writer's loop;
                // the spares' end goes back, to take back what the writer gives back.
                drop(to);
                (done, spare)
            });
            // Returning drops the channels' ends (`received` and `spares`), which wakes a
            // packer waiting on either.
            let written = self.write_pieces(received, spares, &regions[0], outs);
            let (packed, spare) = packer
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            // The writer is done: every buffer it wrote is back.
            (written.and(packed), spare.try_iter().collect())
        })
    }

    /// Walks the rounds for the parts of `slots`, copying each run shorter than `DIRECT_RUN`
    /// into its part's buffer (`buffers[slot - slots.start]`), handed to `to` when full; a
    /// longer run is handed over as a piece of the map. Checks the input's CRC-32 (a stored
    /// .npz member) at the end. Stops early, failing, once `stop` is set (the other half
    /// failed).
    fn pack(
        &self,
        plans: &[&InputPlan],
        slots: Range<usize>,
        regions: &[Region; 1],
        buffers: &mut [Vec<u8>],
        to: &mut To,
        stop: Option<&AtomicBool>,
    ) -> Result<()> {
        let mut cursors = Cursors::new(regions, &[self.tensor]);
        for round in 0..self.outer {
            if stop.is_some_and(|stop| stop.load(Ordering::Relaxed)) {
                return Err(stopped());
            }
            for slot in slots.clone() {
                let p = plans[slot];
                let part = self.active[slot];
                let at = p.run_at(round);
                // The plan's runs lie inside the tensor's data, whose length the header
                // declared and the map holds.
                let run = at as usize..(at + p.run_bytes) as usize;
                cursors.skip_to(0, at);
                let buffer = &mut buffers[slot - slots.start];
                if p.run_bytes >= DIRECT_RUN {
                    to.flush(part, buffer)?;
                    // In pieces, each released once written, so that a long run does not
                    // keep its pages in this process's memory.
                    for start in run.clone().step_by(RELEASE_BUDGET as usize) {
                        let end = (start + RELEASE_BUDGET as usize).min(run.end);
                        to.mapped(self, part, &regions[0], start..end)?;
                        cursors.advance(0, (end - start) as u64);
                    }
                } else {
                    if buffer.len() + run.len() > buffer.capacity() {
                        to.flush(part, buffer)?;
                    }
                    buffer.extend_from_slice(&regions[0].bytes()[run]);
                    cursors.advance(0, p.run_bytes);
                }
            }
        }
        for (slot, buffer) in slots.clone().zip(buffers.iter_mut()) {
            to.flush(self.active[slot], buffer)?;
        }
        cursors.verify()
    }

    /// The writing side when a second thread copies: writes each piece to its part's sink as
    /// it comes, giving the buffers back, until the copying is done or a write fails.
    fn write_pieces(
        &self,
        pieces: Receiver<Piece>,
        spares: Sender<Vec<u8>>,
        region: &Region,
        outs: &mut [&mut dyn Sink],
    ) -> Result<()> {
        for piece in pieces {
            match piece {
                Piece::Packed { part, mut buffer } => {
                    flush(&mut buffer, &mut *outs[part])?;
                    let _ = spares.send(buffer);
                }
                Piece::Mapped { part, run } => self.write_mapped(&mut *outs[part], region, run)?,
            }
        }
        Ok(())
    }

    /// Writes bytes of the tensor's map to `out`; a failure is the input's when it is now
    /// shorter than its header said (a write from a map's lost pages fails), else `out`'s.
    fn write_mapped(&self, out: &mut dyn Sink, region: &Region, run: Range<usize>) -> Result<()> {
        let written = super::direct::write_in_pieces(out, &region.bytes()[run.clone()]);
        // The pages are not read again (the cursors' releases may have passed them already
        // when a second thread copies the rest).
        region.release(run.start, run.end);
        written.map_err(|error| {
            let info = &self.tensor.info;
            match self.tensor.file.open(&self.tensor.name) {
                Ok(file) => super::direct::shrunk_or(
                    error,
                    &self.tensor.name,
                    &file,
                    info.data_offset + info.data_len,
                ),
                Err(_) => error,
            }
        })
    }
}

/// Buffers in flight between the copying thread and the writing one, beside each part's own.
const SPARE_BUFFERS: usize = 4;

/// What the copying thread hands the writing one.
enum Piece {
    /// A part's filled buffer, which comes back (emptied) to be filled again.
    Packed { part: usize, buffer: Vec<u8> },
    /// A range of the tensor's map, written as it is.
    Mapped { part: usize, run: Range<usize> },
}

/// How a pass runs.
enum Mode {
    /// On this thread.
    One,
    /// The parts in two halves, the second starting at this slot, each on a thread of its
    /// own that copies and writes its parts' runs: both cores copy and write.
    Halves(usize),
    /// A second thread copies every run while this one writes: where the halves would be
    /// uneven, or the tensor's CRC-32 must be checked in order.
    Packer,
}

/// Where the pass's pieces go.
enum To<'o, 's> {
    /// Written on this thread, to the parts' sinks from part `first` on.
    Here {
        outs: &'o mut [&'s mut dyn Sink],
        first: usize,
    },
    /// Handed to the writing thread, which gives each buffer back once written.
    Sent {
        pieces: SyncSender<Piece>,
        spare: &'o Receiver<Vec<u8>>,
    },
}

impl To<'_, '_> {
    /// Hands over what `buffer` holds for `part`, leaving it empty (the same buffer, or a
    /// spare the writing thread gave back).
    fn flush(&mut self, part: usize, buffer: &mut Vec<u8>) -> Result<()> {
        if buffer.is_empty() {
            return Ok(());
        }
        match self {
            To::Here { outs, first } => flush(buffer, &mut *outs[part - *first]),
            To::Sent { pieces, spare } => {
                let full = std::mem::replace(buffer, spare.recv().map_err(|_| stopped())?);
                pieces
                    .send(Piece::Packed { part, buffer: full })
                    .map_err(|_| stopped())
            }
        }
    }

    /// Hands over `run` of the tensor's map (`region`) for `part`, written as it is.
    fn mapped(
        &mut self,
        pass: &Pass,
        part: usize,
        region: &Region,
        run: Range<usize>,
    ) -> Result<()> {
        match self {
            To::Here { outs, first } => pass.write_mapped(&mut *outs[part - *first], region, run),
            To::Sent { pieces, .. } => pieces
                .send(Piece::Mapped { part, run })
                .map_err(|_| stopped()),
        }
    }
}

/// Writes what `buffer` holds to `out` and empties it.
fn flush(buffer: &mut Vec<u8>, out: &mut dyn Sink) -> Result<()> {
    if buffer.is_empty() {
        return Ok(());
    }
    let written = out.write_all(buffer);
    written.map_err(|e| Error::io("write the output", out.name(), e))?;
    buffer.clear();
    Ok(())
}

/// Checks the CRC-32 of `tensor` over `data`, all of its data, if it is a stored .npz
/// member: for an engine that read it whole without the cursors (DirectML's Split).
pub fn verify_whole(tensor: &Tensor, data: &[u8]) -> Result<()> {
    let Some((name, mut check)) = tensor.crc_check() else {
        return Ok(());
    };
    check.hasher.update(data);
    check.verify(&name)
}

#[cfg(test)]
mod tests;
