//! `tjoin rules [FAMILY]` as its user runs it: every family it lists prints a file that
//! `--rules` reads back, a failed write of the list is an error, and it takes one name at
//! most. (That the printed files are `rules/`, and an unknown name's refusal:
//! `builtin_families.rs`.)

use std::fs;

use crate::util::{assert_mentions, fails_cleanly, refused, succeeds};

/// `tjoin rules NAME > NAME.rules`, edited and given with `--rules`, is how `tjoin rules
/// --help` says to change a family's rules: every listed family's file gets a run past the
/// configuration stage, which reads and checks a rules file, to the opening of its (missing)
/// input.
#[test]
fn every_listed_family_prints_a_file_that_rules_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let listed = String::from_utf8(succeeds(dir.path(), &["rules"])).unwrap();
    let names: Vec<&str> = listed.lines().collect();
    assert!(
        names.len() >= 2 && names.contains(&"llama"),
        "tjoin rules lists {names:?}"
    );
    for name in names {
        let file = dir.path().join(format!("{name}.rules"));
        fs::write(&file, succeeds(dir.path(), &["rules", name])).unwrap();
        let rules = file.to_str().unwrap();
        let args = ["--dry-run", "--rules", rules, "missing.safetensors"];
        let stderr = refused(dir.path(), &args, 1);
        assert_mentions(&stderr, &["cannot open input 1", "missing.safetensors"]);
    }
    // The check above can fail: a file that is not rules stops the run at its rules.
    let broken = dir.path().join("broken.rules");
    fs::write(&broken, "*.weight = = 1\n").unwrap();
    let args = [
        "--dry-run",
        "--rules",
        broken.to_str().unwrap(),
        "missing.safetensors",
    ];
    let stderr = refused(dir.path(), &args, 2);
    assert_mentions(&stderr, &["broken.rules:1"]);
}

/// The list is data on standard output: a write that fails (a full disk) is an error that
/// names standard output, with status 1, not a success that printed nothing.
#[cfg(target_os = "linux")]
#[test]
fn a_list_that_cannot_be_written_fails() {
    let full = fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let output = std::process::Command::new(crate::util::bin())
        .args(["rules", "llama"])
        .stdout(full)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_mentions(&stderr, &["cannot write standard output"]);
}

/// One family at most: a second name is a usage error, not a second file.
#[test]
fn a_second_family_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let stderr = fails_cleanly(dir.path(), &["rules", "llama", "qwen2"], b"", 2);
    assert_mentions(
        &stderr,
        &["unexpected argument 'qwen2'", "tjoin rules [FAMILY]"],
    );
}
