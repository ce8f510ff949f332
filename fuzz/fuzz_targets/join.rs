//! The whole run, not one reader: two fuzzed inputs of any format (sniffed as tjoin sniffs
//! them), joined along a fuzzed axis into an output of a fuzzed format, through the same
//! `join::run` a user's command line reaches. It must return an output or an error, never
//! panic, hang or allocate without bound; the copy stage, the early copy and the writers run
//! too, which the reader targets never reach.
//!
//! The input's layout: byte 0 the axis (as i8, folded to -4..=4), byte 1 the output format
//! (low 2 bits) and the inputs' extensions (next 4 bits, 2 each: for inputs the sniffing
//! cannot place), bytes 2-3 where the first input ends (u16, little-endian, folded into the
//! rest), then the two inputs.
#![no_main]

use std::path::PathBuf;

use libfuzzer_sys::fuzz_target;
use tjoin::config::JoinRules;
use tjoin::format::Format;

#[path = "whole_run.rs"]
mod whole_run;

const FORMATS: [Format; 4] = [Format::Npy, Format::Npz, Format::SafeTensors, Format::Json];
const EXTENSIONS: [&str; 4] = ["npy", "npz", "safetensors", "json"];

fuzz_target!(|data: &[u8]| {
    let [axis, kinds, split_lo, split_hi, rest @ ..] = data else {
        return;
    };
    let axis = i64::from(*axis as i8) % 5;
    let output_format = FORMATS[usize::from(kinds & 3)];
    let split = usize::from(u16::from_le_bytes([*split_lo, *split_hi])) % (rest.len() + 1);
    let (first, second) = rest.split_at(split);
    let dir = whole_run::folder();
    let mut inputs = Vec::new();
    for (index, bytes) in [first, second].into_iter().enumerate() {
        let extension = EXTENSIONS[usize::from((kinds >> (2 + 2 * index)) & 3)];
        let path = dir.join(format!("in{index}.{extension}"));
        std::fs::write(&path, bytes).expect("the input is written");
        inputs.push(path);
    }
    let rules = JoinRules {
        axis: Some(axis),
        ..Default::default()
    };
    let named = inputs.iter().map(PathBuf::as_path).collect();
    whole_run::join(&inputs, named, rules, output_format);
});
