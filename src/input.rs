//! Opening the inputs: each file, the tensors its header declares, and the identity that is
//! checked again before the output is committed.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use crate::error::{InputRef, Result};
use crate::format::{Format, TensorInfo};

/// One input file as given on the command line, and the tensors it holds.
pub struct Input {
    /// How messages name it.
    pub name: InputRef,
    /// The tensors it holds, in the order the file lists them.
    pub tensors: Vec<Tensor>,
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
    /// Opens the input at `position` (from 1) and reads its header(s).
    pub fn open(position: usize, path: &Path) -> Result<Input> {
        let name = InputRef {
            position,
            path: path.to_path_buf(),
            tensor: None,
        };
        // Checked before opening: opening a FIFO would block until someone writes to it.
        let kind = std::fs::metadata(path).map_err(|e| name.io_error("open", e))?;
        if !kind.is_file() {
            let why = if kind.is_dir() {
                "it is a directory"
            } else {
                "it is not a regular file (tjoin maps its inputs into memory; save the data to \
                 a file first)"
            };
            return Err(name.io_error("open", std::io::Error::other(why)));
        }
        let file = Arc::new(File::open(path).map_err(|e| name.io_error("open", e))?);
        let stamp = stamp(&file).map_err(|e| name.io_error("open", e))?;
        let format = Format::of_input(path);
        let infos = format.read(&file, stamp.0, &name)?;
        let tensors = infos
            .into_iter()
            .map(|(tensor, info)| Tensor {
                name: InputRef {
                    tensor,
                    ..name.clone()
                },
                info,
                file: Arc::clone(&file),
            })
            .collect();
        Ok(Input {
            name,
            tensors,
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
