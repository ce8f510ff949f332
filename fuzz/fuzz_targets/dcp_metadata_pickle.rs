//! A DCP `.metadata` file's bytes straight into its reader (`src/input/dcp/metadata.rs`, through
//! `tjoin::fuzzing::dcp_metadata`): the restricted pickle machine, then the reading of its
//! `Metadata`, `TensorStorageMetadata`, chunks and `storage_data`, without the rank files or a
//! run around them, so that every input reaches the reader in microseconds. Never a panic, a
//! hang or an allocation without bound: a count of entries or a reason. `seed.sh` seeds it
//! with the fixtures' `.metadata` files and `fixtures/attack/dcp_fanout/.metadata`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = tjoin::fuzzing::dcp_metadata(data);
});
