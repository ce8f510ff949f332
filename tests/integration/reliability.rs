//! Faults while writing, interrupts, inputs changing underneath, concurrent writers, odd
//! files from old numpy versions, and lying headers: tjoin never crashes, never hangs, never
//! leaves a partial output and never damages an input.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::util::{
    assert_mentions, bin, dir_entries, killed_by, npy_header, read_npy, refused, tjoin, write_npy,
    writing_into,
};

/// Runs tjoin under `sh` with `limits` (e.g. `ulimit -v 262144`) applied first.
///
/// glibc gives each thread's first allocation an arena of its own, reserving 64 MiB of
/// address space (`PROT_NONE`, never memory) when the limit leaves room for it. Whether the
/// thread that opens inputs ahead gets there before the main thread maps an input is a race,
/// which under an address-space limit decides whether the map fails (a CI run lost it). One
/// arena takes the race out: these runs measure what tjoin holds, not glibc's reservations.
pub fn tjoin_limited(dir: &Path, limits: &str, args: &[&str]) -> std::process::Output {
    Command::new("sh")
        .current_dir(dir)
        .env("MALLOC_ARENA_MAX", "1")
        .arg("-c")
        .arg(format!("{limits}; exec \"$0\" \"$@\""))
        .arg(bin())
        .args(args)
        .output()
        .unwrap()
}

/// a.npy (C order, [rows, 2]) and b.npy (Fortran order, [rows, cols], sparse zeros): joined
/// on axis 1 the output is C order (a C-order input with two dimensions above 1 outvotes the
/// Fortran one, as in numpy), so b is gathered element by element, slowly enough to catch the
/// run in the middle.
fn slow_join_inputs(dir: &Path, rows: u64, cols: u64) {
    write_npy(
        &dir.join("a.npy"),
        "|u1",
        &[rows, 2],
        false,
        &vec![7; 2 * rows as usize],
    );
    let header = npy_header("|u1", &[rows, cols], true);
    let mut b = File::create(dir.join("b.npy")).unwrap();
    b.write_all(&header).unwrap();
    b.set_len(header.len() as u64 + rows * cols).unwrap();
}

/// Writes [`slow_join_inputs`], starts joining them on axis 1 into `out.npy`, and returns
/// once the run is writing (it has its new output open).
fn slow_join_under_way(dir: &Path, rows: u64, cols: u64) -> Child {
    slow_join_with(dir, rows, cols, &[])
}

/// [`slow_join_under_way`] with more arguments.
fn slow_join_with(dir: &Path, rows: u64, cols: u64, more: &[&str]) -> Child {
    slow_join_inputs(dir, rows, cols);
    let child = Command::new(bin())
        .current_dir(dir)
        .args(["-a", "1", "a.npy", "b.npy", "-o", "out.npy"])
        .args(more)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !writing_into(child.id(), dir) {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "tjoin never started writing"
        );
        sleep(Duration::from_millis(2));
    }
    child
}

/// Sends `child` the signal named `signal` (`INT`, `TERM`) and waits for it to end.
fn signal_and_wait(child: Child, signal: &str) -> std::process::Output {
    let id = child.id().to_string();
    let sent = Command::new("kill")
        .args([&format!("-{signal}"), &id])
        .status();
    assert!(sent.unwrap().success());
    child.wait_with_output().unwrap()
}

