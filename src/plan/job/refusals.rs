//! The refusals a job makes: inputs that do not hold the same tensors, replicated,
//! undecidable, identical-joined and uneven tensors, element runs that end inside a byte, an
//! input that is not one tensor, and a shape other than `--expect-shape`'s; each with what
//! differs and a flag that would settle it. Also what `--like`'s check reads of a tensor's job
//! (`TensorJob::checked`). And the refusal of a join of safetensors files that hold
//! disjoint tensors, which are one checkpoint's shards (`explain_disjoint`).

use std::collections::{HashMap, HashSet};
use std::path::Path;

use super::{Constant, JobOptions, Told};
use crate::dtype::{DType, gcd};
use crate::error::{Error, Refusal, Result, capped};
use crate::format::Format;
use crate::input::{Input, Tensor, sharded};
use crate::messages::excerpt;
use crate::messages::shape_text;
use crate::outliers::{self, Row, Split};
use crate::plan::ranks;
use crate::plan::reference::Checked;
use crate::plan::rules::{self, shell_quote};
use crate::plan::tensor_job::TensorJob;

/// The refusal of tensors that are the same in every input and that no rule decides: each
/// one with its shape and what joining it would make, and the `--keep` globs that keep them
/// (and only them), grouped by pattern.
pub(super) fn replicated_refusal(
    replicated: &[(&str, &Tensor)],
    inputs: &[Input],
    names: &[&str],
    options: &JobOptions,
) -> Refusal {
    let merge = super::model_merge(inputs, options);
    let count = replicated.len();
    let copies = inputs.len() as u64;
    let holders = match inputs {
        [a, b] => format!("{} and {}", a.name, b.name),
        _ => format!(
            "all {} inputs, {} to {}",
            inputs.len(),
            inputs[0].name,
            inputs[inputs.len() - 1].name
        ),
    };
    let mut details = vec![format!("the same in {holders}:")];
    let lines = replicated.iter().map(|&(name, tensor)| {
        let info = &tensor.info;
        let rank = info.shape.len() as i64;
        let joined = match options.axis {
            Some(axis) if (-rank..rank).contains(&axis) => {
                let at = axis.rem_euclid(rank) as usize;
                let mut shape = info.shape.clone();
                shape[at] = shape[at].saturating_mul(copies);
                format!(" -> {} joined along axis {axis}", shape_text(&shape))
            }
            _ => String::new(),
        };
        let name = excerpt(name);
        format!("{name}  {}  {}{joined}", info.dtype, info.shape_text())
    });
    details.extend(
        capped(lines.collect(), SHOWN)
            .into_iter()
            .map(|l| format!("  {l}")),
    );
    let targets: Vec<&str> = replicated.iter().map(|&(name, _)| name).collect();
    let globs = rules::suggest_globs(&targets, names);
    let keeps: Vec<String> = globs
        .iter()
        // Whole, a glob pastes back into a shell as it is (shell_quote escapes what acts on a
        // terminal); a long one is cut, and shown quoted.
        .map(
            |(glob, _)| match glob.chars().nth(crate::messages::EXCERPT_CHARS) {
                None => format!("--keep {}", shell_quote(glob)),
                Some(_) => format!("--keep {}", shell_quote(&excerpt(glob))),
            },
        )
        .collect();
    let keeps = capped(keeps, SHOWN).join(" ");
    Refusal {
        headline: format!(
            "{count} tensor{} the same shape and bytes in every input, and no rule decides \
             {}: each input holds a copy (replicated, as norms are in tensor-parallel shards), \
             and joining would make {} {copies} times too large",
            if count == 1 { " has" } else { "s have" },
            if count == 1 { "it" } else { "them" },
            if count == 1 { "it" } else { "each" },
        ),
        details,
        hint: Some(format!(
            "keep one copy with {keeps} (or `GLOB = keep` lines in a --rules file){}",
            crate::plan::ranks::join_identical_advice(merge, "the pieces are")
        )),
    }
}

