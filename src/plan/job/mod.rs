//! The job: which tensors the output holds, each the join of which input tensors, all
//! checked and planned before anything is written.
//!
//! Two shapes of job: a single-tensor join (every input is, or names with `FILE:NAME`, one
//! tensor), and a whole-file join (every input and the output hold named tensors: each
//! tensor is joined with its namesakes, or kept from the first input with `--keep`).
//!
//! In a whole-file join, the first tensor rule that matches a tensor's name decides it
//! (`plan::rules`). A tensor no rule decides that every input holds with the same shape and
//! bytes is refused unless `--join-identical` says to join it: such a tensor is replicated
//! (each tensor-parallel shard holds a copy), and joining it builds a wrong model silently.
//! Comparing stops at the first differing byte, so only identical tensors are read whole.
//! Identical copies that hold one value throughout (zero biases) are refused as undecidable
//! instead: their bytes cannot tell a replicated tensor from a split one, so tjoin asks for
//! a rule, or for `--like`, whose reference shape tells which. Identical copies joined by an
//! axis rule are refused too (MQA's `k_proj`, a rank given twice), unless `--join-identical`.
//!
//! In a checkpoint merge (files of several tensors each, with tensor rules or `--like`), the
//! sizes along a tensor's join axis must be those of a split (`ranks::split_kind`) unless
//! `--uneven` says otherwise; a dataset's shards (`day1.npz day2.npz`) may have any sizes.

use std::collections::{HashMap, HashSet};

use crate::dtype::DType;
use crate::error::{Error, Refusal, Result};
use crate::format::{Format, Layout, OutTensor, TensorInfo};
use crate::input::reference::Reference;
use crate::input::{self, Input, Tensor};
use crate::messages::excerpt;
use crate::plan::chunks::{self, Parts};
use crate::plan::compare;
use crate::plan::complete::ModelSizes;
use crate::plan::grid::{self, Block, Placed};
use crate::plan::rules::{self, Matcher, Treatment};
use crate::plan::spec::{self, Spec};
use crate::plan::tensor_job::TensorJob;
use crate::plan::{self, JoinPlan};

pub mod hints;
mod refusals;
use hints::{Suggested, model_merge};
pub use refusals::explain_disjoint;
mod whole;
use refusals::{about, check_byte_runs, only_tensor, shape_refusal};

/// What the command line says about the job beyond its inputs.
#[derive(Debug, Clone, Copy)]
pub struct JobOptions<'c> {
    /// The axis of every tensor no rule decides (`None`: the spec's default).
    pub axis: Option<i64>,
    /// The join rules.
    pub spec: Spec,
    /// The tensor rules, in the order they apply (the first that matches decides), indexed.
    pub rules: &'c Matcher<'c>,
    /// Join tensors no rule decides even when every input holds the same bytes, and tensors
    /// an axis rule decides that are the same in every input.
    pub join_identical: bool,
    /// Join tensors of multi-tensor files whose sizes along the axis no split gives.
    pub uneven: bool,
    /// `--like`: the reference that tells a constant tensor's split from its replication.
    pub like: Option<&'c Reference>,
    /// The model's config.json, read: the sizes a merge's tensors must have.
    pub model: Option<&'c ModelSizes>,
    /// Refuse rules that match no tensor.
    pub strict: bool,
    /// `--name`: the output tensor's name in a single-tensor join.
    pub name: Option<&'c str>,
    /// The output's format.
    pub output: Format,
    /// `--cast`: the element type every input is converted to.
    pub cast: Option<&'c DType>,
}

impl<'c> JobOptions<'c> {
    /// These options for the tensor `name`, and whether `--cast` leaves it as it is, being a
    /// counter ([`is_counter`]) of a multi-tensor output: the cast is a blanket over weights
    /// and moments, and a rounded step count (1001 in bfloat16 is 1000) is a wrong result.
    fn for_tensor(&self, name: &str, info: &TensorInfo, shape: &[u64]) -> (JobOptions<'c>, bool) {
        let counter =
            self.cast.is_some_and(|to| to != &info.dtype) && is_counter(name, info, shape);
        let options = JobOptions {
            cast: self.cast.filter(|_| !counter),
            ..*self
        };
        (options, counter)
    }

