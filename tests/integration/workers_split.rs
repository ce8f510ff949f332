//! A split run by N workers into sharded outputs (issue 45): `tjoin split ... -o 'p{part}/'
//! --max-shard-size` as `--workers N --begin`, `--worker I/N` at once (each worker a process
//! in its own working and temporary folder), `--workers N --commit`: each output's shards
//! are data files of the job in the output's own folder, committed as one set with every
//! index written last; the outputs are the one-process split's byte for byte.

use std::fs;
use std::path::{Path, PathBuf};

use crate::util::{dir_entries, refused, succeeds};
use crate::workers::{absolute, assert_same, checkpoint, run_job, run_workers};

/// The split of `r0.safetensors` along the last axis into 3 parts, each a sharded folder of
/// shards of at most 20 KB (two shards and an index each): its flags, without `-o`.
const SPLIT: [&str; 8] = [
    "split",
    "-a",
    "-1",
    "--parts",
    "3",
    "r0.safetensors",
    "--max-shard-size",
    "20KB",
];

/// Writes the input in `dir` and splits it in one process into `one0/`, `one1/`, `one2/`.
fn input_and_one_process(dir: &Path) {
    checkpoint(&dir.join("r0.safetensors"), 0.0);
    let mut args = SPLIT.to_vec();
    args.extend(["-o", "one{part}/", "-q"]);
    succeeds(dir, &args);
    for part in 0..3 {
        assert_eq!(
            dir_entries(&dir.join(format!("one{part}"))).len(),
            3,
            "two shards and an index"
        );
    }
}

/// The split's flags into `out{part}/`, paths made absolute in `dir`.
fn job_args(dir: &Path) -> Vec<String> {
    let mut args = SPLIT.to_vec();
    args.extend(["-o", "out{part}/"]);
    absolute(dir, &args)
}

/// Runs one step of the job in `dir` (`extra` its flags), which must succeed.
fn ok(dir: &Path, extra: &[&str]) -> Vec<u8> {
    let mut args: Vec<String> = job_args(dir);
    args.extend(extra.iter().map(|s| s.to_string()));
    succeeds(dir, &args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// Runs one step of the job in `dir`, which must be refused with status 2.
fn no(dir: &Path, extra: &[&str]) -> String {
    let mut args: Vec<String> = job_args(dir);
    args.extend(extra.iter().map(|s| s.to_string()));
    refused(dir, &args.iter().map(String::as_str).collect::<Vec<_>>(), 2)
}

/// Every file in `dir` and its folders whose name a job gives its own files.
fn job_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(job_files(&path));
        } else if path.to_string_lossy().contains("tjoin-job") {
            found.push(path);
        }
    }
    found
}

/// Fails unless `out{part}/` is `one{part}/` byte for byte for every part, and no file of the
/// job is left.
#[track_caller]
fn assert_outputs_are_the_one_process_split(dir: &Path) {
    for part in 0..3 {
        let name = |prefix: &str| dir.join(format!("{prefix}{part}"));
        assert_same(&name("one"), &name("out"));
    }
    assert_eq!(job_files(dir), Vec::<PathBuf>::new(), "the job left files");
}

/// The output files of `out{part}/` that exist (none before the commit).
fn outputs(dir: &Path) -> Vec<String> {
    (0..3)
        .map(|part| dir.join(format!("out{part}")))
        .filter(|folder| folder.is_dir())
        .flat_map(|folder| dir_entries(&folder))
        .filter(|name| !name.starts_with('.'))
        .collect()
}

#[test]
fn workers_started_at_once_write_the_one_process_split_into_sharded_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    input_and_one_process(d);
    run_job(d, &job_args(d), &[3, 0, 4, 2, 1]);
    assert_outputs_are_the_one_process_split(d);
}

#[test]
fn a_sharded_split_commit_with_a_worker_missing_names_it_and_publishes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    input_and_one_process(d);
    ok(d, &["--workers", "3", "--begin"]);
    // Each output's data files are in its own folder, the manifest in the first's.
    assert!(d.join("out0/.tjoin-job").is_file());
    for part in 0..3 {
        let folder = d.join(format!("out{part}"));
        let data = dir_entries(&folder);
        let data: Vec<&String> = data.iter().filter(|n| n.contains(".tjoin-job-")).collect();
        assert_eq!(data.len(), 2, "{part}: {data:?}");
    }
    run_workers(&job_args(d), &[2, 0], 3, &[]);
    let error = no(d, &["--workers", "3", "--commit"]);
    assert!(
        error.contains("1 of the 3 workers has not finished: 1/3"),
        "{error}"
    );
    assert_eq!(outputs(d), Vec::<String>::new(), "nothing published");
    run_workers(&job_args(d), &[1], 3, &[]);
    ok(d, &["--workers", "3", "--commit"]);
    assert_outputs_are_the_one_process_split(d);
}

#[test]
fn a_sharded_split_worker_run_again_and_twice_at_once_writes_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    input_and_one_process(d);
    ok(d, &["--workers", "2", "--begin"]);
    run_workers(&job_args(d), &[1, 1, 0, 0], 2, &[]);
    run_workers(&job_args(d), &[0], 2, &[]);
    ok(d, &["--workers", "2", "--commit"]);
    assert_outputs_are_the_one_process_split(d);
}

