//! A split's plan (`tjoin split`): which slices of the input's tensors each output holds,
//! checked before anything is written. No data read.
//!
//! A split is a join run backwards: each output tensor is a join of slices of one input
//! tensor ([`crate::plan::Source`]), so the engine writes it as it writes any join.
//! - `--parts N`: cut as numpy.array_split cuts (the first `len % N` parts one longer);
//! - `--sizes a,b,...`: parts of those sizes, which must add up to the length;
//! - `--ranks N` with tensor rules: each tensor along its rule's axis in N equal pieces; a
//!   `keep` tensor whole to every rank; `chunks` in reverse (a `[gate; up]` gives rank r
//!   `[gate_r; up_r]`); `replicas K` in reverse (N / K pieces, each given to K consecutive
//!   ranks). Joining the ranks with the same rules gives back the input.

use std::ops::Range;

use crate::error::{Error, Refusal, Result};
use crate::format::{Format, Layout, TensorInfo};
use crate::input::{Input, Tensor};
use crate::messages::excerpt;
use crate::plan::chunks::{self, Fused, Parts};
use crate::plan::heads::{self, Heads};
use crate::plan::job::{self, DEFAULT_NAME};
use crate::plan::rules::{Matcher, Treatment};
use crate::plan::spec::Spec;
use crate::plan::spec::directml_split::{SplitRules, check_split};
use crate::plan::tensor_job::TensorJob;
use crate::plan::{self, Source};

/// How a split cuts each tensor along its axis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cut {
    /// Into `count` parts as numpy.array_split cuts them (the first `len % count` one longer);
    /// with `exact`, a length that `count` does not divide is refused.
    Parts {
        /// How many parts.
        count: u64,
        /// Refuse uneven parts.
        exact: bool,
    },
    /// Into parts of these sizes, which must add up to the length.
    Sizes(Vec<u64>),
    /// Into tensor-parallel ranks by the tensor rules: each tensor along its rule's axis, in
    /// equal pieces (`chunks` and `replicas` in reverse), `keep` tensors whole to every rank.
    Ranks(u64),
}

impl Cut {
    /// How many outputs the cut makes.
    pub fn outputs(&self) -> u64 {
        match self {
            Cut::Parts { count, .. } | Cut::Ranks(count) => *count,
            Cut::Sizes(sizes) => sizes.len() as u64,
        }
    }
}

/// What a split's plan needs beyond the input.
#[derive(Clone, Copy)]
pub struct SplitOptions<'c> {
    /// How every tensor is cut.
    pub cut: &'c Cut,
    /// The axis of every tensor no rule decides.
    pub axis: Option<i64>,
    /// The tensor rules, indexed.
    pub rules: &'c Matcher<'c>,
    /// Each output's format, in the outputs' order.
    pub formats: &'c [Format],
    /// The model's attention heads (config.json, `--heads`), if known: a rank split of an
    /// attention projection along its heads is refused without them.
    pub heads: Option<&'c Heads>,
    /// `--spec directml[:LEVEL]`: every tensor cut must be one DirectML's Split takes at that
    /// level (kept tensors are copied, not split).
    pub spec: Option<Spec>,
}

/// One output tensor's part of the input: the ranges along `axis` it joins, in order, or the
/// whole tensor (`keep`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Share {
    /// These slices along the axis, joined.
    Slices(Vec<Range<u64>>),
    /// The whole tensor, copied.
    Whole,
}

