//! The two-thread hand-off: a producer (the packer) on a second thread hands filled buffers
//! and file ranges to this one, which writes them in order. Knows nothing of the packer.

use std::fs::File;
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};

use super::BUFFERS;
use super::direct::write_from_map;
use crate::error::{Error, InputRef, Result};
use crate::format::Sink;

/// Runs `work` with an `Out` that writes to `out`: on this thread; or, when `threaded`, on a
/// second thread that produces blocks while this one writes them, in order, so that the
/// output is still written front to back through `out` (a pipe as well as a file). `spare`
/// makes the buffers handed to the second thread to fill. A failure on either side stops
/// both, and the first failure is returned: the writer's, which stops the other thread, or
/// the other thread's.
pub(super) fn with_out<W>(
    threaded: bool,
    out: &mut dyn Sink,
    spare: impl Fn() -> Vec<u8>,
    work: W,
) -> Result<()>
where
    W: FnOnce(Out<'_>) -> Result<()> + Send,
{
    if !threaded {
        return work(Out::Here(out));
    }
    let (blocks, received) = mpsc::sync_channel(BUFFERS - 1);
    let (spares, spare_rx) = mpsc::channel();
    for _ in 1..BUFFERS {
        let _ = spares.send(spare());
    }
    std::thread::scope(|scope| {
        let producer = scope.spawn(move || {
            work(Out::Sent {
                blocks,
                spare: spare_rx,
            })
        });
        // Returning drops the channels' ends, which wakes a producer waiting on them.
        let written = write_blocks(received, spares, out);
        let produced = producer
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        written.and(produced)
    })
}

/// The writing side of the hand-off: writes each block as it comes and gives the
/// buffers back, until the packer is done or a write fails.
pub(super) fn write_blocks(
    blocks: Receiver<Block>,
    spares: Sender<Vec<u8>>,
    out: &mut dyn Sink,
) -> Result<()> {
    for block in blocks {
        match block {
            Block::Packed(buffer, len) => {
                let written = out.write_all(&buffer[..len]);
                written.map_err(|e| Error::io("write the output", out.name(), e))?;
                let _ = spares.send(buffer);
            }
            Block::File {
                name,
                file,
                offset,
                len,
            } => {
                // Inside the kernel where the output allows it, else from a map.
                let copied = out.copy_from(&file, offset, len);
                let copied = copied.map_err(|e| Error::io("write the output", out.name(), e))?;
                write_from_map(out, &name, &file, offset + copied, len - copied)?;
            }
        }
    }
    Ok(())
}

/// What a producing thread hands the writing thread.
pub(super) enum Block {
    /// The first bytes of a buffer, which comes back to be filled again.
    Packed(Vec<u8>, usize),
    /// `len` bytes of an input's file from `offset`, as they are.
    File {
        name: InputRef,
        file: Arc<File>,
        offset: u64,
        len: u64,
    },
}

/// Where a producer's (the packer's) output goes.
pub(super) enum Out<'a> {
    /// Written on the packer's own thread.
    Here(&'a mut dyn Sink),
    /// Handed to the writing thread, which gives each buffer back once written.
    Sent {
        blocks: SyncSender<Block>,
        spare: Receiver<Vec<u8>>,
    },
}

impl Out<'_> {
    /// Hands over the first `len` bytes of `buffer`, which then holds a buffer to fill again:
    /// the same one, or, when another thread writes, one it gave back. Its length and bytes
    /// are left as they were.
    #[inline]
    pub(super) fn emit(&mut self, buffer: &mut Vec<u8>, len: usize) -> Result<()> {
        match self {
            Out::Here(out) => {
                let written = out.write_all(&buffer[..len]);
                written.map_err(|e| Error::io("write the output", out.name(), e))
            }
            Out::Sent { blocks, spare } => {
                let full = std::mem::take(buffer);
                blocks
                    .send(Block::Packed(full, len))
                    .map_err(|_| stopped())?;
                *buffer = spare.recv().map_err(|_| stopped())?;
                Ok(())
            }
        }
    }
}

/// What a producing thread returns when the writing thread has stopped: never reported, as
/// the writer's own failure is.
pub(super) fn stopped() -> Error {
    let why = std::io::Error::other("the writing thread stopped");
    Error::io("write the output", std::path::Path::new("-"), why)
}