impl TensorJob<'_> {
    /// What `--like`'s check reads of it; `copies` is the number of inputs (a kept tensor's
    /// job holds only the first).
    pub fn checked(&self, copies: usize) -> Checked<'_> {
        let inputs: Vec<Vec<u64>> = if self.kept {
            vec![self.sources[0].info.shape.to_vec(); copies]
        } else if let Some(ranges) = &self.ranges {
            self.sources
                .iter()
                .zip(ranges)
                .map(|(s, range)| {
                    let mut shape = s.info.shape.to_vec();
                    shape[self.plan.axis] = range.end - range.start;
                    shape
                })
                .collect()
        } else {
            self.sources.iter().map(|s| s.info.shape.to_vec()).collect()
        };
        Checked {
            name: &self.out.name,
            shape: &self.out.shape,
            axis: self.plan.axis,
            kept: self.kept,
            rule: self.rule,
            inputs,
        }
    }
}

/// How many items a refusal lists before "... and N more".
const SHOWN: usize = 10;

/// `--FLAG GLOB` for each glob of [`rules::suggest_globs`] (the globs that match `targets`
/// and no other of `names`), `value` appended to the glob (`=1` for `--axis-for`).
pub(super) fn suggested_flags(
    flag: &str,
    targets: &[&str],
    names: &[&str],
    value: &str,
) -> Vec<String> {
    rules::suggest_globs(targets, names)
        .iter()
        // Whole, a glob pastes back into a shell as it is (shell_quote escapes what acts on a
        // terminal); a long one is cut, and shown quoted.
        .map(|(glob, _)| {
            let glob = match glob.chars().nth(crate::messages::EXCERPT_CHARS) {
                None => glob.to_string(),
                Some(_) => excerpt(glob).into_owned(),
            };
            format!("{flag} {}", shell_quote(&format!("{glob}{value}")))
        })
        .collect()
}

/// The refusal of tensors that are one value throughout and the same in every input, that no
/// rule decides: replicated or split, their bytes cannot tell. With `--like`, its reference
/// tells, and the hint gives the rule it calls for.
pub(super) fn undecidable_refusal(
    constants: &[Constant],
    inputs: &[Input],
    names: &[&str],
    options: &JobOptions,
) -> Refusal {
    let count = constants.len();
    let mut details: Vec<String> = constants
        .iter()
        .map(|c| {
            let info = &c.tensor.info;
            let value = if c.zero {
                "all zeros"
            } else {
                "one value throughout"
            };
            let told = match c.told {
                Some(Told::Axis(axis)) => format!("; --like: split along axis {axis}"),
                Some(Told::Neither) => "; --like: another shape, neither kept nor joined".into(),
                Some(Told::Absent) => "; --like: no such tensor".into(),
                Some(Told::Whole) | None => String::new(),
            };
            format!(
                "{}  {}  {}  {value}{told}",
                excerpt(c.name),
                info.dtype,
                info.shape_text()
            )
        })
        .collect();
    details = capped(details, SHOWN)
        .into_iter()
        .map(|l| format!("  {l}"))
        .collect();
    details.insert(0, format!("the same in all {} inputs:", inputs.len()));
    let headline = format!(
        "{count} tensor{} one value throughout and the same bytes in every input, and no rule \
         decides {}: the bytes cannot tell a tensor each input holds whole (replicated) from \
         one split across them",
        if count == 1 { " holds" } else { "s hold" },
        if count == 1 { "it" } else { "them" },
    );
    let hint = if options.like.is_some() {
        let mut flags = Vec::new();
        for (axis, targets) in super::hints::told_axes(constants) {
            flags.extend(suggested_flags(
                "--axis-for",
                &targets,
                names,
                &format!("={axis}"),
            ));
        }
        let unknown = constants
            .iter()
            .any(|c| matches!(c.told, Some(Told::Absent | Told::Neither)));
        let mut parts = Vec::new();
        if !flags.is_empty() {
            parts.push(format!(
                "the --like reference says the inputs hold slices: add {}",
                capped(flags, SHOWN).join(" ")
            ));
        }
        if unknown {
            parts.push(
                "for the tensors the reference cannot tell, check that --like names the model \
                 these inputs were split from"
                    .to_string(),
            );
        }
        parts.join("; ")
    } else {
        let targets: Vec<&str> = constants.iter().map(|c| c.name).collect();
        let axes = capped(
            suggested_flags("--axis-for", &targets, names, "=AXIS"),
            SHOWN,
        );
        let keeps = capped(suggested_flags("--keep", &targets, names, ""), SHOWN);
        format!(
            "name the unsplit model's header with --like REFERENCE (its .safetensors file or \
             index) and tjoin tells which; or decide them: {} if the inputs hold slices of \
             them, {} if each input holds them whole",
            axes.join(" "),
            keeps.join(" "),
        )
    };
    Refusal {
        headline,
        details,
        hint: Some(hint),
    }
}

