//! `tjoin split`: numpy.array_split as the oracle (fixtures/split/npy), tensor-parallel ranks
//! against a reimplementation of the rules (fixtures/split/ranks) and the merge fixtures,
//! the join that inverts each split, every refusal before anything is written, the dry run,
//! and an interrupted split leaving nothing.

use std::fs;
use std::path::{Path, PathBuf};

#[cfg(unix)]
use crate::util::{self, npy_header};
use crate::util::{assert_mentions, dir_entries, refused, succeeds, write_npy};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// A temporary folder holding a copy of the files of `from`.
fn copy_of(from: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
    }
    dir
}

#[test]
fn parts_are_the_files_numpy_array_split_and_save_write() {
    let cases = fixtures().join("split/npy");
    let mut names: Vec<_> = fs::read_dir(&cases)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    assert!(names.len() >= 8, "the fixture cases are missing");
    for case in names {
        let dir = copy_of(&case);
        let dir = dir.path();
        let args = fs::read_to_string(dir.join("args.txt")).unwrap();
        let mut command: Vec<&str> = vec!["split"];
        command.extend(args.split_whitespace());
        command.extend(["in.npy", "-o", "out{part}.npy"]);
        succeeds(dir, &command);
        let expected = dir_entries(dir)
            .iter()
            .filter(|n| n.starts_with("expected"))
            .count();
        for part in 0..expected {
            let got = fs::read(dir.join(format!("out{part}.npy"))).unwrap();
            let want = fs::read(dir.join(format!("expected{part}.npy"))).unwrap();
            assert!(got == want, "{}: part {part} differs", case.display());
        }
        assert!(!dir.join(format!("out{expected}.npy")).exists());
    }
}

/// The join that inverts a split by --parts: `tjoin -a AXIS` of the parts in order.
#[test]
fn joining_the_parts_gives_back_the_input() {
    for case in ["rows", "cols", "last_axis_int16", "sizes", "fortran_rows"] {
        let dir = copy_of(&fixtures().join("split/npy").join(case));
        let dir = dir.path();
        let args = fs::read_to_string(dir.join("args.txt")).unwrap();
        let mut split: Vec<&str> = vec!["split"];
        split.extend(args.split_whitespace());
        split.extend(["in.npy", "-o", "p{part:03}.npy"]);
        succeeds(dir, &split);
        let mut parts: Vec<String> = dir_entries(dir)
            .into_iter()
            .filter(|n| n.starts_with('p'))
            .collect();
        parts.sort();
        let axis = args.split_whitespace().nth(1).unwrap().to_string();
        let mut join = vec!["-a".to_string(), axis];
        join.extend(parts);
        join.extend(["-o".to_string(), "back.npy".to_string()]);
        let join: Vec<&str> = join.iter().map(String::as_str).collect();
        succeeds(dir, &join);
        assert_eq!(
            fs::read(dir.join("back.npy")).unwrap(),
            fs::read(dir.join("in.npy")).unwrap(),
            "{case}"
        );
    }
}

#[test]
fn ranks_are_the_rules_reimplemented_and_join_back_byte_for_byte() {
    let dir = copy_of(&fixtures().join("split/ranks"));
    let dir = dir.path();
    succeeds(
        dir,
        &[
            "split",
            "--ranks",
            "4",
            "--heads",
            "16:4",
            "--rules",
            "model.rules",
            "model.safetensors",
            "-o",
            "rank{rank}/model.safetensors",
        ],
    );
    for rank in 0..4 {
        let got = dir.join(format!("rank{rank}/model.safetensors"));
        let want = dir.join(format!("tp{rank}.safetensors"));
        crate::util::assert_rank_file(&got, &want, rank, 4);
    }
    succeeds(
        dir,
        &[
            "--rules",
            "model.rules",
            "rank0/model.safetensors",
            "rank1/model.safetensors",
            "rank2/model.safetensors",
            "rank3/model.safetensors",
            "-o",
            "back.safetensors",
        ],
    );
    assert_eq!(
        fs::read(dir.join("back.safetensors")).unwrap(),
        fs::read(dir.join("model.safetensors")).unwrap()
    );
}

