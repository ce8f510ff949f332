//! PyTorch distributed checkpoints in DCP's default form, as
//! `torch.distributed.checkpoint.save(state_dict, checkpoint_id=folder)` writes them
//! (fixtures/dcp_default/): consolidated into what torch's own `dcp_to_torch_save` gives, byte
//! for byte as `safetensors.torch.save_file` writes it, and the refusals of checkpoints whose
//! files and `.metadata` disagree. Also the HF writer's rank files read through an index.

use std::fs;
use std::path::Path;

use crate::util::{assert_mentions, refused, succeeds};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/dcp_default");

fn fixture(name: &str) -> String {
    format!("{FIXTURES}/{name}")
}

fn expected(file: &str) -> Vec<u8> {
    fs::read(Path::new(FIXTURES).join(file)).unwrap()
}

/// Runs tjoin on `input` (and `extra`) into `out.safetensors` in a fresh folder; its bytes.
fn consolidated(input: &str, extra: &[&str]) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec![input];
    args.extend(extra);
    args.extend(["-o", "out.safetensors"]);
    succeeds(dir.path(), &args);
    fs::read(dir.path().join("out.safetensors")).unwrap()
}

fn dry_run(args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut args = args.to_vec();
    args.extend(["--dry-run", "-o", "out.safetensors"]);
    String::from_utf8(succeeds(dir.path(), &args)).unwrap()
}

#[test]
fn default_writer_folders_consolidate_into_what_dcp_to_torch_save_gives() {
    // Flat keys: 3 ranks (uneven, 3 + 3 + 1 and 3 + 3 + 2, a replicated tensor saved once), 4
    // ranks (an empty last chunk), and Megatron-Core's torch_dist layout (stacked layers,
    // common.pt and metadata.json beside DCP's files): every tensor, under its key.
    for case in ["ranks3", "ranks4", "megatron"] {
        let out = consolidated(&fixture(case), &[]);
        assert!(
            out == expected(&format!("{case}.expected.safetensors")),
            "{case} differs from dcp_to_torch_save's tensors"
        );
    }
    // A `model` entry beside others (an optimizer's state, a step, a list): the model's
    // tensors, named without `model.`. 2 ranks with int64, bool, bfloat16 and 0-d tensors; a
    // 2x2 mesh; the SAFETENSORS serialization.
    for case in ["ranks2", "mesh2x2", "safetensors_format"] {
        let out = consolidated(&fixture(case), &[]);
        assert!(
            out == expected(&format!("{case}.model.expected.safetensors")),
            "{case} differs from dcp_to_torch_save's model tensors"
        );
    }
}

#[test]
fn the_metadata_file_named_is_the_checkpoint_and_a_key_path_after_it_selects() {
    let out = consolidated(&fixture("ranks2/.metadata"), &[]);
    assert!(out == expected("ranks2.model.expected.safetensors"));
    let text = dry_run(&[&fixture("ranks2/.metadata:optim")]);
    assert_mentions(
        &text,
        &["embed.exp_avg  blocks 2 on axis 0  float32  [5, 4]"],
    );
    assert!(!text.contains("proj.weight"), "{text}");
    let text = dry_run(&[&fixture("ranks2/.metadata:model.mask")]);
    assert_mentions(&text, &["model.mask  blocks 2 on axis 1  bool"]);
}

#[test]
fn a_dry_run_says_what_was_chosen_and_what_was_skipped() {
    let text = dry_run(&[&fixture("ranks2")]);
    assert_mentions(
        &text,
        &[
            "9 blocks in 2 files",
            "took the tensors under `model`, the model's entries, named without `model.`",
            "left out 1 tensor under `optim`: name ",
            "skipped 2 entries that are not tensors (`step`, `history`)",
            "embed.weight          blocks 2 on axis 0  float32   [5, 4]",
            "[3:5, 0:4]  input 1 (",
        ],
    );
    let text = dry_run(&[&fixture("megatron")]);
    assert_mentions(
        &text,
        &[
            "skipped common.pt (Megatron-Core's state",
            "decoder.layers.self_attention.linear_qkv.weight  blocks 2 on axis 1  float32   [2, 6, 4]",
        ],
    );
}

#[test]
fn checkpoints_whose_files_and_metadata_disagree_are_refused_naming_the_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, i32, &[&str]); 7] = [
        (
            "bad_missing",
            1,
            &[
                "bad_missing/__1_0.distcp",
                "the checkpoint's .metadata lists it",
            ],
        ),
        (
            "bad_truncated",
            1,
            &[
                "bad_truncated/__1_0.distcp",
                "11284 bytes long",
                "the file is cut short",
            ],
        ),
        (
            "bad_larger",
            2,
            &[
                "tensor `embed.weight`: no block covers [5:6, 0:4]",
                "records its full shape as [6, 4], and its blocks reach only [5, 4]",
            ],
        ),
        (
            "bad_overlap",
            2,
            &[
                "tensor `embed.weight`: two blocks overlap: both cover [2:3, 0:4]",
                "__1_0.distcp:embed.weight)  float32  [2, 4] at [2, 0]",
            ],
        ),
        (
            "bad_transform",
            2,
            &[
                "`model.embed.weight` chunk [3, 4] at [0, 0]",
                "stream transform `zstd`",
            ],
        ),
        (
            "bad_dtype",
            1,
            &[
                "`model.embed.weight` chunk [2, 4] at [3, 0]: .metadata says torch.float64 \
                 [2, 4], but __1_0.distcp holds float32 [2, 4] there (elements [3:5, 0:4]",
            ],
        ),
        (
            "bad_chunk_shape",
            1,
            &[
                "`model.mask` chunk [2, 3] at [0, 2]: .metadata says torch.bool [2, 3], but \
               __1_0.distcp holds bool [2, 2] there (elements [0:2, 2:5]",
            ],
        ),
    ];
    for (case, code, needles) in cases {
        let input = fixture(case);
        let stderr = refused(dir.path(), &[&input, "-o", "out.safetensors"], code);
        assert_mentions(&stderr, needles);
        assert!(!dir.path().join("out.safetensors").exists(), "{case}");
    }
}

