//! The packer: copies runs into the output, packing small, tiny, cast, byte-swapped and
//! gathered runs into a reused buffer and handing large runs to the kernel or a map.

use std::fs::File;
use std::sync::Arc;

use super::cursors::Cursors;
use super::direct::{shrunk_or, write_from_map, write_in_pieces};
use super::gather::{Tiles, Walk, offset_of};
use super::threads::{Block, Out, stopped, with_out};
use super::{
    BUFFER, DIRECT_RUN, HASH_APART, READ_INPUT, RELEASE_BUDGET, SMALL_INPUT, changes, map,
};
use crate::dtype::cast;
use crate::dtype::{DType, swap_in_place};
use crate::error::{Error, InputRef, Result};
use crate::format::Layout;
use crate::format::Sink;
use crate::format::npz::StoredCrc;
use crate::input::Tensor;
use crate::plan::{Gather, InputPlan, JoinPlan};
use crate::sys::{self, Region};

/// Runs `work` with a packer that writes to `out`: on this thread; or, when `threaded`, on a
/// second thread that packs while this one writes the blocks it hands over, in order
/// (`threads::with_out`). A failure on either side stops both, and the first failure is
/// returned: the writer's, which stops the packer, or the packer's.
pub(super) fn with_packer<W>(
    dtype: &DType,
    threaded: bool,
    out: &mut dyn Sink,
    work: W,
) -> Result<()>
where
    W: FnOnce(&mut Packer) -> Result<()> + Send,
{
    with_out(
        threaded,
        out,
        || empty_buffer(dtype),
        |out| {
            let mut packer = Packer::new(out, dtype);
            work(&mut packer)?;
            packer.flush()
        },
    )
}

/// The output and the buffer that packs small runs.
pub(super) struct Packer<'a> {
    pub(super) out: Out<'a>,
    /// The output's element type, and its size (at least 1).
    pub(super) dtype: DType,
    pub(super) itemsize: usize,
    pub(super) buffer: Vec<u8>,
    pub(super) capacity: usize,
    /// Input elements being cast, after their bytes are swapped.
    pub(super) scratch: Vec<u8>,
}

