//! `--append` under fire (Unix: signals, flock): an interrupt leaves the file as it was; a
//! SIGKILL leaves what `--recover` undoes, around the header rewrite too; a second appender is
//! kept out by the lock.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::append::{recovers, refused_untouched, zeros};
use crate::util::{
    assert_mentions, bin, dir_entries, killed_by, npy_bytes, npy_header, parse_npy, refused,
    succeeds, write_npy,
};

/// The target of a slow append: a C-order `|u1` [4, 4096], and `new.npy`, a Fortran-order
/// [rows, 4096] of sparse zeros, gathered into the target's order: slow enough (seconds in a
/// debug build) to catch the append in the middle.
fn slow_append_inputs(dir: &Path, rows: u64) -> Vec<u8> {
    slow_append_inputs_of(dir, rows, 4096)
}

/// [`slow_append_inputs`] with `cols` columns instead of 4,096.
fn slow_append_inputs_of(dir: &Path, rows: u64, cols: u64) -> Vec<u8> {
    let target = npy_bytes("|u1", &[4, cols], false, &vec![7; 4 * cols as usize]);
    fs::write(dir.join("target.npy"), &target).unwrap();
    let header = npy_header("|u1", &[rows, cols], true);
    let mut new = File::create(dir.join("new.npy")).unwrap();
    new.write_all(&header).unwrap();
    new.set_len(header.len() as u64 + rows * cols).unwrap();
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
    let signals = [
        ("INT", libc::SIGINT),
        ("TERM", libc::SIGTERM),
        ("HUP", libc::SIGHUP),
    ];
    for (name, number) in signals {
        let dir = tempfile::tempdir().unwrap();
        let original = slow_append_inputs(dir.path(), 65536);
        let child = slow_append_under_way(dir.path(), &original);
        assert!(dir.path().join(JOURNAL).exists(), "SIG{name}: no journal");
        signal(&child, name);
        let output = child.wait_with_output().unwrap();
        assert_eq!(killed_by(output.status), Some(number), "SIG{name}");
        assert_eq!(fs::read(dir.path().join("target.npy")).unwrap(), original);
        assert_eq!(
            dir_entries(dir.path()),
            ["new.npy", "target.npy"],
            "SIG{name}"
        );
    }
}

/// An input that shrinks while it is read: the target is cut back too. 4,096 columns are
/// gathered by positional reads of tiles, which fail at the new end of the file; 32,768
/// are too many for a tile's reads to be worth a call, and are walked through the map, where
/// reading the lost pages raises SIGBUS.
#[test]
fn an_input_truncated_during_an_append_leaves_the_target_as_it_was() {
    let cases = [
        (
            4096,
            &["new.npy", "it changed while tjoin was reading it"][..],
        ),
        (32768, &["an input shrank while tjoin was reading it"][..]),
    ];
    for (cols, messages) in cases {
        let dir = tempfile::tempdir().unwrap();
        let original = slow_append_inputs_of(dir.path(), (256 << 20) / cols, cols);
        let child = slow_append_under_way(dir.path(), &original);
        let new = OpenOptions::new()
            .write(true)
            .open(dir.path().join("new.npy"));
        new.unwrap().set_len(128).unwrap();
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{cols} columns: {stderr}");
        assert_mentions(&stderr, messages);
        assert_eq!(fs::read(dir.path().join("target.npy")).unwrap(), original);
        assert_eq!(dir_entries(dir.path()), ["new.npy", "target.npy"]);
    }
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
    let stderr = recovers(dir.path(), "target.npy");
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
        let stderr = recovers(dir.path(), "target.npy");
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
    // Unlocked before it is closed: a process another test forks meanwhile holds a copy of
    // the descriptor until it runs its program, and with it the lock, which closing this
    // copy would not release (seen once in CI); unlocking releases it for every copy.
    // SAFETY: as above.
    assert_eq!(unsafe { libc::flock(held.as_raw_fd(), libc::LOCK_UN) }, 0);
    drop(held);
    succeeds(
        dir.path(),
        &["--append", "-a", "0", "target.npy", "new.npy"],
    );
    let grown = parse_npy(&fs::read(dir.path().join("target.npy")).unwrap()).unwrap();
    assert_eq!(grown.shape, [2, 2]);
}
