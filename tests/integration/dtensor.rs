//! FSDP2 / DTensor rank files: each rank's `torch.save(model.state_dict(), ...)` of DTensors
//! (fixtures/dtensor/, written by torch on gloo processes), consolidated byte for byte into
//! what `full_tensor()` + safetensors' save_file write; and the refusals of rank files that
//! do not make one state dict.

use std::fs;
use std::path::{Path, PathBuf};

use crate::util::{assert_mentions, dir_entries, refused, succeeds};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/dtensor");

/// The ranks' files of the fixture `case`, in rank order.
fn rank_files(case: &str) -> Vec<String> {
    let folder = Path::new(FIXTURES).join(case);
    dir_entries(&folder)
        .into_iter()
        .filter(|name| name.ends_with(".pt"))
        .map(|name| folder.join(name).to_string_lossy().into_owned())
        .collect()
}

fn expected(case: &str) -> Vec<u8> {
    fs::read(Path::new(FIXTURES).join(case).join("expected.safetensors")).unwrap()
}

/// Runs tjoin on `inputs` and `extra` in a fresh folder; the output's bytes.
fn consolidated(inputs: &[String], extra: &[&str]) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let mut args: Vec<&str> = inputs.iter().map(String::as_str).collect();
    args.extend(extra);
    args.extend(["-o", "out.safetensors"]);
    succeeds(dir.path(), &args);
    fs::read(dir.path().join("out.safetensors")).unwrap()
}

/// The refusal of `inputs` and `extra`, exit code 2, with nothing written.
fn refusal(inputs: &[String], extra: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut args: Vec<&str> = inputs.iter().map(String::as_str).collect();
    args.extend(extra);
    args.extend(["-o", "out.safetensors"]);
    let stderr = refused(dir.path(), &args, 2);
    assert!(dir_entries(dir.path()).is_empty(), "{stderr}");
    stderr
}

#[test]
fn rank_files_consolidate_into_what_full_tensor_and_save_file_write() {
    // FSDP2 fully_shard on 2 and 4 ranks (uneven rows: a rank's block may be one row or
    // none; int64, bool and 0-d buffers every rank holds whole), and distribute_tensor on a
    // 2x2 mesh (blocks cut on two axes, one axis cut by both mesh dimensions, replicated
    // along one dimension or both, bfloat16, int32, a 0-d DTensor, a plain tensor).
    for case in ["fsdp2_ws2", "fsdp2_ws4", "mesh2x2", "distribute_ws2"] {
        let out = consolidated(&rank_files(case), &[]);
        assert!(
            out == expected(case),
            "{case} differs from its expected file"
        );
    }
}

#[test]
fn a_folder_of_rank_files_is_one_input_in_any_order() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("checkpoint");
    fs::create_dir(&folder).unwrap();
    for file in rank_files("fsdp2_ws4") {
        let file = PathBuf::from(file);
        fs::copy(&file, folder.join(file.file_name().unwrap())).unwrap();
    }
    succeeds(dir.path(), &["checkpoint", "-o", "out.safetensors"]);
    assert!(fs::read(dir.path().join("out.safetensors")).unwrap() == expected("fsdp2_ws4"));
    // Named in another order (as a shell lists rank_10 before rank_2), the ranks' own
    // records place the blocks.
    let mut reversed = rank_files("fsdp2_ws4");
    reversed.reverse();
    assert!(consolidated(&reversed, &[]) == expected("fsdp2_ws4"));
    // Other numbered inputs out of order are still refused.
    let dir = tempfile::tempdir().unwrap();
    let mut npys = Vec::new();
    for i in [1, 0] {
        let name = format!("rank_{i}.npy");
        crate::util::write_npy(&dir.path().join(&name), "<f4", &[1], false, &[0; 4]);
        npys.push(name);
    }
    let stderr = refused(
        dir.path(),
        &[&npys[0], &npys[1], "-a", "0", "-o", "out.npy"],
        2,
    );
    assert_mentions(&stderr, &["not given in the numbers' order"]);
}

#[test]
fn a_missing_rank_or_a_rank_given_twice_is_refused() {
    let mut files = rank_files("fsdp2_ws4");
    files.pop();
    let stderr = refusal(&files, &[]);
    assert_mentions(
        &stderr,
        &[
            "the rank files of a world of 4 ranks lack rank 3",
            "hint: name every rank's file",
            "rank 2: input 3 (",
            "model_world_size_4_rank_2.pt)",
        ],
    );
    // Rank 0 twice: by its name, and (with --any-order) by the rank its DTensors record.
    let files = rank_files("fsdp2_ws2");
    let twice = vec![files[0].clone(), files[0].clone(), files[1].clone()];
    assert_mentions(&refusal(&twice, &[]), &["rank 0 is given twice"]);
    let stderr = refusal(&twice, &["--any-order"]);
    assert_mentions(
        &stderr,
        &[
            "rank 0 is given twice: input 1 (",
            "and input 2 (",
            "hint: ",
        ],
    );
    // Files of two runs: their names and meshes disagree.
    let mixed = vec![files[0].clone(), rank_files("fsdp2_ws4")[1].clone()];
    let stderr = refusal(&mixed, &[]);
    assert_mentions(
        &stderr,
        &["the files' names give different world sizes (2, 4)"],
    );
}

