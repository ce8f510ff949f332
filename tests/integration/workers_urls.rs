//! A join run by N workers whose inputs are named by URL (issue 45 with issue 44), against a
//! real S3 server (moto's, `moto.rs`): `--begin` records each input object's ETag in the
//! manifest, each worker re-plans from the headers, refuses an input whose ETag is not the
//! manifest's, and reads only its share's ranges; the commit checks the ETags again. The
//! workers run at once as their own processes, each in its own working and temporary folder.

use std::path::Path;

use crate::moto::Moto;
use crate::util::npy_bytes;
use crate::workers::{floats, run_workers, start_worker};
use crate::workers_s3::{no, ok};

/// An `.npy` object of `rows` rows of `cols` float32 values from `from`, as bytes.
fn npy(rows: u64, cols: u64, from: f32) -> Vec<u8> {
    npy_bytes(
        "<f4",
        &[rows, cols],
        false,
        &floats((rows * cols) as usize, from),
    )
}

/// A moto server with the bucket `src` holding `a.npy` and `b.npy` (`rows` rows of 1000
/// float32 values each, 4 MB per 1000 rows), and the bucket `out`; the same two files in a
/// folder, for the one-process join of local copies.
fn inputs(rows: u64) -> Option<(Moto, tempfile::TempDir)> {
    let moto = Moto::start()?;
    moto.bucket("src");
    moto.bucket("out");
    let dir = tempfile::tempdir().unwrap();
    for (name, from) in [("a.npy", 0.0), ("b.npy", 5e6)] {
        let bytes = npy(rows, 1000, from);
        moto.put("src", name, &bytes);
        std::fs::write(dir.path().join(name), &bytes).unwrap();
    }
    Some((moto, dir))
}

/// The arguments of a join of `inputs` (URLs) on `axis` into `output`.
fn join_args(axis: &str, inputs: &[&str], output: &str) -> Vec<String> {
    let mut args = vec!["-a".to_string(), axis.to_string()];
    args.extend(inputs.iter().map(|i| i.to_string()));
    args.extend(["-o".to_string(), output.to_string()]);
    args
}

/// The one-process join of the local copies `a.npy` and `b.npy` in `dir` on `axis`: its
/// bytes.
fn one_process(moto: &Moto, dir: &Path, axis: &str) -> Vec<u8> {
    let local = |name: &str| dir.join(name).to_string_lossy().into_owned();
    let out = dir.join(format!("one{axis}.npy"));
    let args = join_args(
        axis,
        &[&local("a.npy"), &local("b.npy")],
        &out.to_string_lossy(),
    );
    ok(moto, dir, &args, &["-q"]);
    std::fs::read(out).unwrap()
}

#[test]
fn workers_at_once_join_s3_inputs_into_a_local_file_and_an_s3_object_as_one_process_does() {
    // 24 MB joined: five parts of an S3 output.
    let Some((moto, dir)) = inputs(3000) else {
        return;
    };
    let d = dir.path();
    let urls = ["s3://src/a.npy", "s3://src/b.npy"];
    let local = d.join("job.npy").to_string_lossy().into_owned();
    for (axis, output, order) in [
        ("0", local.as_str(), &[2, 0, 1][..]),
        ("-1", local.as_str(), &[1, 0][..]),
        ("0", "s3://out/j.npy", &[1, 2, 0][..]),
        ("-1", "s3://out/k.npy", &[0, 1][..]),
    ] {
        let want = one_process(&moto, d, axis);
        let args = join_args(axis, &urls, output);
        let n = order.len().to_string();
        ok(&moto, d, &args, &["--workers", &n, "--begin", "-q"]);
        run_workers(&args, order, order.len() as u32, &moto.env());
        ok(&moto, d, &args, &["--workers", &n, "--commit", "-q"]);
        let got = match output.strip_prefix("s3://out/") {
            Some(key) => moto.get("out", key).unwrap(),
            None => std::fs::read(output).unwrap(),
        };
        assert!(
            got == want,
            "-a {axis} into {output} differs from one process"
        );
        std::fs::remove_file(d.join(format!("one{axis}.npy"))).unwrap();
    }
    assert!(moto.uploads("out").is_empty());
    assert_eq!(
        moto.keys("out"),
        ["j.npy", "k.npy"],
        "no job object is left"
    );
    let left = crate::util::dir_entries(d);
    assert_eq!(left, ["a.npy", "b.npy", "job.npy"], "no job file is left");
}

/// Puts `bytes` as the object `key` of the bucket `src`, readable by anyone (by its http://
/// URL, without credentials).
fn public(moto: &Moto, key: &str, bytes: &[u8]) {
    let acl = [("x-amz-acl", "public-read")];
    let (status, _, body) = moto.request("PUT", &format!("/src/{key}"), &acl, bytes);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
}

