//! Reads the elements of an input laid out differently from the output (a Fortran-ordered
//! input in a C-ordered join, or the reverse) in the output's order, by strides: through the
//! map by a [`Walk`] (`format/walk.rs`, shared with the PyTorch reader's strided views).
//!
//! A long run whose input stores one of its dimensions contiguously (a Fortran-ordered
//! matrix read into C order) is read by positional reads of tiles instead (`Tiles`), so that
//! the map does not come to hold a page of every column (benches/README.md, "Gathers").

pub use crate::format::walk::Walk;

/// The most bytes a tile holds as read.
const TILE_BYTES: usize = 4 << 20;
/// The fewest bytes worth one positional read of a tile: with shorter reads the calls cost
/// more than the map's faults, and the run is walked through the map instead.
const MIN_READ: usize = 256;
/// Runs shorter than this are walked through the map: a tile's buffers would cost more than
/// what the map holds for them.
const MIN_TILED_RUN: u64 = 1 << 20;
/// Bytes between the rows of a tile as read, so that a column of it does not fall on one
/// cache set when the rows are a power of two long.
const ROW_PAD: usize = 64;

/// A run of a gathered input read by positional reads of tiles rather than through its map.
///
/// Walking a transposed input through a map touches a page of every column for every row,
/// and each fault maps up to 64 KiB around it, so the map came to hold 64-128 KiB a column
/// (264 MiB for the `gather` scenario, benches/README.md "Gathers"). A tile instead takes
/// `len` consecutive elements along the dimension `c` the input stores contiguously, for
/// every index of the dimensions after it (`inner`): one read of `len` elements per inner
/// index, then put in the output's order straight into the caller's buffer, as many of its
/// rows (one element along `c` for every inner index) as the caller takes: no second copy
/// of the tile (which, through a tile-sized buffer of its own, cost 7% of a gather's time,
/// benches/README.md). What stays resident is the tile, whatever the input's size.
pub struct Tiles {
    size: usize,
    /// The dimensions before `c`, their strides, and where they are.
    outer_dims: Vec<u64>,
    outer_strides: Vec<u64>,
    counters: Vec<u64>,
    /// The byte offset of the current outer index's first element.
    outer_at: u64,
    /// The length of dimension `c`, and the most of it a tile takes.
    along: u64,
    tile: u64,
    /// Where along `c` the current tile starts, and how much of it it holds.
    start: u64,
    rows: usize,
    /// The byte offset of each inner index's element, relative to its outer index and `c`.
    inner: Vec<u64>,
    /// The tile as read: one row of `rows` elements per inner index, `pitch` bytes apart.
    read: Vec<u8>,
    pitch: usize,
    /// How many of the tile's `rows` output rows were handed out.
    done: usize,
    /// One output row in order, for a caller that takes part of it, and how many of its
    /// bytes were handed out.
    part: Vec<u8>,
    part_next: usize,
    loaded: bool,
}

impl Tiles {
    /// Tiles for a run over `dims` (outermost first) with byte `strides` in the input, from
    /// byte `base`, of elements of `size` bytes; `None` when the run is better walked
    /// through the map: short, without a dimension the input stores contiguously before the
    /// last, or with so many inner indices that a tile's reads would be tiny.
    pub fn new(dims: &[u64], strides: &[u64], base: u64, size: usize) -> Option<Tiles> {
        Tiles::with_limits(
            dims,
            strides,
            base,
            size,
            (TILE_BYTES, MIN_READ, MIN_TILED_RUN),
        )
    }

