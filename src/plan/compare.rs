//! Tensor comparison for planning: whether the copies of a tensor in several inputs are the
//! same (`--keep` checks it before keeping one; a whole-file join refuses replicated tensors
//! that no rule decides). It reads data, as little as it can, but moves none: the engine
//! (`src/engine/mod.rs`) is the only place data moves to the output.
//!
//! Copies are compared by value: two copies that differ only in byte order (one .npz member
//! little-endian, one big-endian) are the same tensor.

use crate::dtype::{ByteOrder, swap_in_place};
use crate::error::{Error, Refusal, Result, capped};
use crate::input::{Input, Tensor};

/// How tensor `b` differs from `a`, if it does: type, shape, or the first differing element
/// (compared by value, whatever the copies' byte orders).
/// Reads both tensors' data front to back in blocks and stops at the first block that
/// differs: the pieces of a split tensor differ in their first bytes and cost one small
/// read each, and only tensors that are identical are read whole (`--keep`, and the
/// replicated tensors a whole-file join refuses). `b`, which is only read here (`a` is
/// copied, and checked then), has its stored .npz member's CRC-32 checked when read whole.
pub fn differs(a: &Tensor, b: &Tensor) -> Result<Option<String>> {
    let (x, y) = (&a.info, &b.info);
    if x.dtype != y.dtype {
        // The byte orders are named only where they differ.
        let (ox, oy) = match x.byte_order == y.byte_order {
            true => (String::new(), String::new()),
            false => (order_text(x.byte_order), order_text(y.byte_order)),
        };
        return Ok(Some(format!("{}{oy} instead of {}{ox}", y.dtype, x.dtype)));
    }
    if x.shape != y.shape || x.layout != y.layout {
        return Ok(Some(format!(
            "shape {} instead of {}",
            y.shape_text(),
            x.shape_text()
        )));
    }
    let (fa, fb) = (a.file.reader(&a.name)?, b.file.reader(&b.name)?);
    // The first block is small, so that tensors differing early cost little, and read
    // without the kernel's readahead, leaving the page cache as it was for the copy, which
    // reads these files next (`sys::read_leaving_cache`), for tensors of `CLEAN_FROM`
    // bytes or more; blocks then double up to 4 MiB.
    const FIRST: u64 = 4 << 10;
    const LARGEST: u64 = 4 << 20;
    // Below this size a tensor's first block shares its pages with its neighbours, which
    // the copy reads next: dropping them would cost a second read (20,000 tensors of 256
    // bytes, cold: 270 ms against 245), and checking the cache 0.6 µs a probe.
    const CLEAN_FROM: u64 = 1 << 20;
    let (mut ba, mut bb) = (Vec::new(), Vec::new());
    let (mut done, mut block) = (0, FIRST);
    let mut check = b.crc_check();
    // Copies in different byte orders are compared as little-endian values, in blocks of
    // whole elements.
    let swapping = x.swaps != y.swaps;
    let item = x.dtype.itemsize().max(1);
    while done < x.data_len {
        let mut n = block.min(x.data_len - done);
        if swapping {
            n = (n - n % item).max(item).min(x.data_len - done);
        }
        let n = n as usize;
        ba.resize(n, 0);
        bb.resize(n, 0);
        let leave = done == 0 && x.data_len >= CLEAN_FROM;
        fa.read_at(&mut ba, x.data_offset + done, leave)
            .map_err(|e| a.name.io_error("read", e))?;
        fb.read_at(&mut bb, y.data_offset + done, leave)
            .map_err(|e| b.name.io_error("read", e))?;
        if let Some((_, check)) = &mut check {
            check.hasher.update(&bb);
        }
        if swapping {
            swap_in_place(&mut ba, item as usize, &x.swaps);
            swap_in_place(&mut bb, item as usize, &y.swaps);
        }
        if ba != bb {
            let at = ba.iter().zip(&bb).position(|(p, q)| p != q).unwrap_or(0);
            let byte = done + at as u64;
            return Ok(Some(format!(
                "its data differs from byte {byte} (element {})",
                byte * 8 / x.dtype.bits().max(1)
            )));
        }
        done += n as u64;
        block = (block * 2).min(LARGEST);
    }
    if let Some((name, check)) = check {
        check.verify(&name)?;
    }
    Ok(None)
}

