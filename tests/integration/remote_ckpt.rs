//! Checkpoints in object storage read by range: DCP folders (the default planner's `.distcp`
//! files, FSDP2/DTensor rank files, the HF writer's form) and DeepSpeed ZeRO folders, uploaded
//! to a real S3 server (moto's, `moto.rs`) and converted with a `TMPDIR` that does not exist,
//! so that a download of any object into a temporary file would fail: the output is the
//! local conversion's, byte for byte; a 200 MiB DCP is converted in bounded memory; an object
//! replaced during the read, a chunk whose bytes fail their CRC-32, and a `.distcp` object
//! shorter than its `.metadata` says, are refused.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::moto::Moto;

fn fixture(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(path)
}

/// Uploads every file under `folder` (dot files too, sub-folders as key prefixes) under
/// `prefix`.
fn upload_tree(moto: &Moto, bucket: &str, folder: &Path, prefix: &str) {
    for entry in std::fs::read_dir(folder).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        let key = format!("{prefix}/{name}");
        if entry.path().is_dir() {
            upload_tree(moto, bucket, &entry.path(), &key);
        } else {
            moto.put(bucket, &key, &std::fs::read(entry.path()).unwrap());
        }
    }
}

/// What tjoin writes of `inputs` (paths, or URLs run against `moto`) into `out.safetensors`
/// in a fresh folder; URLs are read with a `TMPDIR` that does not exist.
fn converted(moto: &Moto, inputs: &[String]) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let remote = inputs[0].starts_with("s3://");
    let mut command = if remote {
        let mut command = moto.tjoin();
        command.env("TMPDIR", dir.path().join("no-such-folder"));
        command
    } else {
        crate::util::tjoin()
    };
    let output = command
        .current_dir(dir.path())
        .args(inputs)
        .args(["-o", "out.safetensors"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "tjoin {inputs:?}:\n{stderr}");
    std::fs::read(dir.path().join("out.safetensors")).unwrap()
}

/// The GETs moto answered since the last clear of keys ending with `suffix`.
fn gets_of(moto: &Moto, suffix: &str) -> usize {
    moto.requests()
        .iter()
        .filter(|r| {
            r.starts_with("GET ") && r.split(' ').nth(1).is_some_and(|p| p.ends_with(suffix))
        })
        .count()
}

/// Converts each case (a folder of `root` named as itself, or its files whose names start
/// with `files`) from its local copy and from its copy in S3, and checks that they are the
/// same bytes, and that each remote conversion made at least 2 GETs of `suffix` objects (a
/// head, then ranges) and at most `most`.
fn same_as_local(
    moto: &Moto,
    root: &str,
    cases: &[&str],
    files: Option<&str>,
    (suffix, most): (&str, usize),
) {
    upload_tree(moto, "ckpt", &fixture(root), root);
    let mut gets = Vec::new();
    for case in cases {
        let local = fixture(&format!("{root}/{case}"));
        let names: Vec<String> = match files {
            None => vec![String::new()],
            Some(start) => {
                let mut names: Vec<String> = std::fs::read_dir(&local)
                    .unwrap()
                    .map(|e| e.unwrap().file_name().into_string().unwrap())
                    .filter(|n| n.starts_with(start))
                    .collect();
                names.sort();
                names
            }
        };
        let at =
            |base: String| -> Vec<String> { names.iter().map(|n| format!("{base}/{n}")).collect() };
        let expected = converted(moto, &at(local.display().to_string()));
        moto.clear_requests();
        let got = converted(moto, &at(format!("s3://ckpt/{root}/{case}")));
        assert!(
            got == expected,
            "{root}/{case}: not the local conversion's bytes"
        );
        gets.push(gets_of(moto, suffix));
    }
    eprintln!(
        "{root}: GETs of {suffix} objects: {:?}",
        cases.iter().zip(&gets).collect::<Vec<_>>()
    );
    for (case, gets) in cases.iter().zip(&gets) {
        assert!(
            (2..=most).contains(gets),
            "{root}/{case}: {gets} GETs of {suffix} objects"
        );
    }
}

