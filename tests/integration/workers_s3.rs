//! A join run by N workers whose output is one object in S3 (`-o s3://BUCKET/KEY`), against
//! a real S3 server (moto's, `moto.rs`): the workers run at once as their own processes, each
//! in its own working and temporary folder, and upload their parts of one multipart upload;
//! the object must be the one-process join's bytes, appear only at the commit, and leave no
//! upload or job object behind, whatever fails.

use std::path::Path;

use crate::moto::Moto;
use crate::util::write_npy;
use crate::workers::{absolute, floats, run_workers, start_worker, two_npy, two_ranks_sharded};

/// The job's objects and the output as moto lists them.
fn keys(moto: &Moto) -> Vec<String> {
    moto.keys("out")
}

/// Runs one step of a job over `args` in `dir` with `extra`: its exit status and standard
/// error.
pub(crate) fn run(
    moto: &Moto,
    dir: &Path,
    args: &[String],
    extra: &[&str],
) -> (Option<i32>, String) {
    run_in(moto.tjoin(), dir, args, extra)
}

/// [`run`] as `command`, a tjoin command with its environment set.
pub(crate) fn run_in(
    mut command: assert_cmd::Command,
    dir: &Path,
    args: &[String],
    extra: &[&str],
) -> (Option<i32>, String) {
    let output = command
        .current_dir(dir)
        .args(args)
        .args(extra)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.code(), stderr)
}

/// [`run`]: whether it succeeded, and its standard error.
fn step(moto: &Moto, dir: &Path, args: &[String], extra: &[&str]) -> (bool, String) {
    let (code, stderr) = run(moto, dir, args, extra);
    (code == Some(0), stderr)
}

/// [`step`], which must succeed.
#[track_caller]
pub(crate) fn ok(moto: &Moto, dir: &Path, args: &[String], extra: &[&str]) {
    let (succeeded, stderr) = step(moto, dir, args, extra);
    assert!(succeeded, "{extra:?}: {stderr}");
}

/// [`step`], which must be refused (status 2): its message.
#[track_caller]
pub(crate) fn no(moto: &Moto, dir: &Path, args: &[String], extra: &[&str]) -> String {
    let (code, stderr) = run(moto, dir, args, extra);
    assert_eq!(code, Some(2), "{extra:?}: {stderr}");
    stderr
}

/// A moto server with the bucket `out`, a folder with the inputs `a.npy` and `b.npy` (24 MB
/// joined on axis 0: five parts), and the arguments of their join into `s3://out/j.npy`
/// as a job of `n` workers that has begun.
fn begun(n: u32) -> Option<(Moto, tempfile::TempDir, Vec<String>)> {
    let moto = Moto::start()?;
    moto.bucket("out");
    let dir = tempfile::tempdir().unwrap();
    two_npy(dir.path(), 3000, (1000, 1000));
    let args = job_args(dir.path(), &["-a", "0", "a.npy", "b.npy"], "j.npy");
    ok(
        &moto,
        dir.path(),
        &args,
        &["--workers", &n.to_string(), "--begin", "-q"],
    );
    Some((moto, dir, args))
}

/// The one-process join of `flags` into a local file in `dir`: its bytes.
fn one_process(moto: &Moto, dir: &Path, flags: &[&str]) -> Vec<u8> {
    let mut args = absolute(dir, flags);
    args.extend([
        "-o".to_string(),
        dir.join("one.npy").to_string_lossy().into(),
    ]);
    ok(moto, dir, &args, &["-q"]);
    std::fs::read(dir.join("one.npy")).unwrap()
}

/// `flags` with the output `s3://out/KEY`, paths made absolute.
fn job_args(dir: &Path, flags: &[&str], key: &str) -> Vec<String> {
    let mut args = absolute(dir, flags);
    args.extend(["-o".to_string(), format!("s3://out/{key}")]);
    args
}

