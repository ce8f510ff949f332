//! DCP's default form (`src/input/dcp/distcp.rs`, `src/input/dcp/metadata.rs`) through
//! `join::run`: a fuzzed `.metadata` pickle in a folder beside the two `.distcp` files of
//! `fixtures/dcp_default/ranks2/`, consolidated as the folder a user names. The pickle machine,
//! the reading of its `Metadata` records, every chunk it places (at any offset and length in
//! the `.distcp` files, a `torch.save` archive or a safetensors file there), the grid's check
//! against the recorded sizes, the engine and the writer: an output or an error, never a panic,
//! a hang or an allocation without bound. `seed.sh` seeds it with the fixtures' `.metadata`
//! files.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use tjoin::config::JoinRules;
use tjoin::format::Format;

#[path = "whole_run.rs"]
mod whole_run;

/// The rank files every input is read beside.
const RANKS: [(&str, &[u8]); 2] = [
    (
        "__0_0.distcp",
        include_bytes!("../../fixtures/dcp_default/ranks2/__0_0.distcp"),
    ),
    (
        "__1_0.distcp",
        include_bytes!("../../fixtures/dcp_default/ranks2/__1_0.distcp"),
    ),
];

/// The checkpoint folder, its rank files written once.
fn checkpoint() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = whole_run::folder().join("checkpoint");
        std::fs::create_dir_all(&dir).expect("the checkpoint folder");
        for (name, bytes) in RANKS {
            std::fs::write(dir.join(name), bytes).expect("a rank file is written");
        }
        dir
    })
}

fuzz_target!(|data: &[u8]| {
    let dir = checkpoint();
    let metadata = dir.join(".metadata");
    std::fs::write(&metadata, data).expect("the .metadata is written");
    whole_run::join(
        &[metadata],
        vec![dir.as_path()],
        JoinRules::default(),
        Format::SafeTensors,
    );
});