#[test]
fn a_signal_removes_the_partial_output_and_kills_by_that_signal() {
    for (signal, number) in [("INT", libc::SIGINT), ("TERM", libc::SIGTERM)] {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("out.npy"), "precious").unwrap();
        let child = slow_join_under_way(dir.path(), 4096, 65536);
        let output = signal_and_wait(child, signal);
        assert_eq!(killed_by(output.status), Some(number), "SIG{signal}");
        assert_eq!(
            dir_entries(dir.path()),
            ["a.npy", "b.npy", "out.npy"],
            "SIG{signal}"
        );
        assert_eq!(fs::read(dir.path().join("out.npy")).unwrap(), b"precious");
        assert!(
            output.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// With a progress bar, a signal clears it and leaves one line that says so: the run was
/// interrupted and nothing was written.
#[test]
fn a_signal_clears_the_progress_bar_and_says_nothing_was_written() {
    let dir = tempfile::tempdir().unwrap();
    let child = slow_join_with(dir.path(), 4096, 65536, &["--progress", "always"]);
    // Let the bar draw at least once (4 times a second).
    sleep(Duration::from_millis(600));
    let output = signal_and_wait(child, "INT");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(killed_by(output.status), Some(libc::SIGINT), "{stderr}");
    assert_eq!(dir_entries(dir.path()), ["a.npy", "b.npy"]);
    assert!(
        stderr.contains("out.npy "),
        "the bar names the output: {stderr:?}"
    );
    // The bar's draws are cleared ("\r\x1b[2K"), then comes the one line.
    assert_eq!(stderr.matches('\n').count(), 1, "one line: {stderr:?}");
    let last = stderr.trim_end().rsplit('\r').next().unwrap_or_default();
    assert_eq!(
        last.trim_start_matches("\x1b[2K"),
        "tjoin: interrupted; nothing was written to out.npy",
        "{stderr:?}"
    );
}

#[test]
fn an_input_changed_while_it_is_read_fails_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let child = slow_join_under_way(dir.path(), 1024, 8192);
    OpenOptions::new()
        .append(true)
        .open(dir.path().join("b.npy"))
        .unwrap()
        .write_all(b"more")
        .unwrap();
    // The gather runs for seconds in a debug build; the append lands while it writes.
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("input 2 (b.npy)") && stderr.contains("changed while tjoin was reading it"),
        "{stderr}"
    );
    assert_eq!(dir_entries(dir.path()), ["a.npy", "b.npy"]);
}

/// A rewrite in place that keeps the length and sets the modification time back afterwards,
/// as `touch -r` does: only the change time (ctime), which the kernel moved, tells.
#[cfg(unix)]
#[test]
fn an_input_rewritten_with_its_modification_time_set_back_fails_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let reference = elsewhere.path().join("reference");
    let child = slow_join_under_way(dir.path(), 1024, 8192);
    let b = dir.path().join("b.npy");
    let touch = |args: [&Path; 2]| {
        let status = Command::new("touch").arg("-r").args(args).status();
        assert!(status.unwrap().success());
    };
    touch([&b, &reference]);
    let file = OpenOptions::new().write(true).open(&b).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&file, &[9; 4096], 4096).unwrap();
    drop(file);
    touch([&reference, &b]);
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_mentions(
        &stderr,
        &["input 2 (b.npy)", "changed while tjoin was reading it"],
    );
    assert_eq!(dir_entries(dir.path()), ["a.npy", "b.npy"]);
}

/// A write past `ulimit -f` (RLIMIT_FSIZE, here 64 blocks) fails with EFBIG when SIGXFSZ is
/// ignored; otherwise it raises SIGXFSZ, which by default kills the process where it stands
/// and which tjoin handles so that it ends the same way: the failure reported by the
/// output's name, and the new file gone.
#[test]
fn a_write_that_fails_part_way_leaves_nothing_behind() {
    for limits in ["trap '' XFSZ; ulimit -f 64", "ulimit -f 64"] {
        let dir = tempfile::tempdir().unwrap();
        let data = vec![1; 1 << 20];
        write_npy(&dir.path().join("a.npy"), "<f4", &[256, 1024], false, &data);
        fs::write(dir.path().join("out.npy"), "precious").unwrap();
        let args = ["-a", "0", "a.npy", "a.npy", "-o", "out.npy"];
        let output = tjoin_limited(dir.path(), limits, &args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{limits}: {stderr}");
        assert_mentions(&stderr, &["cannot write the output out.npy", "too large"]);
        assert_eq!(dir_entries(dir.path()), ["a.npy", "out.npy"]);
        assert_eq!(fs::read(dir.path().join("out.npy")).unwrap(), b"precious");
    }
}

#[cfg(target_os = "linux")]
#[test]
fn a_full_filesystem_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small");
    fs::create_dir(&small).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
        .arg(&small)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        crate::util::cannot_run(
            "this machine does not let the test mount a small tmpfs (it needs root)",
        );
        return;
    }
    write_npy(
        &dir.path().join("a.npy"),
        "<f4",
        &[256, 1024],
        false,
        &vec![1; 1 << 20],
    );
    let output = tjoin()
        .current_dir(dir.path())
        .args(["-a", "0", "a.npy", "a.npy", "-o", "small/out.npy"])
        .output()
        .unwrap();
    let entries = dir_entries(&small);
    let _ = Command::new("umount").arg(&small).status();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("small/out.npy") && stderr.contains("No space left"),
        "{stderr}"
    );
    assert!(entries.is_empty(), "left behind: {entries:?}");
}