impl<'a> Packer<'a> {
    pub(super) fn new(out: Out<'a>, dtype: &DType) -> Packer<'a> {
        let capacity = capacity(dtype);
        Packer {
            out,
            dtype: dtype.clone(),
            itemsize: itemsize(dtype),
            buffer: empty_buffer(dtype),
            capacity,
            scratch: Vec::new(),
        }
    }

    /// Copies all of one source in a plan of one round (all of its tensor's data, or its
    /// slice's one run): small ones by reads, large ones in the kernel when nothing needs
    /// changing and their offsets allow it, else by reads up to `READ_INPUT` and from a map
    /// beyond.
    pub(super) fn whole_input(&mut self, input: &Tensor, p: &InputPlan) -> Result<()> {
        let (skip, len) = p.one_round();
        if len == 0 {
            return Ok(());
        }
        // A slice of a stored .npz member goes through the cursors, which check the CRC-32
        // of all of the member's data, also the bytes the slice leaves out.
        if let Some(object) = input.file.remote_object()
            && p.gather().is_none()
            && (changes(p, &self.dtype) || (p.sliced() && input.stored_crc.is_some()))
        {
            // A cast or a byte swap of an object's data, or a slice of a stored archive
            // member (whose CRC-32 needs all of it): read by range, converted as read.
            let stream = super::ranged::Stream::new(
                object,
                &input.name,
                (p.data_offset, p.data_len),
                (super::ranged::PIECE, p.dtype.itemsize()),
            )
            .checked(input.crc_check());
            return stream.into_run((skip, len), &mut |bytes, at| {
                self.append(bytes, input, p, at)
            });
        }
        if changes(p, &self.dtype) || (p.sliced() && input.stored_crc.is_some()) {
            let region = map(input, p)?;
            let mut cursors = Cursors::new(std::slice::from_ref(&region), &[input]);
            self.run(input, p, &region, None, 0, 0, &mut cursors)?;
            return cursors.verify();
        }
        let offset = p.data_offset + skip;
        if let Some(object) = input.file.remote_object() {
            return self.read_remote(input, object, (offset, len));
        }
        let file = input.file.open(&input.name)?;
        let check = input.crc_check();
        if len <= SMALL_INPUT {
            return self.read_input(input, &file, p, (offset, len), check);
        }
        // Readahead advice only for inputs past a single read: given to every one, a
        // whole-file join of 20,000 tiny tensors per input made 40,000 calls for nothing
        // (231 ms against 245 without them).
        sys::advise_sequential(&file);
        if check.is_some() {
            // A kernel copy never shows the bytes a CRC-32 check must see: a stored .npz
            // member is written from its map, through the check.
            let region =
                Region::map(&file, offset, len).map_err(|e| input.name.io_error("map", e))?;
            let mut cursors = Cursors::new(std::slice::from_ref(&region), &[input]);
            for piece in region.bytes().chunks(RELEASE_BUDGET as usize) {
                self.write_mapped_through(input, p, piece, &mut cursors, 0)?;
            }
            return cursors.verify();
        }
        let copied = self.copy_in_kernel(&input.name, &file, offset, len)?;
        if copied == 0 && len <= READ_INPUT {
            return self.read_input(input, &file, p, (offset, len), None);
        }
        match &mut self.out {
            Out::Here(out) => {
                write_from_map(*out, &input.name, &file, offset + copied, len - copied)
            }
            Out::Sent { .. } => Ok(()),
        }
    }

    /// Copies the `len` bytes of a remote input's object from `offset` (all of its data, or
    /// the one run of a slice) through the buffer, read by range (`engine/ranged.rs`).
    fn read_remote(
        &mut self,
        input: &Tensor,
        object: &crate::input::RemoteFile,
        (offset, len): (u64, u64),
    ) -> Result<()> {
        // A stored archive member read whole (a `torch.save` chunk): its CRC-32 over the
        // pieces as they come, checked at the end.
        let mut check = input.crc_check();
        super::ranged::read_pieces(object, &input.name, (offset, len), &mut |mut piece| {
            if let Some((_, check)) = &mut check {
                check.hasher.update(piece);
            }
            while !piece.is_empty() {
                if self.buffer.len() == self.capacity {
                    self.flush()?;
                }
                let room = (self.capacity - self.buffer.len()).min(piece.len());
                self.buffer.extend_from_slice(&piece[..room]);
                piece = &piece[room..];
            }
            Ok(())
        })?;
        match check {
            Some((name, check)) => check.verify(&name),
            None => Ok(()),
        }
    }

    /// Copies the `len` bytes of a small input's file from `offset` (all of its data, or
    /// the one run of a slice) through the buffer with positional reads, as `cat` does,
    /// checking its CRC-32 if it is a stored .npz member read whole.
    pub(super) fn read_input(
        &mut self,
        input: &Tensor,
        file: &File,
        p: &InputPlan,
        (offset, len): (u64, u64),
        mut check: Option<(InputRef, StoredCrc)>,
    ) -> Result<()> {
        let total = len;
        let mut done = 0;
        while done < total {
            if self.buffer.len() == self.capacity {
                self.flush()?;
            }
            let start = self.buffer.len();
            let len = ((self.capacity - start) as u64).min(total - done) as usize;
            let at = offset + done;
            sys::read_appending(file, &mut self.buffer, len, at).map_err(|e| {
                let why = sys::shrank(file, p.data_offset + p.data_len).unwrap_or(e);
                input.name.io_error("read", why)
            })?;
            if let Some((_, check)) = &mut check {
                check.hasher.update(&self.buffer[start..]);
            }
            done += len as u64;
        }
        match check {
            Some((name, check)) => check.verify(&name),
            None => Ok(()),
        }
    }

    /// Copies `len` bytes of an input's file from `offset` as they are, after what is
    /// buffered, inside the kernel where the output allows it; returns how many it copied,
    /// the caller writing the rest. When another thread writes, it hands that thread the
    /// whole copy, which it completes.
    pub(super) fn copy_in_kernel(
        &mut self,
        name: &InputRef,
        file: &Arc<File>,
        offset: u64,
        len: u64,
    ) -> Result<u64> {
        self.flush()?;
        match &mut self.out {
            Out::Here(out) => out
                .copy_from(file, offset, len)
                .map_err(|e| Error::io("write the output", out.name(), e)),
            Out::Sent { blocks, .. } => {
                let block = Block::File {
                    name: name.clone(),
                    file: Arc::clone(file),
                    offset,
                    len,
                };
                blocks.send(block).map_err(|_| stopped())?;
                Ok(len)
            }
        }
    }

    /// Writes `piece`, the next bytes of input `index`'s map, as `write_mapped` does, and
    /// moves its cursor past them. An input with a CRC-32 to check (a stored .npz member, a
    /// checkpoint's storage) has a large piece hashed on a second thread while it is
    /// written: with a core free, the check then costs no time (benches/README.md,
    /// `pytorch_file`).
    fn write_mapped_through(
        &mut self,
        input: &Tensor,
        p: &InputPlan,
        piece: &[u8],
        cursors: &mut Cursors,
        index: usize,
    ) -> Result<()> {
        match cursors.hasher(index) {
            Some(hasher) if piece.len() >= HASH_APART => {
                std::thread::scope(|scope| {
                    let hashing = scope.spawn(|| hasher.update(piece));
                    let written = self.write_mapped(input, p, piece);
                    if let Err(panic) = hashing.join() {
                        std::panic::resume_unwind(panic);
                    }
                    written
                })?;
                cursors.advance_hashed(index, piece.len() as u64);
            }
            _ => {
                self.write_mapped(input, p, piece)?;
                cursors.advance(index, piece.len() as u64);
            }
        }
        Ok(())
    }

    /// Writes bytes of `input`'s map (planned as `p`) as they are, after what is buffered:
    /// from the map itself here, through the buffer when another thread writes.
    pub(super) fn write_mapped(
        &mut self,
        input: &Tensor,
        p: &InputPlan,
        mut bytes: &[u8],
    ) -> Result<()> {
        if let Out::Here(out) = &mut self.out {
            if !self.buffer.is_empty() {
                let written = out.write_all(&self.buffer);
                written.map_err(|e| Error::io("write the output", out.name(), e))?;
                self.buffer.clear();
            }
            return write_in_pieces(*out, bytes).map_err(|e| match input.file.open(&input.name) {
                Ok(file) => shrunk_or(e, &input.name, &file, p.data_offset + p.data_len),
                Err(_) => e,
            });
        }
        while !bytes.is_empty() {
            let take = (self.capacity - self.buffer.len()).min(bytes.len());
            self.buffer.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.buffer.len() == self.capacity {
                self.flush()?;
            }
        }
        Ok(())
    }

    /// Copies round `round`'s run of one input, whose `file` is kept open if its runs are
    /// to be copied inside the kernel.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn run(
        &mut self,
        input: &Tensor,
        p: &InputPlan,
        region: &Region,
        file: Option<&Arc<File>>,
        round: u64,
        index: usize,
        cursors: &mut Cursors,
    ) -> Result<()> {
        if p.run_bytes == 0 {
            return Ok(());
        }
        if let Some(gather) = p.gather() {
            cursors.scattered[index] = true;
            self.gathered_run(input, p, gather, region, round)?;
            cursors.advance(index, p.run_bytes);
            return Ok(());
        }
        let mut start = p.run_at(round) as usize;
        cursors.skip_to(index, start as u64);
        let mut run = &region.bytes()[start..start + p.run_bytes as usize];
        let direct = p.run_bytes >= DIRECT_RUN && p.swaps.is_none() && p.dtype == self.dtype;
        if let (true, Some(file)) = (direct, file) {
            let at = p.data_offset + start as u64;
            let copied = self.copy_in_kernel(&input.name, file, at, p.run_bytes)?;
            // What the kernel declined is written from the map below.
            cursors.advance(index, copied);
            run = &run[copied as usize..];
            start += copied as usize;
        }
        // A run can be a whole input: in pieces, so the pages behind are released as it goes.
        let in_size = p.dtype.itemsize().max(1) as usize;
        let piece_len = (RELEASE_BUDGET as usize / in_size).max(1) * in_size;
        for (k, piece) in run.chunks(piece_len).enumerate() {
            if direct {
                self.write_mapped_through(input, p, piece, cursors, index)?;
            } else {
                self.append(piece, input, p, (start + k * piece_len) as u64)?;
                cursors.advance(index, piece.len() as u64);
            }
        }
        Ok(())
    }

