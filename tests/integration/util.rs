//! Helpers shared by the integration tests: the binary under test, runs of it that must succeed
//! or fail cleanly, and a tiny .npy writer/reader.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;

/// The variable that names another tjoin binary for the tests to run instead of the one
/// cargo built: CI runs the suite against the tjoin a wheel installed into a fresh virtual
/// environment (`TJOIN_TEST_BIN=$VENV/bin/tjoin cargo test --test integration`). Every test
/// runs the binary through [`bin`] or [`tjoin`], so every test runs under it: none needs
/// cargo's own build (the one that runs cargo, the DirectML bindings' drift check, is in the
/// `directml` feature's suite).
pub const BIN_VARIABLE: &str = "TJOIN_TEST_BIN";

/// The tjoin binary under test: the one [`BIN_VARIABLE`] names, made absolute (the tests run
/// it from temporary folders), else the one cargo built for this test run.
pub fn bin() -> PathBuf {
    match std::env::var_os(BIN_VARIABLE) {
        Some(path) if !path.is_empty() => fs::canonicalize(&path)
            .unwrap_or_else(|e| panic!("{BIN_VARIABLE}={}: {e}", Path::new(&path).display())),
        _ => PathBuf::from(env!("CARGO_BIN_EXE_tjoin")),
    }
}

/// A `Command` for the tjoin binary under test ([`bin`]).
pub fn tjoin() -> Command {
    Command::new(bin())
}

/// The variable CI sets (`CI=true`; `.ci/run` sets it when it is not set). Under it every
/// test must run: one that cannot run here fails instead of passing untried.
pub const CI_VARIABLE: &str = "CI";

/// Whether the tests run under CI ([`CI_VARIABLE`] set to anything but empty, `0` or `false`).
pub fn under_ci() -> bool {
    std::env::var(CI_VARIABLE).is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false"))
}

/// Says why a test cannot run here, for it to return untried; under CI ([`under_ci`]) fails
/// the test instead: a test that guards against data loss must not pass without running
/// where the run is what counts.
pub fn cannot_run(why: &str) {
    cannot_run_if(why, under_ci());
}

/// [`cannot_run`], with `strict` saying whether a test that cannot run fails.
pub fn cannot_run_if(why: &str, strict: bool) {
    assert!(
        !strict,
        "this test cannot run here, and under CI ({CI_VARIABLE}) every test must: {why}"
    );
    eprintln!("skipped: {why}");
}

/// Whether the tests run as root (as CI does).
#[cfg(unix)]
pub fn as_root() -> bool {
    let user = std::process::Command::new("id").arg("-u").output().unwrap();
    user.stdout == b"0\n"
}

/// Runs tjoin with `args` in `dir` as a user without privileges, for whom permissions hold:
/// as `nobody` through `setpriv` when the tests run as root, else as the user running them.
#[cfg(unix)]
pub fn run_unprivileged(dir: &Path, args: &[&str]) -> Output {
    use std::os::unix::fs::PermissionsExt;
    // A copy of the binary that `nobody` can run wherever the checkout is (CI's may be under
    // a home folder closed to other users).
    let bin = tempfile::tempdir().unwrap();
    fs::set_permissions(bin.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let tjoin = bin.path().join("tjoin");
    fs::copy(self::bin(), &tjoin).unwrap();
    let mut run = std::process::Command::new(if as_root() { "setpriv" } else { "env" });
    if as_root() {
        run.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]);
    }
    run.arg(&tjoin)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// The header `np.save` writes for an array: magic, version 1.0, length, then the dict literal.
///
/// Like numpy (`numpy/lib/_format_impl.py`, `_write_array_header` and `_wrap_header`), the dict
/// is followed by spare spaces so that the growth axis can reach 21 digits in place, then padded
/// with 1 to 64 spaces and a `'\n'` so that the data starts at a multiple of 64.
pub fn npy_header(descr: &str, shape: &[u64], fortran: bool) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    let shape_repr = match dims.as_slice() {
        [one] => format!("({one},)"),
        _ => format!("({})", dims.join(", ")),
    };
    let order = if fortran { "True" } else { "False" };
    let mut dict =
        format!("{{'descr': '{descr}', 'fortran_order': {order}, 'shape': {shape_repr}, }}");
    let growth_dim = if fortran { dims.last() } else { dims.first() };
    if let Some(dim) = growth_dim {
        dict.push_str(&" ".repeat(21 - dim.len()));
    }
    let pad = 64 - (10 + dict.len() + 1) % 64;
    dict.push_str(&" ".repeat(pad));
    dict.push('\n');
    let len = u16::try_from(dict.len()).expect("test headers fit a version 1.0 header");
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out
}

/// A whole .npy file as `np.save` would write it: [`npy_header`] followed by `data`.
pub fn npy_bytes(descr: &str, shape: &[u64], fortran: bool, data: &[u8]) -> Vec<u8> {
    let mut out = npy_header(descr, shape, fortran);
    out.extend_from_slice(data);
    out
}

