//! A distributed checkpoint proven whole (issue 41, item 1): the files
//! `HuggingFaceStorageWriter(save_distributed=True)` writes record no full shape, so without
//! the last rank's file every tensor is smaller and its blocks still tile it. A model's
//! checkpoint of that form is consolidated only when config.json or `--like` proves its
//! shapes; torch's default form records every full shape (`tests/integration/dcp_default.rs`).
//! fixtures/dcp/model/ is a model's MLP on 3 ranks, written by torch
//! (fixtures/make_dcp_fixtures.py), with a config.json giving its intermediate_size.

use std::fs;
use std::path::Path;

use crate::util::{assert_mentions, dir_entries, refused, succeeds};

const MODEL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/dcp/model");

/// A folder `checkpoint/` in a fresh folder holding the model case's rank files but those
/// `without` names (and its config.json, with `config`).
fn checkpoint(without: &[&str], config: bool) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("checkpoint");
    fs::create_dir(&folder).unwrap();
    for name in dir_entries(Path::new(MODEL)) {
        let rank = name.starts_with("shard-") && !without.contains(&name.as_str());
        if rank || (config && name == "config.json") {
            fs::copy(Path::new(MODEL).join(&name), folder.join(&name)).unwrap();
        }
    }
    dir
}

#[test]
fn a_hf_form_checkpoint_missing_its_last_rank_is_refused() {
    let last = "shard-00003-model-00001-of-00001.safetensors";
    let args = ["checkpoint/", "-o", "model.safetensors"];
    // Without its last file, nothing tells: refused, saying what would prove it.
    let dir = checkpoint(&[last], false);
    assert_mentions(
        &refused(dir.path(), &args, 2),
        &[
            "cannot tell whether every rank's file of the distributed checkpoint input 1 \
             (checkpoint/) is here",
            "model.layers.0.mlp.up_proj.weight  [4, 4] from its blocks",
            "hint: prove it with the model's config.json",
        ],
    );
    assert!(!dir.path().join("model.safetensors").exists());
    // config.json's intermediate_size shows the rank missing.
    let dir = checkpoint(&[last], true);
    assert_mentions(
        &refused(dir.path(), &args, 2),
        &[
            "model.layers.0.mlp.up_proj.weight  [4, 4]: 4 along axis 0, but \
           checkpoint/config.json gives 6 (intermediate_size)",
        ],
    );
    // Every file: config.json proves it whole, and so does --like.
    let expected = fs::read(Path::new(MODEL).join("expected.safetensors")).unwrap();
    let dir = checkpoint(&[], true);
    succeeds(dir.path(), &args);
    assert!(fs::read(dir.path().join("model.safetensors")).unwrap() == expected);
    let dir = checkpoint(&[], false);
    refused(dir.path(), &args, 2);
    let like = format!("{MODEL}/expected.safetensors");
    succeeds(
        dir.path(),
        &["--like", &like, "checkpoint/", "-o", "model.safetensors"],
    );
    assert!(fs::read(dir.path().join("model.safetensors")).unwrap() == expected);
    // With --like, the missing last file is refused by the reference's shapes.
    let dir = checkpoint(&[last], false);
    let words = ["--like", &like, "checkpoint/", "-o", "model.safetensors"];
    assert_mentions(
        &refused(dir.path(), &words, 2),
        &["would not have the shape"],
    );
}
