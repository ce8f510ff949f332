//! Memory maps and raw byte access to the inputs: the one module allowed `unsafe`.
#![allow(unsafe_code)]

pub mod spill;

use std::fs::File;
use std::io;
use std::path::Path;

#[cfg(unix)]
use memmap2::{Advice, UncheckedAdvice};
use memmap2::{Mmap, MmapOptions};

/// A read-only view of `len` bytes of a file from `offset`, mapped into memory.
pub struct Region {
    /// `None` for an empty region: zero-length maps are not allowed.
    map: Option<Mmap>,
}

impl Region {
    /// Maps `len` bytes of `file` from `offset`, advising the kernel that they will be read
    /// front to back.
    pub fn map(file: &File, offset: u64, len: u64) -> io::Result<Region> {
        if len == 0 {
            return Ok(Region { map: None });
        }
        let len = usize::try_from(len).map_err(|_| io::Error::other("file too large to map"))?;
        // SAFETY: the map is read-only and tjoin never writes to its inputs. Another process
        // that truncates the file while it is mapped makes reading it raise SIGBUS (Windows
        // refuses such a truncation: ERROR_USER_MAPPED_FILE); the length and change time
        // are checked again before the output is renamed into place.
        let map = unsafe { MmapOptions::new().offset(offset).len(len).map(file) };
        // Windows maps no byte past a file's end (Linux maps them, and reading one raises
        // SIGBUS): a file shortened since its header was read fails here, with "Access
        // denied" unless told otherwise.
        #[cfg(windows)]
        let map = map.map_err(|e| shrank(file, offset + len as u64).unwrap_or(e));
        let map = map?;
        // Advice is a hint: a kernel that ignores it costs speed, never correctness.
        #[cfg(unix)]
        let _ = map.advise(Advice::Sequential);
        Ok(Region { map: Some(map) })
    }

    /// An empty region, for inputs without data: nothing is opened or mapped.
    pub fn map_nothing() -> Region {
        Region { map: None }
    }

    /// The mapped bytes.
    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }

    /// Drops the pages of `[start, end)` from this process's memory, so that reading a large
    /// file front to back keeps resident memory bounded. The page cache keeps them. (Windows
    /// has no such call for a mapped view; its working-set manager trims idle pages.)
    #[cfg(not(unix))]
    pub fn release(&self, _start: usize, _end: usize) {}

    /// Drops the pages of `[start, end)` from this process's memory, so that reading a large
    /// file front to back keeps resident memory bounded. The page cache keeps them.
    #[cfg(unix)]
    pub fn release(&self, start: usize, end: usize) {
        if let Some(map) = &self.map
            && end > start
        {
            // SAFETY: the map is a read-only shared file mapping, so MADV_DONTNEED only
            // drops the process's page-table entries: a later read faults the same bytes in
            // from the page cache or the file. No reference into the range is held across
            // this call (the copy engine calls it only for bytes it has finished with).
            let _ = unsafe {
                map.unchecked_advise_range(UncheckedAdvice::DontNeed, start, end - start)
            };
        }
    }
}

/// Why reading `file` up to `end` failed, if it is now shorter than that: it changed while
/// tjoin was reading it. A write from a map of its lost pages fails with EFAULT on Linux,
/// which without this check would blame the output.
pub fn shrank(file: &File, end: u64) -> Option<io::Error> {
    let now = file.metadata().ok()?.len();
    (now < end).then(|| {
        io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!(
                "it is {now} bytes long, shorter than the {end} its header said: it changed \
                 while tjoin was reading it; no output was written, run again once nothing \
                 else writes to it"
            ),
        )
    })
}

