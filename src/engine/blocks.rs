//! Writes a block grid cut on several axes (`src/plan/grid.rs`): a join of joins, walked in the
//! output's C order. For each round before the first cut axis, each of its segments in turn
//! repeats, once per row it spans, the same walk over the next cut axis; at the last cut axis
//! each block of the current grid row gives its next run. Every block is read front to back
//! (one cursor each) and the output is written front to back, through the engine's buffer and
//! page releases, so memory stays bounded whatever the tensor's size. A block in object
//! storage is read by range, front to back, through a window of its own (`ranged::Stream`),
//! never downloaded (one in another layout than C order, which is gathered, is).

use crate::error::Result;
use crate::format::Sink;
use crate::input::Tensor;
use crate::plan::{Grid, JoinPlan};
use crate::sys::Region;

use super::cursors::Cursors;
use super::map;
use super::packer::Packer;
use super::ranged::Stream;
use super::threads::Out;

/// Writes the data of the grid `plan` describes, from its blocks `inputs` (in cell order).
pub fn execute(plan: &JoinPlan, grid: &Grid, inputs: &[&Tensor], out: &mut dyn Sink) -> Result<()> {
    if plan.bytes == 0 {
        return Ok(());
    }
    let streams = super::ranged::streams(inputs, &plan.inputs);
    let regions = inputs
        .iter()
        .zip(&plan.inputs)
        .zip(&streams)
        .map(|((input, p), stream)| match stream {
            Some(_) => Ok(Region::map_nothing()),
            None => map(input, p),
        })
        .collect::<Result<Vec<Region>>>()?;
    // The rows of the axes between two cut axes, per cut axis but the last.
    let between: Vec<u64> = grid
        .axes
        .windows(2)
        .map(|pair| plan.shape[pair[0] + 1..pair[1]].iter().product())
        .collect();
    let mut walk = Walk {
        sink: Packer::new(Out::Here(out), &plan.dtype),
        cursors: Cursors::new(&regions, inputs),
        regions: &regions,
        rounds: vec![0; inputs.len()],
        streams,
        plan,
        grid,
        inputs,
        between,
    };
    super::ranged::check_apart(&mut walk.cursors, &walk.streams);
    for _ in 0..plan.outer {
        walk.level(0, 0)?;
    }
    walk.cursors.verify()?;
    for stream in walk.streams.iter_mut().flatten() {
        stream.finish()?;
    }
    walk.sink.flush()
}

/// The walk's state: the output, each block's cursor and how many runs it has given.
struct Walk<'a, 'r> {
    sink: Packer<'a>,
    cursors: Cursors<'r>,
    regions: &'r [Region],
    rounds: Vec<u64>,
    /// The blocks read by range, by cell.
    streams: Vec<Option<Stream<'r>>>,
    plan: &'r JoinPlan,
    grid: &'r Grid,
    inputs: &'r [&'r Tensor],
    between: Vec<u64>,
}

impl Walk<'_, '_> {
    /// Writes one row of the grid at cut level `level`, within the cell prefix `cell`.
    fn level(&mut self, level: usize, cell: usize) -> Result<()> {
        let segments = &self.grid.segments[level];
        let last = level + 1 == self.grid.axes.len();
        for (at, &length) in segments.iter().enumerate() {
            let cell = cell * segments.len() + at;
            if last {
                let round = self.rounds[cell];
                let (input, p) = (self.inputs[cell], &self.plan.inputs[cell]);
                let region = &self.regions[cell];
                match &mut self.streams[cell] {
                    Some(stream) => {
                        let sink = &mut self.sink;
                        let run = (p.run_at(round), p.run_bytes);
                        stream.run(run, &mut |bytes, at| sink.append(bytes, input, p, at))?;
                    }
                    None => {
                        self.sink
                            .run(input, p, region, None, round, cell, &mut self.cursors)?;
                    }
                }
                self.rounds[cell] += 1;
            } else {
                for _ in 0..length * self.between[level] {
                    self.level(level + 1, cell)?;
                }
            }
        }
        Ok(())
    }
}
