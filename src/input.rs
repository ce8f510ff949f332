//! Opening the inputs: each file, the tensors its header declares, and the identity that is
//! checked again before the output is committed.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use crate::error::{Error, InputRef, Refusal, Result};
use crate::format::{Format, TensorInfo};

/// One input file as given on the command line, and the tensors it holds.
pub struct Input {
    /// How messages name it.
    pub name: InputRef,
    /// The tensors it holds, in the order the file lists them (only the one named after a
    /// colon, `FILE:NAME`, when one is).
    pub tensors: Vec<Tensor>,
    /// The file's format.
    pub format: Format,
    /// The tensor named after a colon on the command line, if one was.
    pub selected: Option<String>,
    /// safetensors' `__metadata__`, in the file's order.
    pub metadata: Option<Vec<(String, String)>>,
    /// The file itself, kept open until the output is committed.
    file: Arc<File>,
    /// Length and modification time when opened, to notice a change underneath.
    stamp: Stamp,
}

/// One tensor: what its header declares and the file its bytes are in.
pub struct Tensor {
    /// How messages name it (with the tensor's name for files that hold several).
    pub name: InputRef,
    /// What the header declares; `data_offset` counts from the start of `file`.
    pub info: TensorInfo,
    /// The file holding the data: the input itself, or a temporary copy of data that could
    /// not be mapped where it lies (compressed, or read from a pipe).
    pub file: Arc<File>,
}

type Stamp = (u64, Option<SystemTime>);

impl Input {
    /// Opens the input at `position` (from 1) and reads its header(s). `FILE:NAME` (when no
    /// file has the whole name) names one tensor of a file that holds several.
    pub fn open(position: usize, path: &Path) -> Result<Input> {
        let (path, selected) = split_selection(path);
        let name = InputRef {
            position,
            path: path.clone(),
            tensor: None,
        };
        // Checked before opening: opening a FIFO would block until someone writes to it.
        let kind = std::fs::metadata(&path).map_err(|e| name.io_error("open", e))?;
        if !kind.is_file() {
            let why = if kind.is_dir() {
                "it is a directory"
            } else {
                "it is not a regular file (tjoin maps its inputs into memory; save the data to \
                 a file first)"
            };
            return Err(name.io_error("open", std::io::Error::other(why)));
        }
        let file = Arc::new(File::open(&path).map_err(|e| name.io_error("open", e))?);
        let stamp = stamp(&file).map_err(|e| name.io_error("open", e))?;
        let format = Format::of_input(&path, &file);
        if selected.is_some() && !format.is_container() {
            return Err(Error::Refused(vec![Refusal {
                headline: format!(
                    "{name} is a .npy file, which holds one unnamed tensor: it has no tensor {}",
                    selected.as_deref().unwrap_or_default()
                ),
                details: Vec::new(),
                hint: Some(format!("name the file alone: {}", path.display())),
            }]));
        }
        let contents = format.read(&file, stamp.0, &name, selected.as_deref())?;
        let tensors = contents
            .tensors
            .into_iter()
            .map(|found| Tensor {
                name: InputRef {
                    tensor: found.name,
                    ..name.clone()
                },
                info: found.info,
                file: found.file.unwrap_or_else(|| Arc::clone(&file)),
            })
            .collect();
        Ok(Input {
            name,
            tensors,
            format,
            selected,
            metadata: contents.metadata,
            file,
            stamp,
        })
    }

    /// Fails if the file's length or modification time changed since it was opened: the
    /// bytes read may then be a mixture of two versions of it.
    pub fn check_unchanged(&self) -> Result<()> {
        let now = stamp(&self.file).map_err(|e| self.name.io_error("re-check", e))?;
        if now == self.stamp {
            return Ok(());
        }
        let why = "it changed while tjoin was reading it; no output was written, run again \
                   once nothing else writes to it";
        Err(self.name.io_error("read", std::io::Error::other(why)))
    }
}

fn stamp(file: &File) -> std::io::Result<Stamp> {
    let metadata = file.metadata()?;
    Ok((metadata.len(), metadata.modified().ok()))
}

/// Splits `FILE:NAME` into the file and the tensor's name, unless a file has the whole name.
/// The name follows the first colon after which the part before names an existing file, so
/// tensor names may hold colons too.
fn split_selection(path: &Path) -> (PathBuf, Option<String>) {
    let whole = || (path.to_path_buf(), None);
    let Some(text) = path.to_str() else {
        return whole();
    };
    if path.exists() {
        return whole();
    }
    for (at, _) in text.match_indices(':') {
        let file = Path::new(&text[..at]);
        if at > 0 && file.is_file() {
            return (file.to_path_buf(), Some(text[at + 1..].to_string()));
        }
    }
    whole()
}

/// The refusal of `FILE:NAME` when the file has no tensor `wanted`: the names it has, the
/// closest (by edit distance) first.
pub fn no_such_tensor(input: &InputRef, wanted: &str, names: &[String]) -> Error {
    let mut ranked: Vec<&String> = names.iter().collect();
    ranked.sort_by_key(|name| (strsim::levenshtein(wanted, name), name.as_str()));
    const SHOWN: usize = 10;
    let mut details: Vec<String> = ranked.iter().take(SHOWN).map(|n| n.to_string()).collect();
    if ranked.len() > SHOWN {
        details.push(format!("... and {} more", ranked.len() - SHOWN));
    }
    let hint = match ranked.first() {
        Some(best) => format!("did you mean {}:{best}?", input.path.display()),
        None => "the file holds no tensor at all".to_string(),
    };
    Error::Refused(vec![Refusal {
        headline: format!(
            "input {} ({}) has no tensor named `{wanted}`; it has {} tensor{}, closest first:",
            input.position,
            input.path.display(),
            names.len(),
            if names.len() == 1 { "" } else { "s" }
        ),
        details,
        hint: Some(hint),
    }])
}