    /// Appends `bytes` (whole elements of the input, from byte `at` of its data), reversing
    /// its swaps in each element and casting it on the way.
    pub(super) fn append(
        &mut self,
        mut bytes: &[u8],
        input: &Tensor,
        p: &InputPlan,
        at: u64,
    ) -> Result<()> {
        if p.dtype != self.dtype {
            return self.append_cast(bytes, input, p, at);
        }
        while !bytes.is_empty() {
            let room = self.capacity - self.buffer.len();
            let take = room.min(bytes.len()) / self.itemsize * self.itemsize;
            if take == 0 {
                self.flush()?;
                continue;
            }
            let start = self.buffer.len();
            self.buffer.extend_from_slice(&bytes[..take]);
            swap_in_place(&mut self.buffer[start..], self.itemsize, &p.swaps);
            bytes = &bytes[take..];
            if self.buffer.len() == self.capacity {
                self.flush()?;
            }
        }
        Ok(())
    }

    /// Appends whole input elements converted to the output's type, refusing the first that
    /// does not fit it with its position.
    pub(super) fn append_cast(
        &mut self,
        mut bytes: &[u8],
        input: &Tensor,
        p: &InputPlan,
        at: u64,
    ) -> Result<()> {
        let in_size = p.dtype.itemsize() as usize;
        let mut element = at / in_size as u64;
        while !bytes.is_empty() {
            let room = (self.capacity - self.buffer.len()) / self.itemsize;
            if room == 0 {
                self.flush()?;
                continue;
            }
            let take = room.min(bytes.len() / in_size);
            let source = if p.swaps.is_none() {
                &bytes[..take * in_size]
            } else {
                // Swapped into a copy: the input is a read-only map.
                self.scratch.clear();
                self.scratch.extend_from_slice(&bytes[..take * in_size]);
                swap_in_place(&mut self.scratch, in_size, &p.swaps);
                &self.scratch
            };
            cast::convert(&p.dtype, &self.dtype, source, &mut self.buffer)
                .map_err(|e| cast_refused(input, element + e.index as u64, &self.dtype, e))?;
            bytes = &bytes[take * in_size..];
            element += take as u64;
        }
        Ok(())
    }

