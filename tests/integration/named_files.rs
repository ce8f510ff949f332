//! Files that tjoin opens because a file or a flag names them (issue 27, items 5, 6 and 14):
//! a FIFO an index, a `--like` index or a journal's name points to is refused at once instead
//! of waited on forever; every file read whole stops at its limit (`/dev/zero` included) with
//! a message that names the file and the limit; pipes named as inputs (`<(zcat a.npy.gz)`)
//! are read once into a temporary file, as standard input is. Every run has a timeout: a
//! regression fails the test instead of hanging it.

use std::fs;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

use crate::reliability::tjoin_limited;
use crate::util::{assert_mentions, dir_entries, npy_bytes, read_npy, tjoin, write_npy};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/sharded");

/// How long a run may take before it counts as hung.
const HUNG: Duration = Duration::from_secs(30);

/// Runs tjoin in `dir`, killed after [`HUNG`].
fn run(dir: &Path, args: &[&str]) -> Output {
    tjoin()
        .current_dir(dir)
        .args(args)
        .timeout(HUNG)
        .output()
        .unwrap()
}

/// Runs tjoin in `dir` and asserts that it was refused with `code` (not killed by the
/// timeout), wrote nothing on stdout and left the folder's names as they were. Returns stderr.
#[track_caller]
fn refused_in_time(dir: &Path, args: &[&str], code: i32) -> String {
    let before = dir_entries(dir);
    let output = run(dir, args);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(
        output.status.code(),
        Some(code),
        "tjoin {args:?} (killed after {HUNG:?} when it hangs): {}\n{stderr}",
        output.status
    );
    assert!(stderr.starts_with("tjoin: error: "), "{args:?}: {stderr}");
    assert!(output.stdout.is_empty(), "{args:?}");
    assert_eq!(dir_entries(dir), before, "{args:?} left a file behind");
    stderr
}

fn mkfifo(path: &Path) {
    let made = std::process::Command::new("mkfifo").arg(path).status();
    assert!(made.unwrap().success(), "mkfifo {}", path.display());
}

/// Copies the fixture checkpoint `fixtures/sharded/model` into `dir/to`.
fn copy_model(dir: &Path, to: &str) {
    fs::create_dir(dir.join(to)).unwrap();
    for entry in fs::read_dir(Path::new(FIXTURES).join("model")).unwrap() {
        let entry = entry.unwrap();
        fs::copy(entry.path(), dir.join(to).join(entry.file_name())).unwrap();
    }
}

/// A shard an index lists, replaced by a symlink to a FIFO.
fn shard_through_fifo(dir: &Path, folder: &str) {
    let shard = dir.join(folder).join("model-00002-of-00004.safetensors");
    fs::remove_file(&shard).unwrap();
    mkfifo(&dir.join("fifo"));
    std::os::unix::fs::symlink(dir.join("fifo"), shard).unwrap();
}

#[test]
fn a_fifo_an_index_lists_is_refused_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    copy_model(dir.path(), "model");
    shard_through_fifo(dir.path(), "model");
    for input in ["model/model.safetensors.index.json", "model/"] {
        let stderr = refused_in_time(dir.path(), &[input, "-o", "out.safetensors"], 1);
        assert_mentions(
            &stderr,
            &[
                "model-00002-of-00004.safetensors",
                "not a regular file but a FIFO",
                "the index model/model.safetensors.index.json lists it",
            ],
        );
    }
}

#[test]
fn a_fifo_a_like_index_lists_is_refused_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    copy_model(dir.path(), "model");
    copy_model(dir.path(), "reference");
    shard_through_fifo(dir.path(), "reference");
    let like = "reference/model.safetensors.index.json";
    let stderr = refused_in_time(
        dir.path(),
        &["model/", "--like", like, "-o", "out.safetensors"],
        1,
    );
    assert_mentions(
        &stderr,
        &[
            "reference/model-00002-of-00004.safetensors",
            "not a regular file but a FIFO",
            "the --like index reference/model.safetensors.index.json lists it",
        ],
    );
}

#[test]
fn a_fifo_under_an_index_name_or_a_journal_name_is_refused_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    mkfifo(&dir.path().join("model.safetensors.index.json"));
    let stderr = refused_in_time(
        dir.path(),
        &["model.safetensors.index.json", "-o", "out.safetensors"],
        1,
    );
    assert_mentions(&stderr, &["not a regular file but a FIFO"]);

    write_npy(&dir.path().join("t.npy"), "<f4", &[2], false, &[0; 8]);
    write_npy(&dir.path().join("b.npy"), "<f4", &[1], false, &[0; 4]);
    mkfifo(&dir.path().join(".t.npy.tjoin-journal"));
    for args in [
        &["--append", "-a", "0", "t.npy", "b.npy"][..],
        &["--recover", "t.npy"],
    ] {
        let stderr = refused_in_time(dir.path(), args, 1);
        assert_mentions(
            &stderr,
            &[
                ".t.npy.tjoin-journal",
                "it is a FIFO",
                "nothing was changed",
            ],
        );
    }
}

