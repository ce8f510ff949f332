//! `--recover` against journals it did not write (Unix: a journal names its file by device
//! and inode). A healthy file with a journal beside it whose fields lie, in each way an
//! attacker who can write to the folder could make them lie: `--recover` refuses, says what
//! disagrees, and changes nothing, and `--append` refuses with the same reason rather than
//! sending the user to `--recover`.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use crate::append::recovers;
use crate::util::{assert_mentions, npy_bytes, npy_header, refused, tjoin};

const JOURNAL: &str = ".target.npy.tjoin-journal";

/// A healthy `target.npy`, `<f4` [64, 4] (128 + 1024 bytes), and `new.npy` to append.
fn healthy(dir: &Path) -> Vec<u8> {
    let target = npy_bytes("<f4", &[64, 4], false, &[1; 1024]);
    fs::write(dir.join("target.npy"), &target).unwrap();
    fs::write(
        dir.join("new.npy"),
        npy_bytes("<f4", &[1, 4], false, &[2; 16]),
    )
    .unwrap();
    target
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A journal in tjoin's form for `target.npy` in `dir`, with its real device and inode.
fn journal(dir: &Path, old_len: u64, new_len: u64, old: &[u8], new: &[u8]) -> String {
    let meta = fs::metadata(dir.join("target.npy")).unwrap();
    format!(
        "tjoin append journal 1\ndevice: {}\ninode: {}\nold length: {old_len}\n\
         new length: {new_len}\nold header: {}\nnew header: {}\n",
        meta.dev(),
        meta.ino(),
        hex(old),
        hex(new)
    )
}

/// The header of a `<f4` [rows, 4] array, and the length of such a file.
fn rows(rows: u64) -> (Vec<u8>, u64) {
    let header = npy_header("<f4", &[rows, 4], false);
    let len = header.len() as u64 + rows * 16;
    (header, len)
}

/// `--recover` and `--append` on `target.npy` both refuse, mention `why`, and leave the
/// target and the journal as they were.
#[track_caller]
fn refused_unchanged(dir: &Path, case: &str, why: &[&str]) {
    let target = fs::read(dir.join("target.npy")).unwrap();
    let journal = fs::symlink_metadata(dir.join(JOURNAL)).unwrap();
    for args in [
        &["--recover", "target.npy"][..],
        &["--append", "-a", "0", "target.npy", "new.npy"],
    ] {
        let output = tjoin()
            .current_dir(dir)
            .args(args)
            .timeout(Duration::from_secs(30))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{case}: {args:?}: {stderr}");
        assert_mentions(&stderr, why);
        assert_mentions(&stderr, &["nothing was changed"]);
        assert!(!stderr.contains("run `tjoin --recover"), "{case}: {stderr}");
        assert!(
            fs::read(dir.join("target.npy")).unwrap() == target,
            "{case}: {args:?} changed the target"
        );
        let now = fs::symlink_metadata(dir.join(JOURNAL)).unwrap();
        assert_eq!(now.ino(), journal.ino(), "{case}: the journal was removed");
    }
}

/// Journals whose lengths and headers disagree with each other or with the file, each
/// beside a healthy file: every one is refused, and the file is byte for byte as it was.
#[test]
fn recover_refuses_a_journal_that_disagrees_with_itself_or_the_file() {
    let (real, real_len) = rows(64);
    let (h16, len16) = rows(16);
    let (h32, len32) = rows(32);
    let (h48, len48) = rows(48);
    let (h80, len80) = rows(80);
    let (h96, len96) = rows(96);
    let (h300, len300) = rows(300);
    let wide = npy_header("<f4", &[1, 64], false);
    let other_type = npy_header("<i4", &[80, 4], false);
    for h in [&h16, &h300, &wide, &other_type] {
        assert_eq!(
            h.len(),
            real.len(),
            "the test's headers must have one length"
        );
    }
    let mut not_npy = real.clone();
    not_npy[..6].copy_from_slice(b"NOTNPY");
    let header_len = real.len() as u64;
    let cases: Vec<(&str, String, Vec<&str>)> = vec![
        (
            "an old length the old header does not declare (the cut to 128 bytes)",
            journal_for(header_len, real_len, &real, &real),
            vec![
                "its old header declares float32 [64, 4], which ends at byte 1152, but its old length is 128",
            ],
        ),
        (
            "an invented old header, the file's header neither old, new nor a mix",
            journal_for(len16, len300, &h16, &h300),
            vec![
                "neither its old header nor its new one, nor a mix",
                "its byte 61 is 0x36, where the old header has 0x31 and the new one 0x33",
            ],
        ),
        (
            "an invented [1, 64] header for a file longer than the new length",
            journal_for(
                header_len + 256,
                header_len + 512,
                &wide,
                &npy_header("<f4", &[2, 64], false),
            ),
            vec![
                "target.npy is 1152 bytes long",
                "old length, 384, and its new length, 640",
            ],
        ),
        (
            "a new length shorter than the file",
            journal_for(len32, len48, &h32, &h48),
            vec!["target.npy is 1152 bytes long", "its new length, 896"],
        ),
        (
            "an old length longer than the file",
            journal_for(len80, len96, &h80, &h96),
            vec!["target.npy is 1152 bytes long", "its old length, 1408"],
        ),
        (
            "a new length its new header does not declare",
            journal_for(real_len, 99_999, &real, &h80),
            vec![
                "its new header declares float32 [80, 4], which ends at byte 1408, but its new length is 99999",
            ],
        ),
        (
            "headers of two different arrays",
            journal_for(real_len, len80, &real, &other_type),
            vec!["not one array grown along its growth axis", "int32 [80, 4]"],
        ),
        (
            "an old header that is not a .npy header",
            journal_for(real_len, len80, &not_npy, &h80),
            vec!["its old header is not a .npy header"],
        ),
        (
            "text that is not a journal",
            "tjoin append journal 1\ncut to: 0\n".to_string(),
            vec!["it does not hold what tjoin writes in a journal"],
        ),
    ];
    for (case, text, why) in cases {
        let dir = tempfile::tempdir().unwrap();
        healthy(dir.path());
        let text = text.replace("DEVICE-INODE", &id_lines(dir.path()));
        fs::write(dir.path().join(JOURNAL), text).unwrap();
        refused_unchanged(dir.path(), case, &why);
    }
}

/// A journal for `target.npy` whose device and inode lines are filled in later, once the
/// target exists ([`id_lines`]).
fn journal_for(old_len: u64, new_len: u64, old: &[u8], new: &[u8]) -> String {
    format!(
        "tjoin append journal 1\nDEVICE-INODE\nold length: {old_len}\nnew length: {new_len}\n\
         old header: {}\nnew header: {}\n",
        hex(old),
        hex(new)
    )
}

fn id_lines(dir: &Path) -> String {
    let text = journal(dir, 0, 0, b"", b"");
    text.lines().skip(1).take(2).collect::<Vec<_>>().join("\n")
}

/// A journal that is not a regular file tjoin could have written: a symbolic link to a
/// journal, a FIFO (which must not hang tjoin), one owned by another user, one longer than
/// the limit a journal is read up to.
#[test]
fn recover_refuses_a_journal_that_is_not_a_regular_file_of_the_files_owner() {
    let (real, real_len) = rows(64);
    let (h80, len80) = rows(80);
    let header_len = real.len() as u64;
    // Agrees with the file but for its old length: acted on, it would cut the file to 128.
    let lying = |dir: &Path| journal(dir, header_len, real_len, &real, &real);

    let dir = tempfile::tempdir().unwrap();
    healthy(dir.path());
    fs::write(dir.path().join("elsewhere"), lying(dir.path())).unwrap();
    std::os::unix::fs::symlink("elsewhere", dir.path().join(JOURNAL)).unwrap();
    refused_unchanged(dir.path(), "a symbolic link", &["it is a symbolic link"]);

    let dir = tempfile::tempdir().unwrap();
    healthy(dir.path());
    let fifo = std::ffi::CString::new(
        dir.path()
            .join(JOURNAL)
            .into_os_string()
            .into_encoded_bytes(),
    );
    // SAFETY: mkfifo reads the NUL-terminated path, which outlives the call.
    assert_eq!(unsafe { libc::mkfifo(fifo.unwrap().as_ptr(), 0o600) }, 0);
    refused_unchanged(dir.path(), "a FIFO", &["it is a FIFO"]);

    let dir = tempfile::tempdir().unwrap();
    healthy(dir.path());
    let journal_path = dir.path().join(JOURNAL);
    fs::write(&journal_path, vec![b' '; 6 << 20]).unwrap();
    refused_unchanged(
        dir.path(),
        "a journal over the limit",
        &[
            JOURNAL,
            "it is 6291456 bytes long, more than the 5242880 bytes (5 MiB)",
        ],
    );

    if crate::util::as_root() {
        let dir = tempfile::tempdir().unwrap();
        healthy(dir.path());
        let journal_path = dir.path().join(JOURNAL);
        fs::write(
            &journal_path,
            journal(dir.path(), real_len, len80, &real, &h80),
        )
        .unwrap();
        std::os::unix::fs::chown(&journal_path, Some(12345), None).unwrap();
        // The journal agrees with the file: only its owner gives it away.
        refused_unchanged(
            dir.path(),
            "a journal of another user",
            &["it belongs to user 12345, but target.npy belongs to user 0"],
        );
    } else {
        crate::util::cannot_run("only root can give the journal to another user");
    }
}

/// A journal that agrees with itself and with the file is still acted on: the file at its
/// old length with its old header and the journal an append left before it wrote anything.
#[test]
fn recover_acts_on_a_journal_that_agrees_with_the_file() {
    let (real, real_len) = rows(64);
    let (h80, len80) = rows(80);
    let dir = tempfile::tempdir().unwrap();
    let original = healthy(dir.path());
    let text = journal(dir.path(), real_len, len80, &real, &h80);
    fs::write(dir.path().join(JOURNAL), text).unwrap();
    let stderr = refused(
        dir.path(),
        &["--append", "-a", "0", "target.npy", "new.npy"],
        1,
    );
    assert_mentions(
        &stderr,
        &["its journal", "run `tjoin --recover target.npy` first"],
    );
    assert_mentions(
        &recovers(dir.path(), "target.npy"),
        &[
            "recovered target.npy: removed the journal",
            "float32 [64, 4]",
        ],
    );
    assert_eq!(fs::read(dir.path().join("target.npy")).unwrap(), original);
    assert!(!dir.path().join(JOURNAL).exists());
}