/// The refusal of tensors an axis rule joins although every input holds the same bytes (not
/// one value throughout): a tensor each rank holds whole (MQA's single `k_proj`), or a rank
/// given twice. `--keep` decides before every axis rule, so the hint's flags act.
pub(super) fn identical_joined_refusal(
    identical: &[(&str, &Tensor, usize)],
    inputs: &[Input],
    names: &[&str],
    options: &JobOptions,
) -> Refusal {
    let merge = super::model_merge(inputs, options);
    let rules = options.rules.rules();
    let count = identical.len();
    let lines: Vec<String> = identical
        .iter()
        .map(|&(name, tensor, at)| {
            let info = &tensor.info;
            format!(
                "{}  {}  {}  joined by {}",
                excerpt(name),
                info.dtype,
                info.shape_text(),
                rules[at]
            )
        })
        .collect();
    let mut details: Vec<String> = capped(lines, SHOWN)
        .into_iter()
        .map(|l| format!("  {l}"))
        .collect();
    details.insert(0, format!("the same in all {} inputs:", inputs.len()));
    let targets: Vec<&str> = identical.iter().map(|&(name, _, _)| name).collect();
    let keeps = capped(suggested_flags("--keep", &targets, names, ""), SHOWN).join(" ");
    Refusal {
        headline: format!(
            "{count} tensor{} the same bytes in every input, yet a rule joins {} along an \
             axis: the output would hold {} copies of one piece",
            if count == 1 { " has" } else { "s have" },
            if count == 1 { "it" } else { "them" },
            inputs.len(),
        ),
        details,
        hint: Some(format!(
            "if each input holds the whole tensor (replicated, as a single key/value head's \
             projection is in every rank), keep one copy with {keeps}; if groups of ranks share \
             one piece (more ranks than key/value heads), say so in the rule with `replicas K` \
             (`GLOB = AXIS replicas K`); check that no rank's file is given twice{}",
            crate::plan::ranks::join_identical_advice(merge, "the pieces are")
        )),
    }
}

/// "`name` along axis 0: 192 (input 1 (a.safetensors)) + 128 (input 2 (b.safetensors))"
/// when the sizes along the join axis of a merged tensor's sources are not those of a split
/// (`ranks::split_kind`).
pub(super) fn unsplit_sizes(name: &str, job: &TensorJob) -> Option<String> {
    let axis = job.plan.axis;
    let sizes: Option<Vec<u64>> = job
        .sources
        .iter()
        .map(|s| s.info.shape.get(axis).copied())
        .collect();
    let sizes = sizes?;
    if ranks::split_kind(&sizes).is_some() {
        return None;
    }
    let shown: Vec<String> = job
        .sources
        .iter()
        .zip(&sizes)
        .take(outliers::ROWS)
        .map(|(s, size)| {
            let path = s.name.location.to_string();
            format!("{size} (input {}, {path})", s.name.position)
        })
        .collect();
    let more = if sizes.len() > shown.len() {
        " + ..."
    } else {
        ""
    };
    Some(format!(
        "{} along axis {axis}: {}{more}",
        excerpt(name),
        shown.join(" + ")
    ))
}