/// Replacing a file on a file system mounted read-only is refused as such: a hint to chmod
/// the file could not help.
#[cfg(target_os = "linux")]
#[test]
fn a_target_on_a_read_only_file_system_is_refused_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let frozen = dir.path().join("frozen");
    fs::create_dir(&frozen).unwrap();
    let mount = |options: &str| {
        Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs"])
            .arg(&frozen)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !mount("size=64k") {
        crate::util::cannot_run(
            "this machine does not let the test mount a small tmpfs (it needs root)",
        );
        return;
    }
    fs::write(frozen.join("out.npy"), "precious").unwrap();
    let frozen_now = mount("remount,ro,size=64k");
    write_npy(&dir.path().join("a.npy"), "<f4", &[2, 2], false, &[0; 16]);
    let output = tjoin()
        .current_dir(dir.path())
        .args(["-a", "0", "a.npy", "a.npy", "-o", "frozen/out.npy"])
        .output()
        .unwrap();
    let kept = fs::read(frozen.join("out.npy")).unwrap();
    let _ = Command::new("umount").arg(&frozen).status();
    assert!(frozen_now, "the tmpfs could not be made read-only");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_mentions(
        &stderr,
        &[
            "frozen/out.npy",
            "file system mounted read-only",
            "another file system",
        ],
    );
    assert!(!stderr.contains("chmod"), "{stderr}");
    assert_eq!(kept, b"precious");
}

#[test]
fn unusable_paths_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    write_npy(&dir.path().join("a.npy"), "<f4", &[2], false, &[0; 8]);
    fs::create_dir(dir.path().join("folder")).unwrap();
    fs::create_dir(dir.path().join("folder.npy")).unwrap();
    let fifo = dir.path().join("fifo.npy");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let cases: [(&[&str], &str); 5] = [
        (
            &["-a", "0", "folder", "-o", "out.npy"],
            "cannot open input 1 (folder): it is a directory",
        ),
        (
            &["-a", "0", "fifo.npy", "-o", "out.npy"],
            "cannot read input 1 (fifo.npy): it is a pipe and nothing was written to it",
        ),
        (
            &["-a", "0", "missing.npy", "-o", "out.npy"],
            "cannot open input 1 (missing.npy): No such file",
        ),
        (
            &["-a", "0", "a.npy", "-o", "folder.npy"],
            "cannot write the output folder.npy: it is a directory",
        ),
        (
            &["-a", "0", "a.npy", "-o", "/proc/tjoin-test/out.npy"],
            "/proc/tjoin-test/out.npy",
        ),
    ];
    for (args, expected) in cases {
        assert_mentions(&refused(dir.path(), args, 1), &[expected]);
    }
    assert_eq!(
        dir_entries(dir.path()),
        ["a.npy", "fifo.npy", "folder", "folder.npy"]
    );
}

