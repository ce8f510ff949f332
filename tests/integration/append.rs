//! `--append` and `--recover`: files grown in place match numpy's concatenation byte for
//! byte; what cannot grow in place is refused and left untouched; an interrupt leaves the
//! file as it was; a SIGKILL leaves what `--recover` undoes; a second appender is kept out.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::util::{
    assert_mentions, dir_entries, npy_bytes, npy_header, parse_npy, refused, succeeds, tjoin,
    write_npy,
};

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tjoin"))
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/append")
}

/// Copies a fixture case into a fresh folder; returns it, the arguments and the inputs after
/// the target (`in1.npy`, `in2.npy`, ... in order).
fn case(name: &str) -> (tempfile::TempDir, Vec<String>, Vec<String>) {
    let from = fixtures().join(name);
    let dir = tempfile::tempdir().unwrap();
    let mut inputs = Vec::new();
    for entry in fs::read_dir(&from).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        fs::copy(from.join(&name), dir.path().join(&name)).unwrap();
        if name.starts_with("in") {
            inputs.push(name);
        }
    }
    inputs.sort_by_key(|n| n[2..n.len() - 4].parse::<u32>().unwrap());
    let args = fs::read_to_string(from.join("args.txt")).unwrap();
    let args = args.lines().map(str::to_string).collect();
    (dir, args, inputs)
}

fn append_args<'a>(args: &'a [String], inputs: &'a [String]) -> Vec<&'a str> {
    let mut all = vec!["--append"];
    all.extend(args.iter().map(String::as_str));
    all.push("target.npy");
    all.extend(inputs.iter().map(String::as_str));
    all
}

/// Every case numpy wrote an expected file for: the grown target is that file, byte for
/// byte (numpy's concatenation in the target's layout, byte order and header version), and
/// nothing is left beside it.
#[test]
fn appends_give_numpys_concatenation_byte_for_byte() {
    let mut cases = 0;
    for entry in fs::read_dir(fixtures()).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if !fixtures().join(&name).join("expected.npy").exists() {
            continue;
        }
        let (dir, args, inputs) = case(&name);
        let before = dir_entries(dir.path());
        succeeds(dir.path(), &append_args(&args, &inputs));
        let grown = fs::read(dir.path().join("target.npy")).unwrap();
        let expected = fs::read(dir.path().join("expected.npy")).unwrap();
        assert!(
            grown == expected,
            "{name}: {}",
            crate::util::describe_difference(&expected, &grown)
        );
        assert_eq!(dir_entries(dir.path()), before, "{name}: a file was left");
        cases += 1;
    }
    assert!(cases >= 8, "only {cases} cases");
}

/// Appending twice is appending once with both: the header keeps room after a first append.
#[test]
fn a_grown_file_grows_again() {
    let (dir, args, inputs) = case("c_axis0");
    for input in &inputs {
        succeeds(dir.path(), &append_args(&args, std::slice::from_ref(input)));
    }
    let grown = fs::read(dir.path().join("target.npy")).unwrap();
    assert_eq!(grown, fs::read(dir.path().join("expected.npy")).unwrap());
}

#[test]
fn a_dry_run_says_where_the_bytes_would_go_and_writes_nothing() {
    let (dir, args, inputs) = case("c_axis0");
    let before = fs::read(dir.path().join("target.npy")).unwrap();
    let mut dry = append_args(&args, &inputs);
    dry.push("--dry-run");
    let text = String::from_utf8(succeeds(dir.path(), &dry)).unwrap();
    assert_mentions(
        &text,
        &[
            "output: target.npy  npy  float32  [6, 4]  96 bytes",
            "append: in place, 48 bytes written at byte 176 of target.npy",
        ],
    );
    *dry.last_mut().unwrap() = "--dry-run=json";
    let plan: serde_json::Value = serde_json::from_slice(&succeeds(dir.path(), &dry)).unwrap();
    assert_eq!(plan["output"]["path"], "target.npy");
    assert_eq!(plan["output"]["append"]["offset"], 176);
    assert_eq!(plan["output"]["append"]["bytes"], 48);
    assert_eq!(plan["tensors"][0]["shape"], serde_json::json!([6, 4]));
    assert_eq!(fs::read(dir.path().join("target.npy")).unwrap(), before);
}

