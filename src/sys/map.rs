//! Memory maps of the inputs: a read-only view of a file's bytes.
//!
//! # The risk a map takes, and what tjoin does about it
//!
//! A map hands out `&[u8]` over a file's pages, and Rust promises that the bytes behind a
//! shared reference do not change while it lives. Nothing enforces that for a file: another
//! process may write it, or truncate it, while tjoin reads it through the map, and that is
//! undefined behaviour in Rust's terms, whatever tjoin then does with the bytes. It cannot be
//! ruled out from inside tjoin (no lock on a Unix file keeps another writer out), so, like
//! ripgrep's searcher, tjoin takes the risk for the speed of maps (and the bounded memory of
//! reading large files through them), and limits what can follow from it:
//!
//! - tjoin never writes a file it maps: outputs are written to new temporary files, and an
//!   `--append` refuses an input that is its target.
//! - A file truncated under a map raises SIGBUS on Unix when a lost page is read: the handler
//!   (`sys::signal`) removes the temporary outputs, puts an append's target back to its old
//!   length, says what happened and exits with status 1. Windows refuses to truncate a mapped
//!   file (`ERROR_USER_MAPPED_FILE`), and a map of a file already shortened fails here
//!   ([`shrank`] says why).
//! - A file written in place (same length) raises nothing: the bytes copied may mix old and
//!   new. Every input's identity, length and change time (ctime on Unix, the modification time
//!   on Windows) are checked again after the copy, before any output is renamed into place;
//!   a changed input makes the run fail with status 1: no output file is put in place, an
//!   append's target is put back (standard output, written as the copy goes, gets only the
//!   status).
//!
//! What remains accepted: until that check, tjoin computes with bytes that may be changing
//! under it. A header parsed from a map (safetensors, JSON) may be read half old and half
//! new, and the compiler's assumption that the bytes stay put may be wrong in ways no check
//! afterwards can see; the output of such a run is still not committed, because the change
//! time is checked after the last read. A writer that leaves the change time as it was (a
//! file system that does not keep one, or a clock set back) defeats that check too.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;

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
        // SAFETY: not provable: the map is sound only while no process writes or truncates
        // the file, which tjoin cannot prevent (see the module's doc). tjoin never writes a
        // file it maps; a truncation raises SIGBUS, which `sys::signal`'s handler turns into
        // a clean exit with no output (Windows refuses it: ERROR_USER_MAPPED_FILE); a write
        // in place is caught by the change-time check after the copy, before the output is
        // renamed into place. The undefined behaviour of reading bytes that change under a
        // `&[u8]` before that check is the risk accepted for reading through maps.
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