    /// [`Tiles::new`] with a tile of at most `budget` bytes, reads of at least `min_read`
    /// and runs of at least `min_run` bytes (small ones in tests, to reach every edge).
    fn with_limits(
        dims: &[u64],
        strides: &[u64],
        base: u64,
        size: usize,
        (budget, min_read, min_run): (usize, usize, u64),
    ) -> Option<Tiles> {
        let count = dims.iter().try_fold(1u64, |n, &d| n.checked_mul(d))?;
        if size == 0 || count.saturating_mul(size as u64) < min_run {
            return None;
        }
        // The dimension the input stores contiguously: the last one with a stride of one
        // element that is not itself the last dimension (then nothing needs gathering) and
        // is longer than one.
        let c = (0..dims.len().checked_sub(1)?)
            .rev()
            .find(|&d| strides[d] == size as u64 && dims[d] > 1)?;
        let inner_count: u64 = dims[c + 1..].iter().product();
        let row_budget = (budget as u64 / inner_count.max(1)) / size as u64;
        let tile = row_budget.min(dims[c]);
        if tile == 0 || (tile < dims[c] && (tile as usize) * size < min_read) {
            return None;
        }
        let inner_count = usize::try_from(inner_count).ok()?;
        let mut inner = Vec::with_capacity(inner_count);
        let mut walk = Odometer::new(&dims[c + 1..]);
        for _ in 0..inner_count {
            inner.push(walk.offset(&strides[c + 1..]));
            walk.step();
        }
        let pitch = tile as usize * size + ROW_PAD;
        Some(Tiles {
            size,
            outer_dims: dims[..c].to_vec(),
            outer_strides: strides[..c].to_vec(),
            counters: vec![0; c],
            outer_at: base,
            along: dims[c],
            tile,
            start: 0,
            rows: 0,
            inner,
            read: vec![0; inner_count * pitch],
            pitch,
            done: 0,
            part: Vec::new(),
            part_next: 0,
            loaded: false,
        })
    }

    /// Appends the next `count` elements to `out`, reading tiles with `read_at(buf,
    /// offset)`, which fills `buf` from byte `offset` of the input's data.
    pub fn gather(
        &mut self,
        mut count: u64,
        out: &mut Vec<u8>,
        read_at: &mut dyn FnMut(&mut [u8], u64) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let per_row = self.inner.len() as u64;
        let row_bytes = self.inner.len() * self.size;
        while count > 0 {
            // First the rest of a row a call before took only part of.
            if self.part_next < self.part.len() {
                let left = ((self.part.len() - self.part_next) / self.size) as u64;
                let take = left.min(count) as usize * self.size;
                out.extend_from_slice(&self.part[self.part_next..][..take]);
                self.part_next += take;
                count -= (take / self.size) as u64;
                continue;
            }
            if self.done == self.rows {
                self.read_tile(read_at)?;
            }
            let whole = (count / per_row).min((self.rows - self.done) as u64) as usize;
            if whole > 0 {
                // Every byte is overwritten: `out` is the packer's buffer, which keeps its
                // capacity, so this zeroes memory already in the cache.
                let at = out.len();
                out.resize(at + whole * row_bytes, 0);
                self.order(self.done, whole, &mut out[at..]);
                self.done += whole;
                count -= whole as u64 * per_row;
            } else {
                let mut part = std::mem::take(&mut self.part);
                part.resize(row_bytes, 0);
                self.order(self.done, 1, &mut part);
                self.part = part;
                self.part_next = 0;
                self.done += 1;
            }
        }
        Ok(())
    }

    /// Reads the next tile into `read`.
    fn read_tile(
        &mut self,
        read_at: &mut dyn FnMut(&mut [u8], u64) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        if self.loaded {
            self.start += self.tile;
            if self.start >= self.along {
                self.start = 0;
                self.carry();
            }
        }
        self.loaded = true;
        self.rows = (self.along - self.start).min(self.tile) as usize;
        self.done = 0;
        let len = self.rows * self.size;
        let at = self.outer_at + self.start * self.size as u64;
        for (q, &offset) in self.inner.iter().enumerate() {
            read_at(&mut self.read[q * self.pitch..][..len], at + offset)?;
        }
        Ok(())
    }

    /// Puts output rows `first..first + count` of the tile just read (the elements at those
    /// positions along `c`, each for every inner index) in order into `out`, which holds
    /// exactly them.
    fn order(&self, first: usize, count: usize, out: &mut [u8]) {
        let size = self.size;
        let (read, pitch, rows) = (&self.read[first * size..], self.pitch, self.inner.len());
        match size {
            1 => transpose::<1>(read, pitch, rows, count, out),
            2 => transpose::<2>(read, pitch, rows, count, out),
            4 => transpose::<4>(read, pitch, rows, count, out),
            8 => transpose::<8>(read, pitch, rows, count, out),
            16 => transpose::<16>(read, pitch, rows, count, out),
            _ => {
                for t in 0..count {
                    for q in 0..rows {
                        let from = &read[q * pitch + t * size..][..size];
                        out[(t * rows + q) * size..][..size].copy_from_slice(from);
                    }
                }
            }
        }
    }

