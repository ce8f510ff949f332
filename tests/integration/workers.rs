//! A join run by N workers (issue 45): `--workers N --begin`, `--worker I/N` in any order and
//! at once, `--workers N --commit`, `--workers N --abandon`. Each worker runs as its own
//! process, in its own working folder with its own temporary folder, as separate machines
//! sharing one file system would; the output must be the one-process join's byte for byte.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use safetensors::tensor::{Dtype, TensorView};

use crate::util::{bin, dir_entries, refused, succeeds, write_npy};

/// `n` float32 values from `from`, as bytes.
pub(crate) fn floats(n: usize, from: f32) -> Vec<u8> {
    (0..n)
        .flat_map(|i| (from + i as f32).to_le_bytes())
        .collect()
}

/// Starts a worker of `args` in a folder of its own (working and temporary), with `env` set
/// (and, when it names an S3 endpoint, no other AWS variable).
pub(crate) fn start_worker(
    args: &[String],
    (worker, n): (u32, u32),
    env: &[(&str, String)],
) -> (Child, tempfile::TempDir) {
    let own = tempfile::tempdir().unwrap();
    let mut command = Command::new(bin());
    if !env.is_empty() {
        for (name, _) in std::env::vars().filter(|(name, _)| name.starts_with("AWS_")) {
            command.env_remove(name);
        }
    }
    let child = command
        .envs(env.iter().map(|(name, value)| (name, value)))
        .args(args)
        .args(["--worker", &format!("{worker}/{n}"), "-q"])
        .current_dir(own.path())
        .env("TMPDIR", own.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    (child, own)
}

/// Runs the workers `order` of a job of `n` at once (with `env` set), and asserts that each
/// succeeded.
pub(crate) fn run_workers(args: &[String], order: &[u32], n: u32, env: &[(&str, String)]) {
    let started: Vec<_> = order
        .iter()
        .map(|&w| (w, start_worker(args, (w, n), env)))
        .collect();
    for (worker, (child, _own)) in started {
        let output = child.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "worker {worker}/{n} failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// `args` as owned strings, each path made absolute in `dir` (the workers run elsewhere).
pub(crate) fn absolute(dir: &Path, args: &[&str]) -> Vec<String> {
    args.iter()
        .map(
            |a| match a.ends_with(".npy") || a.ends_with(".safetensors") || a.ends_with('/') {
                true => dir.join(a).to_string_lossy().into_owned(),
                false => a.to_string(),
            },
        )
        .collect()
}

/// The job's three steps over `args` (whose output is `output`, in `dir`) with `n` workers
/// started at once in `order`; then checks that `output` is `expected`'s bytes and that no
/// file of the job is left.
fn job_matches(dir: &Path, args: &[&str], order: &[u32], (output, expected): (&str, &str)) {
    run_job(dir, &absolute(dir, args), order);
    assert_same(&dir.join(expected), &dir.join(output));
    assert_no_job_left(dir);
}

/// Runs in `dir` the job's three steps over `args`, with the workers `order` (one each of
/// 0 to N-1) started at once, each in a folder of its own.
pub(crate) fn run_job(dir: &Path, args: &[String], order: &[u32]) {
    let n = order.len() as u32;
    let step = |extra: &[&str]| {
        let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
        all.extend(extra);
        succeeds(dir, &all);
    };
    let count = n.to_string();
    step(&["--workers", &count, "--begin", "-q"]);
    run_workers(args, order, n, &[]);
    step(&["--workers", &count, "--commit", "-q"]);
}

/// Fails when a file of a job is left in `dir`.
#[track_caller]
fn assert_no_job_left(dir: &Path) {
    let left: Vec<String> = dir_entries(dir)
        .into_iter()
        .filter(|e| e.contains("tjoin-job"))
        .collect();
    assert!(left.is_empty(), "the job left {left:?}");
}

/// Fails unless `got` is `want` byte for byte (a file, or every file of a folder).
#[track_caller]
pub(crate) fn assert_same(want: &Path, got: &Path) {
    if want.is_dir() {
        let names = dir_entries(want);
        assert_eq!(dir_entries(got), names);
        for name in names {
            assert_same(&want.join(&name), &got.join(&name));
        }
        return;
    }
    let (want_bytes, got_bytes) = (fs::read(want).unwrap(), fs::read(got).unwrap());
    assert!(
        want_bytes == got_bytes,
        "{} differs from {}",
        got.display(),
        want.display()
    );
}

/// A folder with [`two_npy`] of `rows` rows of 64 columns each, their one-process join on
/// axis 0 in `one.npy`, and the job of `n` workers joining them into `out.npy` begun.
fn begun_of_two(rows: u64, n: u32) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    two_npy(d, rows, (64, 64));
    succeeds(d, &["-a", "0", "a.npy", "b.npy", "-o", "one.npy", "-q"]);
    ok(d, &["--workers", &n.to_string(), "--begin", "-q"]);
    dir
}

/// Two .npy inputs of `rows` rows each, of `a` and `b` columns.
pub(crate) fn two_npy(dir: &Path, rows: u64, (a, b): (u64, u64)) {
    write_npy(
        &dir.join("a.npy"),
        "<f4",
        &[rows, a],
        false,
        &floats((rows * a) as usize, 0.0),
    );
    write_npy(
        &dir.join("b.npy"),
        "<f4",
        &[rows, b],
        false,
        &floats((rows * b) as usize, 1e6),
    );
}

/// Writes two rank files, `r0.safetensors` and `r1.safetensors`, in `dir`: the flags of their
/// last-axis join into a sharded set of two shards (100 KB at most each) and an index.
pub(crate) fn two_ranks_sharded(dir: &Path) -> [&'static str; 6] {
    checkpoint(&dir.join("r0.safetensors"), 0.0);
    checkpoint(&dir.join("r1.safetensors"), 1e5);
    let flags = ["-a", "-1", "r0.safetensors", "r1.safetensors"];
    [
        flags[0],
        flags[1],
        flags[2],
        flags[3],
        "--max-shard-size",
        "100KB",
    ]
}

/// A safetensors file of three tensors, their values starting at `from`.
pub(crate) fn checkpoint(path: &Path, from: f32) {
    let data = [
        floats(300 * 64, from),
        floats(77, from),
        floats(40 * 9, from),
    ];
    let shapes = [vec![300, 64], vec![77], vec![40, 9]];
    let names = ["x.weight", "y.bias", "z.weight"];
    let views: Vec<(&str, TensorView)> = names
        .iter()
        .zip(shapes.iter().zip(&data))
        .map(|(name, (shape, data))| {
            (
                *name,
                TensorView::new(Dtype::F32, shape.clone(), data).unwrap(),
            )
        })
        .collect();
    fs::write(path, safetensors::serialize(views, None).unwrap()).unwrap();
}

/// Joins `flags` in one process into `one`, then by a job of the workers `order` started
/// at once into `out`: the two must be the same bytes.
fn same_as_one_process(dir: &Path, flags: &[&str], (one, out): (&str, &str), order: &[u32]) {
    let mut args = flags.to_vec();
    args.extend(["-o", one, "-q"]);
    succeeds(dir, &args);
    let mut args = flags.to_vec();
    args.extend(["-o", out]);
    job_matches(
        dir,
        &args,
        order,
        (out.trim_end_matches('/'), one.trim_end_matches('/')),
    );
}

#[test]
fn four_workers_started_at_once_in_any_order_write_the_one_process_axis_0_join() {
    let dir = tempfile::tempdir().unwrap();
    two_npy(dir.path(), 3000, (257, 257));
    let flags = ["-a", "0", "a.npy", "b.npy"];
    same_as_one_process(dir.path(), &flags, ("one.npy", "out.npy"), &[2, 0, 3, 1]);
}

#[test]
fn workers_write_the_one_process_last_axis_join_of_tiny_runs() {
    let dir = tempfile::tempdir().unwrap();
    two_npy(dir.path(), 20_000, (3, 5));
    let flags = ["-a", "-1", "a.npy", "b.npy"];
    same_as_one_process(dir.path(), &flags, ("one.npy", "out.npy"), &[1, 2, 0]);
}

#[test]
fn workers_write_the_one_process_sharded_output_and_its_index() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let flags = two_ranks_sharded(d);
    same_as_one_process(d, &flags, ("one/", "out/"), &[3, 1, 0, 2]);
    assert_eq!(
        dir_entries(&d.join("out")).len(),
        3,
        "two shards and an index"
    );
}

#[test]
fn workers_write_the_one_process_join_with_a_cast_and_a_single_safetensors_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    checkpoint(&d.join("r0.safetensors"), 0.0);
    checkpoint(&d.join("r1.safetensors"), 1e3);
    let flags = [
        "-a",
        "0",
        "--cast",
        "float16",
        "r0.safetensors",
        "r1.safetensors",
    ];
    same_as_one_process(d, &flags, ("one.safetensors", "out.safetensors"), &[1, 0]);
}