    /// A join of whole .npy files along `axis`, cast to `cast`, with no rules: what the
    /// engine's tests build.
    #[cfg(test)]
    pub fn along(axis: i64, cast: Option<&'c DType>) -> JobOptions<'c> {
        static NO_RULES: std::sync::LazyLock<Matcher<'static>> =
            std::sync::LazyLock::new(|| Matcher::new(&[]));
        JobOptions {
            axis: Some(axis),
            spec: Default::default(),
            rules: &NO_RULES,
            join_identical: false,
            uneven: false,
            like: None,
            model: None,
            strict: false,
            name: None,
            output: Format::Npy,
            cast,
        }
    }

    /// The layout the output format demands: safetensors and JSON hold C order only.
    fn layout(&self) -> Option<Layout> {
        self.output.needs_c_order().then_some(Layout::C)
    }

    /// The rule that decides the tensor `name`, and its position.
    fn decide(&self, name: &str) -> Option<(usize, Treatment)> {
        let rules = self.rules.rules();
        self.rules.decide(name).map(|at| (at, rules[at].treatment))
    }

    /// What the axis rule that decided a tensor says beyond its axis.
    fn parts(&self, decided: Option<(usize, Treatment)>) -> Parts {
        match decided {
            Some((at, Treatment::Axis(_))) => self.rules.rules()[at].parts.clone(),
            _ => Parts::default(),
        }
    }

    /// Whether the tensor `name` of a single input is copied rather than joined: with one
    /// input no axis is needed (a join of one tensor copies it, as DirectML's Join does), and
    /// a scalar has none.
    fn copies(&self, sources: &[&Tensor], axis: Option<i64>) -> bool {
        let axis = axis.or(self.spec.profile.default_axis);
        sources.len() == 1 && (axis.is_none() || sources[0].info.shape.is_empty())
    }
}

/// Whether the tensor `name` is a counter that a cast must not round: a floating-point tensor
/// of one element whose name ends in `step`, as torch's optimizers keep their step counts
/// (AdamW's `state.N.step`, a float32 0-d tensor; `optimizer.state.<param>.step` in a DCP
/// checkpoint).
pub fn is_counter(name: &str, info: &TensorInfo, shape: &[u64]) -> bool {
    info.dtype.is_floating()
        && shape.iter().product::<u64>() == 1
        && name.rsplit('.').next() == Some("step")
}

/// The joined tensor's name when neither `--name` nor the inputs give one.
pub const DEFAULT_NAME: &str = "arr_0";

/// The axis a tensor joins along: its axis rule's, else `-a`'s.
fn decided_axis(decided: Option<(usize, Treatment)>, options: &JobOptions) -> Option<i64> {
    match decided {
        Some((_, Treatment::Axis(axis))) => Some(axis),
        _ => options.axis,
    }
}

/// Checks and plans every tensor of the output. With `options.strict`, a rule that matches no
/// tensor is refused along with every other problem.
#[cfg(test)]
pub fn build<'a>(inputs: &'a [Input], options: &JobOptions) -> Result<Vec<TensorJob<'a>>> {
    build_suggesting(inputs, options, &mut Suggested::default())
}

/// [`build`], adding to `suggested` the fixes its refusals' hints would offer.
pub fn build_suggesting<'a>(
    inputs: &'a [Input],
    options: &JobOptions,
    suggested: &mut Suggested,
) -> Result<Vec<TensorJob<'a>>> {
    let built = if let [checkpoint] = inputs
        && let Some(blocks) = input::dcp::blocks(checkpoint)
    {
        compare::replicas(checkpoint)?;
        let recorded = |name: &str| input::dcp::recorded_shape(checkpoint, name);
        match checkpoint.consolidated() {
            None => build_blocks(blocks, &recorded, options),
            Some(consolidated) => {
                // A DeepSpeed checkpoint: written in its converter's element type unless
                // --cast says otherwise, each flattened tensor viewed in its shape.
                let cast = options.cast.or(Some(&consolidated.dtype));
                let options = JobOptions { cast, ..*options };
                let jobs = build_blocks(blocks, &recorded, &options)?;
                Ok(view(jobs, &consolidated.views))
            }
        }
    } else if whole_files(inputs, options) {
        whole::build_whole(inputs, options, suggested)
    } else {
        build_single(inputs, options)
    };
    let names = rule_names(inputs, options);
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let whole = whole_files(inputs, options);
    let mut unmatched = options.rules.unmatched(&names);
    unmatched.retain(|rule| refuses_unmatched(rule, whole, options));
    if unmatched.is_empty() {
        return built;
    }
    let mut refusals = vec![rules::unmatched_refusal(&unmatched, &names, options.strict)];
    match built {
        Err(Error::Refused(others)) => refusals.extend(others),
        Err(other) => return Err(other),
        Ok(_) => {}
    }
    Err(Error::Refused(refusals))
}