/// How the part `range` along `axis` of tensor `b` differs from the same part of `a`, if it
/// does, compared by value (a fused tensor's part that several ranks hold: `replicas 1:2:2`).
/// The two must have one type, shape and C-order layout (pieces of one split); the part must
/// start and end on whole bytes. Reads the part's runs (one per round before the axis) and
/// stops at the first that differs.
pub fn differs_in(
    a: &Tensor,
    b: &Tensor,
    axis: usize,
    range: std::ops::Range<u64>,
) -> Result<Option<String>> {
    let (x, y) = (&a.info, &b.info);
    if x.dtype != y.dtype || x.shape != y.shape || x.layout != y.layout {
        return differs(a, b);
    }
    if x.layout != crate::format::Layout::C {
        return Ok(Some(
            "it is stored in Fortran order, whose parts tjoin does not compare".to_string(),
        ));
    }
    let bits = x.dtype.bits();
    let inner: u64 = x.shape[axis + 1..].iter().product::<u64>() * bits;
    let outer: u64 = x.shape[..axis].iter().product();
    let round = x.shape[axis] * inner / 8;
    let (start, len) = (
        range.start * inner / 8,
        (range.end - range.start) * inner / 8,
    );
    let (fa, fb) = (a.file.reader(&a.name)?, b.file.reader(&b.name)?);
    let swapping = x.swaps != y.swaps;
    let item = x.dtype.itemsize().max(1) as usize;
    // Blocks of whole elements, for the swap.
    let block = (4 << 20) - (4 << 20) % item as u64;
    let (mut ba, mut bb) = (Vec::new(), Vec::new());
    for o in 0..outer {
        let mut done = 0;
        while done < len {
            let n = block.min(len - done) as usize;
            let at = o * round + start + done;
            ba.resize(n, 0);
            bb.resize(n, 0);
            fa.read_at(&mut ba, x.data_offset + at, false)
                .map_err(|e| a.name.io_error("read", e))?;
            fb.read_at(&mut bb, y.data_offset + at, false)
                .map_err(|e| b.name.io_error("read", e))?;
            if swapping {
                swap_in_place(&mut ba, item, &x.swaps);
                swap_in_place(&mut bb, item, &y.swaps);
            }
            if ba != bb {
                let first = ba.iter().zip(&bb).position(|(p, q)| p != q).unwrap_or(0);
                let byte = at + first as u64;
                return Ok(Some(format!(
                    "its part {}..{} along axis {axis} differs from byte {byte} (element {})",
                    range.start,
                    range.end,
                    byte * 8 / bits.max(1)
                )));
            }
            done += n as u64;
        }
    }
    Ok(None)
}

/// "(big-endian)" for a message naming a copy's byte order.
fn order_text(order: ByteOrder) -> String {
    match order {
        ByteOrder::Little => " (little-endian)".to_string(),
        ByteOrder::Big => " (big-endian)".to_string(),
        ByteOrder::NotApplicable => String::new(),
    }
}

/// The value every element of `t` holds, as its bytes (little-endian), when they all hold
/// one: all zeros, all ones. `None` for a tensor of several values, or of no elements. Reads
/// the tensor front to back, stopping at the first block holding another value.
pub fn constant(t: &Tensor) -> Result<Option<Vec<u8>>> {
    let info = &t.info;
    // Sub-byte elements pack across bytes: a constant tensor of them repeats one byte
    // pattern only for some values, so they are compared byte by byte.
    let item = if info.dtype.bits() % 8 == 0 {
        info.dtype.itemsize().max(1)
    } else {
        1
    };
    if info.data_len < item {
        return Ok(None);
    }
    let file = t.file.reader(&t.name)?;
    const BLOCK: u64 = 1 << 20;
    let block = (BLOCK - BLOCK % item).max(item);
    let mut buffer = Vec::new();
    let mut first: Option<Vec<u8>> = None;
    let mut done = 0;
    while done < info.data_len {
        let n = block.min(info.data_len - done) as usize;
        buffer.resize(n, 0);
        file.read_at(&mut buffer, info.data_offset + done, false)
            .map_err(|e| t.name.io_error("read", e))?;
        swap_in_place(&mut buffer, item as usize, &info.swaps);
        let value = first.get_or_insert_with(|| buffer[..item as usize].to_vec());
        if buffer
            .chunks_exact(item as usize)
            .any(|e| e != value.as_slice())
        {
            return Ok(None);
        }
        done += n as u64;
    }
    Ok(first)
}

/// Checks that every copy of a block that several DTensor ranks hold (a replicated block,
/// a plain tensor every rank saved) equals the copy kept (`src/input/dtensor.rs`). Every
/// copy that differs is refused, naming both files, the tensor and the block's region.
pub fn replicas(input: &Input) -> Result<()> {
    let replicas = crate::input::dtensor::replicas(input);
    let offsets = input.offsets().unwrap_or_default();
    let mut differing = Vec::new();
    for (kept, copy) in replicas {
        let Some(first) = input.tensors.get(*kept) else {
            continue;
        };
        let region = offsets.get(*kept).map_or_else(String::new, |at| {
            let ends: Vec<String> = at
                .iter()
                .zip(&first.info.shape)
                .map(|(start, size)| format!("{start}:{}", start + size))
                .collect();
            format!(" (its block [{}])", ends.join(", "))
        });
        match differs(first, copy)? {
            None => {}
            Some(how) => {
                differing.push(format!("{}{region}: {how} from {}", copy.name, first.name))
            }
        }
    }
    if differing.is_empty() {
        return Ok(());
    }
    Err(Error::Refused(vec![Refusal {
        headline: format!(
            "{}: values that several ranks hold (replicated, or plain tensors every rank \
             saved) differ between ranks, so tjoin cannot tell which copy is right:",
            input.name
        ),
        details: capped(differing, 20),
        hint: Some(
            "the ranks' states diverged (a buffer updated on one rank only) or a file is from \
             another save: save the state dict again from ranks whose states agree"
                .to_string(),
        ),
    }]))
}