/// The refusal of merged tensors whose sizes along the join axis no split gives.
pub(super) fn uneven_refusal(lines: Vec<String>) -> Refusal {
    let count = lines.len();
    Refusal {
        headline: format!(
            "{count} tensor{} sizes along the join axis that no split gives: not all equal \
             (an even split), nor the first ones one larger (numpy's array_split), nor all \
             equal but a smaller last one (torch.chunk)",
            if count == 1 { " has" } else { "s have" },
        ),
        details: capped(lines, SHOWN),
        hint: Some(
            "check that every input is a rank of the same split of one model (ranks of two \
             tensor-parallel degrees mixed give such sizes), and the axis"
                .to_string(),
        ),
    }
}

/// Prefixes each refusal of one tensor's join with its name (in a whole-file join there are
/// many); other errors become a refusal of their own.
pub(super) fn about(name: Option<&str>, error: Error) -> Vec<Refusal> {
    match error {
        Error::Refused(refusals) => refusals
            .into_iter()
            .map(|mut r| {
                if let Some(name) = name {
                    r.headline = format!("tensor `{}`: {}", excerpt(name), r.headline);
                }
                r
            })
            .collect(),
        // A refusal's parts are one line each (its Display quotes them): the error's own
        // hint, after its message, becomes the refusal's.
        other => vec![other.as_refusal()],
    }
}

/// Sub-byte types (float4, float6) pack elements across byte boundaries, so a join with
/// several rounds needs every input's run to fill whole bytes.
pub(super) fn check_byte_runs(
    sources: &[&Tensor],
    axis: usize,
) -> std::result::Result<(), Vec<Refusal>> {
    let dtype: &DType = &sources[0].info.dtype;
    let shape = &sources[0].info.shape;
    let rounds: u64 = shape[..axis].iter().product();
    if dtype.bits() % 8 == 0 || rounds <= 1 {
        return Ok(());
    }
    let bad: Vec<String> = sources
        .iter()
        .filter_map(|t| {
            let run: u64 = t.info.shape[axis..].iter().product();
            dtype.bytes_for(run).is_none().then(|| {
                format!(
                    "{}  {}  {}: {run} elements of {} bits per run = {} bits",
                    t.name,
                    dtype,
                    t.info.shape_text(),
                    dtype.bits(),
                    run * dtype.bits()
                )
            })
        })
        .collect();
    if bad.is_empty() {
        return Ok(());
    }
    Err(vec![Refusal {
        headline: format!(
            "cannot join {dtype} tensors along axis {axis}: the join copies {rounds} runs from \
             each input, and some runs end inside a byte"
        ),
        details: bad,
        hint: Some(format!(
            "{dtype} packs {} bits per element; join along axis 0, or along an axis where \
             each input's run (its size there times the sizes after it) is a multiple of {} \
             elements",
            dtype.bits(),
            8 / gcd(8, dtype.bits())
        )),
    }])
}

/// The one tensor an input holds.
pub(super) fn only_tensor(input: &Input) -> Result<&Tensor> {
    match &*input.tensors {
        [only] => Ok(only),
        [] => Err(Error::refused(
            format!(
                "{} holds no tensors, and this join takes one tensor from each input",
                input.name
            ),
            "leave it out of the inputs",
        )),
        tensors => {
            let names: Vec<_> = tensors
                .iter()
                .filter_map(|t| t.name.tensor.as_deref())
                .take(5)
                .map(|name| excerpt(name))
                .collect();
            Err(Error::refused(
                format!(
                    "{} holds {} tensors ({}{}) and this join takes one tensor from each input",
                    input.name,
                    tensors.len(),
                    names.join(", "),
                    if tensors.len() > names.len() {
                        ", ..."
                    } else {
                        ""
                    }
                ),
                format!(
                    "pick one as {}:NAME, or write a .safetensors or .npz output (with only \
                     multi-tensor inputs) to join every tensor with its namesakes",
                    input.name.location
                ),
            ))
        }
    }
}

