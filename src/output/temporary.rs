//! Temporary files beside a target: how they are named, and the registry through which a
//! signal that ends the process removes them first (then runs the hook [`on_signal`] sets).

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use tempfile::NamedTempFile;

/// What a temporary file beside a target holds; its name says which.
#[derive(Debug, Clone, Copy)]
pub(super) enum Kind {
    /// The new version of the target, being written.
    Partial,
    /// The target's previous version, kept while a set of files is committed.
    Backup,
}

/// The one place temporary names are made: `.{name}.XXXXXX.tjoin-partial` (or
/// `.tjoin-backup`) in the target's folder. A leading dot hides it from `ls`; the target's
/// name and the suffix tell a user who finds one what it was.
fn make_beside<F>(
    target: &Path,
    kind: Kind,
    create: impl FnMut(&Path) -> io::Result<F>,
) -> io::Result<NamedTempFile<F>> {
    let mut prefix = OsString::from(".");
    prefix.push(target.file_name().unwrap_or_default());
    prefix.push(".");
    let suffix = match kind {
        Kind::Partial => ".tjoin-partial",
        Kind::Backup => ".tjoin-backup",
    };
    tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(suffix)
        .make_in(folder_of(target), create)
}

/// The folder a target is in (`.` for a bare name).
pub fn folder_of(target: &Path) -> &Path {
    match target.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

/// A temporary file beside a target: removed when dropped and, should SIGINT, SIGTERM or
/// SIGHUP end the process first, by the signal handler (SIGBUS too, see
/// [`crate::source::remove_on_bus_error`]).
pub(super) struct Temporary<F = File> {
    file: NamedTempFile<F>,
    _registered: Registered,
}

impl<F> Temporary<F> {
    /// Creates one beside `target` by calling `create` with a fresh name until it does not
    /// report `AlreadyExists`.
    pub(super) fn create(
        target: &Path,
        kind: Kind,
        create: impl FnMut(&Path) -> io::Result<F>,
    ) -> io::Result<Temporary<F>> {
        // The handler is in place before the file exists, and the registry stays locked
        // until the file is in it, so no signal can find the file unregistered.
        remove_temporaries_on_signals();
        let mut registry = lock(&REGISTRY);
        let file = make_beside(target, kind, create)
            // tempfile's own errors name the temporary path; the user knows only the target's.
            .map_err(|e| e.raw_os_error().map_or(e, io::Error::from_raw_os_error))?;
        let registered = Registered::new(&mut registry, file.path());
        Ok(Temporary {
            file,
            _registered: registered,
        })
    }

    /// Where it is.
    pub(super) fn path(&self) -> &Path {
        self.file.path()
    }

    /// Renames it to `target`, over an existing file unless `no_clobber` forbids it. On
    /// failure it is handed back, still on disk.
    pub(super) fn rename_to(
        self,
        target: &Path,
        no_clobber: bool,
    ) -> Result<(), (io::Error, Temporary<F>)> {
        let Temporary { file, _registered } = self;
        let renamed = if no_clobber {
            file.persist_noclobber(target)
        } else {
            file.persist(target)
        };
        renamed.map(drop).map_err(|e| {
            let back = Temporary {
                file: e.file,
                _registered,
            };
            (e.error, back)
        })
    }

    /// Leaves it on disk, for a user to recover; returns its path.
    pub(super) fn keep(self) -> PathBuf {
        let mut path = self.file.into_temp_path();
        path.disable_cleanup(true);
        path.to_path_buf()
    }

    /// Removes it, saying whether that worked (dropping it ignores a failure).
    pub(super) fn remove(self) -> io::Result<()> {
        self.file.close()
    }
}

impl Temporary<File> {
    /// A new, empty file beside `target`, with the permissions a new file gets (0666 less the
    /// umask), as `numpy.save` would create it.
    pub(super) fn new_file(target: &Path, kind: Kind) -> io::Result<Temporary> {
        let mut options = OpenOptions::new();
        options.read(true).write(true).create_new(true);
        Temporary::create(target, kind, |path| options.open(path))
    }

    /// The open file.
    pub(super) fn as_file(&self) -> &File {
        self.file.as_file()
    }

    /// The same temporary file, closed.
    pub(super) fn closed(self) -> Temporary<()> {
        let Temporary { file, _registered } = self;
        Temporary {
            file: NamedTempFile::from_parts((), file.into_temp_path()),
            _registered,
        }
    }
}

/// Temporary files that exist, for the signal handler to remove.
static REGISTRY: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Files being grown in place (`--append`) and the length each goes back to: a signal cuts
/// each back before it removes the temporary files (an append's journal among them).
static GROWING: Mutex<Vec<(Arc<File>, u64)>> = Mutex::new(Vec::new());

/// A path the signal handler (and a bus error) removes, for as long as this lives: an
/// append's journal, which is not a temporary file of the usual names.
pub(super) fn remove_on_signals(path: &Path) -> Registered {
    remove_temporaries_on_signals();
    Registered::new(&mut lock(&REGISTRY), path)
}

/// Held while a file grown in place is written to, and taken for good by the signal handler
/// before it cuts the file back: a write still under way would otherwise land after the cut
/// and lengthen the file again.
static WRITING: Mutex<()> = Mutex::new(());

/// A file grown in place, which the signal handler (and a bus error) cuts back to its length
/// before the growth, for as long as this lives. One at a time.
pub(super) struct CutBackOnSignals(Arc<File>);

impl CutBackOnSignals {
    /// Registers `file` to be cut back to `len` bytes.
    pub(super) fn new(file: &Arc<File>, len: u64) -> CutBackOnSignals {
        remove_temporaries_on_signals();
        lock(&GROWING).push((Arc::clone(file), len));
        crate::source::cut_back_on_bus_error(Some((file, len)));
        CutBackOnSignals(Arc::clone(file))
    }

    /// Runs `write`, a write to the file, so that no signal cuts the file back while it runs.
    pub(super) fn write<T>(&self, write: impl FnOnce() -> T) -> T {
        let _writing = lock(&WRITING);
        write()
    }
}

impl Drop for CutBackOnSignals {
    fn drop(&mut self) {
        let mut growing = lock(&GROWING);
        growing.retain(|(file, _)| !Arc::ptr_eq(file, &self.0));
        let last = growing.last().map(|(file, len)| (&**file, *len));
        crate::source::cut_back_on_bus_error(last);
    }
}

/// Held while a set of files is committed: the signal handler waits for it, so that a signal
/// never leaves a commit half done.
static COMMIT: Mutex<()> = Mutex::new(());

/// Makes SIGINT, SIGTERM and SIGHUP wait until the guard is dropped: the commit of a set
/// holds it while it changes the targets.
pub(super) fn hold_signals() -> MutexGuard<'static, ()> {
    lock(&COMMIT)
}

