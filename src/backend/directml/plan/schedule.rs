//! What Join's and Split's plans share: how rounds are grouped into dispatches (the fewest
//! that fit, or each round cut into pieces), which rounds or piece a dispatch covers, and how
//! the tensors of one buffer are laid out at aligned binding offsets.

use std::ops::Range;

use super::sizes::{round_down, round_up};
use super::{BINDING_ALIGNMENT, DataType, MAX_ELEMENTS, Schedule, TensorDesc};

/// What one dispatch of a schedule covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Span {
    /// Every round, in one dispatch.
    Whole,
    /// Rounds `first .. first + count`.
    Rounds {
        /// The first round.
        first: u64,
        /// How many.
        count: u64,
    },
    /// Bytes `range` of round `round`.
    Piece {
        /// The round.
        round: u64,
        /// The byte range of the round.
        range: Range<u64>,
    },
}

impl Schedule {
    /// The fewest dispatches for `rounds` rounds: all in one when `fits(rounds)`, else as many
    /// whole rounds per dispatch as fit (`fits` only gets harder with more rounds), else each
    /// round cut into the pieces `cuts` gives. Nothing to move is one (empty) `Whole`.
    pub(super) fn fewest(
        rounds: u64,
        round_bytes: u64,
        fits: impl Fn(u64) -> bool,
        cuts: impl FnOnce() -> Result<Vec<u64>, String>,
    ) -> Result<Schedule, String> {
        if round_bytes == 0 || rounds == 0 {
            return Ok(Schedule::Whole);
        }
        let (mut fit, mut fail) = (0, rounds + 1);
        while fail - fit > 1 {
            let mid = fit + (fail - fit) / 2;
            if fits(mid) {
                fit = mid;
            } else {
                fail = mid;
            }
        }
        match fit {
            n if n == rounds => Ok(Schedule::Whole),
            0 => cuts().map(Schedule::Pieces),
            n => Ok(Schedule::Rounds(n)),
        }
    }

    /// How many dispatches run `rounds` rounds of `round_bytes` bytes.
    pub(super) fn dispatch_count(&self, rounds: u64, round_bytes: u64) -> u64 {
        if round_bytes == 0 || rounds == 0 {
            return 0;
        }
        match self {
            Schedule::Whole => 1,
            Schedule::Rounds(n) => rounds.div_ceil(*n),
            Schedule::Pieces(cuts) => rounds * (cuts.len() as u64 - 1),
        }
    }

    /// What dispatch `index` (below `dispatch_count`) of `rounds` rounds covers.
    pub(super) fn span(&self, index: u64, rounds: u64) -> Span {
        match self {
            Schedule::Whole => Span::Whole,
            &Schedule::Rounds(n) => {
                let first = index * n;
                Span::Rounds {
                    first,
                    count: n.min(rounds - first),
                }
            }
            Schedule::Pieces(cuts) => {
                let per_round = cuts.len() as u64 - 1;
                let (round, p) = (index / per_round, (index % per_round) as usize);
                Span::Piece {
                    round,
                    range: cuts[p]..cuts[p + 1],
                }
            }
        }
    }
}

/// Where to cut a round of consecutive `runs` (bytes each) that fits no dispatch whole:
/// greedily, each piece taking as many bytes as the buffer of several tensors (each binding
/// aligned, within `max_buffer`) and the single tensor on the other side (within `max_buffer`
/// and DirectML's element limit in `unit`s) can hold, cut at multiples of `granule`. Every
/// round is cut at the same places. `what` names the operation for the refusal.
pub(super) fn greedy_cuts(
    runs: impl IntoIterator<Item = u64>,
    max_buffer: u64,
    unit: u64,
    granule: u64,
    what: &str,
) -> Result<Vec<u64>, String> {
    let limit = round_down(max_buffer, 4).min(MAX_ELEMENTS * unit);
    let mut cuts = vec![0];
    let (mut at, mut used, mut taken) = (0u64, 0u64, 0u64);
    for run in runs {
        let mut left = run;
        while left > 0 {
            let offset = round_up(used, BINDING_ALIGNMENT);
            let room = round_down(max_buffer.saturating_sub(offset), 4).min(limit - taken);
            let take = if left <= room {
                left
            } else {
                round_down(room, granule)
            };
            if take == 0 {
                if taken == 0 {
                    return Err(format!(
                        "the device's buffer budget ({max_buffer} bytes) cannot hold a piece of \
                         the {what}"
                    ));
                }
                cuts.push(at);
                (used, taken) = (0, 0);
                continue;
            }
            used = offset + round_up(take, 4);
            taken += take;
            at += take;
            left -= take;
        }
    }
    cuts.push(at);
    Ok(cuts)
}