/// How the join axis's sizes add up to the output's: "along the join axis 0: 2 + 3 = 5", or,
/// past [`outliers::ROWS`] inputs, the count and the sum. `None` for a copied tensor (kept,
/// or a scalar), which has no join axis to explain.
pub(super) fn join_axis_sum(t: &TensorJob) -> Option<String> {
    let axis = t.plan.axis;
    if t.kept || axis >= t.out.shape.len() {
        return None;
    }
    let total = t.out.shape[axis];
    if t.sources.len() > outliers::ROWS {
        let count = outliers::thousands(t.sources.len());
        return Some(format!(
            "along the join axis {axis}: the sizes of {count} inputs add up to {total}"
        ));
    }
    let sizes: Vec<String> = match &t.ranges {
        Some(ranges) => ranges
            .iter()
            .map(|r| (r.end - r.start).to_string())
            .collect(),
        None => t
            .sources
            .iter()
            .map(|s| s.info.shape[axis].to_string())
            .collect(),
    };
    Some(format!(
        "along the join axis {axis}: {} = {total}",
        sizes.join(" + ")
    ))
}

/// "input 1 (a.npy) is [2, 3]" for each input, past [`outliers::ROWS`] as a bounded list:
/// the inputs whose shape differs from most inputs' (`odd`) first, then one of the others,
/// then a count of the rest.
pub(super) fn sources_by_shape(sources: &[&Tensor], odd: Option<&Split>) -> Vec<String> {
    let offenders = odd.map_or(&[][..], |split| split.outliers.as_slice());
    outliers::rows(sources.len(), offenders)
        .iter()
        .map(|row| match row {
            Row::Input(i) => format!("{} is {}", sources[*i].name, sources[*i].info.shape_text()),
            counted => counted
                .count_text(|i| sources[i].name.position)
                .unwrap_or_default(),
        })
        .collect()
}

/// The refusal of output tensor `t`, whose shape is not `expected`: the dimensions that
/// differ, the join axis's sum, and the inputs by shape, naming the tensor when the job
/// (`whole_file`) holds several.
pub(super) fn shape_refusal(t: &TensorJob, whole_file: bool, expected: &[u64]) -> Refusal {
    let differing: Vec<String> = if t.out.shape.len() == expected.len() {
        (0..expected.len())
            .filter(|&d| t.out.shape[d] != expected[d])
            .map(|d| format!("dimension {d}: {} != {}", t.out.shape[d], expected[d]))
            .collect()
    } else {
        vec![format!("rank {} != {}", t.out.shape.len(), expected.len())]
    };
    let shapes: Vec<&[u64]> = t.sources.iter().map(|s| &*s.info.shape).collect();
    let odd = outliers::split(&shapes);
    let mut details = vec![differing.join(", ")];
    details.extend(join_axis_sum(t));
    details.extend(sources_by_shape(&t.sources, odd.as_ref()));
    let tensor = if whole_file {
        format!("tensor `{}`: ", excerpt(&t.out.name))
    } else {
        String::new()
    };
    Refusal {
        headline: format!(
            "{tensor}the output would have shape {}, not the expected {}",
            shape_text(&t.out.shape),
            shape_text(expected)
        ),
        details,
        hint: Some(match &odd {
            // Inputs of one shape but a few: those few are the likely cause.
            Some(split) => format!(
                "{}, check the axis (-a), or correct --expect-shape",
                split.remove_or_fix(|i| t.sources[i].name.to_string())
            ),
            None => "check the inputs and the axis (-a), or correct --expect-shape".to_string(),
        }),
    }
}

