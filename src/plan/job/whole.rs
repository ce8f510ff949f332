//! A whole-file join's job: every tensor that every input holds, decided by its rule, by
//! `-a`, or by the inputs' bytes, and then planned, refused, or set aside with the others of
//! its kind for the one refusal that lists them all.

use std::collections::{HashMap, HashSet};

use super::hints::{Suggested, model_merge, suggested_rules};
use super::refusals::{
    self, identical_joined_refusal, names_mismatch, replicated_refusal, undecidable_refusal,
    uneven_refusal, unsplit_sizes,
};
use super::{
    Constant, JobOptions, Told, decided_axis, fused_unstated, identical, keep_tensor, plan_tensor,
    told_by_reference,
};
use crate::error::{Error, Refusal, Result};
use crate::input::reference::Reference;
use crate::input::{Input, Tensor};
use crate::messages::excerpt;
use crate::plan::chunks::{self, Parts};
use crate::plan::rules::Treatment;
use crate::plan::tensor_job::TensorJob;
use crate::plan::{compare, ranks};

/// What planning one tensor came to: its job, or its refusals.
type Planned<'a> = std::result::Result<TensorJob<'a>, Vec<Refusal>>;

/// Every tensor of the inputs, joined with its namesakes; every problem in one error.
pub(super) fn build_whole<'a>(
    inputs: &'a [Input],
    options: &JobOptions,
    suggested: &mut Suggested,
) -> Result<Vec<TensorJob<'a>>> {
    if options.name.is_some() {
        return Err(Error::refused(
            "--name names the tensor of a single-tensor join, but these inputs are \
                       joined tensor by tensor, each keeping its name",
            "drop --name, or pick one tensor of each input with FILE:NAME",
        ));
    }
    let (names, by_name) = by_name(inputs);
    if !options.join_identical {
        let paths: Vec<&std::path::Path> =
            inputs.iter().map(|i| i.name.location.as_path()).collect();
        ranks::check_repeated(&paths, model_merge(inputs, options))?;
    }
    if let Some(refusal) = refusals::merge_without_axis(inputs, &names, options) {
        return Err(Error::Refused(vec![refusal]));
    }
    let mut sorted = Sorted {
        refusals: names_mismatch(inputs, &names, &by_name)
            .into_iter()
            .collect(),
        ..Sorted::default()
    };
    let whole = Whole {
        inputs,
        // A merge of checkpoints (files of several tensors each, with tensor rules or a
        // --like reference), not a dataset's shards (`day1.npz day2.npz`, of any sizes): only
        // there are the sizes along the axis those of a split.
        checkpoints: inputs.len() > 1
            && inputs.iter().all(|i| i.tensors.len() > 1)
            && (!options.rules.rules().is_empty() || options.like.is_some()),
        reference: options.like.map(Reference::shapes),
        by_name,
    };
    for &name in &names {
        let sources: Vec<&Tensor> = whole
            .by_name
            .iter()
            .filter_map(|t| t.get(name).copied())
            .collect();
        if sources.len() == inputs.len() {
            sort_tensor(name, sources, &whole, options, &mut sorted)?;
        }
    }
    sorted.finish(inputs, &names, options, suggested)
}

/// Every name once, in the order the inputs first hold it; and each input's tensors by name,
/// for a model's thousands of tensors looked up in every input.
type ByName<'a> = Vec<HashMap<&'a str, &'a Tensor>>;

/// The names of `inputs`' tensors and each input's tensors by name ([`ByName`]).
fn by_name(inputs: &[Input]) -> (Vec<&str>, ByName<'_>) {
    let mut seen = HashSet::new();
    let mut names: Vec<&str> = Vec::new();
    let mut by_name: ByName = Vec::with_capacity(inputs.len());
    for input in inputs {
        let mut tensors = HashMap::with_capacity(input.tensors.len());
        for tensor in &input.tensors {
            let name = tensor.name.tensor.as_deref().unwrap_or_default();
            if seen.insert(name) {
                names.push(name);
            }
            // The first of two tensors of one name, as a search from the front finds it.
            if let Some(name) = tensor.name.tensor.as_deref() {
                tensors.entry(name).or_insert(tensor);
            }
        }
        by_name.push(tensors);
    }
    (names, by_name)
}

/// What holds for every tensor of a whole-file join.
struct Whole<'a, 'r> {
    inputs: &'a [Input],
    /// Each input's tensors by name.
    by_name: ByName<'a>,
    /// A merge of checkpoints, whose sizes along the axis must be those of a split.
    checkpoints: bool,
    /// `--like`'s reference: each tensor's shape.
    reference: Option<HashMap<&'r str, &'r [u64]>>,
}

impl Whole<'_, '_> {
    /// The fused tensor `name` whose layout its rule does not state, when it is one.
    fn unstated(
        &self,
        name: &str,
        sources: &[&Tensor],
        axis: Option<i64>,
        parts: &Parts,
        options: &JobOptions,
    ) -> Option<chunks::Unstated> {
        let sibling = |name: &str| self.by_name[0].get(name).map(|t| t.info.shape.to_vec());
        fused_unstated(name, sources, axis, parts, options, &sibling)
    }
}

