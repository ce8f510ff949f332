//! One test per refusal: the exit code, what stderr says, and that nothing was written.
//!
//! Every test runs tjoin inside a fresh temp folder with relative file names, so messages can
//! be matched on `a.npy`, and the folder must hold exactly the inputs afterwards: no output
//! file and no stray temp file.

use std::fs;
use std::path::Path;

use tempfile::TempDir;

use crate::util::{assert_mentions, f32_le, fails_cleanly, read_npy, refused, tjoin, write_npy};

/// A temp folder holding `<f4` inputs of the given shapes, named `a.npy`, `b.npy`, ...
fn folder_with_f32(shapes: &[&[u64]]) -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (i, shape) in shapes.iter().enumerate() {
        let count = shape.iter().product::<u64>() as usize;
        let values: Vec<f32> = (0..count).map(|v| v as f32).collect();
        let name = format!("{}.npy", char::from(b'a' + i as u8));
        write_npy(
            &dir.path().join(name),
            "<f4",
            shape,
            false,
            &f32_le(&values),
        );
    }
    dir
}

/// A usage error from clap: exit 2, no output, and a stderr that shows the usage.
#[track_caller]
fn usage_error(dir: &Path, args: &[&str]) {
    let stderr = fails_cleanly(dir, args, b"", 2);
    assert_mentions(&stderr, &["Usage:"]);
}

#[track_caller]
fn assert_hint(stderr: &str) {
    assert!(
        stderr.lines().any(|l| l.starts_with("hint: ")),
        "no `hint: ` line in stderr:\n{stderr}"
    );
}

// ---- usage (clap) --------------------------------------------------------------------------

#[test]
fn missing_inputs_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    usage_error(dir.path(), &["-a", "0", "-o", "out.npy"]);
}

#[test]
fn missing_output_is_a_usage_error() {
    let dir = folder_with_f32(&[&[2, 3], &[2, 3]]);
    usage_error(dir.path(), &["-a", "0", "a.npy", "b.npy"]);
}

#[test]
fn missing_axis_is_refused_with_the_axis_a_user_needs() {
    // Plain files: numpy's default.
    let dir = folder_with_f32(&[&[2, 3], &[2, 3]]);
    let stderr = refused(dir.path(), &["a.npy", "b.npy", "-o", "out.npy"], 2);
    assert_mentions(
        &stderr,
        &[
            "no axis given",
            "-a/--axis",
            "hint: add -a 0 to join along the first axis",
        ],
    );
    assert!(!stderr.contains("onnx-1"), "{stderr}");
    // A checkpoint merge of a model no built-in family fits (a family tjoin recognizes merges
    // by its built-in rules): one refusal, and the rules files that exist.
    let merge = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/containers/tp");
    let (tp0, tp1) = (merge.join("tp0.safetensors"), merge.join("tp1.safetensors"));
    let args = [
        tp0.to_str().unwrap(),
        tp1.to_str().unwrap(),
        "-o",
        "out.safetensors",
    ];
    let stderr = refused(dir.path(), &args, 2);
    assert_mentions(
        &stderr,
        &[
            "no axis given for 10 tensors that no rule decides",
            "`layers.0.down_proj.weight`",
            "hint: name the rules file of the model's family with --rules (the repository's \
             rules/ folder holds bert-mlm.rules, bert.rules,",
            "llama.rules,",
        ],
    );
    assert_eq!(stderr.matches("tjoin: error:").count(), 1, "{stderr}");
    // The hint names the files the folder holds.
    let mut shipped: Vec<String> =
        fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("rules"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".rules"))
            .collect();
    shipped.sort();
    assert_mentions(&stderr, &[&format!("folder holds {})", shipped.join(", "))]);
}

#[test]
fn help_mentions_axis() {
    let output = tjoin().arg("--help").output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&output.stdout).contains("--axis"));
}

#[test]
fn version_prints_name_and_version() {
    let output = tjoin().arg("--version").output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&output.stdout).contains("tjoin 0.1.0"));
}

// ---- axis ----------------------------------------------------------------------------------

#[test]
fn negative_axis_counts_from_the_back() {
    let dir = folder_with_f32(&[&[2, 1], &[2, 2]]);
    tjoin()
        .current_dir(dir.path())
        .args(["-a", "-1", "a.npy", "b.npy", "-o", "out.npy"])
        .assert()
        .success();
    let out = read_npy(&dir.path().join("out.npy"));
    assert_eq!(out.shape, [2, 3]);
    assert_eq!(out.data, f32_le(&[0.0, 0.0, 1.0, 1.0, 2.0, 3.0]));
}

#[test]
fn axis_past_the_rank_is_refused() {
    let dir = folder_with_f32(&[&[2, 3], &[2, 3]]);
    let stderr = refused(
        dir.path(),
        &["-a", "2", "a.npy", "b.npy", "-o", "out.npy"],
        2,
    );
    assert_mentions(&stderr, &["axis 2 is out of range", "-2 to 1"]);
}

#[test]
fn negative_axis_past_the_rank_is_refused() {
    let dir = folder_with_f32(&[&[2, 3], &[2, 3]]);
    let stderr = refused(
        dir.path(),
        &["-a", "-3", "a.npy", "b.npy", "-o", "out.npy"],
        2,
    );
    assert_mentions(&stderr, &["axis -3 is out of range", "-2 to 1"]);
}

// ---- join rules ----------------------------------------------------------------------------

