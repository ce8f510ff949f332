//! Small files that describe far more work than they hold, or that torch reads differently
//! from a careless reader (issue 40, and issue 39's duplicate ZIP names): `fixtures/attack/`,
//! made by `fixtures/make_hostile_fixtures.py`. Each is refused, quickly and in little memory
//! (the peak resident memory of the run, read from the kernel), naming what is wrong, and
//! leaves nothing behind.

use std::fs;
use std::path::{Path, PathBuf};

use crate::util::{assert_mentions, dir_entries};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/attack");

fn fixture(name: &str) -> String {
    PathBuf::from(FIXTURES).join(name).display().to_string()
}

/// The most memory a refusal of items 1-3 and 5 may take: their files describe gigabytes.
/// It bounds the run's address space (maps and allocations, touched or not), which bounds its
/// resident memory too. A peak read from `wait4` would not do here: a child forked from this
/// test binary keeps the binary's own high-water mark through its exec, and other tests in
/// the binary hold tens of MiB at times.
const PEAK_KIB: u64 = 64 << 10;

/// What a run did: its exit code, its standard error, its peak resident memory (KiB) and
/// its CPU time.
struct Run {
    code: Option<i32>,
    stderr: String,
    peak_kib: u64,
    cpu: std::time::Duration,
}

/// Runs tjoin with `args` in `dir` under an address-space limit of 2 GiB (so that a reader
/// that allocates without bound fails here rather than on the machine) and a CPU limit of
/// 60 s, reading its peak memory and CPU time from `wait4` (the peak is at least this test
/// binary's own: see [`PEAK_KIB`]).
fn run(dir: &Path, args: &[&str]) -> Run {
    run_within(dir, args, 2 << 30)
}

