//! GGUF: split sets written by gguf-py (fixtures/gguf, `make_gguf_fixtures.py`) merge into
//! the very file gguf-py writes unsplit; a split and a merge give back the original byte for
//! byte; plain tensors read as numpy and safetensors write them; every refusal of a damaged
//! or inconsistent set writes nothing.

use std::fs;
use std::path::{Path, PathBuf};

use crate::util::{assert_mentions, refused, succeeds};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/gguf")
}

/// A temporary folder holding copies of `files` (paths under fixtures/gguf).
fn copies(files: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for file in files {
        let to = dir.path().join(Path::new(file).file_name().unwrap());
        fs::copy(fixtures().join(file), to).unwrap();
    }
    dir
}

const BY_COUNT: [&str; 3] = [
    "by_count/model-00001-of-00003.gguf",
    "by_count/model-00002-of-00003.gguf",
    "by_count/model-00003-of-00003.gguf",
];

#[track_caller]
fn assert_same_file(got: &Path, want: &Path) {
    let (got_bytes, want_bytes) = (fs::read(got).unwrap(), fs::read(want).unwrap());
    assert!(
        got_bytes == want_bytes,
        "{} differs from {}: {}",
        got.display(),
        want.display(),
        crate::util::describe_difference(&want_bytes, &got_bytes)
    );
}

#[test]
fn a_set_gguf_py_split_merges_into_the_file_it_writes_unsplit() {
    for set in ["by_count", "by_size"] {
        let dir = tempfile::tempdir().unwrap();
        let first = fixtures().join(set).join("model-00001-of-00003.gguf");
        let out = dir.path().join("model.gguf");
        succeeds(
            dir.path(),
            &[first.to_str().unwrap(), "-o", out.to_str().unwrap()],
        );
        assert_same_file(&out, &fixtures().join("model.gguf"));
        // Named by all its files, in order.
        let all: Vec<String> = (1..=3)
            .map(|n| {
                let name = format!("model-{n:05}-of-00003.gguf");
                fixtures().join(set).join(name).display().to_string()
            })
            .collect();
        let mut args: Vec<&str> = all.iter().map(String::as_str).collect();
        args.extend(["-o", "all.gguf"]);
        succeeds(dir.path(), &args);
        assert_same_file(&dir.path().join("all.gguf"), &fixtures().join("model.gguf"));
    }
}

#[test]
fn a_split_by_tensor_count_is_the_set_gguf_py_writes() {
    let dir = copies(&["model.gguf"]);
    succeeds(
        dir.path(),
        &["split", "--max-tensors", "4", "model.gguf", "-o", "out/"],
    );
    for file in BY_COUNT {
        let name = Path::new(file).file_name().unwrap();
        assert_same_file(&dir.path().join("out").join(name), &fixtures().join(file));
    }
}

#[test]
fn split_then_merge_gives_the_original_byte_for_byte() {
    for original in ["model.gguf", "align64/model.gguf", "plain.gguf"] {
        for by in [
            ["--max-tensors", "1"],
            ["--max-tensors", "2"],
            ["--max-tensors", "100"],
            ["--max-shard-size", "100"],
            ["--max-shard-size", "300"],
            ["--max-shard-size", "1GB"],
        ] {
            let dir = tempfile::tempdir().unwrap();
            let input = fixtures().join(original);
            let stem = dir.path().join("parts/m.gguf");
            fs::create_dir(dir.path().join("parts")).unwrap();
            let mut args = vec!["split", by[0], by[1], input.to_str().unwrap(), "-o"];
            args.push(stem.to_str().unwrap());
            succeeds(dir.path(), &args);
            let mut files = crate::util::dir_entries(&dir.path().join("parts"));
            files.sort();
            let count = files.len();
            assert!(
                files
                    .iter()
                    .all(|f| f.ends_with(&format!("-of-{count:05}.gguf")))
            );
            assert_eq!(files[0], format!("m-00001-of-{count:05}.gguf"));
            let first = dir.path().join("parts").join(&files[0]);
            succeeds(dir.path(), &[first.to_str().unwrap(), "-o", "back.gguf"]);
            assert_same_file(&dir.path().join("back.gguf"), &input);
        }
    }
}