/// Copies `len` bytes of `from`, starting at `offset`, to `to`'s current position inside the
/// kernel, without passing them through this process. Returns how many bytes were copied
/// before the kernel declined (0 when it cannot copy between these files at all, or would
/// be slower), so that the caller copies the rest another way.
///
/// The kernel's copy is the fastest way only between page-aligned offsets. From or to the
/// middle of a page, it writes every output page in two pieces and costs 40-60% more CPU
/// than writing the same bytes from a map in 1 MiB pieces, which matches it when aligned
/// (benches/README.md, "Where a kernel copy pays"). Safetensors data seldom starts on a page,
/// so it declines there.
#[cfg(target_os = "linux")]
pub fn copy_in_kernel(from: &File, offset: u64, len: u64, to: &File) -> io::Result<u64> {
    use std::io::Seek;
    use std::os::fd::AsRawFd;
    const PAGE: u64 = 4096;
    let at = (&*to).stream_position()?;
    if offset % PAGE != 0 || at % PAGE != 0 {
        return Ok(0);
    }
    let mut off_in = i64::try_from(offset).map_err(io::Error::other)?;
    let mut copied = 0u64;
    while copied < len {
        let chunk = usize::try_from(len - copied)
            .unwrap_or(usize::MAX)
            .min(1 << 30);
        // SAFETY: both descriptors are open for the duration of the call; `off_in` is a
        // valid i64 the kernel updates; a null output offset means "use and advance the
        // output file's position", which nothing else touches meanwhile.
        let n = unsafe {
            libc::copy_file_range(
                from.as_raw_fd(),
                &mut off_in,
                to.as_raw_fd(),
                std::ptr::null_mut(),
                chunk,
                0,
            )
        };
        match n {
            0 => break,
            n if n > 0 => copied += n as u64,
            _ => {
                let error = io::Error::last_os_error();
                return match error.raw_os_error() {
                    Some(libc::EXDEV | libc::ENOSYS | libc::EINVAL | libc::EOPNOTSUPP) => {
                        Ok(copied)
                    }
                    Some(libc::EINTR) => continue,
                    _ => Err(error),
                };
            }
        }
    }
    Ok(copied)
}

/// Tells the kernel that `file` will be read front to back, as `cat` does, so that it reads
/// ahead further than by default (twice as far on Linux). A hint: it never fails.
#[cfg(target_os = "linux")]
pub fn advise_sequential(file: &File) {
    use std::os::fd::AsRawFd;
    // SAFETY: posix_fadvise takes a descriptor that stays open for the call and touches no
    // memory of ours; advice only changes how the kernel reads ahead for this open file.
    let _ = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_SEQUENTIAL) };
}

/// Elsewhere the kernel's own heuristics decide how far to read ahead.
#[cfg(not(target_os = "linux"))]
pub fn advise_sequential(_file: &File) {}

/// Elsewhere the kernel offers no such call; the caller copies through a buffer.
#[cfg(not(target_os = "linux"))]
pub fn copy_in_kernel(_from: &File, _offset: u64, _len: u64, _to: &File) -> io::Result<u64> {
    Ok(0)
}

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

/// Reads into `buf` from `offset` of `file`, without regard to (on Unix, without moving) the
/// file's cursor; returns how many bytes were read. On Windows the cursor moves: callers that
/// later read from the cursor seek first.
pub fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    #[cfg(unix)]
    return std::os::unix::fs::FileExt::read_at(file, buf, offset);
    #[cfg(windows)]
    return std::os::windows::fs::FileExt::seek_read(file, buf, offset);
}

/// Fills `buf` from `offset` of `file`, failing at the end of the file.
pub fn read_exact_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match read_at(file, buf, offset) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Appends `len` bytes of `file` from `offset` to `buf`, read straight into its spare
/// capacity: a slice to read into would first have to be filled with zeros, and reading an
/// input through the output buffer (`copy::Packer::read_input`) would write every byte twice
/// (the zeroing was 3% of a cold join's samples). Fails at the end of the file; `buf` then
/// keeps its length.
#[cfg(unix)]
pub fn read_appending(file: &File, buf: &mut Vec<u8>, len: usize, offset: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    buf.reserve(len);
    let start = buf.len();
    let mut done = 0;
    while done < len {
        let spare = &mut buf.spare_capacity_mut()[done..len];
        let at = libc::off_t::try_from(offset + done as u64).map_err(io::Error::other)?;
        // SAFETY: `spare` is allocated, writable memory of `spare.len()` bytes that nothing
        // else refers to; pread writes at most that many into it. No byte of it is read, and
        // the Vec's length does not cover it, until the reads have written all of it.
        let read =
            unsafe { libc::pread(file.as_raw_fd(), spare.as_mut_ptr().cast(), spare.len(), at) };
        match read {
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n if n > 0 => done += n as usize,
            _ => {
                let error = io::Error::last_os_error();
                if error.kind() != io::ErrorKind::Interrupted {
                    return Err(error);
                }
            }
        }
    }
    // SAFETY: the reads above wrote all `len` bytes after `start`, within the capacity.
    unsafe { buf.set_len(start + len) };
    Ok(())
}