#[test]
fn dcp_checkpoints_in_s3_convert_by_range_as_their_local_copies() {
    let Some(moto) = Moto::start() else { return };
    moto.bucket("ckpt");
    // The default planner's .distcp files: blocks of rows (FSDP), of columns and of a 2x2
    // mesh (tensor parallel, read through windows), casts, the SAFETENSORS serialization,
    // Megatron-Core's torch_dist folder.
    let cases = [
        "ranks2",
        "ranks3",
        "ranks4",
        "mesh2x2",
        "safetensors_format",
        "megatron",
    ];
    // A few ranged GETs per file: its chunks' archives (their ends, directories and pickles
    // share 64 KiB windows) and their data, never a download of the whole (which these
    // small files would take in one GET too: the missing TMPDIR is what refuses that).
    same_as_local(&moto, "dcp_default", &cases, None, (".distcp", 40));
    // Megatron-Core's `common.pt`, not read, is said to be left out, as of the local folder.
    let dir = tempfile::tempdir().unwrap();
    let output = moto
        .tjoin()
        .current_dir(dir.path())
        .args([
            "s3://ckpt/dcp_default/megatron/",
            "--dry-run",
            "-o",
            "out.safetensors",
        ])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stderr).into_owned()
        + &String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{said}");
    crate::util::assert_mentions(&said, &["left out", "skipped common.pt"]);
    // FSDP2 / DTensor rank files (torch.save archives), and the HF writer's safetensors.
    let cases = ["fsdp2_ws2", "fsdp2_ws4", "mesh2x2", "distribute_ws2"];
    same_as_local(
        &moto,
        "dtensor",
        &cases,
        Some("model_world_size"),
        (".pt", 60),
    );
    let cases = ["rows", "cols", "cube", "mesh2x2"];
    same_as_local(&moto, "dcp", &cases, Some("shard-"), (".safetensors", 40));
}

#[test]
fn deepspeed_checkpoints_in_s3_convert_by_range_as_their_local_copies() {
    let Some(moto) = Moto::start() else { return };
    moto.bucket("ckpt");
    // Named by the folder whose `latest` names the tag, and (the last) by the tag's folder.
    let cases = [
        "s1_bf16_ws2/ckpt",
        "s1_fp32_ws2/ckpt",
        "s1_fp32_ws3/ckpt",
        "s2_bf16_ws2/ckpt",
        "s2_bf16_ws3/ckpt",
        "s2_fp32_ws2/ckpt",
        "s3_bf16_ws2/ckpt",
        "s3_fp32_ws2/ckpt",
        "s3_fp32_ws3/ckpt",
        "untied_s2_fp32_ws2/ckpt",
        "untied_s3_bf16_ws3/ckpt",
        "s3_fp32_ws3/ckpt/global_step1",
    ];
    same_as_local(&moto, "deepspeed", &cases, None, (".pt", 60));
}

/// Rebuilds the 200 MiB checkpoint `fixtures/remote_ckpt/` describes (see its generator)
/// into `folder`: its `.metadata`, and each `.distcp` file from the bytes torch wrote around
/// the chunks' data and the chunks' int32 values (element i of a tensor is i).
fn rebuild_large_dcp(folder: &Path) {
    let described = fixture("remote_ckpt");
    std::fs::create_dir_all(folder).unwrap();
    std::fs::copy(described.join(".metadata"), folder.join(".metadata")).unwrap();
    let text = std::fs::read_to_string(described.join("skeleton.json")).unwrap();
    let skeleton: serde_json::Value = serde_json::from_str(&text).unwrap();
    let numbers = |v: &serde_json::Value| -> Vec<u64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_u64().unwrap())
            .collect()
    };
    for file in skeleton["files"].as_array().unwrap() {
        let mut bytes = Vec::new();
        for segment in file["segments"].as_array().unwrap() {
            if let Some(hex) = segment["literal"].as_str() {
                let pairs = hex.as_bytes().chunks(2);
                bytes.extend(
                    pairs.map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap()),
                );
                continue;
            }
            let (shape, offsets, sizes) = (
                numbers(&segment["shape"]),
                numbers(&segment["offsets"]),
                numbers(&segment["sizes"]),
            );
            for row in offsets[0]..offsets[0] + sizes[0] {
                for col in offsets[1]..offsets[1] + sizes[1] {
                    bytes.extend_from_slice(&((row * shape[1] + col) as i32).to_le_bytes());
                }
            }
        }
        assert_eq!(bytes.len() as u64, file["len"].as_u64().unwrap());
        std::fs::write(folder.join(file["name"].as_str().unwrap()), bytes).unwrap();
    }
}