/// The arguments of a step of a job over two .npy inputs, with `extra`.
fn step(extra: &[&str]) -> Vec<String> {
    let mut args = vec!["-a", "0", "a.npy", "b.npy", "-o", "out.npy"];
    args.extend(extra);
    args.into_iter().map(String::from).collect()
}

/// Runs one step in `dir`, which must succeed.
fn ok(dir: &Path, extra: &[&str]) {
    let args = step(extra);
    succeeds(dir, &args.iter().map(String::as_str).collect::<Vec<_>>());
}

/// Runs one step in `dir`, which must be refused with status 2 and leave `dir` as it was.
fn no(dir: &Path, extra: &[&str]) -> String {
    let args = step(extra);
    refused(dir, &args.iter().map(String::as_str).collect::<Vec<_>>(), 2)
}

#[test]
fn a_commit_with_workers_missing_names_them_and_writes_nothing_until_they_ran() {
    let dir = begun_of_two(1000, 4);
    let d = dir.path();
    ok(d, &["--worker", "0/4", "-q"]);
    ok(d, &["--worker", "2/4", "-q"]);
    let error = no(d, &["--workers", "4", "--commit"]);
    assert!(
        error.contains("2 of the 4 workers have not finished: 1/4, 3/4"),
        "{error}"
    );
    assert!(!d.join("out.npy").exists());
    ok(d, &["--worker", "3/4", "-q"]);
    let error = no(d, &["--workers", "4", "--commit"]);
    assert!(
        error.contains("1 of the 4 workers has not finished: 1/4"),
        "{error}"
    );
    assert!(error.contains("run --worker 1/4"), "{error}");
    ok(d, &["--worker", "1/4", "-q"]);
    ok(d, &["--workers", "4", "--commit", "-q"]);
    assert_same(&d.join("one.npy"), &d.join("out.npy"));
}