/// Writes a .npy file; `data` is taken as is, so it may disagree with the header on purpose.
pub fn write_npy(path: &Path, descr: &str, shape: &[u64], fortran: bool, data: &[u8]) {
    fs::write(path, npy_bytes(descr, shape, fortran, data))
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
}

/// A parsed .npy file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Npy {
    /// The type string without quotes, e.g. `<f4`.
    pub descr: String,
    /// Whether the data is laid out in Fortran (column-major) order.
    pub fortran: bool,
    /// The shape from the header.
    pub shape: Vec<u64>,
    /// Every byte after the header.
    pub data: Vec<u8>,
}

/// Parses the bytes of a .npy file with npyz.
pub fn parse_npy(bytes: &[u8]) -> Result<Npy, String> {
    let mut rest = bytes;
    let header = npyz::NpyHeader::from_reader(&mut rest).map_err(|e| e.to_string())?;
    let descr = match header.dtype() {
        npyz::DType::Plain(ty) => ty.to_string(),
        other => other.descr(),
    };
    Ok(Npy {
        descr,
        fortran: header.order() == npyz::Order::Fortran,
        shape: header.shape().to_vec(),
        data: rest.to_vec(),
    })
}

/// Reads and parses a .npy file, panicking with the path on failure.
pub fn read_npy(path: &Path) -> Npy {
    let bytes = fs::read(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    parse_npy(&bytes).unwrap_or_else(|e| panic!("{} is not a valid .npy file: {e}", path.display()))
}

/// Little-endian bytes of `values`, the data of a `<f4` array.
pub fn f32_le(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// The sorted names of everything in `dir`: tests use it to prove no stray file was left behind.
pub fn dir_entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Whether process `pid` has a file open in `dir` that is not one of its entries: an unnamed
/// file there (`O_TMPFILE`, which Linux lists as `DIR/#INODE (deleted)`), or a temporary file
/// named `*.tjoin-partial`. Tests wait for it to know that a run is writing its output.
pub fn writing_into(pid: u32, dir: &Path) -> bool {
    let dir = fs::canonicalize(dir).unwrap();
    let Ok(descriptors) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    descriptors
        .filter_map(|entry| fs::read_link(entry.ok()?.path()).ok())
        .filter(|file| file.parent() == Some(dir.as_path()))
        .filter_map(|file| Some(file.file_name()?.to_string_lossy().into_owned()))
        .any(|name| name.starts_with('#') || name.ends_with(".tjoin-partial"))
}

/// The signal that killed a process (`None`: it exited, or this is not Unix). A run ended by
/// SIGINT must die by it, not exit 130, for a shell loop around it to stop.
pub fn killed_by(status: std::process::ExitStatus) -> Option<i32> {
    #[cfg(unix)]
    {
        std::os::unix::process::ExitStatusExt::signal(&status)
    }
    #[cfg(not(unix))]
    {
        let _ = status;
        None
    }
}

/// Both parsed headers and the first differing data byte, or the first differing file byte
/// when a file does not parse.
pub fn describe_difference(expected: &[u8], actual: &[u8]) -> String {
    match (parse_npy(expected), parse_npy(actual)) {
        (Ok(want), Ok(got)) if want.data == got.data => format!(
            "the headers differ\n  expected: {:?}\n  actual:   {:?}",
            String::from_utf8_lossy(&expected[..expected.len() - want.data.len()]),
            String::from_utf8_lossy(&actual[..actual.len() - got.data.len()])
        ),
        (Ok(want), Ok(got)) => format!(
            "the files differ\n  expected: {}\n  actual:   {}\n  {}",
            summary(&want),
            summary(&got),
            first_difference("data byte", &want.data, &got.data)
        ),
        (want, got) => format!(
            "the files differ (expected parses: {:?}, actual parses: {:?})\n  {}",
            want.map(|n| summary(&n)),
            got.map(|n| summary(&n)),
            first_difference("file byte", expected, actual)
        ),
    }
}

fn summary(npy: &Npy) -> String {
    format!(
        "descr {} fortran_order {} shape {:?}, {} data bytes",
        npy.descr,
        npy.fortran,
        npy.shape,
        npy.data.len()
    )
}

fn first_difference(what: &str, want: &[u8], got: &[u8]) -> String {
    match want.iter().zip(got).position(|(w, g)| w != g) {
        Some(i) => format!(
            "first differing {what} at offset {i}: expected {:#04x}, got {:#04x}",
            want[i], got[i]
        ),
        None => format!(
            "{what}s agree up to offset {}, then lengths differ: expected {}, got {}",
            want.len().min(got.len()),
            want.len(),
            got.len()
        ),
    }
}

/// Fails unless `stderr` contains every one of `needles`.
#[track_caller]
pub fn assert_mentions(stderr: &str, needles: &[&str]) {
    for needle in needles {
        assert!(
            stderr.contains(needle),
            "stderr lacks {needle:?}:\n{stderr}"
        );
    }
}

/// Runs tjoin in `dir` with `args` and `stdin`.
fn run(dir: &Path, args: &[&str], stdin: &[u8]) -> Output {
    tjoin()
        .current_dir(dir)
        .args(args)
        .write_stdin(stdin)
        .output()
        .unwrap()
}

/// Runs tjoin in `dir` with `args` and `stdin`, and asserts that it failed cleanly: exit
/// `code`, nothing on stdout, no panic, and `dir` holding the same names as before (no output,
/// no temporary file). Returns stderr.
///
/// For tjoin's own errors use [`refused`], which also checks how stderr starts; this is for
/// the usage errors clap prints.
#[track_caller]
pub fn fails_cleanly(dir: &Path, args: &[&str], stdin: &[u8], code: i32) -> String {
    let before = dir_entries(dir);
    let output = run(dir, args, stdin);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(
        output.status.code(),
        Some(code),
        "tjoin {args:?}: wrong exit status\nstderr:\n{stderr}"
    );
    assert!(
        output.stdout.is_empty(),
        "tjoin {args:?}: stdout is not empty on error"
    );
    assert!(!stderr.contains("panicked"), "tjoin {args:?}:\n{stderr}");
    assert_eq!(
        dir_entries(dir),
        before,
        "tjoin {args:?}: the folder changed (a leftover output or temporary file)"
    );
    stderr
}

/// [`fails_cleanly`] with `stdin` for tjoin's own errors, whose stderr starts with
/// `tjoin: error: `. Returns stderr.
#[track_caller]
pub fn refused_with_stdin(dir: &Path, args: &[&str], stdin: &[u8], code: i32) -> String {
    let stderr = fails_cleanly(dir, args, stdin, code);
    assert!(
        stderr.starts_with("tjoin: error: "),
        "tjoin {args:?}: stderr does not start with `tjoin: error: `:\n{stderr}"
    );
    stderr
}

/// [`refused_with_stdin`] with nothing on standard input. Returns stderr.
#[track_caller]
pub fn refused(dir: &Path, args: &[&str], code: i32) -> String {
    refused_with_stdin(dir, args, b"", code)
}

/// Runs tjoin in `dir` with `args` and `stdin`, and asserts that it succeeded. Returns stdout.
#[track_caller]
pub fn succeeds_with_stdin(dir: &Path, args: &[&str], stdin: &[u8]) -> Vec<u8> {
    let output = run(dir, args, stdin);
    assert!(
        output.status.success(),
        "tjoin {args:?} failed with {}:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

/// [`succeeds_with_stdin`] with nothing on standard input. Returns stdout.
#[track_caller]
pub fn succeeds(dir: &Path, args: &[&str]) -> Vec<u8> {
    succeeds_with_stdin(dir, args, b"")
}

/// Fails unless the safetensors file `got` (a rank `tjoin split --ranks` wrote) is `want`
/// byte for byte in its tensors, and its `__metadata__` is `want`'s plus the record of its
/// rank (`tjoin.rank`, from 0) and of the split's rank count (`tjoin.ranks`).
#[track_caller]
pub fn assert_rank_file(got: &Path, want: &Path, rank: usize, ranks: usize) {
    let header = |path: &Path| {
        let bytes = std::fs::read(path).unwrap();
        let len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let json: serde_json::Value = serde_json::from_slice(&bytes[8..8 + len]).unwrap();
        (json, bytes[8 + len..].to_vec())
    };
    let (mut got_header, got_data) = header(got);
    let (want_header, want_data) = header(want);
    let meta = got_header["__metadata__"].as_object_mut().unwrap();
    assert_eq!(
        meta.remove("tjoin.rank"),
        Some(rank.to_string().into()),
        "{got:?}"
    );
    assert_eq!(
        meta.remove("tjoin.ranks"),
        Some(ranks.to_string().into()),
        "{got:?}"
    );
    if meta.is_empty() && want_header.get("__metadata__").is_none() {
        got_header.as_object_mut().unwrap().remove("__metadata__");
    }
    assert_eq!(
        got_header, want_header,
        "{got:?}: its header is not {want:?}'s"
    );
    assert!(got_data == want_data, "{got:?}: its data is not {want:?}'s");
}

/// Asserts that a sharded set uploaded under a prefix is `expected`'s folder byte for byte
/// (`stored`: how many objects the prefix's bucket holds, `get`: one of them by its name
/// under the prefix), and that its index was the last object PUT (`requests`: the server's
/// log), so that a reader who finds the index finds every shard.
pub fn assert_set_uploaded(
    expected: &Path,
    stored: usize,
    get: impl Fn(&str) -> Option<Vec<u8>>,
    requests: Vec<String>,
) {
    let mut names: Vec<String> = std::fs::read_dir(expected)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(stored, names.len(), "{names:?}");
    for name in &names {
        let got = get(name).expect(name);
        assert!(
            got == std::fs::read(expected.join(name)).unwrap(),
            "{name} differs"
        );
    }
    let puts: Vec<String> = requests
        .into_iter()
        .filter(|r| r.starts_with("PUT"))
        .collect();
    assert!(
        puts.last()
            .unwrap()
            .contains("model.safetensors.index.json"),
        "{puts:#?}"
    );
}