#[test]
fn a_split_by_size_keeps_each_file_under_the_limit_unless_one_tensor_is_larger() {
    let dir = copies(&["model.gguf"]);
    succeeds(
        dir.path(),
        &[
            "split",
            "--max-shard-size",
            "100",
            "model.gguf",
            "-o",
            "out/",
        ],
    );
    let mut files = crate::util::dir_entries(&dir.path().join("out"));
    files.sort();
    for file in &files {
        let bytes = fs::read(dir.path().join("out").join(file)).unwrap();
        let header = match tjoin::format::gguf::parse_header(&bytes, bytes.len() as u64) {
            Ok(tjoin::format::gguf::Parsed::Header(h)) => h,
            other => panic!("{file}: {other:?}"),
        };
        let data: u64 = header
            .tensors
            .iter()
            .map(|t| t.bytes.next_multiple_of(32))
            .sum();
        assert!(
            data <= 100 || header.tensors.len() == 1,
            "{file}: {data} bytes"
        );
    }
    assert_eq!(files.len(), 7, "{files:?}");
}

#[test]
fn plain_tensors_read_as_numpy_and_safetensors_write_them() {
    let dir = copies(&["model.gguf", "plain.gguf"]);
    succeeds(dir.path(), &["model.gguf:token_embd.weight", "-o", "e.npy"]);
    assert_same_file(
        &dir.path().join("e.npy"),
        &fixtures().join("token_embd.npy"),
    );
    succeeds(dir.path(), &["model.gguf:blk.0.ids", "-o", "ids.npy"]);
    assert_same_file(&dir.path().join("ids.npy"), &fixtures().join("ids.npy"));
    succeeds(dir.path(), &["plain.gguf", "-o", "plain.safetensors"]);
    assert_same_file(
        &dir.path().join("plain.safetensors"),
        &fixtures().join("plain.safetensors"),
    );
}

#[test]
fn quantized_tensors_are_refused_for_npy_and_safetensors_naming_tensor_and_type() {
    let dir = copies(&["model.gguf"]);
    let stderr = refused(
        dir.path(),
        &["model.gguf:blk.0.ffn_down.weight", "-o", "q.npy"],
        2,
    );
    assert_mentions(
        &stderr,
        &["blk.0.ffn_down.weight Q4_K [2, 256]", "-o out.gguf"],
    );
    let stderr = refused(dir.path(), &["model.gguf", "-o", "all.safetensors"], 2);
    assert_mentions(
        &stderr,
        &["2 quantized tensors", "blk.0.ffn_up.weight Q8_0 [2, 64]"],
    );
}

/// The bytes of `file` with `new` written `skip` bytes after the end of `needle`.
fn patched(file: &Path, needle: &[u8], skip: usize, new: &[u8]) -> Vec<u8> {
    let mut bytes = fs::read(file).unwrap();
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("the needle is in the file")
        + needle.len()
        + skip;
    bytes[at..at + new.len()].copy_from_slice(new);
    bytes
}