/// Writes a .npy file of zeros named `name` in `dir`.
fn zeros(dir: &Path, name: &str, descr: &str, shape: &[u64], fortran: bool) {
    let itemsize: u64 = descr[2..].parse().unwrap();
    let len = shape.iter().product::<u64>() * itemsize;
    write_npy(
        &dir.join(name),
        descr,
        shape,
        fortran,
        &vec![0; len as usize],
    );
}

/// Refuses with `code`, and leaves the target as it was.
#[track_caller]
fn refused_untouched(dir: &Path, args: &[&str], code: i32, mentions: &[&str]) {
    let before = fs::read(dir.join("target.npy")).unwrap();
    let stderr = refused(dir, args, code);
    assert_mentions(&stderr, mentions);
    assert_eq!(
        fs::read(dir.join("target.npy")).unwrap(),
        before,
        "{args:?}"
    );
}

#[test]
fn appends_along_another_axis_are_refused_with_the_rewrite_as_the_hint() {
    let dir = tempfile::tempdir().unwrap();
    zeros(dir.path(), "target.npy", "<f4", &[2, 3], false);
    zeros(dir.path(), "col.npy", "<f4", &[2, 1], false);
    refused_untouched(
        dir.path(),
        &["--append", "-a", "1", "target.npy", "col.npy"],
        2,
        &[
            "cannot append along axis 1 in place",
            "input 1 (target.npy) is stored in C order, so only axis 0 grows",
            "hint: append along axis 0, or rewrite it with a normal join: tjoin -a 1 target.npy",
        ],
    );
    // Fortran order grows along the last axis only.
    zeros(dir.path(), "target.npy", "<f4", &[2, 3], true);
    zeros(dir.path(), "row.npy", "<f4", &[1, 3], true);
    refused_untouched(
        dir.path(),
        &["--append", "-a", "0", "target.npy", "row.npy"],
        2,
        &["stored in Fortran order, so only axis 1 grows"],
    );
}

#[test]
fn element_types_are_checked_as_in_a_join_and_cast_only_to_the_files_own() {
    let dir = tempfile::tempdir().unwrap();
    zeros(dir.path(), "target.npy", "<f8", &[2, 2], false);
    zeros(dir.path(), "ints.npy", "<i2", &[1, 2], false);
    refused_untouched(
        dir.path(),
        &["--append", "-a", "0", "target.npy", "ints.npy"],
        2,
        &[
            "cannot join inputs of different element types",
            "--cast float64",
        ],
    );
    refused_untouched(
        dir.path(),
        &[
            "--append",
            "-a",
            "0",
            "--cast",
            "float32",
            "target.npy",
            "ints.npy",
        ],
        2,
        &[
            "--cast float32: input 1 (target.npy) holds float64",
            "hint: --cast float64 converts the new inputs to the file's own type",
        ],
    );
    succeeds(
        dir.path(),
        &[
            "--append",
            "-a",
            "0",
            "--cast",
            "float64",
            "target.npy",
            "ints.npy",
        ],
    );
}

#[test]
fn a_header_without_room_for_the_new_shape_is_refused() {
    let (dir, args, inputs) = case("no_room");
    refused_untouched(
        dir.path(),
        &append_args(&args, &inputs),
        2,
        &[
            "cannot append to input 1 (target.npy) in place: its 128-byte header has no room",
            "hint: rewrite it once with a normal join",
        ],
    );
    // The rewrite the hint names leaves the room, and the append then works.
    succeeds(dir.path(), &["-a", "0", "target.npy", "-o", "target.npy"]);
    succeeds(dir.path(), &append_args(&args, &inputs));
    let grown = parse_npy(&fs::read(dir.path().join("target.npy")).unwrap()).unwrap();
    assert_eq!(grown.shape[0], 100);
}

