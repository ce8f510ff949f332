//! Memory peaks of header parses, checked under a limit on the address space (`ulimit -v`,
//! which counts maps and allocations whether touched or not), not by timing: a parse must not
//! hold its text twice (issue 39, item 8). Each test first finds the least limit under which
//! the same command runs on a tiny input, so that what the binary and its libraries take
//! (which differs between machines and builds) is not charged to the parse; the large input
//! must then run under that limit plus its text and 16 MiB.

use std::fs;
use std::path::Path;

use crate::reliability::tjoin_limited;
use crate::util::assert_mentions;

/// What a parse may take beyond the text itself (the issue's bound).
const SLACK_KIB: u64 = 16 << 10;

/// Whether the run of `args` in `dir` under an address space of `kib` KiB ends as `ends`
/// says of its exit code and stderr.
fn runs_under(
    dir: &Path,
    kib: u64,
    args: &[&str],
    ends: &dyn Fn(Option<i32>, &str) -> bool,
) -> bool {
    let output = tjoin_limited(dir, &format!("ulimit -v {kib}"), args);
    ends(
        output.status.code(),
        &String::from_utf8_lossy(&output.stderr),
    )
}

/// The least address space, to 1 MiB, under which `args` runs as `ends` says.
fn least_limit(dir: &Path, args: &[&str], ends: &dyn Fn(Option<i32>, &str) -> bool) -> u64 {
    let mut high = 64 << 10;
    while !runs_under(dir, high, args, ends) {
        high *= 2;
        assert!(high <= 16 << 20, "{args:?} fails under any limit");
    }
    let mut low = 0;
    while high - low > 1 << 10 {
        let mid = (low + high) / 2;
        if runs_under(dir, mid, args, ends) {
            high = mid;
        } else {
            low = mid;
        }
    }
    high
}

/// Checks that `big`, whose parse reads `text` bytes more than `tiny`'s, runs as `ends` says
/// under the least limit `tiny` needs plus the text and [`SLACK_KIB`].
fn assert_parsed_once(
    dir: &Path,
    (tiny, big): (&[&str], &[&str]),
    text: u64,
    ends: &dyn Fn(Option<i32>, &str) -> bool,
) {
    let base = least_limit(dir, tiny, ends);
    let limit = base + text.div_ceil(1024) + SLACK_KIB;
    let output = tjoin_limited(dir, &format!("ulimit -v {limit}"), big);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        ends(output.status.code(), &stderr),
        "{big:?} under {limit} KiB ({base} KiB that a tiny input needs, the text's {} KiB and \
         16 MiB): exit {:?}: {stderr}",
        text.div_ceil(1024),
        output.status.code()
    );
}

/// A JSON string that never ends, 64 MB of it: refused without a copy of the text (it was
/// copied whole before the end was found: 386 MiB for 200 MB).
#[test]
fn an_unterminated_json_string_is_refused_without_a_copy() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = b"[\"".to_vec();
    text.resize(64 << 20, b'a');
    fs::write(dir.path().join("big.json"), &text).unwrap();
    fs::write(dir.path().join("tiny.json"), b"[\"aaaa").unwrap();
    let args = |input: &'static str| ["-a", "0", input, input, "-o", "out.npy"];
    let ends = |code: Option<i32>, stderr: &str| {
        code == Some(1) && stderr.contains("not a valid JSON file") && stderr.contains("truncated")
    };
    assert_parsed_once(
        dir.path(),
        (&args("tiny.json"), &args("big.json")),
        text.len() as u64,
        &ends,
    );
    let stderr = tjoin_limited(dir.path(), "true", &args("big.json")).stderr;
    assert_mentions(
        &String::from_utf8_lossy(&stderr),
        &["big.json", "truncated"],
    );
    assert!(!dir.path().join("out.npy").exists());
}

/// A safetensors header of 32 MB whose metadata string is all escapes (`\u00e9`): its text
/// and the string decoded from it are never both held (a 99 MB one peaked at 148 MiB, the
/// text, serde_json's scratch copy and the string).
#[test]
fn a_safetensors_header_full_of_escapes_is_not_held_twice() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, escapes: usize| {
        let header = format!(
            r#"{{"__metadata__":{{"note":"{}"}},"t":{{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}}}"#,
            "\\u00e9".repeat(escapes)
        );
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(&[0; 4]);
        fs::write(dir.path().join(name), bytes).unwrap();
        header.len() as u64
    };
    write("tiny.safetensors", 1);
    let text = write("big.safetensors", (32 << 20) / 6);
    let args = |input: &'static str| ["--dry-run", input, "-o", "out.npy"];
    let ends = |code: Option<i32>, _: &str| code == Some(0);
    assert_parsed_once(
        dir.path(),
        (&args("tiny.safetensors:t"), &args("big.safetensors:t")),
        text,
        &ends,
    );
    assert!(!dir.path().join("out.npy").exists());
}

/// Under any address space, however small, a run ends without a panic: refused, failed, or
/// aborted where an allocation fails, never hung. The thread that handles signals could not
/// be started under about 20 MiB; `thread::spawn` then panicked (exit 101), and with
/// `RUST_BACKTRACE=1` such a panic's backtrace could run out of memory and wait forever on
/// std's backtrace lock (the least-limit search above hung so).
#[test]
fn a_run_under_any_address_space_ends_even_printing_a_backtrace() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("tiny.json"), b"[1, 2]").unwrap();
    let ended_badly: Vec<(u64, Option<i32>)> = (8u64 << 10..48 << 10)
        .step_by(256)
        .filter_map(|kib| {
            let output = std::process::Command::new("sh")
                .current_dir(dir.path())
                .arg("-c")
                .arg(format!(
                    "ulimit -v {kib}; RUST_BACKTRACE=1 exec timeout 20 \"$0\" \"$@\""
                ))
                .arg(crate::util::bin())
                .args(["-a", "0", "tiny.json", "tiny.json", "-o", "out.npy"])
                .output()
                .unwrap();
            let code = output.status.code();
            // 124: the timeout ended a hung run; 101: a panic.
            matches!(code, Some(124 | 101)).then_some((kib, code))
        })
        .collect();
    assert!(
        ended_badly.is_empty(),
        "hung (124) or panicked (101) under these limits (KiB): {ended_badly:?}"
    );
}