#[test]
fn an_inconsistent_or_incomplete_set_is_refused_writing_nothing() {
    // A file missing.
    let dir = copies(&BY_COUNT[..2]);
    let stderr = refused(
        dir.path(),
        &["model-00001-of-00003.gguf", "-o", "m.gguf"],
        2,
    );
    assert_mentions(
        &stderr,
        &[
            "file 3 of the GGUF set",
            "model-00003-of-00003.gguf",
            "missing",
        ],
    );
    // A later file's split.count disagrees with the set.
    let dir = copies(&BY_COUNT);
    let second = dir.path().join("model-00002-of-00003.gguf");
    fs::write(
        &second,
        patched(&second, b"split.count", 4, &4u16.to_le_bytes()),
    )
    .unwrap();
    let stderr = refused(
        dir.path(),
        &["model-00001-of-00003.gguf", "-o", "m.gguf"],
        1,
    );
    assert_mentions(
        &stderr,
        &["model-00002-of-00003.gguf", "`split.count` = 4", "3 files"],
    );
    // The files named out of order.
    let dir = copies(&BY_COUNT);
    let args = [
        "model-00001-of-00003.gguf",
        "model-00003-of-00003.gguf",
        "model-00002-of-00003.gguf",
        "-o",
        "m.gguf",
    ];
    let stderr = refused(dir.path(), &args, 1);
    assert_mentions(&stderr, &["`split.no` = 2", "file 2 here"]);
    // A name that says another count than the keys.
    let dir = copies(&BY_COUNT);
    fs::rename(
        dir.path().join("model-00001-of-00003.gguf"),
        dir.path().join("model-00001-of-00004.gguf"),
    )
    .unwrap();
    let stderr = refused(
        dir.path(),
        &["model-00001-of-00004.gguf", "-o", "m.gguf"],
        1,
    );
    assert_mentions(&stderr, &["named as one of 4 files", "`split.count` = 3"]);
    // Not the first file.
    let dir = copies(&BY_COUNT);
    let stderr = refused(
        dir.path(),
        &["model-00002-of-00003.gguf", "-o", "m.gguf"],
        2,
    );
    assert_mentions(&stderr, &["not the first", "model-00001-of-00003.gguf"]);
}

#[test]
fn damaged_files_are_refused_writing_nothing() {
    let model = fixtures().join("model.gguf");
    let plain = fixtures().join("plain.gguf");
    let whole = fs::read(&model).unwrap();
    let cases: Vec<(&str, Vec<u8>, &[&str])> = vec![
        ("truncated header", whole[..100].to_vec(), &["truncated"]),
        (
            "data past the end",
            whole[..whole.len() - 40].to_vec(),
            &["`output_norm.weight`", "run past the end"],
        ),
        (
            "overlapping tensors",
            patched(&plain, b"blk.0.attn_norm.weight", 16, &0u64.to_le_bytes()),
            &["`token_embd.weight`", "`blk.0.attn_norm.weight`", "overlap"],
        ),
        (
            "unknown value type",
            patched(&model, b"test.u8", 0, &13u32.to_le_bytes()),
            &["`test.u8`", "unknown type 13"],
        ),
        (
            "version 1",
            patched(&model, b"GGUF", 0, &1u32.to_le_bytes()),
            &["version 1"],
        ),
    ];
    for (what, bytes, needles) in cases {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("bad.gguf"), bytes).unwrap();
        for args in [
            &["bad.gguf", "-o", "out.gguf"][..],
            &["split", "--max-tensors", "2", "bad.gguf", "-o", "./"],
            &["bad.gguf", "-o", "out.safetensors"],
        ] {
            let stderr = refused(dir.path(), args, 1);
            assert!(stderr.contains("bad.gguf"), "{what}: {stderr}");
            assert_mentions(&stderr, needles);
        }
    }
}

#[test]
fn a_gguf_merge_or_split_refuses_flags_it_has_no_use_for() {
    let dir = copies(&["model.gguf", "token_embd.npy"]);
    let stderr = refused(dir.path(), &["-a", "0", "model.gguf", "-o", "m2.gguf"], 2);
    assert_mentions(&stderr, &["-a/--axis does not apply to a GGUF merge"]);
    let stderr = refused(dir.path(), &["token_embd.npy", "-o", "m2.gguf"], 2);
    assert_mentions(&stderr, &["only from GGUF inputs"]);
    let stderr = refused(
        dir.path(),
        &["split", "--max-tensors", "2", "token_embd.npy", "-o", "x/"],
        2,
    );
    assert_mentions(&stderr, &["--max-tensors splits GGUF files"]);
    let stderr = refused(
        dir.path(),
        &["split", "--parts", "2", "model.gguf", "-o", "x/"],
        2,
    );
    assert_mentions(
        &stderr,
        &["needs one of --max-tensors N and --max-shard-size SIZE"],
    );
}

