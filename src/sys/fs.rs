//! Files by name: whether one may be written, naming an unnamed one, and a file's identity.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;

#[cfg(windows)]
use super::windows;

/// What the command line names standard output as.
pub const STDOUT: &str = "-";

/// Whether this process's real user may write to the existing file at `path`, as `access(2)`
/// answers it and as `cp` finds out when it opens the file: the mode's write bits (root
/// passes them) and a read-only file system. The error says which: EACCES or EROFS.
#[cfg(unix)]
pub fn may_write(path: &std::path::Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let Ok(path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return Ok(());
    };
    // SAFETY: access reads the NUL-terminated string, which lives for the call.
    match unsafe { libc::access(path.as_ptr(), libc::W_OK) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// Elsewhere, whether the file lacks the read-only attribute.
#[cfg(not(unix))]
pub fn may_write(path: &std::path::Path) -> io::Result<()> {
    match std::fs::metadata(path) {
        Ok(m) if m.permissions().readonly() => Err(io::ErrorKind::PermissionDenied.into()),
        _ => Ok(()),
    }
}

/// Gives `file`, an unnamed file (`O_TMPFILE`), the name `path`; fails with `AlreadyExists`
/// if something has that name. Through `/proc/self/fd`, which any user may link from, or,
/// without `/proc`, with `AT_EMPTY_PATH`, which needs CAP_DAC_READ_SEARCH.
#[cfg(target_os = "linux")]
pub fn link_unnamed(file: &File, path: &std::path::Path) -> io::Result<()> {
    use std::ffi::CString;
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    let to = CString::new(path.as_os_str().as_bytes()).map_err(io::Error::other)?;
    let fd = file.as_raw_fd();
    let proc_path = CString::new(format!("/proc/self/fd/{fd}")).map_err(io::Error::other)?;
    // SAFETY: linkat reads two NUL-terminated strings that live for the call; `fd` is open.
    let linked = unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            proc_path.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    };
    if linked == 0 {
        return Ok(());
    }
    let error = io::Error::last_os_error();
    if error.kind() != io::ErrorKind::NotFound {
        return Err(error);
    }
    // SAFETY: as above, with an empty string that lives for the call.
    let linked = unsafe {
        libc::linkat(
            fd,
            c"".as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::AT_EMPTY_PATH,
        )
    };
    if linked == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The identity of an open file: its device and inode on Unix, its volume's serial number and
/// its file index on Windows. Two names with the same identity are the same file (a hard link,
/// `./a` and `a`).
pub fn file_id(file: &File) -> io::Result<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let metadata = file.metadata()?;
        Ok((metadata.dev(), metadata.ino()))
    }
    #[cfg(windows)]
    windows::file_id(file)
}

/// The identity ([`file_id`]) of the file `path` names (following symbolic links), or `None`
/// when it cannot be found out.
pub fn path_id(path: &std::path::Path) -> Option<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
    }
    #[cfg(windows)]
    {
        use std::os::windows::fs::OpenOptionsExt;
        // No access asked for: the identity is readable whatever the file's permissions
        // (as `fs::metadata` opens it); FILE_FLAG_BACKUP_SEMANTICS opens a folder too.
        let file = std::fs::OpenOptions::new()
            .access_mode(0)
            .custom_flags(windows::FILE_FLAG_BACKUP_SEMANTICS)
            .open(path)
            .ok()?;
        windows::file_id(&file).ok()
    }
}

/// The folder a target is in (`.` for a bare name).
pub fn folder_of(target: &std::path::Path) -> &std::path::Path {
    match target.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => std::path::Path::new("."),
    }
}

/// The bytes free to this process on the file system that holds `file` (`fstatvfs`'s blocks
/// available to unprivileged users), or `None` where that cannot be asked.
#[cfg(unix)]
pub fn free_space(file: &File) -> Option<u64> {
    use std::os::fd::AsRawFd;
    // SAFETY: an all-zero statvfs is a valid value of the plain C struct.
    let mut stats: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: fstatvfs writes into `stats`, which lives for the call, about a descriptor
    // `file` keeps open.
    if unsafe { libc::fstatvfs(file.as_raw_fd(), &mut stats) } != 0 {
        return None;
    }
    #[allow(clippy::useless_conversion)] // u32 or u64 by platform
    let (blocks, size) = (u64::from(stats.f_bavail), u64::from(stats.f_frsize));
    Some(blocks.saturating_mul(size))
}

/// Elsewhere, not asked.
#[cfg(not(unix))]
pub fn free_space(_file: &File) -> Option<u64> {
    None
}
