//! DeepSpeed ZeRO checkpoints (fixtures/deepspeed/, saved by deepspeed 0.19.8 on gloo CPU
//! processes): consolidated byte for byte into what DeepSpeed's own `zero_to_fp32.py` writes,
//! stage 1's frozen parameters said and kept, and the refusals of folders that are not every
//! rank's files of one save.

use std::fs;
use std::path::{Path, PathBuf};

use crate::util::{assert_mentions, describe_difference, dir_entries, refused, succeeds, tjoin};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/deepspeed");
const TAG: &str = "global_step1";

/// Every saved case: (case, ZeRO stage).
const CASES: &[(&str, u8)] = &[
    ("s1_fp32_ws2", 1),
    ("s1_bf16_ws2", 1),
    ("s1_fp32_ws3", 1),
    ("s2_fp32_ws2", 2),
    ("s2_bf16_ws2", 2),
    ("s2_bf16_ws3", 2),
    ("s3_fp32_ws2", 3),
    ("s3_bf16_ws2", 3),
    ("s3_fp32_ws3", 3),
    ("untied_s2_fp32_ws2", 2),
    ("untied_s3_bf16_ws3", 3),
];

/// The case's folder, which holds its oracles and the checkpoint folder `ckpt/`.
fn case(name: &str) -> PathBuf {
    Path::new(FIXTURES).join(name)
}

/// The checkpoint folder of the case `name`, as DeepSpeed saved it.
fn ckpt(name: &str) -> PathBuf {
    case(name).join("ckpt")
}