#[test]
fn an_input_object_replaced_before_a_worker_or_before_the_commit_is_refused_by_name() {
    let Some((moto, dir)) = inputs(300) else {
        return;
    };
    let d = dir.path();
    // The second input by its http:// URL: any source that gives ETags serves a job.
    let http = format!("{}/src/b.npy", moto.endpoint());
    let urls = ["s3://src/a.npy", http.as_str()];
    public(&moto, "b.npy", &npy(300, 1000, 5e6));
    let local = d.join("job.npy").to_string_lossy().into_owned();
    for output in [local.as_str(), "s3://out/j.npy"] {
        let args = join_args("0", &urls, output);
        ok(&moto, d, &args, &["--workers", "2", "--begin", "-q"]);
        let manifest = match output.strip_prefix("s3://out/") {
            Some(key) => moto.get("out", &format!("{key}.tjoin-job/manifest.json")),
            None => std::fs::read(d.join(".job.npy.tjoin-job")).ok(),
        };
        let manifest = String::from_utf8(manifest.expect("the manifest")).unwrap();
        assert!(manifest.contains("\"tag\": \""), "{manifest}");
        // Replaced between the begin and a worker, by other bytes of the same shape: the
        // worker is refused by the input's position and URL, and writes nothing.
        let b = npy(300, 1000, 5e6);
        public(&moto, "b.npy", &npy(300, 1000, 1.0));
        let error = no(&moto, d, &args, &["--worker", "1/2"]);
        assert!(
            error.contains(&format!("input 2 ({http}) changed since the job began")),
            "{error}"
        );
        assert!(error.contains("changed since the job began: it was its ETag"));
        // The same bytes again are the same object (moto's ETag is their MD5): the workers
        // run; then the first input is replaced, and the commit is refused.
        public(&moto, "b.npy", &b);
        run_workers(&args, &[0, 1], 2, &moto.env());
        moto.put("src", "a.npy", &npy(300, 1000, 2.0));
        let error = no(&moto, d, &args, &["--workers", "2", "--commit"]);
        assert!(
            error.contains("input 1 (s3://src/a.npy) changed since the job began"),
            "{error}"
        );
        assert!(!Path::new(&local).exists() && moto.get("out", "j.npy").is_none());
        ok(&moto, d, &args, &["--workers", "2", "--abandon", "-q"]);
        moto.put("src", "a.npy", &npy(300, 1000, 0.0));
    }
    assert!(moto.uploads("out").is_empty() && moto.keys("out").is_empty());
}

/// The GETs moto answered for keys of the bucket `src` since the last clear.
fn input_gets(moto: &Moto) -> usize {
    let requests = moto.requests();
    requests
        .iter()
        .filter(|r| r.starts_with("GET /src/"))
        .count()
}

#[test]
fn each_of_4_workers_reads_about_a_quarter_of_the_s3_inputs() {
    // 64 MiB of data: 8 ranged reads of 8 MiB in one process, about 2 per worker.
    let Some((moto, dir)) = inputs(8389) else {
        return;
    };
    let d = dir.path();
    let args = join_args(
        "0",
        &["s3://src/a.npy", "s3://src/b.npy"],
        &d.join("job.npy").to_string_lossy(),
    );
    moto.clear_requests();
    let one = d.join("one.npy").to_string_lossy().into_owned();
    ok(
        &moto,
        d,
        &join_args("0", &["s3://src/a.npy", "s3://src/b.npy"], &one),
        &["-q"],
    );
    let whole = input_gets(&moto);
    ok(&moto, d, &args, &["--workers", "4", "--begin", "-q"]);
    let mut each = Vec::new();
    for worker in 0..4 {
        moto.clear_requests();
        let (child, _own) = start_worker(&args, (worker, 4), &moto.env());
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "worker {worker}/4 failed");
        each.push(input_gets(&moto));
    }
    ok(&moto, d, &args, &["--workers", "4", "--commit", "-q"]);
    assert!(std::fs::read(d.join("job.npy")).unwrap() == std::fs::read(&one).unwrap());
    eprintln!("GETs of the inputs: {whole} in one process, {each:?} per worker of 4");
    // A worker's GETs: the two headers it plans from, the two heads of its last check, and
    // its quarter of the data by range (8 MiB each at most; 16 MiB and a part at an edge):
    // three at most, where one process reads the 64 MiB in ten. No byte is read twice but
    // where two shares meet inside a read.
    for (worker, &gets) in each.iter().enumerate() {
        assert!(
            gets <= 4 + 3,
            "worker {worker}: {gets} GETs, {whole} in one process"
        );
    }
    assert_eq!(whole, 4 + 10, "one process read the data in {whole} GETs");
    let data: usize = each.iter().map(|gets| gets - 4).sum();
    assert!(data <= 10 + 3, "the workers read the data in {data} GETs");
}