/// Every output's tensors, in the input's order: `jobs[output]`, each a join of slices of one
/// input tensor. Every problem of every tensor is refused at once.
pub fn build<'a>(input: &'a Input, options: &SplitOptions) -> Result<Vec<Vec<TensorJob<'a>>>> {
    if input.offsets().is_some() {
        return Err(Error::refused(
            format!(
                "cannot split {}: a distributed checkpoint's tensors are blocks of larger ones",
                input.name
            ),
            "consolidate it first (tjoin CHECKPOINT/ -o model.safetensors), then split that file",
        ));
    }
    let count = options.formats.len();
    let mut jobs: Vec<Vec<TensorJob>> = (0..count).map(|_| Vec::new()).collect();
    let mut refusals = Vec::new();
    let mut heads = HeadProblems::default();
    let mut spec_problems = SpecProblems::default();
    let sibling = |name: &str| {
        let found = input
            .tensors
            .iter()
            .find(|t| t.name.tensor.as_deref() == Some(name));
        found.map(|t| t.info.shape.to_vec())
    };
    for tensor in &input.tensors {
        let name = tensor.name.tensor.as_deref().unwrap_or(DEFAULT_NAME);
        match shares(
            name,
            &label(tensor),
            &tensor.info,
            options,
            &sibling,
            &mut heads,
        ) {
            Ok((axis, shares)) => {
                if let Some(rules) = options.spec.as_ref().and_then(SplitRules::of)
                    && let Some(sizes) = pieces(&shares)
                {
                    let info = &tensor.info;
                    let axis = axis as i64;
                    let label = label(tensor);
                    let problems =
                        check_split(&rules, &label, &info.dtype, &info.shape, axis, &sizes);
                    spec_problems.add(&label, problems);
                }
                for (output, share) in shares.into_iter().enumerate() {
                    let format = options.formats[output];
                    jobs[output].push(tensor_job(name, tensor, axis, share, format));
                }
            }
            Err(problems) => refusals.extend(problems),
        }
    }
    if let Cut::Ranks(ranks) = options.cut
        && !heads.blind.is_empty()
    {
        refusals.push(blind_refusal(*ranks, &heads.blind));
    }
    refusals.extend(spec_problems.refusals());
    for (mut refusal, more) in heads.cuts {
        if more > 0 {
            let s = if more == 1 { "" } else { "s" };
            refusal.details.push(format!(
                "and {more} more tensor{s} the same rule cuts alike"
            ));
        }
        refusals.push(refusal);
    }
    if refusals.is_empty() {
        Ok(jobs)
    } else {
        Err(Error::Refused(refusals))
    }
}

/// `--spec` refusals, each once with the other tensors it refuses alike (every layer's), so
/// that a model's refusals do not drown in repeats.
#[derive(Default)]
struct SpecProblems(Vec<(String, Refusal, Vec<String>)>);

impl SpecProblems {
    /// Adds the refusals of the tensor `label`: to an earlier one alike (the same headline
    /// but for the tensor's name), or as a new one.
    fn add(&mut self, label: &str, refusals: Vec<Refusal>) {
        for refusal in refusals {
            let key = refusal.headline.replace(label, "");
            match self.0.iter_mut().find(|(k, _, _)| *k == key) {
                Some((_, _, alike)) => alike.push(label.to_string()),
                None => self.0.push((key, refusal, Vec::new())),
            }
        }
    }

    fn refusals(self) -> impl Iterator<Item = Refusal> {
        self.0.into_iter().map(|(_, mut refusal, alike)| {
            if !alike.is_empty() {
                let s = if alike.len() == 1 { "" } else { "s" };
                refusal.details.push(format!(
                    "and {} more tensor{s} alike: {}",
                    alike.len(),
                    crate::outliers::bounded_list(&alike)
                ));
            }
            refusal
        })
    }
}

/// The sizes along the axis of the pieces DirectML's Split would cut a tensor into for these
/// shares: every distinct slice any output takes, in order (outputs that share a slice, as
/// `replicas` ranks do, take one piece); `None` for a tensor copied whole.
fn pieces(shares: &[Share]) -> Option<Vec<u64>> {
    let mut slices: Vec<&Range<u64>> = shares
        .iter()
        .filter_map(|share| match share {
            Share::Slices(ranges) => Some(ranges),
            Share::Whole => None,
        })
        .flatten()
        .collect();
    if slices.is_empty() {
        return None;
    }
    slices.sort_by_key(|r| (r.start, r.end));
    // Empty slices stay apart: each is an output of its own that DirectML cannot write.
    slices.dedup_by(|a, b| a == b && a.start < a.end);
    Some(slices.iter().map(|r| r.end - r.start).collect())
}

/// How messages name a tensor of the input: by its name and file, or by its file alone.
fn label(tensor: &Tensor) -> String {
    let path = tensor.name.location.to_string();
    match tensor.name.tensor.as_deref() {
        Some(name) => format!("tensor `{}` of {path}", excerpt(name)),
        None => path,
    }
}

/// The layout an output tensor of `shape` is written in: the input's, as numpy.save writes a
/// slice of it (Fortran order only when it is not C-contiguous too: it has two axes longer
/// than 1 and no empty one), unless the output format holds C order only.
fn output_layout(info: &TensorInfo, shape: &[u64], format: Format) -> Layout {
    let long_axes = shape.iter().filter(|&&d| d > 1).count();
    if format.needs_c_order() || shape.contains(&0) || long_axes < 2 {
        Layout::C
    } else {
        info.layout
    }
}