    /// Copies one run of an input whose layout differs from the output's: its elements in
    /// the output's order (`gather::Walk`), a buffer's worth at a time, byte-swapped and cast
    /// as they land.
    pub(super) fn gathered_run(
        &mut self,
        input: &Tensor,
        p: &InputPlan,
        gather: &Gather,
        region: &Region,
        round: u64,
    ) -> Result<()> {
        let bytes = region.bytes();
        let base = gather.start + offset_of(round, &gather.outer_dims, &gather.outer_strides);
        let (dims, strides) = (&gather.run_dims, &gather.run_strides);
        let count: u64 = dims.iter().product();
        let cast = p.dtype != self.dtype;
        let in_size = p.dtype.itemsize() as usize;
        // Gathering through the map jumps across the whole input: within a long run, release
        // all of it whenever a budget's worth has been read, so that the map does not come to
        // hold the whole input. It still holds what each fault maps around every column it
        // touches (64-128 KiB a column: benches/README.md, "Gathers"), whatever the interval;
        // runs read in tiles leave the map untouched.
        let release_every = (RELEASE_BUDGET / in_size.max(1) as u64).max(1);
        let mut until_release = release_every;
        // A long run the input stores in tiles is read by positional reads of them, so that
        // what stays resident is bounded (`gather::Tiles`); others are walked through the map.
        let mut tiles = Tiles::new(dims, strides, base, in_size);
        let file = match tiles {
            Some(_) => Some(input.file.open(&input.name)?),
            None => None,
        };
        let mut read_at = |buf: &mut [u8], at: u64| match &file {
            Some(file) => sys::read_exact_at(file, buf, p.data_offset + at),
            None => Ok(()),
        };
        let mut walk = Walk::new(dims, strides, base);
        let mut gather = |take: u64, out: &mut Vec<u8>| match &mut tiles {
            Some(tiles) => tiles.gather(take, out, &mut read_at).map_err(|e| {
                let why = file
                    .as_ref()
                    .and_then(|f| sys::shrank(f, p.data_offset + p.data_len))
                    .unwrap_or(e);
                input.name.io_error("read", why)
            }),
            None => {
                walk.gather(bytes, in_size, take, out);
                Ok(())
            }
        };
        let mut done = 0;
        while done < count {
            let room = ((self.capacity - self.buffer.len()) / self.itemsize) as u64;
            if room == 0 {
                self.flush()?;
                continue;
            }
            let take = room.min(count - done).min(until_release);
            if cast {
                self.scratch.clear();
                gather(take, &mut self.scratch)?;
                swap_in_place(&mut self.scratch, in_size, &p.swaps);
                cast::convert(&p.dtype, &self.dtype, &self.scratch, &mut self.buffer).map_err(
                    |e| {
                        let at = base + offset_of(done + e.index as u64, dims, strides);
                        cast_refused(input, at / in_size as u64, &self.dtype, e)
                    },
                )?;
            } else {
                let start = self.buffer.len();
                gather(take, &mut self.buffer)?;
                swap_in_place(&mut self.buffer[start..], in_size, &p.swaps);
            }
            done += take;
            until_release -= take;
            if until_release == 0 {
                region.release(0, bytes.len());
                until_release = release_every;
            }
        }
        Ok(())
    }