/// [`run`] under an address space of `bytes`.
#[expect(
    clippy::zombie_processes,
    reason = "wait4 reaps the child, which std's wait cannot do with its resource use"
)]
fn run_within(dir: &Path, args: &[&str], bytes: u64) -> Run {
    use std::os::unix::process::CommandExt;
    let stderr_path = dir.join("..").join(format!(
        "stderr-{}.txt",
        dir.file_name().unwrap().to_string_lossy()
    ));
    let mut command = std::process::Command::new(crate::util::bin());
    command
        .current_dir(dir)
        .args(args)
        // One malloc arena: a second thread's own reserves 64 MiB of address space, or not,
        // by a race (see `reliability::tjoin_limited`).
        .env("MALLOC_ARENA_MAX", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(fs::File::create(&stderr_path).unwrap());
    // SAFETY: setrlimit is async-signal-safe and touches only the child's own limits.
    unsafe {
        command.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: bytes,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // And 60 s of CPU, so that a reader working through 2^28 values stops.
            let cpu = libc::rlimit {
                rlim_cur: 60,
                rlim_max: 60,
            };
            if libc::setrlimit(libc::RLIMIT_CPU, &cpu) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = command.spawn().unwrap();
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    let mut status = 0;
    // SAFETY: an all-zero `rusage` is a valid value of that plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not yet waited for (`child` is dropped without waiting);
    // `status` and `usage` are valid for writes.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid, "{}", std::io::Error::last_os_error());
    let time = |t: libc::timeval| {
        std::time::Duration::from_secs(t.tv_sec as u64)
            + std::time::Duration::from_micros(t.tv_usec as u64)
    };
    let stderr = fs::read_to_string(&stderr_path).unwrap();
    fs::remove_file(&stderr_path).unwrap();
    Run {
        code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        stderr,
        // Linux gives ru_maxrss in KiB.
        peak_kib: usage.ru_maxrss as u64,
        cpu: time(usage.ru_utime) + time(usage.ru_stime),
    }
}

/// Runs `tjoin ARGS` in an empty folder and checks that it is refused with `code`, in under
/// [`PEAK_KIB`] of memory and a few seconds of CPU, leaving the folder empty. Returns stderr.
#[track_caller]
fn refused_small(args: &[&str], code: i32) -> String {
    let dir = tempfile::tempdir().unwrap();
    let run = run_within(dir.path(), args, PEAK_KIB << 10);
    assert_eq!(
        run.code,
        Some(code),
        "{args:?} under {PEAK_KIB} KiB of address space: {}",
        run.stderr
    );
    assert!(run.stderr.starts_with("tjoin: error: "), "{}", run.stderr);
    // Loose enough for a loaded machine and a debug build; work in the square of the input
    // takes minutes.
    assert!(run.cpu.as_secs() < 10, "{args:?} took {:?}", run.cpu);
    assert_eq!(dir_entries(dir.path()), Vec::<String>::new());
    run.stderr
}

#[test]
fn a_list_nested_in_itself_is_refused_not_walked_as_a_tree() {
    // 1.7 KB that torch reads as one shared graph; as a tree, 2^28 tensors.
    for extra in [&["--dry-run"][..], &["-o", "out.safetensors"]] {
        let file = fixture("shared_tree.pt");
        let mut args = vec![file.as_str()];
        args.extend_from_slice(extra);
        let stderr = refused_small(&args, 2);
        assert_mentions(&stderr, &["shared_tree.pt", "put in itself or in another"]);
    }
}

#[test]
fn calls_that_make_one_container_from_another_share_it() {
    // set(L) on one list of 40,000 items, 60,000 times: 9.6 GB if each call copied.
    let stderr = refused_small(&[&fixture("set_copies.pt"), "--dry-run"], 2);
    assert_mentions(&stderr, &["set_copies.pt", "holds no tensor"]);
}

#[test]
fn a_dcp_metadata_that_repeats_one_chunk_list_is_refused() {
    // 20,000 entries sharing one list of 20,000 chunks: 400 million chunks in 250 KB.
    let stderr = refused_small(&[&fixture("dcp_fanout"), "--dry-run"], 1);
    assert_mentions(&stderr, &["dcp_fanout", "chunks"]);
}

#[test]
fn the_pickle_machine_holds_under_a_gigabyte_at_its_limits() {
    // 16 million NONEs: each a value in the arena and a slot on the stack, past the machine's
    // count of 512 MiB; a DCP .metadata, so that the pickle is read as it is.
    let dir = tempfile::tempdir().unwrap();
    let checkpoint = dir.path().join("ck");
    fs::create_dir(&checkpoint).unwrap();
    let mut pickle = b"\x80\x02".to_vec();
    pickle.resize(2 + 16_000_000, b'N');
    pickle.push(b'.');
    fs::write(checkpoint.join(".metadata"), pickle).unwrap();
    let run = run(dir.path(), &["ck", "--dry-run"]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert_mentions(&run.stderr, &["more than 536870912 bytes of values"]);
    assert!(run.peak_kib < 1 << 20, "peaked at {} KiB", run.peak_kib);
}
#[test]
fn deflated_records_shared_by_many_names_are_refused_before_inflating() {
    // 20 names for one deflated member of 48 MiB: 1 GB to inflate (--dry-run did), in 50 KB.
    let file = fixture("shared_records.npz");
    for extra in [&["--dry-run"][..], &["-o", "out.npz"]] {
        let mut args = vec![file.as_str()];
        args.extend_from_slice(extra);
        let stderr = refused_small(&args, 1);
        assert_mentions(&stderr, &["shared_records.npz", "a1.npy", "a0.npy"]);
    }
}

/// Runs `tjoin ARGS` in an empty folder and checks that it is refused with exit 1 and
/// nothing written. Returns stderr.
#[track_caller]
fn refused_damaged(args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    crate::util::refused(dir.path(), args, 1)
}

#[test]
fn a_legacy_storage_named_twice_with_two_sizes_is_refused() {
    // Tensor `a` names storage 0 as 4 floats, `b` as 1 byte, and the file stores 1 byte:
    // read by its own record, `a` took storage 1's count and data, with exit 0.
    let stderr = refused_damaged(&[&fixture("legacy_key_twice.pt"), "-o", "out.safetensors"]);
    assert_mentions(
        &stderr,
        &[
            "legacy_key_twice.pt",
            "storage 0 twice",
            "4 elements of FloatStorage",
            "1 element of ByteStorage",
        ],
    );
}

#[test]
fn a_pt_archive_reads_its_first_records_folder_and_refuses_another() {
    // real/ then decoy/: torch reads real/ and refuses the file; tjoin read decoy/, exit 0.
    let stderr = refused_damaged(&[&fixture("two_folders.pt"), "-o", "out.safetensors"]);
    assert_mentions(
        &stderr,
        &[
            "two_folders.pt",
            "decoy/data.pkl",
            "outside its archive folder real/",
        ],
    );
}

#[test]
fn a_damaged_end_record_names_the_format_the_file_claims() {
    let stderr = refused_damaged(&[&fixture("damaged_end.pt"), "--dry-run"]);
    assert_mentions(&stderr, &["not a valid .pt file", "end-of-directory"]);
    // Without its extension, by its first record (`archive/data.pkl`).
    let dir = tempfile::tempdir().unwrap();
    fs::copy(fixture("damaged_end.pt"), dir.path().join("checkpoint")).unwrap();
    let stderr = crate::util::refused(dir.path(), &["checkpoint", "--dry-run"], 1);
    assert_mentions(&stderr, &["not a valid .pt file"]);
}

#[test]
fn two_members_of_one_name_are_refused_in_every_zip() {
    // torch reads the first of each name, numpy the last: tjoin read the last (a decoy).
    for (file, member) in [
        ("duplicate_pkl.pt", "archive/data.pkl"),
        ("duplicate_storage.pt", "archive/data/0"),
        ("duplicate.npz", "x.npy"),
    ] {
        let out = if file.ends_with(".npz") {
            "out.npz"
        } else {
            "out.safetensors"
        };
        let stderr = refused_damaged(&[&fixture(file), "-o", out]);
        assert_mentions(&stderr, &[file, "two members named", member]);
    }
}

#[test]
fn a_dry_run_reads_a_deflated_members_header_alone() {
    // 48 MiB of zeros deflated into about 50 KB: a dry run under a 1 MiB file-size limit
    // inflates nothing (it inflated the member into a temporary file); a run inflates it.
    let dir = tempfile::tempdir().unwrap();
    let header = crate::util::npy_header("|u1", &[48 << 20], false);
    let file = fs::File::create(dir.path().join("zeros.npy")).unwrap();
    std::io::Write::write_all(&mut &file, &header).unwrap();
    file.set_len(header.len() as u64 + (48 << 20)).unwrap();
    crate::util::succeeds(
        dir.path(),
        &["zeros.npy", "-o", "zeros.npz", "--compress", "-q"],
    );
    fs::remove_file(dir.path().join("zeros.npy")).unwrap();
    let output = crate::reliability::tjoin_limited(
        dir.path(),
        "ulimit -f 2048",
        &["zeros.npz", "--dry-run"],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    crate::util::succeeds(dir.path(), &["zeros.npz", "-o", "zeros.npy"]);
    assert_eq!(
        fs::metadata(dir.path().join("zeros.npy")).unwrap().len(),
        header.len() as u64 + (48 << 20)
    );
}

#[test]
fn a_dcp_name_shared_by_every_entry_is_copied_within_a_bound() {
    // One name of 512 KiB for the fqn and the file of 4,000 storage entries: 8 GB of copies.
    // The reading copies names up to its limit of 256 MiB (what 100,000 tensors on many ranks
    // need), then refuses.
    let dir = tempfile::tempdir().unwrap();
    let run = run(dir.path(), &[&fixture("dcp_shared_name"), "--dry-run"]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert_mentions(
        &run.stderr,
        &["dcp_shared_name", "names take more than 268435456 bytes"],
    );
    assert!(run.peak_kib < 400 << 10, "peaked at {} KiB", run.peak_kib);
}
