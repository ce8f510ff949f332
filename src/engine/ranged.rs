//! Copying a remote input's data by range (`DataFile::Remote`), every read pinned to the
//! version the input's header was read from, never a map (which would download the object):
//! - all of it, or one run of a slice, as it is ([`read_pieces`]): pieces of at most
//!   [`PIECE`] bytes, the next one read on a thread of its own while this one is written, so
//!   that a copy holds at most two pieces at once whatever the input's size;
//! - the runs of a plan of several rounds (a last-axis join, a grid's blocks), or one run
//!   cast or byte-swapped ([`Stream`]): front to back through a window of the input's own,
//!   the windows of a plan's objects sharing [`WINDOWS`] bytes.
//!
//! A stored ZIP member's CRC-32 is computed over its bytes as they are read, and checked
//! before the engine returns.

use std::sync::mpsc;

use super::cursors::Cursors;
use crate::error::{InputRef, Result};
use crate::format::npz::StoredCrc;
use crate::input::{RemoteFile, Tensor};
use crate::plan::InputPlan;

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

/// The bytes the windows of a plan's inputs in object storage hold together, at most.
const WINDOWS: u64 = 8 << 20;
/// The fewest bytes one input's window holds, however many inputs there are.
const WINDOW_MIN: u64 = 256 << 10;

/// The object an input of a plan of several rounds is read from by range, if it is one in
/// object storage laid out in C order (a gathered one is mapped, from a download).
fn streamed<'r>(input: &'r Tensor, p: &InputPlan) -> Option<&'r RemoteFile> {
    let object = input.file.remote_object()?;
    p.gather().is_none().then_some(object)
}

/// The streams of the inputs of a plan of several rounds (`plans`, one per input) that are
/// read by range: `None` for an input that is mapped. Their windows share [`WINDOWS`] bytes,
/// each between [`WINDOW_MIN`] and [`PIECE`].
pub(super) fn streams<'r>(
    inputs: &[&'r Tensor],
    plans: &'r [InputPlan],
) -> Vec<Option<Stream<'r>>> {
    let each = || inputs.iter().zip(plans);
    let remote = each()
        .filter(|(input, p)| streamed(input, p).is_some())
        .count() as u64;
    let window = (WINDOWS / remote.max(1)).clamp(WINDOW_MIN, PIECE);
    each()
        .map(|(input, p)| {
            let object = streamed(input, p)?;
            let data = (p.data_offset, p.data_len);
            let stream = Stream::new(object, &input.name, data, (window, p.dtype.itemsize()));
            Some(stream.checked(input.crc_check()))
        })
        .collect()
}

/// Leaves the CRC-32 checks of the inputs read by range (`streams`) to their streams: the
/// cursors see none of their bytes.
pub(super) fn check_apart(cursors: &mut Cursors, streams: &[Option<Stream>]) {
    for (check, stream) in cursors.checks.iter_mut().zip(streams) {
        if stream.is_some() {
            *check = None;
        }
    }
}

/// A remote input read front to back in the runs of a plan of several rounds (a block of a
/// grid cut past its first axis: a tensor-parallel shard), or in the one run of a cast,
/// through a window of at most `piece` bytes read by range, pinned like every read: a run
/// passing the window's end reads the next window from there, so memory holds one window an
/// input whatever the input's size, and no byte is read twice. A stored member of a ZIP
/// archive (a `torch.save` chunk of a DCP checkpoint) has its CRC-32 computed over every
/// byte of its data in order (the bytes a slice's runs skip are read for it too), and
/// checked at the end ([`Stream::finish`]).
pub(super) struct Stream<'a> {
    object: &'a RemoteFile,
    name: &'a InputRef,
    /// Where the input's data starts in the object, and how long it is.
    data: (u64, u64),
    /// Where the window starts in the data.
    at: u64,
    window: Vec<u8>,
    /// The most bytes a window holds: whole elements.
    piece: u64,
    /// The CRC-32 check of a stored archive member, and how many bytes of the data from its
    /// start went through it.
    check: Option<(InputRef, StoredCrc, u64)>,
}

