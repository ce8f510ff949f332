//! Opening the inputs: each file, its header, and the identity that is checked again before
//! the output is committed.

use std::fs::File;
use std::path::Path;
use std::time::SystemTime;

use crate::error::{Error, InputRef, Result};
use crate::format::{self, TensorInfo};

/// One opened input: its name, what its header declares, and the open file.
pub struct Input {
    /// How messages name it.
    pub name: InputRef,
    /// What its header declares.
    pub info: TensorInfo,
    /// The open file, kept open until the join is written.
    pub file: File,
    /// Length and modification time when opened, to notice a change underneath.
    stamp: (u64, Option<SystemTime>),
}

impl Input {
    /// Opens the input at `position` (from 1) and reads its header.
    pub fn open(position: usize, path: &Path) -> Result<Input> {
        let name = InputRef {
            position,
            path: path.to_path_buf(),
        };
        // Checked before opening: opening a FIFO would block until someone writes to it.
        let kind = std::fs::metadata(path).map_err(|e| name.io_error("open", e))?;
        if !kind.is_file() {
            let reason = if kind.is_dir() {
                "it is a directory".to_string()
            } else {
                "it is not a regular file (tjoin maps its inputs into memory; save the data \
                 to a file first)"
                    .to_string()
            };
            return Err(Error::Malformed {
                input: name,
                format: ".npy",
                reason,
            });
        }
        let file = File::open(path).map_err(|e| name.io_error("open", e))?;
        let stamp = stamp(&file).map_err(|e| name.io_error("open", e))?;
        let info = format::npy::read_header(&file, stamp.0, &name)?;
        Ok(Input {
            name,
            info,
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
        Err(Error::Malformed {
            input: self.name.clone(),
            format: ".npy",
            reason: "it changed while tjoin was reading it; no output was written, run again \
                     once nothing else writes to it"
                .to_string(),
        })
    }
}

fn stamp(file: &File) -> std::io::Result<(u64, Option<SystemTime>)> {
    let metadata = file.metadata()?;
    Ok((metadata.len(), metadata.modified().ok()))
}
