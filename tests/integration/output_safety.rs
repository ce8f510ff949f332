//! The output file: written only on success, safe over an input, no leftovers, normal permissions.

use std::fs;
use std::path::Path;

use crate::util::{assert_mentions, dir_entries, npy_bytes, read_npy, refused, tjoin, write_npy};

/// Little-endian bytes of `values`, the data of an `<i4` array.
fn i32_le(values: impl IntoIterator<Item = i32>) -> Vec<u8> {
    values.into_iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Writes `dir/name`, an `<i4` array of `shape` holding `values`.
fn write_i4(dir: &Path, name: &str, shape: &[u64], values: impl IntoIterator<Item = i32>) {
    write_npy(&dir.join(name), "<i4", shape, false, &i32_le(values));
}

#[test]
fn output_may_overwrite_an_input() {
    let dir = tempfile::tempdir().unwrap();
    write_i4(dir.path(), "x.npy", &[2, 3], 0..6);
    write_i4(dir.path(), "y.npy", &[1, 3], 6..9);
    tjoin()
        .current_dir(dir.path())
        .args(["-a", "0", "x.npy", "y.npy", "-o", "x.npy"])
        .assert()
        .success();
    assert_eq!(
        fs::read(dir.path().join("x.npy")).unwrap(),
        npy_bytes("<i4", &[3, 3], false, &i32_le(0..9))
    );
    assert_eq!(dir_entries(dir.path()), ["x.npy", "y.npy"]);
}

#[test]
fn refused_join_leaves_an_existing_output_untouched() {
    let dir = tempfile::tempdir().unwrap();
    write_i4(dir.path(), "a.npy", &[2, 3], 0..6);
    write_i4(dir.path(), "b.npy", &[2, 4], 0..8);
    fs::write(dir.path().join("out.npy"), "precious").unwrap();
    let stderr = refused(
        dir.path(),
        &["-a", "0", "a.npy", "b.npy", "-o", "out.npy"],
        2,
    );
    assert_mentions(&stderr, &["cannot join along axis 0", "b.npy"]);
    assert_eq!(fs::read(dir.path().join("out.npy")).unwrap(), b"precious");
}

#[test]
fn truncated_input_leaves_an_existing_output_untouched() {
    let dir = tempfile::tempdir().unwrap();
    write_i4(dir.path(), "a.npy", &[2, 3], 0..6);
    write_i4(dir.path(), "b.npy", &[2, 3], 0..5);
    fs::write(dir.path().join("out.npy"), "precious").unwrap();
    let stderr = refused(
        dir.path(),
        &["-a", "0", "a.npy", "b.npy", "-o", "out.npy"],
        1,
    );
    assert_mentions(&stderr, &["input 2 (b.npy)", "truncated"]);
    assert_eq!(fs::read(dir.path().join("out.npy")).unwrap(), b"precious");
}

#[test]
fn success_leaves_only_the_output_behind() {
    let dir = tempfile::tempdir().unwrap();
    write_i4(dir.path(), "a.npy", &[2, 3], 0..6);
    write_i4(dir.path(), "b.npy", &[2, 1], 6..8);
    tjoin()
        .current_dir(dir.path())
        .args(["-a", "1", "a.npy", "b.npy", "-o", "out.npy"])
        .assert()
        .success();
    let want = i32_le([0, 1, 2, 6, 3, 4, 5, 7]);
    assert_eq!(
        fs::read(dir.path().join("out.npy")).unwrap(),
        npy_bytes("<i4", &[2, 4], false, &want)
    );
    assert_eq!(dir_entries(dir.path()), ["a.npy", "b.npy", "out.npy"]);
}

/// The write itself fails (the target is a folder), after any temp file would have been made.
#[test]
fn failed_write_leaves_no_temp_file() {
    let dir = tempfile::tempdir().unwrap();
    write_i4(dir.path(), "a.npy", &[2, 3], 0..6);
    fs::create_dir(dir.path().join("out.npy")).unwrap();
    let stderr = refused(
        dir.path(),
        &["-a", "0", "a.npy", "a.npy", "-o", "out.npy"],
        1,
    );
    assert_mentions(&stderr, &["out.npy", "it is a directory"]);
    assert!(dir_entries(&dir.path().join("out.npy")).is_empty());
}

#[test]
fn one_input_is_copied() {
    let dir = tempfile::tempdir().unwrap();
    write_i4(dir.path(), "a.npy", &[2, 3], 0..6);
    tjoin()
        .current_dir(dir.path())
        .args(["-a", "1", "a.npy", "-o", "out.npy"])
        .assert()
        .success();
    assert_eq!(
        fs::read(dir.path().join("out.npy")).unwrap(),
        fs::read(dir.path().join("a.npy")).unwrap()
    );
}

#[test]
fn zero_sized_dimensions_join() {
    let dir = tempfile::tempdir().unwrap();
    write_npy(&dir.path().join("a.npy"), "<i4", &[2, 0, 3], false, &[]);
    write_i4(dir.path(), "b.npy", &[2, 4, 3], 0..24);
    tjoin()
        .current_dir(dir.path())
        .args(["-a", "1", "a.npy", "b.npy", "-o", "out.npy"])
        .assert()
        .success();
    assert_eq!(
        fs::read(dir.path().join("out.npy")).unwrap(),
        npy_bytes("<i4", &[2, 4, 3], false, &i32_le(0..24))
    );

    tjoin()
        .current_dir(dir.path())
        .args(["-a", "1", "a.npy", "a.npy", "-o", "empty.npy"])
        .assert()
        .success();
    let empty = read_npy(&dir.path().join("empty.npy"));
    assert_eq!((empty.shape, empty.data.len()), (vec![2, 0, 3], 0));
}

/// tjoin creates its output like any program would (mode 0666 less the umask), not with the
/// 0600 of a private temp file.
#[cfg(unix)]
#[test]
fn output_has_the_permissions_of_a_normal_file() {
    use std::os::unix::fs::PermissionsExt;

    // Read the umask without changing it (other tests create files concurrently): a child
    // shell inherits it, as tjoin does.
    let shell = std::process::Command::new("sh")
        .args(["-c", "umask"])
        .output()
        .unwrap();
    let umask = String::from_utf8(shell.stdout).unwrap();
    let umask = u32::from_str_radix(umask.trim(), 8).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_i4(dir.path(), "a.npy", &[2, 3], 0..6);
    tjoin()
        .current_dir(dir.path())
        .args(["-a", "0", "a.npy", "a.npy", "-o", "out.npy"])
        .assert()
        .success();
    let mode = fs::metadata(dir.path().join("out.npy"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(
        mode,
        0o666 & !umask,
        "output mode {mode:o} under umask {umask:03o}"
    );
}
