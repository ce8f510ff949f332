//! The error type of a run, and the exit code each kind of error maps to.

use crate::location::Location;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// Exit statuses, one place for all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitCode {
    /// The join was written (or, with a dry run, would be).
    Success = 0,
    /// Reading an input or writing the output failed.
    Failure = 1,
    /// Bad usage, or inputs that break the join rules.
    Usage = 2,
}

/// Everything that can end a run early.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file-system call failed; says what was being done and to which path.
    #[error("cannot {action} {path}: {source}", path = crate::messages::path(.path))]
    Io {
        /// What tjoin was doing, e.g. "open input 2".
        action: String,
        /// The file it was doing it to.
        path: PathBuf,
        /// What the operating system said.
        source: io::Error,
    },
    /// A file-system call on an input failed.
    #[error("cannot {action} {input}: {source}")]
    InputIo {
        /// What tjoin was doing, e.g. "open".
        action: &'static str,
        /// Which input.
        input: InputRef,
        /// What the operating system said.
        source: io::Error,
    },
    /// An input file is damaged or is not the format its name says.
    #[error(
        "{input} is not a valid {format} file: {reason}\nhint: write it again (it may be cut \
         short or damaged), or, if it is another format under this name, name that format \
         with --input-format",
        reason = crate::messages::quote(.reason)
    )]
    Malformed {
        /// Which input.
        input: InputRef,
        /// The format it was read as, e.g. ".npy".
        format: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A file is in the middle of an append, or was left by one that did not finish: a .npy
    /// file with bytes after the end of the data its header declares, an append's journal
    /// beside it, its lock held by another process. The hint says whether to wait for the
    /// append or to run `--recover`.
    #[error("{what}\nhint: {hint}")]
    Unfinished {
        /// What was found, naming the file.
        what: String,
        /// What to do about it.
        hint: String,
    },
    /// An input is well-formed but holds something tjoin cannot join.
    #[error("{input} cannot be joined: {reason}", reason = crate::messages::quote(.reason))]
    Unsupported {
        /// Which input.
        input: InputRef,
        /// Why not.
        reason: String,
    },
    /// The device of a backend (`--backend directml`) is unavailable or failed.
    #[error("{reason}\nhint: {hint}")]
    Device {
        /// What failed, naming the device.
        reason: String,
        /// The way around it.
        hint: String,
    },
    /// The inputs break one or more join rules; each refusal lists the offending inputs and
    /// a hint.
    #[error("{}", display_refusals(.0))]
    Refused(Vec<Refusal>),
    /// An input made of several files (a sharded checkpoint) whose files disagree: a damaged
    /// input, reported like refusals, each problem on a line.
    #[error("{}", display_refusals(.0))]
    Inconsistent(Vec<Refusal>),
}

impl Error {
    /// The exit status this error ends the process with.
    pub fn exit_code(&self) -> ExitCode {
        match self {
            Error::Io { .. }
            | Error::InputIo { .. }
            | Error::Malformed { .. }
            | Error::Unfinished { .. }
            | Error::Device { .. }
            | Error::Inconsistent(_) => ExitCode::Failure,
            Error::Unsupported { .. } | Error::Refused(_) => ExitCode::Usage,
        }
    }

    /// Whether this is a write to a pipe whose reader has gone (`tjoin ... -o - | head`):
    /// the end of the reader's interest, not a failure worth a message.
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, Error::Io { source, .. } if source.kind() == io::ErrorKind::BrokenPipe)
    }

    /// The refusal of one rule that involves no input in particular: what is wrong, and what
    /// to do instead.
    pub fn refused(headline: impl Into<String>, hint: impl Into<String>) -> Error {
        Error::Refused(vec![Refusal {
            headline: headline.into(),
            details: Vec::new(),
            hint: Some(hint.into()),
        }])
    }

    /// An I/O error with the action and the path it concerns.
    pub fn io(action: impl Into<String>, path: &Path, source: io::Error) -> Error {
        Error::Io {
            action: action.into(),
            path: path.to_path_buf(),
            source,
        }
    }
}

impl InputRef {
    /// An I/O error while doing `action` to this input.
    pub fn io_error(&self, action: &'static str, source: io::Error) -> Error {
        Error::InputIo {
            action,
            input: self.clone(),
            source,
        }
    }
}