/// A .npy file with a version-1.0 header of exactly `dict` and `data` after it.
fn raw_npy(dict: &str, data: &[u8]) -> Vec<u8> {
    let mut text = dict.to_string();
    while (10 + text.len() + 1) % 64 != 0 {
        text.push(' ');
    }
    text.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(text.len() as u16).to_le_bytes());
    bytes.extend_from_slice(text.as_bytes());
    bytes.extend_from_slice(data);
    bytes
}

#[test]
fn python_2_files_join_as_numpy_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<u8> = (1..=6i64).flat_map(i64::to_le_bytes).collect();
    let py2 = raw_npy(
        "{'descr': '<i8', 'fortran_order': False, 'shape': (2L, 3L), }",
        &data,
    );
    fs::write(dir.path().join("py2.npy"), py2).unwrap();
    write_npy(
        &dir.path().join("py3.npy"),
        "<i8",
        &[1, 3],
        false,
        &data[..24],
    );
    tjoin()
        .current_dir(dir.path())
        .args(["-a", "0", "py2.npy", "py3.npy", "-o", "out.npy"])
        .assert()
        .success();
    let out = read_npy(&dir.path().join("out.npy"));
    assert_eq!(out.shape, [3, 3]);
    assert_eq!(out.data, [&data[..], &data[..24]].concat());
    // An object array pickled by Python 2 is refused as numpy (without allow_pickle) does.
    let pickled = raw_npy(
        "{'descr': '|O', 'fortran_order': False, 'shape': (2L,), }",
        b"\x80\x02cnumpy.core.multiarray\n_reconstruct\nq\x01.",
    );
    fs::write(dir.path().join("objects.npy"), pickled).unwrap();
    tjoin()
        .current_dir(dir.path())
        .args(["-a", "0", "objects.npy", "-o", "out2.npy"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "input 1 (objects.npy) cannot be joined: it holds Python objects",
        ));
}

/// Lying headers, each refused within seconds under a 256 MiB address-space limit, so that
/// an allocation of what a header claims would abort the process instead of passing.
#[test]
fn lying_headers_are_refused_quickly_in_little_memory() {
    let mut safetensors_4gib = (4u64 << 30).to_le_bytes().to_vec();
    safetensors_4gib.extend_from_slice(b"{}");
    let mut safetensors_huge_shape = Vec::new();
    let header =
        br#"{"x":{"dtype":"F32","shape":[1000000000000,1000000000000],"data_offsets":[0,16]}}"#;
    safetensors_huge_shape.extend_from_slice(&(header.len() as u64).to_le_bytes());
    safetensors_huge_shape.extend_from_slice(header);
    safetensors_huge_shape.extend_from_slice(&[0; 16]);
    let mut header_past_end = b"\x93NUMPY\x02\x00".to_vec();
    header_past_end.extend_from_slice(&0xFFFF_FFF0u32.to_le_bytes());
    header_past_end.extend_from_slice(b"{'descr': '<f4', ");
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "overflow.npy",
            raw_npy(
                "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16), }",
                &[],
            ),
            "holds more bytes than any file can",
        ),
        (
            "too_big.npy",
            raw_npy(
                "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000,), }",
                &[0; 64],
            ),
            "8000000000 bytes of data",
        ),
        (
            "past_end.npy",
            header_past_end,
            "header claims 4294967280 bytes",
        ),
        (
            "huge_header.safetensors",
            safetensors_4gib,
            "input 1 (huge_header.safetensors)",
        ),
        (
            "huge_shape.safetensors",
            safetensors_huge_shape,
            "input 1 (huge_shape.safetensors)",
        ),
    ];
    let deep = ["[".repeat(1_000_000), "]".repeat(1_000_000)]
        .concat()
        .into_bytes();
    let huge_json = br#"{"dtype": "float32", "shape": [1000000000, 1000000000], "data": [1, 2]}"#;
    let bad = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/bad");
    let mut cases = cases;
    for (name, expected) in [
        (
            "npz_stored_claims_4gib.npz",
            "declares 152 bytes stored and 4294967280 bytes uncompressed",
        ),
        (
            "npz_deflated_claims_4gib.npz",
            // Refused from the member's .npy header, before anything is inflated.
            "(24 bytes of data) but the file holds 4294967152 bytes",
        ),
    ] {
        cases.push((name, fs::read(bad.join(name)).unwrap(), expected));
    }
    cases.push((
        "huge_shape.json",
        huge_json.to_vec(),
        "the shape says 1000000000000000000",
    ));
    cases.push(("deep.json", deep, "nested more than 64 deep"));
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes, expected) in cases {
        fs::write(dir.path().join(name), bytes).unwrap();
        let start = Instant::now();
        let output = tjoin_limited(
            dir.path(),
            "ulimit -v 262144",
            &["-a", "0", name, "-o", "out.npy"],
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{name} took {:?}",
            start.elapsed()
        );
        // Well-formed JSON that holds no tensor is refused as unjoinable (2), not damaged.
        let code = if name.ends_with(".json") { 2 } else { 1 };
        assert_eq!(output.status.code(), Some(code), "{name}: {stderr}");
        assert!(stderr.contains(expected), "{name}: {stderr}");
        assert!(!dir.path().join("out.npy").exists());
    }
}