/// What the signal handler runs after removing the temporary files and before it ends the
/// process (the progress bar's way to clear itself and say the run was interrupted).
type Hook = Box<dyn Fn() + Send>;
static ON_SIGNAL: Mutex<Option<Hook>> = Mutex::new(None);

/// Sets the hook SIGINT, SIGTERM and SIGHUP run before they end the process (installing the
/// handler, so that a run writing standard output is ended the same way), or removes it.
pub fn on_signal(hook: Option<Hook>) {
    if hook.is_some() {
        remove_temporaries_on_signals();
    }
    *lock(&ON_SIGNAL) = hook;
}

/// A path in `REGISTRY` for as long as it lives.
pub(super) struct Registered(PathBuf);

impl Registered {
    fn new(registry: &mut Vec<PathBuf>, path: &Path) -> Registered {
        registry.push(path.to_path_buf());
        crate::source::remove_on_bus_error(registry);
        Registered(path.to_path_buf())
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        let mut registry = lock(&REGISTRY);
        if let Some(at) = registry.iter().position(|path| path == &self.0) {
            registry.swap_remove(at);
        }
        crate::source::remove_on_bus_error(&registry);
    }
}

fn lock<T>(mutex: &'static Mutex<T>) -> MutexGuard<'static, T> {
    // A panic while holding the lock leaves what it guards as valid as it was.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// From the first temporary file on, SIGINT, SIGTERM or SIGHUP cuts every file being grown
/// in place back to its old length, removes every temporary file and ends the process with
/// 128 + the signal's number (130 for Ctrl-C, 143 for SIGTERM), as a shell reports a process
/// killed by it. Drop handlers do not run when a signal kills a
/// process, so without this a Ctrl-C would leave the temporary files behind. A commit in
/// progress is let finish (or roll back) first.
fn remove_temporaries_on_signals() {
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
                    let _commit = hold_signals();
                    // An append not yet committed is undone before its journal goes, once
                    // the write under way has ended; no other starts (the process ends with
                    // this lock held).
                    let _writing = lock(&WRITING);
                    for (file, len) in lock(&GROWING).iter() {
                        let _ = file.set_len(*len).and_then(|()| file.sync_data());
                    }
                    for path in lock(&REGISTRY).iter() {
                        let _ = std::fs::remove_file(path);
                    }
                    if let Some(hook) = lock(&ON_SIGNAL).as_ref() {
                        hook();
                    }
                    std::process::exit(128 + signal);
                }
            });
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_temporary_file_is_registered_for_the_signal_handler_while_it_exists() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out.npy");
        let partial = Temporary::new_file(&target, Kind::Partial).unwrap();
        let path = partial.path().to_path_buf();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with(".out.npy.") && name.ends_with(".tjoin-partial"));
        assert_eq!(path.parent(), Some(dir.path()));
        assert!(lock(&REGISTRY).contains(&path));
        drop(partial);
        assert!(!lock(&REGISTRY).contains(&path));
        assert!(!path.exists());
    }
}
