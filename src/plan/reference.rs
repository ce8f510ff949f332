//! `--like REF`: the check that the job's output tensors have the shapes the reference
//! headers give them (the header of the model the shards were split from, or of one with
//! another tensor-parallel degree). The input stage reads the references
//! (`src/input/reference.rs`), once, for the config stage; planning reads no file.
//! A refusal names the tensor, the rule that set its axis, and the axis or `--keep` that
//! gives the reference's shape.

use std::collections::HashMap;

use crate::error::{Error, Refusal, Result, capped};
use crate::input::reference::Reference;
use crate::messages::shape_text;
use crate::plan::rules::{self, Origin, Rule, shell_quote};

/// What would give a tensor the reference's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fix {
    /// Joining along this axis.
    Axis(usize),
    /// Keeping one copy.
    Keep,
}

/// How many items a refusal lists before "... and N more".
const SHOWN: usize = 10;

impl Reference {
    /// Each tensor's shape, by name.
    pub fn shapes(&self) -> HashMap<&str, &[u64]> {
        self.tensors
            .iter()
            .map(|(name, shape, _)| (name.as_str(), shape.as_slice()))
            .collect()
    }

    /// Refuses every output tensor of `job` whose shape differs from the reference's, or that
    /// the reference lacks, and (when the job has several tensors) every reference tensor the
    /// output lacks. `rules` are the rules the job was built by.
    pub fn check(&self, job: &[Checked], rules: &[Rule]) -> Result<()> {
        let shapes: HashMap<&str, (&[u64], usize)> = self
            .tensors
            .iter()
            .map(|(name, shape, from)| (name.as_str(), (shape.as_slice(), *from)))
            .collect();
        // All references together, as the headlines name them; each tensor's own, in its line.
        let name = match self.paths.as_slice() {
            [one] => crate::messages::path(one),
            _ => "the --like references".to_string(),
        };
        let mut refusals = Vec::new();
        let mut wrong = Vec::new();
        let mut fixes: Vec<(Fix, &str)> = Vec::new();
        // The flags that decided tensors an --axis-for would fix: a new --axis-for would not
        // act while they are on the line (see `fix_hint`).
        let mut overriding: Vec<String> = Vec::new();
        let mut absent = Vec::new();
        for tensor in job {
            let Some(&(want, from)) = shapes.get(tensor.name) else {
                absent.push(tensor.name.to_string());
                continue;
            };
            if tensor.shape == want {
                continue;
            }
            let how = match (tensor.kept, tensor.rule) {
                (true, Some(at)) => format!("kept by {}", rules[at]),
                (false, Some(at)) => {
                    format!("joined along axis {} by {}", tensor.axis, rules[at])
                }
                (_, None) => format!("joined along axis {}", tensor.axis),
            };
            let fix = fix_for(tensor, want);
            let gives = match fix {
                Some(Fix::Axis(axis)) => format!("axis {axis} gives it"),
                Some(Fix::Keep) => "keeping one copy gives it".to_string(),
                None => "no axis gives it".to_string(),
            };
            wrong.push(format!(
                "{}  {} ({how}); {} has {}: {gives}",
                tensor.name,
                shape_text(tensor.shape),
                crate::messages::path(&self.paths[from]),
                shape_text(want)
            ));
            if let Some(fix) = fix {
                fixes.push((fix, tensor.name));
                if let (Fix::Axis(_), Some(at)) = (fix, tensor.rule)
                    && matches!(rules[at].origin, Origin::KeepFlag | Origin::AxisForFlag)
                {
                    let flag = rules[at].to_string();
                    if !overriding.contains(&flag) {
                        overriding.push(flag);
                    }
                }
            }
        }
        if !wrong.is_empty() {
            let names: Vec<&str> = job.iter().map(|t| t.name).collect();
            refusals.push(Refusal {
                headline: format!(
                    "{} output tensor{} would not have the shape {name} {} {}",
                    wrong.len(),
                    if wrong.len() == 1 { "" } else { "s" },
                    if self.paths.len() == 1 {
                        "gives"
                    } else {
                        "give"
                    },
                    if wrong.len() == 1 { "it" } else { "them" }
                ),
                details: capped(wrong, SHOWN),
                hint: Some(fix_hint(&fixes, &names, &overriding)),
            });
        }
        if !absent.is_empty() {
            refusals.push(self.absent_refusal(&name, absent));
        }
        if job.len() > 1
            && let Some(refusal) = self.lacking_refusal(&name, job)
        {
            refusals.push(refusal);
        }
        if refusals.is_empty() {
            Ok(())
        } else {
            Err(Error::Refused(refusals))
        }
    }