impl<'a> Stream<'a> {
    /// The input's data, `data.1` bytes from byte `data.0` of `object` (which messages call
    /// `name`), in windows of `piece` bytes, of elements of `itemsize` bytes.
    pub(super) fn new(
        object: &'a RemoteFile,
        name: &'a InputRef,
        data: (u64, u64),
        (piece, itemsize): (u64, u64),
    ) -> Stream<'a> {
        let itemsize = itemsize.max(1);
        Stream {
            object,
            name,
            data,
            at: 0,
            window: Vec::new(),
            piece: (piece / itemsize).max(1) * itemsize,
            check: None,
        }
    }

    /// The stream, checking its data's CRC-32 as `check` says, if it has one.
    pub(super) fn checked(mut self, check: Option<(InputRef, StoredCrc)>) -> Stream<'a> {
        self.check = check.map(|(name, crc)| (name, crc, 0));
        self
    }

    /// [`Stream::run`] of its one run, then [`Stream::finish`].
    pub(super) fn into_run(
        mut self,
        run: (u64, u64),
        each: &mut dyn FnMut(&[u8], u64) -> Result<()>,
    ) -> Result<()> {
        self.run(run, each)?;
        self.finish()
    }

    /// Hands `each` the `len` bytes from byte `at` of the data, in order, in pieces of whole
    /// elements (with where each starts in the data); `at` is whole elements from the
    /// data's start, at or past the previous run's end.
    pub(super) fn run(
        &mut self,
        (mut at, mut len): (u64, u64),
        each: &mut dyn FnMut(&[u8], u64) -> Result<()>,
    ) -> Result<()> {
        let end = at.checked_add(len).filter(|&end| end <= self.data.1);
        if end.is_none() {
            let why = std::io::Error::other("a run past the end of its data");
            return Err(self.name.io_error("read", why));
        }
        while len > 0 {
            let window_end = self.at + self.window.len() as u64;
            if at < self.at || at >= window_end {
                self.read_window(at)?;
            }
            let from = (at - self.at) as usize;
            let take = (self.window.len() - from).min(len as usize);
            each(&self.window[from..from + take], at)?;
            at += take as u64;
            len -= take as u64;
        }
        Ok(())
    }

    /// Reads the window from byte `at` of the data: after the bytes before it that its
    /// check has not seen yet (those a slice's runs skip), read for it.
    fn read_window(&mut self, at: u64) -> Result<()> {
        while let Some((_, _, hashed)) = &self.check
            && *hashed < at
        {
            let from = *hashed;
            self.read_into(from, (at - from).min(self.piece))?;
        }
        self.read_into(at, self.piece.min(self.data.1 - at))
    }

    /// Reads `len` bytes from byte `at` of the data into the window, through the check when
    /// they are the next it has to see.
    fn read_into(&mut self, at: u64, len: u64) -> Result<()> {
        self.window.resize(len as usize, 0);
        self.object
            .read_at(self.data.0 + at, &mut self.window)
            .map_err(|e| self.name.io_error("read", e))?;
        self.at = at;
        if let Some((_, crc, hashed)) = &mut self.check
            && *hashed == at
        {
            crc.hasher.update(&self.window);
            *hashed += len;
        }
        Ok(())
    }

    /// Fails if its data fails its CRC-32 check, once the bytes after its last run have
    /// been read for it too.
    pub(super) fn finish(&mut self) -> Result<()> {
        while let Some((_, _, hashed)) = &self.check
            && *hashed < self.data.1
        {
            let from = *hashed;
            self.read_into(from, (self.data.1 - from).min(self.piece))?;
        }
        match self.check.take() {
            Some((name, crc, _)) => crc.verify(&name),
            None => Ok(()),
        }
    }
}