/// Sorts the tensor `name` that every input holds (`sources`) into `sorted`: planned,
/// refused, or set aside for the refusal of its kind. Fails only on a damaged input.
fn sort_tensor<'a>(
    name: &'a str,
    sources: Vec<&'a Tensor>,
    whole: &Whole<'a, '_>,
    options: &JobOptions,
    sorted: &mut Sorted<'a>,
) -> Result<()> {
    let info = &sources[0].info;
    let (tensor_options, counter) = options.for_tensor(name, info, &info.shape);
    let options = &tensor_options;
    let decided = options.decide(name);
    let parts = options.parts(decided);
    let planned = if let Some((_, Treatment::Keep)) = decided {
        match keep_tensor(name, &sources, options) {
            Err(Error::Refused(problems)) => Err(problems),
            Err(damaged) => return Err(damaged),
            Ok(job) => Ok(job),
        }
    } else if !options.copies(&sources, decided_axis(decided, options))
        && sources.iter().any(|t| t.info.shape.is_empty())
    {
        Err(vec![scalar_refusal(name, &sources)])
    } else if let Some((at, Treatment::Axis(axis))) = decided {
        match by_rule(name, sources, (at, axis), &parts, whole, options, sorted)? {
            Some(planned) => planned,
            None => return Ok(()),
        }
    } else if options.join_identical || !identical(&sources) {
        match by_axis(name, sources, &parts, whole, options, sorted) {
            Some(planned) => planned,
            None => return Ok(()),
        }
    } else {
        sorted.same_bytes(name, sources[0], whole);
        return Ok(());
    };
    let rule = decided.map(|(at, _)| at);
    sorted.add(
        name,
        planned,
        rule,
        counter,
        whole.checkpoints && !options.uneven,
    );
    Ok(())
}

/// The refusal of the tensor `name`, a scalar in an input (`sources`): it has no axis.
fn scalar_refusal(name: &str, sources: &[&Tensor]) -> Refusal {
    Refusal {
        headline: format!(
            "tensor `{}` is a scalar (rank 0) in {}: it has no axis to join along",
            excerpt(name),
            sources[0].name
        ),
        details: Vec::new(),
        hint: Some(format!(
            "copy it from the first input with --keep '{}' (tjoin checks that \
                     every input holds the same value)",
            excerpt(name)
        )),
    }
}

/// The tensor `name` that the axis rule at `at` joins along `axis`: planned, or set aside in
/// `sorted` (`None`) as a fused tensor whose layout the rule does not state, as pieces that
/// are all the same bytes, or as ranks that share a piece. Fails only on a damaged input.
fn by_rule<'a>(
    name: &'a str,
    sources: Vec<&'a Tensor>,
    (at, axis): (usize, i64),
    parts: &Parts,
    whole: &Whole<'a, '_>,
    options: &JobOptions,
    sorted: &mut Sorted<'a>,
) -> Result<Option<Planned<'a>>> {
    if let Some(unstated) = whole.unstated(name, &sources, Some(axis), parts, options) {
        sorted.fused.push(unstated);
        return Ok(None);
    }
    // A rule's axis stands for a constant tensor (the bytes cannot contradict it), but
    // not for pieces that are all the same non-constant bytes, unless the rule says
    // that the ranks hold replicas.
    if !options.join_identical
        && parts.replicas == 1
        && identical(&sources)
        && compare::constant(sources[0]).is_ok_and(|c| c.is_none())
    {
        sorted.identical_joined.push((name, sources[0], at));
        return Ok(None);
    }
    if !options.join_identical && parts.replicas == 1 && parts.part_replicas.is_empty() {
        if let Some(k) = chunks::replica_groups(&sources) {
            let rule = &options.rules.rules()[at];
            let flag = rule.origin == crate::plan::rules::Origin::AxisForFlag;
            let (name, rule) = (name.to_string(), rule.to_string());
            sorted.grouped.push(chunks::Grouped {
                name,
                axis,
                k,
                rule,
                flag,
            });
            return Ok(None);
        }
    }
    match chunks::representatives(name, &sources, parts) {
        Ok(pieces) => Ok(Some(plan_tensor(
            name,
            pieces,
            Some(axis),
            parts,
            options,
            true,
        ))),
        Err(Error::Refused(problems)) => Ok(Some(Err(problems))),
        Err(damaged) => Err(damaged),
    }
}

