//! Positional reads and writes, and the kernel's own copy between files.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;

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