/// Runs tjoin on `args` then `-o out.safetensors` in a fresh folder; the output's bytes and
/// stderr.
fn consolidated(args: &[&str]) -> (Vec<u8>, String) {
    let dir = tempfile::tempdir().unwrap();
    let output = tjoin()
        .current_dir(dir.path())
        .args(args)
        .args(["-o", "out.safetensors"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "tjoin {args:?}:\n{stderr}");
    (
        fs::read(dir.path().join("out.safetensors")).unwrap(),
        stderr,
    )
}

#[track_caller]
fn assert_same(case: &str, oracle: &str, actual: &[u8]) {
    let expected = fs::read(self::case(case).join(oracle)).unwrap();
    assert!(
        expected == actual,
        "{case}: differs from {oracle}: {}",
        describe_difference(&expected, actual)
    );
}

#[test]
fn zero_checkpoints_consolidate_into_what_zero_to_fp32_writes() {
    // Stages 1, 2, 3 x fp32, bf16 on 2 and 3 ranks: odd sizes (padded groups, parameters
    // across ranks), a tied head, a frozen layer, float and int64 buffers.
    for &(name, stage) in CASES {
        let folder = ckpt(name);
        let (out, stderr) = consolidated(&[folder.to_str().unwrap()]);
        if stage == 1 {
            // The script's output lacks the frozen layer (#5439); tjoin's holds it, from the
            // model file, and says so.
            assert_same(name, "expected_with_frozen.safetensors", &out);
            assert_mentions(&stderr, &["`frozen.weight`", "`frozen.bias`", "module"]);
        } else {
            assert_same(name, "expected.safetensors", &out);
            assert!(!stderr.contains("frozen"), "{name}: {stderr}");
        }
        // Every run says what it leaves out.
        assert_mentions(
            &stderr,
            &[
                "left out of the output",
                "the optimizer's state (its moments, never read)",
            ],
        );
    }
}

#[test]
fn a_tag_folder_is_read_as_the_checkpoint_latest_names() {
    let tagged = ckpt("s3_fp32_ws3").join(TAG);
    let (out, _) = consolidated(&[tagged.to_str().unwrap()]);
    assert_same("s3_fp32_ws3", "expected.safetensors", &out);
}

#[test]
fn casts_equal_what_torch_to_gives() {
    for (name, cast, oracle) in [
        ("s2_fp32_ws2", "bfloat16", "expected_bf16.safetensors"),
        ("s2_fp32_ws2", "float16", "expected_fp16.safetensors"),
        ("s3_fp32_ws2", "bfloat16", "expected_bf16.safetensors"),
        ("s3_bf16_ws2", "float16", "expected_fp16.safetensors"),
    ] {
        let folder = ckpt(name);
        let (out, _) = consolidated(&[folder.to_str().unwrap(), "--cast", cast]);
        assert_same(name, oracle, &out);
    }
}

#[test]
fn a_sharded_output_equals_the_scripts_shards_and_index() {
    for name in ["untied_s2_fp32_ws2", "untied_s3_bf16_ws3"] {
        let dir = tempfile::tempdir().unwrap();
        let folder = ckpt(name);
        let args = [
            folder.to_str().unwrap(),
            "--max-shard-size",
            "0.2KB",
            "-o",
            "out/",
        ];
        succeeds(dir.path(), &args);
        let expected = case(name).join("expected_sharded");
        let written = dir.path().join("out");
        assert_eq!(dir_entries(&written), dir_entries(&expected), "{name}");
        for file in dir_entries(&expected) {
            let want = fs::read(expected.join(&file)).unwrap();
            let got = fs::read(written.join(&file)).unwrap();
            assert!(
                want == got,
                "{name}/{file}: {}",
                describe_difference(&want, &got)
            );
        }
    }
}

#[test]
fn a_dry_run_says_what_is_left_out_and_where_frozen_parameters_come_from() {
    let dir = tempfile::tempdir().unwrap();
    let folder = ckpt("s1_bf16_ws2");
    let args = [
        folder.to_str().unwrap(),
        "--dry-run",
        "-o",
        "out.safetensors",
    ];
    let output = tjoin().current_dir(dir.path()).args(args).output().unwrap();
    assert!(output.status.success());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_mentions(
        &stdout,
        &[
            "ZeRO stage 1 on 2 ranks",
            "left out, never read: the optimizer's state, its moments \
             (`optimizer_state_dict.base_optimizer_state` of each rank's optimizer file)",
            "`ds_config`",
            "`global_steps`",
            "`head.weight` (of `embed.weight`)",
            "2 frozen parameters (`frozen.weight`, `frozen.bias`)",
            "in bfloat16 as it holds them",
        ],
    );
    assert!(dir_entries(dir.path()).is_empty());
}

/// A copy of the case `name` in a fresh folder, and its tag's folder there.
fn copy_of(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ckpt");
    let tagged = root.join(TAG);
    fs::create_dir_all(&tagged).unwrap();
    fs::copy(ckpt(name).join("latest"), root.join("latest")).unwrap();
    for file in dir_entries(&ckpt(name).join(TAG)) {
        fs::copy(ckpt(name).join(TAG).join(&file), tagged.join(&file)).unwrap();
    }
    (dir, tagged)
}

/// The refusal of the checkpoint in `dir`'s `ckpt/`, exit `code`, with nothing written.
fn refusal_of(dir: &Path, code: i32) -> String {
    let out = dir.join("out");
    fs::create_dir(&out).unwrap();
    let stderr = refused(&out, &["../ckpt", "-o", "model.safetensors"], code);
    assert!(dir_entries(&out).is_empty(), "{stderr}");
    stderr
}

#[test]
fn a_missing_rank_is_refused_naming_its_file() {
    let (dir, tagged) = copy_of("s2_fp32_ws2");
    fs::remove_file(tagged.join("zero_pp_rank_1_mp_rank_00_optim_states.pt")).unwrap();
    let stderr = refusal_of(dir.path(), 2);
    assert_mentions(
        &stderr,
        &[
            "partition count of 2",
            "zero_pp_rank_1_mp_rank_00_optim_states.pt",
        ],
    );
    let (dir, tagged) = copy_of("s3_fp32_ws3");
    fs::remove_file(tagged.join("zero_pp_rank_2_mp_rank_00_model_states.pt")).unwrap();
    let stderr = refusal_of(dir.path(), 2);
    assert_mentions(&stderr, &["zero_pp_rank_2_mp_rank_00_model_states.pt"]);
    let (dir, tagged) = copy_of("s1_fp32_ws2");
    fs::remove_file(tagged.join("mp_rank_00_model_states.pt")).unwrap();
    let stderr = refusal_of(dir.path(), 2);
    assert_mentions(&stderr, &["mp_rank_00_model_states.pt"]);
}

#[test]
fn a_rank_from_another_world_size_is_refused() {
    // Rank 2 of a 3-rank save put beside a 2-rank save's files.
    let (dir, tagged) = copy_of("s1_fp32_ws2");
    let stranger = ckpt("s1_fp32_ws3")
        .join(TAG)
        .join("zero_pp_rank_2_mp_rank_00_optim_states.pt");
    fs::copy(
        stranger,
        tagged.join("zero_pp_rank_2_mp_rank_00_optim_states.pt"),
    )
    .unwrap();
    let stderr = refusal_of(dir.path(), 2);
    assert_mentions(
        &stderr,
        &[
            "zero_pp_rank_2_mp_rank_00_optim_states.pt",
            "partition count",
        ],
    );
}

#[test]
fn files_of_other_kinds_or_sets_are_refused_naming_them() {
    for (extra, says) in [
        (
            "bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt",
            "both bf16_ and plain",
        ),
        (
            "zero_pp_rank_0_mp_rank_01_optim_states.pt",
            "tensor-parallel",
        ),
        (
            "expp_rank_0_mp_rank_00_optim_states.pt",
            "mixture-of-experts",
        ),
        ("layer_01-model_00-model_states.pt", "pipeline-parallel"),
    ] {
        let (dir, tagged) = copy_of("s2_fp32_ws2");
        let source = tagged.join("zero_pp_rank_0_mp_rank_00_optim_states.pt");
        fs::copy(source, tagged.join(extra)).unwrap();
        let stderr = refusal_of(dir.path(), 2);
        assert_mentions(&stderr, &[says, extra]);
    }
}

#[test]
fn shapes_that_do_not_add_up_are_refused() {
    let folder = ckpt("bad_shapes");
    let dir = tempfile::tempdir().unwrap();
    let stderr = refused(
        dir.path(),
        &[folder.to_str().unwrap(), "-o", "x.safetensors"],
        1,
    );
    assert_mentions(&stderr, &["does not add up", "group 0", "param_shapes"]);
    assert!(dir_entries(dir.path()).is_empty());
}

#[test]
fn a_deepspeed_class_that_is_not_a_record_is_refused_by_name() {
    let folder = ckpt("bad_global");
    let dir = tempfile::tempdir().unwrap();
    let stderr = refused(
        dir.path(),
        &[folder.to_str().unwrap(), "-o", "x.safetensors"],
        2,
    );
    assert_mentions(
        &stderr,
        &[
            "zero_pp_rank_1_mp_rank_00_optim_states.pt",
            "OffloadDeviceEnum",
            "a class of DeepSpeed that tjoin does not read",
        ],
    );
    assert!(dir_entries(dir.path()).is_empty());
}

#[test]
fn a_truncated_file_is_refused_naming_it() {
    let (dir, tagged) = copy_of("s3_fp32_ws2");
    let file = tagged.join("zero_pp_rank_1_mp_rank_00_optim_states.pt");
    let bytes = fs::read(&file).unwrap();
    fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
    let stderr = refusal_of(dir.path(), 1);
    assert_mentions(&stderr, &["zero_pp_rank_1_mp_rank_00_optim_states.pt"]);
}

#[test]
fn latest_naming_no_folder_beside_it_is_refused() {
    let (dir, _) = copy_of("s2_fp32_ws2");
    fs::write(dir.path().join("ckpt/latest"), "../../etc\n").unwrap();
    let stderr = refusal_of(dir.path(), 2);
    assert_mentions(&stderr, &["latest", "not the name of a folder beside it"]);
    fs::write(dir.path().join("ckpt/latest"), "global_step9\n").unwrap();
    fs::remove_dir(dir.path().join("out")).unwrap();
    let stderr = refusal_of(dir.path(), 2);
    assert_mentions(&stderr, &["global_step9", "no folder of that name"]);
}

#[cfg(unix)]
#[test]
fn latest_naming_a_link_is_refused() {
    // A tag that is a link leads where the file says, not where the user named.
    let (dir, tagged) = copy_of("s2_fp32_ws2");
    std::os::unix::fs::symlink(&tagged, dir.path().join("ckpt/elsewhere")).unwrap();
    fs::write(dir.path().join("ckpt/latest"), "elsewhere").unwrap();
    let stderr = refusal_of(dir.path(), 2);
    assert_mentions(&stderr, &["`elsewhere`", "a link"]);
}

#[test]
fn a_trainer_folder_with_weights_beside_latest_is_refused_naming_both() {
    // Hugging Face's Trainer saves model.safetensors beside DeepSpeed's `latest`.
    let (dir, _) = copy_of("s2_fp32_ws2");
    let weights = case("s2_fp32_ws2").join("expected.safetensors");
    fs::copy(weights, dir.path().join("ckpt/model.safetensors")).unwrap();
    let stderr = refusal_of(dir.path(), 2);
    assert_mentions(
        &stderr,
        &[
            "model.safetensors",
            "cannot tell which one",
            "ckpt/global_step1",
        ],
    );
    // The tag's folder is read.
    let tagged = dir.path().join("ckpt").join(TAG);
    let (out, _) = consolidated(&[tagged.to_str().unwrap()]);
    assert_same("s2_fp32_ws2", "expected.safetensors", &out);
}
