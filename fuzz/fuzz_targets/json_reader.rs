//! The JSON tensor reader never panics, hangs, overflows its stack or allocates without
//! bound, whatever the text (ragged arrays, deep nesting, huge shapes, bad numbers): the
//! bytes go straight to `read_text`, its entry from bytes (the converted data still goes to
//! a spill file, as in a run).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tjoin::error::InputRef;
use tjoin::sys::spill::Spill;

fuzz_target!(|data: &[u8]| {
    let name = InputRef {
        position: 1,
        location: std::path::Path::new("fuzz-input").into(),
        tensor: None,
    };
    let _ = tjoin::format::json::read_text(data, &name, &mut Spill::default());
});