/// Names one input the way every message does: `input 2 (b.npy)`, counting from 1, and
/// `input 2 (b.safetensors:embed.weight)` for one tensor of a file that holds several.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputRef {
    /// Position among the inputs, from 1; 0 for a `--like` reference.
    pub position: usize,
    /// Where it is, as the user wrote it (shared: an input's tensors and the files it is
    /// checked by name it with one copy).
    pub location: Location,
    /// The tensor's name inside the file, for files that hold several (a boxed `str`, a
    /// word shorter than a `String`: a join may name 100,000 tensors).
    pub tensor: Option<Box<str>>,
}

pub use crate::location::STDIN;

impl InputRef {
    /// Whether this input is standard input (`-`).
    pub fn is_stdin(&self) -> bool {
        self.location.is_stdin()
    }

    /// The path, and the tensor's name after a colon when there is one: `b.npy`,
    /// `b.safetensors:embed.weight`, exactly as they are (for JSON; a message quotes it with
    /// [`crate::messages::quote`]).
    pub fn label(&self) -> String {
        self.location.label(self.tensor.as_deref())
    }
}

impl fmt::Display for InputRef {
    /// The path and the tensor's name are quoted ([`crate::messages`]); the name comes from
    /// the file, so it is cut like any excerpt.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Position 0 is no input: it is a `--like` reference read as inputs are
        // (`src/plan/reference.rs`).
        if self.position == 0 {
            let path = &self.location;
            return match &self.tensor {
                Some(tensor) => {
                    let tensor = crate::messages::name(tensor);
                    write!(f, "the --like reference {path} (tensor {tensor})")
                }
                None => write!(f, "the --like reference {path}"),
            };
        }
        match &self.tensor {
            Some(tensor) => write!(
                f,
                "input {} ({}:{})",
                self.position,
                self.location,
                crate::messages::name(tensor)
            ),
            None => write!(f, "input {} ({})", self.position, self.location),
        }
    }
}

/// A broken join rule, as a person reads it: a headline, the inputs involved (one line each,
/// with carets under the offending sizes), and a hint at the fix when one exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The first line, after `error: `.
    pub headline: String,
    /// Lines shown indented below the headline.
    pub details: Vec<String>,
    /// What would work instead.
    pub hint: Option<String>,
}

impl fmt::Display for Refusal {
    /// The headline and each detail are one line, quoted ([`crate::messages::quote`]): a name
    /// from a file that holds a newline cannot start a line of its own (a `hint:` tjoin did
    /// not write). The hint may be several (`\nhint: ` between them), each line quoted.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use crate::messages::{lines, quote};
        f.write_str(&quote(&self.headline))?;
        for line in &self.details {
            write!(f, "\n  {}", quote(line))?;
        }
        if let Some(hint) = &self.hint {
            write!(f, "\nhint: {}", lines(hint))?;
        }
        Ok(())
    }
}

/// What every error message starts with.
pub const PREFIX: &str = "tjoin: error: ";

/// The most refusals an error shows: one odd shard of a model refuses each of its hundreds
/// of tensors, and the first few say what is wrong (`--dry-run=json` holds every one).
const REFUSALS_SHOWN: usize = 5;

/// Several refusals, each after its own `tjoin: error: ` but the first, which the caller
/// prefixes like any error; past [`REFUSALS_SHOWN`], a line counts the rest.
fn display_refusals(refusals: &[Refusal]) -> String {
    let mut texts: Vec<String> = refusals
        .iter()
        .take(REFUSALS_SHOWN)
        .map(Refusal::to_string)
        .collect();
    if refusals.len() > REFUSALS_SHOWN {
        texts.push(format!(
            "... and {} more refusals (--dry-run=json lists every one)",
            crate::outliers::thousands(refusals.len() - REFUSALS_SHOWN)
        ));
    }
    texts.join(&format!("\n{PREFIX}"))
}

/// The first `shown` of `lines`, then `... and N more` when there are more: a model's
/// thousands of names would bury a message.
pub fn capped(mut lines: Vec<String>, shown: usize) -> Vec<String> {
    if lines.len() > shown {
        let more = lines.len() - shown;
        lines.truncate(shown);
        lines.push(format!("... and {more} more"));
    }
    lines
}

