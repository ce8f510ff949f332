//! What planning hands every later stage: one output tensor and how to make it (its header
//! entry, its join plan, its sources). `job` builds them; the completeness check
//! (`complete`), the reports, the backends and the engine read them.

use std::ops::Range;

use crate::format::OutTensor;
use crate::input::Tensor;
use crate::plan::chunks::Parts;
use crate::plan::{JoinPlan, Placement};

/// One tensor of the output and how to make it.
pub struct TensorJob<'a> {
    /// What the output's header says about it.
    pub out: OutTensor,
    /// How the copy engine makes it.
    pub plan: JoinPlan,
    /// The input tensors it joins, one per entry of `plan.inputs` (in a chunked join, each
    /// once per chunk; under `replicas`, the first of each group).
    pub sources: Vec<&'a Tensor>,
    /// In a chunked join, each source's range along the join axis; `None`: each is whole.
    pub ranges: Option<Vec<Range<u64>>>,
    /// What its rule says about the pieces beyond the axis (`chunks`, `plain`, `replicas`).
    pub parts: Parts,
    /// Copied from the first input by `--keep` rather than joined.
    pub kept: bool,
    /// A step counter `--cast` left in its own type (`job::is_counter`).
    pub counter: bool,
    /// The position in `JobOptions::rules` of the rule that decided it; `None` when none
    /// did (the axis is `-a`'s).
    pub rule: Option<usize>,
    /// For a tensor made from blocks (`src/plan/grid.rs`), where they go; when they are cut on
    /// several axes the engine walks their grid instead of `plan`'s rounds.
    pub placement: Option<Placement>,
}
