//! The restricted pickle machine and the walk of what it builds never panic, hang or
//! allocate without bound, whatever the bytes: every fault is a refusal or damage.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tjoin::format::pickle::{state, vm};

fuzz_target!(|data: &[u8]| {
    if let Ok(pickled) = vm::run(data, vm::LIMITS) {
        let _ = state::holdings(&pickled);
    }
});
