//! `--backend`: the DirectML backend's failure path where there is no DirectML (Linux, CI),
//! `--backend auto` falling back to the CPU engine, the check that the generated bindings are
//! current, and on Windows the worked examples of `docs/rules.md` through the GPU compared
//! with the CPU engine's output (ignored elsewhere).

use std::fs;
use std::path::Path;

use crate::util::{assert_mentions, f32_le, refused, tjoin, write_npy};

/// DirectML example 1's inputs in `dir`.
fn example_1(dir: &Path) {
    let a: Vec<f32> = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let b: Vec<f32> = vec![7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0];
    write_npy(&dir.join("a.npy"), "<f4", &[1, 1, 2, 3], false, &f32_le(&a));
    write_npy(&dir.join("b.npy"), "<f4", &[1, 1, 2, 4], false, &f32_le(&b));
}

#[cfg(not(windows))]
#[test]
fn directml_fails_cleanly_where_there_is_none() {
    let dir = tempfile::tempdir().unwrap();
    example_1(dir.path());
    let args = [
        "--backend",
        "directml",
        "-a",
        "3",
        "a.npy",
        "b.npy",
        "-o",
        "out.npy",
    ];
    let stderr = refused(dir.path(), &args, 1);
    assert!(
        stderr.starts_with("tjoin: error: DirectML is unavailable"),
        "{stderr}"
    );
    if cfg!(feature = "directml") {
        // The whole device sequence ran, against the E_NOTIMPL stand-ins.
        assert!(
            stderr.contains("on this platform: device creation failed"),
            "{stderr}"
        );
        assert!(stderr.contains("E_NOTIMPL"), "{stderr}");
    } else {
        assert!(
            stderr.contains("without the `directml` cargo feature"),
            "{stderr}"
        );
    }
    assert_eq!(
        crate::util::dir_entries(dir.path()),
        ["a.npy", "b.npy"],
        "no output, no temporary file"
    );
}

#[cfg(not(windows))]
#[test]
fn auto_falls_back_to_the_cpu_engine_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    example_1(dir.path());
    let run = |backend: &str, out: &str| {
        tjoin()
            .current_dir(dir.path())
            .args(["--backend", backend, "-a", "3", "a.npy", "b.npy", "-o", out])
            .assert()
            .success();
        fs::read(dir.path().join(out)).unwrap()
    };
    assert_eq!(run("auto", "auto.npy"), run("cpu", "cpu.npy"));
    let assert = tjoin()
        .current_dir(dir.path())
        .args([
            "--backend",
            "auto",
            "--dry-run",
            "-a",
            "3",
            "a.npy",
            "b.npy",
        ])
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
fn the_cpu_backend_prints_no_backend_line_and_refuses_an_adapter() {
    let dir = tempfile::tempdir().unwrap();
    example_1(dir.path());
    let assert = tjoin()
        .current_dir(dir.path())
        .args(["--dry-run", "-a", "3", "a.npy", "b.npy"])
        .assert()
        .success();
    assert!(!String::from_utf8_lossy(&assert.get_output().stdout).contains("backend:"));
    let args = [
        "--dml-adapter",
        "warp",
        "-a",
        "3",
        "a.npy",
        "b.npy",
        "-o",
        "out.npy",
    ];
    assert_mentions(
        &refused(dir.path(), &args, 2),
        &["--dml-adapter applies to --backend directml"],
    );
}

/// Regenerates the bindings with tools/dml-bindgen into a temporary file and fails when the
/// checked-in src/backend/directml/bindings.rs differs. Builds windows-bindgen the first time.
#[cfg(feature = "directml")]
#[test]
fn generated_bindings_are_current() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let output = std::process::Command::new(cargo)
        .args(["run", "--quiet", "--locked", "--manifest-path"])
        .arg(root.join("tools/dml-bindgen/Cargo.toml"))
        .args(["--", "--check"])
        .env(
            "CARGO_TARGET_DIR",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("dml-bindgen"),
        )
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The worked examples of `docs/rules.md` through DirectML on WARP (every Windows has it, no
/// GPU needed), each compared byte for byte with the CPU engine's output, in every output
/// format. Wine has no WARP: .ci/directml-wine.sh sets `TJOIN_TEST_DML_ADAPTER=default` (any
/// `--dml-adapter`).
#[test]
#[cfg_attr(
    not(all(windows, feature = "directml")),
    ignore = "DirectML runs on Windows only, with `cargo test --features directml`"
)]
fn spec_examples_through_directml_match_the_cpu_engine() {
    let adapter = std::env::var("TJOIN_TEST_DML_ADAPTER").unwrap_or_else(|_| "warp".to_string());
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    example_1(d);
    let square = |name: &str, first: f32| {
        let values: Vec<f32> = (0..4).map(|i| first + i as f32).collect();
        write_npy(&d.join(name), "<f4", &[1, 1, 2, 2], false, &f32_le(&values));
    };
    square("x.npy", 1.0);
    square("y.npy", 5.0);
    square("z.npy", 9.0);
    for (name, channels) in [("p.npy", 8u64), ("q.npy", 16), ("r.npy", 32)] {
        let count = (channels * 2500) as usize;
        let values: Vec<f32> = (0..count).map(|i| i as f32 * 0.5).collect();
        write_npy(
            &d.join(name),
            "<f4",
            &[1, channels, 50, 50],
            false,
            &f32_le(&values),
        );
    }
    let jobs: [(&[&str], &str); 6] = [
        (&["a.npy", "b.npy"], "3"),
        (&["x.npy", "y.npy", "z.npy"], "1"),
        (&["x.npy", "y.npy", "z.npy"], "2"),
        (&["x.npy", "y.npy", "z.npy"], "3"),
        (&["p.npy", "q.npy", "r.npy"], "1"),
        (&["p.npy", "q.npy", "r.npy"], "-3"),
    ];
    for (inputs, axis) in jobs {
        for ext in ["npy", "safetensors", "npz"] {
            let run = |backend: &[&str], out: &str| {
                tjoin()
                    .current_dir(d)
                    .args(backend)
                    .args(["--name", "t", "-a", axis])
                    .args(inputs)
                    .args(["-o", out])
                    .assert()
                    .success();
                fs::read(d.join(out)).unwrap()
            };
            let cpu = run(&["--backend", "cpu"], &format!("cpu.{ext}"));
            let gpu = run(
                &["--backend", "directml", "--dml-adapter", &adapter],
                &format!("gpu.{ext}"),
            );
            assert!(cpu == gpu, "{inputs:?} on axis {axis} as .{ext} differ");
        }
    }
}