/// Elsewhere the room is zeroed, then read into.
#[cfg(not(unix))]
pub fn read_appending(file: &File, buf: &mut Vec<u8>, len: usize, offset: u64) -> io::Result<()> {
    let start = buf.len();
    buf.resize(start + len, 0);
    read_exact_at(file, &mut buf[start..], offset).inspect_err(|_| buf.truncate(start))
}

/// Fills `buf` from `offset` of `file` as [`read_exact_at`] does, and leaves the page cache
/// as it was: for the small reads that compare the first bytes of two tensors while the join
/// is planned (`compare::differs`), before the copy reads the same files front to back.
///
/// A read that misses the cache pulls in the kernel's readahead, and the pages a probe
/// leaves behind break the copy's own readahead later: meeting a page already cached, the
/// kernel gives up large folios for that window and reads it in single pages, in smaller
/// requests. Probing each 2.5 MiB tensor of two of four safetensors shards that way read
/// those two files a page at a time and made a cold join 1.25-1.45x slower (benches/README.md,
/// "Probes that read ahead"). So when the probe's pages are not all cached already, it
/// fetches exactly them (`POSIX_FADV_WILLNEED` reads no further) and drops them again
/// afterwards. (`RWF_NOWAIT` cannot tell whether they are cached: a read that may not wait
/// still starts the readahead.)
#[cfg(target_os = "linux")]
pub fn read_leaving_cache(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let page = page_size();
    let start = offset - offset % page;
    let end = (offset + buf.len() as u64).next_multiple_of(page);
    // When it cannot be told, the cache is left to the kernel.
    if buf.is_empty() || cached(file, start, end - start).unwrap_or(true) {
        return read_exact_at(file, buf, offset);
    }
    let fd = file.as_raw_fd();
    let at = libc::off_t::try_from(start).map_err(io::Error::other)?;
    let len = libc::off_t::try_from(end - start).map_err(io::Error::other)?;
    // SAFETY: posix_fadvise touches no memory of ours; advice only changes what the kernel
    // caches, never what a read returns.
    unsafe { libc::posix_fadvise(fd, at, len, libc::POSIX_FADV_WILLNEED) };
    let read = read_exact_at(file, buf, offset);
    // SAFETY: as above.
    unsafe { libc::posix_fadvise(fd, at, len, libc::POSIX_FADV_DONTNEED) };
    read
}

/// Whether every page of `len` bytes of `file` from `start` (a multiple of the page size) is
/// in the page cache, asked so that asking reads nothing in: with `cachestat` (Linux 6.5 and
/// later), one call; where that is missing or refused (a seccomp filter), of a map that is
/// never read (`mincore`), three calls: 0.6 µs against 6.5 µs a probe (benches/README.md,
/// "Probes that read ahead").
#[cfg(target_os = "linux")]
fn cached(file: &File, start: u64, len: u64) -> io::Result<bool> {
    cached_by_cachestat(file, start, len).or_else(|_| cached_by_mincore(file, start, len))
}

/// [`cached`] by `cachestat(2)`, which the libc crate does not wrap: its number is 451 on
/// every architecture but alpha, which Linux gave one table for new calls.
#[cfg(target_os = "linux")]
fn cached_by_cachestat(file: &File, start: u64, len: u64) -> io::Result<bool> {
    use std::os::fd::AsRawFd;
    /// `struct cachestat_range`.
    #[repr(C)]
    struct Range {
        off: u64,
        len: u64,
    }
    /// `struct cachestat`: counts of pages.
    #[repr(C)]
    #[derive(Default)]
    struct Counts {
        cached: u64,
        dirty: u64,
        writeback: u64,
        evicted: u64,
        recently_evicted: u64,
    }
    const SYS_CACHESTAT: libc::c_long = 451;
    let range = Range { off: start, len };
    let mut counts = Counts::default();
    // SAFETY: both structs are laid out as the kernel's and live for the call; the kernel
    // only reads `range` and only writes `counts`; the descriptor is open.
    let asked = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            file.as_raw_fd(),
            &range,
            &mut counts,
            0 as libc::c_uint,
        )
    };
    if asked != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(counts.cached >= len.div_ceil(page_size()))
}

