//! The output of a run that writes one file: a set of one member, replaced atomically; or,
//! written directly, standard output and any existing file that is not a regular file (a
//! character device such as `/dev/null`, a FIFO, `/dev/stdout`), which cannot be replaced by
//! a rename without destroying what it is (`cp` and `numpy.save` write to them too).

use std::fs::{self, File};
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
    /// Standard output, through its own unbuffered handle (the engine writes large blocks),
    /// or a file that is not a regular file, opened for writing. It has no temporary file, so
    /// nothing to remove on a signal, and nothing to commit.
    Direct(File),
}

impl Output {
    /// Creates the temporary file next to `target`, with the permissions a new file gets
    /// (0666 less the umask), as `numpy.save` would create it; or, for `-`, prepares to
    /// write to standard output; or opens a target that is not a regular file for writing.
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
                to: To::Direct(File::from(handle)),
                name: name.to_path_buf(),
            });
        }
        if written_directly(target) {
            return Output::open_in_place(target, no_clobber);
        }
        let mut set = OutputSet::new(no_clobber);
        set.add(target)?;
        Ok(Output {
            to: To::File(set),
            name: target.to_path_buf(),
        })
    }

    /// Opens `target`, which is not a regular file, to write to it where it is (a FIFO's
    /// open waits for a reader, as any writer's does).
    fn open_in_place(target: &Path, no_clobber: bool) -> Result<Output> {
        let failed = |e| Error::io("write the output to", target, e);
        if no_clobber {
            let why = "it exists, and --no-clobber forbids writing to it";
            return Err(failed(io::Error::new(io::ErrorKind::AlreadyExists, why)));
        }
        let file = fs::OpenOptions::new()
            .write(true)
            .open(target)
            .map_err(failed)?;
        Ok(Output {
            to: To::Direct(file),
            name: target.to_path_buf(),
        })
    }

    /// Renames the complete file over the target (an output written directly is already
    /// complete).
    pub fn commit(self) -> Result<()> {
        match self.to {
            To::File(set) => set.commit(),
            To::Direct(_) => Ok(()),
        }
    }

    /// Writes `bytes` at `offset`, over what is there: the early copy's header, once the
    /// whole shape is known. Only a file being replaced can be rewritten.
    pub fn write_at(&self, offset: u64, bytes: &[u8]) -> io::Result<()> {
        match &self.to {
            To::File(set) => set.members()[0].write_at(offset, bytes),
            To::Direct(_) => Err(io::Error::other(
                "an output written directly cannot be rewritten",
            )),
        }
    }
}

impl Sink for Output {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match &mut self.to {
            To::File(set) => set.members_mut()[0].write_all(bytes),
            To::Direct(file) => file.write_all(bytes),
        }
    }

    fn copy_from(&mut self, file: &File, offset: u64, len: u64) -> io::Result<u64> {
        match &mut self.to {
            To::File(set) => set.members_mut()[0].copy_from(file, offset, len),
            // A pipe or a device: the engine writes from its own buffer or map.
            To::Direct(_) => Ok(0),
        }
    }

    fn name(&self) -> &Path {
        &self.name
    }
}

/// Whether `target` is written where it is instead of replaced: standard output (`-`), or an
/// existing file that, once symbolic links are followed, is neither a regular file nor a
/// folder (a character device, a FIFO, a socket; `/dev/stdout` is a link to one of these, or
/// to the regular file standard output was sent to, which is then replaced like any file).
pub fn written_directly(target: &Path) -> bool {
    target.as_os_str() == STDOUT || fs::metadata(target).is_ok_and(|m| !m.is_file() && !m.is_dir())
}