#[test]
fn a_dry_run_lists_each_file_and_its_tensors_writing_nothing() {
    let dir = copies(&["model.gguf"]);
    let out = succeeds(
        dir.path(),
        &[
            "split",
            "--max-tensors",
            "5",
            "model.gguf",
            "-o",
            "out/",
            "--dry-run",
        ],
    );
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains("model-00001-of-00002.gguf  5 tensors"),
        "{text}"
    );
    assert!(
        text.contains("blk.0.ffn_down.weight  Q4_K [2, 256]"),
        "{text}"
    );
    assert!(!dir.path().join("out").exists());
}

#[test]
fn a_later_file_whose_alignment_is_unsure_is_refused_writing_nothing() {
    let dir = tempfile::tempdir().unwrap();
    for n in 1..=5 {
        let name = format!("model-{n:05}-of-00005.gguf");
        fs::copy(
            fixtures().join("align64_split").join(&name),
            dir.path().join(&name),
        )
        .unwrap();
    }
    let stderr = refused(
        dir.path(),
        &["model-00001-of-00005.gguf", "-o", "m.gguf"],
        1,
    );
    assert_mentions(
        &stderr,
        &[
            "model-00002-of-00005.gguf has no `general.alignment`",
            "starts at byte 224",
            "at byte 256 by the first file's alignment, 64",
            "tjoin split",
        ],
    );
}

#[test]
fn a_split_of_a_file_aligned_otherwise_says_its_alignment_in_every_file() {
    let dir = copies(&["align64/model.gguf"]);
    succeeds(
        dir.path(),
        &["split", "--max-tensors", "2", "model.gguf", "-o", "out/"],
    );
    for n in 1..=5 {
        let file = dir.path().join(format!("out/model-{n:05}-of-00005.gguf"));
        let bytes = fs::read(&file).unwrap();
        let header = match tjoin::format::gguf::parse_header(&bytes, bytes.len() as u64) {
            Ok(tjoin::format::gguf::Parsed::Header(h)) => h,
            other => panic!("{other:?}"),
        };
        assert_eq!(header.alignment, 64, "{}", file.display());
    }
}

/// A merge whose output is a file of the set it reads is refused, as a join of several inputs
/// whose output is one of them is, and the set stays as it was (it was replaced, exit 0).
#[test]
fn a_merge_onto_a_file_of_its_own_set_is_refused_leaving_the_set() {
    let dir = copies(&BY_COUNT);
    let before: Vec<Vec<u8>> = BY_COUNT
        .iter()
        .map(|f| fs::read(dir.path().join(Path::new(f).file_name().unwrap())).unwrap())
        .collect();
    for output in ["model-00002-of-00003.gguf", "./model-00001-of-00003.gguf"] {
        let stderr = refused(dir.path(), &["model-00001-of-00003.gguf", "-o", output], 2);
        assert_mentions(&stderr, &[output, "of the set", "name an output"]);
    }
    for (file, bytes) in BY_COUNT.iter().zip(&before) {
        let path = dir.path().join(Path::new(file).file_name().unwrap());
        assert!(fs::read(path).unwrap() == *bytes, "{file} changed");
    }
}

