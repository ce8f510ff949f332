//! The output file: written only on success, never one of the inputs of a join, no leftovers,
//! normal permissions.

use std::fs;
use std::path::Path;

use crate::util::{
    assert_mentions, dir_entries, npy_bytes, read_npy, refused, succeeds, tjoin, write_npy,
};

/// Little-endian bytes of `values`, the data of an `<i4` array.
fn i32_le(values: impl IntoIterator<Item = i32>) -> Vec<u8> {
    values.into_iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Writes `dir/name`, an `<i4` array of `shape` holding `values`.
fn write_i4(dir: &Path, name: &str, shape: &[u64], values: impl IntoIterator<Item = i32>) {
    write_npy(&dir.join(name), "<i4", shape, false, &i32_le(values));
}

#[test]
fn a_join_whose_output_is_one_of_its_inputs_is_refused_and_one_input_may_be_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    write_i4(dir.path(), "x.npy", &[2, 3], 0..6);
    write_i4(dir.path(), "y.npy", &[1, 3], 6..9);
    // The first run of `*.npy -o z.npy` joins x and y; run again, the glob matches z.npy.
    let args = ["-a", "0", "x.npy", "y.npy", "-o", "z.npy"];
    succeeds(dir.path(), &args);
    let joined = fs::read(dir.path().join("z.npy")).unwrap();
    let stderr = refused(
        dir.path(),
        &["-a", "0", "x.npy", "y.npy", "z.npy", "-o", "z.npy"],
        2,
    );
    assert_mentions(
        &stderr,
        &[
            "the output z.npy is input 3 (z.npy): the join would read the old output as data",
            "leave it out of the inputs",
        ],
    );
    assert_eq!(fs::read(dir.path().join("z.npy")).unwrap(), joined);
    // The same file by another name: `./x.npy`, a symbolic link; as the first input, the hint
    // is --append, which grows it in place.
    #[cfg(unix)]
    std::os::unix::fs::symlink("x.npy", dir.path().join("link.npy")).unwrap();
    #[cfg(unix)]
    let names = ["./x.npy", "link.npy"];
    #[cfg(not(unix))]
    let names = ["./x.npy"];
    for output in names {
        let stderr = refused(dir.path(), &["-a", "0", "x.npy", "y.npy", "-o", output], 2);
        assert_mentions(
            &stderr,
            &["is input 1 (x.npy)", "use --append with it first"],
        );
    }
    succeeds(dir.path(), &["--append", "-a", "0", "x.npy", "y.npy"]);
    assert_eq!(
        fs::read(dir.path().join("x.npy")).unwrap(),
        npy_bytes("<i4", &[3, 3], false, &i32_le(0..9))
    );
    // One input rewritten in place reads nothing else: replaced atomically when complete.
    succeeds(dir.path(), &["y.npy", "--cast", "int64", "-o", "y.npy"]);
    let mut int64 = Vec::new();
    (6..9i64).for_each(|v| int64.extend(v.to_le_bytes()));
    assert_eq!(
        fs::read(dir.path().join("y.npy")).unwrap(),
        npy_bytes("<i8", &[1, 3], false, &int64)
    );
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