#[test]
fn a_worker_killed_midway_and_run_again_leaves_the_one_process_output() {
    let dir = begun_of_two(40_000, 2);
    let d = dir.path();
    ok(d, &["--worker", "0/2", "-q"]);
    // A worker killed at once, wherever it got to: its share is partly written at most, and
    // it has no record.
    let args = absolute(d, &["-a", "0", "a.npy", "b.npy", "-o", "out.npy"]);
    let (mut child, _own) = start_worker(&args, (1, 2), &[]);
    std::thread::sleep(std::time::Duration::from_millis(30));
    child.kill().unwrap();
    let killed = !child.wait().unwrap().success();
    // Then its share spoiled, as a crash in the middle of a write would leave it.
    let data: Vec<PathBuf> = fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".out.npy.tjoin-job-"))
        .collect();
    let len = fs::metadata(&data[0]).unwrap().len();
    let file = fs::OpenOptions::new().write(true).open(&data[0]).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&file, &[0xAB; 4096], len - 8192).unwrap();
    let record = d.join(".out.npy.tjoin-job.done-1");
    if !killed || record.exists() {
        fs::remove_file(&record).unwrap();
    }
    let error = no(d, &["--workers", "2", "--commit"]);
    assert!(error.contains("has not finished: 1/2"), "{error}");
    ok(d, &["--worker", "1/2", "-q"]);
    // Run again once done: the same bytes again.
    ok(d, &["--worker", "1/2", "-q"]);
    ok(d, &["--workers", "2", "--commit", "-q"]);
    assert_same(&d.join("one.npy"), &d.join("out.npy"));
}

#[test]
fn the_same_worker_run_twice_at_once_is_safe() {
    let dir = begun_of_two(5000, 2);
    let d = dir.path();
    let args = absolute(d, &["-a", "0", "a.npy", "b.npy", "-o", "out.npy"]);
    run_workers(&args, &[1, 1, 0, 0], 2, &[]);
    ok(d, &["--workers", "2", "--commit", "-q"]);
    assert_same(&d.join("one.npy"), &d.join("out.npy"));
}

