//! `--exclude GLOB` and `--only GLOB`: which tensors of the multi-tensor inputs take part,
//! decided once the inputs are open and before any check, so that the checks and the plan see
//! only the tensors the output is to hold (`tjoin step-1000/ --exclude 'optimizer.*'`: a
//! torchtitan checkpoint's model, its keys at the top level beside the optimizer's).
//!
//! A tensor takes part when it matches no `--exclude` and, if any `--only` is given, at least
//! one `--only`. A filter that removes nothing is refused, as a rule that matches no tensor is:
//! a misspelt glob would otherwise leave in what the user meant to take out. What each removed
//! goes to `--dry-run`.

use std::collections::HashSet;
use std::fmt;

use crate::error::{Error, Refusal, Result, capped};
use crate::input::Input;
use crate::messages::excerpt;
use crate::plan::globs::glob_match;

/// Which way a filter decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterKind {
    /// `--exclude`: tensors that match are left out.
    Exclude,
    /// `--only`: tensors that match no `--only` are left out.
    Only,
}

/// One `--exclude` or `--only` flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    /// Which flag.
    pub kind: FilterKind,
    /// Its glob: `*` any text (dots included), `?` one character.
    pub glob: String,
}

impl fmt::Display for Filter {
    /// As written: `--exclude 'optimizer.*'`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let flag = match self.kind {
            FilterKind::Exclude => "--exclude",
            FilterKind::Only => "--only",
        };
        write!(f, "{flag} '{}'", excerpt(&self.glob))
    }
}

/// What a filter removed, for `--dry-run`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removed {
    /// The filter as written (the `--only` flags together: they decide together).
    pub filter: String,
    /// The names of the tensors it removed, in the inputs' order.
    pub names: Vec<String>,
}

/// Whether `input` is one the filters choose among: a file of named tensors, not narrowed to
/// one by `FILE:NAME`.
fn filtered(input: &Input) -> bool {
    input.format.is_container()
        && input.selected().is_none()
        && input.tensors.iter().all(|t| t.name.tensor.is_some())
}

/// Applies `filters` to the multi-tensor inputs; what each removed. Refuses a filter that
/// removes nothing, filters where no input holds named tensors, and filters that leave an
/// input no tensor.
pub fn apply(inputs: &mut [Input], filters: &[Filter]) -> Result<Vec<Removed>> {
    if filters.is_empty() {
        return Ok(Vec::new());
    }
    if !inputs.iter().any(filtered) {
        return Err(Error::refused(
            format!(
                "{} choose{} among the tensors of files that hold several, and no input is \
                 one",
                filters
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                if filters.len() == 1 { "s" } else { "" }
            ),
            "drop the filter; a file of several tensors named with FILE:NAME is one tensor",
        ));
    }
    let mut seen = HashSet::new();
    let names: Vec<&str> = inputs
        .iter()
        .filter(|i| filtered(i))
        .flat_map(|i| i.tensors.iter())
        .filter_map(|t| t.name.tensor.as_deref())
        .filter(|name| seen.insert(*name))
        .collect();
    let (removed, refusals) = decide(filters, &names);
    let mut refusals = refusals;
    let keep = |name: &str| takes_part(filters, name);
    for input in inputs.iter().filter(|i| filtered(i)) {
        let kept = input
            .tensors
            .iter()
            .filter(|t| keep(tensor_name(t)))
            .count();
        if kept == 0 {
            refusals.push(Refusal {
                headline: format!("the filters leave {} no tensor", input.name),
                details: Vec::new(),
                hint: Some("change --exclude or --only so that some tensor is kept".to_string()),
            });
        }
    }
    if !refusals.is_empty() {
        return Err(Error::Refused(refusals));
    }
    for input in inputs.iter_mut().filter(|i| filtered(i)) {
        input.retain_tensors(|t| keep(tensor_name(t)));
    }
    Ok(removed)
}

fn tensor_name(tensor: &crate::input::Tensor) -> &str {
    tensor.name.tensor.as_deref().unwrap_or_default()
}