/// Whether every input and the output hold named tensors, each joined with its namesakes.
/// A container format can hold one unnamed tensor (a `torch.save` of a bare tensor): such an
/// input is a single tensor, as a `.npy` is.
fn whole_files(inputs: &[Input], options: &JobOptions) -> bool {
    options.output.is_container()
        && !inputs.is_empty()
        && inputs.iter().all(|i| {
            i.format.is_container()
                && i.selected().is_none()
                && i.tensors.iter().all(|t| t.name.tensor.is_some())
        })
}

/// The names the tensor rules are matched against: every tensor of the inputs in a
/// whole-file join, else the joined tensor's.
pub fn rule_names(inputs: &[Input], options: &JobOptions) -> Vec<String> {
    if whole_files(inputs, options) {
        let mut seen = HashSet::new();
        let names = inputs.iter().flat_map(|i| &i.tensors);
        let names = names.filter_map(|t| t.name.tensor.as_deref());
        names
            .filter(|&name| seen.insert(name))
            .map(str::to_string)
            .collect()
    } else {
        let sources: Vec<&Tensor> = inputs.iter().filter_map(|i| i.tensors.first()).collect();
        vec![single_name(&sources, options)]
    }
}

/// Whether a rule that matches no tensor refuses the join: under `--strict`, or a rules
/// file's line ([`rules::Rule::required`]) in a whole-file join, which a rules file describes
/// (a single tensor's join matches one of its lines).
fn refuses_unmatched(rule: &rules::Rule, whole: bool, options: &JobOptions) -> bool {
    options.strict || (whole && rule.required)
}

/// The rules that match no tensor (see [`rule_names`]) and do not refuse the join: warnings.
pub fn unmatched_rules(inputs: &[Input], options: &JobOptions) -> Vec<String> {
    let names = rule_names(inputs, options);
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let whole = whole_files(inputs, options);
    let mut unmatched = options.rules.unmatched(&names);
    // A family's built-in rules, and a rules file's `optional` lines, describe every model
    // of a family, not all of whose tensors each has (a tied lm_head, a pooler).
    let quiet = |rule: &rules::Rule| rule.optional || crate::plan::families::is_built_in(rule);
    unmatched.retain(|rule| !refuses_unmatched(rule, whole, options) && !quiet(rule));
    rules::describe_unmatched(&unmatched, &names)
}

/// The name of the output tensor of a single-tensor join.
fn single_name(sources: &[&Tensor], options: &JobOptions) -> String {
    let named = sources.iter().find_map(|t| t.name.tensor.as_deref());
    // The name numpy.savez gives one unnamed array, in every output format (`--name`'s help
    // says so).
    options.name.or(named).unwrap_or(DEFAULT_NAME).to_string()
}

/// One output tensor, the join of one tensor of each input. Only an axis rule applies to it:
/// a single tensor is joined, whatever its data.
fn build_single<'a>(inputs: &'a [Input], options: &JobOptions) -> Result<Vec<TensorJob<'a>>> {
    let sources = inputs
        .iter()
        .map(only_tensor)
        .collect::<Result<Vec<&Tensor>>>()?;
    let name = single_name(&sources, options);
    let decided = options.decide(&name);
    let rule = decided
        .filter(|(_, treatment)| matches!(treatment, Treatment::Axis(_)))
        .map(|(at, _)| at);
    let axis = decided_axis(decided, options);
    let parts = options.parts(decided);
    let none = |_: &str| None;
    if let Some(fused) = fused_unstated(&name, &sources, axis, &parts, options, &none) {
        return Err(Error::Refused(chunks::unstated_refusals(
            &[fused],
            &[&name],
        )));
    }
    let sources = chunks::representatives(&name, &sources, &parts)?;
    // One tensor: its refusals need no name to tell them apart.
    let name_refusals = false;
    match plan_tensor(&name, sources, axis, &parts, options, name_refusals) {
        Ok(job) => Ok(vec![TensorJob { rule, ..job }]),
        Err(refusals) => Err(Error::Refused(refusals)),
    }
}