#[test]
fn an_input_changed_after_the_begin_or_after_a_worker_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    two_npy(d, 1000, (64, 64));
    ok(d, &["--workers", "2", "--begin", "-q"]);
    ok(d, &["--worker", "0/2", "-q"]);
    // The same bytes written again: the change time tells it.
    let b = fs::read(d.join("b.npy")).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    fs::write(d.join("b.npy"), &b).unwrap();
    let error = no(d, &["--worker", "1/2"]);
    assert!(
        error.contains("input 2 (b.npy) changed since the job began"),
        "{error}"
    );
    let error = no(d, &["--workers", "2", "--commit"]);
    assert!(error.contains("changed since the job began"), "{error}");
    assert!(!d.join("out.npy").exists());
    ok(d, &["--workers", "2", "--abandon", "-q"]);
    assert_eq!(dir_entries(d), ["a.npy", "b.npy"]);
}

#[test]
fn a_second_begin_is_refused_until_the_first_job_is_committed_or_abandoned() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    two_npy(d, 100, (8, 8));
    ok(d, &["--workers", "2", "--begin", "-q"]);
    let error = no(d, &["--workers", "3", "--begin"]);
    assert!(
        error.contains("a job of 2 workers is already recorded"),
        "{error}"
    );
    let error = no(d, &["--worker", "0/3"]);
    assert!(
        error.contains("has 2 workers, and this step says 3"),
        "{error}"
    );
    let error = no(d, &["--workers", "3", "--abandon"]);
    assert!(error.contains("abandon it with --workers 2"), "{error}");
    ok(d, &["--workers", "2", "--abandon", "-q"]);
    assert_eq!(dir_entries(d), ["a.npy", "b.npy"]);
    ok(d, &["--workers", "1", "--begin", "-q"]);
    ok(d, &["--worker", "0/1", "-q"]);
    ok(d, &["--workers", "1", "--commit", "-q"]);
    ok(d, &["--workers", "1", "--begin", "-q"]);
    let error = no(d, &["--cast", "float64", "--worker", "0/1"]);
    assert!(
        error.contains("differently from the job recorded"),
        "{error}"
    );
    let error = no(d, &["--workers", "1", "--commit"]);
    assert!(error.contains("0/1"), "{error}");
}

#[test]
fn a_hostile_manifest_is_refused_and_abandon_removes_only_the_jobs_own_files() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    two_npy(d, 100, (8, 8));
    ok(d, &["--workers", "2", "--begin", "-q"]);
    let manifest = d.join(".out.npy.tjoin-job");
    let text = fs::read_to_string(&manifest).unwrap();
    let token = text.split("\"token\": \"").nth(1).unwrap()[..16].to_string();
    let data = d.join(format!(".out.npy.tjoin-job-{token}"));
    // The data file swapped for a link to a file the job did not make: never written.
    let victim = vec![7u8; fs::metadata(&data).unwrap().len() as usize];
    fs::write(d.join("victim"), &victim).unwrap();
    fs::remove_file(&data).unwrap();
    std::os::unix::fs::symlink(d.join("victim"), &data).unwrap();
    // (Worker 0's share is empty: the output is shorter than two pages.)
    let error = no(d, &["--worker", "1/2"]);
    assert!(error.contains("data file"), "{error}");
    // A manifest that names a file elsewhere.
    fs::write(&manifest, text.replace("\"out.npy\"", "\"../out.npy\"")).unwrap();
    let error = no(d, &["--worker", "1/2"]);
    assert!(error.contains("not a plain file name"), "{error}");
    // A manifest too long to be one: refused before it is read.
    fs::File::create(&manifest)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let args = step(&["--worker", "1/2"]);
    let error = refused(d, &args.iter().map(String::as_str).collect::<Vec<_>>(), 1);
    assert!(
        error.contains("the most tjoin reads of a job's manifest"),
        "{error}"
    );
    fs::write(&manifest, &text).unwrap();
    ok(d, &["--workers", "2", "--abandon", "-q"]);
    assert_eq!(fs::read(d.join("victim")).unwrap(), victim);
    assert!(
        data.symlink_metadata().is_ok(),
        "a link is not the job's to remove"
    );
    assert!(!manifest.exists());
}

