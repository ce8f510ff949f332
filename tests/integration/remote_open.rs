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
    safetensors_of(&[(name, &[values.len() as u64], values)])
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
pub(crate) fn peak_kib(mut command: std::process::Command) -> (u64, bool) {
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

/// A safetensors file of float32 tensors, each `(name, shape, values)`.
fn safetensors_of(tensors: &[(&str, &[u64], &[f32])]) -> Vec<u8> {
    let mut entries = Vec::new();
    let mut data = Vec::new();
    for (name, shape, values) in tensors {
        let start = data.len();
        data.extend_from_slice(&f32_le(values));
        let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
        entries.push(format!(
            "\"{name}\":{{\"dtype\":\"F32\",\"shape\":[{}],\"data_offsets\":[{start},{}]}}",
            dims.join(","),
            data.len()
        ));
    }
    let mut header = format!("{{{}}}", entries.join(",")).into_bytes();
    while header.len() % 8 != 0 {
        header.push(b' ');
    }
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(&header);
    file.extend_from_slice(&data);
    file
}

/// A command of tjoin against `moto` in `dir` that cannot make a temporary file (its
/// `TMPDIR` does not exist): a download of an object into one would fail.
fn without_temporary_files(moto: &Moto, dir: &Path) -> assert_cmd::Command {
    let mut command = moto.tjoin();
    command
        .current_dir(dir)
        .env("TMPDIR", dir.join("no-such-folder"));
    command
}

#[test]
fn an_npz_is_planned_from_ranges_and_joined_as_its_local_copy() {
    let Some(moto) = Moto::start() else { return };
    moto.bucket("bkt");
    let dir = tempfile::tempdir().unwrap();
    // 2 MiB of data in `big`, then `small`: stored, and deflated (--compress).
    // Values that deflate little (a linear congruential sequence), so that the deflated
    // archive is large too.
    let mut state = 12345u32;
    let big: Vec<f32> = (0..512 * 1024)
        .map(|_| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (state >> 8) as f32
        })
        .collect();
    let file = safetensors_of(&[
        ("big", &[512, 1024], &big),
        ("small", &[3], &[1.0, 2.0, 3.0]),
    ]);
    std::fs::write(dir.path().join("m.safetensors"), &file).unwrap();
    let mut sizes = Vec::new();
    for (name, extra) in [("stored.npz", None), ("deflated.npz", Some("--compress"))] {
        let mut args = vec!["m.safetensors", "-o", name];
        args.extend(extra);
        crate::util::succeeds(dir.path(), &args);
        let bytes = std::fs::read(dir.path().join(name)).unwrap();
        assert!(bytes.len() > 1 << 20, "{name}: {}", bytes.len());
        sizes.push(bytes.len());
        moto.put("bkt", name, &bytes);
    }
    for name in ["stored.npz", "deflated.npz"] {
        moto.clear_requests();
        let url = format!("s3://bkt/{name}");
        let run = without_temporary_files(&moto, dir.path())
            .args([url.as_str(), "--dry-run"])
            .assert()
            .success();
        let text = String::from_utf8_lossy(&run.get_output().stdout).into_owned();
        crate::util::assert_mentions(&text, &["big", "small", "512"]);
        // The first read (the head: the first member's local and .npy header), the last
        // 64 KiB (the archive's end and directory, the second member's headers); deflated,
        // the first compressed bytes of the second member when they are not in either.
        let requests = gets(&moto);
        eprintln!("{name} --dry-run: {} GETs", requests.len());
        assert!(requests.len() <= 3, "{name}: {requests:#?}\n{text}");
    }
    // The join, data by range (a deflated member inflated from its ranged stream), is the
    // local copies' byte for byte.
    let join = |inputs: [&str; 2], out: &str| {
        moto.tjoin()
            .current_dir(dir.path())
            .args(["-a", "0", "--join-identical"])
            .args(inputs)
            .args(["-o", out])
            .assert()
            .success();
        std::fs::read(dir.path().join(out)).unwrap()
    };
    let local = join(["stored.npz", "deflated.npz"], "local.npz");
    let remote = join(
        ["s3://bkt/stored.npz", "s3://bkt/deflated.npz"],
        "remote.npz",
    );
    assert!(
        local == remote,
        "the remote join differs from the local one"
    );
    // One member selected from each: its header read, the other's not inflated.
    join(
        ["s3://bkt/deflated.npz:small", "s3://bkt/stored.npz:small"],
        "small.npy",
    );
    let small = crate::util::read_npy(&dir.path().join("small.npy"));
    assert_eq!(small.shape, [6]);
    assert_eq!(small.data, f32_le(&[1.0, 2.0, 3.0, 1.0, 2.0, 3.0]));
}

const BIN4: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/remote/bin4");