    /// Moves to the next index of the dimensions before `c`.
    fn carry(&mut self) {
        for d in (0..self.outer_dims.len()).rev() {
            self.counters[d] += 1;
            self.outer_at += self.outer_strides[d];
            if self.counters[d] < self.outer_dims[d] {
                return;
            }
            self.outer_at -= self.outer_dims[d] * self.outer_strides[d];
            self.counters[d] = 0;
        }
    }
}

/// Puts `rows` rows of `cols` elements of `N` bytes (each row `pitch` bytes after the one
/// before) into `out` column by column: `out` gets `cols` rows of `rows` elements.
///
/// Elements of up to 8 bytes go through squares of rows of one word each (`squares`): a
/// `u64` for elements of 1 and 2 bytes, a `u128` for 4 and 8, which `transpose_speed` timed
/// fastest (per 256 MiB: bytes 0.089-0.092 s in `u64` squares against 0.172 in `u128` ones;
/// float32 0.040 s in `u128` squares against 0.049 in `u64` ones; float64 0.035 against 0.037
/// copied one by one); larger ones are copied one by one. Either way the output is written in order, a few of its rows at a
/// time, while the reads go down the tile's rows, whose lines stay cached for the next
/// columns. The kernel before these gathered blocks of 16 x 8 elements into an array with
/// 4-byte stores and copied it out with 16-byte loads (which, most likely, the processor
/// cannot forward from those stores): 1-3 GB/s for float32 (benches/README.md, issue 34,
/// "The transpose again").
fn transpose<const N: usize>(read: &[u8], pitch: usize, rows: usize, cols: usize, out: &mut [u8]) {
    let (whole_rows, whole_cols) = match N {
        1 | 2 => squares::<N, u64>(read, pitch, rows, cols, out),
        4 | 8 => squares::<N, u128>(read, pitch, rows, cols, out),
        _ => (0, 0),
    };
    // What the squares leave (all of it for wide elements), element by element.
    let row_bytes = rows * N;
    for t in 0..cols {
        let first = if t < whole_cols { whole_rows } else { 0 };
        let to = &mut out[t * row_bytes..][..row_bytes];
        for (q, element) in to.chunks_exact_mut(N).enumerate().skip(first) {
            let from: &[u8; N] = read[q * pitch + t * N..][..N].try_into().expect("N bytes");
            element.copy_from_slice(from);
        }
    }
}

/// `transpose`'s squares of `W::BYTES / N` rows by as many elements, each row one word `W`:
/// all of the tile's whole squares; returns the rows and columns they covered.
fn squares<const N: usize, W: Word>(
    read: &[u8],
    pitch: usize,
    rows: usize,
    cols: usize,
    out: &mut [u8],
) -> (usize, usize) {
    let row_bytes = rows * N;
    let k = W::BYTES / N;
    let (whole_rows, whole_cols) = (rows / k * k, cols / k * k);
    let mut square = [W::ZERO; 16];
    for t0 in (0..whole_cols).step_by(k) {
        for q0 in (0..whole_rows).step_by(k) {
            // One bounds check per square rather than per row: 24% fewer instructions.
            let from = &read[q0 * pitch + t0 * N..][..(k - 1) * pitch + W::BYTES];
            for (r, row) in square[..k].iter_mut().enumerate() {
                *row = W::from_le(&from[r * pitch..][..W::BYTES]);
            }
            transpose_square::<N, W>(&mut square[..k]);
            let to = &mut out[t0 * row_bytes + q0 * N..][..(k - 1) * row_bytes + W::BYTES];
            for (r, row) in square[..k].iter().enumerate() {
                row.to_le(&mut to[r * row_bytes..][..W::BYTES]);
            }
        }
    }
    (whole_rows, whole_cols)
}

