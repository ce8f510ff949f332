//! Outputs in object storage (`-o s3://BUCKET/KEY`, `-o s3://BUCKET/PREFIX/`) against a real
//! S3 server (moto's, `moto.rs`): the same bytes as the same join written locally, one
//! object visible only when complete, uploaded as it is written (nothing in `TMPDIR`, memory
//! bounded by the parts in flight), a sharded set's index last, `--no-clobber` refused
//! before a byte is sent and by the completion itself (a conditional create), no upload
//! left behind by a signal, and errors that say what failed with the URL's secrets redacted.

use std::path::Path;
#[cfg(unix)]
use std::time::Duration;

use crate::moto::Moto;
use crate::util::{f32_le, write_npy};

/// Writes `a.npy` [rows_a, width] and `b.npy` [rows_b, width] of distinct float32 values.
fn two_inputs(dir: &Path, rows: (u64, u64), width: u64) {
    let values = |n: u64, from: u64| -> Vec<f32> { (0..n).map(|i| (from + i) as f32).collect() };
    let (a, b) = (rows.0 * width, rows.1 * width);
    write_npy(
        &dir.join("a.npy"),
        "<f4",
        &[rows.0, width],
        false,
        &f32_le(&values(a, 0)),
    );
    write_npy(
        &dir.join("b.npy"),
        "<f4",
        &[rows.1, width],
        false,
        &f32_le(&values(b, a)),
    );
}

/// The bytes of the same join written to a local file.
fn local_join(moto: &Moto, dir: &Path, args: &[&str]) -> Vec<u8> {
    let out = dir.join("local.npy");
    let mut all: Vec<&str> = args.to_vec();
    let out_text = out.to_str().unwrap();
    all.extend(["-o", out_text]);
    moto.tjoin().current_dir(dir).args(&all).assert().success();
    std::fs::read(&out).unwrap()
}

#[test]
fn an_object_holds_the_bytes_of_the_same_join_written_locally() {
    let Some(moto) = Moto::start() else { return };
    moto.bucket("out");
    let dir = tempfile::tempdir().unwrap();
    // 40 MB: a multipart upload of five 8 MiB parts (the last one short); the last-axis join
    // of a with itself, 74 MB in nine.
    two_inputs(dir.path(), (9000, 1000), 1024);
    for (args, key) in [
        (&["-a", "0", "a.npy", "b.npy"][..], "axis0.npy"),
        (&["-a", "-1", "a.npy", "a.npy"][..], "last.npy"),
    ] {
        let url = format!("s3://out/joined/{key}");
        let mut all = args.to_vec();
        all.extend(["-o", &url]);
        moto.tjoin()
            .current_dir(dir.path())
            .args(&all)
            .assert()
            .success();
        let local = local_join(&moto, dir.path(), args);
        let remote = moto
            .get("out", &format!("joined/{key}"))
            .expect("the object");
        assert!(
            local == remote,
            "{key}: {}",
            crate::util::describe_difference(&local, &remote)
        );
    }
    let requests = moto.requests();
    let parts = requests
        .iter()
        .filter(|r| r.contains("partNumber="))
        .count();
    assert!(
        parts >= 10,
        "two multipart uploads of 5 parts: {requests:#?}"
    );
    assert!(moto.uploads("out").is_empty());
    // A small output is one PUT.
    two_inputs(dir.path(), (2, 3), 4);
    moto.clear_requests();
    let args = ["-a", "0", "a.npy", "b.npy", "-o", "s3://out/small.npy"];
    moto.tjoin()
        .current_dir(dir.path())
        .args(args)
        .assert()
        .success();
    assert_eq!(moto.requests().len(), 1, "{:#?}", moto.requests());
    let local = local_join(&moto, dir.path(), &args[..4]);
    assert_eq!(moto.get("out", "small.npy").unwrap(), local);
}

#[test]
fn a_sharded_set_under_a_prefix_is_its_shards_then_its_index() {
    let Some(moto) = Moto::start() else { return };
    moto.bucket("models");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/sharded");
    let merged = fixtures.join("expected/model.safetensors");
    let merged = merged.to_str().unwrap();
    let args = [merged, "--max-shard-size", "600", "-o", "s3://models/m600/"];
    moto.tjoin().args(args).assert().success();
    crate::util::assert_set_uploaded(
        &fixtures.join("expected/model_600"),
        moto.keys("models").len(),
        |name| moto.get("models", &format!("m600/{name}")),
        moto.requests(),
    );
}

