//! Standard input, and pipes and devices named as inputs (`<(zcat a.npy.gz)`): copied once
//! into an unnamed temporary file for the engine to map, but no further than their format
//! says they reach. The format is told from the first bytes before anything is spilled; a
//! stream that does not start as a file of that format, or that goes on past the length its
//! header declares, is refused at once: an endless one (`/dev/zero`, `/dev/urandom`, a FIFO
//! fed forever) was copied until the disk filled.

use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::path::Path;

use crate::error::{Error, InputRef, Result};
use crate::format::{Extent, Format};

/// The first bytes read before the format is told: every format's magic and the start of
/// JSON text fit, and a header usually does too.
const FIRST: usize = 64 << 10;
/// Bytes copied per read.
const CHUNK: usize = 1 << 20;

/// Copies `stream` (the input `name`, at `path`) into an unnamed temporary file, which goes
/// when the process ends however it ends; `forced` is the format `--input-format` names. An
/// empty stream gives an empty file, for the caller to refuse as it says fits.
pub fn copy(
    stream: &mut dyn Read,
    path: &Path,
    forced: Option<Format>,
    name: &InputRef,
) -> Result<File> {
    let failed = |e: io::Error| name.io_error("read", e);
    // Made first, so that a stream that is still arriving already has its copy (a Ctrl-C
    // meanwhile leaves nothing behind: the file has no name).
    let mut file =
        tempfile::tempfile().map_err(|e| name.io_error("make a temporary copy of", e))?;
    let mut head = Vec::new();
    let mut ended = fill(stream, &mut head, FIRST as u64).map_err(failed)? < FIRST as u64;
    let format = forced.unwrap_or_else(|| Format::of_input(path, &head));
    let mut extent = format.extent(&head);
    while let Extent::Head(needed) = extent {
        ended = fill(stream, &mut head, needed).map_err(failed)? < needed;
        extent = format.extent(&head);
        if ended {
            break;
        }
    }
    if ended {
        // All of it is in hand: its reader says what it makes of it, as of a file.
        extent = Extent::Unreadable;
    } else if extent == Extent::Foreign {
        return Err(foreign(name, format, forced.is_some(), &head));
    }
    file.write_all(&head).map_err(failed)?;
    let mut copied = head.len() as u64;
    match extent {
        Extent::Declared(len) if copied > len => return Err(longer(name, format, len)),
        Extent::Declared(len) => {
            let free = crate::sys::free_space(&file);
            if free.is_some_and(|free| free < len - copied) {
                return Err(no_room(name, len, free.unwrap_or_default()));
            }
            copied +=
                io::copy(&mut (&mut *stream).take(len - copied), &mut file).map_err(failed)?;
            if copied == len && stream.read(&mut [0; 1]).map_err(failed)? > 0 {
                return Err(longer(name, format, len));
            }
        }
        Extent::Text => {
            check_text(&head, 0).map_err(|why| not_text(name, &why))?;
            let mut chunk = vec![0; CHUNK];
            loop {
                let n = read_some(stream, &mut chunk).map_err(failed)?;
                if n == 0 {
                    break;
                }
                check_text(&chunk[..n], copied).map_err(|why| not_text(name, &why))?;
                file.write_all(&chunk[..n]).map_err(failed)?;
                copied += n as u64;
            }
        }
        Extent::Unbounded => {
            io::copy(stream, &mut file).map_err(failed)?;
        }
        // All of it read, or a header that cannot be read: no further (the reader says why).
        Extent::Foreign | Extent::Unreadable | Extent::Head(_) => {}
    }
    // The container readers read from the cursor, as from any freshly opened input.
    file.rewind().map_err(failed)?;
    Ok(file)
}

/// Reads from `stream` into `buf` until it holds `len` bytes or the stream ends; returns
/// how many it holds.
fn fill(stream: &mut dyn Read, buf: &mut Vec<u8>, len: u64) -> io::Result<u64> {
    let more = len.saturating_sub(buf.len() as u64);
    (&mut *stream).take(more).read_to_end(buf)?;
    Ok(buf.len() as u64)
}

/// One read, retried when interrupted.
fn read_some(stream: &mut dyn Read, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match stream.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            other => return other,
        }
    }
}

/// Why `bytes`, found `at` bytes into a stream, are not JSON text: a control byte other
/// than white space (binary data, `/dev/urandom`).
fn check_text(bytes: &[u8], at: u64) -> std::result::Result<(), String> {
    match bytes
        .iter()
        .position(|&b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r'))
    {
        Some(i) => Err(format!(
            "byte {} is {:#04x}, which JSON text never holds",
            at + i as u64,
            bytes[i]
        )),
        None => Ok(()),
    }
}

fn not_text(name: &InputRef, why: &str) -> Error {
    Error::Malformed {
        input: name.clone(),
        format: "JSON",
        reason: format!("{why}; tjoin stopped reading it there"),
    }
}

/// The refusal of a stream that does not start as a file of `format` does (the format
/// `--input-format` named, when `forced`).
fn foreign(name: &InputRef, format: Format, forced: bool, head: &[u8]) -> Error {
    let first: Vec<String> = head.iter().take(8).map(|b| format!("{b:02x}")).collect();
    let others = if forced {
        "the format --input-format names"
    } else {
        "nor as any other format tjoin reads"
    };
    Error::Malformed {
        input: name.clone(),
        format: format.extension(),
        reason: format!(
            "it does not start as one does (its first bytes are {}), {others}; tjoin stopped \
             reading it after {} bytes",
            first.join(" "),
            head.len()
        ),
    }
}

/// The refusal of a stream that goes on past the `len` bytes its header declares.
fn longer(name: &InputRef, format: Format, len: u64) -> Error {
    Error::Malformed {
        input: name.clone(),
        format: format.extension(),
        reason: format!(
            "it goes on past the {len} bytes its header declares; tjoin stopped reading it \
             there (a stream is read no further than its header says, so that an endless one \
             is refused at once)"
        ),
    }
}

/// The refusal of a stream whose header declares more than the temporary folder has room for.
fn no_room(name: &InputRef, len: u64, free: u64) -> Error {
    name.io_error(
        "copy",
        io::Error::new(
            io::ErrorKind::StorageFull,
            format!(
                "its header declares {len} bytes, more than the {free} free where tjoin copies \
                 a stream (the temporary folder, TMPDIR); nothing was copied: save it to a \
                 file, or set TMPDIR to a folder with room"
            ),
        ),
    )
}
