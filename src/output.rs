//! Where the output goes. A file is written under a temporary name in the target's folder and
//! renamed over the target only when complete, so that a failed or refused run leaves no
//! partial file and an existing target untouched.

use std::fs::File;
use std::io::{self, ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tempfile::NamedTempFile;

use crate::error::{Error, Result};

/// What the copy engine and the format writers write the output through.
pub trait Sink {
    /// Appends `bytes` to the output.
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()>;

    /// Appends `len` bytes of `file` from `offset` without passing them through this process,
    /// if the output allows it. Returns how many bytes it copied; the caller writes the rest.
    fn copy_from(&mut self, _file: &File, _offset: u64, _len: u64) -> io::Result<u64> {
        Ok(0)
    }

    /// The output's name, for messages.
    fn name(&self) -> &Path;
}

/// Forwards everything to another sink.
pub struct PassThrough<'a>(pub &'a mut dyn Sink);

impl Sink for PassThrough<'_> {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.0.write_all(bytes)
    }

    fn copy_from(&mut self, file: &File, offset: u64, len: u64) -> io::Result<u64> {
        self.0.copy_from(file, offset, len)
    }

    fn name(&self) -> &Path {
        self.0.name()
    }
}

/// An output being written. Dropping it without `commit` deletes the temporary file.
pub struct Output {
    temp: NamedTempFile,
    target: PathBuf,
    no_clobber: bool,
    /// Keeps the temporary file's path where a signal handler can remove it.
    _registered: Registered,
}

impl Output {
    /// Creates the temporary file next to `target`, with the permissions a new file gets
    /// (0666 less the umask), as `numpy.save` would create it.
    /// With `no_clobber`, an existing target is refused now and, should one appear while
    /// the output is written, at the final rename.
    pub fn create(target: &Path, no_clobber: bool) -> Result<Output> {
        let folder = match target.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        let refuse = |kind: ErrorKind, why: String| {
            Error::io("write the output", target, io::Error::new(kind, why))
        };
        if target.is_dir() {
            let why = "it is a directory; name a file inside it".to_string();
            return Err(refuse(ErrorKind::IsADirectory, why));
        }
        if no_clobber && target.symlink_metadata().is_ok() {
            let why = "it exists, and --no-clobber forbids replacing it".to_string();
            return Err(refuse(ErrorKind::AlreadyExists, why));
        }
        if !folder.is_dir() {
            let why = format!("its folder {} does not exist", folder.display());
            return Err(refuse(ErrorKind::NotFound, why));
        }
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let prefix = format!(".{name}.");
        let mut builder = tempfile::Builder::new();
        builder.prefix(&prefix).suffix(".tjoin-partial");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            builder.permissions(std::fs::Permissions::from_mode(0o666));
        }
        // The handler is in place before the file exists, and the registry stays locked until
        // the file is in it, so no signal can find the file unregistered.
        remove_partial_outputs_on_signals();
        let mut partial = lock_partial();
        // tempfile's errors name the temporary path; the user knows only the target's.
        let temp = builder.tempfile_in(folder).map_err(|e| {
            let source = e.raw_os_error().map_or(e, io::Error::from_raw_os_error);
            Error::io("write the output", target, source)
        })?;
        partial.push(temp.path().to_path_buf());
        drop(partial);
        let registered = Registered(temp.path().to_path_buf());
        Ok(Output {
            temp,
            target: target.to_path_buf(),
            no_clobber,
            _registered: registered,
        })
    }

    /// Renames the complete file over the target.
    pub fn commit(self) -> Result<()> {
        let target = self.target;
        let persisted = if self.no_clobber {
            self.temp.persist_noclobber(&target)
        } else {
            self.temp.persist(&target)
        };
        persisted.map_err(|e| Error::io("rename the finished output to", &target, e.error))?;
        Ok(())
    }
}

impl Sink for Output {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.temp.as_file().write_all(bytes)
    }

    fn copy_from(&mut self, file: &File, offset: u64, len: u64) -> io::Result<u64> {
        crate::source::copy_in_kernel(file, offset, len, self.temp.as_file())
    }

    fn name(&self) -> &Path {
        &self.target
    }
}

/// Temporary outputs being written, for the signal handler to remove.
static PARTIAL: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Removes its path from `PARTIAL` when dropped.
struct Registered(PathBuf);

impl Drop for Registered {
    fn drop(&mut self) {
        lock_partial().retain(|path| path != &self.0);
    }
}

fn lock_partial() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    // A panic while holding the lock leaves the list as valid as it was.
    PARTIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// From the first output on, SIGINT, SIGTERM or SIGHUP removes every temporary output and
/// ends the process with 128 + the signal's number (130 for Ctrl-C, 143 for SIGTERM), as a
/// shell reports a process killed by it. Drop handlers do not run when a signal kills a
/// process, so without this a Ctrl-C would leave the temporary file behind.
fn remove_partial_outputs_on_signals() {
    #[cfg(unix)]
    {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        static INSTALLED: std::sync::Once = std::sync::Once::new();
        INSTALLED.call_once(|| {
            let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
            else {
                return;
            };
            std::thread::spawn(move || {
                if let Some(signal) = signals.forever().next() {
                    for path in lock_partial().iter() {
                        let _ = std::fs::remove_file(path);
                    }
                    std::process::exit(128 + signal);
                }
            });
        });
    }
}