/// The refusal of inputs that do not all hold the same tensors. Each input is compared with
/// what more than half of them hold, when they do (one odd shard among thousands is named
/// on the first line), else with every name any input holds; the list is bounded.
pub(super) fn names_mismatch(
    inputs: &[Input],
    names: &[&str],
    by_name: &[HashMap<&str, &Tensor>],
) -> Option<Refusal> {
    let held: Vec<Vec<&str>> = by_name
        .iter()
        .map(|tensors| {
            let mut held: Vec<&str> = tensors.keys().copied().collect();
            held.sort_unstable();
            held
        })
        .collect();
    let split = outliers::split(&held);
    let expected: Vec<&str> = match &split {
        Some(split) => names
            .iter()
            .copied()
            .filter(|n| by_name[split.reference].contains_key(n))
            .collect(),
        None => names.to_vec(),
    };
    // A model's thousands of names would bury the message: the first few say it.
    let listed = |names: &[&str]| {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        outliers::bounded_list(&names)
    };
    let differences = differences(names, &expected, by_name, split.is_some());
    let offenders: Vec<usize> = (0..inputs.len())
        .filter(|&i| differences[i] != (Vec::new(), Vec::new()))
        .collect();
    if offenders.is_empty() {
        return None;
    }
    let line = |i: usize| {
        let (lacks, extra) = &differences[i];
        let mut parts = Vec::new();
        if !lacks.is_empty() {
            parts.push(format!(
                "lacks {} of {}: {}",
                lacks.len(),
                expected.len(),
                listed(lacks)
            ));
        }
        if !extra.is_empty() {
            parts.push(format!("also holds {}", listed(extra)));
        }
        format!("{} {}", inputs[i].name, parts.join("; "))
    };
    let details = mismatch_rows(inputs, &offenders, &held, &line);
    let (differ, hint) = match &split {
        Some(split) => (
            format!(
                ": {}",
                split.headline(line, &format!("hold the same {} tensors", expected.len()))
            ),
            format!(
                "{}, or join the tensors they share one at a time with FILE:NAME",
                split.remove_or_fix(|i| inputs[i].name.to_string())
            ),
        ),
        None => (
            String::new(),
            "join the tensors they share one at a time with FILE:NAME, or drop the inputs that \
             lack some"
                .to_string(),
        ),
    };
    Some(Refusal {
        headline: format!(
            "the inputs do not hold the same tensors{differ}{}",
            if split.is_some() {
                ""
            } else {
                ": each tensor is joined with its namesakes in every input"
            }
        ),
        details,
        hint: Some(hint),
    })
}