#[test]
fn an_input_changed_during_a_sharded_split_job_is_refused_and_abandon_removes_every_folders_files()
{
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    input_and_one_process(d);
    ok(d, &["--workers", "2", "--begin"]);
    run_workers(&job_args(d), &[0], 2, &[]);
    // The same bytes written again: the change time tells it.
    let input = d.join("r0.safetensors");
    let bytes = fs::read(&input).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    fs::write(&input, &bytes).unwrap();
    let error = no(d, &["--worker", "1/2"]);
    assert!(
        error.contains("input 1 (") && error.contains("changed since the job began"),
        "{error}"
    );
    let error = no(d, &["--workers", "2", "--commit"]);
    assert!(error.contains("changed since the job began"), "{error}");
    assert_eq!(outputs(d), Vec::<String>::new(), "nothing published");
    assert_eq!(
        job_files(d).len(),
        1 + 1 + 3 * 2,
        "manifest, a record, data"
    );
    ok(d, &["--workers", "2", "--abandon"]);
    assert_eq!(job_files(d), Vec::<PathBuf>::new());
}

#[test]
fn a_manifest_numbering_a_folder_the_outputs_are_not_in_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    input_and_one_process(d);
    ok(d, &["--workers", "2", "--begin"]);
    let manifest = d.join("out0/.tjoin-job");
    let text = fs::read_to_string(&manifest).unwrap();
    assert!(text.contains("\"folder\": 2"), "{text}");
    fs::write(&manifest, text.replace("\"folder\": 2", "\"folder\": 7")).unwrap();
    let error = no(d, &["--worker", "0/2"]);
    assert!(
        error.contains("in folder 7 of the job, whose outputs are in 3"),
        "{error}"
    );
    // Abandoned as a manifest it cannot read: its own records and the manifest go; data
    // files, whose names it cannot trust, stay.
    ok(d, &["--workers", "2", "--abandon"]);
    assert!(!manifest.exists());
}

#[test]
fn a_sharded_split_dry_run_and_print_plan_show_each_workers_share() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    input_and_one_process(d);
    let text = String::from_utf8(ok(d, &["--workers", "4", "--dry-run"])).unwrap();
    assert!(
        text.contains("workers: 4, each writing its share"),
        "{text}"
    );
    assert!(text.contains("worker 3/4"), "{text}");
    assert!(
        text.contains("out2/model-00002-of-00002.safetensors"),
        "{text}"
    );
    let json = ok(d, &["--workers", "4", "--dry-run=json"]);
    let json: serde_json::Value = serde_json::from_slice(&json).unwrap();
    let shares = json["workers"].as_array().unwrap();
    assert_eq!(shares.len(), 4);
    // Balanced by bytes: every share within a page of an even cut, the last ending with the
    // shards' bytes (every output's shards, one after another).
    let shards: u64 = (0..3)
        .flat_map(|part| {
            let folder = d.join(format!("one{part}"));
            dir_entries(&folder)
                .into_iter()
                .filter(|n| !n.ends_with(".json"))
                .map(move |n| fs::metadata(folder.join(n)).unwrap().len())
        })
        .sum();
    assert_eq!(shares[3]["end"], shards);
    for share in shares {
        let len = share["end"].as_u64().unwrap() - share["start"].as_u64().unwrap();
        assert!(len.abs_diff(shards / 4) <= 4096, "{share}");
    }
    assert!(!d.join("out0").exists(), "a dry run writes nothing");
    let begun = ok(d, &["--workers", "4", "--begin", "--print-plan=json"]);
    let begun: serde_json::Value = serde_json::from_slice(&begun).unwrap();
    assert_eq!(begun["workers"], json["workers"]);
    assert_eq!(begun["outputs"], json["outputs"]);
    run_workers(&job_args(d), &[0, 1, 2, 3], 4, &[]);
    let committed = ok(d, &["--workers", "4", "--commit", "--print-plan"]);
    let committed = String::from_utf8(committed).unwrap();
    assert!(committed.starts_with("written; "), "{committed}");
    assert!(committed.contains("worker 3/4"), "{committed}");
    assert_outputs_are_the_one_process_split(d);
}

#[test]
fn a_split_job_refuses_outputs_that_name_one_file_twice() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    checkpoint(&d.join("r0.safetensors"), 0.0);
    fs::create_dir(d.join("out")).unwrap();
    // The second output, a sharded folder, writes `out/model.safetensors`: the first output.
    let args = [
        "split",
        "-a",
        "-1",
        "--parts",
        "2",
        "r0.safetensors",
        "-o",
        "out/model.safetensors",
        "-o",
        "out/",
        "--workers",
        "2",
        "--begin",
    ];
    let error = refused(d, &args, 2);
    assert!(
        error.contains("the outputs name out/model.safetensors twice"),
        "{error}"
    );
    assert_eq!(job_files(d), Vec::<PathBuf>::new(), "nothing was begun");
}
