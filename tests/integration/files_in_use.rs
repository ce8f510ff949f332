//! Files in use while tjoin commits: an output that replaces one of its own inputs, two runs
//! writing one target at once, a target another program holds open, and an input truncated
//! while it is mapped. Unix lets a file be renamed over, or truncated, whoever has it open;
//! Windows does not, so CI also runs this module on the Windows build under Wine
//! (`.ci/directml-wine.sh`), where each test expects what Windows allows.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::util::{
    assert_mentions, bin, dir_entries, npy_bytes, read_npy, succeeds, tjoin, write_npy,
};

/// `rows` rows of `cols` bytes, each byte `value`: an `|u1` array in C order.
fn filled(dir: &Path, name: &str, rows: u64, cols: u64, value: u8) -> Vec<u8> {
    let data = vec![value; (rows * cols) as usize];
    write_npy(&dir.join(name), "|u1", &[rows, cols], false, &data);
    data
}

/// An input larger than the early copy takes whole (64 KiB), so that it is read where it
/// lies, kept open and mapped while the output is written: one input rewritten in place (the
/// output of a join of several is never one of them), and a sharded checkpoint re-sharded
/// into its own folder, whose previous shards the commit replaces and removes.
#[test]
fn an_output_may_replace_its_one_input() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (rows, cols) = (512, 256);
    let a = filled(d, "a.npy", rows, cols, 1);
    filled(d, "b.npy", rows, cols, 2);
    succeeds(d, &["a.npy", "--cast", "uint16", "-o", "a.npy"]);
    let rewritten = read_npy(&d.join("a.npy"));
    assert_eq!(rewritten.shape, [rows, cols]);
    assert!(rewritten.data == a.iter().flat_map(|&v| [v, 0]).collect::<Vec<u8>>());
    assert_eq!(dir_entries(d), ["a.npy", "b.npy"]);

    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/sharded");
    let ckpt = d.join("ckpt");
    fs::create_dir(&ckpt).unwrap();
    for entry in fs::read_dir(fixtures.join("model")).unwrap() {
        let entry = entry.unwrap();
        fs::copy(entry.path(), ckpt.join(entry.file_name())).unwrap();
    }
    succeeds(d, &["ckpt", "-o", "ckpt", "--max-shard-size", "1KB"]);
    assert_eq!(
        dir_entries(&ckpt),
        [
            "model-00001-of-00002.safetensors",
            "model-00002-of-00002.safetensors",
            "model.safetensors.index.json",
        ]
    );
    succeeds(d, &["ckpt", "-o", "back.safetensors"]);
    let back = fs::read(d.join("back.safetensors")).unwrap();
    assert!(back == fs::read(fixtures.join("expected/model.safetensors")).unwrap());
}