/// The job that writes `share` of `tensor` along `axis` as the output tensor `name`.
fn tensor_job<'a>(
    name: &str,
    tensor: &'a Tensor,
    axis: usize,
    share: Share,
    format: Format,
) -> TensorJob<'a> {
    let info = &tensor.info;
    let (ranges, kept) = match share {
        Share::Slices(ranges) => (ranges, false),
        Share::Whole if info.shape.is_empty() => {
            let plan = plan::copy_as_is(info, None);
            let job = job::job(name, plan, vec![tensor]);
            return TensorJob { kept: true, ..job };
        }
        Share::Whole => (std::iter::once(0..info.shape[axis]).collect(), true),
    };
    let sources: Vec<Source> = ranges
        .iter()
        .map(|range| Source {
            info,
            range: range.clone(),
        })
        .collect();
    let mut shape = info.shape.to_vec();
    shape[axis] = ranges.iter().map(|r| r.end - r.start).sum();
    let layout = output_layout(info, &shape, format);
    let plan = plan::plan_sources(&sources, axis, Some(layout), None);
    let sources = vec![tensor; ranges.len()];
    TensorJob {
        ranges: Some(ranges),
        kept,
        ..job::job(name, plan, sources)
    }
}

/// The axis the tensor `name` is cut along and each output's share of it, or why it cannot be
/// cut.
fn shares(
    name: &str,
    label: &str,
    info: &TensorInfo,
    options: &SplitOptions,
    sibling: &dyn Fn(&str) -> Option<Vec<u64>>,
    problems: &mut HeadProblems,
) -> std::result::Result<(usize, Vec<Share>), Vec<Refusal>> {
    let outputs = options.formats.len();
    let rules = options.rules.rules();
    let decided = options.rules.decide(name).map(|at| &rules[at]);
    let shape = &info.shape;
    let (axis, parts) = match decided.map(|rule| (rule.treatment, &rule.parts)) {
        Some((Treatment::Keep, _)) => return Ok((0, vec![Share::Whole; outputs])),
        Some((Treatment::Axis(axis), parts)) => (Some(axis), parts.clone()),
        None => (options.axis, Parts::default()),
    };
    let Some(axis) = axis else {
        return Err(vec![Refusal {
            headline: format!(
                "{} {}: no rule says which axis to split it along",
                label,
                info.shape_text()
            ),
            details: Vec::new(),
            hint: Some(
                "give every tensor an axis: -a AXIS, a rule `NAME = AXIS` (--axis-for, --rules), \
                 or `NAME = keep` (--keep) to copy it whole to every output"
                    .to_string(),
            ),
        }]);
    };
    let rank = shape.len() as i64;
    if !(-rank..rank).contains(&axis) {
        let why = if rank == 0 {
            "a scalar has no axis to split along".to_string()
        } else {
            format!("it has axes 0 to {} (or -{rank} to -1)", rank - 1)
        };
        return Err(vec![Refusal {
            headline: format!(
                "cannot split {} {} along axis {axis}: {why}",
                label,
                info.shape_text()
            ),
            details: Vec::new(),
            hint: Some("name an axis it has, or keep it whole with --keep".to_string()),
        }]);
    }
    let axis = axis.rem_euclid(rank) as usize;
    // The whole model's tensor, where a join sees a rank's piece: its parts stand in the
    // proportions of the chunks alone, whatever ranks share them (`replicas 1:2:2`), so the
    // output projection is held against those.
    if outputs as u64 > parts.replicas
        && let Some(fused) = chunks::unstated(name, shape, axis, &parts, true, sibling)
    {
        return Err(chunks::unstated_refusals(&[fused], &[name]));
    }
    let len = shape[axis];
    if !whole_heads(name, label, info, axis, options, &parts, problems) {
        return Err(Vec::new());
    }
    let ranges = cut(len, options.cut, &parts).map_err(|why| {
        vec![Refusal {
            headline: format!(
                "cannot split {} {} along axis {axis}: {why}",
                label,
                info.shape_text()
            ),
            details: Vec::new(),
            hint: Some(hint(len, options.cut, &parts)),
        }]
    })?;
    check_whole_bytes(label, info, axis, &ranges).map_err(|r| vec![r])?;
    Ok((axis, ranges.into_iter().map(Share::Slices).collect()))
}