/// Whether the tensor `name` takes part under `filters`.
fn takes_part(filters: &[Filter], name: &str) -> bool {
    let matches = |kind| {
        filters
            .iter()
            .filter(move |f| f.kind == kind)
            .map(|f| glob_match(&f.glob, name))
    };
    let only_given = filters.iter().any(|f| f.kind == FilterKind::Only);
    !matches(FilterKind::Exclude).any(|m| m)
        && (!only_given || matches(FilterKind::Only).any(|m| m))
}

/// What each filter removes from `names`, and the refusals of those that match no tensor or
/// remove nothing.
fn decide(filters: &[Filter], names: &[&str]) -> (Vec<Removed>, Vec<Refusal>) {
    let mut removed = Vec::new();
    let mut refusals = Vec::new();
    let unmatched = |filter: &Filter| Refusal {
        headline: format!("{filter} matches no tensor of the inputs, so it removes nothing"),
        details: vec![format!(
            "the inputs hold {} tensor{}: {}",
            names.len(),
            if names.len() == 1 { "" } else { "s" },
            capped(
                names.iter().map(|n| format!("`{}`", excerpt(n))).collect(),
                5
            )
            .join(", ")
        )],
        hint: Some(
            "correct the glob (`*` matches any text, dots included; `?` one character), or \
             drop the flag"
                .to_string(),
        ),
    };
    for filter in filters {
        let matching: Vec<String> = names
            .iter()
            .filter(|n| glob_match(&filter.glob, n))
            .map(|n| n.to_string())
            .collect();
        if matching.is_empty() {
            refusals.push(unmatched(filter));
        } else if filter.kind == FilterKind::Exclude {
            removed.push(Removed {
                filter: filter.to_string(),
                names: matching,
            });
        }
    }
    let only: Vec<&Filter> = filters
        .iter()
        .filter(|f| f.kind == FilterKind::Only)
        .collect();
    if !only.is_empty() {
        let left: Vec<String> = names
            .iter()
            .filter(|n| !only.iter().any(|f| glob_match(&f.glob, n)))
            .map(|n| n.to_string())
            .collect();
        let written = only
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" ");
        if left.is_empty()
            && only
                .iter()
                .all(|f| names.iter().any(|n| glob_match(&f.glob, n)))
        {
            refusals.push(Refusal {
                headline: format!(
                    "{written} match{} every tensor of the inputs, so {} nothing",
                    if only.len() == 1 { "es" } else { "" },
                    if only.len() == 1 {
                        "it removes"
                    } else {
                        "they remove"
                    }
                ),
                details: Vec::new(),
                hint: Some("narrow the glob, or drop the flag".to_string()),
            });
        } else if !left.is_empty() {
            removed.push(Removed {
                filter: written,
                names: left,
            });
        }
    }
    (removed, refusals)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(kind: FilterKind, glob: &str) -> Filter {
        Filter {
            kind,
            glob: glob.to_string(),
        }
    }

    #[test]
    fn excludes_and_onlys_decide_together_and_say_what_each_removed() {
        let names = [
            "w",
            "optimizer.state.w.step",
            "optimizer.state.w.exp_avg",
            "norm",
        ];
        let filters = [
            filter(FilterKind::Exclude, "optimizer.*"),
            filter(FilterKind::Only, "optimizer.*"),
            filter(FilterKind::Only, "w"),
        ];
        assert!(takes_part(&filters, "w"));
        assert!(!takes_part(&filters, "norm"));
        assert!(!takes_part(&filters, "optimizer.state.w.step"));
        let (removed, refusals) = decide(&filters, &names);
        assert!(refusals.is_empty());
        assert_eq!(removed[0].filter, "--exclude 'optimizer.*'");
        assert_eq!(removed[0].names.len(), 2);
        assert_eq!(removed[1].filter, "--only 'optimizer.*' --only 'w'");
        assert_eq!(removed[1].names, ["norm"]);
    }

    #[test]
    fn a_filter_that_removes_nothing_is_refused() {
        let names = ["w", "norm"];
        let (_, refusals) = decide(&[filter(FilterKind::Exclude, "optim.*")], &names);
        assert!(refusals[0].headline.contains("matches no tensor"));
        let (_, refusals) = decide(&[filter(FilterKind::Only, "*")], &names);
        assert!(refusals[0].headline.contains("every tensor"));
    }
}
