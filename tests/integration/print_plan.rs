//! `--print-plan`: after writing, the plan that was carried out on stdout, the one `--dry-run`
//! prints; with `=json`, a refusal, a failure or a usage mistake as JSON on stdout too, as with
//! `--dry-run=json` (the Python module reads both from there), for the join, the append and
//! `tjoin split`.

use std::fs;
use std::path::Path;
use std::process::Output;

use crate::flags::two_inputs;
use crate::util::{dir_entries, read_npy, refused, succeeds, tjoin};

fn json(stdout: &[u8]) -> serde_json::Value {
    serde_json::from_slice(stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(stdout)))
}

fn run(dir: &Path, args: &[&str]) -> Output {
    tjoin().current_dir(dir).args(args).output().unwrap()
}

#[test]
fn a_join_prints_the_plan_it_carried_out_as_the_dry_run_plans_it() {
    let dir = tempfile::tempdir().unwrap();
    two_inputs(dir.path());
    let job = ["-a", "0", "a.npy", "b.npy", "-o", "out.npy"];
    let planned = succeeds(dir.path(), &[&job[..], &["--dry-run=json"]].concat());
    assert!(!dir.path().join("out.npy").exists());
    let done = succeeds(dir.path(), &[&job[..], &["--print-plan=json"]].concat());
    assert_eq!(json(&done), json(&planned));
    assert_eq!(json(&done)["output"]["path"], "out.npy");
    assert_eq!(read_npy(&dir.path().join("out.npy")).shape, [3, 2]);
    // As text, it says the output was written, not that nothing was.
    let text = succeeds(dir.path(), &[&job[..], &["--print-plan"]].concat());
    let text = String::from_utf8(text).unwrap();
    assert!(text.starts_with("written; the join passed "), "{text}");
    assert!(
        text.contains("output: out.npy  npy  float32  [3, 2]"),
        "{text}"
    );
}

#[test]
fn a_split_and_an_append_print_the_plan_they_carried_out() {
    let dir = tempfile::tempdir().unwrap();
    two_inputs(dir.path());
    let split = [
        "split",
        "-a",
        "0",
        "--parts",
        "2",
        "b.npy",
        "-o",
        "p{part}.npy",
    ];
    let planned = succeeds(dir.path(), &[&split[..], &["--dry-run=json"]].concat());
    let done = succeeds(dir.path(), &[&split[..], &["--print-plan=json"]].concat());
    assert_eq!(json(&done), json(&planned));
    assert_eq!(json(&done)["outputs"][1]["path"], "p1.npy");
    assert_eq!(read_npy(&dir.path().join("p1.npy")).shape, [1, 2]);
    let text = succeeds(dir.path(), &[&split[..], &["--print-plan"]].concat());
    let text = String::from_utf8(text).unwrap();
    assert!(
        text.starts_with("written; b.npy (npy) was split into 2 files"),
        "{text}"
    );

    let append = ["--append", "-a", "0", "b.npy", "a.npy"];
    let planned = succeeds(dir.path(), &[&append[..], &["--dry-run=json"]].concat());
    let done = succeeds(dir.path(), &[&append[..], &["--print-plan=json"]].concat());
    assert_eq!(json(&done), json(&planned));
    assert_eq!(json(&done)["output"]["append"]["offset"], 128 + 16);
    assert_eq!(read_npy(&dir.path().join("b.npy")).shape, [3, 2]);
}

#[test]
fn a_refusal_or_a_failure_after_print_plan_json_is_json_on_stdout_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    two_inputs(dir.path());
    let before = dir_entries(dir.path());
    for (args, code, said) in [
        (
            &["-a", "1", "a.npy", "b.npy", "-o", "x.npy"][..],
            2,
            "axis 1",
        ),
        (
            &["-a", "0", "a.npy", "gone.npy", "-o", "x.npy"],
            1,
            "gone.npy",
        ),
        (
            &[
                "split",
                "-a",
                "5",
                "--parts",
                "2",
                "b.npy",
                "-o",
                "p{part}.npy",
            ],
            2,
            "axis 5",
        ),
    ] {
        let output = run(dir.path(), &[args, &["--print-plan=json"]].concat());
        assert_eq!(output.status.code(), Some(code), "{args:?}");
        let said_json = json(&output.stdout);
        assert_eq!(said_json["error"]["exit_code"], code, "{said_json}");
        let headline = said_json["error"]["refusals"][0]["headline"]
            .as_str()
            .unwrap();
        assert!(headline.contains(said), "{args:?}: {headline}");
        // The text for people is on stderr as always.
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.starts_with(&format!("tjoin: error: {headline}")),
            "{stderr}"
        );
        assert_eq!(dir_entries(dir.path()), before, "{args:?}");
    }
}

