//! Flags that mean one thing: `--format` is always the output's format, the plan as JSON is
//! `--dry-run=json` (and then a refusal is JSON too), shapes as tjoin prints them, CRLF lists.

use std::fs;

use crate::util::{f32_le, read_npy, refused, succeeds, write_npy};

/// a.npy (float32 [1, 2]) and b.npy (float32 [2, 2]) in `dir`.
pub(crate) fn two_inputs(dir: &std::path::Path) {
    write_npy(
        &dir.join("a.npy"),
        "<f4",
        &[1, 2],
        false,
        &f32_le(&[1.0, 2.0]),
    );
    write_npy(
        &dir.join("b.npy"),
        "<f4",
        &[2, 2],
        false,
        &f32_le(&[3.0, 4.0, 5.0, 6.0]),
    );
}

#[test]
fn format_names_the_output_format_in_a_dry_run_too() {
    let dir = tempfile::tempdir().unwrap();
    two_inputs(dir.path());
    // A file, and standard output (planned, not refused for want of --format).
    for output in ["out.npy", "-"] {
        let args = [
            "--dry-run",
            "-a",
            "0",
            "a.npy",
            "b.npy",
            "-o",
            output,
            "--format",
            "json",
        ];
        let plan = String::from_utf8(succeeds(dir.path(), &args)).unwrap();
        assert!(plan.contains(&format!("output: {output}  json")), "{plan}");
    }
}

#[test]
fn a_refused_json_dry_run_prints_the_refusal_as_json_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    two_inputs(dir.path());
    let output = crate::util::tjoin()
        .current_dir(dir.path())
        .args(["--dry-run=json", "-a", "1", "a.npy", "b.npy"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.starts_with("tjoin: error: "), "{stderr}");
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let refusal = &json["error"]["refusals"][0];
    assert_eq!(json["error"]["exit_code"], 2);
    assert!(
        refusal["headline"].as_str().unwrap().contains("axis 1"),
        "{json}"
    );
    assert!(
        refusal["details"][1].as_str().unwrap().contains("b.npy"),
        "{json}"
    );
    assert!(
        refusal["hint"].as_str().unwrap().contains("axis 0"),
        "{json}"
    );
}

#[test]
fn a_plain_dry_run_refusal_prints_nothing_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    two_inputs(dir.path());
    refused(dir.path(), &["--dry-run", "-a", "1", "a.npy", "b.npy"], 2);
}

#[test]
fn expect_shape_takes_the_shape_as_tjoin_and_python_print_it() {
    let dir = tempfile::tempdir().unwrap();
    two_inputs(dir.path());
    for shape in ["3,2", "[3, 2]", "(3, 2)"] {
        let args = [
            "-a",
            "0",
            "a.npy",
            "b.npy",
            "-o",
            "out.npy",
            "--expect-shape",
            shape,
        ];
        succeeds(dir.path(), &args);
        assert_eq!(read_npy(&dir.path().join("out.npy")).shape, [3, 2]);
    }
    let args = [
        "-a",
        "0",
        "a.npy",
        "b.npy",
        "-o",
        "x.npy",
        "--expect-shape",
        "[2, 2]",
    ];
    let stderr = refused(dir.path(), &args, 2);
    assert!(stderr.contains("[3, 2]"), "{stderr}");
}

#[test]
fn a_file_list_with_crlf_line_ends_names_the_same_files() {
    let dir = tempfile::tempdir().unwrap();
    two_inputs(dir.path());
    fs::write(dir.path().join("list.txt"), "a.npy\r\nb.npy\r\n").unwrap();
    let args = ["-a", "0", "--files-from", "list.txt", "-o", "out.npy"];
    succeeds(dir.path(), &args);
    assert_eq!(read_npy(&dir.path().join("out.npy")).shape, [3, 2]);
}

#[test]
fn help_groups_the_flags_under_headings_in_order_and_fits_100_columns() {
    let help = crate::util::tjoin().arg("--help").output().unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    let headings: Vec<&str> = help
        .lines()
        .filter(|line| line.ends_with(':') && !line.starts_with(' '))
        .collect();
    // As cargo and ripgrep order theirs: what goes in, what is done, what comes out, then
    // the checks, the checkpoint rules, the engine and the job of several workers; the
    // examples end the help. The
    // subcommands come first, as clap lists them.
    let expected = [
        "Commands:",
        "Arguments:",
        "Options:",
        "Input:",
        "Join:",
        "Output:",
        "Checks:",
        "Checkpoints:",
        "Engine:",
        "Workers:",
        "Examples:",
    ];
    assert_eq!(headings, expected, "{help}");
    let wide: Vec<&str> = help.lines().filter(|l| l.chars().count() > 100).collect();
    assert!(wide.is_empty(), "lines past 100 columns: {wide:#?}");
    let split = crate::util::tjoin()
        .args(["split", "--help"])
        .output()
        .unwrap();
    let split = String::from_utf8(split.stdout).unwrap();
    assert!(split.contains("Usage: tjoin split [OPTIONS]"), "{split}");
    let wide: Vec<&str> = split.lines().filter(|l| l.chars().count() > 100).collect();
    assert!(wide.is_empty(), "split: lines past 100 columns: {wide:#?}");
}