/// On Linux the last rename wins. On Windows a rename over a file that another run holds
/// for a moment (its own rename, a look at the target's metadata) fails, and is tried again.
/// Four small runs at once, six times: under Wine, without the retry, one run in three
/// failed when started from a shell, and this test (with three rounds) one time in six.
#[test]
fn concurrent_writers_of_one_target_leave_one_complete_output() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = ["1.npy", "2.npy", "3.npy", "4.npy"];
    for (value, name) in (1..).zip(inputs) {
        filled(dir.path(), name, 64, 64, value);
    }
    for _ in 0..6 {
        let runs: Vec<_> = inputs
            .iter()
            .map(|input| {
                Command::new(bin())
                    .current_dir(dir.path())
                    .args(["-a", "0", input, input, "-o", "out.npy"])
                    .stdin(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for run in runs {
            let output = run.wait_with_output().unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(output.status.success(), "{stderr}");
        }
        let out = read_npy(&dir.path().join("out.npy"));
        assert_eq!(out.shape, [128, 64]);
        let byte = out.data[0];
        assert!((1..=4).contains(&byte));
        assert!(
            out.data.iter().all(|&b| b == byte),
            "a mixture of two outputs"
        );
        let mut names = inputs.to_vec();
        names.push("out.npy");
        assert_eq!(dir_entries(dir.path()), names);
    }
}

/// A target this process (another program, to tjoin) holds open: Unix replaces it, and the
/// handle still reads the previous version. Windows 10 1607 and later, on NTFS, replaces it
/// too (the standard library's rename asks for POSIX semantics, and this handle allows
/// deletion), but Wine 8.0 and older Windows refuse for as long as the handle is open: tjoin
/// then tries for 2 s, says why, and leaves the target as it was and nothing else.
#[test]
fn a_target_another_program_holds_open_is_replaced_or_left_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let a = filled(d, "a.npy", 256, 1024, 1);
    let previous = npy_bytes("|u1", &[1, 4], false, &[9; 4]);
    fs::write(d.join("out.npy"), &previous).unwrap();
    let held = File::open(d.join("out.npy")).unwrap();
    let started = Instant::now();
    let output = tjoin()
        .current_dir(d)
        .args(["-a", "0", "a.npy", "a.npy", "-o", "out.npy"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    if cfg!(windows) && !output.status.success() {
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert_mentions(
            &stderr,
            &["out.npy", "another program has it open", "after 2 s"],
        );
        assert!(!stderr.contains("tjoin-partial"), "{stderr}");
        assert!(started.elapsed() >= Duration::from_secs(2));
        assert_eq!(fs::read(d.join("out.npy")).unwrap(), previous);
    } else {
        assert!(output.status.success(), "{stderr}");
        let out = read_npy(&d.join("out.npy"));
        assert!(out.data == a.repeat(2));
    }
    drop(held);
    assert_eq!(dir_entries(d), ["a.npy", "out.npy"]);
}

/// An input truncated while tjoin reads it through a map. Linux lets the truncation happen,
/// reading the lost pages raises SIGBUS, and tjoin fails, removing its new file. Windows
/// refuses to truncate a file that is mapped (ERROR_USER_MAPPED_FILE, 1224): the input stays
/// whole, and so does the output.
#[test]
fn an_input_truncated_while_mapped_fails_cleanly_or_is_refused_by_windows() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // b.npy, in Fortran order and sparse, is gathered element by element: slow enough to
    // catch the run in the middle (a smaller one on Windows, where the run goes to its end).
    let (rows, cols) = if cfg!(windows) {
        (512, 8192)
    } else {
        (4096, 65536)
    };
    filled(d, "a.npy", rows, 2, 7);
    let b_len = sparse_b(d, rows, cols, true);
    // Past the header, every input of a join of several rounds is mapped.
    let (truncated, output) = truncate_b_while_joining(d, "1", 64 << 10);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if cfg!(windows) {
        assert_windows_refused_the_truncation(d, truncated, &output, [rows, 2 + cols], b_len);
        assert_eq!(dir_entries(d), ["a.npy", "b.npy", "out.npy"]);
    } else {
        truncated.unwrap();
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert_mentions(&stderr, &["an input shrank while tjoin was reading it"]);
        assert_eq!(dir_entries(d), ["a.npy", "b.npy"]);
    }
}

/// An input truncated after it was opened, before the engine reads it: joined in one round,
/// the second input (8 MiB, past what is read rather than mapped) is mapped only once the
/// first is copied. Windows refuses to map bytes past a file's end; on Linux the map
/// succeeds and writing from its lost pages fails with EFAULT, which must blame the input,
/// not the output. Either way the run fails, saying why, and leaves nothing.
#[test]
fn an_input_truncated_before_it_is_read_fails_cleanly_and_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    filled(d, "a.npy", 64 << 10, 1024, 0);
    filled(d, "b.npy", 8 << 10, 1024, 1);
    let (truncated, output) = truncate_b_while_joining(d, "0", 0);
    assert_b_was_blamed(d, truncated, &output);
}

/// An input truncated while its long runs (1 MiB a round, past `DIRECT_RUN`, at offsets the
/// kernel declines) are written from its map, round by round. On Linux the write from the
/// lost pages fails with EFAULT, which must blame the input, not the output; Windows refuses
/// the truncation, and the join completes.
#[test]
fn an_input_truncated_while_its_long_runs_are_written_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (rows, cols) = (512, 1 << 20);
    filled(d, "a.npy", rows, 2, 7);
    let b_len = sparse_b(d, rows, cols, false);
    let (truncated, output) = truncate_b_while_joining(d, "1", 1 << 20);
    if cfg!(windows) {
        assert_windows_refused_the_truncation(d, truncated, &output, [rows, 2 + cols], b_len);
    } else {
        assert_b_was_blamed(d, truncated, &output);
    }
}

/// That the join failed (exit 1) because `b.npy` was truncated, saying so with its length and
/// blaming it rather than the output, and left no new file.
fn assert_b_was_blamed(dir: &Path, truncated: io::Result<()>, output: &Output) {
    truncated.unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let why = "input 2 (b.npy): it is 128 bytes long, shorter than the";
    assert_mentions(&stderr, &[why]);
    assert!(!stderr.contains("cannot write the output"), "{stderr}");
    assert_eq!(dir_entries(dir), ["a.npy", "b.npy"]);
}

/// What Windows does when `b.npy` is truncated while tjoin maps it: refuses the truncation
/// (ERROR_USER_MAPPED_FILE), so `b.npy` keeps its `b_len` bytes and the join completes.
fn assert_windows_refused_the_truncation(
    dir: &Path,
    truncated: io::Result<()>,
    output: &Output,
    shape: [u64; 2],
    b_len: u64,
) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    let refused = truncated.expect_err("Windows truncated a mapped file");
    assert_eq!(refused.raw_os_error(), Some(1224), "{refused}");
    assert!(output.status.success(), "{stderr}");
    assert_eq!(read_npy(&dir.join("out.npy")).shape, shape);
    assert_eq!(fs::metadata(dir.join("b.npy")).unwrap().len(), b_len);
}