#[test]
fn a_dry_run_shows_each_workers_share_balanced_by_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    two_npy(d, 1024, (256, 256));
    let run = |form: &str| {
        let args = step(&["--workers", "4", form]);
        succeeds(d, &args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let text = String::from_utf8(run("--dry-run")).unwrap();
    assert!(
        text.contains("workers: 4, each writing its share"),
        "{text}"
    );
    assert!(text.contains("worker 0/4  bytes 0..524288 "), "{text}");
    assert!(
        text.contains("worker 3/4  bytes 1572864..2097280 "),
        "{text}"
    );
    let json: serde_json::Value = serde_json::from_slice(&run("--dry-run=json")).unwrap();
    let shares = json["workers"].as_array().unwrap();
    assert_eq!(shares.len(), 4);
    assert_eq!(shares[1]["start"], 524288);
    assert_eq!(dir_entries(d), ["a.npy", "b.npy"]);
}

#[test]
fn what_a_job_cannot_share_is_refused_at_its_begin() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    two_npy(d, 10, (8, 8));
    for (output, why) in [
        ("out.npz", "writes .npy and .safetensors outputs"),
        ("out.json", "writes .npy and .safetensors outputs"),
        ("-", "not a regular file that a job can replace"),
    ] {
        let args = ["-a", "0", "a.npy", "b.npy", "--format", "npy", "-o", output];
        let format = if output == "-" { 6 } else { 4 };
        let mut args = args[..format].to_vec();
        args.extend(["-o", output, "--workers", "2", "--begin"]);
        let error = refused(d, &args, 2);
        assert!(error.contains(why), "{output}: {error}");
    }
    let error = no(d, &["--workers", "2"]);
    assert!(error.contains("but not the step"), "{error}");
    let error = no(d, &["--worker", "0/2"]);
    assert!(error.contains("no job is recorded"), "{error}");
}

#[test]
fn a_shell_loop_and_xargs_run_the_workers_as_a_user_would() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    two_npy(d, 3000, (100, 100));
    succeeds(d, &["-a", "0", "a.npy", "b.npy", "-o", "one.npy", "-q"]);
    let tjoin = bin();
    let script = format!(
        "set -e; J='{} -a 0 a.npy b.npy -o out.npy -q'; $J --workers 3 --begin; \
         for i in 0 1 2; do $J --worker $i/3 & done; wait; $J --workers 3 --commit",
        tjoin.display()
    );
    let status = Command::new("sh")
        .arg("-c")
        .arg(&script)
        .current_dir(d)
        .status()
        .unwrap();
    assert!(status.success());
    assert_same(&d.join("one.npy"), &d.join("out.npy"));
    let script = format!(
        "set -e; J='{} -a 0 a.npy b.npy -o out2.npy -q'; $J --workers 4 --begin; \
         seq 0 3 | xargs -P 4 -I{{}} $J --worker {{}}/4; $J --workers 4 --commit",
        tjoin.display()
    );
    let status = Command::new("sh")
        .arg("-c")
        .arg(&script)
        .current_dir(d)
        .status()
        .unwrap();
    assert!(status.success());
    assert_same(&d.join("one.npy"), &d.join("out2.npy"));
}

#[test]
fn workers_write_the_one_process_join_of_byte_swapped_and_fortran_ordered_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let big: Vec<u8> = floats(3000 * 7, 5.0)
        .chunks(4)
        .flat_map(|f| f.iter().rev().copied().collect::<Vec<u8>>())
        .collect();
    write_npy(&d.join("a.npy"), ">f4", &[3000, 7], false, &big);
    write_npy(
        &d.join("b.npy"),
        "<f4",
        &[3000, 5],
        true,
        &floats(3000 * 5, 0.5),
    );
    write_npy(
        &d.join("c.npy"),
        "<f4",
        &[3000, 7],
        false,
        &floats(3000 * 7, 9.0),
    );
    for (axis, inputs) in [("-1", ["a.npy", "b.npy"]), ("0", ["a.npy", "c.npy"])] {
        let flags = ["-a", axis, inputs[0], inputs[1]];
        same_as_one_process(d, &flags, ("one.npy", "out.npy"), &[4, 2, 0, 3, 1]);
    }
}

