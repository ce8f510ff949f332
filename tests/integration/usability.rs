//! --stack, --no-clobber, the progress bar and colored errors.

use std::fs;
use std::path::Path;

use crate::util::{assert_mentions, dir_entries, f32_le, read_npy, refused, tjoin, write_npy};

/// DirectML example 2's three tensors as 2-D float32 `[[1,2],[3,4]]`, `[[5,6],[7,8]]`,
/// `[[9,10],[11,12]]`, written as a.npy, b.npy, c.npy.
fn three_2x2(dir: &Path) {
    for (name, first) in [("a.npy", 1.0), ("b.npy", 5.0), ("c.npy", 9.0)] {
        let values: Vec<f32> = (0..4).map(|i| first + i as f32).collect();
        write_npy(&dir.join(name), "<f4", &[2, 2], false, &f32_le(&values));
    }
}

fn stacked(dir: &Path, axis: &str) -> (Vec<u64>, Vec<u8>) {
    tjoin()
        .current_dir(dir)
        .args([
            "--stack", "-a", axis, "a.npy", "b.npy", "c.npy", "-o", "out.npy",
        ])
        .assert()
        .success();
    let out = read_npy(&dir.join("out.npy"));
    (out.shape, out.data)
}

#[test]
fn stack_inserts_the_new_axis_where_numpy_stack_does() {
    let dir = tempfile::tempdir().unwrap();
    three_2x2(dir.path());
    let cases: [(&str, &[u64], [f32; 12]); 3] = [
        (
            "0",
            &[3, 2, 2],
            [1., 2., 3., 4., 5., 6., 7., 8., 9., 10., 11., 12.],
        ),
        (
            "1",
            &[2, 3, 2],
            [1., 2., 5., 6., 9., 10., 3., 4., 7., 8., 11., 12.],
        ),
        (
            "-1",
            &[2, 2, 3],
            [1., 5., 9., 2., 6., 10., 3., 7., 11., 4., 8., 12.],
        ),
    ];
    for (axis, shape, values) in cases {
        let (got_shape, data) = stacked(dir.path(), axis);
        assert_eq!(got_shape, shape, "axis {axis}");
        assert_eq!(data, f32_le(&values), "axis {axis}");
    }
}

#[test]
fn stack_equals_join_after_reshape() {
    let dir = tempfile::tempdir().unwrap();
    three_2x2(dir.path());
    let (_, stacked_data) = stacked(dir.path(), "2");
    for name in ["a", "b", "c"] {
        let input = read_npy(&dir.path().join(format!("{name}.npy")));
        write_npy(
            &dir.path().join(format!("{name}3.npy")),
            "<f4",
            &[2, 2, 1],
            false,
            &input.data,
        );
    }
    tjoin()
        .current_dir(dir.path())
        .args(["-a", "2", "a3.npy", "b3.npy", "c3.npy", "-o", "joined.npy"])
        .assert()
        .success();
    assert_eq!(read_npy(&dir.path().join("joined.npy")).data, stacked_data);
}

#[test]
fn stack_refuses_different_shapes_and_axes_out_of_range() {
    let dir = tempfile::tempdir().unwrap();
    three_2x2(dir.path());
    write_npy(&dir.path().join("d.npy"), "<f4", &[2, 3], false, &[0; 24]);
    let args = ["--stack", "-a", "0", "a.npy", "d.npy", "-o", "out.npy"];
    assert_mentions(
        &refused(dir.path(), &args, 2),
        &[
            "--stack needs inputs of one shape",
            "input 2 (d.npy) is [2, 3]",
            "hint: inputs that differ along one dimension join along it without --stack",
        ],
    );
    let args = ["--stack", "-a", "3", "a.npy", "b.npy", "-o", "out.npy"];
    assert_mentions(
        &refused(dir.path(), &args, 2),
        &[
            "input 1 (a.npy) of rank 2 (valid: -3 to 2)",
            "hint: -a 0 puts the new dimension first",
        ],
    );
}

#[test]
fn stack_joins_scalars_into_a_vector() {
    let dir = tempfile::tempdir().unwrap();
    write_npy(
        &dir.path().join("a.npy"),
        "<f4",
        &[],
        false,
        &f32_le(&[1.5]),
    );
    write_npy(
        &dir.path().join("b.npy"),
        "<f4",
        &[],
        false,
        &f32_le(&[2.5]),
    );
    tjoin()
        .current_dir(dir.path())
        .args(["--stack", "-a", "0", "a.npy", "b.npy", "-o", "out.npy"])
        .assert()
        .success();
    let out = read_npy(&dir.path().join("out.npy"));
    assert_eq!(out.shape, [2]);
    assert_eq!(out.data, f32_le(&[1.5, 2.5]));
}