/// `replicas P:Q:R` after `chunks`: each part given to its own number of consecutive ranks
/// (query heads cut 4 ways, key and value heads 2 ways), joined back by the same rule.
#[test]
fn per_part_replicas_split_and_join_back() {
    let dir = copy_of(&fixtures().join("split/ranks"));
    let dir = dir.path();
    let rule = "*.qkv_proj.weight=0 chunks 4:1:1 replicas 1:2:2";
    let tensor = "model.safetensors:layers.0.attn.qkv_proj.weight";
    let split = [
        "split",
        "--ranks",
        "4",
        "--heads",
        "8:2",
        "--axis-for",
        rule,
        tensor,
        "-o",
        "r{rank}.safetensors",
    ];
    let plan = succeeds(dir, &[&split[..], &["--dry-run=json"]].concat());
    let plan: serde_json::Value = serde_json::from_slice(&plan).unwrap();
    let slices = &plan["outputs"][2]["tensors"][0]["slices"];
    assert_eq!(
        slices,
        &serde_json::json!(["[8:12, :]", "[18:20, :]", "[22:24, :]"])
    );
    succeeds(dir, &split);
    let join = [
        "--axis-for",
        rule,
        "r0.safetensors",
        "r1.safetensors",
        "r2.safetensors",
        "r3.safetensors",
        "-o",
        "back.safetensors",
    ];
    succeeds(dir, &join);
    succeeds(dir, &[tensor, "-o", "alone.safetensors"]);
    assert_eq!(
        fs::read(dir.join("back.safetensors")).unwrap(),
        fs::read(dir.join("alone.safetensors")).unwrap()
    );
}

/// The acceptance: a tiny Llama saved by transformers (a PyTorch set of .bin shards)
/// split into 2 ranks by rules/llama.rules and joined back byte for byte to the safetensors
/// file of the same tensors. Its config.json beside it says 2 query heads and 1 key-value
/// head: 2 ranks get one query head each and the key-value head each (`replicas 2`, which
/// the split asks for), and 4 ranks, which would cut inside a head, are refused.
#[test]
fn a_tiny_llama_from_transformers_splits_into_2_ranks_and_joins_back() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let model = fixtures().join("transformers/llama");
    let model = model.to_str().unwrap();
    let expected = fs::read(fixtures().join("transformers/expected.safetensors")).unwrap();
    let rules = fixtures().join("../rules/llama.rules");
    let rules = rules.to_str().unwrap();
    let plain = [
        "split",
        "--ranks",
        "2",
        "--rules",
        rules,
        model,
        "-o",
        "tp{rank}/model.safetensors",
    ];
    let stderr = refused(dir, &plain, 2);
    assert_mentions(
        &stderr,
        &[
            "tensor `model.layers.0.self_attn.k_proj.weight`",
            "2 ranks would cut inside an attention head (2 query and 1 key-value heads, as ",
            "config.json says)",
            // Layer 1's k_proj is refused alike, once.
            "  and 1 more tensor the same rule cuts alike\nhint: give it the rule --axis-for \
             '*.k_proj.weight=0 replicas 2'",
        ],
    );
    let replicated = [
        "--axis-for",
        "*.k_proj.weight=0 replicas 2",
        "--axis-for",
        "*.v_proj.weight=0 replicas 2",
    ];
    succeeds(dir, &[&plain[..], &replicated[..]].concat());
    let mut join = vec!["--rules", rules];
    join.extend(replicated);
    join.extend(["tp0/model.safetensors", "tp1/model.safetensors"]);
    join.extend(["-o", "back.safetensors"]);
    succeeds(dir, &join);
    let back = fs::read(dir.join("back.safetensors")).unwrap();
    assert!(back == expected, "the join differs from the model");
    // 4 ranks of 2 query heads: no rule gives each rank whole heads.
    let four = [
        "split",
        "--ranks",
        "4",
        "--rules",
        rules,
        model,
        "-o",
        "four{rank}.safetensors",
    ];
    let stderr = refused(dir, &[&four[..], &replicated[..]].concat(), 2);
    assert_mentions(
        &stderr,
        &[
            "tensor `model.layers.0.self_attn.q_proj.weight`",
            "4 ranks cannot each get whole heads of 2",
            "hint: split into a number of ranks that divides 2",
        ],
    );
}

