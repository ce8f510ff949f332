//! Flags that contradict a recognized family (issue 41, item 6): a merge given `-a` or a
//! rules file, whose tensors a family of the table names, is compared tensor by tensor with
//! the family's rules. A tensor that `-a` or a rules file's line would join otherwise than the
//! family does (`-a 0` on a row-parallel `o_proj`, a norm the family keeps, `chunks 3` on
//! GPT-NeoX's per-head `query_key_value`) is refused, with the family's rule as the hint. Only
//! the user's naming of a tensor on the command line (`--axis-for`, `--keep`) overrides the
//! family: a rules file is often another family's, and `-a` names no tensor at all.

use std::collections::{BTreeMap, HashSet};

use crate::error::{Refusal, Result, capped};
use crate::messages;
use crate::plan::chunks::{Fused, Parts};
use crate::plan::complete::ModelSizes;
use crate::plan::rules::{Matcher, Origin, Rule, Treatment};

use super::{FROM_HEADS, Family};

/// How a tensor is joined: by a rule's treatment and parts, or by `-a`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Joined {
    treatment: Treatment,
    parts: Parts,
}

/// A group of tensors that the user's flags join otherwise than the family's rule does.
#[derive(Debug)]
pub struct Contradiction {
    /// The family's rule, as a message shows it.
    pub family_rule: String,
    /// What decided them instead: `-a 0`, or the rules file's line.
    pub given: String,
    /// The tensors' names, quoted.
    pub tensors: Vec<String>,
}

/// Each group of tensors (`tensors`: each name and its number of dimensions) that the
/// user's rules (`given`) or axis (`axis`: `-a`, or the spec's default) join otherwise than
/// `family_rules` (a family's, [`Family::rules`]) do. A tensor named by an `--axis-for` or
/// `--keep` flag is the user's to decide; a tensor no family rule decides, or that nothing
/// the user gave decides, is left to the other checks.
pub fn contradictions(
    family_rules: &Matcher,
    given: &Matcher,
    axis: Option<i64>,
    tensors: &[(&str, usize)],
) -> Vec<Contradiction> {
    let mut groups: BTreeMap<(usize, Option<usize>), Vec<String>> = BTreeMap::new();
    for &(name, rank) in tensors {
        let Some(at) = family_rules.decide(name) else {
            continue;
        };
        let rule = &family_rules.rules()[at];
        let decided = given.decide(name);
        let joined = match decided {
            Some(by) => {
                let by = &given.rules()[by];
                if matches!(by.origin, Origin::AxisForFlag | Origin::KeepFlag) {
                    continue;
                }
                Joined {
                    treatment: by.treatment,
                    parts: by.parts.clone(),
                }
            }
            None => match axis {
                Some(axis) => Joined {
                    treatment: Treatment::Axis(axis),
                    parts: Parts::default(),
                },
                None => continue,
            },
        };
        if contradicts(rule, &joined, rank) {
            groups
                .entry((at, decided))
                .or_default()
                .push(messages::name(name));
        }
    }
    groups
        .into_iter()
        .map(|((at, decided), tensors)| Contradiction {
            family_rule: family_rules.rules()[at].to_string(),
            given: match decided {
                Some(by) => given.rules()[by].to_string(),
                None => format!("-a {}", axis.unwrap_or_default()),
            },
            tensors,
        })
        .collect()
}