/// Every tensor of a distributed checkpoint, made whole from its blocks; every problem in one
/// error. `--cast` converts the floating-point tensors only: integer and bool tensors (step
/// counters, token ids, masks) are copied as they are, as a cast of them is a classic bug.
/// `--keep` keeps one copy of a tensor every rank saved whole, after checking the copies are
/// identical.
fn build_blocks<'a>(
    blocks: impl Iterator<Item = (&'a Tensor, &'a [u64])>,
    recorded: &dyn Fn(&str) -> Option<&'a [u64]>,
    options: &JobOptions,
) -> Result<Vec<TensorJob<'a>>> {
    let blocks = blocks.map(|(tensor, offsets)| Block { tensor, offsets });
    let mut jobs = Vec::new();
    let mut refusals = Vec::new();
    for (name, blocks) in grid::by_tensor(blocks) {
        let info = &blocks[0].tensor.info;
        let shape = recorded(name).unwrap_or(&info.shape);
        let (tensor_options, counter) = options.for_tensor(name, info, shape);
        let options = &tensor_options;
        let cast = options.cast.filter(|_| info.dtype.is_floating());
        let decided = options.decide(name);
        let planned = match decided {
            Some((_, Treatment::Keep)) => {
                let sources: Vec<&Tensor> = blocks.iter().map(|b| b.tensor).collect();
                let keep_options = JobOptions { cast, ..*options };
                match keep_tensor(name, &sources, &keep_options) {
                    Ok(job) => grid::check_kept_whole(name, &blocks)
                        .map(|()| job)
                        .map_err(|r| vec![r]),
                    Err(Error::Refused(problems)) => Err(problems),
                    Err(damaged) => return Err(damaged),
                }
            }
            _ => grid::plan_tensor(name, &blocks, cast, recorded(name))
                .map(|placed| placed_job(name, placed))
                .map_err(|r| vec![r])
                .and_then(|job| check_block_joins(name, job, options.spec, cast)),
        };
        match planned {
            Ok(job) => jobs.push(TensorJob {
                rule: decided.map(|(at, _)| at),
                counter,
                ..job
            }),
            Err(problems) => refusals.extend(problems),
        }
    }
    if refusals.is_empty() {
        Ok(jobs)
    } else {
        Err(Error::Refused(refusals))
    }
}

/// Views each job whose tensor `views` names in the shape it gives: its blocks were runs of
/// its flattened elements, joined along their one axis in C order, so that its bytes are the
/// tensor's in that shape as they are.
fn view<'a>(mut jobs: Vec<TensorJob<'a>>, views: &HashMap<String, Vec<u64>>) -> Vec<TensorJob<'a>> {
    for job in &mut jobs {
        if let Some(shape) = views.get(&job.out.name) {
            debug_assert_eq!(
                job.plan.shape.iter().product::<u64>(),
                shape.iter().product::<u64>()
            );
            job.out.shape.clone_from(shape);
            job.plan.shape.clone_from(shape);
        }
    }
    jobs
}

/// Checks a tensor made from blocks against `--spec`'s join rules, as the joins it is made
/// of: along its one cut axis, or, for a grid, each row of blocks along the last cut axis.
fn check_block_joins<'a>(
    name: &str,
    job: TensorJob<'a>,
    spec: Spec,
    cast: Option<&DType>,
) -> std::result::Result<TensorJob<'a>, Vec<Refusal>> {
    let Some(placement) = &job.placement else {
        return Ok(job);
    };
    let (Some(&axis), Some(segments)) =
        (placement.grid.axes.last(), placement.grid.segments.last())
    else {
        return Ok(job);
    };
    for row in job.sources.chunks(segments.len()) {
        spec::check_with(spec, row, Some(axis as i64), cast).map_err(|e| about(Some(name), e))?;
    }
    Ok(job)
}

