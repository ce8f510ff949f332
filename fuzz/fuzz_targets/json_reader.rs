//! The JSON tensor reader never panics, hangs, overflows its stack or allocates without
//! bound, whatever the text (ragged arrays, deep nesting, huge shapes, bad numbers).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tjoin::sys::spill::Spill;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let _ = common::with_file(data, |file, len, name| {
        tjoin::format::json::read(file, len, name, &mut Spill::default())
    });
});
