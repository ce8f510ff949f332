//! The arithmetic of buffer sizes and alignments: rounding to a multiple, and the least
//! common multiple of two granules.

use crate::dtype::gcd;

/// `value` rounded up to a multiple of `to`.
pub(super) fn round_up(value: u64, to: u64) -> u64 {
    value.div_ceil(to) * to
}

/// `value` rounded down to a multiple of `to`.
pub(super) fn round_down(value: u64, to: u64) -> u64 {
    value / to * to
}

/// The least common multiple of `a` and `b`.
pub(super) fn lcm(a: u64, b: u64) -> u64 {
    a / gcd(a, b) * b
}
