//! The Windows calls tjoin makes itself (kernel32): a file's identity and the append lock.
#![allow(unsafe_code)]

use std::ffi::c_void;
use std::fs::File;
use std::io;
use std::os::windows::io::AsRawHandle;

/// Opens a folder as well as a file (`CreateFileW` refuses a folder without it).
pub const FILE_FLAG_BACKUP_SEMANTICS: u32 = 0x0200_0000;
/// Opens a symbolic link (a reparse point) itself rather than what it points to.
pub const FILE_FLAG_OPEN_REPARSE_POINT: u32 = 0x0020_0000;
/// The byte an append locks: the last but one a 64-bit offset can name, past the end of
/// any file a file system holds, so that no read or write of data ever meets the lock.
pub const LOCK_BYTE: u64 = u64::MAX - 1;

const LOCKFILE_FAIL_IMMEDIATELY: u32 = 0x1;
const LOCKFILE_EXCLUSIVE_LOCK: u32 = 0x2;
const ERROR_LOCK_VIOLATION: i32 = 33;
const ERROR_IO_PENDING: i32 = 997;

/// `OVERLAPPED`: for a lock, only the offset is read.
#[repr(C)]
struct Overlapped {
    internal: usize,
    internal_high: usize,
    offset: u32,
    offset_high: u32,
    event: *mut c_void,
}

#[repr(C)]
struct FileTime {
    low: u32,
    high: u32,
}

/// `BY_HANDLE_FILE_INFORMATION`.
#[repr(C)]
struct ByHandleFileInformation {
    attributes: u32,
    creation: FileTime,
    last_access: FileTime,
    last_write: FileTime,
    volume_serial_number: u32,
    size_high: u32,
    size_low: u32,
    links: u32,
    index_high: u32,
    index_low: u32,
}

#[link(name = "kernel32")]
unsafe extern "system" {
    fn GetFileInformationByHandle(file: *mut c_void, info: *mut ByHandleFileInformation) -> i32;
    fn LockFileEx(
        file: *mut c_void,
        flags: u32,
        reserved: u32,
        len_low: u32,
        len_high: u32,
        overlapped: *mut Overlapped,
    ) -> i32;
    fn UnlockFileEx(
        file: *mut c_void,
        reserved: u32,
        len_low: u32,
        len_high: u32,
        overlapped: *mut Overlapped,
    ) -> i32;
}

/// An `OVERLAPPED` naming [`LOCK_BYTE`].
fn at_lock_byte() -> Overlapped {
    Overlapped {
        internal: 0,
        internal_high: 0,
        offset: LOCK_BYTE as u32,
        offset_high: (LOCK_BYTE >> 32) as u32,
        event: std::ptr::null_mut(),
    }
}

/// The volume's serial number and the file index of `file`.
pub fn file_id(file: &File) -> io::Result<(u64, u64)> {
    // SAFETY: all-zero bytes are a valid value of this plain C struct of integers.
    let mut info: ByHandleFileInformation = unsafe { std::mem::zeroed() };
    // SAFETY: the handle is open for the call (`file` owns it), and `info` is a writable
    // BY_HANDLE_FILE_INFORMATION that outlives it.
    if unsafe { GetFileInformationByHandle(file.as_raw_handle(), &mut info) } == 0 {
        return Err(io::Error::last_os_error());
    }
    let index = (u64::from(info.index_high) << 32) | u64::from(info.index_low);
    Ok((u64::from(info.volume_serial_number), index))
}

/// Locks [`LOCK_BYTE`] of `file`, exclusively or shared, without waiting: `false` when
/// another handle holds a lock that conflicts.
pub fn try_lock(file: &File, exclusive: bool) -> io::Result<bool> {
    let mut flags = LOCKFILE_FAIL_IMMEDIATELY;
    if exclusive {
        flags |= LOCKFILE_EXCLUSIVE_LOCK;
    }
    let mut overlapped = at_lock_byte();
    // SAFETY: the handle is open for the call, and was opened for synchronous I/O (the
    // standard library's default), so LockFileEx is done with `overlapped`, which it
    // only reads, before it returns.
    let locked = unsafe { LockFileEx(file.as_raw_handle(), flags, 0, 1, 0, &mut overlapped) };
    if locked != 0 {
        return Ok(true);
    }
    let error = io::Error::last_os_error();
    match error.raw_os_error() {
        Some(ERROR_LOCK_VIOLATION | ERROR_IO_PENDING) => Ok(false),
        _ => Err(error),
    }
}

/// Releases the lock [`try_lock`] took on `file`.
pub fn unlock(file: &File) {
    let mut overlapped = at_lock_byte();
    // SAFETY: as in `try_lock`: an open synchronous handle, and `overlapped` read only
    // during the call.
    unsafe { UnlockFileEx(file.as_raw_handle(), 0, 1, 0, &mut overlapped) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::{self, OpenOptions};

    fn opened(path: &std::path::Path) -> File {
        OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .unwrap()
    }

    #[test]
    fn one_handle_at_a_time_holds_the_append_lock_and_readers_are_not_kept_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.npy");
        fs::write(&path, b"data").unwrap();
        let first = opened(&path);
        let second = opened(&path);
        assert!(!crate::sys::lock_held_elsewhere(&path));
        assert!(crate::sys::try_lock_exclusive(&first).unwrap());
        assert!(!crate::sys::try_lock_exclusive(&second).unwrap());
        assert!(crate::sys::lock_held_elsewhere(&path));
        // The lock is on a byte past the end: the data stays readable and writable.
        assert_eq!(fs::read(&path).unwrap(), b"data");
        crate::sys::write_all_at(&second, b"D", 0).unwrap();
        drop(first);
        assert!(crate::sys::try_lock_exclusive(&second).unwrap());
    }

    #[test]
    fn a_file_has_one_identity_under_all_its_names() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.npy");
        fs::write(&path, b"a").unwrap();
        fs::write(dir.path().join("b.npy"), b"a").unwrap();
        fs::hard_link(&path, dir.path().join("link.npy")).unwrap();
        let id = crate::sys::path_id(&path).unwrap();
        assert_eq!(file_id(&File::open(&path).unwrap()).unwrap(), id);
        let link = dir.path().join(".").join("link.npy");
        assert_eq!(crate::sys::path_id(&link), Some(id));
        assert_ne!(crate::sys::path_id(&dir.path().join("b.npy")), Some(id));
        assert!(crate::sys::path_id(dir.path()).is_some());
    }
}
