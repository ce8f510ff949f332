//! `tjoin split --backend`: where there is no DirectML (Linux, CI) it fails cleanly and
//! `auto` falls back to the CPU engine, saying why; on Windows (and under Wine in CI) splits
//! through DirectML's Split are compared byte for byte with the CPU engine's, for .npy and
//! .safetensors inputs and outputs on several axes (ignored elsewhere).

use std::fs;
use std::path::Path;

use crate::util::{assert_mentions, refused, tjoin, write_npy};

/// A C-order .npy file of `descr` (`size` bytes an element) and `shape` at `path`, its bytes
/// counting up so that every element differs from its neighbours.
fn counting(path: &Path, descr: &str, size: usize, shape: &[u64]) {
    let count = shape.iter().product::<u64>() as usize * size;
    let data: Vec<u8> = (0..count).map(|i| (i * 7 % 251) as u8).collect();
    write_npy(path, descr, shape, false, &data);
}

#[cfg(not(windows))]
#[test]
fn split_through_directml_fails_cleanly_where_there_is_none() {
    let dir = tempfile::tempdir().unwrap();
    counting(&dir.path().join("x.npy"), "<f4", 4, &[4, 6]);
    let args = [
        "split",
        "--backend",
        "directml",
        "-a",
        "1",
        "--parts",
        "2",
        "x.npy",
        "-o",
        "p{part}.npy",
    ];
    let stderr = refused(dir.path(), &args, 1);
    assert!(
        stderr.starts_with("tjoin: error: DirectML is unavailable"),
        "{stderr}"
    );
    if cfg!(feature = "directml") {
        assert!(stderr.contains("DirectML runs on Windows only"), "{stderr}");
    } else {
        assert!(
            stderr.contains("without the `directml` cargo feature"),
            "{stderr}"
        );
    }
    assert!(stderr.contains("--backend auto runs the split"), "{stderr}");
    assert_eq!(
        crate::util::dir_entries(dir.path()),
        ["x.npy"],
        "no output, no temporary file"
    );
}

#[cfg(not(windows))]
#[test]
fn split_auto_falls_back_to_the_cpu_engine_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    counting(&d.join("x.npy"), "<f4", 4, &[4, 6]);
    let split = |backend: &str, prefix: &str| {
        let template = format!("{prefix}{{part}}.npy");
        tjoin()
            .current_dir(d)
            .args(["split", "--backend", backend, "-a", "1", "--parts", "3"])
            .args(["x.npy", "-o", &template])
            .assert()
            .success();
        (0..3)
            .map(|k| fs::read(d.join(format!("{prefix}{k}.npy"))).unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(split("auto", "auto"), split("cpu", "cpu"));
    let assert = tjoin()
        .current_dir(d)
        .args(["split", "--backend", "auto", "--dry-run", "-a", "1"])
        .args(["--parts", "3", "x.npy", "-o", "p{part}.npy"])
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    let line = stdout.lines().nth(1).unwrap_or_default();
    assert!(
        line.starts_with("backend: cpu, as --backend auto chose: DirectML is unavailable"),
        "{stdout}"
    );
}

#[test]
fn split_on_the_cpu_prints_no_backend_line_and_refuses_an_adapter() {
    let dir = tempfile::tempdir().unwrap();
    counting(&dir.path().join("x.npy"), "<f4", 4, &[4, 6]);
    let assert = tjoin()
        .current_dir(dir.path())
        .args(["split", "--dry-run", "-a", "1", "--parts", "2", "x.npy"])
        .args(["-o", "p{part}.npy"])
        .assert()
        .success();
    assert!(!String::from_utf8_lossy(&assert.get_output().stdout).contains("backend:"));
    let args = [
        "split",
        "--dml-adapter",
        "warp",
        "-a",
        "1",
        "--parts",
        "2",
        "x.npy",
        "-o",
        "p{part}.npy",
    ];
    assert_mentions(
        &refused(dir.path(), &args, 2),
        &["--dml-adapter applies to --backend directml"],
    );
}

/// Splits through DirectML (on WARP, or `TJOIN_TEST_DML_ADAPTER`'s adapter: Wine has no
/// WARP) and through the CPU engine, .npy and .safetensors in and out, on every axis of a
/// rank-3 tensor of three element types, into even, uneven and empty parts, and compares
/// the outputs byte for byte; a Fortran-order input is refused with the reason, and
/// `--backend auto` splits it on the CPU engine.
#[test]
#[cfg_attr(
    not(all(windows, feature = "directml")),
    ignore = "DirectML runs on Windows only, with `cargo test --features directml`"
)]
fn splits_through_directml_match_the_cpu_engine() {
    let adapter = std::env::var("TJOIN_TEST_DML_ADAPTER").unwrap_or_else(|_| "warp".to_string());
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let inputs = [("f4", "<f4", 4), ("f2", "<f2", 2), ("i1", "|i1", 1)];
    for (name, descr, size) in inputs {
        counting(&d.join(format!("{name}.npy")), descr, size, &[6, 10, 8]);
        tjoin()
            .current_dir(d)
            .args(["-a", "0", "--name", "t", &format!("{name}.npy")])
            .args(["-o", &format!("{name}.safetensors")])
            .assert()
            .success();
    }
    // Every axis of every type and format, each with one of the cuts in turn: each case
    // starts tjoin.exe twice under Wine, and DirectML's Split itself is compared on 240
    // random cases in one process (examples/dml_split_compare.rs).
    let cuts: [&[&str]; 3] = [&["--parts", "2"], &["--parts", "3"], &["--sizes", "2,0,4"]];
    let cases = inputs
        .iter()
        .flat_map(|i| ["npy", "safetensors"].map(|ext| (i.0, ext)));
    for (combo, (name, ext)) in cases.enumerate() {
        for (k, axis) in ["0", "1", "2", "-1"].into_iter().enumerate() {
            // --sizes must add up to the axis's length: 6 on axis 0 only.
            let cut = cuts[(combo + k) % if axis == "0" { 3 } else { 2 }];
            let input = format!("{name}.{ext}");
            let split = |backend: &[&str], prefix: &str| {
                let template = format!("{prefix}{{part}}.{ext}");
                tjoin()
                    .current_dir(d)
                    .arg("split")
                    .args(backend)
                    .args(["-a", axis])
                    .args(cut)
                    .args([&input, "-o", &template])
                    .assert()
                    .success();
                let parts = if cut[1] == "2" { 2 } else { 3 };
                (0..parts)
                    .map(|k| fs::read(d.join(format!("{prefix}{k}.{ext}"))).unwrap())
                    .collect::<Vec<_>>()
            };
            let cpu = split(&["--backend", "cpu"], "cpu");
            let gpu = split(&["--backend", "directml", "--dml-adapter", &adapter], "gpu");
            assert!(cpu == gpu, "{input} on axis {axis} by {cut:?} differ");
        }
    }
    write_npy(&d.join("f.npy"), "<f4", &[4, 6], true, &[0u8; 96]);
    let args = [
        "split",
        "--backend",
        "directml",
        "--dml-adapter",
        &adapter,
        "-a",
        "1",
        "--parts",
        "2",
        "f.npy",
        "-o",
        "fp{part}.npy",
    ];
    assert_mentions(
        &refused(d, &args, 2),
        &["cannot run this split through DirectML", "Fortran order"],
    );
    tjoin()
        .current_dir(d)
        .args(["split", "--backend", "auto", "--dml-adapter", &adapter])
        .args(["-a", "1", "--parts", "2", "f.npy", "-o", "fp{part}.npy"])
        .assert()
        .success();
}