/// rules/llama.rules splits the merge fixture's model into the very shards it was merged from.
#[test]
fn llama_rules_split_a_model_into_the_shards_a_merge_joins() {
    let dir = copy_of(&fixtures().join("merge/llama"));
    let dir = dir.path();
    let rules = fixtures().join("../rules/llama.rules");
    let rules = rules.to_str().unwrap();
    let split = [
        "split",
        "--ranks",
        "2",
        "--heads",
        "2",
        "--rules",
        rules,
        "expected.safetensors",
        "-o",
        "out{rank}.safetensors",
    ];
    succeeds(dir, &split);
    for rank in 0..2 {
        crate::util::assert_rank_file(
            &dir.join(format!("out{rank}.safetensors")),
            &dir.join(format!("tp{rank}.safetensors")),
            rank,
            2,
        );
    }
    let join = [
        "--rules",
        rules,
        "out0.safetensors",
        "out1.safetensors",
        "-o",
        "back.safetensors",
    ];
    succeeds(dir, &join);
    assert_eq!(
        fs::read(dir.join("back.safetensors")).unwrap(),
        fs::read(dir.join("expected.safetensors")).unwrap()
    );
}

/// Every tensor of an .npz is cut; FILE:NAME cuts one, into any format.
#[test]
fn whole_files_and_one_named_tensor_split_and_join_back() {
    let dir = copy_of(&fixtures().join("containers/npz"));
    let dir = dir.path();
    succeeds(
        dir,
        &[
            "split",
            "-a",
            "0",
            "--parts",
            "3",
            "day0.npz",
            "-o",
            "d{part}.npz",
        ],
    );
    succeeds(
        dir,
        &["-a", "0", "d0.npz", "d1.npz", "d2.npz", "-o", "back.npz"],
    );
    // x and y come back byte for byte; z, a Fortran-order [3, 3], is cut into single rows,
    // which np.save (and tjoin) store in C order, so the join gives it back in C order: its
    // values, compared as JSON.
    for (member, out) in [("x", "x"), ("y", "y")] {
        let back = format!("back.npz:{member}");
        succeeds(dir, &[&back, "-o", &format!("{out}1.npy")]);
        let original = format!("day0.npz:{member}");
        succeeds(dir, &[&original, "-o", &format!("{out}0.npy")]);
        assert_eq!(
            fs::read(dir.join(format!("{out}1.npy"))).unwrap(),
            fs::read(dir.join(format!("{out}0.npy"))).unwrap(),
            "{member}"
        );
    }
    succeeds(dir, &["back.npz:z", "-o", "z1.json"]);
    succeeds(dir, &["day0.npz:z", "-o", "z0.json"]);
    assert_eq!(
        fs::read(dir.join("z1.json")).unwrap(),
        fs::read(dir.join("z0.json")).unwrap()
    );
    let args = [
        "split",
        "-a",
        "1",
        "--sizes",
        "1,3",
        "day0.npz:x",
        "-o",
        "a.npy",
        "-o",
        "b.safetensors",
    ];
    succeeds(dir, &args);
    succeeds(dir, &["-a", "1", "a.npy", "b.safetensors", "-o", "x.npy"]);
    succeeds(dir, &["day0.npz:x", "-o", "x0.npy"]);
    assert_eq!(
        fs::read(dir.join("x.npy")).unwrap(),
        fs::read(dir.join("x0.npy")).unwrap()
    );
}

