//! A split run by N workers into S3 (issue 45): `tjoin split ... -o
//! 's3://BUCKET/tp{rank}.safetensors'` (files under one prefix) or `-o 's3://BUCKET/tp{rank}/'`
//! (sharded outputs, each under its own prefix) as `--workers N --begin`, `--worker I/N` at
//! once (each worker a process in its own working and temporary folder), `--workers N
//! --commit`, against a real S3 server (moto's, `moto.rs`). Every output file is one
//! multipart upload, the parts of all of them cut into N runs; each object must be the
//! one-process LOCAL split's file byte for byte, appear only at the commit (every index after
//! every shard), and leave no upload or job object behind.

use std::fs;
use std::path::Path;

use safetensors::tensor::{Dtype, TensorView};

use crate::moto::Moto;
use crate::util::{dir_entries, refused};
use crate::workers::{absolute, floats, run_workers};
use crate::workers_s3::{no, ok};

/// The rank split of `model.safetensors` by the Llama rules, with its heads given: its flags,
/// without the input and `-o`.
fn rank_split(ranks: u32) -> Vec<String> {
    let rules = Path::new(env!("CARGO_MANIFEST_DIR")).join("rules/llama.rules");
    [
        "split",
        "--ranks",
        &ranks.to_string(),
        "--heads",
        "8:4",
        "--rules",
        &rules.to_string_lossy(),
    ]
    .map(String::from)
    .to_vec()
}

/// Writes a Llama-shaped checkpoint of one layer at `path` (hidden 512, 8 query heads and 4
/// key-value heads of 64, MLP 1536, vocabulary 4096): 28 MiB of float32, so that each rank
/// of 2 or 4 is several 5 MiB parts.
fn llama(path: &Path) {
    let layer = "model.layers.0";
    let tensors: Vec<(String, Vec<usize>)> = vec![
        ("model.embed_tokens.weight".into(), vec![4096, 512]),
        (format!("{layer}.input_layernorm.weight"), vec![512]),
        (format!("{layer}.self_attn.q_proj.weight"), vec![512, 512]),
        (format!("{layer}.self_attn.k_proj.weight"), vec![256, 512]),
        (format!("{layer}.self_attn.v_proj.weight"), vec![256, 512]),
        (format!("{layer}.self_attn.o_proj.weight"), vec![512, 512]),
        (
            format!("{layer}.post_attention_layernorm.weight"),
            vec![512],
        ),
        (format!("{layer}.mlp.gate_proj.weight"), vec![1536, 512]),
        (format!("{layer}.mlp.up_proj.weight"), vec![1536, 512]),
        (format!("{layer}.mlp.down_proj.weight"), vec![512, 1536]),
        ("model.norm.weight".into(), vec![512]),
        ("lm_head.weight".into(), vec![4096, 512]),
    ];
    let data: Vec<Vec<u8>> = tensors
        .iter()
        .enumerate()
        .map(|(i, (_, shape))| floats(shape.iter().product(), i as f32 * 1e6))
        .collect();
    let views: Vec<(&str, TensorView)> = tensors
        .iter()
        .zip(&data)
        .map(|((name, shape), data)| {
            let view = TensorView::new(Dtype::F32, shape.clone(), data).unwrap();
            (name.as_str(), view)
        })
        .collect();
    fs::write(path, safetensors::serialize(views, None).unwrap()).unwrap();
}

/// A moto server with the bucket `out`, and a folder holding `model.safetensors`.
fn started() -> Option<(Moto, tempfile::TempDir)> {
    let moto = Moto::start()?;
    moto.bucket("out");
    let dir = tempfile::tempdir().unwrap();
    llama(&dir.path().join("model.safetensors"));
    Some((moto, dir))
}

/// The split `flags` of `input` in one process into the local `output` (a template) in `dir`.
fn one_process(moto: &Moto, dir: &Path, flags: &[String], input: &str, output: &str) {
    let mut args = flags.to_vec();
    args.extend([input, "-o", output, "-q"].map(String::from));
    ok(moto, dir, &args, &[]);
}

/// `flags` of the local input `input` in `dir` (absolute) or a URL, into `output`.
fn job_args(dir: &Path, flags: &[String], input: &str, output: &str) -> Vec<String> {
    let mut args = flags.to_vec();
    match input.starts_with("s3://") {
        true => args.push(input.to_string()),
        false => args.extend(absolute(dir, &[input])),
    }
    args.extend(["-o".to_string(), output.to_string()]);
    args
}

/// The keys of the bucket that are the job's own.
fn job_keys(moto: &Moto) -> Vec<String> {
    let keys = moto.keys("out").into_iter();
    keys.filter(|k| k.contains("tjoin-job")).collect()
}

