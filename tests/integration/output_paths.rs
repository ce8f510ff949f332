//! Outputs that are not a plain new file: devices, FIFOs and standard output written where
//! they are, symbolic links followed, replaced files' permissions, and the temporary files
//! a run leaves behind when it is killed.

use std::fs;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

use crate::util::*;

/// Two small inputs in `dir`, and the bytes their axis-0 join gives.
fn two_inputs(dir: &Path) -> Vec<u8> {
    write_npy(&dir.join("a.npy"), "<f4", &[2], false, &f32_le(&[1.0, 2.0]));
    write_npy(&dir.join("b.npy"), "<f4", &[1], false, &f32_le(&[3.0]));
    npy_bytes("<f4", &[3], false, &f32_le(&[1.0, 2.0, 3.0]))
}

/// The arguments that join the inputs of [`two_inputs`] into `out`, as a `.npy` file.
fn join_into(out: &str) -> [&str; 8] {
    ["-a", "0", "a.npy", "b.npy", "-o", out, "--format", "npy"]
}

/// As root (CI runs as root), a rename over /dev/null would succeed and replace the device
/// with a regular file: it must be written to instead.
#[test]
fn dev_null_is_written_to_and_stays_a_device() {
    let dir = tempfile::tempdir().unwrap();
    two_inputs(dir.path());
    succeeds(dir.path(), &join_into("/dev/null"));
    let null = fs::metadata("/dev/null").unwrap();
    assert!(null.file_type().is_char_device(), "/dev/null: {null:?}");
    assert_eq!(dir_entries(dir.path()), ["a.npy", "b.npy"]);
}

#[test]
fn a_fifo_output_is_written_to_and_its_reader_gets_the_join() {
    let dir = tempfile::tempdir().unwrap();
    let expected = two_inputs(dir.path());
    let fifo = dir.path().join("out.npy");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || fs::read(fifo).unwrap())
    };
    succeeds(dir.path(), &join_into("out.npy"));
    let got = reader.join().unwrap();
    assert_eq!(got, expected, "{}", describe_difference(&expected, &got));
    assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    assert_eq!(dir_entries(dir.path()), ["a.npy", "b.npy", "out.npy"]);
}

#[test]
fn dev_stdout_writes_to_standard_output() {
    let dir = tempfile::tempdir().unwrap();
    let expected = two_inputs(dir.path());
    let args = join_into("/dev/stdout");
    let got = succeeds(dir.path(), &args);
    assert_eq!(got, expected, "{}", describe_difference(&expected, &got));
}

#[cfg(target_os = "linux")]
#[test]
fn a_device_that_refuses_the_write_is_reported_by_its_name() {
    let dir = tempfile::tempdir().unwrap();
    two_inputs(dir.path());
    let args = join_into("/dev/full");
    let stderr = refused(dir.path(), &args, 1);
    assert_mentions(&stderr, &["/dev/full", "No space left on device"]);
    assert!(
        fs::metadata("/dev/full")
            .unwrap()
            .file_type()
            .is_char_device()
    );
}