#[test]
fn only_npy_files_grow_in_place_and_only_without_an_output() {
    let dir = tempfile::tempdir().unwrap();
    let containers = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/containers");
    fs::copy(containers.join("npz/day0.npz"), dir.path().join("day.npz")).unwrap();
    fs::copy(
        containers.join("tp/tp0.safetensors"),
        dir.path().join("tp.safetensors"),
    )
    .unwrap();
    zeros(dir.path(), "target.npy", "<f4", &[2, 2], false);
    for (target, why) in [
        (
            "day.npz",
            "an .npz archive lists its members in a directory",
        ),
        (
            "tp.safetensors",
            "a .safetensors header lists every tensor's byte offsets",
        ),
    ] {
        let before = fs::read(dir.path().join(target)).unwrap();
        let stderr = refused(dir.path(), &["--append", "-a", "0", target, target], 2);
        assert_mentions(&stderr, &["only .npy files grow in place", why, "-o"]);
        assert_eq!(fs::read(dir.path().join(target)).unwrap(), before);
    }
    refused_untouched(
        dir.path(),
        &[
            "--append",
            "-a",
            "0",
            "target.npy",
            "target.npy",
            "-o",
            "x.npy",
        ],
        2,
        &["--append grows its first input in place and writes no other file"],
    );
    refused_untouched(
        dir.path(),
        &["--append", "-a", "0", "target.npy"],
        2,
        &["--append has nothing to append"],
    );
    refused_untouched(
        dir.path(),
        &["--append", "-a", "0", "target.npy", "target.npy"],
        2,
        &["input 2 (target.npy) is the file being appended to"],
    );
}

/// The numpy file of `fixtures/bad/` with 8 bytes after its data: what a crashed append
/// leaves. tjoin's readers refuse it with a hint to `--recover`, which cuts the 8 bytes off
/// and says so; a second `--recover` finds nothing to do.
#[test]
fn a_file_longer_than_its_header_says_is_refused_until_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let bad = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/bad/extra_bytes.npy");
    fs::copy(&bad, dir.path().join("x.npy")).unwrap();
    let stderr = refused(dir.path(), &["-a", "0", "x.npy", "--dry-run"], 1);
    assert_mentions(
        &stderr,
        &[
            "input 1 (x.npy) holds 8 bytes after the end of the data its .npy header declares",
            "shape [2, 2]",
            "hint: an append to it was interrupted",
            "`tjoin --recover x.npy`",
        ],
    );
    let output = tjoin()
        .current_dir(dir.path())
        .args(["--recover", "x.npy"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_mentions(
        &stderr,
        &["recovered x.npy: removed 8 bytes", "float32 [2, 2]"],
    );
    let original = fs::read(&bad).unwrap();
    let recovered = fs::read(dir.path().join("x.npy")).unwrap();
    assert_eq!(recovered, original[..original.len() - 8]);
    succeeds(dir.path(), &["-a", "0", "x.npy", "--dry-run"]);
    let again = tjoin()
        .current_dir(dir.path())
        .args(["--recover", "x.npy"])
        .output()
        .unwrap();
    assert!(again.status.success());
    assert_mentions(
        &String::from_utf8_lossy(&again.stderr),
        &["x.npy needs no recovery: it ends where its header says"],
    );
    assert_eq!(fs::read(dir.path().join("x.npy")).unwrap(), recovered);
}

/// The target of a slow append: a C-order `|u1` [4, 4096], and `new.npy`, a Fortran-order
/// [rows, 4096] of sparse zeros, gathered into the target's order element by element: slow
/// enough (seconds in a debug build) to catch the append in the middle.
fn slow_append_inputs(dir: &Path, rows: u64) -> Vec<u8> {
    let target = npy_bytes("|u1", &[4, 4096], false, &[7; 4 * 4096]);
    fs::write(dir.join("target.npy"), &target).unwrap();
    let header = npy_header("|u1", &[rows, 4096], true);
    let mut new = File::create(dir.join("new.npy")).unwrap();
    new.write_all(&header).unwrap();
    new.set_len(header.len() as u64 + rows * 4096).unwrap();
    target
}

/// Starts appending `new.npy` to `target.npy` and returns once the target has grown.
fn slow_append_under_way(dir: &Path, original: &[u8]) -> Child {
    let child = Command::new(bin())
        .current_dir(dir)
        .args(["--append", "-a", "0", "target.npy", "new.npy"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while fs::metadata(dir.join("target.npy")).unwrap().len() <= original.len() as u64 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the append never started writing"
        );
        sleep(Duration::from_millis(1));
    }
    child
}

fn signal(child: &Child, name: &str) {
    let sent = Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .status();
    assert!(sent.unwrap().success());
}

const JOURNAL: &str = ".target.npy.tjoin-journal";

#[test]
fn an_interrupted_append_leaves_the_file_as_it_was() {
    for (name, code) in [("INT", 130), ("TERM", 143), ("HUP", 129)] {
        let dir = tempfile::tempdir().unwrap();
        let original = slow_append_inputs(dir.path(), 65536);
        let child = slow_append_under_way(dir.path(), &original);
        assert!(dir.path().join(JOURNAL).exists(), "SIG{name}: no journal");
        signal(&child, name);
        let output = child.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(code), "SIG{name}");
        assert_eq!(fs::read(dir.path().join("target.npy")).unwrap(), original);
        assert_eq!(
            dir_entries(dir.path()),
            ["new.npy", "target.npy"],
            "SIG{name}"
        );
    }
}