#[test]
fn every_step_prints_the_plan_with_the_shares_and_a_refusal_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    two_npy(d, 2000, (64, 64));
    let json = |extra: &[&str]| {
        let mut args = step(extra);
        args.push("--print-plan=json".to_string());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = crate::util::tjoin()
            .args(&args)
            .current_dir(d)
            .output()
            .unwrap();
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let begun = json(&["--workers", "2", "--begin"]);
    assert_eq!(begun["workers"][1]["end"], 2000 * 64 * 4 * 2 + 128);
    let refused = json(&["--workers", "2", "--commit"]);
    let headline = refused["error"]["refusals"][0]["headline"]
        .as_str()
        .unwrap();
    assert!(
        headline.contains("have not finished: 0/2, 1/2"),
        "{headline}"
    );
    assert_eq!(json(&["--worker", "1/2"])["workers"], begun["workers"]);
    assert_eq!(json(&["--worker", "0/2"])["workers"], begun["workers"]);
    let committed = json(&["--workers", "2", "--commit"]);
    assert_eq!(committed["output"]["path"], "out.npy");
    assert_eq!(committed["workers"], begun["workers"]);
}

#[test]
fn workers_write_the_one_process_split_into_npy_parts_and_safetensors_parts() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    two_npy(d, 3001, (64, 8));
    checkpoint(&d.join("r0.safetensors"), 0.0);
    for (input, axis, one, out) in [
        ("a.npy", "0", "part-{part}.npy", "job-{part}.npy"),
        (
            "r0.safetensors",
            "-1",
            "p{part}.safetensors",
            "j{part}.safetensors",
        ),
    ] {
        let flags = ["split", "-a", axis, "--parts", "3", input];
        let mut args = flags.to_vec();
        args.extend(["-o", one, "-q"]);
        succeeds(d, &args);
        let mut args = flags.to_vec();
        args.extend(["-o", out]);
        run_job(d, &absolute(d, &args), &[3, 0, 2, 1]);
        for part in 0..3 {
            let name = |template: &str| template.replace("{part}", &part.to_string());
            assert_same(&d.join(name(one)), &d.join(name(out)));
        }
    }
    assert_no_job_left(d);
}

#[test]
fn a_split_job_refuses_outputs_in_several_folders_and_append_is_not_shared() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    two_npy(d, 100, (8, 8));
    checkpoint(&d.join("r0.safetensors"), 0.0);
    let split = |output: &str, input: &str| {
        let args = [
            "split",
            "-a",
            "0",
            "--parts",
            "2",
            input,
            "-o",
            output,
            "--workers",
            "2",
            "--begin",
        ];
        refused(d, &args, 2)
    };
    let error = split("d{part}/p.npy", "a.npy");
    assert!(error.contains("are in different folders"), "{error}");
    // (Sharded outputs, each in its own folder, are shared: `workers_split.rs`.)
    let args = ["-a", "0", "--append", "a.npy", "b.npy", "--worker", "0/2"];
    let error = refused(d, &args, 2);
    assert!(error.contains("--append grows a file in place"), "{error}");
}

#[test]
fn a_job_of_inputs_or_outputs_in_object_storage_it_does_not_share_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    two_npy(d, 10, (8, 8));
    let join = |input: &str, output: &str, step: &[&str]| {
        let mut args = vec!["-a", "0", input, "b.npy", "-o", output];
        args.extend(step);
        refused(d, &args, 2)
    };
    let begin = ["--workers", "2", "--begin"];
    // Inputs named by URL are shared (`workers_urls.rs`); outputs outside S3 are not.
    for (input, output, step, why) in [
        ("a.npy", "az://b/set/", &begin[..], "is not in S3"),
        ("a.npy", "gs://b/out.npy", &begin[..], "is not in S3"),
    ] {
        let error = join(input, output, step);
        assert!(error.contains(why), "{input} {output}: {error}");
    }
    // A split's outputs in S3 and inputs named by URL are shared (`workers_split_s3.rs`);
    // outputs outside S3 are not.
    let args = [
        "split",
        "-a",
        "0",
        "--parts",
        "2",
        "a.npy",
        "-o",
        "az://b/p{part}.npy",
        "--workers",
        "2",
        "--commit",
    ];
    let error = refused(d, &args, 2);
    assert!(error.contains("is not in S3"), "{error}");
    assert!(error.contains("name the outputs in S3"), "{error}");
}