/// Every join and split flag a GGUF run has no use for is refused, the ones added after the
/// GGUF flow among them (a filter ignored wrote every tensor, exit 0); `--print-plan`
/// prints, once written, the plan a dry run prints.
#[test]
fn flags_a_gguf_run_would_ignore_are_refused_and_print_plan_prints_what_was_written() {
    let dir = copies(&["model.gguf"]);
    for (flags, name) in [
        (&["--exclude", "token*"][..], "--exclude"),
        (&["--only", "token*"], "--only"),
        (&["--spec", "onnx-13"], "--spec"),
        (&["--config", "config.json"], "--config"),
        (&["--uneven"], "--uneven"),
        (&["--join-identical"], "--join-identical"),
    ] {
        let mut args = flags.to_vec();
        args.extend(["model.gguf", "-o", "m2.gguf"]);
        let stderr = refused(dir.path(), &args, 2);
        assert_mentions(
            &stderr,
            &[&format!("{name} does not apply to a GGUF merge")],
        );
    }
    let stderr = refused(
        dir.path(),
        &[
            "split",
            "--max-tensors",
            "2",
            "--spec",
            "onnx-13",
            "model.gguf",
            "-o",
            "x/",
        ],
        2,
    );
    assert_mentions(&stderr, &["--spec does not apply to a GGUF split"]);
    let dry = succeeds(
        dir.path(),
        &["--dry-run=json", "model.gguf", "-o", "m2.gguf"],
    );
    assert!(!dir.path().join("m2.gguf").exists());
    let printed = succeeds(
        dir.path(),
        &["--print-plan=json", "model.gguf", "-o", "m2.gguf"],
    );
    assert_eq!(printed, dry);
    assert_same_file(&dir.path().join("m2.gguf"), &fixtures().join("model.gguf"));
    refused(dir.path(), &["--print-plan", "model.gguf", "-o", "-"], 2);
}

/// A merge into an object and a split under a prefix (moto's S3 server, started here): the
/// local merge's and split's files byte for byte, no upload left; `-n` keeps an existing
/// object. Before, both were refused with a fix that could not work ("its folder s3://...
/// does not exist", "create the folders first").
#[test]
fn a_merge_and_a_split_into_s3_upload_the_local_files() {
    let Some(moto) = crate::moto::Moto::start() else {
        return;
    };
    moto.bucket("out");
    let dir = tempfile::tempdir().unwrap();
    let set = fixtures().join("by_count/model-00001-of-00003.gguf");
    let model = fixtures().join("model.gguf");
    let run = |args: &[&std::ffi::OsStr]| {
        moto.tjoin()
            .current_dir(dir.path())
            .args(args)
            .arg("-q")
            .assert()
            .success();
    };
    let os = |s: &str| std::ffi::OsString::from(s);
    run(&[set.as_os_str(), &os("-o"), &os("s3://out/model.gguf")]);
    run(&[set.as_os_str(), &os("-o"), &os("merged.gguf")]);
    let split = [os("split"), os("--max-tensors"), os("4")];
    let split: Vec<&std::ffi::OsStr> = split.iter().map(|s| s.as_os_str()).collect();
    run(&[
        &split[..],
        &[model.as_os_str(), &os("-o"), &os("s3://out/parts/")],
    ]
    .concat());
    run(&[&split[..], &[model.as_os_str(), &os("-o"), &os("parts/")]].concat());
    let local = fs::read(dir.path().join("merged.gguf")).unwrap();
    assert!(moto.get("out", "model.gguf").unwrap() == local);
    let mut names: Vec<String> = fs::read_dir(dir.path().join("parts"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), 3);
    for name in &names {
        let object = moto.get("out", &format!("parts/{name}")).expect(name);
        assert!(object == fs::read(dir.path().join("parts").join(name)).unwrap());
    }
    assert_eq!(moto.keys("out").len(), 4, "{:?}", moto.keys("out"));
    assert!(moto.uploads("out").is_empty());
    let kept = moto
        .tjoin()
        .current_dir(dir.path())
        .arg(&model)
        .args(["-o", "s3://out/model.gguf", "-n"])
        .assert()
        .failure();
    let stderr = String::from_utf8_lossy(&kept.get_output().stderr);
    assert_mentions(&stderr, &["s3://out/model.gguf", "exists"]);
    assert!(moto.get("out", "model.gguf").unwrap() == local);
    // A set named by URL is refused as one, not as a file that does not exist.
    let remote = moto
        .tjoin()
        .current_dir(dir.path())
        .args([
            "split",
            "--max-tensors",
            "4",
            "s3://out/model.gguf",
            "-o",
            "p/",
        ])
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&remote.get_output().stderr);
    assert_mentions(&stderr, &["input 1 (s3://out/model.gguf)", "local folder"]);
}