#[test]
fn the_dry_run_lists_every_output_its_tensors_slices_and_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    write_npy(&dir.join("x.npy"), "<f4", &[10, 3], false, &[0; 120]);
    let text = succeeds(
        dir,
        &[
            "split",
            "-a",
            "0",
            "--parts",
            "3",
            "x.npy",
            "-o",
            "p{part}.npy",
            "--dry-run",
        ],
    );
    let text = String::from_utf8(text).unwrap();
    assert_mentions(
        &text,
        &[
            "dry run: nothing written; x.npy (npy) splits into 3 files, 120 bytes of data",
            "p0.npy (npy, 48 bytes):",
            "arr_0  float32  [4, 3]  [0:4, :]  48 bytes",
            "arr_0  float32  [3, 3]  [7:10, :]  36 bytes",
        ],
    );
    let json = succeeds(
        dir,
        &[
            "split",
            "-a",
            "1",
            "--sizes",
            "1,2",
            "x.npy",
            "-o",
            "a.npy",
            "-o",
            "b.npy",
            "--dry-run=json",
        ],
    );
    let json: serde_json::Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(json["bytes"], 120);
    assert_eq!(json["outputs"][1]["path"], "b.npy");
    assert_eq!(json["outputs"][1]["tensors"][0]["slices"][0], "[:, 1:3]");
    assert_eq!(
        json["outputs"][1]["tensors"][0]["shape"],
        serde_json::json!([10, 2])
    );
    assert_eq!(json["outputs"][1]["bytes"], 80);
    assert_eq!(dir_entries(dir), ["x.npy"]);
}

#[test]
fn refusals_come_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    write_npy(&dir.join("x.npy"), "<f4", &[10, 3], false, &[0; 120]);
    let stderr = refused(
        dir,
        &[
            "split", "-a", "0", "--sizes", "3,3", "x.npy", "-o", "a.npy", "-o", "b.npy",
        ],
        2,
    );
    assert_mentions(
        &stderr,
        &["cannot split x.npy [10, 3] along axis 0: the sizes 3,3 add up to 6, not to its size 10"],
    );
    let stderr = refused(
        dir,
        &[
            "split",
            "-a",
            "0",
            "--parts",
            "3",
            "--exact",
            "x.npy",
            "-o",
            "p{part}.npy",
        ],
        2,
    );
    assert_mentions(
        &stderr,
        &[
            "its size 10 does not divide into 3 equal parts (--exact)",
            "1, 2, 5, 10",
        ],
    );
    let stderr = refused(
        dir,
        &[
            "split", "-a", "0", "--parts", "2", "x.npy", "-o", "same.npy",
        ],
        2,
    );
    assert_mentions(
        &stderr,
        &[
            "the template makes outputs 0 and 1 the same file, same.npy",
            "{part}",
        ],
    );
    let stderr = refused(
        dir,
        &[
            "split", "-a", "0", "--parts", "2", "x.npy", "-o", "a.npy", "-o", "./a.npy",
        ],
        2,
    );
    assert_mentions(&stderr, &["-o a.npy and -o ./a.npy are the same file"]);
    let stderr = refused(
        dir,
        &[
            "split", "-a", "0", "--parts", "3", "x.npy", "-o", "a.npy", "-o", "b.npy",
        ],
        2,
    );
    assert_mentions(&stderr, &["the split makes 3 outputs, but -o names 2"]);
}

/// An axis the input lacks, a template's unknown field and an existing output under
/// --no-clobber are refused before anything is written.
#[test]
fn refusals_of_the_axis_and_the_outputs_come_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    write_npy(&dir.join("x.npy"), "<f4", &[10, 3], false, &[0; 120]);
    let stderr = refused(
        dir,
        &[
            "split",
            "-a",
            "2",
            "--parts",
            "2",
            "x.npy",
            "-o",
            "p{part}.npy",
        ],
        2,
    );
    assert_mentions(&stderr, &["along axis 2: it has axes 0 to 1"]);
    let stderr = refused(
        dir,
        &[
            "split",
            "-a",
            "0",
            "--parts",
            "2",
            "x.npy",
            "-o",
            "p{rows}.npy",
        ],
        2,
    );
    assert_mentions(&stderr, &["`{rows}` is not a field"]);
    // An existing output with -n: refused, the file untouched, no other output written.
    fs::write(dir.join("p1.npy"), "precious").unwrap();
    let stderr = refused(
        dir,
        &[
            "split",
            "-n",
            "-a",
            "0",
            "--parts",
            "2",
            "x.npy",
            "-o",
            "p{part}.npy",
        ],
        2,
    );
    assert_mentions(
        &stderr,
        &["--no-clobber: 1 of the outputs exist already", "p1.npy"],
    );
    assert_eq!(fs::read(dir.join("p1.npy")).unwrap(), b"precious");
}