#[test]
fn a_refused_json_dry_run_of_a_split_prints_the_refusal_as_json_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    two_inputs(dir.path());
    let args = [
        "split",
        "-a",
        "5",
        "--parts",
        "2",
        "b.npy",
        "-o",
        "p{part}.npy",
    ];
    let output = run(dir.path(), &[&args[..], &["--dry-run=json"]].concat());
    assert_eq!(output.status.code(), Some(2));
    let said = json(&output.stdout);
    let headline = said["error"]["refusals"][0]["headline"].as_str().unwrap();
    assert!(headline.contains("axis 5"), "{said}");
}

#[test]
fn a_usage_mistake_is_json_on_stdout_when_the_plan_is_asked_for_as_json() {
    let dir = tempfile::tempdir().unwrap();
    two_inputs(dir.path());
    for (args, said, detail) in [
        (
            &["-a", "0", "a.npy", "--bogus", "-o", "x.npy"][..],
            "'--bogus'",
            None,
        ),
        (
            &["-a", "0", "a.npy", "--json-form", "x", "-o", "x.npy"],
            "'x' for '--json-form",
            Some("[possible values: nested, object]"),
        ),
        (
            &[
                "split",
                "b.npy",
                "--parts",
                "2",
                "-a",
                "0",
                "--bogus",
                "-o",
                "p{part}.npy",
            ],
            "'--bogus'",
            None,
        ),
    ] {
        for json_flag in ["--print-plan=json", "--dry-run=json"] {
            let output = run(dir.path(), &[args, &[json_flag]].concat());
            assert_eq!(output.status.code(), Some(2), "{args:?}");
            let said_json = json(&output.stdout);
            let refusal = &said_json["error"]["refusals"][0];
            assert!(
                refusal["headline"].as_str().unwrap().contains(said),
                "{said_json}"
            );
            if let Some(detail) = detail {
                assert_eq!(refusal["details"][0], detail, "{said_json}");
            }
            // clap's text for people is on stderr as always.
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(stderr.starts_with("error: "), "{stderr}");
        }
        // Without it, stdout stays empty, as before.
        let output = run(dir.path(), args);
        assert_eq!(output.status.code(), Some(2));
        assert!(output.stdout.is_empty(), "{args:?}");
    }
    // `--print-plan=json` after `--` is an input's name, which asks for nothing.
    let output = run(
        dir.path(),
        &[
            "-a",
            "0",
            "--bogus",
            "-o",
            "x.npy",
            "--",
            "--print-plan=json",
        ],
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
}

#[test]
fn print_plan_refuses_standard_output_and_a_dry_run() {
    let dir = tempfile::tempdir().unwrap();
    two_inputs(dir.path());
    let args = [
        "-a",
        "0",
        "a.npy",
        "b.npy",
        "-o",
        "-",
        "--format",
        "npy",
        "--print-plan",
    ];
    let stderr = refused(dir.path(), &args, 2);
    assert!(
        stderr.contains("--print-plan prints the plan on standard output"),
        "{stderr}"
    );
    let args = [
        "-a",
        "0",
        "a.npy",
        "b.npy",
        "-o",
        "x.npy",
        "--print-plan",
        "--dry-run",
    ];
    let output = run(dir.path(), &args);
    assert_eq!(output.status.code(), Some(2));
    assert!(!dir.path().join("x.npy").exists());
    fs::remove_dir_all(dir.path()).unwrap();
}
