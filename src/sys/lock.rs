//! The append lock: one `--append` at a time on a file, with readers never kept out.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;

#[cfg(unix)]
use super::open_without_waiting;
#[cfg(windows)]
use super::windows;

/// Takes the advisory lock (`flock`) of `file` for this process alone, without waiting:
/// `false` when another process holds it. Two `--append` runs on one file take turns this
/// way; the lock is released when the file is closed, however the process ends.
#[cfg(unix)]
pub fn try_lock_exclusive(file: &File) -> io::Result<bool> {
    use std::os::fd::AsRawFd;
    loop {
        // SAFETY: flock takes a descriptor that `file` keeps open for the call, and no memory.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(true);
        }
        let error = io::Error::last_os_error();
        match error.raw_os_error() {
            Some(libc::EWOULDBLOCK) => return Ok(false),
            Some(libc::EINTR) => continue,
            _ => return Err(error),
        }
    }
}

/// Whether another process (or another open file of this one) holds the advisory lock of
/// the file at `path`, as an `--append` running on it does. Asked only to word a message:
/// any failure says no.
#[cfg(unix)]
pub fn lock_held_elsewhere(path: &std::path::Path) -> bool {
    use std::os::fd::AsRawFd;
    let Ok((file, _)) = open_without_waiting(path) else {
        return false;
    };
    // SAFETY: flock takes a descriptor that `file` keeps open for the call, and no memory. A
    // shared lock taken here is released when `file` is closed, at the end of this function.
    let taken = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) } == 0;
    !taken && io::Error::last_os_error().raw_os_error() == Some(libc::EWOULDBLOCK)
}

/// Takes the append lock of `file` for this handle alone, without waiting: `false` when
/// another handle (another process) holds it. On Windows that is a byte-range lock
/// (`LockFileEx`) on [`windows::LOCK_BYTE`], far past any file's end: a lock there keeps out
/// only the other appenders, where a lock on the data would make every reader's `ReadFile`
/// fail. It is released when the handle is closed.
#[cfg(windows)]
pub fn try_lock_exclusive(file: &File) -> io::Result<bool> {
    windows::try_lock(file, true)
}

/// Whether another handle holds the append lock of the file at `path`, as an `--append`
/// running on it does. Asked only to word a message: any failure says no.
#[cfg(windows)]
pub fn lock_held_elsewhere(path: &std::path::Path) -> bool {
    let Ok(file) = File::open(path) else {
        return false;
    };
    match windows::try_lock(&file, false) {
        Ok(true) => {
            windows::unlock(&file);
            false
        }
        Ok(false) => true,
        Err(_) => false,
    }
}
