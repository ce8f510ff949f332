//! PyTorch distributed checkpoints (DCP): the ranks' files, as torch's
//! HuggingFaceStorageWriter(save_distributed=True) wrote them (fixtures/dcp/), consolidated
//! into one file byte for byte as safetensors.torch.save_file writes the full tensors, and the
//! refusals of blocks that do not tile their tensor.

use std::fs;
use std::path::{Path, PathBuf};

use crate::util::{assert_mentions, dir_entries, refused, succeeds};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/dcp");

/// The ranks' files of the fixture `case`, in order.
fn rank_files(case: &str) -> Vec<String> {
    let folder = Path::new(FIXTURES).join(case);
    dir_entries(&folder)
        .into_iter()
        .filter(|name| name.starts_with("shard-"))
        .map(|name| folder.join(name).to_string_lossy().into_owned())
        .collect()
}

/// The ranks' files of `case` followed by `extra`, as arguments.
fn with_args(case: &str, extra: &[&str]) -> Vec<String> {
    let mut args = rank_files(case);
    args.extend(extra.iter().map(|a| a.to_string()));
    args
}

fn expected(case: &str) -> Vec<u8> {
    fs::read(Path::new(FIXTURES).join(case).join("expected.safetensors")).unwrap()
}

/// Runs tjoin on `inputs` into `out.safetensors` in a fresh folder and returns its bytes.
fn consolidated(inputs: &[String], extra: &[&str]) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let mut args: Vec<&str> = inputs.iter().map(String::as_str).collect();
    args.extend(extra);
    args.extend(["-o", "out.safetensors"]);
    succeeds(dir.path(), &args);
    fs::read(dir.path().join("out.safetensors")).unwrap()
}

#[test]
fn rank_files_consolidate_into_what_save_file_writes() {
    // Rows and columns on a 1-D mesh (uneven: 5 rows over 2 ranks), a 2x2 mesh with blocks
    // cut on two axes (and a tensor cut on axes 2 and 1, and one replicated on the second
    // mesh axis, which DCP saves once), int32, bool and 0-d tensors (torch's consolidation
    // crashes on these).
    for case in ["rows", "cols", "mesh2x2", "types"] {
        let out = consolidated(&rank_files(case), &[]);
        assert!(
            out == expected(case),
            "{case} differs from its expected file"
        );
    }
}

#[test]
fn a_folder_of_rank_files_is_one_input() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("checkpoint");
    fs::create_dir(&folder).unwrap();
    for file in rank_files("mesh2x2") {
        let file = PathBuf::from(file);
        fs::copy(&file, folder.join(file.file_name().unwrap())).unwrap();
    }
    succeeds(dir.path(), &["checkpoint", "-o", "out.safetensors"]);
    let out = fs::read(dir.path().join("out.safetensors")).unwrap();
    assert!(out == expected("mesh2x2"));
}

#[test]
fn blocks_that_do_not_tile_their_tensor_are_refused_naming_the_region() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &[&str]); 3] = [
        (
            "bad_gap",
            &["tensor `w`: no block covers [3:4, 0:3]", "[1, 3] at [4, 0]"],
        ),
        (
            "bad_overlap",
            &[
                "tensor `w`: two blocks overlap: both cover [2:3, 0:3]",
                "shard-00001-model-00001-of-00001.safetensors:w)  float32  [3, 3] at [0, 0]",
                "shard-00002-model-00001-of-00001.safetensors:w)  float32  [3, 3] at [2, 0]",
            ],
        ),
        (
            "bad_dtypes",
            &[
                "tensor `w`: its blocks differ in element type",
                "float64  [2, 3] at [3, 0]",
            ],
        ),
    ];
    for (case, needles) in cases {
        let args = with_args(case, &["-o", "out.safetensors"]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let stderr = refused(dir.path(), &args, 2);
        assert_mentions(&stderr, needles);
        assert_mentions(&stderr, &["hint: "]);
    }
}

