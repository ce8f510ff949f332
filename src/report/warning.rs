//! The warnings a run gives: typed, and printed through one place ([`Warnings::push`], which
//! writes each on standard error with `crate::messages::warn` as it arises, unless `--quiet`
//! asked for none) and kept for the plan report.

use std::fmt;
use std::path::PathBuf;

use crate::input::sharded::ShardSet;

/// Something worth a person's attention that does not stop the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Warning {
    /// A sharded input's index says a `metadata.total_size` its tensors do not hold; tjoin
    /// goes by the tensors.
    TotalSize {
        /// The index file.
        index: PathBuf,
        /// What its `total_size` says.
        said: u64,
        /// What its tensors hold.
        tensors: u64,
    },
    /// A tensor rule that matched no tensor, as `plan::rules` describes it (rule and where
    /// it was written).
    UnmatchedRule(String),
    /// What the inputs' readers left out of the output (values that are not tensors, an
    /// optimizer's state beside a model), by input: one line in every run.
    LeftOut(Vec<(String, Vec<String>)>),
    /// A single-file checkpoint in a sharded output's folder, which libraries that look for
    /// it before the index would load instead of the new set.
    Shadowing {
        /// The single file.
        file: PathBuf,
    },
    /// What an input's reader says every run must tell (a DeepSpeed stage-1 checkpoint's
    /// frozen parameters, taken from where its converter does not take them).
    Input(String),
    /// A GGUF split into more files than llama.cpp, which keeps every file of a set open,
    /// loads under the usual limit of open files.
    ManyGgufFiles {
        /// The files of the set.
        count: u64,
    },
}

impl Warning {
    /// The warning that says what `inputs`' readers left out, if they left out anything.
    pub fn left_out<'a>(inputs: impl Iterator<Item = (String, &'a [String])>) -> Option<Warning> {
        let left: Vec<(String, Vec<String>)> = inputs
            .filter(|(_, what)| !what.is_empty())
            .map(|(input, what)| (input, what.to_vec()))
            .collect();
        (!left.is_empty()).then_some(Warning::LeftOut(left))
    }

    /// The warning to give when `set`'s index says a `total_size` its tensors do not hold.
    pub fn total_size(set: &ShardSet) -> Option<Warning> {
        let said = set.total_size?;
        (said != set.tensor_bytes).then(|| Warning::TotalSize {
            index: set.index.clone(),
            said,
            tensors: set.tensor_bytes,
        })
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::TotalSize {
                index,
                said,
                tensors,
            } => write!(
                f,
                "{}: its metadata.total_size says {said} bytes, but the tensors it maps hold \
                 {tensors}; tjoin goes by the tensors (some writers count total_size \
                 differently)",
                crate::messages::path(index)
            ),
            Warning::UnmatchedRule(described) | Warning::Input(described) => f.write_str(described),
            Warning::LeftOut(inputs) => {
                const SHOWN: usize = 3;
                f.write_str("left out of the output: ")?;
                for (at, (input, what)) in inputs.iter().take(SHOWN).enumerate() {
                    let sep = if at == 0 { "" } else { "; " };
                    write!(f, "{sep}{input}: {}", what.join(", "))?;
                }
                if inputs.len() > SHOWN {
                    write!(f, "; and from {} more inputs", inputs.len() - SHOWN)?;
                }
                f.write_str(" (--dry-run names each)")
            }
            Warning::Shadowing { file } => write!(
                f,
                "{} stays in the folder (it is not a file of the previous index); libraries \
                 that look for it before the index would load it instead of the new set",
                crate::messages::path(file)
            ),
            Warning::ManyGgufFiles { count } => write!(
                f,
                "the set has {count} files; llama.cpp opens every file of a set at once, and                  past the usual limit of 1024 open files (ulimit -n) it cannot load them: raise                  --max-tensors or --max-shard-size"
            ),
        }
    }
}

/// The warnings of one run: each printed as it arises, so that it comes before any refusal
/// that follows, and kept.
#[derive(Debug, Default)]
pub struct Warnings {
    quiet: bool,
    given: Vec<Warning>,
}

impl Warnings {
    /// Warnings printed unless `quiet`.
    pub fn new(quiet: bool) -> Warnings {
        Warnings {
            quiet,
            given: Vec::new(),
        }
    }

    /// Prints `warning` on standard error (unless quiet) and keeps it.
    pub fn push(&mut self, warning: Warning) {
        if !self.quiet {
            crate::messages::warn(&warning);
        }
        self.given.push(warning);
    }

    /// The warnings given, in order.
    pub fn into_vec(self) -> Vec<Warning> {
        self.given
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_are_kept_in_order_quiet_or_not() {
        let mut warnings = Warnings::new(true);
        warnings.push(Warning::UnmatchedRule(
            "--keep 'x' matched no tensor".to_string(),
        ));
        warnings.push(Warning::Shadowing {
            file: PathBuf::from("out/model.safetensors"),
        });
        let given = warnings.into_vec();
        assert_eq!(given.len(), 2);
        assert!(
            given[1]
                .to_string()
                .starts_with("out/model.safetensors stays in the folder")
        );
    }

    #[test]
    fn only_a_total_size_that_differs_is_a_warning() {
        let mut set = ShardSet {
            index: PathBuf::from("m/model.safetensors.index.json"),
            name: Default::default(),
            files: Vec::new(),
            total_size: Some(10),
            tensor_bytes: 10,
        };
        assert_eq!(Warning::total_size(&set), None);
        set.total_size = None;
        assert_eq!(Warning::total_size(&set), None);
        set.total_size = Some(12);
        let warning = Warning::total_size(&set).expect("a warning");
        assert_eq!(
            warning.to_string(),
            "m/model.safetensors.index.json: its metadata.total_size says 12 bytes, but the \
             tensors it maps hold 10; tjoin goes by the tensors (some writers count total_size \
             differently)"
        );
    }
}
