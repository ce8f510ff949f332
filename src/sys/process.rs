//! The process's own resources: its limit on open files, its table of descriptors, the
//! descriptors it was given, its user, and whether another process exists.
#![allow(unsafe_code)]

#[cfg(unix)]
use std::fs::File;
#[cfg(unix)]
use std::io;

/// Raises this process's soft limit on open files to its hard limit and returns the limit
/// in force: inputs are kept open up to a share of it and reopened beyond.
#[cfg(unix)]
pub fn raise_open_file_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit` through a valid pointer to a local.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return 1024;
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit reads one `rlimit` through a valid pointer to a local; raising
        // the soft limit up to the hard limit needs no privilege and affects only us.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit = raised;
        }
    }
    // rlim_t is u64 on Linux but not on every unix.
    #[allow(clippy::unnecessary_cast)]
    let current = limit.rlim_cur as u64;
    current
}

/// Elsewhere there is no such limit to raise.
#[cfg(not(unix))]
pub fn raise_open_file_limit() -> u64 {
    512
}

/// Grows this process's table of file descriptors to hold `count` of them now, while it has
/// one thread. Linux grows the table as descriptors are opened, and when threads share it
/// each growth first waits for an RCU grace period (`synchronize_rcu` in `expand_fdtable`):
/// 8 to 17 ms apiece on these machines, stalls that cost a join of 10,000 small files, opened
/// ahead on a second thread, a third of its time.
#[cfg(target_os = "linux")]
pub fn reserve_file_descriptors(count: u64) {
    let Ok(top) = libc::c_int::try_from(count.saturating_sub(1)) else {
        return;
    };
    for fd in 0..3 {
        // SAFETY: F_DUPFD_CLOEXEC duplicates descriptor `fd` onto the lowest free number at
        // or above `top`, or fails (EBADF when `fd` is not open, EINVAL past the limit); it
        // reads and writes no memory of ours.
        let copy = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, top) };
        if copy >= 0 {
            // SAFETY: `copy` is the descriptor just made, known to nothing else.
            unsafe { libc::close(copy) };
            return;
        }
    }
}

/// Elsewhere the table of open files is not known to stall a growing process.
#[cfg(not(target_os = "linux"))]
pub fn reserve_file_descriptors(_count: u64) {}

/// A copy of descriptor `fd`, which the process was given when it started (standard output,
/// or one a shell opened with `3> file`): writes through it share the descriptor's offset and
/// flags, so `>>`'s `O_APPEND` holds. `None` when the process was not given it: it is closed,
/// or it is close-on-exec, which only a descriptor opened by this process can be (Rust opens
/// every file so), and writing the output into one of tjoin's own files would be wrong.
#[cfg(unix)]
pub fn inherited_descriptor(fd: i32) -> io::Result<Option<File>> {
    use std::os::fd::FromRawFd;
    // SAFETY: F_GETFD reads a descriptor's flags, and fails with EBADF if it is closed.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    if flags < 0 || flags & libc::FD_CLOEXEC != 0 {
        return Ok(None);
    }
    // SAFETY: F_DUPFD_CLOEXEC makes a new descriptor for the same open file, or fails.
    let copy = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if copy < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `copy` was just made, and nothing else owns it.
    Ok(Some(unsafe { File::from_raw_fd(copy) }))
}

/// Whether a process with id `pid` exists (run by any user; a process that has exited but
/// not been waited for still counts).
#[cfg(unix)]
pub fn process_exists(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return true;
    };
    // SAFETY: kill with signal 0 sends nothing; it only checks that the process exists.
    let sent = unsafe { libc::kill(pid, 0) } == 0;
    sent || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// Elsewhere tjoin cannot tell, and takes every process to exist: partial files left by a
/// killed process are not removed by later runs there.
#[cfg(not(unix))]
pub fn process_exists(_pid: u32) -> bool {
    true
}

/// The user this process runs as (its effective user id).
#[cfg(unix)]
pub fn effective_user() -> u32 {
    // SAFETY: geteuid takes nothing, touches no memory and cannot fail.
    unsafe { libc::geteuid() }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// The slots this process's table of file descriptors has room for (`FDSize`).
    fn table_size() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("FDSize:")).unwrap();
        line["FDSize:".len()..].trim().parse().unwrap()
    }

    #[test]
    fn reserving_descriptors_grows_the_table_once_and_leaves_none_open() {
        let wanted = (table_size() * 4).min(raise_open_file_limit());
        reserve_file_descriptors(wanted);
        assert!(table_size() >= wanted, "{} < {wanted}", table_size());
        // The descriptor that grew it is closed (other tests' stay far below).
        let highest = std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u64>().ok())
            .max()
            .unwrap();
        assert!(highest < wanted - 1, "descriptor {highest} left open");
    }
}
