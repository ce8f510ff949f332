//! The .safetensors header reader never panics, hangs or allocates without bound.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let _ = common::with_file(data, tjoin::format::safetensors::read);
});