#[test]
fn no_clobber_refuses_an_existing_output_and_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    three_2x2(dir.path());
    fs::write(dir.path().join("out.npy"), "precious").unwrap();
    let args = ["-n", "-a", "0", "a.npy", "b.npy", "-o", "out.npy"];
    assert_mentions(
        &refused(dir.path(), &args, 1),
        &["out.npy: it exists, and --no-clobber forbids"],
    );
    assert_eq!(fs::read(dir.path().join("out.npy")).unwrap(), b"precious");
    tjoin()
        .current_dir(dir.path())
        .args(["--no-clobber", "-a", "0", "a.npy", "b.npy", "-o", "new.npy"])
        .assert()
        .success();
    assert_eq!(read_npy(&dir.path().join("new.npy")).shape, [4, 2]);
}

#[test]
fn progress_always_draws_on_stderr_and_never_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    three_2x2(dir.path());
    let out = tjoin()
        .current_dir(dir.path())
        .args([
            "--progress",
            "always",
            "-a",
            "0",
            "a.npy",
            "b.npy",
            "-o",
            "out.npy",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The bar (if a draw came) is cleared and replaced by one summary line.
    let last = stderr
        .trim_end()
        .rsplit(['\r', '\n'])
        .next()
        .unwrap_or_default();
    assert!(
        last.contains("wrote out.npy: 32 B in ") && last.ends_with("/s)"),
        "{stderr:?}"
    );
}

#[test]
fn progress_stays_silent_off_a_terminal_and_when_quiet() {
    let dir = tempfile::tempdir().unwrap();
    three_2x2(dir.path());
    for args in [
        &["-a", "0"][..],
        &["-q", "--progress", "always", "-a", "0"],
        &["--progress", "never", "-a", "0"],
    ] {
        let out = tjoin()
            .current_dir(dir.path())
            .args(args)
            .args(["a.npy", "b.npy", "-o", "out.npy"])
            .output()
            .unwrap();
        assert!(out.status.success());
        assert!(
            out.stderr.is_empty(),
            "{args:?}: {:?}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(
        dir_entries(dir.path()),
        ["a.npy", "b.npy", "c.npy", "out.npy"]
    );
}

#[test]
fn errors_are_plain_text_off_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    three_2x2(dir.path());
    write_npy(&dir.path().join("d.npy"), "<f4", &[2, 3], false, &[0; 24]);
    let stderr = refused(
        dir.path(),
        &["-a", "0", "a.npy", "d.npy", "-o", "out.npy"],
        2,
    );
    assert!(
        stderr.starts_with("tjoin: error: cannot join along axis 0"),
        "{stderr}"
    );
    assert!(!stderr.contains('\x1b'), "escape codes in {stderr:?}");
}

#[test]
fn no_arguments_print_a_short_usage_and_exit_2() {
    let out = tjoin().output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Usage: tjoin"), "{stderr}");
    assert!(stderr.lines().count() < 12, "not short: {stderr}");
}

#[test]
fn help_has_one_line_per_option_and_four_examples() {
    let out = tjoin().arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    let examples = help.split("Examples:").nth(1).unwrap_or_default();
    // A command indented by 4; a long one goes on indented further.
    let commands = examples
        .lines()
        .filter(|l| l.starts_with("    ") && !l.starts_with("     "))
        .count();
    assert_eq!(commands, 4, "{help}");
    for option in [
        "--axis",
        "--output",
        "--spec",
        "--dry-run",
        "--stack",
        "--no-clobber",
        "--progress",
        "--quiet",
    ] {
        assert!(help.contains(option), "--help lacks {option}");
    }
}

#[test]
fn dry_run_prints_the_plan_of_a_single_join() {
    let dir = tempfile::tempdir().unwrap();
    three_2x2(dir.path());
    let out = tjoin()
        .current_dir(dir.path())
        .args(["--dry-run", "-a", "-1", "a.npy", "b.npy", "-o", "out.npy"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "dry run: nothing written; the join passes ONNX Concat-13's shape rules\n\
         inputs:\n  \
         1  a.npy  npy  float32  [2, 2]  16 bytes\n  \
         2  b.npy  npy  float32  [2, 2]  16 bytes\n\
         axis: 1 (given as -1)\n\
         output: out.npy  npy  float32  [2, 4]  32 bytes\n"
    );
    assert_eq!(dir_entries(dir.path()), ["a.npy", "b.npy", "c.npy"]);
}

#[test]
fn dry_run_prints_one_line_per_tensor_of_a_container_join() {
    let tp = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/containers/tp");
    let args = fs::read_to_string(tp.join("args.txt")).unwrap();
    let out = tjoin()
        .current_dir(&tp)
        .arg("--dry-run")
        .args(args.lines().filter(|l| !l.is_empty()))
        .args([
            "tp0.safetensors",
            "tp1.safetensors",
            // The unsplit model proves the merge complete (issue 41).
            "--like",
            "expected.safetensors",
            "-o",
            "model.safetensors",
        ])
        .output()
        .unwrap();
    let report = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{report}");
    for line in [
        "  1  tp0.safetensors  safetensors  10 tensors",
        "tensors:\n",
        "  position_ids                kept ",
        "  layers.0.down_proj.weight   axis 1 ",
        "  embed.weight                axis 0 ",
        "output: model.safetensors  safetensors  10 tensors",
    ] {
        assert!(report.contains(line), "no {line:?} in\n{report}");
    }
    assert!(!tp.join("model.safetensors").exists());
}

#[test]
fn dry_run_json_is_the_plan_for_scripts() {
    let dir = tempfile::tempdir().unwrap();
    three_2x2(dir.path());
    let out = tjoin()
        .current_dir(dir.path())
        .args([
            "--dry-run=json",
            "--spec",
            "directml:4.1",
            "--stack",
            "-a",
            "-1",
        ])
        .args(["a.npy", "b.npy", "-o", "out.npy"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(plan["spec"], "directml:4.1");
    assert_eq!(plan["rules"], "DirectML Join at feature level 4.1");
    assert_eq!(plan["axis_given"], -1);
    assert_eq!(plan["inputs"][1]["path"], "b.npy");
    assert_eq!(plan["inputs"][1]["format"], "npy");
    assert_eq!(plan["tensors"][0]["axis"], 2);
    assert_eq!(plan["tensors"][0]["shape"], serde_json::json!([2, 2, 2]));
    assert_eq!(plan["tensors"][0]["inputs"], serde_json::json!([1, 2]));
    assert_eq!(plan["output"]["format"], "npy");
    assert_eq!(plan["output"]["bytes"], 32);
    assert_eq!(dir_entries(dir.path()), ["a.npy", "b.npy", "c.npy"]);
}

/// What tjoin reads is said where a new user looks first: `--help`'s first line, the man
/// page's NAME, INPUT's help; `--dry-run` labels a DCP checkpoint as one (it is read as
/// safetensors are, but is none), and a copy of one input is not "by the default axis".
#[test]
fn the_help_and_the_dry_run_name_pytorch_and_dcp_inputs() {
    let help = tjoin().arg("--help").output().unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    let first = help.lines().next().unwrap();
    assert_mentions(first, &["PyTorch .bin/.pt", "DCP"]);
    let input = help.split("[INPUT]...  ").nth(1).unwrap();
    let input = input.split("\n\n").next().unwrap();
    let input = input.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_mentions(
        &input,
        &[
            "PyTorch .bin/.pt files (read without running their pickles)",
            "a DCP checkpoint (the folder of .metadata and .distcp files)",
        ],
    );
    let man =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("man/tjoin.1")).unwrap();
    let name = man.lines().skip_while(|l| *l != ".SH NAME").nth(1).unwrap();
    assert_mentions(name, &["PyTorch .bin/.pt", "DCP"]);

    let dir = tempfile::tempdir().unwrap();
    let ckpt = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/training/causal_lm");
    let out = tjoin()
        .current_dir(dir.path())
        .args([ckpt.to_str().unwrap(), "--dry-run"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_mentions(&text, &["causal_lm  dcp  12 blocks in 1 files"]);
    write_npy(
        &dir.path().join("a.npy"),
        "<f4",
        &[2],
        false,
        &f32_le(&[1.0, 2.0]),
    );
    let out = tjoin()
        .current_dir(dir.path())
        .args(["a.npy", "--dry-run", "-o", "b.npy"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_mentions(
        &text,
        &["copied  float32  [2]  8 bytes  from the only input"],
    );
    assert!(!text.contains("default axis"), "{text}");
}