/// Fails unless the object `prefix{name}` is `folder/name` byte for byte for every file of
/// the local `folder`.
#[track_caller]
fn assert_objects_are(moto: &Moto, folder: &Path, prefix: &str) {
    let names = dir_entries(folder);
    assert!(!names.is_empty(), "{}", folder.display());
    for name in names {
        let key = format!("{prefix}{name}");
        let got = moto.get("out", &key).unwrap_or_else(|| panic!("no {key}"));
        let want = fs::read(folder.join(&name)).unwrap();
        assert!(got == want, "{key} differs from {}", folder.display());
    }
}

#[test]
fn workers_at_once_upload_the_one_process_local_2_and_4_rank_splits_byte_for_byte() {
    let Some((moto, dir)) = started() else { return };
    let d = dir.path();
    for (ranks, order) in [(2usize, [2, 0, 1]), (4, [1, 2, 0])] {
        let flags = rank_split(ranks as u32);
        let local = d.join(format!("one{ranks}"));
        fs::create_dir(&local).unwrap();
        let template = format!("{}/tp{{rank}}.safetensors", local.display());
        one_process(&moto, d, &flags, "model.safetensors", &template);
        let prefix = format!("r{ranks}/");
        let output = format!("s3://out/{prefix}tp{{rank}}.safetensors");
        let args = job_args(d, &flags, "model.safetensors", &output);
        // Every worker has a share, of both outputs' parts balanced by bytes.
        let shares = moto
            .tjoin()
            .current_dir(d)
            .args(&args)
            .args(["--workers", "3", "--dry-run=json"])
            .output()
            .unwrap();
        let plan: serde_json::Value = serde_json::from_slice(&shares.stdout).unwrap();
        let shares = plan["workers"].as_array().unwrap();
        assert_eq!(shares.len(), 3, "{plan}");
        let mut files: Vec<&str> = Vec::new();
        for share in shares {
            let len = share["end"].as_u64().unwrap() - share["start"].as_u64().unwrap();
            assert!(len >= 5 << 20, "each has a part at least: {share}");
            let named = share["files"].as_array().unwrap().iter();
            files.extend(named.map(|f| f.as_str().unwrap()));
        }
        files.dedup();
        let every: Vec<String> = (0..ranks).map(|r| format!("tp{r}.safetensors")).collect();
        assert_eq!(
            files, every,
            "the shares cover every output's file, in order"
        );
        ok(&moto, d, &args, &["--workers", "3", "--begin", "-q"]);
        assert_eq!(moto.uploads("out").len(), ranks, "an upload per output");
        run_workers(&args, &order, 3, &moto.env());
        let outputs: Vec<String> = moto.keys("out");
        let outputs: Vec<&String> = outputs
            .iter()
            .filter(|k| k.starts_with(&prefix) && !k.contains("tjoin-job"))
            .collect();
        assert!(
            outputs.is_empty(),
            "no object before the commit: {outputs:?}"
        );
        let committed = moto
            .tjoin()
            .current_dir(d)
            .args(&args)
            .args(["--workers", "3", "--commit", "--print-plan=json"])
            .output()
            .unwrap();
        assert!(committed.status.success());
        let committed: serde_json::Value = serde_json::from_slice(&committed.stdout).unwrap();
        assert_eq!(committed["workers"], plan["workers"], "{committed}");
        assert_objects_are(&moto, &local, &prefix);
        assert!(moto.uploads("out").is_empty());
        assert_eq!(
            job_keys(&moto),
            Vec::<String>::new(),
            "no job object is left"
        );
    }
}

