//! Probes that read a few bytes and leave the page cache as they found it.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;

use super::read_exact_at;
#[cfg(target_os = "linux")]
use memmap2::MmapOptions;

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

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

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
}
