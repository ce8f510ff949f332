//! Tensor rules at scale (issue 27, item 8): a rules file of tens of thousands of lines over a
//! checkpoint of thousands of tensors is matched in time about linear in both, and the rules
//! that match nothing are warned about in a few lines, not one line each.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::time::Duration;

use crate::util::bin;

/// Tensors of the checkpoint.
const TENSORS: usize = 5_000;
/// Lines of the rules file.
const RULES: usize = 20_000;
/// The CPU time the join may take in a debug build (about 2 s here). Trying every rule on
/// every tensor, as tjoin did, is 10^8 glob matches and takes minutes. CPU time, not wall
/// time: on a loaded machine the wall time measures the neighbours (20 s at load 15).
const QUICK: Duration = Duration::from_secs(20);

/// A safetensors file of `names`, each a float32 `[1]` holding `value`.
fn write_safetensors(path: &Path, names: &[String], value: f32, rank: usize) {
    // Rank `rank` of 2, as `tjoin split --ranks 2` records it: the merge is proven complete.
    let mut header = format!(r#"{{"__metadata__":{{"tjoin.rank":"{rank}","tjoin.ranks":"2"}}"#);
    for (at, name) in names.iter().enumerate() {
        let (start, end) = (4 * at, 4 * at + 4);
        write!(
            header,
            r#","{name}":{{"dtype":"F32","shape":[1],"data_offsets":[{start},{end}]}}"#
        )
        .unwrap();
    }
    header.push('}');
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    for _ in names {
        bytes.extend_from_slice(&value.to_le_bytes());
    }
    fs::write(path, bytes).unwrap();
}

/// The rules: names, prefixes, suffixes and pieces inside that match no tensor, in turn,
/// then the one that decides every tensor, last.
fn rules_text(count: usize, layers: usize) -> String {
    let mut text = String::new();
    for k in 0..count - 1 {
        let layer = k % layers;
        let line = match k % 4 {
            0 => format!("model.layers.{layer}.missing{k}.weight = 0"),
            1 => format!("model.layers.{layer}.absent{k}* = 1"),
            2 => format!("*.nothing{k}.weight = keep"),
            _ => format!("*.{layer}.none{k}.* = 0"),
        };
        text.push_str(&line);
        text.push('\n');
    }
    text.push_str("*.weight = 0\n");
    text
}

#[test]
fn tens_of_thousands_of_rules_over_thousands_of_tensors_join_quickly() {
    let dir = tempfile::tempdir().unwrap();
    let parts = ["q_proj", "k_proj", "v_proj", "o_proj", "mlp"];
    let names: Vec<String> = (0..TENSORS)
        .map(|at| format!("model.layers.{}.{}.weight", at / 5, parts[at % 5]))
        .collect();
    write_safetensors(&dir.path().join("a.safetensors"), &names, 1.0, 0);
    write_safetensors(&dir.path().join("b.safetensors"), &names, 2.0, 1);
    fs::write(
        dir.path().join("many.rules"),
        rules_text(RULES, TENSORS / 5),
    )
    .unwrap();
    let mut command = std::process::Command::new(bin());
    command
        .current_dir(dir.path())
        .args(["a.safetensors", "b.safetensors", "--rules", "many.rules"])
        // A rules file's lines that match nothing are refused by default: warned about here.
        .arg("--allow-unmatched")
        .args(["-o", "out.safetensors"]);
    let (success, stderr, took) = run_timed(command, &dir.path().join("stderr.txt"));
    assert!(success, "{stderr}");
    assert!(
        took < QUICK,
        "{RULES} rules x {TENSORS} tensors took {took:?} of CPU time"
    );
    // One warning per rule would be a megabyte: ten are shown, and the rest counted.
    assert!(stderr.len() < 4_000, "{} bytes of warnings", stderr.len());
    assert_eq!(stderr.lines().count(), 11, "{stderr}");
    assert!(
        stderr.contains("tjoin: warning: ... and 19,989 more rules that match no tensor"),
        "{stderr}"
    );
    assert!(dir.path().join("out.safetensors").is_file());
}

/// Runs `command` with its standard error into `stderr_file`: whether it succeeded, its
/// standard error, and the CPU time (user + system) it took.
#[cfg(unix)]
#[expect(
    clippy::zombie_processes,
    reason = "wait4 reaps the child, which std's wait cannot do with its CPU time"
)]
fn run_timed(mut command: std::process::Command, stderr_file: &Path) -> (bool, String, Duration) {
    let child = command
        .stdout(std::process::Stdio::null())
        .stderr(fs::File::create(stderr_file).unwrap())
        .spawn()
        .unwrap();
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    let mut status = 0;
    // SAFETY: an all-zero `rusage` is a valid value of that plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not yet waited for (`child` is dropped without waiting);
    // `status` and `usage` are valid for writes.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid, "{}", std::io::Error::last_os_error());
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    let took = time(usage.ru_utime) + time(usage.ru_stime);
    let success = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    (success, fs::read_to_string(stderr_file).unwrap(), took)
}

/// Elsewhere, the wall time.
#[cfg(not(unix))]
fn run_timed(mut command: std::process::Command, stderr_file: &Path) -> (bool, String, Duration) {
    let start = std::time::Instant::now();
    let status = command
        .stdout(std::process::Stdio::null())
        .stderr(fs::File::create(stderr_file).unwrap())
        .status()
        .unwrap();
    let took = start.elapsed();
    (
        status.success(),
        fs::read_to_string(stderr_file).unwrap(),
        took,
    )
}
