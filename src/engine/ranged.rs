//! Copying a remote input's data by range (`DataFile::Remote`): pieces of at most
//! [`PIECE`] bytes, each read pinned to the version the input's header was read from, the
//! next one read on a thread of its own while this one is written, so that a copy holds at
//! most two pieces at once (the one written, the one being read) whatever the input's size.

use std::sync::mpsc;

use crate::error::{InputRef, Result};
use crate::input::RemoteFile;

/// The most bytes one ranged read asks for.
pub(super) const PIECE: u64 = 8 << 20;

/// Reads bytes `offset..offset + len` of `object` (which messages call `name`) in pieces of
/// at most [`PIECE`] bytes, in order, handing each to `each`. A failed read (an object
/// replaced since its header was read, a short body) stops the copy with its error.
pub(super) fn read_pieces(
    object: &RemoteFile,
    name: &InputRef,
    (offset, len): (u64, u64),
    each: &mut dyn FnMut(&[u8]) -> Result<()>,
) -> Result<()> {
    let pieces = len.div_ceil(PIECE);
    std::thread::scope(|scope| {
        // A rendezvous: the piece read waits for the one written to be done.
        let (send, pieces_read) = mpsc::sync_channel::<std::io::Result<Vec<u8>>>(0);
        scope.spawn(move || {
            for piece in 0..pieces {
                let at = piece * PIECE;
                let mut buf = vec![0; PIECE.min(len - at) as usize];
                let read = object.read_at(offset + at, &mut buf).map(|()| buf);
                let failed = read.is_err();
                // The copy stopped (at a failure of its own): read no more.
                if send.send(read).is_err() || failed {
                    return;
                }
            }
        });
        for _ in 0..pieces {
            let piece = match pieces_read.recv() {
                Ok(read) => read.map_err(|e| name.io_error("read", e))?,
                Err(_) => {
                    let why = std::io::Error::other("its reading thread stopped");
                    return Err(name.io_error("read", why));
                }
            };
            each(&piece)?;
        }
        Ok(())
    })
}