/// The attention projections a rank split cannot cut: those it cannot tell about (no head
/// counts), and the cuts inside heads, each refusal once with how many more tensors it
/// refuses alike (every layer's).
#[derive(Default)]
struct HeadProblems {
    blind: Vec<String>,
    cuts: Vec<(Refusal, usize)>,
}

/// Whether a rank split of the tensor `name` along `axis` by `parts` gives each rank whole
/// attention heads (true for a tensor that is no attention projection, or not cut along its
/// heads); if not, the problem is added to `problems`.
fn whole_heads(
    name: &str,
    label: &str,
    info: &TensorInfo,
    axis: usize,
    options: &SplitOptions,
    parts: &Parts,
    problems: &mut HeadProblems,
) -> bool {
    let Cut::Ranks(ranks) = options.cut else {
        return true;
    };
    let Some((role, head_axis)) = heads::role(name, info.shape.len()) else {
        return true;
    };
    if *ranks <= 1 || head_axis != axis {
        return true;
    }
    let Some(counts) = options.heads else {
        problems.blind.push(name.to_string());
        return false;
    };
    let glob = match name.rsplitn(3, '.').collect::<Vec<_>>()[..] {
        [leaf, module, _] => format!("*.{module}.{leaf}"),
        _ => name.to_string(),
    };
    let glob = excerpt(&glob);
    let len = info.shape[axis];
    let Some((why, hint)) = heads::check(role, len, axis, *ranks, parts, counts, &glob) else {
        return true;
    };
    // Every layer's projection is refused alike: once, with how many more.
    match problems
        .cuts
        .iter_mut()
        .find(|(r, _)| r.hint.as_ref() == Some(&hint))
    {
        Some((_, more)) => *more += 1,
        None => problems.cuts.push((
            Refusal {
                headline: format!(
                    "cannot split {label} {} along axis {axis} into {ranks} ranks: {why}",
                    info.shape_text()
                ),
                details: Vec::new(),
                hint: Some(hint),
            },
            0,
        )),
    }
    false
}

/// The refusal of a rank split of the attention projections `names` without head counts.
fn blind_refusal(ranks: u64, names: &[String]) -> Refusal {
    let mut details: Vec<String> = names
        .iter()
        .take(4)
        .map(|n| format!("`{}`", excerpt(n)))
        .collect();
    if names.len() > 4 {
        details.push(format!("and {} more", names.len() - 4));
    }
    Refusal {
        headline: format!(
            "tjoin cannot tell whether {ranks} ranks cut inside an attention head: the model's \
             head counts are unknown, and {} attention projections are split along their heads",
            names.len()
        ),
        details,
        hint: Some(
            "put the model's config.json beside it, or give --heads Q:KV (its attention and \
             key-value heads)"
                .to_string(),
        ),
    }
}

/// Each output's ranges along an axis of length `len`, cut by `cut` (and, for ranks, by the
/// rule's `parts`), or why it cannot be.
pub fn cut(
    len: u64,
    cut: &Cut,
    parts: &Parts,
) -> std::result::Result<Vec<Vec<Range<u64>>>, String> {
    match cut {
        Cut::Parts { count, exact } => {
            if *exact && len % count != 0 {
                return Err(format!(
                    "its size {len} does not divide into {count} equal parts (--exact)"
                ));
            }
            Ok(array_split(len, *count)
                .into_iter()
                .map(|r| vec![r])
                .collect())
        }
        Cut::Sizes(sizes) => {
            let total = sizes.iter().try_fold(0u64, |n, &s| n.checked_add(s));
            if total != Some(len) {
                let sizes: Vec<String> = sizes.iter().map(u64::to_string).collect();
                let total = total.map_or("more than 2^64".to_string(), |t| t.to_string());
                return Err(format!(
                    "the sizes {} add up to {total}, not to its size {len}",
                    sizes.join(",")
                ));
            }
            let mut start = 0;
            Ok(sizes
                .iter()
                .map(|&size| {
                    let range = start..start + size;
                    start += size;
                    vec![range]
                })
                .collect())
        }
        Cut::Ranks(ranks) => rank_ranges(len, *ranks, parts),
    }
}

