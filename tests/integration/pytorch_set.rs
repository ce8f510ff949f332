//! PyTorch checkpoint sets (`pytorch_model.bin.index.json` and its `.bin` shards, as
//! transformers' `save_pretrained(safe_serialization=False)` writes them) read as one input,
//! as a safetensors index is, with the same checks. fixtures/pytorch_set/ holds the tensors of
//! fixtures/sharded/expected/model.safetensors (written by `make_pytorch_set_fixtures.py`),
//! so the outputs must be that file and the huggingface_hub split of it, byte for byte;
//! fixtures/transformers/ is a set transformers' own `save_pretrained` wrote, with the outputs
//! huggingface_hub and safetensors make of it.

use std::fs;
use std::path::{Path, PathBuf};

use crate::sharded::{assert_same_folder, fixture};
use crate::util::{assert_mentions, refused, succeeds};

const SET: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/pytorch_set/model");
const INDEX: &str = "pytorch_model.bin.index.json";

/// A copy of the set in `dir/to`.
fn copy_set(dir: &Path, to: &str) -> PathBuf {
    let target = dir.join(to);
    fs::create_dir_all(&target).unwrap();
    for entry in fs::read_dir(SET).unwrap() {
        let entry = entry.unwrap();
        fs::copy(entry.path(), target.join(entry.file_name())).unwrap();
    }
    target
}

#[test]
fn a_bin_index_or_its_folder_converts_into_what_save_file_and_huggingface_hub_write() {
    let dir = tempfile::tempdir().unwrap();
    copy_set(dir.path(), "ckpt");
    let index = format!("ckpt/{INDEX}");
    let expected = fs::read(fixture("expected/model.safetensors")).unwrap();
    for input in [index.as_str(), "ckpt", "ckpt/"] {
        succeeds(dir.path(), &[input, "-o", "m.safetensors"]);
        let written = fs::read(dir.path().join("m.safetensors")).unwrap();
        assert!(written == expected, "{input}: not save_file's bytes");
        fs::remove_file(dir.path().join("m.safetensors")).unwrap();
    }
    succeeds(
        dir.path(),
        &[&index, "-o", "out/", "--max-shard-size", "600"],
    );
    assert_same_folder(&dir.path().join("out"), &fixture("expected/model_600"));
    // The input's own files are left as they were.
    assert_same_folder(&dir.path().join("ckpt"), Path::new(SET));
}

#[test]
fn a_bin_index_that_disagrees_with_its_shards_is_refused_as_a_safetensors_index_is() {
    let dir = tempfile::tempdir().unwrap();
    let folder = copy_set(dir.path(), "ckpt");
    let index = format!("ckpt/{INDEX}");
    let text = fs::read_to_string(folder.join(INDEX)).unwrap();
    // A tensor mapped to a shard that does not hold it.
    let moved = text.replacen(
        "\"embeddings.LayerNorm.bias\": \"pytorch_model-00001-of-00003.bin\"",
        "\"embeddings.LayerNorm.bias\": \"pytorch_model-00002-of-00003.bin\"",
        1,
    );
    assert_ne!(moved, text);
    fs::write(folder.join(INDEX), &moved).unwrap();
    let stderr = refused(dir.path(), &[&index, "-o", "m.safetensors"], 1);
    assert_mentions(
        &stderr,
        &[
            "does not agree with its shards",
            "pytorch_model-00001-of-00003.bin holds tensor `embeddings.LayerNorm.bias`, which \
             the index maps to pytorch_model-00002-of-00003.bin",
        ],
    );
    // A shard outside the index's folder is not opened.
    let outside = text.replace(
        "\"pytorch_model-00003-of-00003.bin\"",
        "\"../pytorch_model-00003-of-00003.bin\"",
    );
    fs::write(folder.join(INDEX), &outside).unwrap();
    let stderr = refused(dir.path(), &[&index, "-o", "m.safetensors"], 1);
    assert_mentions(&stderr, &["which is not a path inside the index's folder"]);
    // A shard that is missing is named, with the index that lists it.
    fs::write(folder.join(INDEX), &text).unwrap();
    fs::remove_file(folder.join("pytorch_model-00002-of-00003.bin")).unwrap();
    let stderr = refused(dir.path(), &["ckpt", "-o", "m.safetensors"], 1);
    assert_mentions(
        &stderr,
        &["pytorch_model-00002-of-00003.bin", "the index", "lists it"],
    );
    assert!(!dir.path().join("m.safetensors").exists());
}

#[cfg(unix)]
#[test]
fn a_fifo_a_bin_index_lists_is_refused_without_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let folder = copy_set(dir.path(), "ckpt");
    let shard = folder.join("pytorch_model-00003-of-00003.bin");
    fs::remove_file(&shard).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(&shard)
        .status()
        .unwrap();
    assert!(made.success());
    let stderr = refused(dir.path(), &["ckpt", "-o", "m.safetensors"], 1);
    assert_mentions(&stderr, &["pytorch_model-00003-of-00003.bin"]);
}

