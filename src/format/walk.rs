//! The walk of a strided tensor's elements in C order: the one gather that both the copy
//! engine (`engine/gather.rs`, an input laid out differently from the output) and the
//! PyTorch reader (a strided view, gathered into a temporary copy) use.
//!
//! A walk keeps the input offset of its next element and turns like an odometer: each step
//! adds a stride, and a dimension that comes round takes its span back off and carries into
//! the one before. Working out every element's offset from its index instead costs a
//! division and a remainder per dimension per element, which made gathering 4x slower than
//! `cat` (benches/README.md, "Gathers"). The innermost dimension, one constant stride, is
//! copied in a loop specialised on the element's size.

/// A position in the elements of one run of a gathered input, in the output's order.
pub struct Walk<'g> {
    dims: &'g [u64],
    strides: &'g [u64],
    /// The index of the next element along each of `dims`.
    counters: Vec<u64>,
    /// The byte offset of the next element in the input's data.
    at: u64,
}

impl<'g> Walk<'g> {
    /// A walk over `dims` (outermost first), whose byte strides in the input are `strides`,
    /// from the element at byte `base`.
    pub fn new(dims: &'g [u64], strides: &'g [u64], base: u64) -> Walk<'g> {
        Walk {
            dims,
            strides,
            counters: vec![0; dims.len()],
            at: base,
        }
    }

    /// The byte offset of the next element.
    pub fn position(&self) -> u64 {
        self.at
    }

    /// Appends the next `count` elements of `size` bytes each from `bytes` to `out`.
    pub fn gather(&mut self, bytes: &[u8], size: usize, mut count: u64, out: &mut Vec<u8>) {
        let Some(last) = self.dims.len().checked_sub(1) else {
            // A run of no dimensions is one element.
            if count > 0 {
                out.extend_from_slice(&bytes[self.at as usize..][..size]);
            }
            return;
        };
        let (dim, stride) = (self.dims[last], self.strides[last]);
        out.reserve(
            usize::try_from(count)
                .unwrap_or(usize::MAX)
                .saturating_mul(size),
        );
        while count > 0 {
            let row = (dim - self.counters[last]).min(count);
            gather_strided(
                bytes,
                self.at as usize,
                stride as usize,
                row as usize,
                size,
                out,
            );
            self.at += row * stride;
            self.counters[last] += row;
            count -= row;
            if self.counters[last] == dim {
                self.carry(last);
            }
        }
    }

    /// Turns dimension `from` back to its start and advances the ones before it.
    fn carry(&mut self, from: usize) {
        for d in (0..=from).rev() {
            if d < from {
                self.counters[d] += 1;
                self.at += self.strides[d];
            }
            if self.counters[d] < self.dims[d] {
                return;
            }
            self.at -= self.dims[d] * self.strides[d];
            self.counters[d] = 0;
        }
    }
}

/// Appends `count` elements of `size` bytes from `bytes`, the first at `at` and each next
/// one `stride` bytes further.
fn gather_strided(
    bytes: &[u8],
    at: usize,
    stride: usize,
    count: usize,
    size: usize,
    out: &mut Vec<u8>,
) {
    match size {
        1 => strided::<1>(bytes, at, stride, count, out),
        2 => strided::<2>(bytes, at, stride, count, out),
        4 => strided::<4>(bytes, at, stride, count, out),
        8 => strided::<8>(bytes, at, stride, count, out),
        16 => strided::<16>(bytes, at, stride, count, out),
        _ => {
            for i in 0..count {
                out.extend_from_slice(&bytes[at + i * stride..][..size]);
            }
        }
    }
}

/// [`gather_strided`] for elements of `N` bytes, a size the compiler copies in one move.
fn strided<const N: usize>(
    bytes: &[u8],
    mut at: usize,
    stride: usize,
    count: usize,
    out: &mut Vec<u8>,
) {
    for _ in 0..count {
        let element: &[u8; N] = bytes[at..at + N].try_into().expect("N bytes");
        out.extend_from_slice(element);
        at += stride;
    }
}
