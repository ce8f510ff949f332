//! Temporary files beside a target: how they are named, the new version of a target (an
//! unnamed file where Linux allows it), and the registry through which a signal that ends
//! the process removes them first (then runs the hook [`on_signal`] sets).

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use tempfile::{NamedTempFile, PersistError};

/// What a temporary file beside a target holds; its name says which.
#[derive(Debug, Clone, Copy)]
pub(super) enum Kind {
    /// The new version of the target, being written.
    Partial,
    /// The target's previous version, kept while a set of files is committed.
    Backup,
}

/// The one place temporary names are made: `.{name}.{pid}.XXXXXX.tjoin-partial` (or
/// `.tjoin-backup`) in the target's folder. A leading dot hides it from `ls`; the target's
/// name and the suffix tell a user who finds one what it was, and the writer's process id
/// lets a later run tell a partial file left by a killed process from a live writer's
/// ([`remove_stale_partials`]). A long target name is shortened so that the whole fits in
/// the 255 bytes a file name may have.
fn make_beside<F>(
    target: &Path,
    kind: Kind,
    create: impl FnMut(&Path) -> io::Result<F>,
) -> io::Result<NamedTempFile<F>> {
    let mut prefix = OsString::from(".");
    prefix.push(shortened(target.file_name().unwrap_or_default()));
    prefix.push(format!(".{}.", std::process::id()));
    let suffix = match kind {
        Kind::Partial => PARTIAL_SUFFIX,
        Kind::Backup => ".tjoin-backup",
    };
    tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(suffix)
        .rand_bytes(RANDOM_LEN)
        .make_in(crate::sys::folder_of(target), create)
}

const PARTIAL_SUFFIX: &str = ".tjoin-partial";
const RANDOM_LEN: usize = 6;
/// The bytes of a target's name a temporary name keeps: 255 less the dots, a process id of
/// up to 10 digits, the random part and the longest suffix.
const KEPT_NAME_LEN: usize = 255 - 3 - 10 - RANDOM_LEN - 14;

/// `name`, cut to [`KEPT_NAME_LEN`] bytes (at a character's boundary) if longer.
fn shortened(name: &std::ffi::OsStr) -> OsString {
    let name = name.to_string_lossy();
    let mut end = name.len().min(KEPT_NAME_LEN);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    OsString::from(&name[..end])
}