#[test]
fn a_distcp_file_named_alone_is_refused_with_its_folder_named() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("ranks2/__0_0.distcp");
    let stderr = refused(dir.path(), &[&input, "-o", "out.safetensors"], 2);
    assert_mentions(
        &stderr,
        &[
            "is one rank's file of a PyTorch distributed checkpoint (.distcp)",
            "hint: name the checkpoint's folder, ",
        ],
    );
}

#[test]
fn hf_rank_files_read_through_an_index_are_placed_by_their_offsets() {
    // The index maps both tensors to the second rank's file only: read as ordinary shards,
    // the tensors came out half their size with exit 0. As blocks, the missing rows are seen.
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("hf_index");
    let stderr = refused(dir.path(), &[&input, "-o", "out.safetensors"], 2);
    assert_mentions(
        &stderr,
        &[
            "tensor `w`: no block covers [0:3, 0:3]",
            "tensor `b`: no block covers [0:3]",
        ],
    );
    // Named themselves, the rank files consolidate, and the dry run says the shapes were
    // inferred.
    let first = fixture("hf_index/shard-00001-model-00001-of-00001.safetensors");
    let second = fixture("hf_index/shard-00002-model-00001-of-00001.safetensors");
    let out = consolidated(&first, &[&second]);
    assert!(out == expected("hf_index.expected.safetensors"));
    let text = dry_run(&[&first, &second]);
    assert_mentions(
        &text,
        &["the full shapes are inferred from the blocks", "--like"],
    );
}

#[test]
fn cast_like_and_a_sharded_output_work_on_the_default_form() {
    // --cast converts the floating-point tensors only.
    let text = dry_run(&[&fixture("ranks2"), "--cast", "float64"]);
    assert_mentions(
        &text,
        &[
            "layers.0.ids          blocks 2 on axis 0  int64    [7]",
            "embed.weight          blocks 2 on axis 0  float64  [5, 4]",
            "mask                  blocks 2 on axis 1  bool     [2, 5]",
        ],
    );
    // --like checks every output shape against a reference.
    let reference = fixture("ranks2.model.expected.safetensors");
    let out = consolidated(&fixture("ranks2"), &["--like", &reference]);
    assert!(out == expected("ranks2.model.expected.safetensors"));
    // A sharded output: several files and their index.
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("mesh2x2");
    succeeds(
        dir.path(),
        &[&input, "-o", "out/", "--max-shard-size", "100"],
    );
    let files = crate::util::dir_entries(&dir.path().join("out"));
    assert!(
        files.contains(&"model.safetensors.index.json".to_string()),
        "{files:?}"
    );
    assert!(files.len() > 2, "{files:?}");
}

/// A hostile `.metadata` is data: a file it names outside the checkpoint's folder is never
/// read (even when it exists and holds the right bytes), and a name holding control
/// characters reaches the terminal escaped. Nothing is written either way.
#[test]
fn a_metadata_naming_files_outside_its_folder_or_with_control_characters_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let metadata = fs::read(Path::new(&fixture("ranks2")).join(".metadata")).unwrap();
    // Same length as `__0_0.distcp`, so that the pickle's lengths still hold.
    for (folder, name) in [
        ("outside", &b"../_0.distcp"[..]),
        ("escape", b"\x1b[31m\x07.distc"),
    ] {
        let copy = d.join(folder);
        fs::create_dir(&copy).unwrap();
        for entry in fs::read_dir(fixture("ranks2")).unwrap() {
            let entry = entry.unwrap();
            fs::copy(entry.path(), copy.join(entry.file_name())).unwrap();
        }
        let at = metadata
            .windows(12)
            .position(|w| w == b"__0_0.distcp")
            .unwrap();
        let mut hostile = metadata.clone();
        hostile[at..at + 12].copy_from_slice(name);
        fs::write(copy.join(".metadata"), hostile).unwrap();
    }
    fs::copy(
        Path::new(&fixture("ranks2")).join("__0_0.distcp"),
        d.join("_0.distcp"),
    )
    .unwrap();
    let stderr = refused(d, &["outside", "-o", "out.safetensors"], 1);
    assert_mentions(
        &stderr,
        &["../_0.distcp", "not a path inside the checkpoint's folder"],
    );
    let stderr = refused(d, &["escape", "-o", "out.safetensors"], 1);
    assert!(
        !stderr.contains('\x1b') && !stderr.contains('\x07'),
        "{stderr:?}"
    );
    assert_mentions(&stderr, &["\\x1b[31m\\x07.distc"]);
    assert!(!d.join("out.safetensors").exists());
}