/// Checks and plans the join of `sources` into the output tensor `name`; with `name_refusals`,
/// each refusal starts with the tensor's name.
fn plan_tensor<'a>(
    name: &str,
    sources: Vec<&'a Tensor>,
    axis: Option<i64>,
    parts: &Parts,
    options: &JobOptions,
    name_refusals: bool,
) -> std::result::Result<TensorJob<'a>, Vec<Refusal>> {
    if options.copies(&sources, axis) && parts.is_plain_join() {
        // One input: nothing to compare.
        return copy_first(name, sources[0], options);
    }
    let label = name_refusals.then_some(name);
    let axis = spec::check_with(options.spec, &sources, axis, options.cast)
        .map_err(|e| about(label, e))?;
    check_byte_runs(&sources, axis)?;
    if let chunks::Fused::Chunks(shares) = &parts.fused {
        let (reps, together) = (&parts.part_replicas, options.join_identical);
        let slices = chunks::chunked(name, &sources, axis, shares, reps, together)?;
        let cut: Vec<plan::Source> = slices
            .iter()
            .map(|(t, range)| plan::Source {
                info: &t.info,
                range: range.clone(),
            })
            .collect();
        let plan = plan::plan_sources(&cut, axis, options.layout(), options.cast);
        let (sources, ranges) = slices.into_iter().unzip();
        return Ok(TensorJob {
            ranges: Some(ranges),
            parts: parts.clone(),
            ..job(name, plan, sources)
        });
    }
    let infos: Vec<&TensorInfo> = sources.iter().map(|t| &t.info).collect();
    let plan = plan::plan_with(&infos, axis, options.layout(), options.cast);
    Ok(TensorJob {
        parts: parts.clone(),
        ..job(name, plan, sources)
    })
}

/// Whether the tensor `name` is a fused projection that `axis` (a rule's or `-a`'s) joins
/// along its fused axis with no layout stated ([`chunks::unstated`]). A single input is
/// copied, not joined; an axis out of range is left for the spec check to refuse.
fn fused_unstated(
    name: &str,
    sources: &[&Tensor],
    axis: Option<i64>,
    parts: &Parts,
    options: &JobOptions,
    sibling: &dyn Fn(&str) -> Option<Vec<u64>>,
) -> Option<chunks::Unstated> {
    if sources.len() as u64 <= parts.replicas {
        return None;
    }
    let shape = &sources[0].info.shape;
    let rank = shape.len() as i64;
    let axis = axis
        .filter(|a| (-rank..rank).contains(a))?
        .rem_euclid(rank.max(1));
    if options.copies(sources, Some(axis)) {
        return None;
    }
    chunks::unstated(name, shape, axis as usize, parts, false, sibling)
}

/// The job that makes the tensor `name` from the blocks `placed` places.
fn placed_job<'a>(name: &str, placed: Placed<'a>) -> TensorJob<'a> {
    TensorJob {
        placement: placed.placement,
        ..job(name, placed.plan, placed.sources)
    }
}

/// The job that makes the tensor `name` by `plan` from `sources`.
pub(crate) fn job<'a>(name: &str, plan: JoinPlan, sources: Vec<&'a Tensor>) -> TensorJob<'a> {
    let out = OutTensor {
        name: name.to_string(),
        dtype: plan.dtype.clone(),
        shape: plan.shape.clone(),
        layout: plan.layout,
        bytes: plan.bytes,
    };
    TensorJob {
        out,
        plan,
        sources,
        ranges: None,
        parts: Parts::default(),
        kept: false,
        counter: false,
        rule: None,
        placement: None,
    }
}

/// Whether every input holds the tensor with the same type, shape and bytes: a replicated
/// tensor. Comparing stops at the first differing byte. An empty tensor has no data to
/// replicate, and one that cannot be read is left for the copy to report.
fn identical(sources: &[&Tensor]) -> bool {
    let first = sources[0];
    first.info.data_len > 0
        && sources.len() > 1
        && sources[1..]
            .iter()
            .all(|other| matches!(compare::differs(first, other), Ok(None)))
}