/// Each input a fuzz target once found (fixtures/fuzz/, see fixtures/README.md) is refused
/// cleanly and quickly.
#[test]
fn fuzz_findings_stay_fixed() {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/fuzz");
    let out = tempfile::tempdir().unwrap();
    let mut findings = 0;
    for entry in fs::read_dir(folder).unwrap() {
        let path = entry.unwrap().path();
        let start = Instant::now();
        let stderr = refused(
            out.path(),
            &["-a", "0", path.to_str().unwrap(), "-o", "out.npy"],
            1,
        );
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "{path:?} took {:?}",
            start.elapsed()
        );
        assert!(
            stderr.starts_with("tjoin: error: input 1"),
            "{path:?}: {stderr}"
        );
        findings += 1;
    }
    assert!(findings > 0, "fixtures/fuzz holds no finding to replay");
    assert!(dir_entries(out.path()).is_empty());
}

#[test]
fn unusable_paths_among_many_inputs_are_reported_first_come_first_served() {
    // Past 16 inputs, files are opened ahead on a thread of their own: the first unusable
    // input must still be the one reported, in the words used for a single input.
    let dir = tempfile::tempdir().unwrap();
    let mut names: Vec<String> = (0..40).map(|i| format!("a{i:02}.npy")).collect();
    for name in &names {
        write_npy(&dir.path().join(name), "<f4", &[1, 2], false, &[0; 8]);
    }
    fs::create_dir(dir.path().join("folder")).unwrap();
    assert!(
        Command::new("mkfifo")
            .arg(dir.path().join("fifo.npy"))
            .status()
            .unwrap()
            .success()
    );
    // A later problem that must not be the one reported.
    names[33] = "missing-too.npy".to_string();
    for (bad, expected) in [
        ("folder", "cannot open input 25 (folder): it is a directory"),
        (
            "fifo.npy",
            "cannot read input 25 (fifo.npy): it is a pipe and nothing was written to it",
        ),
        (
            "missing.npy",
            "cannot open input 25 (missing.npy): No such file",
        ),
    ] {
        let mut listed = names.clone();
        listed[24] = bad.to_string();
        fs::write(dir.path().join("list.txt"), listed.join("\n")).unwrap();
        let args = ["-a", "0", "--files-from", "list.txt", "-o", "out.npy"];
        let stderr = refused(dir.path(), &args, 1);
        assert_mentions(&stderr, &[expected]);
        assert!(!stderr.contains("missing-too.npy"), "{bad}: {stderr}");
    }
}