/// The tensor `name` that no rule decides, joined along `-a`'s axis: planned, or set aside in
/// `sorted` (`None`) as a fused tensor whose layout no rule states, or as ranks that share a
/// piece.
fn by_axis<'a>(
    name: &'a str,
    sources: Vec<&'a Tensor>,
    parts: &Parts,
    whole: &Whole<'a, '_>,
    options: &JobOptions,
    sorted: &mut Sorted<'a>,
) -> Option<Planned<'a>> {
    if let Some(unstated) = whole.unstated(name, &sources, options.axis, parts, options) {
        sorted.fused.push(unstated);
        return None;
    }
    // Every tensor joined along an axis gets the replica-group check, whatever
    // decided its axis: `-a` joins the biases of key-value heads that groups of ranks
    // share as surely as a rule joins their weights.
    if !options.join_identical
        && let Some(axis) = options.axis
        && let Some(k) = chunks::replica_groups(&sources)
    {
        sorted.grouped.push(chunks::Grouped {
            name: name.to_string(),
            axis,
            k,
            rule: format!("-a {axis}"),
            flag: false,
        });
        return None;
    }
    Some(plan_tensor(
        name,
        sources,
        options.axis,
        parts,
        options,
        true,
    ))
}

/// The tensors of a whole-file join, sorted: the jobs planned, the refusals of single
/// tensors, and the tensors of each kind that one refusal lists together.
#[derive(Default)]
struct Sorted<'a> {
    jobs: Vec<TensorJob<'a>>,
    refusals: Vec<Refusal>,
    replicated: Vec<(&'a str, &'a Tensor)>,
    fused: Vec<chunks::Unstated>,
    undecidable: Vec<Constant<'a>>,
    identical_joined: Vec<(&'a str, &'a Tensor, usize)>,
    grouped: Vec<chunks::Grouped>,
    uneven: Vec<String>,
}

impl<'a> Sorted<'a> {
    /// Sets aside the tensor `name` that every input holds as the same bytes (`tensor`, the
    /// first input's): replicated, or, when it holds one value throughout, undecidable unless
    /// `--like`'s reference tells that each input holds it whole.
    fn same_bytes(&mut self, name: &'a str, tensor: &'a Tensor, whole: &Whole) {
        match compare::constant(tensor) {
            Ok(Some(value)) => {
                let told = whole.reference.as_ref().map(|shapes| {
                    told_by_reference(shapes.get(name).copied(), tensor, whole.inputs.len())
                });
                match told {
                    Some(Told::Whole) => self.replicated.push((name, tensor)),
                    told => self.undecidable.push(Constant {
                        name,
                        tensor,
                        zero: value.iter().all(|&b| b == 0),
                        told,
                    }),
                }
            }
            _ => self.replicated.push((name, tensor)),
        }
    }

    /// Adds what planning the tensor `name` came to: its job, decided by the rule at `rule`
    /// and a counter a cast leaves (`counter`); or its refusals. With `split_sizes`, a job
    /// whose sizes along the axis no split gives is set aside as uneven.
    fn add(
        &mut self,
        name: &str,
        planned: Planned<'a>,
        rule: Option<usize>,
        counter: bool,
        split_sizes: bool,
    ) {
        match planned {
            Ok(job) => {
                if split_sizes
                    && !job.kept
                    && job.sources.len() > 1
                    && let Some(line) = unsplit_sizes(name, &job)
                {
                    self.uneven.push(line);
                }
                self.jobs.push(TensorJob {
                    rule,
                    counter,
                    ..job
                })
            }
            Err(problems) => self.refusals.extend(problems),
        }
    }

    /// The jobs, or every refusal: the single tensors', then one of each kind set aside.
    /// Adds to `suggested` the rules the refusals' hints give as the fix.
    fn finish(
        self,
        inputs: &[Input],
        names: &[&str],
        options: &JobOptions,
        suggested: &mut Suggested,
    ) -> Result<Vec<TensorJob<'a>>> {
        let mut refusals = self.refusals;
        let kept = self.replicated.iter().map(|&(name, _)| name);
        let kept: Vec<&str> = kept
            .chain(self.identical_joined.iter().map(|&(name, ..)| name))
            .collect();
        let rules = suggested_rules((&kept, &self.grouped, &self.undecidable), names);
        suggested.rules.extend(rules);
        if !self.replicated.is_empty() {
            refusals.push(replicated_refusal(&self.replicated, inputs, names, options));
        }
        if !self.fused.is_empty() {
            refusals.extend(chunks::unstated_refusals(&self.fused, names));
        }
        if !self.undecidable.is_empty() {
            refusals.push(undecidable_refusal(
                &self.undecidable,
                inputs,
                names,
                options,
            ));
        }
        if !self.identical_joined.is_empty() {
            refusals.push(identical_joined_refusal(
                &self.identical_joined,
                inputs,
                names,
                options,
            ));
        }
        if !self.grouped.is_empty() {
            let merge = model_merge(inputs, options);
            refusals.push(chunks::grouped_refusal(&self.grouped, names, merge));
        }
        if !self.uneven.is_empty() {
            refusals.push(suggested.offering_uneven(uneven_refusal(self.uneven)));
        }
        if refusals.is_empty() {
            Ok(self.jobs)
        } else {
            Err(Error::Refused(refusals))
        }
    }
}