/// numpy.array_split's cut of `len` into `count` parts: the first `len % count` one longer.
pub fn array_split(len: u64, count: u64) -> Vec<Range<u64>> {
    let (each, longer) = (len / count, len % count);
    let mut start = 0;
    (0..count)
        .map(|part| {
            let size = each + u64::from(part < longer);
            let range = start..start + size;
            start += size;
            range
        })
        .collect()
}

/// Each rank's ranges of a tensor of length `len` along its rule's axis: `ranks / replicas`
/// equal pieces, each given to `replicas` consecutive ranks; with `chunks`, each chunk cut so
/// (by its own count under `replicas P:Q:R`), and a rank's piece of every chunk joined in order.
fn rank_ranges(
    len: u64,
    ranks: u64,
    parts: &Parts,
) -> std::result::Result<Vec<Vec<Range<u64>>>, String> {
    let chunks: Vec<u64> = match &parts.fused {
        Fused::Chunks(shares) => {
            let total: u64 = shares.iter().sum();
            if len % total != 0 {
                return Err(format!(
                    "its size {len} does not hold chunks in the proportions {} (a multiple of \
                     {total})",
                    share_text(shares)
                ));
            }
            shares.iter().map(|s| len / total * s).collect()
        }
        _ => vec![len],
    };
    let replicas: Vec<u64> = if parts.part_replicas.len() == chunks.len() {
        parts.part_replicas.clone()
    } else {
        vec![parts.replicas; chunks.len()]
    };
    for (&chunk, &replicas) in chunks.iter().zip(&replicas) {
        let of = if chunks.len() > 1 {
            format!("its chunk of {chunk}")
        } else {
            format!("its size {len}")
        };
        if ranks % replicas != 0 {
            return Err(format!(
                "its rule's `replicas {replicas}` gives each piece of {of} to {replicas} \
                 consecutive ranks, and {ranks} ranks are not a multiple of {replicas}"
            ));
        }
        let pieces = ranks / replicas;
        if chunk % pieces != 0 {
            let per = if replicas > 1 {
                format!(" ({ranks} ranks, `replicas {replicas}`)")
            } else {
                String::new()
            };
            return Err(format!(
                "{of} does not divide into {pieces} equal pieces{per}"
            ));
        }
    }
    Ok((0..ranks)
        .map(|rank| {
            let mut start = 0;
            chunks
                .iter()
                .zip(&replicas)
                .map(|(&chunk, &replicas)| {
                    let (piece, each) = (rank / replicas, chunk / (ranks / replicas));
                    let range = start + piece * each..start + (piece + 1) * each;
                    start += chunk;
                    range
                })
                .collect()
        })
        .collect())
}

/// `1:1` or `4:1:1`.
fn share_text(shares: &[u64]) -> String {
    let shares: Vec<String> = shares.iter().map(u64::to_string).collect();
    shares.join(":")
}

/// What would cut a length `len` by `cut`: for ranks and exact parts, the counts up to 64
/// that divide it.
fn hint(len: u64, cut: &Cut, parts: &Parts) -> String {
    let fits = |count: u64| {
        let ranks = match cut {
            Cut::Ranks(_) => Cut::Ranks(count),
            _ => Cut::Parts { count, exact: true },
        };
        self::cut(len, &ranks, parts).is_ok()
    };
    let counts: Vec<String> = (1..=64u64)
        .filter(|&n| fits(n))
        .map(|n| n.to_string())
        .collect();
    match cut {
        Cut::Sizes(_) => format!("give sizes that add up to {len}, or cut it by --parts"),
        Cut::Parts { .. } => format!(
            "drop --exact to cut as numpy.array_split does (some parts one longer), or cut it \
             into parts it divides into: {}",
            counts.join(", ")
        ),
        Cut::Ranks(_) if counts.len() > 1 => format!(
            "split into a number of ranks that divides it ({}), give it a rule with another \
             axis, or keep it whole in every rank with `= keep`",
            counts.join(", ")
        ),
        Cut::Ranks(_) => "give it a rule with another axis, or keep it whole in every rank \
                          with `= keep`"
            .to_string(),
    }
}