/// The bytes a buffer of tensors of `runs` bytes each needs, each at an aligned binding
/// offset and a whole number of 4-byte words, for dispatches of `rounds` rounds.
pub(super) fn aligned_bytes(runs: impl IntoIterator<Item = u64>, rounds: u64) -> u64 {
    runs.into_iter().fold(0, |used, run| {
        round_up(used, BINDING_ALIGNMENT) + round_up(rounds.saturating_mul(run), 4)
    })
}

/// Packed descriptions of `data_type` tensors of these sizes, laid out one after another in
/// one buffer at `BINDING_ALIGNMENT` offsets: each with its offset, and the buffer's bytes.
pub(super) fn bind_packed(
    data_type: DataType,
    sizes: impl IntoIterator<Item = Vec<u32>>,
) -> (Vec<(TensorDesc, u64)>, u64) {
    let mut offset = 0;
    let mut bound = Vec::new();
    for sizes in sizes {
        let desc = TensorDesc::packed(data_type, sizes);
        let next = offset + desc.total_bytes;
        bound.push((desc, offset));
        offset = round_up(next, BINDING_ALIGNMENT);
    }
    let bytes = bound.last().map_or(0, |(d, o)| o + d.total_bytes);
    (bound, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fewest_dispatches_that_fit() {
        let none = || -> Result<Vec<u64>, String> { Err("no cuts".to_string()) };
        assert_eq!(Schedule::fewest(10, 8, |_| true, none), Ok(Schedule::Whole));
        assert_eq!(
            Schedule::fewest(10, 8, |n| n <= 3, none),
            Ok(Schedule::Rounds(3))
        );
        let cut = || Ok(vec![0, 4, 8]);
        let pieces = Schedule::fewest(10, 8, |_| false, cut).unwrap();
        assert_eq!(pieces, Schedule::Pieces(vec![0, 4, 8]));
        assert_eq!(pieces.dispatch_count(10, 8), 20);
        let piece = Span::Piece {
            round: 2,
            range: 4..8,
        };
        assert_eq!(pieces.span(5, 10), piece);
        let rounds = Schedule::Rounds(3);
        assert_eq!(rounds.dispatch_count(10, 8), 4);
        assert_eq!(rounds.span(3, 10), Span::Rounds { first: 9, count: 1 });
        assert_eq!(Schedule::fewest(0, 8, |_| false, none), Ok(Schedule::Whole));
        assert_eq!(Schedule::Whole.dispatch_count(0, 8), 0);
    }

    #[test]
    fn cuts_fill_each_piece_and_bindings_are_aligned() {
        // 1000 bytes in runs of 300, 300, 400 under a 512-byte budget, in 4-byte units.
        let cuts = greedy_cuts([300, 300, 400], 512, 4, 4, "join").unwrap();
        assert_eq!(cuts.first(), Some(&0));
        assert_eq!(cuts.last(), Some(&1000));
        assert!(cuts.windows(2).all(|w| w[1] - w[0] <= 512 && w[1] % 4 == 0));
        let refused = greedy_cuts([300], 2, 4, 4, "split").unwrap_err();
        assert!(
            refused.ends_with("cannot hold a piece of the split"),
            "{refused}"
        );
        let (bound, bytes) = bind_packed(DataType::UInt8, [vec![1, 1, 5, 1], vec![1, 1, 3, 1]]);
        assert_eq!(bound[1].1, BINDING_ALIGNMENT);
        assert_eq!(bytes, BINDING_ALIGNMENT + bound[1].0.total_bytes);
        assert_eq!(aligned_bytes([5, 3], 2), BINDING_ALIGNMENT + 8);
    }
}