/// Removes the partial files in `folder` that a tjoin process which no longer exists left
/// there (killed by SIGKILL, or by a crash, before it could remove them), and only those: a
/// running writer's partial file stays. Nothing is said about them, and a file that cannot
/// be removed is left: they are tjoin's own leftovers, and the run goes on either way.
pub(super) fn remove_stale_partials(folder: &Path) {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let writer = name.to_str().and_then(partial_writer);
        if writer.is_some_and(|pid| !crate::sys::process_exists(pid)) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The process id in a partial file's name (`.{name}.{pid}.XXXXXX.tjoin-partial`).
fn partial_writer(name: &str) -> Option<u32> {
    let rest = name.strip_prefix('.')?.strip_suffix(PARTIAL_SUFFIX)?;
    let (rest, random) = rest.rsplit_once('.')?;
    let (_, pid) = rest.rsplit_once('.')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (random.len() == RANDOM_LEN && digits(pid)).then(|| pid.parse().ok())?
}

/// A temporary file beside a target: removed when dropped and, should SIGINT, SIGTERM or
/// SIGHUP end the process first, by the signal handler (SIGBUS too, see
/// [`crate::sys::remove_on_bus_error`]).
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
        handle_signals()?;
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
    ///
    /// On Windows a rename over a file that another process has open or mapped fails, where
    /// on Unix it succeeds: a second tjoin writing the same target, or anything reading it,
    /// holds it for a moment. Such a rename is tried again for up to [`IN_USE_PATIENCE`], as
    /// cargo and rustup do, and the error then says why it failed.
    pub(super) fn rename_to(
        self,
        target: &Path,
        no_clobber: bool,
    ) -> Result<(), (io::Error, Temporary<F>)> {
        let Temporary {
            mut file,
            _registered,
        } = self;
        let started = std::time::Instant::now();
        let mut pause = std::time::Duration::from_millis(1);
        loop {
            let renamed = if no_clobber {
                file.persist_noclobber(target).map(drop)
            } else {
                replace(file, target)
            };
            let error = match renamed {
                Ok(()) => return Ok(()),
                Err(e) => {
                    file = e.file;
                    e.error
                }
            };
            let waiting = in_use(&error, target);
            if waiting && started.elapsed() < IN_USE_PATIENCE {
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(100));
                continue;
            }
            let error = if waiting { still_in_use(error) } else { error };
            return Err((error, Temporary { file, _registered }));
        }
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

/// Renames `file` over `target` with the standard library's rename. On Unix that is
/// `rename(2)`, as tempfile's. On Windows 10 1607 and later it is `SetFileInformationByHandle`
/// with `FileRenameInfoEx` and `FILE_RENAME_FLAG_REPLACE_IF_EXISTS |
/// FILE_RENAME_FLAG_POSIX_SEMANTICS`, which Microsoft documents (FILE_RENAME_INFORMATION,
/// ntifs.h) to "allow replacing a file even if there are existing handles to it", handles that
/// allowed deletion (`FILE_SHARE_DELETE` in `CreateFileW`, which the standard library asks
/// for by default). `MoveFileExW` with `MOVEFILE_REPLACE_EXISTING` (tempfile's way, and the
/// standard library's where the file system has no such rename) fails on an open target with
/// ERROR_ACCESS_DENIED. A target mapped into memory the documentation does not cover. Wine
/// 8.0 refuses both ways (os error 5) while any handle to the target is open or any map of
/// it exists, whatever its share mode: `rename_to` tries again for a while.
fn replace<F>(mut file: NamedTempFile<F>, target: &Path) -> Result<(), PersistError<F>> {
    match std::fs::rename(file.path(), target) {
        Ok(()) => {
            // It is the target now: dropping the temporary file must not remove it.
            file.disable_cleanup(true);
            Ok(())
        }
        Err(error) => Err(PersistError { error, file }),
    }
}

/// How long a rename that Windows refuses because the target is in use is tried again.
const IN_USE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(2);

/// Whether a rename failed because the target (or the file renamed) is in use: Windows
/// answers ERROR_SHARING_VIOLATION (32), or ERROR_ACCESS_DENIED (5), which is also its
/// answer for a target made read-only since tjoin checked it: that one is final, not worth
/// waiting for, and not another program's doing. On Unix a file in use is no obstacle, and a
/// refusal is final.
fn in_use(error: &io::Error, target: &Path) -> bool {
    cfg!(windows)
        && match error.raw_os_error() {
            Some(32) => true,
            Some(5) => !std::fs::metadata(target).is_ok_and(|m| m.permissions().readonly()),
            _ => false,
        }
}

/// The error of a rename still refused as in use after [`IN_USE_PATIENCE`]: what holds the
/// target, and what to do.
fn still_in_use(error: io::Error) -> io::Error {
    let why = format!(
        "{error}; another program has it open or mapped into memory, and Windows replaces no \
         such file (it still was after {} s); close that program, or name another output",
        IN_USE_PATIENCE.as_secs()
    );
    io::Error::new(error.kind(), why)
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

/// The new version of a target, being written: on Linux an unnamed file in the target's
/// folder (`O_TMPFILE`), which the kernel removes however the process ends, even by SIGKILL;
/// where the file system refuses one, and elsewhere, a named [`Temporary`].
pub(super) enum Partial {
    #[cfg(target_os = "linux")]
    Unnamed(File),
    Named(Temporary),
}

impl Partial {
    /// A new, empty file for `target`'s new version, with the permissions a new file gets
    /// (0666 less the umask), as `numpy.save` would create it.
    pub(super) fn new(target: &Path) -> io::Result<Partial> {
        handle_signals()?;
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::fs::OpenOptionsExt;
            let unnamed = OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_TMPFILE)
                .open(crate::sys::folder_of(target));
            // EOPNOTSUPP, EISDIR (kernels before 3.11) or EINVAL where the file system has no
            // unnamed files; any other refusal, the named file meets again and reports.
            if let Ok(file) = unnamed {
                return Ok(Partial::Unnamed(file));
            }
        }
        Temporary::new_file(target, Kind::Partial).map(Partial::Named)
    }

    /// The open file.
    pub(super) fn as_file(&self) -> &File {
        match self {
            #[cfg(target_os = "linux")]
            Partial::Unnamed(file) => file,
            Partial::Named(temporary) => temporary.as_file(),
        }
    }

    /// The file under a temporary name beside `target`, ready to be renamed over it: an
    /// unnamed file is linked into the folder now (a rename is what replaces a target
    /// atomically; a link cannot replace).
    // Only an unnamed file, which exists on Linux alone, needs the target's name.
    #[cfg_attr(not(target_os = "linux"), allow(unused_variables))]
    pub(super) fn into_named(self, target: &Path) -> io::Result<Temporary<()>> {
        match self {
            Partial::Named(temporary) => Ok(temporary.closed()),
            #[cfg(target_os = "linux")]
            Partial::Unnamed(file) => {
                handle_signals()?;
                let mut registry = lock(&REGISTRY);
                let link = |path: &Path| crate::sys::link_unnamed(&file, path);
                let named = make_beside(target, Kind::Partial, link)
                    .map_err(|e| e.raw_os_error().map_or(e, io::Error::from_raw_os_error))?;
                let registered = Registered::new(&mut registry, named.path());
                Ok(Temporary {
                    file: named,
                    _registered: registered,
                })
            }
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
    // A handler that could not start refused the run at its start (`crate::run`).
    let _ = handle_signals();
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
        // A handler that could not start refused the run at its start (`crate::run`).
        let _ = handle_signals();
        lock(&GROWING).push((Arc::clone(file), len));
        crate::sys::cut_back_on_bus_error(Some((file, len)));
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
        crate::sys::cut_back_on_bus_error(last);
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
        // A handler that could not start refused the run at its start (`crate::run`).
        let _ = handle_signals();
    }
    *lock(&ON_SIGNAL) = hook;
}

/// A path in `REGISTRY` for as long as it lives.
pub(super) struct Registered(PathBuf);

impl Registered {
    fn new(registry: &mut Vec<PathBuf>, path: &Path) -> Registered {
        registry.push(path.to_path_buf());
        crate::sys::remove_on_bus_error(registry);
        Registered(path.to_path_buf())
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        let mut registry = lock(&REGISTRY);
        if let Some(at) = registry.iter().position(|path| path == &self.0) {
            registry.swap_remove(at);
        }
        crate::sys::remove_on_bus_error(&registry);
    }
}

fn lock<T>(mutex: &'static Mutex<T>) -> MutexGuard<'static, T> {
    // A panic while holding the lock leaves what it guards as valid as it was.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Installs the handlers of the signals that end a run, before any work starts (the run's
/// flow calls it first; every temporary file's creation makes sure of it too). SIGINT,
/// SIGTERM or SIGHUP cuts every file being grown in place back to its old length, removes
/// every temporary file and ends the process by the same signal, with its default action
/// (a shell reports it as 128 + the signal's number: 130 for Ctrl-C, 143 for SIGTERM). Drop handlers do
/// not run when a signal kills a process, so without this a Ctrl-C would leave the
/// temporary files behind. A commit in progress is let finish (or roll back) first.
/// SIGXFSZ (a write past `ulimit -f`) no longer kills the process: the write fails with
/// EFBIG instead, and the run reports it, naming the output, and removes its temporary
/// files as for any failed write. SIGBUS has its own handler ([`crate::sys`]).
///
/// The thread that waits for the signals is started once. Where it cannot be (an address
/// space too small for its stack, a process limit reached), the run is refused with the
/// system's reason rather than going on without its clean-up: `thread::spawn` would panic,
/// and a panic that runs out of memory while printing its backtrace hangs in std's lock.
pub fn handle_signals() -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGXFSZ};
        /// The handler's work (locks, removing files, restoring lengths) needs little stack;
        /// a small one also leaves a tight address space for the run.
        const STACK: usize = 256 << 10;
        static INSTALLED: std::sync::OnceLock<Result<(), (std::io::ErrorKind, String)>> =
            std::sync::OnceLock::new();
        let installed = INSTALLED.get_or_init(|| {
            crate::sys::install_bus_error_handler();
            let Ok(mut signals) =
                signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP, SIGXFSZ])
            else {
                return Ok(());
            };
            let thread = std::thread::Builder::new()
                .name("signals".to_owned())
                .stack_size(STACK);
            thread
                .spawn(move || {
                    if let Some(signal) = signals.forever().find(|&signal| signal != SIGXFSZ) {
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
                        #[cfg(feature = "remote")]
                        crate::sys::remote::abort_uploads();
                        if let Some(hook) = lock(&ON_SIGNAL).as_ref() {
                            hook();
                        }
                        // Die by the signal rather than exit with 128 + its number: a shell
                        // stops a `for` loop at Ctrl-C only when the command was killed by
                        // SIGINT (fd's `src/exit_codes.rs`). The handler goes back to the
                        // default and the signal is raised again; the exit is a fallback.
                        let _ = signal_hook::low_level::emulate_default_handler(signal);
                        std::process::exit(128 + signal);
                    }
                })
                .map(drop)
                .map_err(|e| (e.kind(), e.to_string()))
        });
        if let Err((kind, reason)) = installed {
            return Err(std::io::Error::new(*kind, reason.clone()));
        }
    }
    Ok(())
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
        assert_eq!(partial_writer(&name), Some(std::process::id()), "{name}");
        assert_eq!(path.parent(), Some(dir.path()));
        assert!(lock(&REGISTRY).contains(&path));
        drop(partial);
        assert!(!lock(&REGISTRY).contains(&path));
        assert!(!path.exists());
    }

    #[test]
    fn a_temporary_name_fits_in_255_bytes_whatever_the_target_name() {
        let dir = tempfile::tempdir().unwrap();
        let long = "é".repeat(125) + "x.npy";
        let partial = Temporary::new_file(&dir.path().join(&long), Kind::Backup).unwrap();
        let name = partial.path().file_name().unwrap().to_str().unwrap();
        assert!(name.len() <= 255, "{} bytes: {name}", name.len());
        assert!(name.starts_with(".éé"), "{name}");
    }

    /// Windows answers a rename over a read-only file as it answers one over a file in use
    /// (ERROR_ACCESS_DENIED): the read-only one is final, not waited for. (Wine replaces a
    /// read-only file where Windows refuses, so the refusal itself cannot be shown under
    /// Wine; what tjoin makes of it can.)
    #[cfg(windows)]
    #[test]
    fn access_denied_over_a_read_only_target_is_not_taken_for_in_use() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out.npy");
        std::fs::write(&target, b"old").unwrap();
        let denied = io::Error::from_raw_os_error(5);
        let sharing = io::Error::from_raw_os_error(32);
        assert!(in_use(&denied, &target));
        let mut permissions = std::fs::metadata(&target).unwrap().permissions();
        permissions.set_readonly(true);
        std::fs::set_permissions(&target, permissions).unwrap();
        assert!(!in_use(&denied, &target));
        assert!(in_use(&sharing, &target));
        assert!(
            still_in_use(sharing)
                .to_string()
                .contains("another program")
        );
    }

    #[test]
    fn only_names_of_partial_files_give_a_writer() {
        assert_eq!(partial_writer(".a.npy.42.AbC123.tjoin-partial"), Some(42));
        assert_eq!(partial_writer(".a.npy.AbC123.tjoin-partial"), None);
        assert_eq!(partial_writer(".a.npy.42.AbC123.tjoin-backup"), None);
        assert_eq!(partial_writer("a.npy.42.AbC12.tjoin-partial"), None);
    }
}
