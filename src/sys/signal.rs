//! The handler of SIGBUS, which reading a mapped input that another process shrank raises:
//! it puts back an append's target, removes the temporary outputs and exits.
#![allow(unsafe_code)]

use std::fs::File;

/// The file a bus error must cut back to a length before anything else (the target of an
/// `--append`, whose descriptor stays open while it is registered), or -1.
#[cfg(unix)]
static CUT_BACK_FD: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);
/// The length it goes back to.
#[cfg(unix)]
static CUT_BACK_LEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// From now on, a bus error (an input shrank while mapped) first cuts `file` back to `len`
/// bytes and flushes it, then removes the temporary files and exits as always: an append's
/// target is left as it was before the append. `None` disarms it. The file must stay open
/// while it is armed.
#[cfg(unix)]
pub fn cut_back_on_bus_error(growing: Option<(&File, u64)>) {
    use std::os::fd::AsRawFd;
    use std::sync::atomic::Ordering;
    // The handler must be installed before a map is read; the list of paths stays as it is.
    install_bus_error_handler();
    match growing {
        Some((file, len)) => {
            CUT_BACK_LEN.store(len, Ordering::SeqCst);
            CUT_BACK_FD.store(file.as_raw_fd(), Ordering::SeqCst);
        }
        None => CUT_BACK_FD.store(-1, Ordering::SeqCst),
    }
}

/// Elsewhere a truncated mapping raises no signal tjoin could handle.
#[cfg(not(unix))]
pub fn cut_back_on_bus_error(_growing: Option<(&File, u64)>) {}

/// The temporary outputs a bus error must remove: their paths one after another, each ended by
/// a NUL, and the list by an empty one; null until the first call.
#[cfg(unix)]
static PARTIAL_ON_BUS_ERROR: std::sync::atomic::AtomicPtr<u8> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());

/// Reading a mapped page of a file that another process has truncated raises SIGBUS, which
/// would kill tjoin and leave its temporary outputs behind. From the first call on, a bus
/// error removes `partials` (the temporary outputs being written), says what happened and
/// exits with status 1. Call again whenever the list changes, with an empty one once every
/// output is complete or gone.
#[cfg(unix)]
pub fn remove_on_bus_error(partials: &[std::path::PathBuf]) {
    use std::os::unix::ffi::OsStrExt;
    install_bus_error_handler();
    // A path with a NUL in it cannot be unlinked anyway.
    let mut list = Vec::new();
    for path in partials.iter().map(|p| p.as_os_str().as_bytes()) {
        if !path.is_empty() && !path.contains(&0) {
            list.extend_from_slice(path);
            list.push(0);
        }
    }
    list.push(0);
    /// Owns the list the handler reads; its heap buffer stays put when the `Vec` is moved.
    static OWNER: std::sync::Mutex<Vec<u8>> = std::sync::Mutex::new(Vec::new());
    let mut owner = OWNER
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    // The handler runs on a thread that reads the maps: the one that creates and commits
    // the outputs, calling this function, or the copy engine's packing thread, which runs
    // only while that one waits for it in the engine: it never reads a list being freed.
    PARTIAL_ON_BUS_ERROR.store(list.as_mut_ptr(), std::sync::atomic::Ordering::SeqCst);
    *owner = list;
}

/// Elsewhere a truncated mapping raises no signal tjoin could handle.
#[cfg(not(unix))]
pub fn remove_on_bus_error(_partials: &[std::path::PathBuf]) {}

/// Installs `on_bus_error` as the handler of SIGBUS, once.
#[cfg(unix)]
pub fn install_bus_error_handler() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        // SAFETY: `on_bus_error` calls only async-signal-safe functions (ftruncate, fsync,
        // unlink, write, _exit) and reads what it acts on through atomics; sigaction is
        // given a zeroed, then filled, struct and no old action is requested.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_bus_error as *const () as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut());
        }
    });
}

#[cfg(unix)]
extern "C" fn on_bus_error(_signal: libc::c_int) {
    const MESSAGE: &[u8] = b"tjoin: error: an input shrank while tjoin was reading it (the \
system raised SIGBUS); no output was written, run again once nothing else writes to it\n";
    let list = PARTIAL_ON_BUS_ERROR.load(std::sync::atomic::Ordering::SeqCst);
    let grown = CUT_BACK_FD.load(std::sync::atomic::Ordering::SeqCst);
    // SAFETY: ftruncate, fsync, unlink, write and _exit are async-signal-safe; `grown` is -1
    // or a descriptor its registrant keeps open while it is registered; `list` is null or a
    // list owned by PARTIAL_ON_BUS_ERROR, whose entries are C strings.
    unsafe {
        // An append's target goes back to its old length first: its journal is among the
        // paths removed next, and it must outlive a data tail it describes.
        if grown >= 0 {
            let len = CUT_BACK_LEN.load(std::sync::atomic::Ordering::SeqCst);
            if libc::ftruncate(grown, len as libc::off_t) == 0 {
                libc::fsync(grown);
            } else {
                // Keep the journal: `--recover` finishes the job.
                libc::write(2, MESSAGE.as_ptr().cast(), MESSAGE.len());
                libc::_exit(1);
            }
        }
        if !list.is_null() {
            let mut entry = list;
            while *entry != 0 {
                libc::unlink(entry.cast());
                while *entry != 0 {
                    entry = entry.add(1);
                }
                entry = entry.add(1);
            }
        }
        libc::write(2, MESSAGE.as_ptr().cast(), MESSAGE.len());
        libc::_exit(1);
    }
}
