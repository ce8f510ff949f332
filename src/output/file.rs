//! The output of a run that writes one file: a set of one member, replaced atomically; or,
//! written directly, standard output and any existing file that is not a regular file (a
//! character device such as `/dev/null`, a FIFO), which cannot be replaced by a rename
//! without destroying what it is (`cp` and `numpy.save` write to them too).
//!
//! On Unix, a name of one of the process's descriptors (`/dev/stdout`, `/dev/stderr`,
//! `/dev/stdin`, `/dev/fd/N`, `/proc/self/fd/N`, read as the shell and gawk read them) is
//! that descriptor, written through a copy of it: whatever it is open on, a pipe, a terminal
//! or a regular file, its offset and flags hold, so `-o /dev/stdout >> file` appends to the
//! file and `> file` writes the shell's file rather than replacing it with a new one. Opening
//! the name instead would follow `/proc/self/fd/1` to the file and replace it, losing `>>`.
//! What was written to a descriptor before a failure stays there, as for `-o -`.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::OutputSet;
use crate::error::{Error, Result};
use crate::format::Sink;
use crate::sys::STDOUT;

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
    /// write to standard output, or, on Unix, to the descriptor a name such as `/dev/stdout`
    /// names; or opens a target that is not a regular file for writing.
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
        #[cfg(unix)]
        if let Some(fd) = named_descriptor(target) {
            return Output::to_descriptor(target, fd);
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

    /// Writes to a copy of descriptor `fd`, which `target` names. `--no-clobber` does not
    /// apply, as to `-o -`: nothing is replaced, the shell opened what the descriptor is.
    #[cfg(unix)]
    fn to_descriptor(target: &Path, fd: i32) -> Result<Output> {
        let file = crate::sys::inherited_descriptor(fd)
            .map_err(|e| Error::io("write the output to", target, e))?;
        let file = file.ok_or_else(|| {
            Error::refused(
                format!(
                    "the output {} is descriptor {fd}, which tjoin was not given open",
                    crate::messages::path(target)
                ),
                format!("open it in the shell that runs tjoin ({fd}> FILE), or name a file"),
            )
        })?;
        Ok(Output {
            to: To::Direct(file),
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

/// Whether `target` is written where it is instead of replaced: standard output (`-`), a
/// descriptor's name, or an existing file that, once symbolic links are followed, is neither
/// a regular file nor a folder (a character device, a FIFO, a socket).
pub fn written_directly(target: &Path) -> bool {
    #[cfg(unix)]
    if named_descriptor(target).is_some() {
        return true;
    }
    target.as_os_str() == STDOUT || fs::metadata(target).is_ok_and(|m| !m.is_file() && !m.is_dir())
}

/// The descriptor `target` names, if it names one: `/dev/stdin`, `/dev/stdout` and
/// `/dev/stderr` 0, 1 and 2, `/dev/fd/N` and `/proc/self/fd/N` N. Read from the name alone,
/// as a shell reads them in redirections: another path to the same place (a symbolic link
/// to `/dev/stdout`) is an ordinary file name.
#[cfg(unix)]
fn named_descriptor(target: &Path) -> Option<i32> {
    use std::path::Component;
    let mut parts = target.components();
    if parts.next() != Some(Component::RootDir) {
        return None;
    }
    let parts: Vec<&str> = parts
        .map(|part| part.as_os_str().to_str())
        .collect::<Option<_>>()?;
    match parts.as_slice() {
        ["dev", "stdin"] => Some(0),
        ["dev", "stdout"] => Some(1),
        ["dev", "stderr"] => Some(2),
        ["dev", "fd", number] | ["proc", "self", "fd", number]
            if number.bytes().all(|b| b.is_ascii_digit()) =>
        {
            number.parse().ok()
        }
        _ => None,
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn descriptors_are_named_as_a_shell_names_them() {
        let named = |path: &str| named_descriptor(Path::new(path));
        assert_eq!(named("/dev/stdout"), Some(1));
        assert_eq!(named("/dev/stderr"), Some(2));
        assert_eq!(named("/dev/stdin"), Some(0));
        assert_eq!(named("/dev/fd/1"), Some(1));
        assert_eq!(named("/dev//fd/./63"), Some(63));
        assert_eq!(named("/proc/self/fd/3"), Some(3));
        for other in [
            "dev/stdout",
            "/dev/fd/+1",
            "/dev/fd/",
            "/dev/fd/1x",
            "/dev/null",
        ] {
            assert_eq!(named(other), None, "{other}");
        }
        assert_eq!(named("/dev/fd/99999999999"), None);
    }
}