#[test]
fn a_4_shard_bin_set_is_planned_from_ranges_and_joined_as_its_local_copy() {
    let Some(moto) = Moto::start() else { return };
    moto.bucket("bkt");
    let dir = tempfile::tempdir().unwrap();
    let mut total = 0;
    for entry in std::fs::read_dir(BIN4).unwrap() {
        let entry = entry.unwrap();
        let bytes = std::fs::read(entry.path()).unwrap();
        total += bytes.len();
        let key = format!("bin4/{}", entry.file_name().to_str().unwrap());
        moto.put("bkt", &key, &bytes);
    }
    assert!(total > 4 << 20, "{total}");
    let index = "s3://bkt/bin4/pytorch_model.bin.index.json";
    moto.clear_requests();
    let run = without_temporary_files(&moto, dir.path())
        .args([index, "--dry-run"])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&run.get_output().stdout).into_owned();
    crate::util::assert_mentions(&text, &["8 tensors", "4 shards"]);
    // The index; per shard its first read (the head: its pickle is in it) and one read of
    // its last 64 KiB (its archive's end, directory and last members' local headers); never
    // its 1 MiB of data.
    let requests = gets(&moto);
    eprintln!("4-shard .bin --dry-run: {} GETs", requests.len());
    assert!(requests.len() <= 1 + 4 * 2, "{requests:#?}\n{text}");
    let shard_gets = |n: usize| {
        let key = format!("GET /bkt/bin4/pytorch_model-0000{n}-of-00004.bin ");
        requests.iter().filter(|r| r.starts_with(&key)).count()
    };
    assert!(
        (1..=4).all(|n| (1..=2).contains(&shard_gets(n))),
        "{requests:#?}"
    );
    let local_index = format!("{BIN4}/pytorch_model.bin.index.json");
    let join = |input: &str, out: &str| {
        moto.tjoin()
            .current_dir(dir.path())
            .args([input, "-o", out])
            .assert()
            .success();
        std::fs::read(dir.path().join(out)).unwrap()
    };
    let local = join(&local_index, "local.safetensors");
    let remote = join(index, "remote.safetensors");
    assert!(
        local == remote,
        "the remote set's output differs from the local one"
    );
}

#[test]
fn pt_objects_zip_legacy_and_strided_convert_as_their_local_copies() {
    let Some(moto) = Moto::start() else { return };
    moto.bucket("bkt");
    let dir = tempfile::tempdir().unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/pytorch");
    // Whether the run needs a temporary file: a strided view's elements are gathered into
    // the spill file, as a local file's are.
    for (name, expected, gathers) in [
        ("dtypes.pt", "dtypes.expected.safetensors", false),
        (
            "dtypes_legacy.pt",
            "dtypes_legacy.expected.safetensors",
            false,
        ),
        ("views.pt", "views.expected.safetensors", true),
        ("views_legacy.pt", "views.expected.safetensors", true),
    ] {
        moto.put("bkt", name, &std::fs::read(fixtures.join(name)).unwrap());
        // Read by range: no temporary file is made but the spill of a gathered view (a
        // download would need one).
        let mut command = without_temporary_files(&moto, dir.path());
        if gathers {
            command.env_remove("TMPDIR");
        }
        command
            .args([&format!("s3://bkt/{name}"), "-o", "out.safetensors"])
            .assert()
            .success();
        let out = std::fs::read(dir.path().join("out.safetensors")).unwrap();
        assert!(
            out == std::fs::read(fixtures.join(expected)).unwrap(),
            "{name}"
        );
        std::fs::remove_file(dir.path().join("out.safetensors")).unwrap();
    }
}

