//! Remote inputs opened by the input stage itself, against a real S3 server (moto's,
//! `moto.rs`): headers parsed from ranged reads, counted in moto's access log (a dry run, a
//! `--like` and a split's dry run of a 100-shard set cost one GET for the index and one per
//! shard, no HEAD, no LIST); `--like URL` and `--files-from URL`; data read by range in
//! bounded pieces (the peak of a 256 MiB axis-0 join).

use std::path::Path;

use crate::moto::Moto;
use crate::util::{f32_le, write_npy};

/// A safetensors file of one float32 tensor `name` of `values`.
fn safetensors(name: &str, values: &[f32]) -> Vec<u8> {
    let data = f32_le(values);
    let mut header = format!(
        "{{\"{name}\":{{\"dtype\":\"F32\",\"shape\":[{}],\"data_offsets\":[0,{}]}}}}",
        values.len(),
        data.len()
    )
    .into_bytes();
    while header.len() % 8 != 0 {
        header.push(b' ');
    }
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(&header);
    file.extend_from_slice(&data);
    file
}

/// Writes a sharded set of `shards` tiny shards (tensor `w{i}` in the i-th) and its index
/// into `folder`, and uploads each file under `prefix` of `bucket`; its bytes in all.
fn sharded_set(moto: &Moto, (bucket, prefix): (&str, &str), folder: &Path, shards: usize) -> u64 {
    std::fs::create_dir_all(folder).unwrap();
    let mut weight_map = Vec::new();
    let mut total = 0;
    for i in 0..shards {
        let file = format!("model-{:05}-of-{shards:05}.safetensors", i + 1);
        let bytes = safetensors(&format!("w{i}"), &[i as f32, 1.0]);
        std::fs::write(folder.join(&file), &bytes).unwrap();
        moto.put(bucket, &format!("{prefix}/{file}"), &bytes);
        weight_map.push(format!("\"w{i}\":\"{file}\""));
        total += bytes.len() as u64;
    }
    let index = format!(
        "{{\"metadata\":{{\"total_size\":{}}},\"weight_map\":{{{}}}}}",
        shards * 8,
        weight_map.join(",")
    );
    std::fs::write(folder.join("model.safetensors.index.json"), &index).unwrap();
    moto.put(
        bucket,
        &format!("{prefix}/model.safetensors.index.json"),
        index.as_bytes(),
    );
    total + index.len() as u64
}

/// The requests moto answered since the last clear, by method; panics on any but GET.
fn gets(moto: &Moto) -> Vec<String> {
    let requests = moto.requests();
    for request in &requests {
        assert!(request.starts_with("GET "), "not a GET: {requests:#?}");
    }
    requests
}

#[test]
fn headers_of_a_100_shard_set_cost_one_get_per_file() {
    let Some(moto) = Moto::start() else { return };
    moto.bucket("bkt");
    let dir = tempfile::tempdir().unwrap();
    let bytes = sharded_set(&moto, ("bkt", "set"), &dir.path().join("set"), 100);
    let index = "s3://bkt/set/model.safetensors.index.json";
    let local = dir.path().join("set/model.safetensors.index.json");
    let local = local.to_str().unwrap();
    let runs: [(&str, Vec<&str>); 3] = [
        ("--dry-run", vec![index, "--dry-run"]),
        (
            "--like",
            vec![
                "--like",
                index,
                local,
                "-o",
                "like.safetensors",
                "--dry-run",
            ],
        ),
        (
            "split --dry-run",
            vec![
                "split",
                index,
                "-a",
                "0",
                "--parts",
                "2",
                "-o",
                "part-{part}/",
                "--dry-run",
            ],
        ),
    ];
    for (what, args) in runs {
        moto.clear_requests();
        let run = moto.tjoin().current_dir(dir.path()).args(&args).assert();
        let run = run.success();
        let text = String::from_utf8_lossy(&run.get_output().stdout).into_owned();
        let requests = gets(&moto);
        assert_eq!(requests.len(), 101, "{what}: {requests:#?}\n{text}");
        assert!(
            requests.iter().all(|r| !r.contains("list-type")),
            "{what} listed the prefix: {requests:#?}"
        );
        let index_gets = requests
            .iter()
            .filter(|r| r.starts_with("GET /bkt/set/model.safetensors.index.json "))
            .count();
        assert_eq!(index_gets, 1, "{what}: {requests:#?}");
    }
    // Every file is smaller than the first read: the set is read once, whole.
    assert!(bytes < 100 * 1024, "{bytes}");
}