/// The family a merge given flags is checked against, and the contradictions its flags
/// (`given`, `axis`) make with it, when there are some: the families `candidates` gives
/// ([`super::candidates`]), each with its rules for `ranks` inputs and config.json's heads
/// (`model`); where several fit the names alike (Phi-3's and vLLM's), a tensor contradicts
/// only if it contradicts every one of them.
pub fn check(
    candidates: &[&'static Family],
    (ranks, model): (usize, Option<&ModelSizes>),
    given: &Matcher,
    axis: Option<i64>,
    tensors: &[(&str, usize)],
) -> Result<Option<(&'static Family, Vec<Contradiction>)>> {
    let mut found: Option<(&'static Family, Vec<Contradiction>)> = None;
    for &family in candidates {
        let rules = family.rules(ranks, model)?;
        let these = contradictions(&Matcher::new(&rules), given, axis, tensors);
        found = Some(match found {
            None => (family, these),
            Some((first, mut kept)) => {
                let theirs: HashSet<&String> = these.iter().flat_map(|c| &c.tensors).collect();
                for contradiction in &mut kept {
                    contradiction.tensors.retain(|t| theirs.contains(t));
                }
                kept.retain(|c| !c.tensors.is_empty());
                (first, kept)
            }
        });
    }
    Ok(found.filter(|(_, found)| !found.is_empty()))
}

/// Whether joining a tensor of `rank` dimensions as `joined` says differs from what the
/// family's `rule` says: kept against joined, another axis, other fused proportions; and,
/// where the family's rule comes from config.json's head counts, other replica groups.
fn contradicts(rule: &Rule, joined: &Joined, rank: usize) -> bool {
    let axis = |axis: i64| {
        if axis < 0 {
            axis.checked_add(i64::try_from(rank).unwrap_or(i64::MAX))
        } else {
            Some(axis)
        }
    };
    match (rule.treatment, joined.treatment) {
        (Treatment::Keep, Treatment::Keep) => false,
        (Treatment::Axis(family), Treatment::Axis(given)) => {
            axis(family) != axis(given)
                || fused(&rule.parts.fused) != fused(&joined.parts.fused)
                || (from_heads(rule)
                    && (rule.parts.replicas != joined.parts.replicas
                        || rule.parts.part_replicas != joined.parts.part_replicas))
        }
        _ => true,
    }
}

/// A fused layout in lowest terms: `None` for a plain join (said or not), the proportions
/// divided by their greatest common divisor otherwise (`chunks 8:4:4` is `chunks 2:1:1`).
fn fused(fused: &Fused) -> Option<Vec<u64>> {
    let Fused::Chunks(shares) = fused else {
        return None;
    };
    let gcd = shares.iter().fold(0, |a, &b| gcd(a, b)).max(1);
    Some(shares.iter().map(|s| s / gcd).collect())
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Whether `rule` is one a family's head counts add (config.json's `replicas`, `chunks`).
fn from_heads(rule: &Rule) -> bool {
    matches!(&rule.origin, Origin::File { path, .. }
        if path.to_string_lossy().ends_with(FROM_HEADS))
}

/// The refusal of `contradictions` (not empty) of the family `family`, told by `evidence`:
/// each group's tensors, what decided them and the family's rule. `flagless` is what a merge
/// by the family's own rules gives, tried before the hint says so: `Ok` when it passes every
/// check, else its refusals, whose first the hint passes on.
pub fn refusal(
    (family, evidence): (&Family, &str),
    contradictions: &[Contradiction],
    flagless: std::result::Result<(), Vec<Refusal>>,
) -> Refusal {
    let name = family.name;
    let count: usize = contradictions.iter().map(|c| c.tensors.len()).sum();
    let mut details = vec![format!("the {name} family, by {evidence}")];
    for contradiction in contradictions {
        details.push(format!(
            "{}: by {}, but the {name} family's rule is {}",
            capped(contradiction.tensors.clone(), 4).join(", "),
            contradiction.given,
            contradiction.family_rule
        ));
    }
    let hint = match flagless {
        Ok(()) => format!(
            "no flags needed: without `-a`, `--rules`, `--axis-for` and `--keep`, tjoin \
             merges a {name} model by its built-in rules (`tjoin rules {name}` prints them), \
             which it has tried on these inputs; to split a tensor otherwise on purpose, name \
             it in an `--axis-for` flag"
        ),
        Err(refused) => {
            let first = refused.first();
            let headline = first.map_or("", |r| r.headline.as_str());
            let then = first
                .and_then(|r| r.hint.as_deref())
                .map_or(String::new(), |h| format!(" ({h})"));
            format!(
                "the {name} family's built-in rules say how each of these tensors is split \
                 (`tjoin rules {name}` prints them); without `-a`, `--rules`, `--axis-for` \
                 and `--keep`, tjoin merges by them, but refuses these inputs: \
                 {headline}{then}"
            )
        }
    };
    Refusal {
        headline: format!(
            "the flags contradict the {name} family's rules for {count} tensor{}: the merge \
             would be a wrong model",
            if count == 1 { "" } else { "s" }
        ),
        details: capped(details, 10),
        hint: Some(hint),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::families::by_name;
    use crate::plan::rules::parse_file;
    use std::path::Path;

    const LLAMA: &[(&str, usize)] = &[
        ("model.layers.0.self_attn.q_proj.weight", 2),
        ("model.layers.0.self_attn.o_proj.weight", 2),
        ("model.layers.0.mlp.down_proj.weight", 2),
        ("model.layers.0.input_layernorm.weight", 1),
        ("model.unknown.weight", 2),
    ];

    fn family(name: &str) -> Vec<Rule> {
        by_name(name).unwrap().rules(2, None).unwrap()
    }

    #[test]
    fn an_axis_is_refused_for_the_tensors_the_family_splits_otherwise() {
        let llama = family("llama");
        let (family, none) = (Matcher::new(&llama), Matcher::new(&[]));
        let found = contradictions(&family, &none, Some(0), LLAMA);
        let tensors: Vec<&str> = found
            .iter()
            .flat_map(|c| c.tensors.iter().map(String::as_str))
            .collect();
        assert_eq!(
            tensors,
            [
                "model.layers.0.self_attn.o_proj.weight",
                "model.layers.0.mlp.down_proj.weight",
                "model.layers.0.input_layernorm.weight"
            ]
        );
        assert!(found.iter().all(|c| c.given == "-a 0"));
        // -a -2 is axis 0 of a matrix: the same contradictions.
        assert_eq!(contradictions(&family, &none, Some(-2), LLAMA).len(), 3);
        // No -a, no rules: nothing the user gave decides them.
        assert!(contradictions(&family, &none, None, LLAMA).is_empty());
    }

    #[test]
    fn a_tensor_named_by_a_flag_is_the_users() {
        let llama = family("llama");
        let family = Matcher::new(&llama);
        let axis_for: crate::plan::rules::AxisRule = "*.o_proj.weight=0".parse().unwrap();
        let given = crate::plan::rules::ordered(
            &["*norm.weight".to_string()],
            &[axis_for],
            parse_file(Path::new("other.rules"), "*.down_proj.weight = 0\n").unwrap(),
        );
        let given = Matcher::new(&given);
        let found = contradictions(&family, &given, Some(0), LLAMA);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].tensors, ["model.layers.0.mlp.down_proj.weight"]);
        assert_eq!(found[0].given, "other.rules:1: *.down_proj.weight = 0");
        assert!(found[0].family_rule.contains("*.down_proj.weight = 1"));
    }

    #[test]
    fn fused_layouts_compare_in_lowest_terms() {
        let neox = family("gpt-neox");
        let family = Matcher::new(&neox);
        let qkv = [("gpt_neox.layers.0.attention.query_key_value.weight", 2)];
        let chunked = parse_file(Path::new("x.rules"), "*.query_key_value.* = 0 chunks 3\n");
        let chunked = chunked.unwrap();
        let found = contradictions(&family, &Matcher::new(&chunked), None, &qkv);
        assert_eq!(found.len(), 1);
        let plain = parse_file(Path::new("x.rules"), "*.query_key_value.* = 0\n").unwrap();
        assert!(contradictions(&family, &Matcher::new(&plain), None, &qkv).is_empty());
        assert_eq!(fused(&Fused::Chunks(vec![8, 4, 4])), Some(vec![2, 1, 1]));
        assert_eq!(fused(&Fused::Plain), None);
    }
}
