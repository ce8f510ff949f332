//! `tjoin split --spec directml[:LEVEL]`: DirectML Split's own rules (DML_SPLIT_OPERATOR_DESC's
//! members and its tensor support table, DML_BUFFER_TENSOR_DESC's sizes), each refused before
//! anything is written, citing the page, and a split it takes written as without the flag.

use std::fs;

use crate::util::{assert_mentions, dir_entries, refused, succeeds, write_npy};

/// A folder holding `in.npy` of `descr` and `shape`, filled with bytes 0, 1, 2, ...
fn input(descr: &str, itemsize: u64, shape: &[u64]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let bytes = shape.iter().product::<u64>() * itemsize;
    let data: Vec<u8> = (0..bytes).map(|i| i as u8).collect();
    write_npy(&dir.path().join("in.npy"), descr, shape, false, &data);
    dir
}

fn split(spec: &str, axis: &str, parts: &str) -> Vec<String> {
    let mut args = vec![
        "split",
        "-a",
        axis,
        "--parts",
        parts,
        "in.npy",
        "-o",
        "p{part}.npy",
    ];
    if !spec.is_empty() {
        args.extend(["--spec", spec]);
    }
    args.into_iter().map(String::from).collect()
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

#[test]
fn a_split_directml_takes_is_written_as_without_the_flag() {
    let dir = input("<f4", 4, &[6, 4]);
    let dir = dir.path();
    // Split at 3.0 takes 1 to 8 dimensions (Join only 4 or 5).
    succeeds(dir, &strs(&split("directml:3.0", "0", "3")));
    let checked: Vec<Vec<u8>> = (0..3)
        .map(|p| fs::read(dir.join(format!("p{p}.npy"))).unwrap())
        .collect();
    succeeds(dir, &strs(&split("", "0", "3")));
    for (p, bytes) in checked.iter().enumerate() {
        assert_eq!(&fs::read(dir.join(format!("p{p}.npy"))).unwrap(), bytes);
    }
    succeeds(dir, &strs(&split("directml", "-1", "2")));
}

#[test]
fn ranks_the_level_does_not_take_are_refused_naming_the_levels_that_do() {
    let dir = input("<f4", 4, &[6, 4]);
    let stderr = refused(dir.path(), &strs(&split("directml:2.1", "0", "2")), 2);
    assert_mentions(
        &stderr,
        &[
            "DirectML Split at feature level 2.1 supports 4 dimensions",
            "DML_SPLIT_OPERATOR_DESC",
            "in.npy has 2",
            "--spec directml:3.0 takes 1 to 8 dimensions",
        ],
    );
    let dir = input("<f4", 4, &[1, 1, 1, 1, 1, 1, 1, 2, 2]);
    let stderr = refused(dir.path(), &strs(&split("directml", "8", "2")), 2);
    assert_mentions(&stderr, &["supports 1 to 8 dimensions", "has 9", "reshape"]);
}

#[test]
fn types_the_level_does_not_take_are_refused() {
    let dir = input("<f8", 8, &[4, 2]);
    let stderr = refused(dir.path(), &strs(&split("directml:3.0", "0", "2")), 2);
    assert_mentions(
        &stderr,
        &[
            "DirectML Split at feature level 3.0 does not support float64 tensors",
            "is float64",
            "float64 is supported by --spec directml:4.1",
        ],
    );
    succeeds(dir.path(), &strs(&split("directml:4.1", "0", "2")));
    let dir = input("|i1", 1, &[1, 1, 2, 4]);
    let stderr = refused(dir.path(), &strs(&split("directml:1.0", "3", "2")), 2);
    assert_mentions(&stderr, &["feature level 1.0 does not support int8"]);
    succeeds(dir.path(), &strs(&split("directml:2.1", "3", "2")));
}

#[test]
fn empty_parts_and_empty_tensors_are_refused_as_directml_has_no_size_zero() {
    // numpy.array_split gives 3 parts of 2 rows 1, 1 and 0 rows; DirectML cannot write the
    // last one.
    let dir = input("<f4", 4, &[2, 3]);
    let stderr = refused(dir.path(), &strs(&split("directml", "0", "3")), 2);
    assert_mentions(
        &stderr,
        &[
            "DML_BUFFER_TENSOR_DESC",
            "size of zero in any dimension is invalid",
            "output 3 of",
            "size 0 along axis 0",
            "sizes without the zeros ([1, 1]), or at most 2 parts",
        ],
    );
    succeeds(dir.path(), &strs(&split("", "0", "3")));
    let dir = input("<f4", 4, &[0, 3]);
    let stderr = refused(dir.path(), &strs(&split("directml", "1", "3")), 2);
    assert_mentions(&stderr, &["has size 0 in dimension 0"]);
}

#[test]
fn the_sizes_must_still_add_up_and_other_runtimes_are_not_checked() {
    let dir = input("<f4", 4, &[4, 2]);
    let dir = dir.path();
    let before = dir_entries(dir);
    let stderr = refused(
        dir,
        &[
            "split", "-a", "0", "--sizes", "1,2", "in.npy", "-o", "a.npy", "-o", "b.npy", "--spec",
            "directml",
        ],
        2,
    );
    assert_mentions(&stderr, &["add up"]);
    let stderr = refused(dir, &strs(&split("onnx", "0", "2")), 2);
    assert_mentions(
        &stderr,
        &[
            "--spec onnx-13",
            "checks DirectML's Split only",
            "--spec directml",
        ],
    );
    assert_eq!(dir_entries(dir), before);
}

/// A rank split (chunks, replicas, kept norms) that DirectML's Split takes at 4.1 is written as
/// without the flag; at 2.1, which takes 4 dimensions only, every 2-D tensor is refused
/// (the norms, copied whole, are not split and not checked).
#[test]
fn a_rank_split_is_checked_tensor_by_tensor() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/split/ranks");
    for name in [
        "model.rules",
        "model.safetensors",
        "tp0.safetensors",
        "tp3.safetensors",
    ] {
        fs::copy(fixtures.join(name), dir.join(name)).unwrap();
    }
    let args = |spec: &'static str| {
        [
            "split",
            "--ranks",
            "4",
            "--heads",
            "16:4",
            "--rules",
            "model.rules",
            "model.safetensors",
            "-o",
            "rank{rank}.safetensors",
            "--spec",
            spec,
        ]
    };
    let stderr = refused(dir, &args("directml:2.1"), 2);
    assert_mentions(
        &stderr,
        &[
            "DirectML Split at feature level 2.1 supports 4 dimensions",
            "tensor `embed.weight` of model.safetensors has 2",
            "and 7 more tensors alike: tensor `head.weight` of model.safetensors, tensor \
             `layers.0.attn.kv.weight` of model.safetensors, tensor \
             `layers.0.attn.qkv_proj.weight` of model.safetensors and 4 more",
        ],
    );
    assert_eq!(stderr.matches("tjoin: error:").count(), 1, "{stderr}");
    assert!(!stderr.contains("norm.weight"), "{stderr}");
    succeeds(dir, &args("directml"));
    for rank in [0, 3] {
        crate::util::assert_rank_file(
            &dir.join(format!("rank{rank}.safetensors")),
            &dir.join(format!("tp{rank}.safetensors")),
            rank,
            4,
        );
    }
}

#[test]
fn the_dry_run_names_the_rules_every_cut_tensor_passed() {
    let dir = input("<f4", 4, &[6, 4]);
    let mut args = split("directml:5.0", "0", "3");
    args.push("--dry-run".to_string());
    let stdout = String::from_utf8(succeeds(dir.path(), &strs(&args))).unwrap();
    assert_mentions(
        &stdout,
        &["rules: DirectML Split at feature level 5.0 (the rules of"],
    );
    args.pop();
    args.push("--dry-run=json".to_string());
    let json: serde_json::Value =
        serde_json::from_slice(&succeeds(dir.path(), &strs(&args))).unwrap();
    assert!(
        json["rules"]
            .as_str()
            .is_some_and(|r| r.starts_with("DirectML Split at feature level 5.0")),
        "{json}"
    );
    // Without --spec, no rules are claimed.
    let plain = split("", "0", "3");
    let mut plain: Vec<&str> = strs(&plain);
    plain.push("--dry-run=json");
    let json: serde_json::Value = serde_json::from_slice(&succeeds(dir.path(), &plain)).unwrap();
    assert!(json.get("rules").is_none(), "{json}");
    assert_eq!(dir_entries(dir.path()), ["in.npy"]);
}
