//! The .npz reader (the zip directory, then each member's .npy header) never panics, hangs or
//! allocates without bound.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let _ = common::with_file(data, |file, len, name| {
        let members = tjoin::format::zip::directory(file, len).ok()?;
        tjoin::format::npz::read(members, file, name, None).ok()
    });
});
