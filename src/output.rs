//! Where the output goes. A file is written under a temporary name in the target's folder and
//! renamed over the target only when complete, so that a failed or refused run leaves no
//! partial file and an existing target untouched. Standard output (`-o -`) is written
//! directly: a pipe cannot take back what it was sent.

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

/// What the command line names standard output as.
pub const STDOUT: &str = "-";

/// An output being written. Dropping it without `commit` deletes the temporary file.
pub struct Output {
    to: To,
    target: PathBuf,
    no_clobber: bool,
}

enum To {
    Temp {
        temp: NamedTempFile,
        /// Keeps the temporary file's path where a signal handler can remove it.
        _registered: Registered,
    },
    /// Standard output, through its own unbuffered handle: the engine writes large blocks.
    /// It has no temporary file, so nothing to register for removal on a signal.
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
                target: name.to_path_buf(),
                no_clobber,
            });
        }
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
        crate::source::remove_on_bus_error(&partial);
        drop(partial);
        let registered = Registered(temp.path().to_path_buf());
        Ok(Output {
            to: To::Temp {
                temp,
                _registered: registered,
            },
            target: target.to_path_buf(),
            no_clobber,
        })
    }

    /// Renames the complete file over the target (standard output is already complete).
    pub fn commit(self) -> Result<()> {
        let target = self.target;
        let To::Temp { temp, _registered } = self.to else {
            return Ok(());
        };
        let persisted = if self.no_clobber {
            temp.persist_noclobber(&target)
        } else {
            temp.persist(&target)
        };
        persisted.map_err(|e| Error::io("rename the finished output to", &target, e.error))?;
        Ok(())
    }

    /// Writes `bytes` at `offset`, over what is there: the early copy's header, once the
    /// whole shape is known. Only a file can be rewritten; standard output refuses.
    pub fn write_at(&self, offset: u64, bytes: &[u8]) -> io::Result<()> {
        match &self.to {
            To::Temp { temp, .. } => crate::source::write_all_at(temp.as_file(), bytes, offset),
            To::Stdout(_) => Err(io::Error::other("standard output cannot be rewritten")),
        }
    }

    fn file(&self) -> &File {
        match &self.to {
            To::Temp { temp, .. } => temp.as_file(),
            To::Stdout(file) => file,
        }
    }
}

impl Sink for Output {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.file().write_all(bytes)
    }

    fn copy_from(&mut self, file: &File, offset: u64, len: u64) -> io::Result<u64> {
        match &self.to {
            To::Temp { temp, .. } => {
                crate::source::copy_in_kernel(file, offset, len, temp.as_file())
            }
            // A pipe: the engine writes from its own buffer or map.
            To::Stdout(_) => Ok(0),
        }
    }

    fn name(&self) -> &Path {
        &self.target
    }
}

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
        crate::source::copy_in_kernel(file, offset, len, &self.file)
    }

    fn name(&self) -> &Path {
        Path::new("a temporary file")
    }
}

/// Temporary outputs being written, for the signal handler to remove.
static PARTIAL: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Removes its path from `PARTIAL` when dropped.
struct Registered(PathBuf);

impl Drop for Registered {
    fn drop(&mut self) {
        let mut partial = lock_partial();
        partial.retain(|path| path != &self.0);
        crate::source::remove_on_bus_error(&partial);
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