#[test]
fn workers_at_once_upload_the_one_process_axis_0_and_last_axis_joins_as_one_object() {
    let Some(moto) = Moto::start() else { return };
    moto.bucket("out");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // 24 MB: five parts of 5 MiB (the last 3.9 MB), one, two and two of them per worker.
    two_npy(d, 3000, (1000, 1000));
    // Tiny runs: rows of 3 and 5 values, 21.6 MB, 2 and 3 parts per worker.
    write_npy(
        &d.join("c.npy"),
        "<f4",
        &[675_000, 3],
        false,
        &floats(2_025_000, 0.0),
    );
    write_npy(
        &d.join("e.npy"),
        "<f4",
        &[675_000, 5],
        false,
        &floats(3_375_000, 7e6),
    );
    for (flags, key, order) in [
        (["-a", "0", "a.npy", "b.npy"], "axis0.npy", &[2, 0, 1][..]),
        (["-a", "-1", "c.npy", "e.npy"], "last.npy", &[1, 0][..]),
    ] {
        let want = one_process(&moto, d, &flags);
        let args = job_args(d, &flags, key);
        let n = order.len().to_string();
        let (shares, _) = step(&moto, d, &args, &["--workers", &n, "--dry-run"]);
        assert!(shares, "a dry run shows the shares");
        ok(&moto, d, &args, &["--workers", &n, "--begin", "-q"]);
        assert_eq!(moto.uploads("out").len(), 1, "--begin made the upload");
        run_workers(&args, order, order.len() as u32, &moto.env());
        assert!(
            moto.get("out", key).is_none(),
            "no object before the commit"
        );
        ok(&moto, d, &args, &["--workers", &n, "--commit", "-q"]);
        let got = moto.get("out", key).unwrap();
        assert!(got == want, "{key} differs from the one-process join");
        assert!(moto.uploads("out").is_empty());
    }
    assert_eq!(
        keys(&moto),
        ["axis0.npy", "last.npy"],
        "no job object is left"
    );
}

#[test]
fn a_commit_names_the_missing_workers_and_no_object_appears_until_they_ran_again_safely() {
    let Some((moto, dir, args)) = begun(3) else {
        return;
    };
    let d = dir.path();
    let want = one_process(&moto, d, &["-a", "0", "a.npy", "b.npy"]);
    let error = no(&moto, d, &args, &["--workers", "3", "--begin"]);
    assert!(
        error.contains("a job of 3 workers is already recorded"),
        "{error}"
    );
    run_workers(&args, &[2, 0], 3, &moto.env());
    let error = no(&moto, d, &args, &["--workers", "3", "--commit"]);
    assert!(
        error.contains("1 of the 3 workers has not finished: 1/3"),
        "{error}"
    );
    assert!(error.contains("run --worker 1/3"), "{error}");
    assert!(moto.get("out", "j.npy").is_none());
    // Worker 1 killed at once, wherever it got to, then run twice at once, then again:
    // the last upload of each part wins, and the record names it.
    let (mut child, _own) = start_worker(&args, (1, 3), &moto.env());
    std::thread::sleep(std::time::Duration::from_millis(100));
    child.kill().unwrap();
    let _ = child.wait();
    run_workers(&args, &[1, 1], 3, &moto.env());
    run_workers(&args, &[1, 0], 3, &moto.env());
    ok(&moto, d, &args, &["--workers", "3", "--commit", "-q"]);
    assert!(moto.get("out", "j.npy").unwrap() == want);
    assert!(moto.uploads("out").is_empty());
    assert_eq!(keys(&moto), ["j.npy"]);
}

#[test]
fn a_changed_input_is_refused_and_abandon_leaves_no_upload_and_no_object() {
    let Some((moto, dir, args)) = begun(2) else {
        return;
    };
    let d = dir.path();
    run_workers(&args, &[0], 2, &moto.env());
    // The same bytes written again: the change time tells it.
    let b = std::fs::read(d.join("b.npy")).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(d.join("b.npy"), &b).unwrap();
    let error = no(&moto, d, &args, &["--worker", "1/2"]);
    assert!(
        error.contains("input 2 (") && error.contains("changed since the job began"),
        "{error}"
    );
    let error = no(&moto, d, &args, &["--workers", "2", "--commit"]);
    assert!(error.contains("changed since the job began"), "{error}");
    assert!(moto.get("out", "j.npy").is_none());
    assert_eq!(moto.uploads("out").len(), 1);
    ok(&moto, d, &args, &["--workers", "2", "--abandon", "-q"]);
    assert!(moto.uploads("out").is_empty(), "abandon aborts the upload");
    assert!(keys(&moto).is_empty(), "abandon removes the job's objects");
    let error = no(&moto, d, &args, &["--worker", "0/2"]);
    assert!(
        error.contains("no job is recorded for s3://out/j.npy"),
        "{error}"
    );
}

