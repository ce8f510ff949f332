//! Tests that cannot run on a machine (no root, no bash, no tmpfs) say so and pass there, but
//! fail under CI, where a guard that did not run must not count as passed (issue 39, item 14).

use std::fs;
use std::path::Path;

use crate::util::cannot_run_if;

#[test]
fn a_test_that_cannot_run_fails_under_ci_and_passes_elsewhere() {
    let strict = std::panic::catch_unwind(|| cannot_run_if("no tmpfs", true));
    let message = strict.expect_err("under CI, a test that cannot run fails");
    let message = message
        .downcast_ref::<String>()
        .map(String::as_str)
        .unwrap_or_default();
    assert!(
        message.contains("every test must") && message.contains("no tmpfs"),
        "{message}"
    );
    cannot_run_if("no tmpfs", false);
}

/// Every test that gives up says so through `cannot_run`, never by printing and returning:
/// a skip printed by hand would pass under CI untried.
#[test]
fn every_skip_goes_through_cannot_run() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/integration");
    let mut by_hand = Vec::new();
    for entry in fs::read_dir(&here).unwrap() {
        let path = entry.unwrap().path();
        if path
            .file_name()
            .is_some_and(|n| n == "util.rs" || n == "untried.rs")
        {
            continue;
        }
        let text = fs::read_to_string(&path).unwrap();
        for (at, line) in text.lines().enumerate() {
            let says_untried = ["skipped:", "not run", "cannot run"]
                .iter()
                .any(|words| line.contains(words));
            if line.contains("eprintln!") && says_untried {
                by_hand.push(format!("{}:{}: {}", path.display(), at + 1, line.trim()));
            }
        }
    }
    assert!(
        by_hand.is_empty(),
        "skips printed by hand:\n{}",
        by_hand.join("\n")
    );
}