/// The handlers are in place before any work: a Ctrl-C while a large JSON input is still
/// being converted (into a spill file in TMPDIR, here the test's folder) kills the run by
/// SIGINT (a shell shows 130) and leaves nothing.
#[cfg(target_os = "linux")]
#[test]
fn sigint_during_a_json_conversion_kills_by_sigint_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut json = String::with_capacity(48 << 20);
    json.push('[');
    for _ in 0..(8 << 20) {
        json.push_str("0.25,");
    }
    json.push_str("0.5]");
    fs::write(dir.path().join("big.json"), json).unwrap();
    let child = Command::new(bin())
        .current_dir(dir.path())
        .env("TMPDIR", dir.path())
        .args(["big.json", "-o", "out.npy"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !writing_into(child.id(), dir.path()) {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no conversion began"
        );
        sleep(Duration::from_millis(1));
    }
    let output = signal_and_wait(child, "INT");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(killed_by(output.status), Some(libc::SIGINT), "{stderr}");
    assert_eq!(dir_entries(dir.path()), ["big.json"]);
}

/// A Ctrl-C while standard input is still being read (its writer holds it open) kills the
/// run by SIGINT, so that a shell `for` loop around tjoin stops too, and leaves no spill file
/// and no output.
#[cfg(target_os = "linux")]
#[test]
fn sigint_while_standard_input_is_held_open_kills_by_sigint_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    write_npy(&dir.path().join("b.npy"), "<f4", &[1, 4], false, &[0; 16]);
    let mut child = Command::new(bin())
        .current_dir(dir.path())
        .env("TMPDIR", dir.path())
        .args(["-a", "0", "-", "b.npy", "-o", "out.npy"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let header = npy_header("<f4", &[1 << 20, 4], false);
    stdin.write_all(&header).unwrap();
    stdin.write_all(&[0; 4096]).unwrap();
    let start = Instant::now();
    while !writing_into(child.id(), dir.path()) {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "standard input was never spilled"
        );
        sleep(Duration::from_millis(1));
    }
    let output = signal_and_wait(child, "INT");
    drop(stdin);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(killed_by(output.status), Some(libc::SIGINT), "{stderr}");
    assert_eq!(dir_entries(dir.path()), ["b.npy"]);
}

/// What tjoin keeps per input grows its peak memory linearly with their number: a join of
/// 100,000 files must stay within the memory promise. Measured as the growth of the peak
/// resident set (`/usr/bin/time`) from 2,000 tiny inputs to 22,000: 540 to 615 bytes per
/// input from run to run, in a debug build as in a release build (1.3 KiB before it was
/// shrunk; what each part takes: `what_a_join_keeps_of_each_input_stays_small`).
#[cfg(target_os = "linux")]
#[test]
fn the_memory_kept_per_input_stays_under_720_bytes() {
    let time = Path::new("/usr/bin/time");
    assert!(time.exists(), "the test measures memory with /usr/bin/time");
    let peak_kib = |inputs: usize| -> u64 {
        let dir = tempfile::tempdir().unwrap();
        let data = crate::util::npy_bytes("<f4", &[1, 4], false, &[0; 16]);
        let mut list = String::new();
        for i in 0..inputs {
            let name = format!("{i:05}.npy");
            fs::write(dir.path().join(&name), &data).unwrap();
            list.push_str(&name);
            list.push('\n');
        }
        fs::write(dir.path().join("list"), list).unwrap();
        let output = Command::new(time)
            .args(["-f", "%M"])
            .arg(bin())
            .args(["-a", "1", "--files-from", "list", "-o", "out.npy"])
            .current_dir(dir.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{stderr}");
        stderr.trim().lines().last().unwrap().parse().unwrap()
    };
    let (few, many) = (peak_kib(2_000), peak_kib(22_000));
    let per_input = (many.saturating_sub(few) * 1024) / 20_000;
    assert!(
        // At most about 615 bytes, with room for CI's.
        per_input < 720,
        "{per_input} bytes per input ({few} KiB, then {many} KiB)"
    );
}