#[test]
fn a_sharded_split_from_a_url_input_uploads_the_one_process_sets_every_index_last() {
    let Some((moto, dir)) = started() else { return };
    let d = dir.path();
    // The input in the bucket too: each worker reads its share by range, pinned to the ETag
    // `--begin` recorded.
    moto.put(
        "out",
        "in/model.safetensors",
        &fs::read(d.join("model.safetensors")).unwrap(),
    );
    let mut flags = rank_split(2);
    flags.extend(["--max-shard-size", "4MB"].map(String::from));
    one_process(&moto, d, &flags, "model.safetensors", "one{rank}/");
    for rank in 0..2 {
        let shards = dir_entries(&d.join(format!("one{rank}")));
        assert!(shards.len() > 2, "several shards and an index: {shards:?}");
    }
    let args = job_args(
        d,
        &flags,
        "s3://out/in/model.safetensors",
        "s3://out/tp{rank}/",
    );
    ok(&moto, d, &args, &["--workers", "3", "--begin", "-q"]);
    assert!(
        moto.get("out", "tp0/.tjoin-job/manifest.json").is_some(),
        "the manifest is under the first output's prefix"
    );
    run_workers(&args, &[1, 2, 0], 3, &moto.env());
    moto.clear_requests();
    ok(&moto, d, &args, &["--workers", "3", "--commit", "-q"]);
    for rank in 0..2 {
        assert_objects_are(&moto, &d.join(format!("one{rank}")), &format!("tp{rank}/"));
    }
    // Every shard completed before either index is written.
    let requests = moto.requests();
    let last_completed = requests
        .iter()
        .rposition(|r| r.starts_with("POST ") && r.contains("uploadId="))
        .expect("completions");
    let first_index = requests
        .iter()
        .position(|r| r.starts_with("PUT ") && r.contains(".index.json"))
        .expect("indexes");
    assert!(last_completed < first_index, "{requests:#?}");
    assert!(moto.uploads("out").is_empty());
    assert_eq!(job_keys(&moto), Vec::<String>::new());
}

#[test]
fn a_split_commit_names_the_missing_worker_and_a_worker_run_again_is_safe() {
    let Some((moto, dir)) = started() else { return };
    let d = dir.path();
    let flags = rank_split(4);
    fs::create_dir(d.join("one")).unwrap();
    one_process(
        &moto,
        d,
        &flags,
        "model.safetensors",
        "one/tp{rank}.safetensors",
    );
    let args = job_args(
        d,
        &flags,
        "model.safetensors",
        "s3://out/tp{rank}.safetensors",
    );
    ok(&moto, d, &args, &["--workers", "3", "--begin", "-q"]);
    run_workers(&args, &[2, 0], 3, &moto.env());
    let error = no(&moto, d, &args, &["--workers", "3", "--commit"]);
    assert!(
        error.contains("1 of the 3 workers has not finished: 1/3"),
        "{error}"
    );
    assert!(error.contains("run --worker 1/3"), "{error}");
    let keys = moto.keys("out");
    assert!(
        keys.iter().all(|k| k.contains("tjoin-job")),
        "no output object appears: {keys:?}"
    );
    // Worker 1 twice at once, then again: the last upload of each part wins.
    run_workers(&args, &[1, 1], 3, &moto.env());
    run_workers(&args, &[1, 0], 3, &moto.env());
    ok(&moto, d, &args, &["--workers", "3", "--commit", "-q"]);
    assert_objects_are(&moto, &d.join("one"), "");
    assert!(moto.uploads("out").is_empty());
    assert_eq!(job_keys(&moto), Vec::<String>::new());
}

#[test]
fn an_input_changed_after_the_begin_is_refused_and_abandon_leaves_no_upload() {
    let Some((moto, dir)) = started() else { return };
    let d = dir.path();
    let bytes = fs::read(d.join("model.safetensors")).unwrap();
    moto.put("out", "in/model.safetensors", &bytes);
    let flags = rank_split(2);
    for (input, output) in [
        ("model.safetensors", "s3://out/a/tp{rank}.safetensors"),
        ("s3://out/in/model.safetensors", "s3://out/b{rank}/"),
    ] {
        let args = job_args(d, &flags, input, output);
        ok(&moto, d, &args, &["--workers", "2", "--begin", "-q"]);
        run_workers(&args, &[0], 2, &moto.env());
        // The same bytes written again: the change time (a file) or the ETag (an object,
        // whose new bytes differ) tells it.
        std::thread::sleep(std::time::Duration::from_millis(20));
        match input.starts_with("s3://") {
            true => {
                let mut changed = bytes.clone();
                *changed.last_mut().unwrap() ^= 1;
                moto.put("out", "in/model.safetensors", &changed);
            }
            false => fs::write(d.join(input), &bytes).unwrap(),
        }
        let error = no(&moto, d, &args, &["--worker", "1/2"]);
        assert!(
            error.contains("input 1 (") && error.contains("changed since the job began"),
            "{input}: {error}"
        );
        let error = no(&moto, d, &args, &["--workers", "2", "--commit"]);
        assert!(error.contains("changed since the job began"), "{error}");
        assert_eq!(
            moto.uploads("out").len(),
            2,
            "{input}: an upload per output"
        );
        ok(&moto, d, &args, &["--workers", "2", "--abandon", "-q"]);
        assert!(
            moto.uploads("out").is_empty(),
            "abandon aborts every upload"
        );
        let keys = moto.keys("out");
        assert_eq!(keys, ["in/model.safetensors"], "abandon leaves no object");
        let error = no(&moto, d, &args, &["--worker", "0/2"]);
        assert!(error.contains("no job is recorded"), "{error}");
    }
}

