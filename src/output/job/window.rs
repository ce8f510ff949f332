//! A worker's window on one file of a job's output: a [`Sink`] that takes the file's bytes
//! in order, as any output does, and writes only those of the worker's share, in place in
//! the job's data file, or in order to a stream (the parts of an upload). The position is
//! shared ([`Position`]) so that the flow can move it past a tensor it does not read, or to
//! where a cut plan's bytes start (`src/plan/window.rs`).

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
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

/// A file's bytes, of which only `keep` are written (to `file`, at their place; or to
/// `stream`, in order).
pub struct Window<'f> {
    file: Option<&'f File>,
    stream: Option<&'f mut (dyn Write + Send)>,
    /// The bytes of `keep` given to the stream so far.
    streamed: u64,
    name: PathBuf,
    at: Position,
    keep: Range<u64>,
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
            stream: None,
            streamed: 0,
            name: name.to_path_buf(),
            at: Position::default(),
            keep,
            bar: None,
            digest: super::digest(b""),
        }
    }

    /// The window `keep` of the file `name`, its bytes written in order to `stream`: the
    /// sink's bytes arrive in order, and a byte of the window before one already written is
    /// an error, as is one after a gap.
    #[cfg_attr(not(feature = "remote"), allow(dead_code))]
    pub fn streamed(stream: &'f mut (dyn Write + Send), name: &Path, keep: Range<u64>) -> Self {
        Window {
            stream: Some(stream),
            ..Window::new(None, name, keep)
        }
    }

    /// How many of the window's bytes were written to its stream.
    #[cfg_attr(not(feature = "remote"), allow(dead_code))]
    pub fn stream_written(&self) -> u64 {
        self.streamed
    }

    /// The range of the file's bytes it writes.
    pub fn keep(&self) -> Range<u64> {
        self.keep.clone()
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
        if self.file.is_none() && self.stream.is_none() {
            self.digest = super::digest_more(self.digest, bytes);
        }
        let inside = self.inside(start, len);
        if let (Some(stream), false) = (self.stream.as_mut(), inside.is_empty()) {
            if inside.start != self.keep.start + self.streamed {
                return Err(io::Error::other(format!(
                    "bytes {}..{} of the share came after {} of them",
                    inside.start - self.keep.start,
                    inside.end - self.keep.start,
                    self.streamed
                )));
            }
            let from = (inside.start - start) as usize;
            let to = (inside.end - start) as usize;
            stream.write_all(&bytes[from..to])?;
            self.streamed += inside.end - inside.start;
            if let Some(bar) = &self.bar {
                bar.inc(inside.end - inside.start);
            }
        }
        if let (Some(file), false) = (self.file, inside.is_empty()) {
            let from = (inside.start - start) as usize;
            let to = (inside.end - start) as usize;
            crate::sys::write_all_at(file, &bytes[from..to], inside.start)?;
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
        (&*file).seek(SeekFrom::Start(start))?;
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
    fn a_streamed_window_writes_its_bytes_in_order_and_refuses_a_gap() {
        let mut stream = Vec::new();
        let mut window = Window::streamed(&mut stream, Path::new("out"), 3..9);
        window.write_all(b"abcde").unwrap();
        let file = tempfile::tempfile().unwrap();
        // A copy is left to write_all, which streams it.
        assert_eq!(window.copy_from(&file, 0, 2).unwrap(), 0);
        window.write_all(b"fg").unwrap();
        window.write_all(b"hijk").unwrap();
        assert_eq!(window.stream_written(), 6);
        assert_eq!(stream, b"defghi");
        let mut stream = Vec::new();
        let mut window = Window::streamed(&mut stream, Path::new("out"), 3..9);
        window.position().set(5);
        let gap = window.write_all(b"xy").unwrap_err().to_string();
        assert!(
            gap.contains("bytes 2..4 of the share came after 0"),
            "{gap}"
        );
    }
}
