//! What the copy engine and the format writers write an output through: a [`Sink`] is a
//! stream of bytes with a name for messages, and perhaps a file the kernel can copy into.
//! The format stage owns it because its writers frame the data through it; the output stage
//! (files, sets, grown files) and the engine implement and use it from above.

use std::fs::File;
use std::io;
use std::path::Path;

/// What the copy engine and the format writers write the output through. `Send`: the split
/// writes each half of a tensor's parts on a thread of its own (`engine::splitter`).
pub trait Sink: Send {
    /// Appends `bytes` to the output.
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()>;

    /// Appends `len` bytes of `file` from `offset` without passing them through this process,
    /// if the output allows it. Returns how many bytes it copied; the caller writes the rest.
    fn copy_from(&mut self, _file: &File, _offset: u64, _len: u64) -> io::Result<u64> {
        Ok(0)
    }

    /// The output's name, for messages.
    fn name(&self) -> &Path;
}

/// Forwards everything to another sink.
pub struct PassThrough<'a>(pub &'a mut dyn Sink);

impl Sink for PassThrough<'_> {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.0.write_all(bytes)
    }

    fn copy_from(&mut self, file: &File, offset: u64, len: u64) -> io::Result<u64> {
        self.0.copy_from(file, offset, len)
    }

    fn name(&self) -> &Path {
        self.0.name()
    }
}