#[test]
fn no_clobber_refuses_an_existing_object_before_sending_a_byte() {
    let Some(moto) = Moto::start() else { return };
    moto.bucket("out");
    moto.put("out", "there.npy", b"old");
    let dir = tempfile::tempdir().unwrap();
    two_inputs(dir.path(), (2, 3), 4);
    moto.clear_requests();
    let args = [
        "-n",
        "-a",
        "0",
        "a.npy",
        "b.npy",
        "-o",
        "s3://out/there.npy",
    ];
    let run = moto
        .tjoin()
        .current_dir(dir.path())
        .args(args)
        .assert()
        .failure();
    let stderr = String::from_utf8_lossy(&run.get_output().stderr).into_owned();
    crate::util::assert_mentions(&stderr, &["s3://out/there.npy", "exists", "--no-clobber"]);
    let sent: Vec<String> = moto
        .requests()
        .into_iter()
        .filter(|r| !r.starts_with("HEAD"))
        .collect();
    assert!(sent.is_empty(), "{sent:#?}");
    assert_eq!(moto.get("out", "there.npy").unwrap(), b"old");
    // A new key is written.
    let args = ["-n", "-a", "0", "a.npy", "b.npy", "-o", "s3://out/new.npy"];
    moto.tjoin()
        .current_dir(dir.path())
        .args(args)
        .assert()
        .success();
    assert!(moto.get("out", "new.npy").is_some());
}

/// Starts tjoin `args` in `dir` on two inputs of 200 MiB (an output of fifty parts, which
/// moto takes seconds to receive), once its first part is on its way; its stderr piped.
#[cfg(unix)]
fn sending_parts(moto: &Moto, dir: &Path, args: &[&str]) -> std::process::Child {
    two_inputs(dir, (50 << 10, 50 << 10), 1024);
    moto.sending(dir, args, "")
}

#[cfg(unix)]
#[test]
fn a_signal_during_the_upload_aborts_it_and_leaves_no_object() {
    let Some(moto) = Moto::start() else { return };
    moto.bucket("out");
    let dir = tempfile::tempdir().unwrap();
    let args = ["-a", "0", "a.npy", "b.npy", "-o", "s3://out/big.npy"];
    let mut child = sending_parts(&moto, dir.path(), &args);
    // SAFETY: a plain kill(2) of the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert_eq!(
        crate::util::killed_by(status),
        Some(libc::SIGTERM),
        "{status:?}"
    );
    assert!(
        moto.uploads("out").is_empty(),
        "an upload was left: {:?}",
        moto.uploads("out")
    );
    assert!(moto.get("out", "big.npy").is_none());
    // The abort was sent (again, if a busy server's answer came too late: an abort is
    // idempotent, and object_store retries it).
    let aborts = moto
        .requests()
        .into_iter()
        .filter(|r| r.starts_with("DELETE"))
        .count();
    assert!(aborts >= 1, "no abort was sent");
}

#[test]
fn errors_name_the_url_say_what_failed_and_redact_secrets() {
    let Some(moto) = Moto::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    two_inputs(dir.path(), (2, 3), 4);
    let join = ["-a", "0", "a.npy", "b.npy", "-o"];
    let fails = |command: &mut assert_cmd::Command, url: &str| -> String {
        let run = command
            .current_dir(dir.path())
            .args(join)
            .arg(url)
            .assert()
            .failure();
        String::from_utf8_lossy(&run.get_output().stderr).into_owned()
    };
    let stderr = fails(&mut moto.tjoin(), "s3://no-such-bucket/x.npy");
    crate::util::assert_mentions(&stderr, &["s3://no-such-bucket/x.npy", "no such bucket"]);
    let stderr = fails(moto.tjoin().env("AWS_ALLOW_HTTP", "false"), "s3://b/x.npy");
    crate::util::assert_mentions(&stderr, &["plain-http", "AWS_ALLOW_HTTP=true"]);
    let mut profile = moto.tjoin();
    profile
        .env_remove("AWS_ACCESS_KEY_ID")
        .env("AWS_PROFILE", "work");
    let stderr = fails(&mut profile, "s3://b/x.npy");
    crate::util::assert_mentions(&stderr, &["AWS_PROFILE=work", "export-credentials"]);
    let signed = "https://h.example/x.npy?X-Amz-Credential=AKIASECRET&X-Amz-Signature=s1gn4ture";
    let stderr = fails(&mut moto.tjoin(), signed);
    assert!(
        !stderr.contains("AKIASECRET") && !stderr.contains("s1gn4ture"),
        "{stderr}"
    );
    crate::util::assert_mentions(&stderr, &["X-Amz-Signature=REDACTED"]);
    assert!(
        dir.path().read_dir().unwrap().count() == 2,
        "nothing else was written"
    );
}