/// What each input (`by_name`) lacks of `expected`, and, when `beyond`, holds beyond it of
/// `names`.
fn differences<'n>(
    names: &[&'n str],
    expected: &[&'n str],
    by_name: &[HashMap<&str, &Tensor>],
    beyond: bool,
) -> Vec<(Vec<&'n str>, Vec<&'n str>)> {
    by_name
        .iter()
        .map(|tensors| {
            let lacks = expected
                .iter()
                .copied()
                .filter(|n| !tensors.contains_key(n));
            let extra = names
                .iter()
                .copied()
                .filter(|n| tensors.contains_key(n) && beyond && !expected.contains(n));
            (lacks.collect(), extra.collect())
        })
        .collect()
}

/// The rows of the names' refusal: each input that differs (`offenders`) by its `line`, and,
/// among more inputs than a refusal lists, those around them by the count they hold (`held`).
fn mismatch_rows(
    inputs: &[Input],
    offenders: &[usize],
    held: &[Vec<&str>],
    line: &dyn Fn(usize) -> String,
) -> Vec<String> {
    if inputs.len() <= outliers::ROWS {
        return offenders.iter().map(|&i| line(i)).collect();
    }
    outliers::rows(inputs.len(), offenders)
        .iter()
        .map(|row| match row {
            Row::Input(i) if offenders.contains(i) => line(*i),
            Row::Input(i) => format!("{} holds {} tensors", inputs[*i].name, held[*i].len()),
            counted => counted
                .count_text(|i| inputs[i].name.position)
                .unwrap_or_default(),
        })
        .collect()
}

/// The refusal of a merge of checkpoints (files of named tensors, not all `.npz` dataset
/// shards) in which tensors that no rule decides have no axis: one refusal naming them, whose
/// hint is a rules file, where each tensor's refusal would say `-a 0` (a dataset's answer,
/// wrong for the row-split tensors of a tensor-parallel checkpoint).
pub(super) fn merge_without_axis(
    inputs: &[Input],
    names: &[&str],
    options: &JobOptions,
) -> Option<Refusal> {
    let datasets = inputs.iter().all(|i| i.format == Format::Npz);
    if options.axis.is_some()
        || options.spec.profile.default_axis.is_some()
        || inputs.len() < 2
        || datasets
    {
        return None;
    }
    let undecided: Vec<String> = names
        .iter()
        .filter(|name| options.decide(name).is_none())
        .map(|name| format!("`{}`", excerpt(name)))
        .collect();
    if undecided.is_empty() {
        return None;
    }
    let count = undecided.len();
    Some(Refusal {
        headline: format!(
            "no axis given for {count} tensor{} that no rule decides: merging checkpoints \
             takes each tensor's axis from a rule, or -a/--axis",
            if count == 1 { "" } else { "s" }
        ),
        details: capped(undecided, 10),
        hint: Some(format!(
            "name the rules file of the model's family with --rules (the repository's rules/ \
             folder holds {}), or give --axis-for GLOB=AXIS and --keep GLOB for these tensors, \
             or -a for every tensor no rule decides",
            crate::plan::rules::SHIPPED.join(", ")
        )),
    })
}

/// The refusal of a whole-file join whose `.safetensors` inputs hold disjoint tensors: they
/// are the shards of one checkpoint, to be passed as its index or folder (the hint's command
/// writes `output`). Returns `error` itself for any other join.
pub fn explain_disjoint(inputs: &[Input], output: Option<&Path>, error: Error) -> Error {
    let plain = inputs
        .iter()
        .all(|i| i.format == Format::SafeTensors && i.shards().is_none() && i.selected().is_none());
    if inputs.len() < 2 || !plain || !matches!(error, Error::Refused(_)) {
        return error;
    }
    let mut seen = HashSet::new();
    let disjoint = inputs
        .iter()
        .flat_map(|i| &i.tensors)
        .all(|t| seen.insert(t.name.tensor.as_deref().unwrap_or_default()));
    if !disjoint {
        return error;
    }
    let files: Vec<&Path> = inputs.iter().map(|i| i.name.location.as_path()).collect();
    let headline = format!(
        "the {} inputs hold different tensors (no name is in two of them): they look like the \
         shards of one checkpoint, which is one input, not {} to join",
        inputs.len(),
        inputs.len()
    );
    let details = inputs
        .iter()
        .map(|i| {
            let count = i.tensors.len();
            format!(
                "{}  {count} tensor{}",
                i.name,
                if count == 1 { "" } else { "s" }
            )
        })
        .collect();
    let output = crate::messages::path(output.unwrap_or(Path::new("model.safetensors")));
    let hint = match sharded::index_listing(&files) {
        Some(index) => format!(
            "{} lists them all: pass it instead, e.g. tjoin {} -o {output}",
            crate::messages::path(&index),
            crate::messages::path(&index)
        ),
        None => {
            let folder = crate::sys::folder_of(files[0]);
            format!(
                "a sharded checkpoint is read through its index (*.safetensors.index.json) or \
                 the folder that holds it, e.g. tjoin {}/ -o {output}; to join tensors along an \
                 axis, every input must hold the same names",
                crate::messages::path(folder)
            )
        }
    };
    Error::Refused(vec![Refusal {
        headline,
        details,
        hint: Some(hint),
    }])
}