/// A model's rank split: a rule's axis that does not divide, and a tensor no rule decides,
/// refused before anything is written.
#[test]
fn refusals_of_a_models_ranks_come_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let model = fixtures().join("merge/llama/expected.safetensors");
    fs::copy(&model, dir.join("m.safetensors")).unwrap();
    let rules = fixtures().join("../rules/llama.rules");
    let stderr = refused(
        dir,
        &[
            "split",
            "--ranks",
            "3",
            "--rules",
            rules.to_str().unwrap(),
            "m.safetensors",
            "-o",
            "tp{rank}.safetensors",
        ],
        2,
    );
    assert_mentions(
        &stderr,
        &[
            "cannot split tensor `lm_head.weight` of m.safetensors [32, 8] along axis 0: its \
             size 32 does not divide into 3 equal pieces",
            "hint: split into a number of ranks that divides it (1, 2, 4, 8, 16, 32)",
            "cannot split tensor `model.layers.0.mlp.down_proj.weight` of m.safetensors \
             [8, 16] along axis 1: its size 16 does not divide into 3 equal pieces",
        ],
    );
    let stderr = refused(
        dir,
        &[
            "split",
            "--ranks",
            "2",
            "--keep",
            "*norm*",
            "m.safetensors",
            "-o",
            "tp{rank}.safetensors",
        ],
        2,
    );
    assert_mentions(
        &stderr,
        &["lm_head.weight` of m.safetensors [32, 8]: no rule says which axis"],
    );
}

/// `-o 'tp{rank}/'` writes each rank as a sharded checkpoint (shards of at most
/// --max-shard-size, and their index), and a sharded checkpoint is an input like any.
#[test]
fn ranks_may_be_sharded_checkpoints_and_inputs_may_be_one() {
    let dir = copy_of(&fixtures().join("merge/llama"));
    let dir = dir.path();
    let rules = fixtures().join("../rules/llama.rules");
    let rules = rules.to_str().unwrap();
    let split = [
        "split",
        "--ranks",
        "2",
        "--heads",
        "2",
        "--rules",
        rules,
        "expected.safetensors",
        "-o",
        "tp{rank}/",
        "--max-shard-size",
        "600",
    ];
    succeeds(dir, &split);
    for rank in 0..2 {
        let folder = dir.join(format!("tp{rank}"));
        assert_eq!(
            dir_entries(&folder),
            [
                "model-00001-of-00004.safetensors",
                "model-00002-of-00004.safetensors",
                "model-00003-of-00004.safetensors",
                "model-00004-of-00004.safetensors",
                "model.safetensors.index.json"
            ]
        );
        // Merged into one file, each rank is the merge fixture's shard.
        let merged = format!("m{rank}.safetensors");
        succeeds(dir, &[&format!("tp{rank}/"), "-o", &merged]);
        assert_eq!(
            fs::read(dir.join(&merged)).unwrap(),
            fs::read(dir.join(format!("tp{rank}.safetensors"))).unwrap()
        );
    }
    // The sharded ranks join back; and a sharded input splits as its merged file does.
    succeeds(
        dir,
        &["--rules", rules, "tp0/", "tp1/", "-o", "back.safetensors"],
    );
    assert_eq!(
        fs::read(dir.join("back.safetensors")).unwrap(),
        fs::read(dir.join("expected.safetensors")).unwrap()
    );
    let split = [
        "split",
        "-a",
        "0",
        "--parts",
        "2",
        "tp0/",
        "-o",
        "half{part}.safetensors",
        "--keep",
        "*norm*",
    ];
    succeeds(dir, &split);
    // Split along axis 0, every tensor: joined back so, each named by --axis-for (a Llama's
    // row-parallel o_proj is joined along axis 1 unless named: `-a 0` is refused).
    succeeds(
        dir,
        &[
            "--axis-for",
            "*=0",
            "--keep",
            "*norm*",
            "half0.safetensors",
            "half1.safetensors",
            "-o",
            "whole.safetensors",
        ],
    );
    assert_eq!(
        fs::read(dir.join("whole.safetensors")).unwrap(),
        fs::read(dir.join("m0.safetensors")).unwrap()
    );
    let stderr = refused(
        dir,
        &[
            "split",
            "-a",
            "0",
            "--parts",
            "2",
            "m0.safetensors",
            "-o",
            "p{part}.npy",
            "--max-shard-size",
            "1GB",
        ],
        2,
    );
    assert_mentions(
        &stderr,
        &["--max-shard-size applies to outputs that name a folder"],
    );
}