/// The data of tensor `name` in the safetensors file `file`.
#[cfg(target_os = "linux")]
fn tensor_data<'a>(file: &'a [u8], name: &str) -> &'a [u8] {
    let len = u64::from_le_bytes(file[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&file[8..8 + len]).unwrap();
    let offsets = &header[name]["data_offsets"];
    let (start, end) = (offsets[0].as_u64().unwrap(), offsets[1].as_u64().unwrap());
    &file[8 + len + start as usize..8 + len + end as usize]
}

/// The large checkpoint rebuilt, uploaded under `s3://big/dcp/`, and its local conversion.
fn large_dcp(moto: &Moto, dir: &Path) -> Vec<u8> {
    rebuild_large_dcp(&dir.join("dcp"));
    moto.bucket("big");
    upload_tree(moto, "big", &dir.join("dcp"), "dcp");
    converted(moto, &[dir.join("dcp").display().to_string()])
}

#[cfg(target_os = "linux")]
#[test]
fn a_200_mib_dcp_in_s3_converts_by_range_in_bounded_memory() {
    let Some(moto) = Moto::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let expected = large_dcp(&moto, dir.path());
    // Element i of each tensor is i: w0's rows and w1's columns came back in place.
    for (name, len) in [("w0", 6400 * 4096), ("w1", 4096 * 6400)] {
        let data = tensor_data(&expected, name);
        assert_eq!(data.len(), len * 4);
        for i in [0, 1, 4095, 4096, 6399, 6400, len / 2 + 3, len - 1] {
            let value = i32::from_le_bytes(data[i * 4..i * 4 + 4].try_into().unwrap());
            assert_eq!(value as usize, i, "{name}[{i}]");
        }
    }
    moto.clear_requests();
    let mut command = std::process::Command::new(crate::util::bin());
    command
        .current_dir(dir.path())
        .envs(moto.env())
        .env("TMPDIR", dir.path().join("no-such-folder"))
        .args(["s3://big/dcp/", "-o", "remote.safetensors"]);
    let (peak, ok) = crate::remote_open::peak_kib(command);
    assert!(ok, "the conversion failed");
    let got = std::fs::read(dir.path().join("remote.safetensors")).unwrap();
    assert!(got == expected, "not the local conversion's bytes");
    let gets = gets_of(&moto, ".distcp");
    eprintln!("a 200 MiB DCP from S3: peak RSS {peak} KiB, {gets} GETs of its .distcp files");
    assert!(peak <= 64 << 10, "peak RSS {peak} KiB, over 64 MiB");
    // 200 MiB in ranged GETs of at most 8 MiB, each byte read once: 25 at least; windows
    // of the column blocks (8 MiB each) and the archives' headers add a few.
    assert!((25..=60).contains(&gets), "{gets} GETs of .distcp objects");
}

