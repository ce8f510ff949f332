//! A split into object storage in one process (`tjoin split ... -o 's3://B/tp{rank}/...'`,
//! sharded outputs under prefixes, `az://`) against real servers the tests start (moto's S3,
//! Azurite): every object the local split's file byte for byte, each sharded output's index
//! after its shards, the outputs written one after another in bounded memory, nothing in
//! place after a failure or a signal before the commit, `--no-clobber` refused before any
//! upload and kept by S3's conditional completion, a completion that fails after others
//! naming the objects in place and those not, and a mix of local and URL outputs refused.

use std::path::{Path, PathBuf};

use crate::emulators::Azurite;
use crate::moto::Moto;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// The rank split of `fixtures/split/ranks` (16 query heads, 4 key-value heads) into `n`
/// ranks, without `-o`.
fn rank_split(n: &str) -> Vec<String> {
    let ranks = fixtures().join("split/ranks");
    let args = ["split", "--ranks", n, "--heads", "16:4", "--rules"];
    let mut args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    for file in ["model.rules", "model.safetensors"] {
        args.push(ranks.join(file).to_str().unwrap().to_string());
    }
    args
}

/// Runs `command` with `args` and `-o output` in `dir`, which must succeed.
fn split_into(command: &mut assert_cmd::Command, dir: &Path, args: &[String], output: &str) {
    command
        .current_dir(dir)
        .args(args)
        .args(["-o", output, "-q"])
        .assert()
        .success();
}

/// Runs `command` with `args` in `dir`, which must fail with `code`: its stderr.
fn fails(command: &mut assert_cmd::Command, dir: &Path, args: &[&str], code: i32) -> String {
    let run = command.current_dir(dir).args(args).assert().code(code);
    String::from_utf8_lossy(&run.get_output().stderr).into_owned()
}

/// Whether a request of moto's log completes an object: a multipart upload's completion, or
/// the one PUT of an object that fits in one part.
fn completes(request: &str) -> bool {
    let put = request.starts_with("PUT ") && !request.contains('?');
    let completion = request.starts_with("POST ") && request.contains("?uploadId=");
    put || completion
}

#[test]
fn rank_splits_into_s3_are_the_local_splits_files_byte_for_byte() {
    let Some(moto) = Moto::start() else { return };
    moto.bucket("out");
    let dir = tempfile::tempdir().unwrap();
    for n in ["2", "4"] {
        let args = rank_split(n);
        let url = format!("s3://out/tp{n}/rank{{rank}}/model.safetensors");
        split_into(&mut moto.tjoin(), dir.path(), &args, &url);
        split_into(
            &mut moto.tjoin(),
            dir.path(),
            &args,
            "local{rank}.safetensors",
        );
        for rank in 0..n.parse().unwrap() {
            let key = format!("tp{n}/rank{rank}/model.safetensors");
            let object = moto.get("out", &key).expect(&key);
            let local = std::fs::read(dir.path().join(format!("local{rank}.safetensors")));
            assert!(object == local.unwrap(), "{key} differs");
        }
    }
    assert_eq!(moto.keys("out").len(), 6, "{:?}", moto.keys("out"));
    assert!(moto.uploads("out").is_empty(), "{:?}", moto.uploads("out"));
    // Written one after another, completed in order at the end: every object's first
    // request comes before the first completion.
    let requests = moto.requests();
    let first_completion = requests.iter().position(|r| completes(r)).unwrap();
    let started = |key: &str| requests.iter().position(|r| r.contains(key)).unwrap();
    assert!(started("tp2/rank1/") < first_completion, "{requests:#?}");
    // Nothing was written locally but the local split's files.
    let mut local = crate::util::dir_entries(dir.path());
    local.sort();
    assert_eq!(local.len(), 4, "{local:?}");
}