/// A rank written as a sharded checkpoint of one shard is the file a rank written as one file
/// is: its tensors in the order safetensors lists them (as its dry run shows), not the
/// input's, whether the outputs are written in lockstep or one after another.
#[test]
fn a_sharded_output_of_one_shard_lists_its_tensors_as_a_file_does() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    // A checkpoint whose tensors torch.save listed in another order than safetensors' own.
    let input = fixtures().join("pytorch/dtypes.pt");
    let input = input.to_str().unwrap();
    let split = [
        "split", "-a", "0", "--parts", "2", "--keep", "scalar", input,
    ];
    for outputs in ["file{part}.safetensors", "folder{part}/"] {
        let args: Vec<&str> = split.iter().copied().chain(["-o", outputs]).collect();
        succeeds(dir, &args);
    }
    for part in 0..2 {
        let file = fs::read(dir.join(format!("file{part}.safetensors"))).unwrap();
        let shard = dir.join(format!("folder{part}/model.safetensors"));
        assert!(fs::read(shard).unwrap() == file, "part {part} differs");
    }
}

/// An interrupt while the outputs are written leaves none of them, nor any temporary file.
#[cfg(unix)]
#[test]
fn an_interrupted_split_leaves_nothing() {
    use crate::util::{killed_by, writing_into};
    use std::process::{Command, Stdio};
    use std::thread::sleep;
    use std::time::{Duration, Instant};

    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    // A Fortran-order input whose parts go to safetensors, in C order: gathered element by
    // element, slowly enough to catch the run in the middle.
    let (rows, cols) = (4096u64, 65536u64);
    let header = npy_header("|u1", &[rows, cols], true);
    let file = fs::File::create(dir.join("big.npy")).unwrap();
    std::io::Write::write_all(&mut &file, &header).unwrap();
    file.set_len(header.len() as u64 + rows * cols).unwrap();
    let child = Command::new(util::bin())
        .current_dir(dir)
        .args([
            "split",
            "-a",
            "0",
            "--parts",
            "2",
            "big.npy",
            "-o",
            "p{part}.safetensors",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !writing_into(child.id(), dir) {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "tjoin never started writing"
        );
        sleep(Duration::from_millis(2));
    }
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    assert!(sent.unwrap().success());
    let output = child.wait_with_output().unwrap();
    assert_eq!(killed_by(output.status), Some(libc::SIGINT));
    assert_eq!(dir_entries(dir), ["big.npy"]);
}

/// Outputs are written in lockstep (each tensor into every output before the next) up to a
/// number of them, fewer for writers that buffer each tensor (JSON); past it one after
/// another. Both ways, on the last axis, join back byte for byte.
#[test]
fn many_outputs_in_lockstep_or_one_after_another_join_back() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let data: Vec<u8> = (0..3 * 40u32)
        .flat_map(|i| (i as f32).to_le_bytes())
        .collect();
    write_npy(&d.join("x.npy"), "<f4", &[3, 40], false, &data);
    for ext in ["npy", "json"] {
        let template = format!("p{{part:02}}.{ext}");
        succeeds(
            d,
            &[
                "split", "-a", "-1", "--parts", "20", "x.npy", "-o", &template,
            ],
        );
        let parts: Vec<String> = (0..20).map(|k| format!("p{k:02}.{ext}")).collect();
        // JSON's nested arrays read back as float64: cast back.
        let mut args = vec!["-a", "-1", "--cast", "float32"];
        args.extend(parts.iter().map(String::as_str));
        args.extend(["-o", "back.npy"]);
        succeeds(d, &args);
        assert_eq!(
            fs::read(d.join("back.npy")).unwrap(),
            fs::read(d.join("x.npy")).unwrap(),
            "{ext}"
        );
    }
}