/// [`cached`] of a map that is never read (`mincore`).
#[cfg(target_os = "linux")]
fn cached_by_mincore(file: &File, start: u64, len: u64) -> io::Result<bool> {
    let len = usize::try_from(len).map_err(io::Error::other)?;
    // SAFETY: the map is read-only and never read: only its pages' residency is asked.
    let map = unsafe { MmapOptions::new().offset(start).len(len).map(file)? };
    let mut pages = vec![0u8; len.div_ceil(page_size() as usize)];
    // SAFETY: the map starts on a page (`start` is a multiple of the page size) and spans
    // `len` bytes; `pages` has one byte for each of its pages.
    let asked = unsafe { libc::mincore(map.as_ptr().cast_mut().cast(), len, pages.as_mut_ptr()) };
    if asked != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(pages.iter().all(|&page| page & 1 == 1))
}

/// The size of a page of memory, which is also the page cache's unit.
#[cfg(target_os = "linux")]
fn page_size() -> u64 {
    // SAFETY: sysconf reads a constant of the system and touches no memory of ours.
    u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096)
}

/// Elsewhere a probe reads as any read does.
#[cfg(not(target_os = "linux"))]
pub fn read_leaving_cache(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    read_exact_at(file, buf, offset)
}

/// Writes all of `buf` at `offset` of `file`.
pub fn write_all_at(file: &File, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        #[cfg(unix)]
        let written = std::os::unix::fs::FileExt::write_at(file, buf, offset);
        #[cfg(windows)]
        let written = std::os::windows::fs::FileExt::seek_write(file, buf, offset);
        match written {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                buf = &buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

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

/// The user this process runs as (its effective user id).
#[cfg(unix)]
pub fn effective_user() -> u32 {
    // SAFETY: geteuid takes nothing, touches no memory and cannot fail.
    unsafe { libc::geteuid() }
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

/// The Windows calls tjoin makes itself (kernel32): a file's identity and the append lock.
#[cfg(windows)]
pub mod windows {
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
        fn GetFileInformationByHandle(file: *mut c_void, info: *mut ByHandleFileInformation)
        -> i32;
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
            assert!(!crate::source::lock_held_elsewhere(&path));
            assert!(crate::source::try_lock_exclusive(&first).unwrap());
            assert!(!crate::source::try_lock_exclusive(&second).unwrap());
            assert!(crate::source::lock_held_elsewhere(&path));
            // The lock is on a byte past the end: the data stays readable and writable.
            assert_eq!(fs::read(&path).unwrap(), b"data");
            crate::source::write_all_at(&second, b"D", 0).unwrap();
            drop(first);
            assert!(crate::source::try_lock_exclusive(&second).unwrap());
        }

        #[test]
        fn a_file_has_one_identity_under_all_its_names() {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("a.npy");
            fs::write(&path, b"a").unwrap();
            fs::write(dir.path().join("b.npy"), b"a").unwrap();
            fs::hard_link(&path, dir.path().join("link.npy")).unwrap();
            let id = crate::source::path_id(&path).unwrap();
            assert_eq!(file_id(&File::open(&path).unwrap()).unwrap(), id);
            let link = dir.path().join(".").join("link.npy");
            assert_eq!(crate::source::path_id(&link), Some(id));
            assert_ne!(crate::source::path_id(&dir.path().join("b.npy")), Some(id));
            assert!(crate::source::path_id(dir.path()).is_some());
        }
    }
}

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

/// What a path opened by [`open_without_waiting`] may be besides a regular file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accept {
    /// Only a regular file: for paths that a file names (a shard an index lists, a journal),
    /// which nobody meant to be a pipe or a device.
    Regular,
    /// A regular file, or a pipe or a device read once, front to back: for paths the user
    /// names on the command line (`--rules <(grep ...)`). A terminal is still refused.
    Stream,
}

/// Opens `path` for reading without waiting for a writer: a FIFO opens at once instead of
/// blocking until some program opens it for writing (checking the path's type first would
/// leave a window in which it is replaced by one). For anything but a regular file, on which
/// the flag changes nothing, `O_NONBLOCK` is cleared again once it is open, so that reads wait
/// for data as usual. Returns the file and its metadata (of the file opened, after symlinks).
pub fn open_without_waiting(path: &Path) -> io::Result<(File, std::fs::Metadata)> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    let file = options.open(path)?;
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        wait_on_reads(&file)?;
    }
    Ok((file, metadata))
}