/// A machine word the squares' rows are held in.
trait Word:
    Copy
    + std::ops::BitXor<Output = Self>
    + std::ops::BitAnd<Output = Self>
    + std::ops::BitXorAssign
    + std::ops::Shl<usize, Output = Self>
    + std::ops::Shr<usize, Output = Self>
{
    const BYTES: usize;
    const ZERO: Self;
    const ONES: Self;
    /// The word of `bytes` (exactly `BYTES` of them), little-endian.
    fn from_le(bytes: &[u8]) -> Self;
    /// Its bytes, little-endian, into `bytes` (exactly `BYTES` of them).
    fn to_le(self, bytes: &mut [u8]);
}

/// `Word` for the unsigned integer types: their size, and their little-endian bytes.
macro_rules! word {
    ($($t:ty)*) => {$(
        impl Word for $t {
            const BYTES: usize = std::mem::size_of::<$t>();
            const ZERO: $t = 0;
            const ONES: $t = <$t>::MAX;
            #[inline]
            fn from_le(bytes: &[u8]) -> $t {
                <$t>::from_le_bytes(bytes.try_into().expect("a word's bytes"))
            }
            #[inline]
            fn to_le(self, bytes: &mut [u8]) {
                bytes.copy_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}
word!(u64 u128);

/// Transposes a square of `W::BYTES / N` rows of as many elements of `N` bytes, each row one
/// word whose element `e` is its bytes `e * N..(e + 1) * N` in little-endian order: in
/// `log2(W::BYTES / N)` rounds, each swapping the upper half of the elements of row `r` with
/// the lower half of row `r + j` (Hacker's Delight's transpose of a bit matrix, by elements).
#[inline]
fn transpose_square<const N: usize, W: Word>(square: &mut [W]) {
    let k = W::BYTES / N;
    let mut j = k / 2;
    while j > 0 {
        let low = low_elements::<N, W>(j);
        let shift = 8 * N * j;
        for r in 0..k {
            if r & j == 0 {
                let swap = ((square[r] >> shift) ^ square[r + j]) & low;
                square[r + j] ^= swap;
                square[r] ^= swap << shift;
            }
        }
        j /= 2;
    }
}

/// The mask of the elements of `N` bytes in a word `W` whose index has bit `j` clear.
#[inline]
fn low_elements<const N: usize, W: Word>(j: usize) -> W {
    let element = W::ONES >> (8 * (W::BYTES - N));
    let mut mask = W::ZERO;
    for e in 0..W::BYTES / N {
        if e & j == 0 {
            mask ^= element << (8 * N * e);
        }
    }
    mask
}

/// Counters over some dimensions in C order, for their offsets by strides.
struct Odometer<'d> {
    dims: &'d [u64],
    counters: Vec<u64>,
}

impl<'d> Odometer<'d> {
    fn new(dims: &'d [u64]) -> Odometer<'d> {
        Odometer {
            dims,
            counters: vec![0; dims.len()],
        }
    }

    fn offset(&self, strides: &[u64]) -> u64 {
        self.counters.iter().zip(strides).map(|(i, s)| i * s).sum()
    }

    fn step(&mut self) {
        for d in (0..self.dims.len()).rev() {
            self.counters[d] += 1;
            if self.counters[d] < self.dims[d] {
                return;
            }
            self.counters[d] = 0;
        }
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

    /// The elements of a run over `dims` and element `strides` of `size` bytes from element
    /// `base`, in C order, worked out one by one from their indices; and the input's bytes.
    fn expected(
        dims: &[u64],
        elements: &[u64],
        size: usize,
        base: u64,
    ) -> (Vec<u8>, Vec<u64>, u64, Vec<u8>) {
        let strides: Vec<u64> = elements.iter().map(|s| s * size as u64).collect();
        let count: u64 = dims.iter().product();
        let span: u64 = dims.iter().zip(&strides).map(|(d, s)| (d - 1) * s).sum();
        let len = (base * size as u64 + span) as usize + size;
        let bytes: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
        let base = base * size as u64;
        let mut out = Vec::new();
        for index in 0..count {
            let at = (base + offset_of(index, dims, &strides)) as usize;
            out.extend_from_slice(&bytes[at..at + size]);
        }
        (bytes, strides, base, out)
    }

    #[test]
    fn tiles_give_each_element_at_its_offset_at_every_tile_edge() {
        // Transposed inputs (the contiguous dimension first or in the middle), tiles that
        // divide the contiguous dimension and tiles that leave a short last one, outer
        // dimensions before it, element sizes with and without a specialised transpose.
        let cases: [(&[u64], &[u64], usize, u64); 11] = [
            // Whole blocks of the transpose (16 inner indices by 8 along) and edges of both.
            (&[40, 37], &[1, 40], 4, 1),
            (&[33, 20], &[1, 33], 8, 0),
            (&[2, 24, 32], &[768, 1, 24], 2, 0),
            (&[7, 3], &[1, 7], 4, 0),
            (&[16, 5], &[1, 16], 8, 2),
            (&[9, 10], &[1, 9], 1, 0),
            (&[2, 11, 3], &[33, 1, 11], 2, 1),
            (&[3, 2, 8, 4], &[64, 32, 1, 8], 4, 0),
            (&[13, 2, 3], &[1, 13, 26], 16, 3),
            (&[6, 4], &[1, 6], 3, 0),
            (&[5, 1, 4], &[1, 5, 5], 12, 0),
        ];
        for (dims, elements, size, base) in cases {
            let (bytes, strides, base, want) = expected(dims, elements, size, base);
            let count: u64 = dims.iter().product();
            let inner_widest = size * 128;
            for budget in [
                size,
                2 * size,
                3 * size,
                5 * size,
                7 * size,
                inner_widest,
                1 << 20,
            ] {
                let Some(mut tiles) =
                    Tiles::with_limits(dims, &strides, base, size, (budget, 1, 0))
                else {
                    // Only a budget below one element per inner index declines.
                    assert!(budget < size * count as usize, "{dims:?} budget {budget}");
                    assert!(budget < 1 << 20, "{dims:?} declined");
                    continue;
                };
                for piece in [1, 2, 3, count / 2 + 1, count] {
                    let mut out = Vec::new();
                    let mut reads = 0;
                    let mut read_at = |buf: &mut [u8], at: u64| {
                        reads += 1;
                        buf.copy_from_slice(&bytes[at as usize..at as usize + buf.len()]);
                        Ok(())
                    };
                    let mut done = 0;
                    while done < count {
                        let take = piece.min(count - done);
                        tiles.gather(take, &mut out, &mut read_at).unwrap();
                        done += take;
                    }
                    assert_eq!(
                        out, want,
                        "{dims:?} {elements:?} size {size} budget {budget} pieces of {piece}"
                    );
                    tiles = Tiles::with_limits(dims, &strides, base, size, (budget, 1, 0)).unwrap();
                }
            }
        }
    }

    #[test]
    fn tiles_decline_runs_the_map_walks_better() {
        // Short runs; a contiguous last dimension (nothing to gather); no contiguous
        // dimension at all (a strided slice); reads shorter than the least worth a call.
        let limits = (1 << 20, 256, 1 << 10);
        assert!(Tiles::with_limits(&[16, 4], &[4, 64], 0, 4, limits).is_none());
        assert!(Tiles::with_limits(&[1024, 1024], &[4096, 4], 0, 4, limits).is_none());
        assert!(Tiles::with_limits(&[1024, 1024], &[8, 8192], 0, 4, limits).is_none());
        assert!(Tiles::with_limits(&[1024, 1 << 16], &[4, 4096], 0, 4, limits).is_none());
        let tiles = Tiles::with_limits(&[1 << 16, 1024], &[4, 1 << 18], 0, 4, limits).unwrap();
        assert_eq!(tiles.tile, 256);
        assert!(tiles.read.len() <= (1 << 20) + 1024 * ROW_PAD);
    }

    /// `transpose::<N>` of a `rows` x `cols` tile, `pad` bytes between its rows, against
    /// the element-by-element definition.
    fn check_transpose<const N: usize>(rows: usize, cols: usize, pad: usize) {
        let pitch = cols * N + pad;
        let read: Vec<u8> = (0..rows * pitch).map(|i| (i * 7 % 251) as u8).collect();
        let mut want = vec![0u8; rows * cols * N];
        for t in 0..cols {
            for q in 0..rows {
                want[(t * rows + q) * N..][..N].copy_from_slice(&read[q * pitch + t * N..][..N]);
            }
        }
        let mut out = vec![0xa5; rows * cols * N];
        transpose::<N>(&read, pitch, rows, cols, &mut out);
        assert_eq!(out, want, "size {N}, {rows} x {cols}, pad {pad}");
    }

    #[test]
    fn the_transpose_puts_every_element_in_place_at_every_width_and_edge() {
        // Squares of 8 / N (8, 4, 2 elements) whole, and edges of one to seven rows or
        // columns past them, for each element width; wide elements copied one by one.
        let sides = [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33];
        for rows in sides {
            for cols in sides {
                for pad in [0, 5, 64] {
                    check_transpose::<1>(rows, cols, pad);
                    check_transpose::<2>(rows, cols, pad);
                    check_transpose::<4>(rows, cols, pad);
                    check_transpose::<8>(rows, cols, pad);
                    check_transpose::<16>(rows, cols, pad);
                }
            }
        }
    }

    #[test]
    fn a_square_of_each_width_is_transposed_and_transposed_back() {
        let mut square = [0u64; 8];
        for (r, row) in square.iter_mut().enumerate() {
            *row = u64::from_le_bytes(std::array::from_fn(|e| (r * 8 + e) as u8));
        }
        let original = square;
        let mut bytes = square;
        transpose_square::<1, u64>(&mut bytes);
        for (e, row) in bytes.iter().enumerate() {
            let want: [u8; 8] = std::array::from_fn(|r| (r * 8 + e) as u8);
            assert_eq!(row.to_le_bytes(), want);
        }
        transpose_square::<1, u64>(&mut bytes);
        assert_eq!(bytes, original);
        let mut pairs = square;
        transpose_square::<2, u64>(&mut pairs[..4]);
        // Row 1 of the 4 x 4 square of u16: the second u16 of each of rows 0..4.
        let want: Vec<u8> = (0..4)
            .flat_map(|r| [(r * 8 + 2) as u8, (r * 8 + 3) as u8])
            .collect();
        assert_eq!(pairs[1].to_le_bytes().to_vec(), want);
        transpose_square::<4, u64>(&mut square[..2]);
        assert_eq!(square[0].to_le_bytes(), [0, 1, 2, 3, 8, 9, 10, 11]);
        assert_eq!(square[1].to_le_bytes(), [4, 5, 6, 7, 12, 13, 14, 15]);
    }

    /// Times the transpose of a tile the size the `gather` scenario reads (1,024 inner
    /// indices of 4 KiB), 256 MiB in all per width: run by hand, with `cargo test --release
    /// --lib transpose_speed -- --ignored --nocapture`; it asserts nothing about time.
    #[test]
    #[ignore]
    #[allow(clippy::disallowed_macros)] // a measurement read by a person, as the name says
    fn transpose_speed() {
        fn time<const N: usize>() {
            let (rows, cols) = (1024, 4096 / N);
            let pitch = cols * N + ROW_PAD;
            let read: Vec<u8> = (0..rows * pitch).map(|i| (i * 7 % 251) as u8).collect();
            let mut out = vec![0u8; rows * cols * N];
            let mut best = f64::MAX;
            for _ in 0..5 {
                let start = std::time::Instant::now();
                for _ in 0..64 {
                    transpose::<N>(&read, pitch, rows, cols, &mut out);
                    std::hint::black_box(&mut out);
                }
                best = best.min(start.elapsed().as_secs_f64());
            }
            println!("{N}-byte elements: {best:.3} s per 256 MiB");
        }
        time::<1>();
        time::<2>();
        time::<4>();
        time::<8>();
        time::<16>();
    }

    #[test]
    fn a_failed_read_of_a_tile_is_returned() {
        let mut tiles = Tiles::with_limits(&[8, 2], &[4, 32], 0, 4, (16, 1, 0)).unwrap();
        let mut out = Vec::new();
        let mut fail = |_: &mut [u8], _: u64| Err(std::io::ErrorKind::UnexpectedEof.into());
        let e = tiles.gather(3, &mut out, &mut fail).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);
    }
}
