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
    for name in ["/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"] {
        let got = succeeds(dir.path(), &join_into(name));
        assert_eq!(
            got,
            expected,
            "{name}: {}",
            describe_difference(&expected, &got)
        );
    }
}

/// Runs `tjoin ARGS REDIRECTIONS` through `sh` in `dir`.
fn through_shell(dir: &Path, args: &[&str], redirections: &str) -> std::process::Output {
    std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("exec \"$0\" \"$@\" {redirections}"))
        .arg(crate::util::bin())
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

#[track_caller]
fn assert_success(run: &std::process::Output, what: &str) {
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{what}: {}:\n{stderr}", run.status);
}

/// A descriptor's name is the descriptor itself: with `>>`, the output goes after what the
/// file holds, as any command's standard output would.
#[test]
fn a_descriptor_open_for_appending_gets_the_output_after_the_files_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let expected = two_inputs(dir.path());
    let log = dir.path().join("log");
    let named = [
        ("/dev/stdout", ">> log"),
        ("/dev/fd/1", ">> log"),
        ("/proc/self/fd/1", ">> log"),
        ("/dev/fd/3", "3>> log"),
        ("-", ">> log"),
    ];
    for (name, redirection) in named {
        fs::write(&log, b"earlier bytes\n").unwrap();
        let run = through_shell(dir.path(), &join_into(name), redirection);
        assert_success(&run, &format!("-o {name} {redirection}"));
        let mut want = b"earlier bytes\n".to_vec();
        want.extend_from_slice(&expected);
        let got = fs::read(&log).unwrap();
        assert_eq!(got, want, "{name}: {}", describe_difference(&want, &got));
        assert_eq!(dir_entries(dir.path()), ["a.npy", "b.npy", "log"]);
    }
}

/// With `>`, the shell's file is written, not replaced by a new one.
#[test]
fn dev_stdout_sent_to_a_file_writes_that_file_in_place() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let expected = two_inputs(dir.path());
    let out = dir.path().join("out.npy");
    fs::write(&out, b"an older, longer content that the shell truncates").unwrap();
    let inode = fs::metadata(&out).unwrap().ino();
    let run = through_shell(dir.path(), &join_into("/dev/stdout"), "> out.npy");
    assert_success(&run, "-o /dev/stdout > out.npy");
    assert_eq!(fs::read(&out).unwrap(), expected);
    assert_eq!(
        fs::metadata(&out).unwrap().ino(),
        inode,
        "the file was replaced"
    );
    assert_eq!(dir_entries(dir.path()), ["a.npy", "b.npy", "out.npy"]);
}

/// Runs tjoin as [`through_shell`] does in `dir`, which holds [`two_inputs`], and asserts
/// that it fails with `code`, writing nothing and leaving nothing behind. Returns stderr.
#[track_caller]
fn fails_through_shell(dir: &Path, out: &str, redirections: &str, code: i32) -> String {
    let run = through_shell(dir, &join_into(out), redirections);
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    assert_eq!(run.status.code(), Some(code), "{stderr}");
    assert!(run.stdout.is_empty());
    assert_eq!(dir_entries(dir), ["a.npy", "b.npy"]);
    stderr
}

#[test]
fn a_descriptor_the_shell_did_not_open_is_refused_by_its_name() {
    let dir = tempfile::tempdir().unwrap();
    two_inputs(dir.path());
    let stderr = fails_through_shell(dir.path(), "/dev/fd/7", "7>&-", 2);
    assert_mentions(&stderr, &["/dev/fd/7", "descriptor 7", "7> FILE"]);
}

