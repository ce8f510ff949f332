//! The output of a run that writes one file: a set of one member, or standard output.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::{OutputSet, STDOUT, Sink};
use crate::error::{Error, Result};

/// An output being written. Dropping it without `commit` deletes the temporary file.
pub struct Output {
    to: To,
    name: PathBuf,
}

enum To {
    /// A file: a set of one member.
    File(OutputSet),
    /// Standard output, through its own unbuffered handle: the engine writes large blocks.
    /// It has no temporary file, so nothing to remove on a signal.
    Stdout(File),
}

impl Output {
    /// Creates the temporary file next to `target`, with the permissions a new file gets
    /// (0666 less the umask), as `numpy.save` would create it; or, for `-`, prepares to
    /// write to standard output.
    /// With `no_clobber`, an existing target is refused now and, should one appear while
    /// the output is written, at the final rename.
    pub fn create(target: &Path, no_clobber: bool) -> Result<Output> {
        if target.as_os_str() == STDOUT {
            let name = Path::new("standard output");
            #[cfg(unix)]
            let handle = std::os::fd::AsFd::as_fd(&io::stdout()).try_clone_to_owned();
            #[cfg(windows)]
            let handle =
                std::os::windows::io::AsHandle::as_handle(&io::stdout()).try_clone_to_owned();
            let handle = handle.map_err(|e| Error::io("write the output to", name, e))?;
            return Ok(Output {
                to: To::Stdout(File::from(handle)),
                name: name.to_path_buf(),
            });
        }
        let mut set = OutputSet::new(no_clobber);
        set.add(target)?;
        Ok(Output {
            to: To::File(set),
            name: target.to_path_buf(),
        })
    }

    /// Renames the complete file over the target (standard output is already complete).
    pub fn commit(self) -> Result<()> {
        match self.to {
            To::File(set) => set.commit(),
            To::Stdout(_) => Ok(()),
        }
    }

    /// Writes `bytes` at `offset`, over what is there: the early copy's header, once the
    /// whole shape is known. Only a file can be rewritten; standard output refuses.
    pub fn write_at(&self, offset: u64, bytes: &[u8]) -> io::Result<()> {
        match &self.to {
            To::File(set) => set.members()[0].write_at(offset, bytes),
            To::Stdout(_) => Err(io::Error::other("standard output cannot be rewritten")),
        }
    }
}

impl Sink for Output {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match &mut self.to {
            To::File(set) => set.members_mut()[0].write_all(bytes),
            To::Stdout(file) => file.write_all(bytes),
        }
    }

    fn copy_from(&mut self, file: &File, offset: u64, len: u64) -> io::Result<u64> {
        match &mut self.to {
            To::File(set) => set.members_mut()[0].copy_from(file, offset, len),
            // A pipe: the engine writes from its own buffer or map.
            To::Stdout(_) => Ok(0),
        }
    }

    fn name(&self) -> &Path {
        &self.name
    }
}