/// Writes `b.npy` in `dir`, `rows` x `cols` bytes of zeros, as a sparse file (in Fortran
/// order if `fortran`); returns its length.
fn sparse_b(dir: &Path, rows: u64, cols: u64, fortran: bool) -> u64 {
    let header = crate::util::npy_header("|u1", &[rows, cols], fortran);
    fs::write(dir.join("b.npy"), &header).unwrap();
    let len = header.len() as u64 + rows * cols;
    let b = OpenOptions::new().write(true).open(dir.join("b.npy"));
    b.unwrap().set_len(len).unwrap();
    len
}

/// Joins `a.npy` and `b.npy` in `dir` along `axis` and, once the run is writing (on Windows,
/// where the new file has a name from the start, once that file holds more than `written`
/// bytes; on Linux, once it has its unnamed file open), truncates `b.npy` to 128 bytes.
/// Returns how the truncation went and how the run ended.
fn truncate_b_while_joining(dir: &Path, axis: &str, written: u64) -> (io::Result<()>, Output) {
    let child = Command::new(bin())
        .current_dir(dir)
        .args(["-a", axis, "a.npy", "b.npy", "-o", "out.npy"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !writing_more_than(child.id(), dir, written) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "tjoin never started writing"
        );
        sleep(Duration::from_millis(1));
    }
    let b = OpenOptions::new().write(true).open(dir.join("b.npy"));
    let truncated = b.unwrap().set_len(128);
    (truncated, child.wait_with_output().unwrap())
}

/// Whether run `pid` is writing its new output in `dir` (see [`truncate_b_while_joining`]).
fn writing_more_than(pid: u32, dir: &Path, written: u64) -> bool {
    if cfg!(unix) {
        return crate::util::writing_into(pid, dir);
    }
    let pid = format!(".{pid}.");
    fs::read_dir(dir).unwrap().flatten().any(|entry| {
        let name = entry.file_name().to_string_lossy().into_owned();
        name.ends_with(".tjoin-partial")
            && name.contains(&pid)
            && entry.metadata().is_ok_and(|m| m.len() > written)
    })
}

/// A file appended to itself under another name (a hard link, `./` before its name) is
/// refused and left as it was: it would grow while it is read. tjoin tells a file by its
/// identity: device and inode on Unix, volume serial number and file index on Windows.
#[test]
fn a_file_appended_to_itself_under_another_name_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    filled(d, "target.npy", 4, 8, 1);
    fs::hard_link(d.join("target.npy"), d.join("link.npy")).unwrap();
    let before = fs::read(d.join("target.npy")).unwrap();
    for other in ["link.npy", "./target.npy"] {
        let output = tjoin()
            .current_dir(d)
            .args(["--append", "-a", "0", "target.npy", other])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{other}: {stderr}");
        assert_mentions(
            &stderr,
            &["is the file being appended to, input 1 (target.npy)"],
        );
        assert_eq!(fs::read(d.join("target.npy")).unwrap(), before, "{other}");
    }
}

/// Two appends to one file at once: while the first runs (it holds the file's lock), the
/// second is refused, says that another process holds the lock, and leaves the file to the
/// first, which completes. The first appends a Fortran-order input gathered element by
/// element, slow enough for the second to start meanwhile; should the first end before the
/// second does, the race is run again with four times the rows.
#[test]
fn a_second_append_while_one_runs_is_kept_out() {
    let mut rows = 2048;
    for _ in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        filled(d, "target.npy", 4, 4096, 7);
        filled(d, "more.npy", 1, 4096, 9);
        let header = crate::util::npy_header("|u1", &[rows, 4096], true);
        let mut new = File::create(d.join("new.npy")).unwrap();
        io::Write::write_all(&mut new, &header).unwrap();
        new.set_len(header.len() as u64 + rows * 4096).unwrap();
        drop(new);
        let original = fs::metadata(d.join("target.npy")).unwrap().len();
        let mut first = Command::new(bin())
            .current_dir(d)
            .args(["--append", "-a", "0", "target.npy", "new.npy"])
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let start = Instant::now();
        while fs::metadata(d.join("target.npy")).unwrap().len() <= original
            && first.try_wait().unwrap().is_none()
        {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "the append never started"
            );
            sleep(Duration::from_millis(1));
        }
        let second = tjoin()
            .current_dir(d)
            .args(["--append", "-a", "0", "target.npy", "more.npy"])
            .output()
            .unwrap();
        let overlapped = first.try_wait().unwrap().is_none();
        let output = first.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let grown = read_npy(&d.join("target.npy"));
        if !overlapped {
            rows *= 4;
            continue;
        }
        let stderr = String::from_utf8_lossy(&second.stderr);
        assert_eq!(second.status.code(), Some(1), "{stderr}");
        assert_mentions(&stderr, &["target.npy", "another process holds its lock"]);
        assert_eq!(grown.shape, [4 + rows, 4096]);
        return;
    }
    panic!("the first append always ended before the second: the lock was not tested");
}
