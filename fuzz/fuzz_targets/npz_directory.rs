//! The .npz reader (the zip directory, then each member's .npy header) never panics, hangs or
//! allocates without bound: the bytes are the archive, read through the same driver and
//! member reader a file or any other source goes through, with no file written.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tjoin::error::InputRef;
use tjoin::format::zip;

fuzz_target!(|data: &[u8]| {
    let name = InputRef {
        position: 1,
        location: std::path::Path::new("fuzz-input").into(),
        tensor: None,
    };
    if let Ok(members) = zip::read_directory(&data, data.len() as u64) {
        let _ = tjoin::format::npz::read(members, &data, &name, None);
    }
});
