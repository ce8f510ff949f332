//! The GGUF header parser never panics, hangs or allocates without bound, whatever the bytes;
//! asked for more bytes, it asks for more than it had and no more than the file has; a header
//! it accepts encodes back to the very bytes it came from.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tjoin::format::gguf::header::{Parsed, Placed, encode_header, parse_header};

fuzz_target!(|data: &[u8]| {
    let len = data.len() as u64;
    // The driver's way: a few bytes first, then as many as the parser asks for.
    let mut have = data.len().min(64);
    let header = loop {
        match parse_header(&data[..have], len) {
            Ok(Parsed::Header(header)) => break header,
            Ok(Parsed::Need(n)) => {
                assert!(n > have as u64 && n <= len, "asked for {n} with {have} of {len}");
                have = n as usize;
            }
            Err(_) => return,
        }
    };
    let _ = tjoin::format::gguf::check_data(&header, len);
    let kvs: Vec<&[u8]> = header.kvs.iter().map(|kv| &kv.raw[..]).collect();
    let placed: Vec<Placed<'_>> = header
        .tensors
        .iter()
        .map(|info| Placed {
            info,
            offset: info.offset,
        })
        .collect();
    let encoded = encode_header(header.version, &kvs, &placed);
    assert!(encoded.len() as u64 <= header.data_offset);
    assert_eq!(&data[..encoded.len()], &encoded[..]);
});