/// Runs tjoin `args` in `dir` against `moto` with `TMPDIR` set to `tmpdir`: its exit code,
/// stderr and peak resident memory in KiB, the most `VmHWM` its `/proc` status showed while
/// it ran (a child's `ru_maxrss` would count the test process it was spawned from).
#[cfg(target_os = "linux")]
pub(crate) fn run_measured(
    env: &[(&'static str, String)],
    dir: &Path,
    tmpdir: &Path,
    args: &[&str],
) -> (i32, String, u64) {
    let mut command = std::process::Command::new(crate::util::bin());
    for (name, _) in std::env::vars() {
        if name.starts_with("AWS_") {
            command.env_remove(name);
        }
    }
    command
        .current_dir(dir)
        .envs(env.iter().map(|(name, value)| (*name, value)))
        .env("TMPDIR", tmpdir);
    command.args(args).stderr(std::process::Stdio::piped());
    let mut child = command.spawn().unwrap();
    let status_file = format!("/proc/{}/status", child.id());
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut text).unwrap();
        text
    });
    let mut peak_kib = 0;
    let status = loop {
        let text = std::fs::read_to_string(&status_file).unwrap_or_default();
        let hwm = text.lines().find_map(|line| line.strip_prefix("VmHWM:"));
        let kib = hwm.and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok());
        peak_kib = peak_kib.max(kib.unwrap_or(0));
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    (
        status.code().unwrap_or(-1),
        reader.join().unwrap(),
        peak_kib,
    )
}

#[cfg(target_os = "linux")]
#[test]
fn an_object_is_uploaded_as_it_is_written_with_no_staging_and_bounded_memory() {
    let Some(moto) = Moto::start() else { return };
    moto.bucket("out");
    let dir = tempfile::tempdir().unwrap();
    // 200 MiB: twenty-five parts of 8 MiB.
    two_inputs(dir.path(), (25 << 10, 25 << 10), 1024);
    // A temporary folder that cannot be written: a staged output would need it.
    let tmp = tempfile::tempdir().unwrap();
    let unwritable = tmp.path().join("missing");
    // With -n: completed by a conditional create.
    let args = [
        "-a",
        "0",
        "a.npy",
        "b.npy",
        "-n",
        "-o",
        "s3://out/streamed.npy",
    ];
    let (code, stderr, peak_kib) = run_measured(&moto.env(), dir.path(), &unwritable, &args);
    assert_eq!(code, 0, "{stderr}");
    assert!(!unwritable.exists());
    // The bound: 64 MiB, plus the parts in flight (four) and the one being filled.
    let bound_kib = (64 + 5 * 8) << 10;
    assert!(
        peak_kib < bound_kib,
        "peak {peak_kib} KiB, over {bound_kib} KiB"
    );
    let local = local_join(&moto, dir.path(), &args[..4]);
    let remote = moto.get("out", "streamed.npy").expect("the object");
    assert!(
        local == remote,
        "{}",
        crate::util::describe_difference(&local, &remote)
    );
    assert!(moto.uploads("out").is_empty());
    let requests = moto.requests();
    let completed = |r: &&String| r.starts_with("POST /out/streamed.npy?") && r.ends_with(" 200");
    assert!(requests.iter().any(|r| completed(&r)), "{requests:#?}");
    // A sharded set too: shards and index, with nothing staged.
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/sharded");
    let merged = fixtures.join("expected/model.safetensors");
    let args = [
        merged.to_str().unwrap(),
        "--max-shard-size",
        "600",
        "-o",
        "s3://out/set/",
    ];
    let (code, stderr, _) = run_measured(&moto.env(), dir.path(), &unwritable, &args);
    assert_eq!(code, 0, "{stderr}");
    let index = moto.get("out", "set/model.safetensors.index.json");
    assert!(index.is_some(), "{:?}", moto.keys("out"));
}