/// A `--keep` tensor: checked to be byte-identical in every input, then copied from the
/// first. Refuses it with [`Error::Refused`], to be collected with the other tensors'
/// refusals (exit 2); a damaged input (a stored .npz member failing its CRC-32) is any other
/// error, which stops the job (exit 1).
fn keep_tensor<'a>(
    name: &str,
    sources: &[&'a Tensor],
    options: &JobOptions,
) -> Result<TensorJob<'a>> {
    let first = sources[0];
    let mut differing = Vec::new();
    for other in &sources[1..] {
        match compare::differs(first, other) {
            Ok(None) => {}
            Ok(Some(how)) => differing.push(format!("{}: {how}", other.name)),
            Err(e @ Error::Malformed { .. }) => return Err(e),
            Err(e) => differing.push(format!("{}: cannot be compared: {e}", other.name)),
        }
    }
    if !differing.is_empty() {
        let mut details = vec![format!(
            "{}  {}  {}",
            first.name,
            first.info.dtype,
            first.info.shape_text()
        )];
        details.extend(differing);
        return Err(Error::Refused(vec![Refusal {
            headline: format!(
                "tensor `{}` matches --keep but is not the same in every input; it would be \
                 copied from {}",
                excerpt(name),
                first.name
            ),
            details,
            hint: Some(
                "change --keep so that it does not match this tensor, and it is joined along \
                 its axis like the others"
                    .to_string(),
            ),
        }]));
    }
    copy_first(name, first, options).map_err(Error::Refused)
}

/// The tensor `name` copied from `first` alone (a join of one input), converted by `--cast`.
fn copy_first<'a>(
    name: &str,
    first: &'a Tensor,
    options: &JobOptions,
) -> std::result::Result<TensorJob<'a>, Vec<Refusal>> {
    let info = &first.info;
    // --cast converts every tensor of the output, kept ones too.
    let cast = options.cast.filter(|&to| to != &info.dtype);
    if let Some(to) = cast
        && !crate::dtype::cast::castable(&info.dtype, to)
    {
        return Err(vec![Refusal {
            headline: format!(
                "tensor `{}` matches --keep, but its {} cannot be cast to {to}",
                excerpt(name),
                info.dtype
            ),
            details: Vec::new(),
            hint: Some(format!(
                "--cast converts between {}",
                crate::dtype::cast::CAST_TYPES
            )),
        }]);
    }
    let plan = if info.shape.is_empty() || options.layout().is_none_or(|l| l == info.layout) {
        plan::copy_as_is(info, cast)
    } else {
        plan::plan_with(&[info], 0, options.layout(), cast)
    };
    Ok(TensorJob {
        kept: true,
        ..job(name, plan, vec![first])
    })
}

/// Refuses the job unless every output tensor has shape `expected` (DirectML's check that
/// `joinSize == OutputTensor.Sizes[Axis]` and that every other size matches).
pub fn check_expected_shape(job: &[TensorJob], expected: &[u64]) -> Result<()> {
    let refusals: Vec<Refusal> = job
        .iter()
        .filter(|t| t.out.shape != expected)
        .map(|t| shape_refusal(t, job.len() > 1, expected))
        .collect();
    if refusals.is_empty() {
        Ok(())
    } else {
        Err(Error::Refused(refusals))
    }
}

/// A tensor every input holds with the same bytes, one value throughout, that no rule
/// decides.
struct Constant<'a> {
    name: &'a str,
    tensor: &'a Tensor,
    /// All its bytes are zero.
    zero: bool,
    /// What `--like`'s reference says of it, when one was given.
    told: Option<Told>,
}

/// What a reference's shape says of a tensor every input holds with the same shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Told {
    /// Each input holds it whole: the reference has the inputs' shape.
    Whole,
    /// The inputs hold slices of it along this axis.
    Axis(usize),
    /// The reference has another shape, which neither gives.
    Neither,
    /// The reference has no tensor of this name.
    Absent,
}

/// What the reference shape `want` (if the reference has the tensor) says of `tensor`, which
/// each of `copies` inputs holds.
fn told_by_reference(want: Option<&[u64]>, tensor: &Tensor, copies: usize) -> Told {
    let Some(want) = want else {
        return Told::Absent;
    };
    let shape = &tensor.info.shape;
    if **shape == *want {
        return Told::Whole;
    }
    let copies = copies as u64;
    let axis = (0..shape.len()).find(|&a| {
        want.len() == shape.len()
            && shape[a].checked_mul(copies) == Some(want[a])
            && (0..shape.len()).all(|d| d == a || shape[d] == want[d])
    });
    axis.map_or(Told::Neither, Told::Axis)
}