#[test]
fn split_outputs_a_job_cannot_keep_together_are_refused_with_the_right_fix() {
    let Some((moto, dir)) = started() else { return };
    let d = dir.path();
    let split = |outputs: &[&str], step: &[&str]| {
        let mut args = rank_split(2);
        args.push("model.safetensors".into());
        for output in outputs {
            args.extend(["-o".to_string(), output.to_string()]);
        }
        let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
        all.extend(step);
        refused(d, &all, 2)
    };
    let begin = ["--workers", "2", "--begin"];
    for (outputs, says, fix) in [
        (
            &["s3://out/a.safetensors", "b.safetensors"][..],
            "one in object storage and one not",
            "name every output in S3",
        ),
        (
            &["s3://out/a.safetensors", "s3://other/b.safetensors"],
            "are in different buckets",
            "in one bucket",
        ),
        (
            &["s3://out/a.safetensors", "gs://out/b.safetensors"],
            "gs://out/b.safetensors is not in S3",
            "name the outputs in S3",
        ),
        (
            &["s3://out/d0/m.safetensors", "s3://out/d1/m.safetensors"],
            "are under different prefixes",
            "each under its own (-o 's3://BUCKET/tp{rank}/')",
        ),
        // The second output's one shard is the first output's object: one would replace
        // the other at the commit.
        (
            &["s3://out/model.safetensors", "s3://out/"],
            "the outputs name s3://out/model.safetensors twice",
            "a sharded output a folder or prefix of its own",
        ),
        // One object spelled two ways: the scheme's case.
        (
            &["s3://out/p.safetensors", "S3://out/p.safetensors"],
            "the outputs name S3://out/p.safetensors twice",
            "give each output names of its own",
        ),
    ] {
        let error = split(outputs, &begin);
        assert!(error.contains(says), "{outputs:?}: {error}");
        assert!(error.contains(fix), "{outputs:?}: {error}");
    }
    assert!(moto.uploads("out").is_empty() && moto.keys("out").is_empty());
    // A manifest that puts a file under a prefix the outputs are not under: refused.
    let args = job_args(d, &rank_split(2), "model.safetensors", "s3://out/tp{rank}/");
    ok(&moto, d, &args, &["--workers", "2", "--begin", "-q"]);
    let key = "tp0/.tjoin-job/manifest.json";
    let text = String::from_utf8(moto.get("out", key).unwrap()).unwrap();
    assert!(text.contains("\"folder\": 1"), "{text}");
    moto.put(
        "out",
        key,
        text.replace("\"folder\": 1", "\"folder\": 5").as_bytes(),
    );
    let error = no(&moto, d, &args, &["--worker", "0/2"]);
    assert!(
        error.contains("in prefix 5 of the job, whose outputs are in 2"),
        "{error}"
    );
    moto.put("out", key, text.as_bytes());
    // A worker naming the second output elsewhere plans another job: refused, where it would
    // upload into another key.
    let mut elsewhere = rank_split(2);
    elsewhere.extend(absolute(d, &["model.safetensors"]));
    for output in ["s3://out/tp0/", "s3://out/other1/"] {
        elsewhere.extend(["-o".to_string(), output.to_string()]);
    }
    let error = no(&moto, d, &elsewhere, &["--worker", "1/2"]);
    assert!(error.contains("plans s3://out/tp0/ differently"), "{error}");
    ok(&moto, d, &args, &["--workers", "2", "--abandon", "-q"]);
    assert!(moto.uploads("out").is_empty() && moto.keys("out").is_empty());
}

#[test]
fn an_npy_split_along_its_last_axis_uploads_the_one_process_local_parts() {
    let Some(moto) = Moto::start() else { return };
    moto.bucket("out");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // 36 MB, three 12 MB outputs of three parts each, whose bytes are strided slices: each
    // output's rows are cut from every input row.
    crate::util::write_npy(
        &d.join("x.npy"),
        "<f4",
        &[3001, 3000],
        false,
        &floats(9_003_000, 0.0),
    );
    let flags = ["split", "-a", "-1", "--parts", "3"]
        .map(String::from)
        .to_vec();
    one_process(&moto, d, &flags, "x.npy", "one{part}.npy");
    let args = job_args(d, &flags, "x.npy", "s3://out/p{part}.npy");
    ok(&moto, d, &args, &["--workers", "4", "--begin", "-q"]);
    run_workers(&args, &[3, 1, 0, 2], 4, &moto.env());
    ok(&moto, d, &args, &["--workers", "4", "--commit", "-q"]);
    for part in 0..3 {
        let got = moto.get("out", &format!("p{part}.npy")).unwrap();
        assert!(
            got == fs::read(d.join(format!("one{part}.npy"))).unwrap(),
            "{part}"
        );
    }
    assert!(moto.uploads("out").is_empty());
    assert_eq!(job_keys(&moto), Vec::<String>::new());
}