#[test]
fn a_failed_set_leaves_none_of_its_files_and_no_upload() {
    let Some(moto) = Moto::start() else { return };
    moto.bucket("models");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/sharded");
    let merged = fixtures.join("expected/model.safetensors");
    let merged = merged.to_str().unwrap();
    // The set's second shard exists: -n refuses it before a byte of any file is sent.
    moto.put("models", "m/model-00002-of-00004.safetensors", b"old");
    let shards: Vec<String> = std::fs::read_dir(fixtures.join("expected/model_600"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(
        shards.contains(&"model-00002-of-00004.safetensors".to_string()),
        "{shards:?}"
    );
    moto.clear_requests();
    let args = [
        "-n",
        merged,
        "--max-shard-size",
        "600",
        "-o",
        "s3://models/m/",
    ];
    let run = moto.tjoin().args(args).assert().failure();
    let stderr = String::from_utf8_lossy(&run.get_output().stderr).into_owned();
    crate::util::assert_mentions(
        &stderr,
        &["s3://models/m/model-00002-of-00004.safetensors", "exists"],
    );
    let sent: Vec<String> = moto
        .requests()
        .into_iter()
        .filter(|r| !r.starts_with("HEAD"))
        .collect();
    assert!(sent.is_empty(), "{sent:#?}");
    assert_eq!(moto.keys("models"), ["m/model-00002-of-00004.safetensors"]);
}

#[cfg(unix)]
#[test]
fn no_clobber_refuses_an_object_that_appears_during_the_upload() {
    let Some(moto) = Moto::start() else { return };
    moto.bucket("out");
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "-n",
        "-a",
        "0",
        "a.npy",
        "b.npy",
        "-o",
        "s3://out/raced.npy",
    ];
    let child = sending_parts(&moto, dir.path(), &args);
    // Another writer creates the key while the parts go.
    moto.put("out", "raced.npy", b"theirs");
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    crate::util::assert_mentions(&stderr, &["s3://out/raced.npy", "exists", "--no-clobber"]);
    assert_eq!(moto.get("out", "raced.npy").unwrap(), b"theirs");
    assert!(moto.uploads("out").is_empty(), "{:?}", moto.uploads("out"));
    // Refused by the completion itself, a conditional create (If-None-Match), which the
    // store answers 412: no window between a check and the completion.
    let requests = moto.requests();
    let refused = requests
        .iter()
        .any(|r| r.starts_with("POST /out/raced.npy?") && r.ends_with(" 412"));
    assert!(refused, "{requests:#?}");
}

#[test]
fn an_append_to_an_object_is_refused_before_a_request() {
    let Some(moto) = Moto::start() else { return };
    moto.bucket("out");
    moto.put("out", "x.npy", b"old");
    let dir = tempfile::tempdir().unwrap();
    two_inputs(dir.path(), (2, 3), 4);
    moto.clear_requests();
    let args = ["--append", "-a", "0", "s3://out/x.npy", "a.npy"];
    let run = moto
        .tjoin()
        .current_dir(dir.path())
        .args(args)
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&run.get_output().stderr).into_owned();
    crate::util::assert_mentions(
        &stderr,
        &[
            "--append",
            "s3://out/x.npy",
            "an object",
            "-o s3://BUCKET/NEW_KEY",
        ],
    );
    assert!(moto.requests().is_empty(), "{:#?}", moto.requests());
    assert_eq!(moto.get("out", "x.npy").unwrap(), b"old");
    assert_eq!(dir.path().read_dir().unwrap().count(), 2, "nothing written");
}

#[test]
fn no_clobber_completes_a_multipart_upload_with_plain_http_allowed_as_1() {
    // object_store reads AWS_ALLOW_HTTP=1 as true, and so must the conditional completion
    // `--no-clobber` sends itself: else every part is sent, and the completion refused.
    let Some(moto) = Moto::start() else { return };
    moto.bucket("out");
    let dir = tempfile::tempdir().unwrap();
    // 12 MB: two parts of 8 MiB, completed with If-None-Match.
    two_inputs(dir.path(), (1500, 1500), 1024);
    let args = ["-a", "0", "a.npy", "b.npy"];
    let expected = local_join(&moto, dir.path(), &args);
    let mut all = args.to_vec();
    all.extend(["-n", "-o", "s3://out/new.npy"]);
    moto.tjoin()
        .env("AWS_ALLOW_HTTP", "1")
        .current_dir(dir.path())
        .args(&all)
        .assert()
        .success();
    assert!(moto.get("out", "new.npy").unwrap() == expected);
    assert!(moto.uploads("out").is_empty(), "{:?}", moto.uploads("out"));
}