/// The result type of a run.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The full text of an error as printed on stderr: `PREFIX` first, each line quoted
/// ([`crate::messages::lines`]), and, when `color` is on, the prefixes in bold red, the
/// carets in red and `hint:` in bold cyan.
pub fn render(error: &Error, color: bool) -> String {
    let text = crate::messages::lines(&format!("{PREFIX}{error}"));
    if !color {
        return text;
    }
    const RED: &str = "\x1b[1;31m";
    const CARET: &str = "\x1b[31m";
    const CYAN: &str = "\x1b[1;36m";
    const RESET: &str = "\x1b[0m";
    text.lines()
        .map(|line| {
            if let Some(rest) = line.strip_prefix(PREFIX) {
                format!("{RED}{}{RESET}{rest}", PREFIX.trim_end()).replacen(
                    RESET,
                    &format!("{RESET} "),
                    1,
                )
            } else if let Some(rest) = line.strip_prefix("hint:") {
                format!("{CYAN}hint:{RESET}{rest}")
            } else if line.trim_start().starts_with('^') {
                format!("{CARET}{line}{RESET}")
            } else {
                line.to_string()
            }
        })
        .collect::<Vec<String>>()
        .join("\n")
}

impl Error {
    /// The error as one refusal: its message the headline, its own hint (after the message)
    /// the refusal's hint.
    pub fn as_refusal(&self) -> Refusal {
        let text = self.to_string();
        let (headline, hint) = match text.split_once("\nhint: ") {
            Some((headline, hint)) => (headline.to_string(), Some(hint.to_string())),
            None => (text, None),
        };
        Refusal {
            headline,
            details: Vec::new(),
            hint,
        }
    }
}

/// An error as one JSON object, for `--dry-run=json`: scripts that asked for the plan as JSON
/// get the refusal in the same form. `exit_code` is the process's; each refusal has its
/// headline, the lines about the inputs (`details`) and the hint, when there is one.
pub fn to_json(error: &Error) -> serde_json::Value {
    let refusals: Vec<Refusal> = match error {
        Error::Refused(refusals) | Error::Inconsistent(refusals) => refusals.clone(),
        other => vec![other.as_refusal()],
    };
    let refusals: Vec<serde_json::Value> = refusals
        .iter()
        .map(|r| {
            serde_json::json!({
                "headline": r.headline,
                "details": r.details,
                "hint": r.hint,
            })
        })
        .collect();
    serde_json::json!({
        "error": {
            "exit_code": error.exit_code() as u8,
            "refusals": refusals,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::{EXCERPT_CHARS, excerpt};

    #[test]
    fn a_damaged_file_is_named_with_its_position_and_a_hint() {
        let error = Error::Malformed {
            input: InputRef {
                position: 3,
                location: Path::new("c.npy").into(),
                tensor: None,
            },
            format: ".npy",
            reason: "the file is truncated".to_string(),
        };
        let text = render(&error, false);
        let (first, hint) = text.split_once('\n').unwrap();
        assert_eq!(
            first,
            "tjoin: error: input 3 (c.npy) is not a valid .npy file: the file is truncated"
        );
        assert!(hint.starts_with("hint: write it again"), "{hint}");
        assert!(hint.contains("--input-format"), "{hint}");
    }

    #[test]
    fn excerpts_are_cut_to_a_hundred_characters() {
        assert_eq!(excerpt("short"), "short");
        let long = "é".repeat(1000);
        let cut = excerpt(&long);
        assert!(cut.starts_with(&"é".repeat(EXCERPT_CHARS)), "{cut}");
        assert!(cut.ends_with("... (1800 more bytes)"), "{cut}");
        let name = InputRef {
            position: 1,
            location: Path::new("a.safetensors").into(),
            tensor: Some("x".repeat(1 << 20).into()),
        };
        assert!(name.to_string().len() < 200, "{name}");
    }

    #[test]
    fn color_marks_prefixes_carets_and_hints_only() {
        let error = Error::Refused(vec![Refusal {
            headline: "cannot join".to_string(),
            details: vec!["a.npy [1, 2]".to_string(), "       ^ 2 != 3".to_string()],
            hint: Some("try axis 1".to_string()),
        }]);
        let plain = render(&error, false);
        assert_eq!(
            plain,
            "tjoin: error: cannot join\n  a.npy [1, 2]\n         ^ 2 != 3\nhint: try axis 1"
        );
        let colored = render(&error, true);
        assert!(colored.starts_with("\x1b[1;31mtjoin: error:\x1b[0m cannot join"));
        assert!(colored.contains("\x1b[31m         ^ 2 != 3\x1b[0m"));
        assert!(colored.ends_with("\x1b[1;36mhint:\x1b[0m try axis 1"));
    }
}