    /// The refusal of output tensors the reference has none of the name of (`absent`):
    /// `name` names the references.
    fn absent_refusal(&self, name: &str, absent: Vec<String>) -> Refusal {
        Refusal {
            headline: format!(
                "{name} {} no tensor of the name of {} output tensor{}, so {} shape \
                 cannot be checked",
                if self.paths.len() == 1 { "has" } else { "have" },
                absent.len(),
                if absent.len() == 1 { "" } else { "s" },
                if absent.len() == 1 { "its" } else { "their" }
            ),
            details: capped(absent, SHOWN),
            hint: Some(format!(
                "name with --like the model these inputs were split from; {name} {} {}",
                if self.paths.len() == 1 {
                    "holds"
                } else {
                    "hold"
                },
                self.tensors.len()
            )),
        }
    }

    /// The refusal of the reference's tensors that the output of `job` would lack, when it
    /// lacks any: `name` names the references.
    fn lacking_refusal(&self, name: &str, job: &[Checked]) -> Option<Refusal> {
        let output: std::collections::HashSet<&str> = job.iter().map(|t| t.name).collect();
        let lacking: Vec<String> = self
            .tensors
            .iter()
            .map(|(name, _, _)| name)
            .filter(|name| !output.contains(name.as_str()))
            .cloned()
            .collect();
        if lacking.is_empty() {
            return None;
        }
        Some(Refusal {
            headline: format!(
                "the output would lack {} tensor{} {name} {}",
                lacking.len(),
                if lacking.len() == 1 { "" } else { "s" },
                if self.paths.len() == 1 {
                    "holds"
                } else {
                    "hold"
                }
            ),
            details: capped(lacking, SHOWN),
            hint: Some(
                "join every shard of the model, or name with --like the header of \
                     the part these shards hold"
                    .to_string(),
            ),
        })
    }
}

/// What `Reference::check` reads of one output tensor of a job: built by the job
/// (`TensorJob::checked`), so that the reference knows nothing of how jobs are made.
#[derive(Debug, Clone)]
pub struct Checked<'a> {
    /// The output tensor's name.
    pub name: &'a str,
    /// The output tensor's shape.
    pub shape: &'a [u64],
    /// The axis it is joined along.
    pub axis: usize,
    /// Copied from the first input by `--keep` rather than joined.
    pub kept: bool,
    /// The position in the rules of the rule that decided it; `None` when none did.
    pub rule: Option<usize>,
    /// What each input gives of it: its shape, or its range's shape in a chunked join; a kept
    /// tensor's first input's shape once per input.
    pub inputs: Vec<Vec<u64>>,
}

/// The axis along which joining the tensor's inputs gives `want`, or keeping one copy when
/// every input already has it.
fn fix_for(tensor: &Checked, want: &[u64]) -> Option<Fix> {
    let shapes = &tensor.inputs;
    if shapes.iter().all(|shape| shape.as_slice() == want) {
        return Some(Fix::Keep);
    }
    (0..want.len())
        .find(|&axis| {
            let sum: u64 = shapes
                .iter()
                .map(|s| s.get(axis).copied().unwrap_or(0))
                .sum();
            sum == want[axis]
                && shapes.iter().all(|s| {
                    s.len() == want.len() && (0..want.len()).all(|d| d == axis || s[d] == want[d])
                })
        })
        .map(Fix::Axis)
}

/// The flags that fix the tensors, grouped by pattern. `overriding` are the flags given that
/// decided tensors an `--axis-for` fixes: the `--keep` flags decide before every `--axis-for`,
/// and an earlier `--axis-for` before a later one, so the hint says to drop them first rather
/// than suggest a flag that would not act.
fn fix_hint(fixes: &[(Fix, &str)], names: &[&str], overriding: &[String]) -> String {
    let mut kinds: Vec<Fix> = Vec::new();
    for (fix, _) in fixes {
        if !kinds.contains(fix) {
            kinds.push(*fix);
        }
    }
    let mut flags = Vec::new();
    for kind in kinds {
        let targets: Vec<&str> = fixes
            .iter()
            .filter(|(fix, _)| *fix == kind)
            .map(|&(_, name)| name)
            .collect();
        for (glob, _) in rules::suggest_globs(&targets, names) {
            flags.push(match kind {
                Fix::Axis(axis) => format!("--axis-for {}", shell_quote(&format!("{glob}={axis}"))),
                Fix::Keep => format!("--keep {}", shell_quote(&glob)),
            });
        }
    }
    if flags.is_empty() {
        return "check that the inputs are the shards of the model --like names".to_string();
    }
    let add = capped(flags, SHOWN).join(" ");
    if overriding.is_empty() {
        return format!("add {add} (or correct the rule that decided them)");
    }
    format!(
        "--keep flags decide before --axis-for flags, and earlier flags before later ones: \
         drop {}, then add {add}",
        capped(overriding.to_vec(), SHOWN).join(" ")
    )
}