#[test]
fn a_hostile_npz_object_is_refused_by_name_in_few_gets() {
    let Some(moto) = Moto::start() else { return };
    moto.bucket("bkt");
    let dir = tempfile::tempdir().unwrap();
    let file = safetensors_of(&[("a", &[3], &[1.0, 2.0, 3.0]), ("b", &[2], &[4.0, 5.0])]);
    std::fs::write(dir.path().join("m.safetensors"), &file).unwrap();
    crate::util::succeeds(dir.path(), &["m.safetensors", "-o", "x.npz"]);
    let good = std::fs::read(dir.path().join("x.npz")).unwrap();
    let le16 = |at: usize| u16::from_le_bytes([good[at], good[at + 1]]) as usize;
    let end = good.len() - 22;
    let directory = u32::from_le_bytes(good[end + 16..end + 20].try_into().unwrap()) as usize;
    let second =
        directory + 46 + le16(directory + 28) + le16(directory + 30) + le16(directory + 32);
    let patched = |at: usize, value: &[u8]| {
        let mut bytes = good.clone();
        bytes[at..at + value.len()].copy_from_slice(value);
        bytes
    };
    let len = good.len();
    let cases = [
        // The end record counts 65534 members in a directory of two.
        (
            "count",
            patched(end + 8, &[0xfe, 0xff, 0xfe, 0xff]),
            "its end record counts 65534 members".to_string(),
        ),
        // The directory lies past the end.
        (
            "directory",
            patched(end + 16, &0xfff0_0000u32.to_le_bytes()),
            "lies outside the file".to_string(),
        ),
        // The first member's local header lies past the end.
        (
            "local",
            patched(directory + 42, &0x7fff_0000u32.to_le_bytes()),
            format!("at offset 2147418112, past the end of the file ({len} bytes"),
        ),
        // The second member's entry points at the first's local header.
        (
            "overlap",
            patched(second + 42, &good[directory + 42..directory + 46]),
            "named a.npy in its local header".to_string(),
        ),
    ];
    for (name, bytes, reason) in cases {
        moto.put("bkt", &format!("{name}.npz"), &bytes);
        moto.clear_requests();
        let url = format!("s3://bkt/{name}.npz");
        let run = without_temporary_files(&moto, dir.path())
            .args([url.as_str(), "--dry-run"])
            .timeout(std::time::Duration::from_secs(60))
            .assert()
            .failure();
        let stderr = String::from_utf8_lossy(&run.get_output().stderr).into_owned();
        let named = format!("input 1 ({url}) is not a valid .npz file");
        crate::util::assert_mentions(&stderr, &[named.as_str(), reason.as_str()]);
        // The head's first read and at most the archive's tail: the refusal reads no more.
        let requests = gets(&moto);
        assert!(requests.len() <= 2, "{name}: {requests:#?}\n{stderr}");
    }
}

/// `bytes`, a ZIP archive without a comment, with its central directory's entries in the
/// order `order` (indexes into the directory's order).
fn reorder_directory(bytes: &[u8], order: &[usize]) -> Vec<u8> {
    let le16 = |at: usize| u16::from_le_bytes([bytes[at], bytes[at + 1]]) as usize;
    let end = bytes.len() - 22;
    let start = u32::from_le_bytes(bytes[end + 16..end + 20].try_into().unwrap()) as usize;
    let mut entries = Vec::new();
    let mut at = start;
    while at < end {
        let len = 46 + le16(at + 28) + le16(at + 30) + le16(at + 32);
        entries.push(&bytes[at..at + len]);
        at += len;
    }
    assert_eq!(entries.len(), order.len());
    let mut out = bytes[..start].to_vec();
    for &i in order {
        out.extend_from_slice(entries[i]);
    }
    out.extend_from_slice(&bytes[end..]);
    out
}

#[test]
fn an_npz_directory_out_of_order_costs_no_more_gets_than_in_order() {
    let Some(moto) = Moto::start() else { return };
    moto.bucket("bkt");
    let dir = tempfile::tempdir().unwrap();
    // 64 members of 8 KiB: 512 KiB, eight members to a 64 KiB window.
    let values: Vec<Vec<f32>> = (0..64).map(|i| vec![i as f32; 2048]).collect();
    let names: Vec<String> = (0..64).map(|i| format!("t{i:02}")).collect();
    let tensors: Vec<(&str, &[u64], &[f32])> = names
        .iter()
        .zip(&values)
        .map(|(n, v)| (n.as_str(), &[2048u64][..], v.as_slice()))
        .collect();
    std::fs::write(dir.path().join("m.safetensors"), safetensors_of(&tensors)).unwrap();
    crate::util::succeeds(dir.path(), &["m.safetensors", "-o", "x.npz"]);
    let good = std::fs::read(dir.path().join("x.npz")).unwrap();
    // Back and forth between the archive's first half and its last.
    let order: Vec<usize> = (0..32).flat_map(|i| [i, 63 - i]).collect();
    let shuffled = reorder_directory(&good, &order);
    moto.put("bkt", "good.npz", &good);
    moto.put("bkt", "shuffled.npz", &shuffled);
    let mut counts = Vec::new();
    for name in ["good.npz", "shuffled.npz"] {
        moto.clear_requests();
        let url = format!("s3://bkt/{name}");
        let run = without_temporary_files(&moto, dir.path())
            .args([url.as_str(), "--dry-run"])
            .assert()
            .success();
        let text = String::from_utf8_lossy(&run.get_output().stdout).into_owned();
        crate::util::assert_mentions(&text, &["t00", "t63"]);
        counts.push(gets(&moto).len());
    }
    eprintln!("GETs in order, shuffled: {counts:?}");
    assert!(counts[0] <= 16, "{counts:?}");
    assert!(counts[1] <= counts[0], "{counts:?}");
    // The tensors stay in the directory's order: t63 second.
    let run = without_temporary_files(&moto, dir.path())
        .args(["s3://bkt/shuffled.npz", "--dry-run"])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&run.get_output().stdout).into_owned();
    let (first, last) = (text.find("t00").unwrap(), text.find("t63").unwrap());
    assert!(first < last && text.find("t01").unwrap() > last, "{text}");
}