/// Refuses slices of a sub-byte type (float4, float6) that would start or end inside a byte.
fn check_whole_bytes(
    label: &str,
    info: &TensorInfo,
    axis: usize,
    ranges: &[Vec<Range<u64>>],
) -> std::result::Result<(), Refusal> {
    if info.dtype.bits() % 8 == 0 {
        return Ok(());
    }
    let inner: u64 = match info.layout {
        Layout::C => info.shape[axis + 1..].iter().product(),
        Layout::Fortran => info.shape[..axis].iter().product(),
    };
    let whole = |at: u64| info.dtype.bytes_for(at.saturating_mul(inner)).is_some();
    let bounds = ranges.iter().flatten().flat_map(|r| [r.start, r.end]);
    if bounds.clone().all(whole) {
        return Ok(());
    }
    Err(Refusal {
        headline: format!(
            "cannot split {} {} along axis {axis}: its {}-bit elements are packed, \
             and a part would start or end inside a byte",
            label,
            info.shape_text(),
            info.dtype.bits()
        ),
        details: Vec::new(),
        hint: Some("cut it into parts of an even number of elements per row".to_string()),
    })
}

#[cfg(test)]
// A part of one range is a `Vec` of one range, not a range turned into a `Vec`.
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;

    fn ranges(len: u64, how: &Cut, parts: &Parts) -> Vec<Vec<Range<u64>>> {
        cut(len, how, parts).expect("cuts")
    }

    #[test]
    fn parts_cut_as_numpy_array_split() {
        assert_eq!(array_split(10, 3), [0..4, 4..7, 7..10]);
        assert_eq!(array_split(2, 4), [0..1, 1..2, 2..2, 2..2]);
        assert_eq!(array_split(0, 2), [0..0, 0..0]);
        let exact = Cut::Parts {
            count: 3,
            exact: true,
        };
        assert!(cut(10, &exact, &Parts::default()).is_err());
        assert_eq!(ranges(9, &exact, &Parts::default()).len(), 3);
    }

    #[test]
    fn sizes_must_add_up() {
        let sizes = Cut::Sizes(vec![3, 0, 7]);
        assert_eq!(
            ranges(10, &sizes, &Parts::default()),
            [vec![0..3], vec![3..3], vec![3..10]]
        );
        let why = cut(11, &sizes, &Parts::default()).unwrap_err();
        assert!(why.contains("add up to 10, not to its size 11"), "{why}");
        let huge = Cut::Sizes(vec![u64::MAX, 1]);
        assert!(cut(1, &huge, &Parts::default()).is_err());
    }

    #[test]
    fn ranks_reverse_chunks_and_replicas() {
        let plain = Parts::default();
        assert_eq!(ranges(8, &Cut::Ranks(2), &plain), [vec![0..4], vec![4..8]]);
        let gate_up = Parts {
            fused: Fused::Chunks(vec![1, 1]),
            ..Parts::default()
        };
        assert_eq!(
            ranges(8, &Cut::Ranks(2), &gate_up),
            [vec![0..2, 4..6], vec![2..4, 6..8]]
        );
        let qkv = Parts {
            fused: Fused::Chunks(vec![4, 1, 1]),
            ..Parts::default()
        };
        assert_eq!(
            ranges(12, &Cut::Ranks(2), &qkv),
            [vec![0..4, 8..9, 10..11], vec![4..8, 9..10, 11..12]]
        );
        let kv = Parts {
            replicas: 2,
            ..Parts::default()
        };
        assert_eq!(
            ranges(4, &Cut::Ranks(4), &kv),
            [vec![0..2], vec![0..2], vec![2..4], vec![2..4]]
        );
        assert!(cut(4, &Cut::Ranks(3), &kv).is_err());
        // q cut 4 ways; k and v each cut 2 ways, each piece given to 2 consecutive ranks.
        let qkv_replicated = Parts {
            fused: Fused::Chunks(vec![4, 1, 1]),
            part_replicas: vec![1, 2, 2],
            ..Parts::default()
        };
        assert_eq!(
            ranges(12, &Cut::Ranks(4), &qkv_replicated),
            [
                vec![0..2, 8..9, 10..11],
                vec![2..4, 8..9, 10..11],
                vec![4..6, 9..10, 11..12],
                vec![6..8, 9..10, 11..12]
            ]
        );
        let why = cut(6, &Cut::Ranks(4), &plain).unwrap_err();
        assert!(why.contains("does not divide into 4"), "{why}");
        let hint = hint(6, &Cut::Ranks(4), &plain);
        assert!(hint.contains("(1, 2, 3, 6)"), "{hint}");
    }
}
