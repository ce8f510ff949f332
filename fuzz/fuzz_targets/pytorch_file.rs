//! A whole `.pt` file as tjoin reads it: the ZIP form (directory, data.pkl, storages and their
//! bounds) or the legacy form (five pickles, then counted storages). Never a panic. The bytes
//! are the file, read through the same driver a file or any other source goes through, with
//! no file written (a strided view is gathered from the bytes rather than a map of a file).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tjoin::error::InputRef;
use tjoin::format::{pickle, zip};

fuzz_target!(|data: &[u8]| {
    let name = InputRef {
        position: 1,
        location: std::path::Path::new("fuzz-input").into(),
        tensor: None,
    };
    let len = data.len() as u64;
    if data.starts_with(b"PK") {
        let Ok(members) = zip::read_directory(&data, len) else {
            return;
        };
        if let Some(archive) = pickle::archive_of(&members) {
            let _ = pickle::read_zip(&data, &name, &members, &archive, None);
        }
    } else {
        let _ = pickle::read_legacy(&data, len, &name, None);
    }
});