/// Each file read whole, made endless (`/dev/zero`) or huge (a sparse file), stops at its
/// limit in little memory with a message that names the file and the limit.
#[test]
fn every_file_read_whole_stops_at_its_limit() {
    let dir = tempfile::tempdir().unwrap();
    copy_model(dir.path(), "model");
    write_npy(&dir.path().join("a.npy"), "<f4", &[2], false, &[0; 8]);
    write_npy(&dir.path().join("b.npy"), "<f4", &[1], false, &[0; 4]);
    let sparse = |path: &Path| {
        let file = fs::File::create(path).unwrap();
        file.set_len(2 << 30).unwrap();
    };
    fs::create_dir(dir.path().join("out")).unwrap();
    sparse(&dir.path().join("out/model.safetensors.index.json"));
    sparse(&dir.path().join(".a.npy.tjoin-journal"));
    sparse(&dir.path().join("big.safetensors.index.json"));
    let cases: [(&[&str], &[&str]); 7] = [
        (
            &[
                "-a",
                "0",
                "a.npy",
                "b.npy",
                "--rules",
                "/dev/zero",
                "-o",
                "o.npy",
            ],
            &[
                "the rules file /dev/zero",
                "16,777,216 bytes",
                "a rules file",
            ],
        ),
        (
            &["-a", "0", "--files-from", "/dev/zero", "-o", "o.npy"],
            &["the file list /dev/zero", "65,536 bytes", "a list of paths"],
        ),
        (
            &["model/", "--names-from", "/dev/zero", "-o", "out/"],
            &["/dev/zero", "100,000,000 bytes", "an index"],
        ),
        (
            &["model/", "-o", "out/", "--max-shard-size", "1MB"],
            &["out/model.safetensors.index.json", "100,000,000 bytes"],
        ),
        (
            &["big.safetensors.index.json", "-o", "o.safetensors"],
            &["big.safetensors.index.json", "100,000,000 bytes"],
        ),
        (
            &["--append", "-a", "0", "a.npy", "b.npy"],
            &[
                ".a.npy.tjoin-journal",
                "more than the 5242880 bytes (5 MiB) a journal is read up to",
            ],
        ),
        (
            &["--recover", "a.npy"],
            &[
                ".a.npy.tjoin-journal",
                "more than the 5242880 bytes (5 MiB) a journal is read up to",
            ],
        ),
    ];
    for (args, needles) in cases {
        let before = dir_entries(dir.path());
        let output = tjoin_limited(dir.path(), "ulimit -v 400000", args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.starts_with("tjoin: error: "), "{args:?}: {stderr}");
        assert_mentions(&stderr, needles);
        if !args.contains(&"--append") && !args.contains(&"--recover") {
            assert_mentions(&stderr, &["the most tjoin reads of"]);
        }
        assert_eq!(dir_entries(dir.path()), before, "{args:?}");
    }
}

/// Whether bash runs here, for `<(...)`; when it does not, says so ([`crate::util::cannot_run`]).
fn bash_runs() -> bool {
    let runs = std::process::Command::new("bash")
        .arg("--version")
        .output()
        .is_ok();
    if !runs {
        crate::util::cannot_run("no bash for <(...)");
    }
    runs
}

/// Runs `script` in bash in `dir`, with `$0` the tjoin under test, killed after [`HUNG`].
fn bash(dir: &Path, script: &str) -> Output {
    assert_cmd::Command::new("bash")
        .args(["-c", script])
        .arg(crate::util::bin())
        .current_dir(dir)
        .timeout(HUNG)
        .output()
        .unwrap()
}

/// `tjoin -a 0 <(cat a.npy) <(cat b.npy)`: process substitution gives pipes (`/dev/fd/63`),
/// each copied once into a temporary file, as standard input is, and joined.
#[test]
fn pipes_named_as_inputs_are_read_once_and_joined() {
    if !bash_runs() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let a: Vec<u8> = (0u8..24).collect();
    let b: Vec<u8> = (100u8..112).collect();
    fs::write(
        dir.path().join("a.npy"),
        npy_bytes("<f4", &[2, 3], false, &a),
    )
    .unwrap();
    fs::write(
        dir.path().join("b.npy"),
        npy_bytes("<f4", &[1, 3], false, &b),
    )
    .unwrap();
    let script = "\"$0\" -a 0 <(cat a.npy) - <(cat b.npy) -o out.npy < b.npy";
    let output = std::process::Command::new("bash")
        .current_dir(dir.path())
        .args(["-c", script])
        .arg(crate::util::bin())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let out = read_npy(&dir.path().join("out.npy"));
    assert_eq!(out.shape, [4, 3]);
    assert_eq!(out.data, [a, b.clone(), b].concat());
    assert_eq!(dir_entries(dir.path()), ["a.npy", "b.npy", "out.npy"]);

    // A pipe that gives nothing says so, naming it.
    let script = "\"$0\" -a 0 a.npy <(true) -o out2.npy";
    let output = std::process::Command::new("bash")
        .current_dir(dir.path())
        .args(["-c", script])
        .arg(crate::util::bin())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_mentions(&stderr, &["input 2 (/dev/fd/", "nothing was written to it"]);
    assert_eq!(dir_entries(dir.path()), ["a.npy", "b.npy", "out.npy"]);
}