#[test]
fn rank_mismatch_is_refused() {
    let dir = folder_with_f32(&[&[2, 3], &[2, 3, 1]]);
    let stderr = refused(
        dir.path(),
        &["-a", "0", "a.npy", "b.npy", "-o", "out.npy"],
        2,
    );
    assert_mentions(
        &stderr,
        &[
            "rank",
            "a.npy",
            "b.npy",
            "input 1",
            "input 2",
            "[2, 3]",
            "[2, 3, 1]",
        ],
    );
}

#[test]
fn scalar_input_is_refused() {
    let dir = folder_with_f32(&[&[], &[]]);
    let stderr = refused(
        dir.path(),
        &["-a", "0", "a.npy", "b.npy", "-o", "out.npy"],
        2,
    );
    assert_mentions(&stderr, &["scalar", "a.npy"]);
}

#[test]
fn dtype_mismatch_is_refused_with_a_hint() {
    let dir = folder_with_f32(&[&[2, 3]]);
    write_npy(&dir.path().join("b.npy"), "<f8", &[2, 3], false, &[0; 48]);
    let stderr = refused(
        dir.path(),
        &["-a", "0", "a.npy", "b.npy", "-o", "out.npy"],
        2,
    );
    assert_mentions(&stderr, &["float32", "float64", "a.npy", "b.npy"]);
    assert_hint(&stderr);
}

/// DirectML's example 1 on the wrong axis.
#[test]
fn dims_mismatch_names_the_dimension_and_the_axes_that_work() {
    let dir = folder_with_f32(&[&[1, 1, 2, 3], &[1, 1, 2, 4]]);
    let stderr = refused(
        dir.path(),
        &["-a", "1", "a.npy", "b.npy", "-o", "out.npy"],
        2,
    );
    assert_mentions(
        &stderr,
        &[
            "cannot join along axis 1",
            "dimension 3",
            "a.npy",
            "b.npy",
            "[1, 1, 2, 3]",
            "[1, 1, 2, 4]",
            "4 != 3",
            "hint: these inputs can only be joined along axis 3 (or -1)",
        ],
    );
}

#[test]
fn dims_mismatch_reports_every_mismatch() {
    let dir = folder_with_f32(&[&[1, 1, 2, 3], &[1, 1, 2, 4], &[1, 2, 2, 5]]);
    let stderr = refused(
        dir.path(),
        &["-a", "0", "a.npy", "b.npy", "c.npy", "-o", "out.npy"],
        2,
    );
    assert_mentions(
        &stderr,
        &[
            "dimension 1",
            "dimension 3",
            "2 != 1",
            "4 != 3",
            "5 != 3",
            "c.npy",
        ],
    );
    let hint = stderr
        .lines()
        .find(|l| l.starts_with("hint: "))
        .unwrap_or_else(|| panic!("no hint:\n{stderr}"));
    assert!(
        hint.contains("no axis"),
        "the hint should say no axis can join them: {hint}"
    );
}

#[test]
fn object_array_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    // The data of an object array is a pickle; its content does not matter here.
    write_npy(
        &dir.path().join("a.npy"),
        "|O",
        &[2],
        false,
        b"\x80\x02cnumpy\n.",
    );
    let stderr = refused(dir.path(), &["-a", "0", "a.npy", "-o", "out.npy"], 2);
    assert!(
        stderr.to_lowercase().contains("object"),
        "stderr lacks `object`:\n{stderr}"
    );
    assert_mentions(&stderr, &["a.npy"]);
}

// ---- reading -------------------------------------------------------------------------------

#[test]
fn data_shorter_than_the_shape_is_refused() {
    let dir = folder_with_f32(&[&[4, 4], &[4, 4]]);
    write_npy(&dir.path().join("a.npy"), "<f4", &[4, 4], false, &[0; 20]);
    let stderr = refused(
        dir.path(),
        &["-a", "0", "a.npy", "b.npy", "-o", "out.npy"],
        1,
    );
    assert_mentions(&stderr, &["a.npy", "64", "20"]);
}

#[test]
fn missing_input_is_refused() {
    let dir = folder_with_f32(&[&[2, 3]]);
    let stderr = refused(
        dir.path(),
        &["-a", "0", "a.npy", "missing.npy", "-o", "out.npy"],
        1,
    );
    assert_mentions(&stderr, &["missing.npy", "No such file"]);
}

#[test]
fn text_file_is_refused() {
    let dir = folder_with_f32(&[&[2, 3]]);
    fs::write(dir.path().join("b.npy"), "this is not an npy file\n").unwrap();
    let stderr = refused(
        dir.path(),
        &["-a", "0", "a.npy", "b.npy", "-o", "out.npy"],
        1,
    );
    assert_mentions(&stderr, &["b.npy"]);
}

// ---- writing -------------------------------------------------------------------------------

#[test]
fn output_in_a_missing_folder_is_refused() {
    let dir = folder_with_f32(&[&[2, 3], &[2, 3]]);
    let stderr = refused(
        dir.path(),
        &["-a", "0", "a.npy", "b.npy", "-o", "nowhere/out.npy"],
        1,
    );
    assert_mentions(&stderr, &["nowhere/out.npy"]);
}

#[test]
fn an_unexpected_output_shape_lists_the_inputs_and_the_fix() {
    let dir = folder_with_f32(&[&[2, 2], &[3, 2]]);
    let args = [
        "-a",
        "0",
        "a.npy",
        "b.npy",
        "-o",
        "out.npy",
        "--expect-shape",
        "4,2",
    ];
    assert_mentions(
        &refused(dir.path(), &args, 2),
        &[
            "the output would have shape [5, 2], not the expected [4, 2]",
            "2 + 3 = 5",
            "input 1 (a.npy) is [2, 2]",
            "input 2 (b.npy) is [3, 2]",
            "hint: check the inputs and the axis",
        ],
    );
}