#[test]
fn a_header_longer_than_the_first_read_costs_one_more_get() {
    let Some(moto) = Moto::start() else { return };
    moto.bucket("bkt");
    // 6,000 tensors of one float each, then one of 20 MB: a header of about 400 KiB, past
    // the first 256 KiB, before data that is not read.
    let big = 5_000_000;
    let mut entries: Vec<String> = (0..6000)
        .map(|i| {
            format!(
                "\"a_rather_long_tensor_name_{i:05}\":{{\"dtype\":\"F32\",\"shape\":[1],\
                 \"data_offsets\":[{},{}]}}",
                4 * i,
                4 * i + 4
            )
        })
        .collect();
    entries.push(format!(
        "\"big\":{{\"dtype\":\"F32\",\"shape\":[{big}],\"data_offsets\":[24000,{}]}}",
        24000 + 4 * big
    ));
    let mut header = format!("{{{}}}", entries.join(",")).into_bytes();
    while header.len() % 8 != 0 {
        header.push(b' ');
    }
    assert!(header.len() > 256 << 10, "{}", header.len());
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(&header);
    file.extend_from_slice(&f32_le(&vec![1.5; 6000 + big]));
    moto.put("bkt", "wide.safetensors", &file);
    moto.clear_requests();
    let run = moto
        .tjoin()
        .args(["s3://bkt/wide.safetensors", "--dry-run"])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&run.get_output().stdout).into_owned();
    assert!(text.contains("a_rather_long_tensor_name_05999"), "{text}");
    let requests = gets(&moto);
    assert_eq!(requests.len(), 2, "{requests:#?}");
}

#[test]
fn like_and_files_from_read_objects() {
    let Some(moto) = Moto::start() else { return };
    moto.bucket("bkt");
    let dir = tempfile::tempdir().unwrap();
    sharded_set(&moto, ("bkt", "set"), &dir.path().join("set"), 3);
    let values = |n: usize| f32_le(&(0..n).map(|v| v as f32).collect::<Vec<_>>());
    write_npy(&dir.path().join("a.npy"), "<f4", &[2, 3], false, &values(6));
    write_npy(&dir.path().join("b.npy"), "<f4", &[1, 3], false, &values(3));
    for name in ["a.npy", "b.npy"] {
        let bytes = std::fs::read(dir.path().join(name)).unwrap();
        moto.put("bkt", &format!("npy/{name}"), &bytes);
    }
    moto.put(
        "bkt",
        "lists/inputs.txt",
        b"s3://bkt/npy/a.npy\ns3://bkt/npy/b.npy\n",
    );
    std::fs::write(dir.path().join("inputs.txt"), "a.npy\nb.npy\n").unwrap();
    let join = |args: &[&str], out: &str| {
        moto.tjoin()
            .current_dir(dir.path())
            .args(args)
            .args(["-o", out])
            .assert()
            .success();
        std::fs::read(dir.path().join(out)).unwrap()
    };
    let local = join(&["-a", "0", "--files-from", "inputs.txt"], "local.npy");
    let remote = join(
        &["-a", "0", "--files-from", "s3://bkt/lists/inputs.txt"],
        "remote.npy",
    );
    assert!(
        local == remote,
        "--files-from URL differs from the local list"
    );
    // --like an index by its URL: the set's own shapes, so the merge is checked by them.
    let index = "s3://bkt/set/model.safetensors.index.json";
    let like = join(&["--like", index, index], "like.safetensors");
    let plain = join(&[index], "plain.safetensors");
    assert!(like == plain);
    // A --like that does not match is refused, naming the URL.
    let run = moto
        .tjoin()
        .current_dir(dir.path())
        .args(["--like", "s3://bkt/npy/a.npy", index, "-o", "x.safetensors"])
        .assert()
        .failure();
    let stderr = String::from_utf8_lossy(&run.get_output().stderr).into_owned();
    crate::util::assert_mentions(&stderr, &["s3://bkt/npy/a.npy"]);
    // A list that names no object says which list and which entry.
    moto.put(
        "bkt",
        "lists/bad.txt",
        b"s3://bkt/npy/a.npy\ns3://bkt/npy/nope.npy\n",
    );
    let run = moto
        .tjoin()
        .current_dir(dir.path())
        .args([
            "-a",
            "0",
            "--files-from",
            "s3://bkt/lists/bad.txt",
            "-o",
            "x.npy",
        ])
        .assert()
        .failure();
    let stderr = String::from_utf8_lossy(&run.get_output().stderr).into_owned();
    crate::util::assert_mentions(&stderr, &["s3://bkt/npy/nope.npy", "input 2"]);
}