#[test]
fn a_hostile_manifest_in_the_bucket_is_refused_and_abandon_removes_it() {
    let Some((moto, dir, args)) = begun(2) else {
        return;
    };
    let d = dir.path();
    let key = "j.npy.tjoin-job/manifest.json";
    let text = String::from_utf8(moto.get("out", key).unwrap()).unwrap();
    for (from, to, why) in [
        (
            "\"part_size\": 5242880",
            "\"part_size\": 1",
            "its parts are not those",
        ),
        (
            "\"url\": \"s3://out/j.npy\"",
            "\"url\": \"s3://out/x.npy\"",
            "its upload is to",
        ),
        (
            "\"upload_id\": \"",
            "\"upload_id\": \" ",
            "an upload id is not printable",
        ),
        // A URL's secrets and a terminal's escapes, shown in the refusal: neither printed.
        (
            "\"url\": \"s3://out/j.npy\"",
            "\"url\": \"s3://me:hunter2@out/j.npy?sig=hunter2\\u001b[2J\"",
            "its upload is to",
        ),
        (
            "\"workers\": 2",
            "\"workers\": 2, \"run\": \"x\"",
            "unknown field",
        ),
    ] {
        assert!(text.contains(from), "{from} in {text}");
        moto.put("out", key, text.replacen(from, to, 1).as_bytes());
        let error = no(&moto, d, &args, &["--worker", "0/2"]);
        assert!(error.contains(why), "{to}: {error}");
        assert!(
            !error.contains("hunter2") && !error.contains('\u{1b}'),
            "{to}: {error}"
        );
    }
    // Too long to be one: refused before it is read whole.
    moto.put("out", key, &vec![b' '; (64 << 20) + 1]);
    let (succeeded, error) = step(&moto, d, &args, &["--worker", "0/2"]);
    assert!(!succeeded && error.contains("more than the"), "{error}");
    moto.put("out", key, text.as_bytes());
    ok(&moto, d, &args, &["--workers", "2", "--abandon", "-q"]);
    assert!(moto.uploads("out").is_empty() && keys(&moto).is_empty());
}