/// The failure names the output as the user named it, not the file the descriptor is open on.
#[cfg(target_os = "linux")]
#[test]
fn a_descriptor_that_refuses_the_write_is_reported_by_its_name() {
    let dir = tempfile::tempdir().unwrap();
    two_inputs(dir.path());
    let stderr = fails_through_shell(dir.path(), "/dev/stdout", "> /dev/full", 1);
    assert_mentions(&stderr, &["/dev/stdout", "No space left on device"]);
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

#[test]
fn a_symlink_output_replaces_the_file_it_points_to_and_stays_a_link() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let expected = two_inputs(dir.path());
    let real = dir.path().join("real");
    fs::create_dir(&real).unwrap();
    fs::write(real.join("target.npy"), "previous").unwrap();
    fs::set_permissions(real.join("target.npy"), fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::symlink("real/target.npy", dir.path().join("out.npy")).unwrap();
    std::os::unix::fs::symlink("real/new.npy", dir.path().join("dangling.npy")).unwrap();
    for link in ["out.npy", "dangling.npy"] {
        succeeds(dir.path(), &join_into(link));
        let got = fs::read(dir.path().join(link)).unwrap();
        assert_eq!(got, expected, "{}", describe_difference(&expected, &got));
        let metadata = fs::symlink_metadata(dir.path().join(link)).unwrap();
        assert!(
            metadata.file_type().is_symlink(),
            "{link} is no longer a link"
        );
    }
    assert_eq!(dir_entries(&real), ["new.npy", "target.npy"]);
    let mode = fs::metadata(real.join("target.npy"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o600, "the replaced file's mode is {mode:o}");
}

/// Runs [`join_into`]`("out.npy")` in `dir` as a user without privileges
/// ([`run_unprivileged`]). Asserts that it failed with status 1 and nothing left behind, and
/// returns its stderr.
fn refused_unprivileged(dir: &Path) -> String {
    let before = dir_entries(dir);
    let refused = run_unprivileged(dir, &join_into("out.npy"));
    let stderr = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("tjoin-partial"), "{stderr}");
    assert_eq!(dir_entries(dir), before);
    stderr
}

/// What `cp` does with a read-only file, for each user: root (CI) overwrites it, and its mode
/// stays; another user is refused.
#[test]
fn a_read_only_target_is_refused_as_cp_refuses_it_and_root_keeps_its_mode() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o777)).unwrap();
    let expected = two_inputs(dir.path());
    let out = dir.path().join("out.npy");
    fs::write(&out, "previous").unwrap();
    fs::set_permissions(&out, fs::Permissions::from_mode(0o444)).unwrap();
    let stderr = refused_unprivileged(dir.path());
    assert_mentions(&stderr, &["out.npy", "read-only", "chmod u+w"]);
    assert_eq!(fs::read(&out).unwrap(), b"previous");
    if as_root() {
        succeeds(dir.path(), &join_into("out.npy"));
        assert_eq!(fs::read(&out).unwrap(), expected);
        let mode = fs::metadata(&out).unwrap().permissions().mode();
        assert_eq!(mode & 0o7777, 0o444, "the replaced file's mode is {mode:o}");
    }
}

/// A folder the user cannot write to: tjoin cannot put its new file beside the target, and
/// says so.
#[test]
fn a_target_in_a_folder_the_user_cannot_write_to_is_refused_with_a_hint() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    two_inputs(dir.path());
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let stderr = refused_unprivileged(dir.path());
    assert_mentions(
        &stderr,
        &["out.npy", "is not writable", "name an output elsewhere"],
    );
}

/// A join of a sparse 2 GiB input with itself along axis 1 (a gather, slow in a debug build),
/// started in `dir`; returns once it is writing its output.
#[cfg(target_os = "linux")]
fn long_join(dir: &Path) -> std::process::Child {
    let header = npy_header("|u1", &[1 << 16, 1 << 15], true);
    let file = fs::File::create(dir.join("big.npy")).unwrap();
    std::io::Write::write_all(&mut &file, &header).unwrap();
    file.set_len(header.len() as u64 + (1 << 31)).unwrap();
    let child = std::process::Command::new(crate::util::bin())
        .args(["-a", "1", "big.npy", "big.npy", "-o", "out.npy"])
        .current_dir(dir)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while !writing_into(child.id(), dir) {
        assert!(
            start.elapsed().as_secs() < 20,
            "tjoin never started writing"
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    child
}

/// SIGKILL cannot be handled: the new output is an unnamed file, which the kernel removes
/// with the process.
#[cfg(target_os = "linux")]
#[test]
fn sigkill_during_a_join_leaves_nothing_in_the_folder() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = long_join(dir.path());
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(dir_entries(dir.path()), ["big.npy"]);
}

/// A partial file whose writer no longer exists (a named one, as a file system without
/// unnamed files, or an older tjoin, leaves on SIGKILL) is removed by the next run into that
/// folder; a live writer's stays.
#[test]
fn a_run_removes_partial_files_of_dead_writers_and_only_those() {
    let dir = tempfile::tempdir().unwrap();
    two_inputs(dir.path());
    let mut exited = std::process::Command::new("true").spawn().unwrap();
    exited.wait().unwrap();
    let dead = format!(".out.npy.{}.AbC123.tjoin-partial", exited.id());
    let live = format!(".other.npy.{}.XyZ789.tjoin-partial", std::process::id());
    let backup = format!(".out.npy.{}.AbC123.tjoin-backup", exited.id());
    for name in [&dead, &live, &backup] {
        fs::write(dir.path().join(name), "left behind").unwrap();
    }
    succeeds(dir.path(), &join_into("out.npy"));
    let mut expected = vec![
        backup,
        live,
        "a.npy".into(),
        "b.npy".into(),
        "out.npy".into(),
    ];
    expected.sort();
    assert_eq!(dir_entries(dir.path()), expected);
}

#[test]
fn an_output_name_of_255_bytes_works() {
    let dir = tempfile::tempdir().unwrap();
    let expected = two_inputs(dir.path());
    let name = "n".repeat(251) + ".npy";
    succeeds(dir.path(), &join_into(&name));
    assert_eq!(fs::read(dir.path().join(&name)).unwrap(), expected);
    assert_eq!(dir_entries(dir.path()), ["a.npy", "b.npy", name.as_str()]);
}