#[test]
fn a_sharded_split_into_s3_writes_each_outputs_index_after_its_shards() {
    let Some(moto) = Moto::start() else { return };
    moto.bucket("out");
    let dir = tempfile::tempdir().unwrap();
    let input = fixtures().join("sharded/expected/model.safetensors");
    let args: Vec<String> = [
        "split",
        "-a",
        "0",
        "--parts",
        "2",
        "--keep",
        "logit_scale",
        input.to_str().unwrap(),
        "--max-shard-size",
        "300",
    ]
    .map(str::to_string)
    .to_vec();
    split_into(&mut moto.tjoin(), dir.path(), &args, "s3://out/p{part}/");
    split_into(&mut moto.tjoin(), dir.path(), &args, "local{part}/");
    let requests = moto.requests();
    let mut completed = Vec::new();
    for part in 0..2 {
        let local = dir.path().join(format!("local{part}"));
        let names = crate::util::dir_entries(&local);
        assert!(names.len() > 2, "shards and an index: {names:?}");
        for name in &names {
            let key = format!("p{part}/{name}");
            let object = moto.get("out", &key).expect(&key);
            assert!(object == std::fs::read(local.join(name)).unwrap(), "{key}");
            let at = requests
                .iter()
                .rposition(|r| completes(r) && r.contains(&key));
            completed.push((at.expect(&key), key));
        }
    }
    completed.sort();
    let order: Vec<&str> = completed.iter().map(|(_, key)| key.as_str()).collect();
    // Output 0 whole, its index last, then output 1 whole, its index last.
    let index = |part| format!("p{part}/model.safetensors.index.json");
    assert_eq!(order[order.len() / 2 - 1], index(0), "{order:#?}");
    assert_eq!(order[order.len() - 1], index(1), "{order:#?}");
    assert!(
        order[..order.len() / 2]
            .iter()
            .all(|k| k.starts_with("p0/"))
    );
    assert!(moto.uploads("out").is_empty(), "{:?}", moto.uploads("out"));
    assert_eq!(moto.keys("out").len(), completed.len());
}

#[test]
fn a_rank_split_into_azure_is_the_local_split() {
    let Some(azurite) = Azurite::start() else {
        return;
    };
    azurite.container("out");
    let dir = tempfile::tempdir().unwrap();
    let args = rank_split("2");
    split_into(
        &mut azurite.tjoin(),
        dir.path(),
        &args,
        "az://out/tp{rank}/",
    );
    split_into(&mut azurite.tjoin(), dir.path(), &args, "local{rank}/");
    for rank in 0..2 {
        let local = dir.path().join(format!("local{rank}"));
        for name in crate::util::dir_entries(&local) {
            let blob = format!("tp{rank}/{name}");
            let got = azurite.get("out", &blob).expect(&blob);
            assert!(got == std::fs::read(local.join(&name)).unwrap(), "{blob}");
        }
    }
    assert_eq!(azurite.blobs("out", true).len(), 2);
}

