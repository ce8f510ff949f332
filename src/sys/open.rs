//! Opening what a path names without waiting for a writer, telling regular files from
//! pipes, devices and terminals, and reading a file whole up to a limit.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::path::Path;

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

/// Whether `metadata`'s file is a pipe or a device (elsewhere: neither a file nor a folder),
/// read once, front to back.
pub fn is_stream(metadata: &std::fs::Metadata) -> bool {
    let kind = metadata.file_type();
    #[cfg(unix)]
    return {
        use std::os::unix::fs::FileTypeExt;
        kind.is_fifo() || kind.is_char_device()
    };
    #[cfg(not(unix))]
    return !kind.is_file() && !kind.is_dir();
}

/// The refusal of a pipe that gave nothing: opened without waiting, a FIFO that no program
/// has opened for writing reads as empty.
pub fn nothing_written() -> io::Error {
    io::Error::other(
        "it is a pipe and nothing was written to it: start the program that writes to it \
         before tjoin (as the shell does for <(...)), or save the data to a file",
    )
}
