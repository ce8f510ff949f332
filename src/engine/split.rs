//! One tensor cut into parts (`tjoin split`) in one pass over its data: each part is a job
//! whose one source is a slice of the tensor along the split axis, and written one after
//! another each would read every page of the tensor once per part when the axis is not the
//! first (a round holds a run of every part). Here the tensor is read once, front to back:
//! each round's runs go to their parts' sinks in order, through a buffer per part, flushed
//! when full; runs of at least `DIRECT_RUN` bytes are written straight from the map.
//!
//! What the pass does not do is left to the per-part path (`super::execute`), part after
//! part, with the same bytes as a result: parts of one round (`outer == 1`, a split on the
//! first axis), which that path copies inside the kernel or from the map already, each
//! reading only its own bytes; byte swaps, casts and gathered (re-laid-out) sources; and
//! parts that are not slices of one tensor in order.

use super::{Cursors, DIRECT_RUN, map};
use crate::error::{Error, Result};
use crate::format::Sink;
use crate::input::Tensor;
use crate::plan::{InputPlan, JoinPlan};

/// The bytes of all the parts' buffers together, at most.
const BUFFERS_TOTAL: usize = 16 << 20;
/// The largest buffer of a part.
const PART_BUFFER: usize = 1 << 20;
/// The smallest buffer of a part: below it a write costs more than its bytes' copy.
const PART_BUFFER_MIN: usize = 64 << 10;
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

/// Writes the data of every part of one split tensor, each into its sink (`outs[k]` for
/// `parts[k]`): in one pass over the tensor when the parts are slices of it along one axis
/// in order, as they are, else part after part. Fails with the first failure of a sink or
/// of the input (a stored .npz member's CRC-32 check, checked before it returns).
pub fn execute(parts: &[Part], outs: &mut [&mut dyn Sink]) -> Result<()> {
    debug_assert_eq!(parts.len(), outs.len());
    match one_pass(parts) {
        Some(pass) => pass.run(parts, outs),
        None => {
            for (part, out) in parts.iter().zip(outs.iter_mut()) {
                super::execute(part.plan, part.sources, *out)?;
            }
            Ok(())
        }
    }
}

/// Whether `parts` are written in one pass (else part after part).
#[cfg(test)]
pub(super) fn takes_one_pass(parts: &[Part]) -> bool {
    one_pass(parts).is_some()
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
    if outer <= 1 {
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
    /// Reads the tensor once, front to back, handing each round's runs to their parts.
    fn run(&self, parts: &[Part], outs: &mut [&mut dyn Sink]) -> Result<()> {
        let plans: Vec<&InputPlan> = self
            .active
            .iter()
            .map(|&k| &parts[k].plan.inputs[0])
            .collect();
        let region = map(self.tensor, plans[0])?;
        let regions = [region];
        let mut cursors = Cursors::new(&regions, &[self.tensor]);
        let bytes = regions[0].bytes();
        let size = (BUFFERS_TOTAL / self.active.len()).clamp(PART_BUFFER_MIN, PART_BUFFER);
        let mut buffers: Vec<Vec<u8>> = self
            .active
            .iter()
            .map(|_| Vec::with_capacity(size))
            .collect();
        for round in 0..self.outer {
            for (slot, p) in plans.iter().enumerate() {
                let out = &mut *outs[self.active[slot]];
                let at = p.run_at(round);
                // The plan's runs lie inside the tensor's data, whose length the header
                // declared and the map holds.
                let run = &bytes[at as usize..(at + p.run_bytes) as usize];
                cursors.skip_to(0, at);
                let buffer = &mut buffers[slot];
                if p.run_bytes >= DIRECT_RUN {
                    flush(buffer, out)?;
                    self.write_mapped(out, run)?;
                } else {
                    if buffer.len() + run.len() > buffer.capacity() {
                        flush(buffer, out)?;
                    }
                    buffer.extend_from_slice(run);
                }
                cursors.advance(0, p.run_bytes);
            }
        }
        for (slot, buffer) in buffers.iter_mut().enumerate() {
            flush(buffer, &mut *outs[self.active[slot]])?;
        }
        cursors.verify()
    }

    /// Writes bytes of the tensor's map to `out`; a failure is the input's when it is now
    /// shorter than its header said (a write from a map's lost pages fails), else `out`'s.
    fn write_mapped(&self, out: &mut dyn Sink, run: &[u8]) -> Result<()> {
        super::direct::write_in_pieces(out, run).map_err(|error| {
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