#[test]
fn a_bin_set_is_a_like_reference_and_its_shards_are_planned_from_their_pickles() {
    let dir = tempfile::tempdir().unwrap();
    copy_set(dir.path(), "ckpt");
    fs::copy(
        fixture("expected/model.safetensors"),
        dir.path().join("model.safetensors"),
    )
    .unwrap();
    // The set checks the shapes of a join of the same model, by its index or its folder.
    for reference in [format!("ckpt/{INDEX}"), "ckpt".to_string()] {
        let args = [
            "model.safetensors",
            "--like",
            &reference,
            "-o",
            "m.safetensors",
        ];
        succeeds(dir.path(), &args);
    }
    let out = crate::sharded::run(dir.path(), &["ckpt", "--dry-run"]);
    let plan = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success());
    assert_mentions(
        &plan,
        &["pytorch_model.bin.index.json  pt  13 tensors", "3 shards"],
    );
}

/// fixtures/transformers/: a tiny Llama written by transformers' own
/// `save_pretrained(safe_serialization=False)` (4 `.bin` shards, the index, config.json), and
/// what huggingface_hub's `save_torch_state_dict` and safetensors' `save_file` make of
/// `torch.load` of it (`make_transformers_fixtures.py`).
#[test]
fn a_set_save_pretrained_wrote_converts_as_huggingface_hub_and_save_file_write_it() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/transformers");
    let model = fixtures.join("llama");
    let index = model.join(INDEX).to_string_lossy().into_owned();
    let dir = tempfile::tempdir().unwrap();
    succeeds(
        dir.path(),
        &[&index, "-o", "converted/", "--max-shard-size", "6000"],
    );
    assert_same_folder(&dir.path().join("converted"), &fixtures.join("expected"));
    // Its folder, config.json and all, is the set; into one file, save_file's bytes.
    let folder = model.to_string_lossy().into_owned();
    succeeds(dir.path(), &[&folder, "-o", "model.safetensors"]);
    let written = fs::read(dir.path().join("model.safetensors")).unwrap();
    assert!(written == fs::read(fixtures.join("expected.safetensors")).unwrap());
}

/// `fixtures/pytorch/NAME`.
fn pytorch_fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/pytorch")
        .join(name)
}

#[test]
fn a_folder_holding_one_pytorch_file_is_that_file() {
    let dir = tempfile::tempdir().unwrap();
    let expected = fs::read(pytorch_fixture("views.expected.safetensors")).unwrap();
    let converts = |folder: &str| {
        succeeds(dir.path(), &[folder, "-o", "m.safetensors"]);
        let written = fs::read(dir.path().join("m.safetensors")).unwrap();
        assert!(written == expected, "{folder}: not save_file's bytes");
        fs::remove_file(dir.path().join("m.safetensors")).unwrap();
    };
    // A model folder as save_pretrained wrote it before safetensors: the weights in
    // pytorch_model.bin beside config.json; and a folder holding one torch.save file.
    for (folder, file) in [("gpt2", "pytorch_model.bin"), ("run", "last.pt")] {
        fs::create_dir(dir.path().join(folder)).unwrap();
        fs::copy(
            pytorch_fixture("views.pt"),
            dir.path().join(folder).join(file),
        )
        .unwrap();
        fs::write(dir.path().join(folder).join("config.json"), "{}").unwrap();
        converts(folder);
        let plan = String::from_utf8(succeeds(dir.path(), &[folder, "--dry-run"])).unwrap();
        assert_mentions(&plan, &[file]);
    }
    // A Trainer's checkpoint folder: the model's file is the one from_pretrained reads, not
    // the optimizer's or the training arguments'.
    for other in ["optimizer.pt", "rng_state.pth", "training_args.bin"] {
        fs::copy(
            pytorch_fixture("bare.pt"),
            dir.path().join("gpt2").join(other),
        )
        .unwrap();
    }
    converts("gpt2");
    // Without a file so named, several are refused, listed, and none is read.
    fs::rename(
        dir.path().join("gpt2/pytorch_model.bin"),
        dir.path().join("gpt2/weights.bin"),
    )
    .unwrap();
    let stderr = refused(dir.path(), &["gpt2", "-o", "m.safetensors"], 2);
    assert_mentions(
        &stderr,
        &[
            "(gpt2) is a folder with no index and 4 PyTorch checkpoint files",
            "optimizer.pt",
            "weights.bin",
            "name the file to read instead of the folder",
        ],
    );
    assert!(!dir.path().join("m.safetensors").exists());
    // A safetensors checkpoint beside a PyTorch file is read, as from_pretrained reads it.
    fs::copy(
        fixture("expected/model.safetensors"),
        dir.path().join("run/model.safetensors"),
    )
    .unwrap();
    succeeds(dir.path(), &["run", "-o", "m.safetensors"]);
    let written = fs::read(dir.path().join("m.safetensors")).unwrap();
    assert!(written == fs::read(fixture("expected/model.safetensors")).unwrap());
    // A folder with no checkpoint at all says what it looked for.
    fs::create_dir(dir.path().join("empty")).unwrap();
    let stderr = refused(dir.path(), &["empty", "-o", "x.safetensors"], 1);
    assert_mentions(
        &stderr,
        &["holds no checkpoint", "no .bin, .pt or .pth file"],
    );
}