/// A FIFO named as an input, with a writer: read once, like a pipe from the shell. The test
/// holds the FIFO open for writing (and reading, so that opening never waits) with the data in
/// it, and closes it once tjoin has it open: tjoin then reads the data and the end.
#[cfg(target_os = "linux")]
#[test]
fn a_named_fifo_with_a_writer_is_read_as_an_input() {
    use std::io::Write;
    use std::time::Instant;
    let dir = tempfile::tempdir().unwrap();
    let a: Vec<u8> = (0u8..8).collect();
    let bytes = npy_bytes("<f4", &[2], false, &a);
    fs::write(dir.path().join("a.npy"), &bytes).unwrap();
    let fifo = dir.path().join("fifo.npy");
    mkfifo(&fifo);
    let fifo = fs::canonicalize(&fifo).unwrap();
    let held = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&fifo)
        .unwrap();
    (&held).write_all(&bytes).unwrap();
    let mut child = std::process::Command::new(crate::util::bin())
        .current_dir(dir.path())
        .args(["-a", "0", "a.npy", "fifo.npy", "-o", "out.npy"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + HUNG;
    let has_it_open = |pid: u32| {
        let fds = fs::read_dir(format!("/proc/{pid}/fd"))
            .into_iter()
            .flatten();
        fds.flatten()
            .any(|fd| fs::read_link(fd.path()).is_ok_and(|target| target == fifo))
    };
    while !has_it_open(child.id())
        && child.try_wait().unwrap().is_none()
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(held);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("tjoin did not finish within {HUNG:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "{stderr}");
    assert_eq!(
        read_npy(&dir.path().join("out.npy")).data,
        [&a[..], &a].concat()
    );
}

/// Issue 39, item 7: an endless device named as an input was copied into a temporary file
/// until the disk filled. Its first bytes now say it is no format tjoin reads, and it is
/// refused at once, with nothing written.
#[test]
fn endless_devices_are_refused_from_their_first_bytes() {
    let dir = tempfile::tempdir().unwrap();
    write_npy(&dir.path().join("b.npy"), "<f4", &[1, 4], false, &[0; 16]);
    for device in ["/dev/zero", "/dev/urandom"] {
        let output = run(dir.path(), &["-a", "0", device, "b.npy", "-o", "out.npy"]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{device}: {stderr}");
        assert_mentions(&stderr, &[&format!("input 1 ({device})")]);
        if device == "/dev/zero" {
            assert_mentions(
                &stderr,
                &[
                    "not a valid .npy file",
                    "its first bytes are 00 00 00 00",
                    "stopped reading it after 65536 bytes",
                ],
            );
        }
        assert_eq!(dir_entries(dir.path()), ["b.npy"], "{device}");
    }
}

/// Pipes that start as a real file does and then go on forever (a .npy then zeros; JSON text
/// then random bytes): read no further than the header declares, or than the bytes are text,
/// and refused. A pipe that carries just the file is still read (the tests above).
#[test]
fn pipes_fed_forever_are_refused_where_they_stop_making_sense() {
    if !bash_runs() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write_npy(&dir.path().join("b.npy"), "<f4", &[1, 4], false, &[0; 16]);
    let cases = [
        (
            "\"$0\" -a 0 <(cat b.npy /dev/zero) b.npy -o out.npy",
            "goes on past the 144 bytes its header declares",
        ),
        (
            "cat b.npy /dev/zero | \"$0\" -a 0 - b.npy -o out.npy",
            "goes on past the 144 bytes its header declares",
        ),
        (
            "(printf '[1, 2, '; cat /dev/urandom) | \"$0\" -a 0 - -o out.npy",
            "which JSON text never holds",
        ),
    ];
    for (script, said) in cases {
        let output = bash(dir.path(), script);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{script}: {stderr}");
        assert_mentions(&stderr, &[said, "stopped reading it"]);
        assert_eq!(dir_entries(dir.path()), ["b.npy"], "{script}");
    }
}

/// A stream whose .npy header declares 8 PiB, then zeros: read no further than declared is
/// still more than any disk holds, so it is refused before anything is copied (it was copied
/// until the disk filled).
#[test]
fn a_stream_declaring_more_than_the_disk_holds_is_refused_before_copying() {
    if !bash_runs() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write_npy(&dir.path().join("b.npy"), "<f8", &[1], false, &[0; 8]);
    let header = crate::util::npy_header("<f8", &[1 << 50], false);
    fs::write(dir.path().join("huge.header"), header).unwrap();
    let script = "cat huge.header /dev/zero | \"$0\" -a 0 - b.npy -o out.npy";
    let output = bash(dir.path(), script);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_mentions(
        &stderr,
        &[
            "cannot copy input 1 (-)",
            "its header declares 9007199254741120 bytes, more than the",
            "nothing was copied",
        ],
    );
    assert_eq!(dir_entries(dir.path()), ["b.npy", "huge.header"]);
}