/// Clears `O_NONBLOCK` on a file opened with it: reads of a pipe then wait for data instead
/// of failing with `WouldBlock`.
#[cfg(unix)]
pub fn wait_on_reads(file: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: F_GETFL reads the flags of a descriptor `file` keeps open; it touches no memory
    // of ours.
    let flags = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: F_SETFL sets the flags of the same descriptor; only O_NONBLOCK changes.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Elsewhere files are not opened without waiting.
#[cfg(not(unix))]
pub fn wait_on_reads(_file: &File) -> io::Result<()> {
    Ok(())
}

/// [`open_without_waiting`] for a file that must be regular: anything else is refused with
/// what it is.
pub fn open_regular(path: &Path) -> io::Result<(File, std::fs::Metadata)> {
    let (file, metadata) = open_without_waiting(path)?;
    if !metadata.is_file() {
        return Err(not_regular(&metadata));
    }
    Ok((file, metadata))
}

/// What a file that is not regular is, as a message says it: `a FIFO (named pipe)`.
pub fn kind_of(metadata: &std::fs::Metadata) -> &'static str {
    let kind = metadata.file_type();
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if kind.is_char_device() {
            return "a character device";
        }
        if kind.is_block_device() {
            return "a block device";
        }
        if kind.is_socket() {
            return "a socket";
        }
    }
    if kind.is_dir() {
        "a directory"
    } else if kind.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}

/// The refusal of a file that is not regular where only a regular file will do.
pub fn not_regular(metadata: &std::fs::Metadata) -> io::Error {
    let kind = kind_of(metadata);
    let why = if metadata.is_dir() {
        "it is a directory".to_string()
    } else {
        format!("it is not a regular file but {kind}")
    };
    io::Error::other(why)
}

/// A limit on a file read whole: how many bytes, of what, and what to do about a file over it.
#[derive(Debug)]
pub struct Limit {
    /// The most bytes read.
    pub bytes: u64,
    /// What is read, for the message: `an index`.
    pub of: &'static str,
    /// What to do about a file over it.
    pub advice: &'static str,
}

impl Limit {
    /// The error of a file longer than the limit.
    pub fn exceeded(&self) -> io::Error {
        io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!(
                "it is longer than {} bytes, the most tjoin reads of {}; {}",
                crate::outliers::thousands(self.bytes as usize),
                self.of,
                self.advice
            ),
        )
    }
}

/// Reads the file at `path` whole, up to `limit`, opened without waiting; `accept` says what
/// it may be besides a regular file.
pub fn read_whole(path: &Path, limit: &Limit, accept: Accept) -> io::Result<Vec<u8>> {
    let (file, metadata) = open_without_waiting(path)?;
    read_opened(&file, &metadata, limit, accept)
}

/// [`read_whole`] of UTF-8 text.
pub fn read_text(path: &Path, limit: &Limit, accept: Accept) -> io::Result<String> {
    String::from_utf8(read_whole(path, limit, accept)?).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "it is not UTF-8 text (is it the file you meant?)",
        )
    })
}

/// Reads `file` (opened by [`open_without_waiting`], described by `metadata`) whole from its
/// cursor, up to `limit`: a regular file longer than that is refused before any of it is
/// read; anything else is read through `Read::take`, so that an endless device (`/dev/zero`)
/// stops just past the limit. `accept` says what it may be besides a regular file.
pub fn read_opened(
    file: &File,
    metadata: &std::fs::Metadata,
    limit: &Limit,
    accept: Accept,
) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let regular = metadata.is_file();
    if !regular {
        stream_allowed(file, metadata, accept)?;
    }
    if regular && metadata.len() > limit.bytes {
        return Err(limit.exceeded());
    }
    let mut bytes = Vec::new();
    if regular {
        bytes.reserve_exact(metadata.len() as usize);
    }
    // One byte more than the limit tells a file that grew past it from one that ends there.
    file.take(limit.bytes.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit.bytes {
        return Err(limit.exceeded());
    }
    if bytes.is_empty() && is_fifo(metadata) {
        return Err(nothing_written());
    }
    Ok(bytes)
}

/// Refuses a file that is not regular unless `accept` takes streams, and a terminal (tjoin
/// would wait for someone to type a file) and a directory always.
pub fn stream_allowed(file: &File, metadata: &std::fs::Metadata, accept: Accept) -> io::Result<()> {
    use std::io::IsTerminal;
    if accept == Accept::Regular || metadata.is_dir() {
        return Err(not_regular(metadata));
    }
    if file.is_terminal() {
        return Err(io::Error::other(
            "it is a terminal, and tjoin reads files, not typing: name a file, or pipe one in",
        ));
    }
    Ok(())
}

