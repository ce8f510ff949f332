//! The .safetensors header parser never panics, hangs or allocates without bound, whatever
//! the bytes: `parse_header` on the bytes as a file's first (length field, JSON header,
//! offsets, dtypes, byte counts), then, for a header it accepts, the check of where its data
//! ends against the bytes that follow it. No file is written.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tjoin::format::safetensors::{Parse, check_data_len, parse_header};

fuzz_target!(|data: &[u8]| {
    match parse_header(data) {
        Ok(header) => {
            let data_len = data.len() as u64 - header.data_start;
            let _ = check_data_len(&header, data_len);
        }
        // Asked for more, it asks for more than it had.
        Err(Parse::Need(needed)) => assert!(needed > data.len() as u64),
        Err(Parse::Malformed(_)) => {}
    }
});