#[test]
fn a_no_clobber_commit_whose_second_output_appears_names_the_first_in_place() {
    use crate::workers_parts::{Proxy, Verdict, port_of};
    let Some((moto, dir)) = started() else { return };
    let moto = std::sync::Arc::new(moto);
    let d = dir.path();
    let flags = rank_split(2);
    fs::create_dir(d.join("one")).unwrap();
    one_process(
        &moto,
        d,
        &flags,
        "model.safetensors",
        "one/tp{rank}.safetensors",
    );
    let output = "s3://out/n/tp{rank}.safetensors";
    let args = job_args(d, &flags, "model.safetensors", output);
    ok(&moto, d, &args, &["--workers", "2", "--begin", "-n", "-q"]);
    run_workers(&args, &[0, 1], 2, &moto.env());
    // Another writer creates the second output as its completion goes, after the first's.
    // A weak handle: the proxy's thread, which keeps the rule, must not keep moto running
    // after the test.
    let other = std::sync::Arc::downgrade(&moto);
    let rule = move |head: &str| {
        let line = head.lines().next().unwrap_or_default();
        if line.starts_with("POST /out/n/tp1.safetensors?") && line.contains("uploadId=") {
            if let Some(other) = other.upgrade() {
                other.put("out", "n/tp1.safetensors", b"theirs");
            }
        }
        Verdict::Forward
    };
    let proxy = Proxy::start(port_of(&moto), std::sync::Arc::new(rule));
    let mut command = moto.tjoin();
    command.envs(proxy.env(&moto));
    let (code, stderr) =
        crate::workers_s3::run_in(command, d, &args, &["--workers", "2", "--commit", "-n"]);
    assert_eq!(code, Some(2), "{stderr}");
    crate::util::assert_mentions(
        &stderr,
        &[
            "s3://out/n/tp1.safetensors was created by another writer",
            "in place already",
            "s3://out/n/tp0.safetensors",
        ],
    );
    assert_eq!(moto.get("out", "n/tp1.safetensors").unwrap(), b"theirs");
    let first = moto.get("out", "n/tp0.safetensors").unwrap();
    assert!(first == fs::read(d.join("one/tp0.safetensors")).unwrap());
    assert!(moto.uploads("out").is_empty(), "{:?}", moto.uploads("out"));
    assert_eq!(job_keys(&moto), Vec::<String>::new());
}

#[test]
fn a_manifest_giving_one_output_anothers_upload_is_refused_at_the_worker() {
    let Some((moto, dir)) = started() else { return };
    let d = dir.path();
    let flags = rank_split(2);
    fs::create_dir(d.join("one")).unwrap();
    one_process(
        &moto,
        d,
        &flags,
        "model.safetensors",
        "one/tp{rank}.safetensors",
    );
    let args = job_args(
        d,
        &flags,
        "model.safetensors",
        "s3://out/tp{rank}.safetensors",
    );
    ok(&moto, d, &args, &["--workers", "2", "--begin", "-q"]);
    let key = "tp0.safetensors.tjoin-job/manifest.json";
    let text = String::from_utf8(moto.get("out", key).unwrap()).unwrap();
    let mut manifest: serde_json::Value = serde_json::from_str(&text).unwrap();
    let files = manifest["upload"]["files"].as_array_mut().unwrap();
    let first = files[0]["upload_id"].clone();
    files[0]["upload_id"] = files[1]["upload_id"].clone();
    files[1]["upload_id"] = first;
    moto.put("out", key, manifest.to_string().as_bytes());
    // moto takes a part for one key into another key's upload, and completes it there (S3
    // answers NoSuchUpload): the outputs would be each other's, exit 0.
    for worker in ["0/2", "1/2"] {
        let error = no(&moto, d, &args, &["--worker", worker]);
        crate::util::assert_mentions(
            &error,
            &[
                "the store lists no upload of s3://out/tp",
                "the manifest was edited",
                "--abandon",
            ],
        );
    }
    assert!(moto.keys("out").iter().all(|k| !k.contains("done-")));
    moto.put("out", key, text.as_bytes());
    run_workers(&args, &[0, 1], 2, &moto.env());
    ok(&moto, d, &args, &["--workers", "2", "--commit", "-q"]);
    assert_objects_are(&moto, &d.join("one"), "");
}