    /// Copies every round of a plan whose runs are all tiny and unchanged: a buffer's worth
    /// of rounds at a time, each input's runs of that chunk in one specialised strided loop
    /// (which reads a slice's runs `pitch` bytes apart).
    pub(super) fn packed_rounds(
        &mut self,
        plan: &JoinPlan,
        regions: &[Region],
        cursors: &mut Cursors,
    ) -> Result<()> {
        let runs: Vec<usize> = plan.inputs.iter().map(|p| p.run_bytes as usize).collect();
        let round_bytes: usize = runs.iter().sum();
        let chunk = (self.capacity / round_bytes) as u64;
        let pair = runs.len() == 2 && runs.iter().all(|&run| (1..=PAIR_MAX_RUN).contains(&run));
        self.flush()?;
        // Every byte of a chunk is overwritten by the runs, so each buffer is zeroed once, the
        // first time it is used, and never again: zeroing it per chunk was half of this
        // path's instructions.
        let mut packed = std::mem::take(&mut self.buffer);
        let mut first = 0u64;
        while first < plan.outer {
            if packed.len() < chunk as usize * round_bytes {
                packed.resize(chunk as usize * round_bytes, 0);
            }
            let rounds = chunk.min(plan.outer - first) as usize;
            if pair {
                let side = |index: usize| {
                    let p = &plan.inputs[index];
                    let (pitch, run) = (p.pitch() as usize, runs[index]);
                    Side {
                        rows: sys::Rows {
                            bytes: &regions[index].bytes()[p.run_at(first) as usize..],
                            pitch,
                        },
                        span: (rounds - 1) * pitch + run,
                        run,
                    }
                };
                let (a, b) = (side(0), side(1));
                pack_pair(&mut packed[..rounds * round_bytes], rounds, a, b);
                for (index, side) in [a, b].into_iter().enumerate() {
                    cursors.skip_to(index, plan.inputs[index].run_at(first));
                    cursors.advance(index, side.span as u64);
                }
                self.out.emit(&mut packed, rounds * round_bytes)?;
                first += rounds as u64;
                continue;
            }
            let mut offset = 0;
            let each = runs.iter().zip(regions).zip(&plan.inputs);
            for (index, ((&run, region), p)) in each.enumerate() {
                let start = p.run_at(first) as usize;
                let pitch = p.pitch() as usize;
                // From the first run's start to the last one's end: for a slice, the gaps
                // between its runs too.
                let span = if run == 0 {
                    0
                } else {
                    (rounds - 1) * pitch + run
                };
                let src = &region.bytes()[start..start + span];
                strided_copy(&mut packed[offset..], round_bytes, src, pitch, run);
                offset += run;
                cursors.skip_to(index, start as u64);
                cursors.advance(index, span as u64);
            }
            self.out.emit(&mut packed, rounds * round_bytes)?;
            first += rounds as u64;
        }
        packed.clear();
        self.buffer = packed;
        Ok(())
    }