/// Waits until moto has answered `count` GETs of keys ending with `suffix`.
fn wait_for_gets(moto: &Moto, suffix: &str, count: usize) {
    let start = Instant::now();
    while gets_of(moto, suffix) < count {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "too few GETs of {suffix}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn a_distcp_object_replaced_during_the_read_is_refused() {
    let Some(moto) = Moto::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let expected = large_dcp(&moto, dir.path());
    let original = std::fs::read(dir.path().join("dcp/__1_0.distcp")).unwrap();
    let mut changed = original.clone();
    let last = changed.len() - 100;
    changed[last] ^= 1;
    let mut refused = 0;
    for _ in 0..3 {
        moto.put("big", "dcp/__1_0.distcp", &original);
        let _ = std::fs::remove_file(dir.path().join("out.safetensors"));
        moto.clear_requests();
        let mut command = std::process::Command::new(crate::util::bin());
        command
            .current_dir(dir.path())
            .envs(moto.env())
            .env("TMPDIR", dir.path().join("no-such-folder"))
            .stderr(std::process::Stdio::piped())
            .args(["s3://big/dcp/", "-o", "out.safetensors"]);
        let child = command.spawn().unwrap();
        // Past the headers: the data's ranged reads, each pinned to the ETag the head saw.
        wait_for_gets(&moto, "__1_0.distcp", 4);
        moto.put("big", "dcp/__1_0.distcp", &changed);
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        if output.status.success() {
            let got = std::fs::read(dir.path().join("out.safetensors")).unwrap();
            assert!(
                got == expected,
                "an output that is neither the old one nor refused"
            );
        } else {
            assert_eq!(output.status.code(), Some(1), "{stderr}");
            crate::util::assert_mentions(&stderr, &["s3://big/dcp/__1_0.distcp", "changed"]);
            assert!(
                !dir.path().join("out.safetensors").exists(),
                "a refused run left an output"
            );
            refused += 1;
        }
    }
    assert!(
        refused > 0,
        "the replacement never landed during a read: the test proved nothing"
    );
}

#[test]
fn an_archive_member_that_fails_its_crc_is_refused_when_read_by_range() {
    let Some(moto) = Moto::start() else { return };
    moto.bucket("ckpt");
    upload_tree(&moto, "ckpt", &fixture("dcp_default/ranks2"), "ranks2");
    let original = std::fs::read(fixture("dcp_default/ranks2/__1_0.distcp")).unwrap();
    // In rank 1's file: `embed.weight`'s block of rows (its first chunk, read whole, in
    // pieces), and `mask`'s block of columns (its fourth: a bool tensor [2, 5] in blocks
    // of 3 and 2 columns, read through a window): one byte of its data changed, a wrong
    // output unless its CRC-32 is checked.
    for (chunk, tensor) in [(0, "embed.weight"), (3, "mask")] {
        let mut bytes = original.clone();
        let at = nth_chunk_data(&bytes, chunk);
        bytes[at] ^= 1;
        moto.put("ckpt", "ranks2/__1_0.distcp", &bytes);
        let dir = tempfile::tempdir().unwrap();
        let output = moto
            .tjoin()
            .current_dir(dir.path())
            .env("TMPDIR", dir.path().join("no-such-folder"))
            .args(["s3://ckpt/ranks2/", "-o", "out.safetensors"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{tensor}: {stderr}");
        let file = "s3://ckpt/ranks2/__1_0.distcp";
        crate::util::assert_mentions(&stderr, &[file, tensor, "CRC-32"]);
        assert!(!dir.path().join("out.safetensors").exists());
    }
    // A torch.save file read by range, its tensor's data read whole in pieces.
    let mut bytes = std::fs::read(fixture("remote/bin4/pytorch_model-00001-of-00004.bin")).unwrap();
    let at = nth_chunk_data(&bytes, 0);
    bytes[at] ^= 1;
    moto.put("ckpt", "damaged.bin", &bytes);
    let dir = tempfile::tempdir().unwrap();
    let output = moto
        .tjoin()
        .current_dir(dir.path())
        .args(["s3://ckpt/damaged.bin", "-o", "out.safetensors"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    crate::util::assert_mentions(&stderr, &["s3://ckpt/damaged.bin", "CRC-32"]);
    assert!(!dir.path().join("out.safetensors").exists());
}

#[test]
fn a_distcp_object_shorter_than_its_metadata_says_is_refused_before_any_read_past_it() {
    let Some(moto) = Moto::start() else { return };
    moto.bucket("ckpt");
    // Its .metadata puts chunks of rank 1's file past the end of its object: refused by the
    // object's length from its head, naming the object, its length and the range, with no
    // ranged GET past the end (which a server answers 416, a message about HTTP).
    upload_tree(&moto, "ckpt", &fixture("dcp_default/bad_truncated"), "cut");
    let dir = tempfile::tempdir().unwrap();
    let output = moto
        .tjoin()
        .current_dir(dir.path())
        .env("TMPDIR", dir.path().join("no-such-folder"))
        .args(["s3://ckpt/cut/", "-o", "out.safetensors"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    crate::util::assert_mentions(
        &stderr,
        &[
            "s3://ckpt/cut/__1_0.distcp",
            "11284 bytes long",
            "the file is cut short",
        ],
    );
    assert!(!stderr.contains("416"), "{stderr}");
    assert!(!dir.path().join("out.safetensors").exists());
}

/// Where the data of the `n`th chunk (from 0) of a `.distcp` file of torch.save archives
/// starts, or of the `n`th tensor of a torch.save archive: that of its `n`th member whose
/// name ends with `/data/0`, after the member's local header.
fn nth_chunk_data(bytes: &[u8], n: usize) -> usize {
    let field = |at: usize| u16::from_le_bytes([bytes[at], bytes[at + 1]]) as usize;
    let mut starts = (0..bytes.len() - 30).filter(|&at| {
        let name = bytes[at + 30..].get(..field(at + 26)).unwrap_or_default();
        bytes[at..].starts_with(b"PK\x03\x04") && name.ends_with(b"/data/0")
    });
    let start = starts.nth(n).expect("the chunk's data member");
    start + 30 + field(start + 26) + field(start + 28)
}