#[test]
fn ranks_that_disagree_on_a_global_shape_are_refused_naming_the_tensor() {
    let stderr = refusal(&rank_files("bad_shape"), &[]);
    assert_mentions(
        &stderr,
        &[
            "the ranks disagree on tensor `rows`",
            "rank 0: float32 of global shape [3, 4] placed (Shard(0)) on a mesh of shape [2]",
            "rank 1: float32 of global shape [4, 4]",
            "hint: ",
        ],
    );
}

#[test]
fn replicas_that_differ_are_refused_naming_files_tensor_and_region() {
    // Rank 1's int64 buffer `positions` differs from rank 0's in its third element.
    let stderr = refusal(&rank_files("bad_replica"), &[]);
    assert_mentions(
        &stderr,
        &[
            "values that several ranks hold",
            "model_world_size_2_rank_1.pt:positions) (its block [0:6]): its data differs from \
             byte 16 (element 2) from input 1 (",
            "model_world_size_2_rank_0.pt:positions)",
            "hint: ",
        ],
    );
}

#[test]
fn a_partial_placement_is_refused_by_name() {
    let stderr = refusal(&rank_files("bad_partial"), &[]);
    assert_mentions(
        &stderr,
        &[
            "model_world_size_2_rank_0.pt:sum)",
            "Partial placement",
            "full_tensor()",
        ],
    );
}

#[test]
fn rank_files_mixed_with_other_inputs_are_refused() {
    let mut files = rank_files("fsdp2_ws2");
    files.push(format!("{FIXTURES}/fsdp2_ws2/expected.safetensors"));
    let stderr = refusal(&files, &[]);
    assert_mentions(
        &stderr,
        &["2 of the 3 inputs are rank files of DTensors", "hint: "],
    );
}

#[test]
fn a_dry_run_shows_the_blocks_and_the_replicas_kept_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut args: Vec<String> = rank_files("mesh2x2");
    args.push("--dry-run".to_string());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let text = String::from_utf8(succeeds(dir.path(), &args)).unwrap();
    assert_mentions(
        &text,
        &[
            "17 blocks in 4 files",
            "grid        blocks 2 x 2 on axes 0, 1  float32   [5, 3]",
            "zero_d      blocks whole               float32   []",
            "    [3:5, 2:3]  input 4 (",
            "copies of blocks that several ranks hold",
            "DTensor rank files of ranks 0 to 3 (a world of 4, by the files' names): each \
             block is placed by its DTensor's placements and the mesh coordinate its file \
             records",
        ],
    );
    // --keep keeps a replicated tensor (its copies compared); a sharded one is refused.
    consolidated(&rank_files("mesh2x2"), &["--keep", "everywhere"]);
    assert_mentions(
        &refusal(&rank_files("mesh2x2"), &["--keep", "grid"]),
        &["tensor `grid` matches --keep but is not the same in every input"],
    );
}

#[test]
fn a_folder_with_several_sets_reads_the_models_or_refuses() {
    // verl's folder: model_, optim_ and extra_state_ files of every rank.
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("actor");
    fs::create_dir(&folder).unwrap();
    for file in rank_files("fsdp2_ws2") {
        let file = PathBuf::from(file);
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        fs::copy(&file, folder.join(&name)).unwrap();
        fs::copy(&file, folder.join(name.replace("model_", "optim_"))).unwrap();
    }
    let text = String::from_utf8(succeeds(dir.path(), &["actor", "--dry-run"])).unwrap();
    assert_mentions(
        &text,
        &[
            "read `model_world_size_2_rank_*.pt`, the model's; left out \
             `optim_world_size_2_rank_*.pt`",
        ],
    );
    succeeds(dir.path(), &["actor", "-o", "out.safetensors"]);
    assert!(fs::read(dir.path().join("out.safetensors")).unwrap() == expected("fsdp2_ws2"));
    for name in dir_entries(&folder) {
        if name.starts_with("model_") {
            fs::rename(
                folder.join(&name),
                folder.join(name.replace("model_", "ema_")),
            )
            .unwrap();
        }
    }
    let stderr = refused(dir.path(), &["actor", "-o", "out2.safetensors"], 2);
    assert_mentions(
        &stderr,
        &[
            "holds 2 sets of rank files",
            "ema_world_size_2_rank_*.pt",
            "hint: ",
        ],
    );
}

#[test]
fn a_world_size_past_the_limit_is_refused_not_counted() {
    // A name whose world size is absurd: refused at once, never a loop over its ranks.
    let dir = tempfile::tempdir().unwrap();
    let files = rank_files("fsdp2_ws2");
    for (rank, file) in files.iter().enumerate() {
        let name = format!("model_world_size_99999999999_rank_{rank}.pt");
        fs::copy(file, dir.path().join(name)).unwrap();
    }
    let stderr = refused(
        dir.path(),
        &[
            "model_world_size_99999999999_rank_0.pt",
            "model_world_size_99999999999_rank_1.pt",
            "-o",
            "out.safetensors",
        ],
        2,
    );
    assert_mentions(
        &stderr,
        &["give a world of 99999999999 ranks, more than tjoin reads"],
    );
}
