//! A whole `.pt` file as tjoin reads it: the ZIP form (directory, data.pkl, storages and their
//! bounds) or the legacy form (five pickles, then counted storages). Never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tjoin::format::{pickle, zip};

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let _ = common::with_file(data, |file, len, name| {
        if data.starts_with(b"PK") {
            let members = zip::directory(file, len).ok()?;
            let archive = pickle::archive_of(&members)?;
            pickle::read_zip(file, name, &members, &archive, None).ok()
        } else {
            pickle::read_legacy(file, len, name, None).ok()
        }
    });
});
