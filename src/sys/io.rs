//! Positional reads and writes, and the kernel's own copy between files.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;

/// Copies `len` bytes of `from`, starting at `offset`, to `to`'s current position inside the
/// kernel, without passing them through this process. Returns how many bytes were copied
/// before the kernel declined (0 when it cannot copy between these files at all), so that
/// the caller copies the rest another way.
///
/// Any offsets on either side: Linux copies regular files at any offsets, the bytes the same
/// as a read and a write. Page alignment used to be required (commit b059780: from or to
/// the middle of a page the copy cost 40-60% more CPU than writing from a map then), but on
/// the kernels tjoin meets now (6.x) an unaligned copy costs no more CPU than an aligned one
/// and less than writing from a map, and it is what `cat` does (benches/README.md, "Where a
/// kernel copy pays", "Kernel copies at any offset").
#[cfg(target_os = "linux")]
pub fn copy_in_kernel(from: &File, offset: u64, len: u64, to: &File) -> io::Result<u64> {
    use std::os::fd::AsRawFd;
    copy_by(offset, len, |off_in, chunk| {
        // SAFETY: both descriptors are open for the duration of the call; `off_in` is a
        // valid i64 the kernel updates; a null output offset means "use and advance the
        // output file's position", which nothing else touches meanwhile.
        let n = unsafe {
            libc::copy_file_range(
                from.as_raw_fd(),
                off_in,
                to.as_raw_fd(),
                std::ptr::null_mut(),
                chunk,
                0,
            )
        };
        usize::try_from(n).map_err(|_| io::Error::last_os_error())
    })
}

/// The loop of [`copy_in_kernel`] around `call`, which copies up to its second argument's
/// bytes from the input offset it is given (and advances), returning how many it copied or
/// the kernel's error: a copy the kernel declines (a file system or kernel without it, two
/// file systems, offsets or a file it cannot copy) ends the loop with what was copied, for
/// the caller to write the rest; an interrupted one is retried; other errors are errors.
#[cfg(target_os = "linux")]
fn copy_by(
    offset: u64,
    len: u64,
    mut call: impl FnMut(&mut i64, usize) -> io::Result<usize>,
) -> io::Result<u64> {
    let mut off_in = i64::try_from(offset).map_err(io::Error::other)?;
    let mut copied = 0u64;
    while copied < len {
        let chunk = usize::try_from(len - copied)
            .unwrap_or(usize::MAX)
            .min(1 << 30);
        match call(&mut off_in, chunk) {
            Ok(0) => break,
            Ok(n) => copied += n as u64,
            Err(error) => match error.raw_os_error() {
                Some(libc::EXDEV | libc::ENOSYS | libc::EINVAL | libc::EOPNOTSUPP) => break,
                Some(libc::EINTR) => {}
                _ => return Err(error),
            },
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
    fn the_kernel_copies_between_any_offsets_byte_for_byte() {
        let dir = tempfile::tempdir().unwrap();
        // Bytes that repeat nowhere a page apart, so that a copy off by any offset differs.
        let data: Vec<u8> = (0..5 * 4096 + 1234u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect();
        std::fs::write(dir.path().join("in"), &data).unwrap();
        let from = std::fs::File::open(dir.path().join("in")).unwrap();
        // (input offset, output position, length): odd on both sides, a page's end on
        // one side only, both mid-page at different places, and both on pages.
        for (offset, at, len) in [
            (1, 3, 8191),
            (4095, 4097, 5003),
            (13, 4096, 12_345),
            (4096, 100, 4096 * 3),
            (8192, 4096, 4096 * 2 + 1),
        ] {
            let mut to = std::fs::File::create(dir.path().join("out")).unwrap();
            to.write_all(&vec![7; at]).unwrap();
            let copied = copy_in_kernel(&from, offset as u64, len as u64, &to).unwrap();
            assert_eq!(copied, len as u64, "{offset} -> {at}: declined");
            assert_eq!(to.stream_position().unwrap(), (at + len) as u64);
            drop(to);
            let out = std::fs::read(dir.path().join("out")).unwrap();
            assert!(out[..at].iter().all(|&x| x == 7), "{offset} -> {at}");
            assert!(out[at..] == data[offset..offset + len], "{offset} -> {at}");
        }
    }

    #[test]
    fn a_copy_the_kernel_declines_midway_ends_with_what_it_copied() {
        let declined = [libc::EXDEV, libc::ENOSYS, libc::EINVAL, libc::EOPNOTSUPP];
        for errno in declined {
            // 1000 bytes copied, one call interrupted, then the kernel declines.
            let mut calls = 0;
            let copied = copy_by(13, 5000, |off_in, chunk| {
                calls += 1;
                match calls {
                    1 => {
                        assert_eq!((*off_in, chunk), (13, 5000));
                        *off_in += 1000;
                        Ok(1000)
                    }
                    2 => Err(io::Error::from_raw_os_error(libc::EINTR)),
                    _ => {
                        assert_eq!((*off_in, chunk), (1013, 4000));
                        Err(io::Error::from_raw_os_error(errno))
                    }
                }
            });
            assert_eq!(copied.unwrap(), 1000, "errno {errno}");
            assert_eq!(calls, 3);
        }
        // The end of the input stops the copy; a failure to read or write is an error.
        assert_eq!(copy_by(0, 5000, |_, _| Ok(0)).unwrap(), 0);
        let failed = copy_by(0, 5000, |_, _| Err(io::Error::from_raw_os_error(libc::EIO)));
        assert_eq!(failed.unwrap_err().raw_os_error(), Some(libc::EIO));
    }
}
