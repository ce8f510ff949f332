//! The .npy header reader never panics, hangs or allocates without bound, whatever the bytes:
//! the pure parser on the bytes as they are, and its driver on them as a whole file (the
//! length checks run too), with no file written.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tjoin::error::InputRef;
use tjoin::format::npy::{self, HeaderBytes, PastEnd};

fuzz_target!(|data: &[u8]| {
    let _ = npy::parse_header(data);
    let from = HeaderBytes {
        head: data,
        rest: &mut std::io::empty(),
        start: 0,
        len: data.len() as u64,
        past_end: PastEnd::Unfinished,
    };
    let name = InputRef {
        position: 1,
        location: std::path::Path::new("fuzz-input").into(),
        tensor: None,
    };
    let _ = npy::read_header(from, &name);
});
