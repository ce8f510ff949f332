//! Ranks that share a piece: a tensor joined along an axis whose inputs hold the same bytes
//! in groups of consecutive ones (vLLM's ranks when there are more ranks than key-value
//! heads), found and refused with the `replicas K` rule that joins each group's piece once.

use crate::messages::excerpt;
use crate::plan::compare;
use crate::plan::globs::{shell_quote, suggest_globs};

/// A tensor an axis rule joins whose inputs hold the same bytes in groups of consecutive
/// ones ([`replica_groups`]), with no `replicas` said: its name, axis, group size, and the
/// rule as messages show it (whether an `--axis-for` flag, which a flag added later cannot
/// override).
#[derive(Debug, Clone)]
pub struct Grouped {
    /// The tensor's name.
    pub name: String,
    /// The rule's axis.
    pub axis: i64,
    /// How many consecutive inputs hold each piece.
    pub k: usize,
    /// The rule that joins it, as messages show it (`-a N` when no rule decides it).
    pub rule: String,
    /// Whether that rule is an `--axis-for` flag.
    pub flag: bool,
}

/// The smallest group size `k` (dividing the count, below it) such that every group of `k`
/// consecutive inputs holds the same bytes for this tensor, which holds more than one value:
/// ranks sharing a piece, as vLLM's are when there are more ranks than key-value heads.
/// Joined plainly, each piece would come out `k` times, with exit 0 when no `--like` says
/// the shape. `None` when the first two inputs differ, which costs one small read.
pub fn replica_groups(sources: &[&crate::input::Tensor]) -> Option<usize> {
    let n = sources.len();
    let same = |a: &crate::input::Tensor, b: &crate::input::Tensor| {
        matches!(compare::differs(a, b), Ok(None))
    };
    if n < 4 || !same(sources[0], sources[1]) {
        return None;
    }
    if !compare::constant(sources[0]).is_ok_and(|c| c.is_none()) {
        return None;
    }
    (2..n).filter(|k| n % k == 0).find(|&k| {
        sources
            .chunks(k)
            .all(|group| group[1..].iter().all(|other| same(group[0], other)))
    })
}

/// The tensors of `grouped` that no `--axis-for` flag decided (a flag added after it would
/// not act), by axis and group size: one rule each states their `replicas`.
pub fn by_axis_and_count(grouped: &[Grouped]) -> Vec<(i64, usize, Vec<&str>)> {
    let mut groups: Vec<(i64, usize, Vec<&str>)> = Vec::new();
    for g in grouped.iter().filter(|g| !g.flag) {
        match groups
            .iter_mut()
            .find(|(a, k, _)| (*a, *k) == (g.axis, g.k))
        {
            Some((_, _, members)) => members.push(&g.name),
            None => groups.push((g.axis, g.k, vec![&g.name])),
        }
    }
    groups
}

/// The refusal of tensors [`replica_groups`] found, with the rule that joins each group's
/// piece once; `names` are every tensor of the inputs, for the globs.
/// In a model's merge (`merge`), the hint does not offer `--join-identical`
/// ([`crate::plan::ranks::join_identical_advice`]).
pub fn grouped_refusal(grouped: &[Grouped], names: &[&str], merge: bool) -> crate::error::Refusal {
    let details: Vec<String> = grouped
        .iter()
        .map(|g| {
            format!(
                "{}  the same in each group of {} consecutive inputs; joined by {}",
                excerpt(&g.name),
                g.k,
                g.rule
            )
        })
        .collect();
    let mut flags = Vec::new();
    for (axis, k, targets) in &by_axis_and_count(grouped) {
        for (glob, _) in suggest_globs(targets, names) {
            let rule = format!("{}={axis} replicas {k}", excerpt(&glob));
            flags.push(format!("--axis-for {}", shell_quote(&rule)));
        }
    }
    let mut hint = String::from(
        "if groups of consecutive ranks share one piece (more ranks than key-value heads, \
         as vLLM splits them), say so with `replicas K`",
    );
    if !flags.is_empty() {
        hint.push_str(&format!(
            ": add {}",
            crate::error::capped(flags, 10).join(" ")
        ));
    }
    let flagged: Vec<&str> = grouped
        .iter()
        .filter(|g| g.flag)
        .map(|g| g.rule.as_str())
        .collect();
    if !flagged.is_empty() {
        let mut flagged = flagged;
        flagged.dedup();
        hint.push_str(&format!(
            "; write ` replicas K` at the end of {} itself (an --axis-for added after it \
             would not act)",
            flagged.join(", ")
        ));
    }
    hint.push_str("; check that the inputs are in rank order and no rank's file is given twice");
    hint.push_str(&crate::plan::ranks::join_identical_advice(
        merge,
        "the pieces are",
    ));
    let count = grouped.len();
    crate::error::Refusal {
        headline: format!(
            "{count} tensor{} joined along an axis {} the same bytes in groups of \
             consecutive inputs: the output would hold each group's piece once per member",
            if count == 1 { "" } else { "s" },
            if count == 1 { "has" } else { "have" },
        ),
        details: crate::error::capped(details, 10),
        hint: Some(hint),
    }
}