#[test]
fn workers_upload_the_one_process_sharded_set_its_shards_then_its_index() {
    let Some(moto) = Moto::start() else { return };
    moto.bucket("out");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let flags = two_ranks_sharded(d);
    let mut one = absolute(d, &flags);
    one.extend(["-o".to_string(), format!("{}/", d.join("one").display())]);
    ok(&moto, d, &one, &["-q"]);
    for (output, key, order) in [
        ("s3://out/set/", "set/", &[1, 0, 2][..]),
        (
            "s3://out/idx/model.safetensors.index.json",
            "idx/",
            &[0, 1][..],
        ),
    ] {
        let mut args = absolute(d, &flags);
        args.extend(["-o".to_string(), output.to_string()]);
        let n = order.len().to_string();
        ok(&moto, d, &args, &["--workers", &n, "--begin", "-q"]);
        assert_eq!(moto.uploads("out").len(), 2, "an upload per shard");
        run_workers(&args, order, order.len() as u32, &moto.env());
        let index = format!("{key}model.safetensors.index.json");
        assert!(
            moto.get("out", &index).is_none(),
            "no index before the commit"
        );
        ok(&moto, d, &args, &["--workers", &n, "--commit", "-q"]);
        let names = crate::util::dir_entries(&d.join("one"));
        assert_eq!(names.len(), 3, "two shards and an index");
        for name in names {
            let got = moto.get("out", &format!("{key}{name}")).expect(&name);
            assert!(
                got == std::fs::read(d.join("one").join(&name)).unwrap(),
                "{name}"
            );
        }
        assert!(moto.uploads("out").is_empty());
        let left: Vec<String> = keys(&moto)
            .into_iter()
            .filter(|k| k.contains("tjoin-job"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }
}

#[test]
fn a_hostile_worker_record_never_completes_a_wrong_object() {
    let Some((moto, dir, args)) = begun(2) else {
        return;
    };
    let d = dir.path();
    let want = one_process(&moto, d, &["-a", "0", "a.npy", "b.npy"]);
    run_workers(&args, &[0, 1], 2, &moto.env());
    let key = "j.npy.tjoin-job/done-0.json";
    let text = String::from_utf8(moto.get("out", key).unwrap()).unwrap();
    let record: serde_json::Value = serde_json::from_str(&text).unwrap();
    let etags: Vec<String> = serde_json::from_value(record["etags"].clone()).unwrap();
    assert!(etags.len() >= 2 && etags[0] != etags[1], "{text}");
    let with = |tags: &[&str]| {
        let mut hostile = record.clone();
        hostile["etags"] = serde_json::json!(tags);
        hostile.to_string()
    };
    let (a, b) = (etags[0].as_str(), etags[1].as_str());
    let rest: Vec<&str> = etags[2..].iter().map(String::as_str).collect();
    let swapped = [&[b, a][..], &rest].concat();
    let short = [&[a][..], &rest].concat();
    let markup = [
        &[
            a,
            "\"x\"</ETag></Part><Part><PartNumber>2</PartNumber><ETag>\"y",
        ][..],
        &rest,
    ]
    .concat();
    let control = [&[a, "\"x\u{1b}[2J\""][..], &rest].concat();
    for (hostile, why) in [
        (
            with(&swapped),
            "the store refused to complete s3://out/j.npy",
        ),
        (with(&markup), "run --worker I/2 again for each of 0/2, 1/2"),
        (with(&short), "has not finished: 0/2"),
        (with(&control), "has not finished: 0/2"),
        ("{\"etags\": 7}".to_string(), "has not finished: 0/2"),
    ] {
        moto.put("out", key, hostile.as_bytes());
        let error = no(&moto, d, &args, &["--workers", "2", "--commit"]);
        assert!(error.contains(why), "{hostile}: {error}");
        assert!(!error.contains('\u{1b}'), "{hostile}: {error}");
        assert!(moto.get("out", "j.npy").is_none(), "{hostile}: {error}");
    }
    // The worker's own record again: the commit completes the right object.
    moto.put("out", key, text.as_bytes());
    ok(&moto, d, &args, &["--workers", "2", "--commit", "-q"]);
    assert!(moto.get("out", "j.npy").unwrap() == want);
}

#[test]
fn a_commit_refused_halfway_through_a_sharded_set_names_its_workers_and_commits_again() {
    let Some(moto) = Moto::start() else { return };
    moto.bucket("out");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let flags = two_ranks_sharded(d);
    let mut one = absolute(d, &flags);
    one.extend(["-o".to_string(), format!("{}/", d.join("one").display())]);
    ok(&moto, d, &one, &["-q"]);
    let mut args = absolute(d, &flags);
    args.extend(["-o".to_string(), "s3://out/set/".to_string()]);
    ok(&moto, d, &args, &["--workers", "2", "--begin", "-q"]);
    run_workers(&args, &[0, 1], 2, &moto.env());
    // Worker 1 holds the second shard's one part: its record altered, the first shard is
    // completed and the second refused by the store.
    let key = "set/.tjoin-job/done-1.json";
    let text = String::from_utf8(moto.get("out", key).unwrap()).unwrap();
    let altered = text.replacen("\"etags\":[\"", "\"etags\":[\"1", 1);
    assert!(altered != text, "{text}");
    moto.put("out", key, altered.as_bytes());
    let error = no(&moto, d, &args, &["--workers", "2", "--commit"]);
    assert!(
        error.contains("refused to complete s3://out/set/model-00002-of-00002.safetensors")
            && error.contains("the records of workers 1/2 under")
            && error.contains(
                "in place already (completed before it, and left): \
                 s3://out/set/model-00001-of-00002.safetensors"
            ),
        "{error}"
    );
    assert!(
        moto.get("out", "set/model.safetensors.index.json")
            .is_none()
    );
    // The record right again (as worker 1 run again writes it): the commit completes both.
    moto.put("out", key, text.as_bytes());
    ok(&moto, d, &args, &["--workers", "2", "--commit", "-q"]);
    for name in crate::util::dir_entries(&d.join("one")) {
        let got = moto.get("out", &format!("set/{name}")).expect(&name);
        assert!(
            got == std::fs::read(d.join("one").join(&name)).unwrap(),
            "{name}"
        );
    }
}