/// Whether `metadata`'s file is a FIFO or a pipe.
pub fn is_fifo(metadata: &std::fs::Metadata) -> bool {
    #[cfg(unix)]
    return std::os::unix::fs::FileTypeExt::is_fifo(&metadata.file_type());
    #[cfg(not(unix))]
    return {
        let _ = metadata;
        false
    };
}

/// The refusal of a pipe that gave nothing: opened without waiting, a FIFO that no program
/// has opened for writing reads as empty.
pub fn nothing_written() -> io::Error {
    io::Error::other(
        "it is a pipe and nothing was written to it: start the program that writes to it \
         before tjoin (as the shell does for <(...)), or save the data to a file",
    )
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::io::{Seek, Write};

    #[test]
    fn reads_append_after_what_a_buffer_holds_and_stop_at_the_end_of_the_file() {
        let mut file = tempfile::tempfile().unwrap();
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        file.write_all(&data).unwrap();
        let mut buf = b"head".to_vec();
        read_appending(&file, &mut buf, 5000, 1234).unwrap();
        assert_eq!(buf[..4], *b"head");
        assert_eq!(buf[4..], data[1234..6234]);
        let error = read_appending(&file, &mut buf, 100, 9950).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);
        assert_eq!(buf.len(), 5004);
    }

    /// Whether `len` bytes of `file` from `start` are all cached, asked both ways (where the
    /// kernel has `cachestat`), which must agree.
    fn resident(file: &File, start: u64, len: u64) -> bool {
        let mapped = cached_by_mincore(file, start, len).unwrap();
        if let Ok(counted) = cached_by_cachestat(file, start, len) {
            assert_eq!(
                counted, mapped,
                "cachestat against mincore, {len} bytes from {start}"
            );
        }
        mapped
    }

    #[test]
    #[allow(clippy::disallowed_macros)] // its note of a skip is the test's, not tjoin's
    fn a_probe_leaves_the_page_cache_as_it_found_it() {
        use std::os::fd::AsRawFd;
        // Inside the project rather than /tmp, which may be a tmpfs: its pages never leave.
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let path = dir.path().join("data");
        let data: Vec<u8> = (0..64 * 4096u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let file = File::open(&path).unwrap();
        file.sync_all().unwrap();
        // SAFETY: advice touches no memory of ours.
        unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        if resident(&file, 0, data.len() as u64) {
            eprintln!("skipped: this file system keeps the test file's pages cached");
            return;
        }
        // Cold: the right bytes, and no page of the file left cached, the probe's own or
        // any read ahead.
        let mut probe = vec![0; 4096];
        read_leaving_cache(&file, &mut probe, 5000).unwrap();
        assert_eq!(probe, data[5000..9096]);
        let left: Vec<u64> = (0..64)
            .filter(|&page| resident(&file, page * 4096, 4096))
            .collect();
        assert!(left.is_empty(), "pages left in the cache: {left:?}");
        // Warm: a file read whole stays cached whole.
        read_exact_at(&file, &mut vec![0; data.len()], 0).unwrap();
        read_leaving_cache(&file, &mut probe, 5000).unwrap();
        assert_eq!(probe, data[5000..9096]);
        assert!(resident(&file, 0, data.len() as u64));
    }

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

    #[test]
    fn the_kernel_copies_only_between_page_aligned_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..3 * 4096u32).map(|i| i as u8).collect();
        std::fs::write(dir.path().join("in"), &data).unwrap();
        let from = std::fs::File::open(dir.path().join("in")).unwrap();
        let mut to = std::fs::File::create(dir.path().join("out")).unwrap();

        // From the middle of a page, or to it: declined, nothing written.
        assert_eq!(copy_in_kernel(&from, 100, 4096, &to).unwrap(), 0);
        to.write_all(&[7; 10]).unwrap();
        assert_eq!(copy_in_kernel(&from, 4096, 4096, &to).unwrap(), 0);
        assert_eq!(to.stream_position().unwrap(), 10);

        // Both on a page: copied, unless this filesystem has no kernel copy at all.
        to.set_len(0).unwrap();
        to.rewind().unwrap();
        let copied = copy_in_kernel(&from, 4096, 8192, &to).unwrap();
        if copied > 0 {
            assert_eq!(copied, 8192);
            drop(to);
            let out = std::fs::read(dir.path().join("out")).unwrap();
            assert_eq!(out, data[4096..]);
        }
    }
}
