//! SplitMix64, the random numbers of the property tests and of `examples/join_cases.rs`
//! (which includes this file by its path, as an example cannot import from a test): small,
//! fast, the same on every machine, and no dependency, so that the data does not come from
//! the code under test. Each user adds the helpers it needs in its own `impl`.

pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}
