//! The input cursors: how far the engine has read each input, when to release the pages
//! behind, and the CRC-32 checks of stored .npz members.

use super::RELEASE_BUDGET;
use crate::error::{InputRef, Result};
use crate::format::npz::StoredCrc;
use crate::input::Tensor;
use crate::sys::Region;

/// How far the engine has read each input, and where it last released each one's pages.
/// A source that is a slice reads its runs with gaps between them (`skip_to`); a gathered
/// one counts its bytes as if read in order.
pub(super) struct Cursors<'r> {
    pub(super) regions: &'r [Region],
    /// Where each input's cursor is in its data.
    pub(super) read: Vec<u64>,
    pub(super) released: Vec<u64>,
    /// Whether an input is read out of order (gathered), so that all of it is released.
    pub(super) scattered: Vec<bool>,
    pub(super) pending: u64,
    /// The CRC-32 of each input that is a stored .npz member, finished over its data as the
    /// cursor passes it (for a gathered input, a second, sequential read).
    pub(super) checks: Vec<Option<(InputRef, StoredCrc)>>,
}

impl<'r> Cursors<'r> {
    pub(super) fn new(regions: &'r [Region], inputs: &[&Tensor]) -> Cursors<'r> {
        Cursors {
            regions,
            read: vec![0; regions.len()],
            released: vec![0; regions.len()],
            scattered: vec![false; regions.len()],
            pending: 0,
            checks: inputs.iter().map(|t| t.crc_check()).collect(),
        }
    }

    /// Notes that `len` more bytes of input `index` were read; past the budget, releases the
    /// pages behind every cursor.
    #[inline]
    pub(super) fn advance(&mut self, index: usize, len: u64) {
        if let Some((_, check)) = &mut self.checks[index] {
            let start = self.read[index] as usize;
            check
                .hasher
                .update(&self.regions[index].bytes()[start..start + len as usize]);
        }
        self.advance_hashed(index, len);
    }

    /// The CRC-32 hasher of input `index`, if it has a check: for a caller that hashes the
    /// bytes it reads itself (`advance_hashed`).
    pub(super) fn hasher(&mut self, index: usize) -> Option<&mut crc32fast::Hasher> {
        self.checks[index]
            .as_mut()
            .map(|(_, check)| &mut check.hasher)
    }

    /// `advance`, for bytes that went through the input's CRC-32 check already.
    #[inline]
    pub(super) fn advance_hashed(&mut self, index: usize, len: u64) {
        self.read[index] += len;
        self.pending += len;
        if self.pending < RELEASE_BUDGET {
            return;
        }
        for (i, region) in self.regions.iter().enumerate() {
            let (start, end) = if self.scattered[i] {
                (0, region.bytes().len() as u64)
            } else {
                (self.released[i], self.read[i])
            };
            region.release(start as usize, end as usize);
            self.released[i] = self.read[i];
        }
        self.pending = 0;
    }

    /// Moves input `index`'s cursor forward to byte `at` of its data, where a slice's next
    /// run starts. The bytes passed over go through its CRC-32 check, if it has one; else
    /// they are not read at all, but count towards the next release: pages that hold both
    /// bytes read and bytes passed over are resident all the same (a split's half of the
    /// parts reads half of every page).
    #[inline]
    pub(super) fn skip_to(&mut self, index: usize, at: u64) {
        if self.checks[index].is_some() {
            self.pass_over(index, at);
        } else if at > self.read[index] {
            self.pending += at - self.read[index];
            self.read[index] = at;
        }
    }

    /// Advances input `index`'s cursor to `at` a budget's worth at a time, so that the
    /// pages read for its CRC-32 check are released as it goes.
    pub(super) fn pass_over(&mut self, index: usize, at: u64) {
        while self.read[index] < at {
            let len = (at - self.read[index]).min(RELEASE_BUDGET);
            self.advance(index, len);
        }
    }

    /// Fails if an input fails its CRC-32 check, once the bytes after its cursor (the end
    /// of its tensor that a slice leaves out) have gone through it too.
    pub(super) fn verify(&mut self) -> Result<()> {
        for index in 0..self.checks.len() {
            if self.checks[index].is_some() {
                self.pass_over(index, self.regions[index].bytes().len() as u64);
            }
            if let Some((name, check)) = self.checks[index].take() {
                check.verify(&name)?;
            }
        }
        Ok(())
    }
}
