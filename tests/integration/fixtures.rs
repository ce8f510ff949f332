//! Data-driven check against numpy: every `fixtures/npy/<case>/` must reproduce `expected.npy`.
//!
//! A case folder holds `in0.npy in1.npy ...`, `args.txt` (one line of extra arguments, such as
//! `-a -1`) and `expected.npy`, which numpy wrote with `np.save(np.concatenate(inputs, axis))`.
//! tjoin writes headers exactly as `np.save` does, so the comparison is byte for byte.

use std::fs;
use std::path::{Path, PathBuf};

use crate::util::{describe_difference, tjoin};

/// Fewer cases than this means the fixtures went missing, not that tjoin passed.
const MIN_CASES: usize = 30;

#[test]
fn every_fixture_case_matches_numpy() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/npy");
    let mut cases: Vec<PathBuf> = fs::read_dir(&root)
        .map(|entries| {
            entries
                .map(|e| e.unwrap().path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    cases.sort();

    let failures: Vec<String> = cases
        .iter()
        .filter_map(|case| run_case(case).err())
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} fixture cases failed:\n\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
    assert!(
        cases.len() >= MIN_CASES,
        "found {} fixture cases under {}, expected at least {MIN_CASES}",
        cases.len(),
        root.display()
    );
}

/// Runs one case; the error is a report naming the case and what differs.
fn run_case(case: &Path) -> Result<(), String> {
    let name = case.file_name().unwrap().to_string_lossy().into_owned();
    let fail = |why: String| format!("case {name}: {why}");

    let args_txt = fs::read_to_string(case.join("args.txt"))
        .map_err(|e| fail(format!("cannot read args.txt: {e}")))?;
    let expected = fs::read(case.join("expected.npy"))
        .map_err(|e| fail(format!("cannot read expected.npy: {e}")))?;
    let inputs = numbered_inputs(case);
    if inputs.is_empty() {
        return Err(fail("no in<N>.npy inputs".into()));
    }

    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out.npy");
    let output = tjoin()
        .args(args_txt.split_whitespace())
        .args(&inputs)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    if !output.status.success() {
        return Err(fail(format!(
            "tjoin {} failed with {}\nstderr:\n{}",
            args_txt.trim(),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    let actual = fs::read(&out).map_err(|e| fail(format!("no output file: {e}")))?;
    if actual == expected {
        return Ok(());
    }
    Err(fail(format!(
        "out.npy is not expected.npy: {}",
        describe_difference(&expected, &actual)
    )))
}

/// `in0.npy in1.npy ...` of a case folder, sorted by their number (so `in10` follows `in9`).
fn numbered_inputs(case: &Path) -> Vec<PathBuf> {
    let mut numbered: Vec<(u64, PathBuf)> = fs::read_dir(case)
        .unwrap()
        .filter_map(|entry| {
            let path = entry.unwrap().path();
            let stem = path
                .file_name()?
                .to_str()?
                .strip_prefix("in")?
                .strip_suffix(".npy")?;
            Some((stem.parse().ok()?, path))
        })
        .collect();
    numbered.sort();
    numbered.into_iter().map(|(_, path)| path).collect()
}
