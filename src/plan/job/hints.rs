//! The fixes a job's refusals offer, tried before they are printed (issue 41, item 10): a
//! hint's flags, added to the command, must give a plan that passes every check. The job
//! collects them ([`Suggested`]: the `--keep`, `replicas` and `--like`-told `--axis-for`
//! rules, and whether `--uneven` is offered), the caller plans again with them, and a flag
//! whose plan is refused is not printed as a fix. In a model's merge ([`model_merge`]) no
//! hint offers `--join-identical`, which no check could tell from a wrong model.

use super::{Constant, Told};
use crate::error::Refusal;
use crate::format::Format;
use crate::input::Input;
use crate::plan::job::JobOptions;
use crate::plan::rules;

/// The fixes a job's refusals could offer, which the caller tries before it prints them
/// (issue 41, item 10): a hint's flags, added to the command, must give a plan that passes
/// every check.
#[derive(Debug, Default)]
pub struct Suggested {
    /// The rules the hints give as flags (`--keep` for replicated tensors, `replicas K` for
    /// ranks sharing a piece), in the order they would apply.
    pub rules: Vec<rules::Rule>,
    /// The headline of the refusal of sizes no split gives, whose hint offers `--uneven`
    /// only once the plan with it passes ([`uneven_tried`]).
    pub uneven: Option<String>,
}

impl Suggested {
    /// `refusal`, of sizes no split gives ([`super::refusals::uneven_refusal`]), noted as the
    /// one whose hint offers `--uneven` once the plan with it is tried.
    pub(super) fn offering_uneven(&mut self, refusal: Refusal) -> Refusal {
        self.uneven = Some(refusal.headline.clone());
        refusal
    }
}

/// Whether `inputs` are a model's ranks: several files of several tensors each, merged by
/// tensor rules or checked by `--like`, or any but `.npz` datasets' shards. There, pieces
/// that are the same in every input are never a split, and a hint never offers
/// `--join-identical` ([`crate::plan::ranks::join_identical_advice`]).
pub(super) fn model_merge(inputs: &[Input], options: &JobOptions) -> bool {
    let checked = !options.rules.rules().is_empty() || options.like.is_some();
    let datasets = inputs.iter().all(|i| i.format == Format::Npz);
    inputs.len() > 1 && inputs.iter().all(|i| i.tensors.len() > 1) && (checked || !datasets)
}

/// The rules the hints give as flags: `--keep` for the tensors in `kept` (replicated, or
/// identical pieces an axis rule joins), `--axis-for 'GLOB=AXIS replicas K'` for the
/// tensors in `grouped` that a flag did not decide (a flag added after it would not act),
/// and `--axis-for 'GLOB=AXIS'` for the `constants` `--like` says are split ([`told_rules`]).
/// `names` are every tensor of the inputs, for the globs.
pub(super) fn suggested_rules(
    (kept, grouped, constants): (&[&str], &[crate::plan::chunks::Grouped], &[Constant]),
    names: &[&str],
) -> Vec<rules::Rule> {
    let keep: Vec<String> = rules::suggest_globs(kept, names)
        .into_iter()
        .map(|(glob, _)| glob)
        .collect();
    let mut axis_for = Vec::new();
    // Grouped by axis and count, as the refusal's hint groups them.
    for (axis, k, targets) in &crate::plan::groups::by_axis_and_count(grouped) {
        for (glob, _) in rules::suggest_globs(targets, names) {
            let rule = format!("{glob}={axis} replicas {k}");
            axis_for.extend(rule.parse::<rules::AxisRule>());
        }
    }
    axis_for.extend(told_rules(constants, names));
    rules::ordered(&keep, &axis_for, Vec::new())
}

/// Each axis `--like`'s reference says some of the constant tensors `constants` are split
/// along (`Told::Axis`), in order, with those tensors' names.
pub(super) fn told_axes<'a>(constants: &[Constant<'a>]) -> Vec<(usize, Vec<&'a str>)> {
    let mut axes: Vec<usize> = constants
        .iter()
        .filter_map(|c| match c.told {
            Some(Told::Axis(axis)) => Some(axis),
            _ => None,
        })
        .collect();
    axes.sort_unstable();
    axes.dedup();
    let named = |axis| {
        let told = constants
            .iter()
            .filter(|c| c.told == Some(Told::Axis(axis)));
        told.map(|c| c.name).collect()
    };
    axes.into_iter().map(|axis| (axis, named(axis))).collect()
}

/// The `--axis-for GLOB=AXIS` rules the hint of [`super::refusals::undecidable_refusal`]
/// gives for the constant tensors `--like`'s reference says are split ([`told_axes`]), for
/// the caller to try before it prints them (issue 41, item 10). `names` are every tensor of
/// the inputs.
fn told_rules(constants: &[Constant], names: &[&str]) -> Vec<rules::AxisRule> {
    let mut axis_for = Vec::new();
    for (axis, targets) in told_axes(constants) {
        for (glob, _) in rules::suggest_globs(&targets, names) {
            axis_for.extend(format!("{glob}={axis}").parse::<rules::AxisRule>());
        }
    }
    axis_for
}

/// Ends the hint of the refusal `headline` of `refused` names (of sizes no split gives,
/// [`super::refusals::uneven_refusal`]) by what the plan with `--uneven` gave (`with`): the flag when that
/// plan passes every check; else what it still refuses, and that refusal's hint, which says
/// what would let tjoin tell (issue 41, item 10: a hint whose flags are refused is not
/// printed as a fix).
pub fn uneven_tried(
    refused: &mut [Refusal],
    headline: &str,
    with: std::result::Result<(), Vec<Refusal>>,
) {
    let Some(refusal) = refused.iter_mut().find(|r| r.headline == headline) else {
        return;
    };
    let advice = match with {
        Ok(()) => "; if the sizes are meant, add --uneven".to_string(),
        Err(still) => {
            let first = still.first();
            let why = first.map_or("", |r| r.headline.as_str());
            let then = first
                .and_then(|r| r.hint.as_deref())
                .map_or(String::new(), |h| format!(" ({h})"));
            format!("; --uneven would not do: with it, tjoin still refuses the merge: {why}{then}")
        }
    };
    if let Some(hint) = &mut refusal.hint {
        hint.push_str(&advice);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::job::refusals::uneven_refusal;

    fn uneven() -> Vec<Refusal> {
        vec![uneven_refusal(vec!["`w` along axis 0: 8 + 4".to_string()])]
    }

    #[test]
    fn uneven_is_offered_only_when_the_plan_with_it_passes() {
        let mut refused = uneven();
        let headline = refused[0].headline.clone();
        uneven_tried(&mut refused, &headline, Ok(()));
        let hint = refused[0].hint.as_deref().unwrap();
        assert!(
            hint.ends_with("; if the sizes are meant, add --uneven"),
            "{hint}"
        );
        let mut refused = uneven();
        let still = Refusal {
            headline: "cannot tell whether these 2 inputs are every rank".to_string(),
            details: Vec::new(),
            hint: Some("prove it with config.json".to_string()),
        };
        uneven_tried(&mut refused, &headline, Err(vec![still]));
        let hint = refused[0].hint.as_deref().unwrap();
        assert!(!hint.contains("add --uneven"), "{hint}");
        assert!(
            hint.ends_with(
                "--uneven would not do: with it, tjoin still refuses the merge: cannot tell \
                 whether these 2 inputs are every rank (prove it with config.json)"
            ),
            "{hint}"
        );
    }
}
