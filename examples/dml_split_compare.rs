//! Splits random tensors (shapes, axes, element types, part counts, empty parts included)
//! through DirectML's Split and through a plain CPU split of the same bytes, in this one
//! process, and compares every part byte for byte. .ci/directml-wine.sh runs it under Wine.
//!
//!     cargo run --example dml_split_compare -- SEED CASES [--suffix TEXT]
//!
//! `TJOIN_DML_BUFFER_BUDGET` in the environment lowers the device's buffer budget, as for the
//! join, so that the same cases take several dispatches (whole rounds, or pieces of a round).
//! Prints `ok` or `FAIL` and the case, then `dml_split_compare: cases N ok M failed, splits
//! N`; exits 1 when a case failed.
#![allow(clippy::disallowed_macros)] // a tool for tests, not tjoin

use std::io;
use std::path::{Path, PathBuf};

use tjoin::backend::directml::{self, Adapter, Session};
use tjoin::dtype::DType;
use tjoin::format::Sink;

/// A part's bytes, in memory.
struct Part(Vec<u8>, PathBuf);

impl Sink for Part {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.0.extend_from_slice(bytes);
        Ok(())
    }

    fn name(&self) -> &Path {
        &self.1
    }
}

/// xorshift64*: reproducible cases from the seed, without a dependency.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Element types DirectML has (native form at some levels) and lacks (always reinterpreted).
const TYPES: &[&str] = &[
    "float32",
    "float16",
    "int8",
    "uint8",
    "int16",
    "uint16",
    "int32",
    "uint32",
    "int64",
    "uint64",
    "float64",
    "bool",
    "bfloat16",
    "complex64",
];

/// The plain CPU split: for each index before the axis, each part's run in turn.
fn cpu_split(data: &[u8], rounds: u64, runs: &[u64]) -> Vec<Vec<u8>> {
    let mut parts: Vec<Vec<u8>> = runs.iter().map(|_| Vec::new()).collect();
    let mut at = 0usize;
    for _ in 0..rounds {
        for (part, &run) in parts.iter_mut().zip(runs) {
            part.extend_from_slice(&data[at..at + run as usize]);
            at += run as usize;
        }
    }
    parts
}

/// One random case: its description, or why it failed.
fn case(session: &mut Session, random: &mut Random, index: u64) -> Result<String, String> {
    let dtype =
        DType::from_name(TYPES[random.below(TYPES.len() as u64) as usize]).expect("a known type");
    let rank = 1 + random.below(5) as usize;
    // Now and then a large dim, so that budgets of a few KiB cut rounds into pieces.
    let mut shape: Vec<u64> = (0..rank).map(|_| 1 + random.below(6)).collect();
    if random.below(4) == 0 {
        let d = random.below(rank as u64) as usize;
        shape[d] = 500 + random.below(3000);
    }
    let axis = random.below(rank as u64) as usize;
    let count = 1 + random.below(5) as usize;
    // Sizes along the axis that add up to it, some of them 0.
    let along = shape[axis] + random.below(4);
    shape[axis] = along;
    let mut cuts: Vec<u64> = (0..count - 1).map(|_| random.below(along + 1)).collect();
    cuts.sort_unstable();
    let mut sizes = Vec::with_capacity(count);
    let mut last = 0;
    for cut in cuts.into_iter().chain([along]) {
        sizes.push(cut - last);
        last = cut;
    }
    let name = format!("case {index}: {dtype} {shape:?} on axis {axis} into {sizes:?}");
    let itemsize = dtype.itemsize();
    let elements: u64 = shape.iter().product();
    let data: Vec<u8> = (0..elements * itemsize)
        .map(|_| random.next() as u8)
        .collect();
    let inner: u64 = shape[axis + 1..].iter().product();
    let rounds: u64 = shape[..axis].iter().product();
    let runs: Vec<u64> = sizes.iter().map(|s| s * inner * itemsize).collect();
    let expected = cpu_split(&data, rounds, &runs);
    let plan = session
        .plan_split(&dtype, &shape, axis, &sizes)
        .map_err(|why| format!("{name}: DirectML declined: {why}"))?;
    let mut parts: Vec<Part> = (0..count)
        .map(|p| Part(Vec::new(), PathBuf::from(format!("part{p}"))))
        .collect();
    let mut sinks: Vec<&mut dyn Sink> = parts.iter_mut().map(|p| p as &mut dyn Sink).collect();
    session.split(&plan, &data, &mut sinks).map_err(|e| {
        format!(
            "{name}: DirectML failed: {}",
            tjoin::error::render(&e, false)
        )
    })?;
    for (p, (got, want)) in parts.iter().zip(&expected).enumerate() {
        if got.0 != *want {
            let at = got.0.iter().zip(want).position(|(a, b)| a != b);
            return Err(format!(
                "{name}: part {p} differs from byte {} ({} bytes through DirectML, {} by the \
                 CPU)",
                at.unwrap_or(got.0.len().min(want.len())),
                got.0.len(),
                want.len()
            ));
        }
    }
    Ok(format!(
        "{name} ({} bytes; {})",
        data.len(),
        plan.describe()
    ))
}

fn main() {
    let mut argv = std::env::args().skip(1);
    let usage = "usage: dml_split_compare SEED CASES [--suffix TEXT]";
    let seed: u64 = argv.next().and_then(|s| s.parse().ok()).expect(usage);
    let cases: u64 = argv.next().and_then(|s| s.parse().ok()).expect(usage);
    let suffix = match argv.next().as_deref() {
        Some("--suffix") => format!(" {}", argv.next().expect(usage)),
        _ => String::new(),
    };
    let mut session = match directml::open(Adapter::Default) {
        Ok(session) => session,
        Err(why) => {
            println!("FAIL  {why}");
            println!("dml_split_compare: cases 0 ok 1 failed, splits 0");
            std::process::exit(1);
        }
    };
    let mut random = Random(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let (mut passed, mut failed) = (0, 0);
    for index in 0..cases {
        match case(&mut session, &mut random, index) {
            Ok(said) => {
                passed += 1;
                println!("ok    split {said}{suffix}");
            }
            Err(why) => {
                failed += 1;
                println!("FAIL  split {why}{suffix}");
            }
        }
    }
    // Read by .ci/directml-wine.sh.
    println!("dml_split_compare: cases {passed} ok {failed} failed, splits {passed}");
    std::process::exit(i32::from(failed > 0));
}