#[test]
fn dcp_files_mixed_with_other_inputs_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let other = format!("{FIXTURES}/cols/expected.safetensors");
    let args = with_args("rows", &[&other, "-o", "out.safetensors"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let stderr = refused(dir.path(), &args, 2);
    assert_mentions(
        &stderr,
        &["2 of the 3 inputs are files of a PyTorch distributed"],
    );
}

#[test]
fn a_dry_run_shows_each_tensors_grid_and_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let args = with_args("mesh2x2", &["--dry-run"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let text = String::from_utf8(succeeds(dir.path(), &args)).unwrap();
    assert_mentions(
        &text,
        &[
            "10 blocks in 4 files",
            "w     blocks 2 x 2 on axes 0, 1  float32   [4, 6]",
            "  v  2 x 2 on axes 1, 2\n    [0:3, 0:3, 0:2]  input 1 (",
            "    [0:3, 3:5, 0:2]  input 2 (",
        ],
    );
    let mut args = args.clone();
    *args.last_mut().unwrap() = "--dry-run=json";
    let json: serde_json::Value = serde_json::from_slice(&succeeds(dir.path(), &args)).unwrap();
    let w = &json["tensors"].as_array().unwrap()[1];
    assert_eq!(w["name"], "w");
    assert_eq!(w["blocks"]["grid"]["axes"], serde_json::json!([0, 1]));
    assert_eq!(
        w["blocks"]["grid"]["segments"],
        serde_json::json!([[2, 2], [3, 3]])
    );
    assert_eq!(
        w["blocks"]["blocks"][3]["offsets"],
        serde_json::json!([2, 3])
    );
}

#[test]
fn a_sharded_output_holds_the_same_tensors_in_format_pt_shards() {
    let dir = tempfile::tempdir().unwrap();
    let args = with_args("mesh2x2", &["-o", "merged/", "--max-shard-size", "100"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    succeeds(dir.path(), &args);
    let merged = dir.path().join("merged");
    assert_eq!(
        dir_entries(&merged),
        [
            "model-00001-of-00003.safetensors",
            "model-00002-of-00003.safetensors",
            "model-00003-of-00003.safetensors",
            "model.safetensors.index.json"
        ]
    );
    // Joining the shards back gives the expected file: same tensors, same bytes.
    succeeds(dir.path(), &["merged", "-o", "whole.safetensors"]);
    assert!(fs::read(dir.path().join("whole.safetensors")).unwrap() == expected("mesh2x2"));
    let shard = fs::read(merged.join("model-00001-of-00003.safetensors")).unwrap();
    let header = String::from_utf8_lossy(&shard[8..80]).into_owned();
    assert!(
        header.starts_with(r#"{"__metadata__":{"format":"pt"},"#),
        "{header}"
    );
}

#[test]
fn names_from_puts_each_tensor_in_the_file_an_index_names() {
    let dir = tempfile::tempdir().unwrap();
    let index = r#"{"metadata": {"total_size": 264}, "weight_map": {
        "w": "model-00001-of-00002.safetensors",
        "v": "model-00002-of-00002.safetensors",
        "rows": "model-00002-of-00002.safetensors"}}"#;
    fs::write(dir.path().join("model.safetensors.index.json"), index).unwrap();
    let run = |out: &str, index: &str| with_args("mesh2x2", &["-o", out, "--names-from", index]);
    let args = run("merged/", "model.safetensors.index.json");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    succeeds(dir.path(), &args);
    let merged = dir.path().join("merged");
    let text = fs::read_to_string(merged.join("model.safetensors.index.json")).unwrap();
    assert!(
        text.contains(r#""w": "model-00001-of-00002.safetensors""#),
        "{text}"
    );
    assert!(
        text.contains(r#""v": "model-00002-of-00002.safetensors""#),
        "{text}"
    );
    succeeds(dir.path(), &["merged", "-o", "whole.safetensors"]);
    assert!(fs::read(dir.path().join("whole.safetensors")).unwrap() == expected("mesh2x2"));
    // An index of another model maps tensors the output lacks, and lacks its tensors.
    let other = format!("{}/../sharded/model/model.safetensors.index.json", FIXTURES);
    let args = run("other/", &other);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let stderr = refused(dir.path(), &args, 2);
    assert_mentions(
        &stderr,
        &[
            "does not assign the output's tensors",
            "`w` is a tensor the index does not map",
        ],
    );
}

#[test]
fn a_cast_converts_floating_point_tensors_only() {
    // int32 ids, a bool mask and an int64 step stay as they are; the float32 scale is cast.
    let out = consolidated(&rank_files("types"), &["--cast", "float64"]);
    let path = Path::new(FIXTURES).join("types/expected_cast_float64.safetensors");
    assert!(out == fs::read(path).unwrap());
}

#[test]
fn a_tensor_every_rank_saved_whole_is_kept_once_with_keep() {
    let out = consolidated(&rank_files("replicated"), &["--keep", "norm"]);
    assert!(out == expected("replicated"));
    let dir = tempfile::tempdir().unwrap();
    let args = with_args("replicated", &["-o", "out.safetensors"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let stderr = refused(dir.path(), &args, 2);
    assert_mentions(
        &stderr,
        &[
            "tensor `norm`: two blocks overlap: both cover [0:4]",
            "--keep NAME",
        ],
    );
}

#[test]
fn blocks_cut_on_three_axes_or_around_an_uncut_axis_are_placed() {
    // `c` is cut on all three axes (2 x 2 x 2, uneven), `s` on axes 1 and 3 of four.
    let out = consolidated(&rank_files("cube"), &[]);
    assert!(out == expected("cube"));
}

#[test]
fn a_folder_mixing_rank_files_with_other_files_is_refused_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let folder = Path::new(FIXTURES).join("cube");
    let stderr = refused(
        dir.path(),
        &[folder.to_str().unwrap(), "-o", "out.safetensors"],
        2,
    );
    assert_mentions(
        &stderr,
        &[
            "holds the files of a PyTorch distributed checkpoint",
            "and 1 other .safetensors file",
            "expected.safetensors",
        ],
    );
}

#[test]
fn spec_checks_the_joins_a_tensor_is_made_of() {
    let dir = tempfile::tempdir().unwrap();
    let args = with_args("types", &["--spec", "openvino", "-o", "out.safetensors"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let stderr = refused(dir.path(), &args, 2);
    assert_mentions(
        &stderr,
        &["tensor `mask`: OpenVINO Concat-1 does not support bool"],
    );
    let out = consolidated(&rank_files("mesh2x2"), &["--spec", "onnx"]);
    assert!(out == expected("mesh2x2"));
}

#[test]
fn one_tensor_of_the_rank_files_consolidates_into_any_format() {
    // FILE:NAME picks `w` from each rank's file; a .npy output holds it alone.
    let dir = tempfile::tempdir().unwrap();
    let picked: Vec<String> = rank_files("rows")
        .iter()
        .map(|f| format!("{f}:w"))
        .collect();
    let mut args: Vec<&str> = picked.iter().map(String::as_str).collect();
    args.extend(["-o", "w.npy"]);
    succeeds(dir.path(), &args);
    let npy = fs::read(dir.path().join("w.npy")).unwrap();
    let data: Vec<f32> = npy[128..]
        .chunks(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let rows_w: Vec<f32> = (0..15).map(|i| i as f32 / 4.0).collect();
    assert_eq!(data, rows_w);
    assert!(npy.starts_with(b"\x93NUMPY\x01\x00"));
    assert!(String::from_utf8_lossy(&npy[..128]).contains("'shape': (5, 3)"));
}

/// One block of a rank's file: its tensor's name, shape and offsets; its float32 data counts
/// up from `first`.
struct Block<'a> {
    name: &'a str,
    shape: &'a [u64],
    offsets: &'a [u64],
    first: f32,
}

/// Writes a rank's file at `path` as HuggingFaceStorageWriter does: float32 blocks, with
/// their offsets in `__metadata__`'s DCP_SHARDING_INFO.
fn write_rank_file(path: &Path, blocks: &[Block]) {
    let list = |values: &[u64]| {
        let values: Vec<String> = values.iter().map(u64::to_string).collect();
        format!("[{}]", values.join(","))
    };
    let sharding: Vec<String> = blocks
        .iter()
        .map(|b| {
            format!(
                r#"\"{}\":{{\"saved_offsets\":{}}}"#,
                b.name,
                list(b.offsets)
            )
        })
        .collect();
    let mut header = format!(
        r#"{{"__metadata__":{{"format":"pt","DCP_SHARDING_INFO":"{{{}}}"}}"#,
        sharding.join(",")
    );
    let mut data = Vec::new();
    for block in blocks {
        let count = block.shape.iter().product::<u64>();
        let start = data.len();
        for i in 0..count {
            data.extend_from_slice(&(block.first + i as f32).to_le_bytes());
        }
        header.push_str(&format!(
            r#","{}":{{"dtype":"F32","shape":{},"data_offsets":[{start},{}]}}"#,
            block.name,
            list(block.shape),
            data.len()
        ));
    }
    header.push('}');
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(header.as_bytes());
    file.extend_from_slice(&data);
    fs::write(path, file).unwrap();
}

/// Blocks of `w`, one a rank: each one's shape and offsets.
type BlocksOfW<'a> = &'a [(&'a [u64], &'a [u64])];

/// Writes one rank's file per block of `w` in `dir`, `rank-<i>.safetensors`, and returns
/// their names.
fn ranks_of_w(dir: &Path, blocks: BlocksOfW) -> Vec<String> {
    blocks
        .iter()
        .enumerate()
        .map(|(rank, &(shape, offsets))| {
            let name = format!("rank-{rank}.safetensors");
            let block = Block {
                name: "w",
                shape,
                offsets,
                first: 0.0,
            };
            write_rank_file(&dir.join(&name), &[block]);
            name
        })
        .collect()
}

#[test]
fn blocks_with_no_elements_count_in_the_check_that_blocks_tile_their_tensor() {
    let refusals: [(BlocksOfW, &[&str]); 4] = [
        // An empty block past what the others tile: today a silent [2, 4].
        (
            &[(&[2, 4], &[0, 0]), (&[0, 4], &[5, 0])],
            &[
                "tensor `w`: no block covers [2:5, 0:4]",
                "past the [2, 4] its other blocks tile",
                "the block with no elements: input 2 (rank-1.safetensors:w)  float32  [0, 4] \
                 at [5, 0]",
            ],
        ),
        // Only empty blocks, which would make a header of [1000000, 4] with no bytes.
        (
            &[(&[0, 4], &[0, 0]), (&[0, 4], &[1_000_000, 0])],
            &[
                "tensor `w`: no block covers [0:1000000, 0:4]",
                "rank-0.safetensors:w)  float32  [0, 4] at [0, 0]",
                "rank-1.safetensors:w)  float32  [0, 4] at [1000000, 0]",
            ],
        ),
        // Empty blocks whose extents, together, would claim elements.
        (
            &[(&[0, 4], &[0, 0]), (&[4, 0], &[0, 0])],
            &["tensor `w`: no block covers [0:4, 0:4]"],
        ),
        // A tensor with no elements whose blocks leave a hole in its extent.
        (
            &[(&[3, 0], &[0, 0]), (&[2, 0], &[10, 0])],
            &["tensor `w`: no block covers [3:10, 0:0]"],
        ),
    ];
    for (blocks, needles) in refusals {
        let dir = tempfile::tempdir().unwrap();
        let mut args = ranks_of_w(dir.path(), blocks);
        args.extend(["-o".into(), "out.safetensors".into()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let stderr = refused(dir.path(), &args, 2);
        assert_mentions(&stderr, needles);
        assert_mentions(&stderr, &["hint: "]);
    }
}

#[test]
fn empty_blocks_where_torch_puts_them_are_accepted() {
    // torch.chunk's uneven sharding of 2 rows over 4 ranks: the last two ranks' blocks are
    // empty, at the end of the tensor; and a [5, 0] tensor split on axis 0.
    let cases: [(BlocksOfW, &str); 2] = [
        (
            &[
                (&[1, 4], &[0, 0]),
                (&[1, 4], &[1, 0]),
                (&[0, 4], &[2, 0]),
                (&[0, 4], &[2, 0]),
            ],
            r#""shape":[2,4],"data_offsets":[0,32]"#,
        ),
        (
            &[(&[3, 0], &[0, 0]), (&[2, 0], &[3, 0]), (&[0, 0], &[5, 0])],
            r#""shape":[5,0],"data_offsets":[0,0]"#,
        ),
    ];
    for (blocks, header) in cases {
        let dir = tempfile::tempdir().unwrap();
        let mut args = ranks_of_w(dir.path(), blocks);
        args.extend(["-o".into(), "out.safetensors".into()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        succeeds(dir.path(), &args);
        let out = fs::read(dir.path().join("out.safetensors")).unwrap();
        let text = String::from_utf8_lossy(&out);
        assert!(text.contains(header), "{text}");
    }
}

#[cfg(unix)] // used by the open-file-limit test alone
/// The float32 tensors of a safetensors file: each one's name, shape and values.
fn f32_tensors(bytes: &[u8]) -> Vec<(String, Vec<u64>, Vec<f32>)> {
    let end = 8 + u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..end]).unwrap();
    let mut tensors = Vec::new();
    for (name, entry) in header.as_object().unwrap() {
        if name == "__metadata__" {
            continue;
        }
        assert_eq!(entry["dtype"], "F32");
        let shape = entry["shape"].as_array().unwrap();
        let shape = shape.iter().map(|d| d.as_u64().unwrap()).collect();
        let at = entry["data_offsets"].as_array().unwrap();
        let (from, to) = (at[0].as_u64().unwrap(), at[1].as_u64().unwrap());
        let data = &bytes[end + from as usize..end + to as usize];
        let values = data
            .chunks(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()));
        tensors.push((name.clone(), shape, values.collect()));
    }
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    tensors
}

#[cfg(unix)] // ulimit
#[test]
fn a_folder_of_more_ranks_than_the_open_file_limit_consolidates() {
    // 300 ranks under a limit of 128 open files (hard and soft: tjoin raises the soft limit to
    // the hard one, and keeps inputs open up to a share of it, here 32). Each rank's file
    // holds a row of `w` (a join along axis 0), a column of `v` (along axis 1) and one
    // element of `g` (a 15 x 20 grid).
    const RANKS: u64 = 300;
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("checkpoint");
    fs::create_dir(&folder).unwrap();
    for rank in 0..RANKS {
        let blocks = [
            Block {
                name: "w",
                shape: &[1, 4],
                offsets: &[rank, 0],
                first: 4.0 * rank as f32,
            },
            Block {
                name: "v",
                shape: &[2, 1],
                offsets: &[0, rank],
                first: rank as f32,
            },
            Block {
                name: "g",
                shape: &[1, 1],
                offsets: &[rank / 20, rank % 20],
                first: rank as f32,
            },
        ];
        let path = folder.join(format!(
            "shard-{:05}-model-00001-of-00001.safetensors",
            rank + 1
        ));
        write_rank_file(&path, &blocks);
    }
    let output = crate::reliability::tjoin_limited(
        dir.path(),
        "ulimit -n 128",
        &["checkpoint", "-o", "out.safetensors"],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let out = fs::read(dir.path().join("out.safetensors")).unwrap();
    let counting = |n: u64| (0..n).map(|i| i as f32).collect::<Vec<f32>>();
    // Row 0 of `v` is each rank's first value, row 1 its second.
    let v = (0..2).flat_map(|row| (0..RANKS).map(move |r| (r + row) as f32));
    let expected = vec![
        ("g".to_string(), vec![15, 20], counting(RANKS)),
        ("v".to_string(), vec![2, RANKS], v.collect()),
        ("w".to_string(), vec![RANKS, 4], counting(RANKS * 4)),
    ];
    assert!(f32_tensors(&out) == expected);
}
