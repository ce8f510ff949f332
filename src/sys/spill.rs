//! The spill file: one temporary file that holds the data of inputs converted on the way in
//! (JSON text), each tensor at its own offset, so that the copy engine maps it like any input.

use std::fs::File;
use std::io;
use std::sync::Arc;

use crate::error::{InputRef, Result};
use crate::sys;

/// The temporary file that holds the data of inputs converted on the way in (JSON text),
/// each at its own offset; created on first use and deleted when the process ends.
#[derive(Default)]
pub struct Spill {
    file: Option<Arc<File>>,
    len: u64,
}

impl Spill {
    /// The spill file, created on the first call; `name` is the input that needs it, for the
    /// message should creating it fail.
    pub fn file(&mut self, name: &InputRef) -> Result<Arc<File>> {
        if self.file.is_none() {
            let file =
                tempfile::tempfile().map_err(|e| name.io_error("make a temporary copy of", e))?;
            self.file = Some(Arc::new(file));
        }
        Ok(Arc::clone(self.file.as_ref().expect("created above")))
    }

    /// A writer that appends one tensor's data at the end of the spill file.
    pub fn writer(&mut self, name: &InputRef) -> Result<SpillWriter<'_>> {
        let file = self.file(name)?;
        let start = self.len;
        Ok(SpillWriter {
            spill: self,
            file,
            start,
            written: 0,
            buffer: Vec::with_capacity(SPILL_BUFFER),
        })
    }
}

const SPILL_BUFFER: usize = 1 << 20;

/// Appends one tensor's bytes to the spill file through a buffer.
pub struct SpillWriter<'a> {
    spill: &'a mut Spill,
    file: Arc<File>,
    start: u64,
    written: u64,
    buffer: Vec<u8>,
}

impl SpillWriter<'_> {
    /// Appends `bytes`.
    #[inline]
    pub fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.buffer.extend_from_slice(bytes);
        if self.buffer.len() >= SPILL_BUFFER {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        let at = self.start + self.written;
        sys::write_all_at(&self.file, &self.buffer, at)?;
        self.written += self.buffer.len() as u64;
        self.buffer.clear();
        Ok(())
    }

    /// Bytes appended so far.
    pub fn len(&self) -> u64 {
        self.written + self.buffer.len() as u64
    }

    /// Whether nothing was appended yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Rewrites everything appended so far in place, `unit` bytes at a time (a change of
    /// element type that keeps the size, such as int64 to float64).
    pub fn rewrite(&mut self, unit: usize, mut change: impl FnMut(&mut [u8])) -> io::Result<()> {
        self.flush()?;
        let mut chunk = vec![0u8; SPILL_BUFFER / unit * unit];
        let mut done = 0u64;
        while done < self.written {
            let take = chunk.len().min((self.written - done) as usize);
            let piece = &mut chunk[..take];
            sys::read_exact_at(&self.file, piece, self.start + done)?;
            piece.chunks_exact_mut(unit).for_each(&mut change);
            sys::write_all_at(&self.file, piece, self.start + done)?;
            done += take as u64;
        }
        Ok(())
    }

    /// Drops everything appended so far, to append the tensor's data again.
    pub fn restart(&mut self) {
        self.buffer.clear();
        self.written = 0;
    }

    /// Writes out the buffer and returns where the tensor's data starts and how long it is.
    pub fn finish(mut self) -> io::Result<(u64, u64)> {
        self.flush()?;
        self.spill.len = self.start + self.written;
        Ok((self.start, self.written))
    }
}