#[test]
fn an_output_that_fails_midway_leaves_no_object_and_no_upload() {
    let Some(moto) = Moto::start() else { return };
    moto.bucket("out");
    let dir = tempfile::tempdir().unwrap();
    // The third output's bucket does not exist: its upload fails once the first two are
    // written (their uploads started), before anything is completed. The last one's: its
    // upload starts at the commit, before the first completion.
    for (missing, named) in [("c", "an object before it, "), ("d", "")] {
        let mut args: Vec<String> = rank_split("4");
        for output in ["a", "b", "c", "d"] {
            let url = match output == missing {
                true => format!("s3://no-such-bucket/{output}.safetensors"),
                false => format!("s3://out/{output}.safetensors"),
            };
            args.extend(["-o".to_string(), url]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let stderr = fails(&mut moto.tjoin(), dir.path(), &args, 1);
        let url = format!("{named}s3://no-such-bucket/{missing}.safetensors");
        crate::util::assert_mentions(&stderr, &[&url, "no such bucket"]);
        assert!(moto.keys("out").is_empty(), "{:?}", moto.keys("out"));
        assert!(moto.uploads("out").is_empty(), "{:?}", moto.uploads("out"));
        let requests = moto.requests();
        assert!(
            requests.iter().any(|r| r.contains("/out/b.safetensors")),
            "the outputs before it were sent: {requests:#?}"
        );
        assert!(!requests.iter().any(|r| completes(r)), "{requests:#?}");
    }
}

#[test]
fn no_clobber_refuses_every_existing_output_before_any_upload() {
    let Some(moto) = Moto::start() else { return };
    moto.bucket("out");
    moto.put("out", "r1.safetensors", b"old1");
    moto.put("out", "r3.safetensors", b"old3");
    let dir = tempfile::tempdir().unwrap();
    moto.clear_requests();
    let mut args = rank_split("4");
    args.extend(["-n", "-o", "s3://out/r{rank}.safetensors"].map(str::to_string));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let stderr = fails(&mut moto.tjoin(), dir.path(), &args, 1);
    crate::util::assert_mentions(
        &stderr,
        &[
            "s3://out/r1.safetensors",
            "s3://out/r3.safetensors",
            "exists",
            "--no-clobber",
        ],
    );
    let sent: Vec<String> = moto
        .requests()
        .into_iter()
        .filter(|r| !r.starts_with("HEAD"))
        .collect();
    assert!(sent.is_empty(), "{sent:#?}");
    assert_eq!(moto.keys("out"), ["r1.safetensors", "r3.safetensors"]);
    assert_eq!(moto.get("out", "r1.safetensors").unwrap(), b"old1");
}

#[test]
fn outputs_that_mix_local_files_and_objects_are_refused_before_a_request() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = rank_split("2");
    args.extend(["-o", "local.safetensors", "-o", "s3://out/r1.safetensors"].map(str::to_string));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // No server: a request would fail otherwise than as a refusal.
    let mut command = crate::util::tjoin();
    command.env("AWS_ENDPOINT_URL", "http://127.0.0.1:9");
    let stderr = fails(&mut command, dir.path(), &args, 2);
    crate::util::assert_mentions(
        &stderr,
        &["local.safetensors", "s3://out/r1.safetensors", "mix"],
    );
    assert!(crate::util::dir_entries(dir.path()).is_empty());
    // An https:// URL is read, never written.
    let mut args = rank_split("2");
    args.extend(["-o", "https://example.org/r{rank}.safetensors"].map(str::to_string));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let stderr = fails(&mut crate::util::tjoin(), dir.path(), &args, 2);
    crate::util::assert_mentions(&stderr, &["https://example.org/r0.safetensors", "read"]);
    // A file output and a sharded output whose one shard is that file's key: the one
    // completed last replaced the other, exit 0, before this was refused.
    let mut args = rank_split("2");
    let twice = ["-o", "s3://out/x/model.safetensors", "-o", "s3://out/x/"];
    args.extend(twice.map(str::to_string));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut command = crate::util::tjoin();
    command.env("AWS_ENDPOINT_URL", "http://127.0.0.1:9");
    let stderr = fails(&mut command, dir.path(), &args, 2);
    crate::util::assert_mentions(&stderr, &["s3://out/x/model.safetensors", "twice"]);
}

#[test]
fn an_output_that_is_the_input_object_is_refused_before_an_upload() {
    let Some(moto) = Moto::start() else { return };
    moto.bucket("out");
    let model = std::fs::read(fixtures().join("split/ranks/model.safetensors")).unwrap();
    moto.put("out", "m.safetensors", &model);
    let dir = tempfile::tempdir().unwrap();
    moto.clear_requests();
    // Rank 0 would replace the input at the first completion: a failure of the second
    // (a store failing, a --no-clobber race) would leave the input lost and rank 1 not
    // written, as no store takes a completed object back. It was uploaded, exit 0.
    let ranks = fixtures().join("split/ranks");
    let rules = ranks.join("model.rules");
    let args = ["split", "--ranks", "2", "--heads", "16:4", "--rules"];
    let spelled = ["s3://out/m.safetensors", "S3://out/m.safetensors"];
    for output in spelled {
        let outputs = ["-o", output, "-o", "s3://out/r1.safetensors"];
        let input = ["s3://out/m.safetensors"];
        let args = [&args[..], &[rules.to_str().unwrap()], &input, &outputs].concat();
        let stderr = fails(&mut moto.tjoin(), dir.path(), &args, 2);
        crate::util::assert_mentions(&stderr, &[output, "is the input", "name another key"]);
    }
    let sent: Vec<String> = moto
        .requests()
        .into_iter()
        .filter(|r| !r.starts_with("GET") && !r.starts_with("HEAD"))
        .collect();
    assert!(sent.is_empty(), "{sent:#?}");
    assert_eq!(moto.keys("out"), ["m.safetensors"]);
    assert!(moto.get("out", "m.safetensors").unwrap() == model);
    // The last output is completed once the others are in place: it may replace the input,
    // as a local split's output may.
    let outputs = [
        "-o",
        "s3://out/r0.safetensors",
        "-o",
        "s3://out/m.safetensors",
    ];
    let args = [
        &args[..],
        &[rules.to_str().unwrap(), "s3://out/m.safetensors"],
        &outputs,
    ];
    moto.tjoin()
        .current_dir(dir.path())
        .args(args.concat())
        .assert()
        .success();
    split_into(
        &mut moto.tjoin(),
        dir.path(),
        &rank_split("2"),
        "local{rank}.safetensors",
    );
    for (key, rank) in [("r0.safetensors", 0), ("m.safetensors", 1)] {
        let local = std::fs::read(dir.path().join(format!("local{rank}.safetensors")));
        assert!(moto.get("out", key).unwrap() == local.unwrap(), "{key}");
    }
}

/// Writes `big.npy`, float32 [rows, 1024] of distinct values, in pieces.
#[cfg(unix)]
fn big_input(dir: &Path, rows: u64) -> PathBuf {
    use std::io::Write;
    let path = dir.join("big.npy");
    let mut file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    file.write_all(&crate::util::npy_header("<f4", &[rows, 1024], false))
        .unwrap();
    let mut next = 0u32;
    for _ in 0..rows {
        let row: Vec<f32> = (0..1024).map(|i| (next + i) as f32).collect();
        next = next.wrapping_add(1024);
        file.write_all(&crate::util::f32_le(&row)).unwrap();
    }
    file.flush().unwrap();
    path
}

#[cfg(unix)]
#[test]
fn a_signal_before_the_commit_leaves_no_object_of_any_output() {
    let Some(moto) = Moto::start() else { return };
    moto.bucket("out");
    let dir = tempfile::tempdir().unwrap();
    // Two outputs of 48 MiB: six parts each.
    big_input(dir.path(), 24 << 10);
    let args = ["split", "-a", "0", "--parts", "2", "big.npy"];
    let args = [&args[..], &["-o", "s3://out/p{part}.npy"]].concat();
    // The first output is written whole (its upload waiting for the commit), the second
    // under way.
    let mut child = moto.sending(dir.path(), &args, "/out/p1.npy");
    // SAFETY: a plain kill(2) of the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert_eq!(crate::util::killed_by(status), Some(libc::SIGTERM));
    assert!(moto.keys("out").is_empty(), "{:?}", moto.keys("out"));
    assert!(moto.uploads("out").is_empty(), "{:?}", moto.uploads("out"));
}

/// A signal while the commit completes the uploads, one after another (a proxy holds the
/// second output's completion 2 s, the first's done): it waits for the last completion, as
/// a local set's renames do, so that the run leaves every output or none. Before, the
/// handler aborted the second upload under its completion: the first output in place, the
/// second not, and nothing said which.
#[cfg(unix)]
#[test]
fn a_signal_during_the_completions_waits_for_them_all() {
    use crate::workers_parts::{Proxy, Verdict, port_of};
    use std::sync::atomic::{AtomicBool, Ordering};
    let Some(moto) = Moto::start() else { return };
    moto.bucket("out");
    let dir = tempfile::tempdir().unwrap();
    let held = std::sync::Arc::new(AtomicBool::new(false));
    let seen = held.clone();
    let rule = move |head: &str| match head.starts_with("POST /out/r1.safetensors?uploadId=") {
        true => {
            seen.store(true, Ordering::SeqCst);
            Verdict::Delay(std::time::Duration::from_secs(2))
        }
        false => Verdict::Forward,
    };
    let proxy = Proxy::start(port_of(&moto), std::sync::Arc::new(rule));
    let mut args = rank_split("2");
    args.extend(["-q", "-o", "s3://out/r{rank}.safetensors"].map(str::to_string));
    let mut child = std::process::Command::new(crate::util::bin())
        .current_dir(dir.path())
        .envs(proxy.env(&moto))
        .args(&args)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while !held.load(Ordering::SeqCst) {
        assert!(start.elapsed().as_secs() < 60, "no second completion");
        assert!(child.try_wait().unwrap().is_none(), "tjoin ended first");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(moto.keys("out").contains(&"r0.safetensors".to_string()));
    // SAFETY: a plain kill(2) of the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    // Killed by the signal once the commit is done, or done first and exited with 0: every
    // output is in place either way.
    let killed = crate::util::killed_by(status) == Some(libc::SIGTERM);
    assert!(killed || status.success(), "{status:?}");
    assert_eq!(moto.keys("out"), ["r0.safetensors", "r1.safetensors"]);
    assert!(moto.uploads("out").is_empty(), "{:?}", moto.uploads("out"));
    split_into(
        &mut moto.tjoin(),
        dir.path(),
        &rank_split("2"),
        "local{rank}.safetensors",
    );
    for rank in 0..2 {
        let local = std::fs::read(dir.path().join(format!("local{rank}.safetensors")));
        let object = moto.get("out", &format!("r{rank}.safetensors")).unwrap();
        assert!(object == local.unwrap(), "r{rank}.safetensors differs");
    }
}

#[cfg(unix)]
#[test]
fn a_completion_refused_after_another_names_the_objects_in_place_and_those_not() {
    let Some(moto) = Moto::start() else { return };
    moto.bucket("out");
    let dir = tempfile::tempdir().unwrap();
    big_input(dir.path(), 24 << 10);
    let args = ["split", "-n", "-a", "0", "--parts", "2", "big.npy"];
    let args = [&args[..], &["-o", "s3://out/p{part}.npy"]].concat();
    let child = moto.sending(dir.path(), &args, "/out/p0.npy");
    // Another writer creates the second key while the parts go: its completion, a
    // conditional create, is refused after the first one's.
    moto.put("out", "p1.npy", b"theirs");
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    crate::util::assert_mentions(
        &stderr,
        &[
            "cannot upload s3://out/p1.npy",
            "exists",
            "in place already (completed before it): s3://out/p0.npy",
            "not written (their uploads aborted, their keys as they were): s3://out/p1.npy",
        ],
    );
    assert_eq!(moto.get("out", "p1.npy").unwrap(), b"theirs");
    assert!(moto.uploads("out").is_empty(), "{:?}", moto.uploads("out"));
    let requests = moto.requests();
    let refused = |r: &String| r.starts_with("POST /out/p1.npy?") && r.ends_with(" 412");
    assert!(requests.iter().any(refused), "{requests:#?}");
    // The object in place is the split's first part.
    let input = std::fs::read(dir.path().join("big.npy")).unwrap();
    let header = crate::util::npy_header("<f4", &[24 << 10, 1024], false).len();
    let data = &input[header..header + (48 << 20)];
    let want = crate::util::npy_bytes("<f4", &[12 << 10, 1024], false, data);
    assert!(moto.get("out", "p0.npy").unwrap() == want);
}

#[cfg(target_os = "linux")]
#[test]
fn eight_outputs_of_64_mib_upload_one_after_another_in_bounded_memory() {
    let Some(moto) = Moto::start() else { return };
    moto.bucket("out");
    let dir = tempfile::tempdir().unwrap();
    // 512 MiB, cut into eight parts of 64 MiB.
    let rows = 128 << 10;
    big_input(dir.path(), rows);
    let tmp = tempfile::tempdir().unwrap();
    let unwritable = tmp.path().join("missing");
    let args = ["split", "-a", "0", "--parts", "8", "big.npy"];
    let args = [&args[..], &["-o", "s3://out/p{part}.npy", "-n"]].concat();
    let (code, stderr, peak_kib) =
        crate::remote::run_measured(&moto.env(), dir.path(), &unwritable, &args);
    assert_eq!(code, 0, "{stderr}");
    assert!(!unwritable.exists(), "nothing staged in TMPDIR");
    // One upload's memory at a time (the part filled, 8 MiB, and at most 64 MiB in
    // flight), and the parts the object before it may still have in flight (settled before
    // the next object begins), whatever the number of outputs: eight uploads in lockstep
    // would hold eight of them. A debug build peaked at 99-107 MiB.
    let bound_kib = 150 << 10;
    assert!(
        peak_kib < bound_kib,
        "peak {peak_kib} KiB, over {bound_kib}"
    );
    let input = std::fs::read(dir.path().join("big.npy")).unwrap();
    let header = crate::util::npy_header("<f4", &[rows, 1024], false).len();
    for part in 0..8 {
        let at = header + part * (64 << 20);
        let data = &input[at..at + (64 << 20)];
        let want = crate::util::npy_bytes("<f4", &[rows / 8, 1024], false, data);
        let got = moto.get("out", &format!("p{part}.npy")).unwrap();
        assert!(got == want, "p{part}.npy differs");
    }
    assert!(moto.uploads("out").is_empty());
}

/// Many small outputs (64 of 8 MiB, one part each) to a store slower than the input (a
/// proxy holds every part 150 ms): the parts of at most two objects are in flight, so that
/// memory does not grow with the number of outputs. Before, each object's parts were left in
/// flight as the next began, and piled up.
#[cfg(target_os = "linux")]
#[test]
fn many_small_outputs_keep_at_most_two_objects_parts_in_flight() {
    use crate::workers_parts::{Proxy, Verdict, port_of};
    let Some(moto) = Moto::start() else { return };
    moto.bucket("out");
    let dir = tempfile::tempdir().unwrap();
    let rows = 128 << 10;
    big_input(dir.path(), rows);
    let slow = |head: &str| match head.starts_with("PUT ") && head.contains("partNumber=") {
        true => Verdict::Delay(std::time::Duration::from_millis(150)),
        false => Verdict::Forward,
    };
    let proxy = Proxy::start(port_of(&moto), std::sync::Arc::new(slow));
    let tmp = tempfile::tempdir().unwrap();
    let args = ["split", "-a", "0", "--parts", "64", "big.npy"];
    let args = [&args[..], &["-o", "s3://out/p{part}.npy"]].concat();
    let (code, stderr, peak_kib) =
        crate::remote::run_measured(&proxy.env(&moto), dir.path(), tmp.path(), &args);
    assert_eq!(code, 0, "{stderr}");
    // 52 MiB measured (debug build); 149 MiB with every object's parts left in flight.
    let bound_kib = 100 << 10;
    assert!(
        peak_kib < bound_kib,
        "peak {peak_kib} KiB, over {bound_kib}"
    );
    assert_eq!(moto.keys("out").len(), 64);
    assert!(moto.uploads("out").is_empty());
}

/// `--part-size` sizes a split's uploads as it does a join's (and a GGUF split's), and is
/// refused when no output is an object. Before, `tjoin split` had no such flag. (Unix: it
/// counts parts as `workers_parts` does.)
#[cfg(unix)]
#[test]
fn a_split_and_a_gguf_split_upload_in_the_part_size_asked() {
    use crate::workers_parts::parts_taken;
    let Some(moto) = Moto::start() else { return };
    moto.bucket("out");
    let dir = tempfile::tempdir().unwrap();
    // 24 MiB of float32 and a header: two outputs of 12 MiB, two parts of 6 MiB and a bit.
    let rows: u64 = 6 << 10;
    let data: Vec<f32> = (0..rows * 1024).map(|i| i as f32).collect();
    let mut npy = crate::util::npy_header("<f4", &[rows, 1024], false);
    npy.extend(crate::util::f32_le(&data));
    std::fs::write(dir.path().join("big.npy"), &npy).unwrap();
    let split = ["split", "-a", "0", "--parts", "2", "big.npy"];
    let args = [
        &split[..],
        &["-o", "s3://out/p{part}.npy", "--part-size", "6MiB", "-q"],
    ]
    .concat();
    moto.tjoin()
        .current_dir(dir.path())
        .args(&args)
        .assert()
        .success();
    let local = [&split[..], &["-o", "p{part}.npy", "-q"]].concat();
    moto.tjoin()
        .current_dir(dir.path())
        .args(&local)
        .assert()
        .success();
    for part in ["p0.npy", "p1.npy"] {
        let want = std::fs::read(dir.path().join(part)).unwrap();
        assert!(moto.get("out", part).unwrap() == want, "{part} differs");
        // 12 MiB and a header: three parts of 6 MiB (two of 8 MiB by default).
        assert_eq!(
            parts_taken(&moto, part),
            3,
            "{part}: {:#?}",
            moto.requests()
        );
    }
    let gguf = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/gguf/model.gguf");
    let gguf = gguf.to_str().unwrap();
    let args = [
        "split",
        "--max-tensors",
        "4",
        gguf,
        "-o",
        "s3://out/g/",
        "--part-size",
    ];
    moto.tjoin()
        .current_dir(dir.path())
        .args(args)
        .args(["5MiB", "-q"])
        .assert()
        .success();
    assert_eq!(
        moto.keys("out")
            .iter()
            .filter(|k| k.starts_with("g/"))
            .count(),
        3
    );
    for local in [
        &local[..],
        &["split", "--max-tensors", "4", gguf, "-o", "l/"],
    ] {
        let args = [local, &["--part-size", "6MiB"]].concat();
        let stderr = fails(&mut moto.tjoin(), dir.path(), &args, 2);
        crate::util::assert_mentions(&stderr, &["--part-size", "object storage"]);
    }
}

/// A split downloads an input in object storage into `TMPDIR` (the splitter does not read by
/// range): a `TMPDIR` that cannot hold it is named, with the fix. Before, the message was
/// "No such file or directory" alone, as if the object were missing.
#[test]
fn a_split_of_an_object_names_a_tmpdir_it_cannot_use() {
    let Some(moto) = Moto::start() else { return };
    moto.bucket("src");
    let npy = crate::util::npy_bytes("<f4", &[4, 2], false, &crate::util::f32_le(&[1.0; 8]));
    moto.put("src", "a.npy", &npy);
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let args = [
        "split",
        "-a",
        "0",
        "--parts",
        "2",
        "s3://src/a.npy",
        "-o",
        "p{part}.npy",
    ];
    let run = moto
        .tjoin()
        .current_dir(dir.path())
        .env("TMPDIR", &missing)
        .args(args)
        .assert()
        .code(1);
    let stderr = String::from_utf8_lossy(&run.get_output().stderr);
    crate::util::assert_mentions(&stderr, &["s3://src/a.npy", "TMPDIR", "missing"]);
}
