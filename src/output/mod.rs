//! Where the output goes. Each file is written under a temporary name in its target's folder
//! and renamed over the target only when complete, so that a failed or refused run leaves no
//! partial file and the existing targets untouched: [`OutputSet`] does this for several
//! files committed together, [`Output`] for the usual single file or standard output (`-o
//! -`), which is written directly: a pipe cannot take back what it was sent. [`kind`] is the
//! one way a run goes through them, whatever the kind of output (a file, a stream, a sharded
//! folder). [`grow`] is the other way to change a file: in place, past its end, for
//! `--append`. Everything here writes through the format stage's `Sink`.

mod file;
pub mod folders;
pub mod grow;
pub mod job;
pub mod kind;
pub mod progress;
pub mod recovery;
pub(crate) mod reorder;
mod set;
pub mod several;
pub mod shards;
mod temporary;
pub mod upload;

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

pub use file::{Output, written_directly};
pub use set::{Member, OutputSet};
pub use temporary::{handle_signals, on_signal};

use crate::error::{Error, Result};
use crate::format::Sink;

/// An unnamed temporary file to write intermediate data to (deleted when dropped, and by the
/// kernel should the process be killed: it has no name to leave behind).
pub struct Scratch {
    file: File,
}

impl Scratch {
    /// Creates it in the temporary folder (`TMPDIR`).
    pub fn new() -> Result<Scratch> {
        let file = tempfile::tempfile()
            .map_err(|e| Error::io("create a temporary file in", &std::env::temp_dir(), e))?;
        Ok(Scratch { file })
    }

    /// The file, with everything written so far.
    pub fn into_file(self) -> File {
        self.file
    }
}

impl Sink for Scratch {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.file.write_all(bytes)
    }

    fn copy_from(&mut self, file: &File, offset: u64, len: u64) -> io::Result<u64> {
        crate::sys::copy_in_kernel(file, offset, len, &self.file)
    }

    fn name(&self) -> &Path {
        Path::new("a temporary file")
    }
}
