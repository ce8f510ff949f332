//! A worker's window on one file of a job's output: a [`Sink`] that takes the file's bytes
//! in order, as any output does, and writes only those of the worker's share, in place in
//! the job's data file. The position is shared ([`Position`]) so that the flow can move it
//! past a tensor it does not read, or to where a cut plan's bytes start
//! (`src/plan/window.rs`).

use std::fs::File;
use std::io::{self, Seek, SeekFrom};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::format::Sink;

/// Where the next byte given to a [`Window`] lies in its file.
#[derive(Debug, Clone, Default)]
pub struct Position(Arc<AtomicU64>);

impl Position {
    /// The position.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// Moves it to `at`.
    pub fn set(&self, at: u64) {
        self.0.store(at, Ordering::Relaxed);
    }
}

/// A file's bytes, of which only `keep` are written (to `file`, at their place).
pub struct Window<'f> {
    file: Option<&'f File>,
    name: PathBuf,
    at: Position,
    keep: Range<u64>,
    /// Where the file's byte 0 stands among the window's: `keep.start` for a file that holds
    /// the share alone (a worker's parts before their upload), else 0.
    base: u64,
    /// Bytes written, counted where the progress bar shows them.
    bar: Option<indicatif::ProgressBar>,
    /// Without a file: the digest of every byte given to `write_all` (the framing, when the
    /// data is not written through it).
    digest: u128,
}

impl<'f> Window<'f> {
    /// The window `keep` of the file `name`, written to `file`; without a file, nothing is
    /// written (the bytes are only counted: the layout of the output).
    pub fn new(file: Option<&'f File>, name: &Path, keep: Range<u64>) -> Window<'f> {
        Window {
            file,
            name: name.to_path_buf(),
            at: Position::default(),
            keep,
            base: 0,
            bar: None,
            digest: super::digest(b""),
        }
    }

    /// The digest of the bytes written through it, without a file: the layout's framing,
    /// which every worker must frame the same.
    pub fn digest(&self) -> u128 {
        self.digest
    }

    /// The same, counting the bytes it writes on `bar`.
    pub fn counted(mut self, bar: &indicatif::ProgressBar) -> Window<'f> {
        self.bar = Some(bar.clone());
        self
    }

    /// The same, writing to a file that holds the window's bytes alone: byte `keep.start`
    /// at its offset 0.
    #[cfg_attr(not(feature = "remote"), allow(dead_code))]
    pub fn alone(mut self) -> Window<'f> {
        self.base = self.keep.start;
        self
    }

    /// The range of the file's bytes it writes.
    pub fn keep(&self) -> Range<u64> {
        self.keep.clone()
    }

    /// Its position, shared.
    pub fn position(&self) -> Position {
        self.at.clone()
    }

    /// The part of `start..start + len` inside the window.
    fn inside(&self, start: u64, len: u64) -> Range<u64> {
        let end = start.saturating_add(len);
        start.max(self.keep.start)..end.min(self.keep.end)
    }
}

impl Sink for Window<'_> {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        let start = self.at.get();
        let len = bytes.len() as u64;
        if self.file.is_none() {
            self.digest = super::digest_more(self.digest, bytes);
        }
        let inside = self.inside(start, len);
        if let (Some(file), false) = (self.file, inside.is_empty()) {
            let from = (inside.start - start) as usize;
            let to = (inside.end - start) as usize;
            crate::sys::write_all_at(file, &bytes[from..to], inside.start - self.base)?;
            if let Some(bar) = &self.bar {
                bar.inc(inside.end - inside.start);
            }
        }
        self.at.set(start + len);
        Ok(())
    }

    fn copy_from(&mut self, from: &File, offset: u64, len: u64) -> io::Result<u64> {
        let start = self.at.get();
        let inside = self.inside(start, len);
        // Wholly outside: nothing to read or write; the bytes are taken as copied.
        if inside.is_empty() {
            self.at.set(start + len);
            return Ok(len);
        }
        let Some(file) = self.file else {
            return Ok(0);
        };
        if inside != (start..start + len) {
            return Ok(0);
        }
        (&*file).seek(SeekFrom::Start(start - self.base))?;
        let copied = crate::sys::copy_in_kernel(from, offset, len, file)?;
        if let Some(bar) = &self.bar {
            bar.inc(copied);
        }
        self.at.set(start + copied);
        Ok(copied)
    }

    fn name(&self) -> &Path {
        &self.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_window_is_written_and_the_position_counts_every_byte() {
        let file = tempfile::tempfile().unwrap();
        file.set_len(10).unwrap();
        let mut window = Window::new(Some(&file), Path::new("out"), 3..7);
        window.write_all(b"abcd").unwrap();
        window.position().set(5);
        window.write_all(b"xyzw").unwrap();
        assert_eq!(window.position().get(), 9);
        let mut bytes = vec![0; 10];
        crate::sys::read_at(&file, &mut bytes, 0).unwrap();
        assert_eq!(bytes, b"\0\0\0d\0xy\0\0\0");
        // A copy wholly outside the window reads nothing and counts as done.
        assert_eq!(window.copy_from(&file, 0, 4).unwrap(), 4);
        assert_eq!(window.position().get(), 13);
    }

    #[test]
    fn a_window_alone_writes_its_first_byte_at_the_files_start() {
        let file = tempfile::tempfile().unwrap();
        file.set_len(4).unwrap();
        let mut window = Window::new(Some(&file), Path::new("out"), 3..7).alone();
        window.write_all(b"abcdefghij").unwrap();
        let mut bytes = vec![0; 4];
        crate::sys::read_at(&file, &mut bytes, 0).unwrap();
        assert_eq!(bytes, b"defg");
        assert_eq!(file.metadata().unwrap().len(), 4);
        let source = tempfile::tempfile().unwrap();
        crate::sys::write_all_at(&source, b"WXYZ", 0).unwrap();
        window.position().set(3);
        assert_eq!(window.copy_from(&source, 0, 4).unwrap(), 4);
        crate::sys::read_at(&file, &mut bytes, 0).unwrap();
        assert_eq!(bytes, b"WXYZ");
    }
}