    pub(super) fn flush(&mut self) -> Result<()> {
        if !self.buffer.is_empty() {
            let len = self.buffer.len();
            self.out.emit(&mut self.buffer, len)?;
            self.buffer.clear();
        }
        Ok(())
    }
}

/// The size of a packer's buffers: about `BUFFER`, and at least one element, so that whole
/// elements fit and swaps never straddle a flush.
pub(super) fn capacity(dtype: &DType) -> usize {
    BUFFER.max(itemsize(dtype))
}

/// The size of an element of `dtype` in bytes: at least 1, and as large as memory can be
/// where the type declares more.
pub(super) fn itemsize(dtype: &DType) -> usize {
    usize::try_from(dtype.itemsize())
        .unwrap_or(usize::MAX)
        .max(1)
}

/// An empty buffer for a packer. One larger than usual is left to grow as elements arrive:
/// an element type of gigabytes (a hostile `<U4611686018427387903` of shape (0, 3)) costs
/// nothing until data backs it.
pub(super) fn empty_buffer(dtype: &DType) -> Vec<u8> {
    Vec::with_capacity(if capacity(dtype) == BUFFER { BUFFER } else { 0 })
}

/// The refusal of a cast of element `index` (in the order the input's file stores them).
pub(super) fn cast_refused(input: &Tensor, index: u64, to: &DType, e: cast::CastError) -> Error {
    let position = element_position(index, &input.info.shape, input.info.layout);
    Error::Unsupported {
        input: input.name.clone(),
        reason: format!(
            "--cast {to} stops at its element {position}: {} is {}; nothing was converted \
             silently (choose a wider type, or fix the data)",
            e.value, e.reason
        ),
    }
}

/// `[1, 2] (number 5 in file order)`: an element's index along each dimension.
pub(super) fn element_position(index: u64, shape: &[u64], layout: Layout) -> String {
    let mut rest = index;
    let mut dims = vec![0; shape.len()];
    let order: Vec<usize> = match layout {
        Layout::C => (0..shape.len()).rev().collect(),
        Layout::Fortran => (0..shape.len()).collect(),
    };
    for axis in order {
        let size = shape[axis].max(1);
        dims[axis] = rest % size;
        rest /= size;
    }
    format!(
        "{} (number {index} in the order the file stores them)",
        crate::messages::shape_text(&dims)
    )
}

/// Copies runs of `run` bytes from `src`, where they start every `pitch` bytes (`run` for
/// runs back to back, more for a slice's), into `dst` with one run every `stride` bytes.
/// Common run sizes get a loop whose copy size is a constant, which compiles to a few moves
/// instead of a call to memcpy per run.
pub(super) fn strided_copy(dst: &mut [u8], stride: usize, src: &[u8], pitch: usize, run: usize) {
    macro_rules! specialised {
        ($($n:literal)*) => {
            match run {
                $($n => strided_copy_n::<$n>(dst, stride, src, pitch),)*
                0 => {}
                _ if pitch == run => {
                    for (k, piece) in src.chunks_exact(run).enumerate() {
                        dst[k * stride..k * stride + run].copy_from_slice(piece);
                    }
                }
                _ => {
                    for (k, piece) in src.chunks(pitch).enumerate() {
                        dst[k * stride..k * stride + run].copy_from_slice(&piece[..run]);
                    }
                }
            }
        };
    }
    specialised!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 18 20 24 28 32 36 40 48 56 64 80 96 128);
}

/// The longest run [`pack_pair`] takes: three 16-byte words.
const PAIR_MAX_RUN: usize = 48;

/// One input's side of [`pack_pair`].
#[derive(Clone, Copy)]
pub(super) struct Side<'s> {
    /// Its bytes from its first run on, as far as they go (past the runs copied too, which
    /// the widened words may read), and the bytes between the starts of its runs.
    pub rows: sys::Rows<'s>,
    /// How many of those bytes the runs span, from the first run's start to the last one's
    /// end.
    pub span: usize,
    /// A run's length.
    pub run: usize,
}

