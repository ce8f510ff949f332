//! Reads the elements of an input laid out differently from the output (a Fortran-ordered
//! input in a C-ordered join, or the reverse) in the output's order, by strides.
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

/// The byte offset of the `index`-th element (in C order) of a block with these dims.
pub(super) fn offset_of(mut index: u64, dims: &[u64], strides: &[u64]) -> u64 {
    let mut offset = 0;
    for (&dim, &stride) in dims.iter().zip(strides).rev() {
        offset += (index % dim) * stride;
        index /= dim;
    }
    offset
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_walk_gives_each_element_at_its_offset_in_pieces_of_any_length() {
        // A (2, 3, 4) array stored in Fortran order (strides 1, 2, 6 elements) read in C
        // order, and other shapes, sizes and bases; taken in pieces of every length.
        let cases: [(&[u64], &[u64], usize, u64); 9] = [
            (&[2, 3, 4], &[1, 2, 6], 4, 0),
            (&[2, 3, 4], &[1, 2, 6], 1, 5),
            (&[5, 7], &[1, 5], 2, 3),
            (&[3, 1, 2], &[1, 3, 3], 8, 0),
            (&[4], &[3], 16, 2),
            (&[2, 2, 2, 3], &[12, 1, 2, 4], 3, 1),
            // Longer transpositions, in two and three dimensions.
            (&[70, 6], &[1, 70], 4, 0),
            (&[3, 40, 5], &[200, 1, 40], 2, 7),
            (&[33, 2], &[1, 33], 8, 1),
        ];
        for (dims, elements, size, base) in cases {
            let strides: Vec<u64> = elements.iter().map(|s| s * size as u64).collect();
            let count: u64 = dims.iter().product();
            let len = (base + count) as usize * size * 2;
            let bytes: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            let base = base * size as u64;
            let mut expected = Vec::new();
            for index in 0..count {
                let at = (base + offset_of(index, dims, &strides)) as usize;
                expected.extend_from_slice(&bytes[at..at + size]);
            }
            for piece in 1..=count {
                let mut walk = Walk::new(dims, &strides, base);
                let mut out = Vec::new();
                let mut done = 0;
                while done < count {
                    let take = piece.min(count - done);
                    walk.gather(&bytes, size, take, &mut out);
                    done += take;
                }
                assert_eq!(
                    out, expected,
                    "{dims:?} {strides:?} size {size}, pieces of {piece}"
                );
            }
        }
    }
}