/// An input that shrinks while it is mapped raises SIGBUS: the target is cut back too.
#[test]
fn an_input_truncated_during_an_append_leaves_the_target_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let original = slow_append_inputs(dir.path(), 65536);
    let child = slow_append_under_way(dir.path(), &original);
    let new = OpenOptions::new()
        .write(true)
        .open(dir.path().join("new.npy"));
    new.unwrap().set_len(128).unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_mentions(&stderr, &["an input shrank while tjoin was reading it"]);
    assert_eq!(fs::read(dir.path().join("target.npy")).unwrap(), original);
    assert_eq!(dir_entries(dir.path()), ["new.npy", "target.npy"]);
}

/// A SIGKILL in the middle of an append leaves the target longer than its header says, and
/// the journal. A reader meanwhile still sees the old array; tjoin refuses the file, and a
/// new append refuses to start; `--recover` gives back the original byte for byte.
#[test]
fn after_a_sigkill_recover_gives_back_the_original() {
    let dir = tempfile::tempdir().unwrap();
    let original = slow_append_inputs(dir.path(), 65536);
    let mut child = slow_append_under_way(dir.path(), &original);
    // Mid-append, the header is the old one and the old data is intact.
    let during = parse_npy(&fs::read(dir.path().join("target.npy")).unwrap()).unwrap();
    assert_eq!(during.shape, [4, 4096]);
    assert_eq!(
        during.data[..4 * 4096],
        original[original.len() - 4 * 4096..]
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let left = fs::read(dir.path().join("target.npy")).unwrap();
    assert!(left.len() > original.len() && left.starts_with(&original));
    assert!(dir.path().join(JOURNAL).exists());
    let stderr = refused(dir.path(), &["-a", "0", "target.npy", "--dry-run"], 1);
    assert_mentions(
        &stderr,
        &["after the end of the data", "tjoin --recover target.npy"],
    );
    write_npy(
        &dir.path().join("more.npy"),
        "|u1",
        &[1, 4096],
        false,
        &[1; 4096],
    );
    let stderr = refused(
        dir.path(),
        &["--append", "-a", "0", "target.npy", "more.npy"],
        1,
    );
    assert_mentions(
        &stderr,
        &["after the end of the data", "tjoin --recover target.npy"],
    );
    let output = tjoin()
        .current_dir(dir.path())
        .args(["--recover", "target.npy"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let removed = format!("removed {} bytes", left.len() - original.len());
    assert_mentions(
        &stderr,
        &["recovered target.npy", &removed, "uint8 [4, 4096]"],
    );
    assert_eq!(fs::read(dir.path().join("target.npy")).unwrap(), original);
    assert_eq!(
        dir_entries(dir.path()),
        ["more.npy", "new.npy", "target.npy"]
    );
    succeeds(
        dir.path(),
        &["--append", "-a", "0", "target.npy", "more.npy"],
    );
}

/// What the journal says, as `src/output/grow.rs` writes it: the lengths and the headers.
fn journal_field(text: &str, key: &str) -> String {
    let line = text.lines().find(|l| l.starts_with(key)).unwrap();
    line[key.len() + 2..].to_string()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

/// A crash while the header was being written (a torn header) or just after (the journal not
/// yet removed): `--recover` puts the old header back and cuts the file back in the first
/// case, and keeps the grown file in the second.
#[test]
fn recover_follows_the_journal_around_the_header_rewrite() {
    for torn in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let original = slow_append_inputs(dir.path(), 65536);
        let mut child = slow_append_under_way(dir.path(), &original);
        child.kill().unwrap();
        child.wait().unwrap();
        let journal = fs::read_to_string(dir.path().join(JOURNAL)).unwrap();
        let new_header = unhex(&journal_field(&journal, "new header"));
        let new_len: u64 = journal_field(&journal, "new length").parse().unwrap();
        let file = OpenOptions::new()
            .write(true)
            .open(dir.path().join("target.npy"))
            .unwrap();
        let mut header = new_header.clone();
        if torn {
            // Half of the new header reached the disk.
            header.truncate(header.len() / 2);
        } else {
            file.set_len(new_len).unwrap();
        }
        std::os::unix::fs::FileExt::write_all_at(&file, &header, 0).unwrap();
        drop(file);
        let output = tjoin()
            .current_dir(dir.path())
            .args(["--recover", "target.npy"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{stderr}");
        let now = fs::read(dir.path().join("target.npy")).unwrap();
        if torn {
            assert_mentions(&stderr, &["put its old header back"]);
            assert_eq!(now, original);
        } else {
            assert_mentions(&stderr, &["the append had finished", "[65540, 4096]"]);
            assert_eq!(now.len() as u64, new_len);
            assert!(now.starts_with(&new_header));
        }
        assert_eq!(dir_entries(dir.path()), ["new.npy", "target.npy"]);
    }
}

/// flock on the target, as a running append holds it: a second appender and `--recover` are
/// refused with a message that says why; once it is released, the append runs.
#[test]
fn a_second_appender_is_kept_out_by_the_lock() {
    use std::os::fd::AsRawFd;
    let dir = tempfile::tempdir().unwrap();
    zeros(dir.path(), "target.npy", "<f4", &[1, 2], false);
    zeros(dir.path(), "new.npy", "<f4", &[1, 2], false);
    let held = File::open(dir.path().join("target.npy")).unwrap();
    // SAFETY: flock takes a descriptor `held` keeps open, and no memory.
    assert_eq!(unsafe { libc::flock(held.as_raw_fd(), libc::LOCK_EX) }, 0);
    refused_untouched(
        dir.path(),
        &["--append", "-a", "0", "target.npy", "new.npy"],
        1,
        &[
            "cannot append to target.npy: another process holds its lock",
            "hint: run again once that append has finished",
        ],
    );
    refused_untouched(
        dir.path(),
        &["--recover", "target.npy"],
        1,
        &["cannot recover target.npy: another process holds its lock"],
    );
    drop(held);
    succeeds(
        dir.path(),
        &["--append", "-a", "0", "target.npy", "new.npy"],
    );
    let grown = parse_npy(&fs::read(dir.path().join("target.npy")).unwrap()).unwrap();
    assert_eq!(grown.shape, [2, 2]);
}