/// Packs `rounds` rounds of the runs of two inputs, `a`'s then `b`'s, into `dst` (one round
/// every `a.run + b.run` bytes), each run copied in whole 16-byte words. The bytes a word
/// carries past its run land where the next run (the other input's, or the next round's) is
/// written right after, so a 12-byte run and a 20-byte run take three loads and stores
/// instead of four, in one loop instead of two passes over the buffer. The last rounds,
/// where a word would read past an input's bytes or write past `dst`, are copied exactly.
pub(super) fn pack_pair(dst: &mut [u8], rounds: usize, a: Side, b: Side) {
    match (a.run.div_ceil(16), b.run.div_ceil(16)) {
        (1, 1) => pair::<16, 16>(dst, rounds, a, b),
        (1, 2) => pair::<16, 32>(dst, rounds, a, b),
        (1, 3) => pair::<16, 48>(dst, rounds, a, b),
        (2, 1) => pair::<32, 16>(dst, rounds, a, b),
        (2, 2) => pair::<32, 32>(dst, rounds, a, b),
        (2, 3) => pair::<32, 48>(dst, rounds, a, b),
        (3, 1) => pair::<48, 16>(dst, rounds, a, b),
        (3, 2) => pair::<48, 32>(dst, rounds, a, b),
        _ => pair::<48, 48>(dst, rounds, a, b),
    }
}

/// [`pack_pair`] with `a`'s runs copied in words of `WA` bytes and `b`'s in words of `WB`:
/// the widened rounds first, then the rest exactly. Every byte a word writes past its run is
/// written again later (the other run of its round, a later round, or the exact rest), so the
/// rounds end as two exact strided copies leave them (the test
/// `pairs_of_runs_pack_exactly_whatever_their_widened_words_carry` checks every width).
fn pair<const WA: usize, const WB: usize>(dst: &mut [u8], rounds: usize, a: Side, b: Side) {
    assert!(a.run <= WA && b.run <= WB);
    let stride = a.run + b.run;
    // The rounds from the first whose words all fall inside the inputs' bytes and `dst`.
    let fit = |len: usize, width: usize, step: usize| {
        len.checked_sub(width).map_or(0, |rest| rest / step + 1)
    };
    let wide = rounds
        .min(fit(a.rows.bytes.len(), WA, a.rows.pitch))
        .min(fit(b.rows.bytes.len(), WB, b.rows.pitch))
        .min(fit(dst.len(), a.run + WB, stride));
    sys::copy_row_pairs::<WA, WB>(dst, stride, a.run, (a.rows, b.rows), wide);
    if wide < rounds {
        let rest = &mut dst[wide * stride..];
        let (a_pitch, b_pitch) = (a.rows.pitch, b.rows.pitch);
        let a_exact = &a.rows.bytes[wide * a_pitch..a.span];
        let b_exact = &b.rows.bytes[wide * b_pitch..b.span];
        strided_copy(rest, stride, a_exact, a_pitch, a.run);
        strided_copy(&mut rest[a.run..], stride, b_exact, b_pitch, b.run);
    }
}

pub(super) fn strided_copy_n<const N: usize>(
    dst: &mut [u8],
    stride: usize,
    src: &[u8],
    pitch: usize,
) {
    // `src` holds the runs of `rounds` rounds, the last one alone at the end.
    let Some(rounds) = src.len().checked_sub(N).map(|rest| rest / pitch.max(1) + 1) else {
        return;
    };
    assert!(
        stride >= N && pitch >= N,
        "runs of {N} bytes every {pitch} into {stride}"
    );
    // Every round but the last as whole strides and pitches: the lengths are then known to
    // hold a run, and the loop is a load and a store per run, counted by the source alone
    // (exactly `rounds - 1` pitches; `dst` holds at least as many strides).
    let last = rounds - 1;
    let pieces = dst
        .chunks_exact_mut(stride)
        .zip(src[..last * pitch].chunks_exact(pitch));
    for (to, from) in pieces {
        let from: &[u8; N] = from[..N].try_into().expect("a pitch holds a run");
        to[..N].copy_from_slice(from);
    }
    dst[last * stride..last * stride + N].copy_from_slice(&src[last * pitch..last * pitch + N]);
}