/// The peak resident memory of `command`'s run, in KiB (its `VmHWM`, read every 2 ms until
/// it exits: the high-water mark of its own memory after exec, where `wait4`'s figure would
/// count this test process's memory, which the child shares until it execs), and whether
/// it succeeded.
#[cfg(target_os = "linux")]
fn peak_kib(mut command: std::process::Command) -> (u64, bool) {
    let mut child = command.spawn().unwrap();
    let status = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    loop {
        let text = std::fs::read_to_string(&status).unwrap_or_default();
        let hwm = text
            .lines()
            .find_map(|line| line.strip_prefix("VmHWM:"))
            .and_then(|kib| kib.trim().trim_end_matches("kB").trim().parse().ok());
        peak = peak.max(hwm.unwrap_or(0));
        if let Some(exit) = child.try_wait().unwrap() {
            return (peak, exit.success());
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

#[cfg(target_os = "linux")]
#[test]
fn a_256_mib_remote_join_is_read_in_bounded_pieces() {
    let Some(moto) = Moto::start() else { return };
    moto.bucket("bkt");
    let dir = tempfile::tempdir().unwrap();
    let values: Vec<u8> = (0..64u32 << 20)
        .flat_map(|v| (v as f32).to_le_bytes())
        .collect();
    let half = values.len() / 2;
    for (name, data) in [("a.npy", &values[..half]), ("b.npy", &values[half..])] {
        let rows = (data.len() / 4 / 1024) as u64;
        let bytes = crate::util::npy_bytes("<f4", &[rows, 1024], false, data);
        moto.put("bkt", name, &bytes);
    }
    drop(values);
    moto.clear_requests();
    let mut command = std::process::Command::new(crate::util::bin());
    // Read by range, never copied: no temporary file is made, so none needs to be (a
    // download into an unnamed temporary file would fail here).
    command
        .current_dir(dir.path())
        .envs(moto.env())
        .env("TMPDIR", dir.path().join("no-such-folder"))
        .args([
            "-a",
            "0",
            "s3://bkt/a.npy",
            "s3://bkt/b.npy",
            "-o",
            "out.npy",
        ]);
    let (peak, ok) = peak_kib(command);
    assert!(ok, "the join failed");
    let out = crate::util::read_npy(&dir.path().join("out.npy"));
    assert_eq!(out.shape, [1 << 16, 1024]);
    assert!(peak <= 64 << 10, "peak RSS {peak} KiB, over 64 MiB");
    eprintln!("peak RSS of a 256 MiB remote join: {peak} KiB");
    // Ranged reads of at most 8 MiB.
    let requests = gets(&moto);
    assert!(requests.len() >= 2 * 16, "{requests:#?}");
}
