//! Sharded checkpoints (`*.safetensors.index.json` sets): read as one input, written as a
//! folder of shards and an index, byte for byte as the Hugging Face libraries write them
//! (the fixtures under fixtures/sharded/ were written by huggingface_hub and safetensors), every
//! refusal, and the folder left as it was by a failure.

use std::fs;
use std::path::{Path, PathBuf};

use crate::util::{assert_mentions, dir_entries, f32_le, refused, succeeds, tjoin, write_npy};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/sharded");

pub(crate) fn fixture(path: &str) -> PathBuf {
    Path::new(FIXTURES).join(path)
}

/// Copies the fixture folder `name` into `dir` as `to`.
pub(crate) fn copy_set(name: &str, dir: &Path, to: &str) -> PathBuf {
    let target = dir.join(to);
    fs::create_dir_all(&target).unwrap();
    for entry in fs::read_dir(fixture(name)).unwrap() {
        let entry = entry.unwrap();
        fs::copy(entry.path(), target.join(entry.file_name())).unwrap();
    }
    target
}

/// Fails unless the folders hold the same names and the same bytes.
#[track_caller]
pub(crate) fn assert_same_folder(actual: &Path, expected: &Path) {
    assert_eq!(
        dir_entries(actual),
        dir_entries(expected),
        "{}",
        actual.display()
    );
    for name in dir_entries(expected) {
        let (a, e) = (fs::read(actual.join(&name)), fs::read(expected.join(&name)));
        assert!(a.unwrap() == e.unwrap(), "{name} differs");
    }
}

pub(crate) fn run(dir: &Path, args: &[&str]) -> std::process::Output {
    tjoin().current_dir(dir).args(args).output().unwrap()
}

#[test]
fn an_index_or_its_folder_merges_into_what_save_file_writes() {
    let dir = tempfile::tempdir().unwrap();
    let index = fixture("model/model.safetensors.index.json");
    let folder = fixture("model");
    for (input, out) in [(&index, "a.safetensors"), (&folder, "b.safetensors")] {
        // One input needs no axis.
        succeeds(dir.path(), &[input.to_str().unwrap(), "-o", out]);
        let written = fs::read(dir.path().join(out)).unwrap();
        assert!(written == fs::read(fixture("expected/model.safetensors")).unwrap());
    }
    for set in ["diffusers", "oversized"] {
        let out = format!("{set}.safetensors");
        succeeds(dir.path(), &[fixture(set).to_str().unwrap(), "-o", &out]);
        let expected = fs::read(fixture(&format!("expected/{set}.safetensors"))).unwrap();
        assert!(
            fs::read(dir.path().join(&out)).unwrap() == expected,
            "{set}"
        );
    }
}

#[test]
fn a_sharded_output_is_what_save_torch_state_dict_writes() {
    let dir = tempfile::tempdir().unwrap();
    // A set re-sharded at the size it was written with comes back byte for byte, whatever
    // its names (diffusers') and with a tensor over the limit.
    for (set, size) in [("model", "400"), ("diffusers", "400"), ("oversized", "500")] {
        let (input, out) = (fixture(set), format!("{set}/"));
        let args = [
            input.to_str().unwrap(),
            "-o",
            &out,
            "--max-shard-size",
            size,
        ];
        succeeds(dir.path(), &args);
        assert_same_folder(&dir.path().join(set), &fixture(set));
    }
}

#[test]
fn merge_then_reshard_and_reshard_then_merge_give_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let model = fixture("model");
    let model = model.to_str().unwrap();
    succeeds(dir.path(), &[model, "-o", "merged.safetensors"]);
    // An index as the output names the folder and the set.
    let args = ["merged.safetensors", "-o", "r/model.safetensors.index.json"];
    succeeds(
        dir.path(),
        &[&args[..], &["--max-shard-size", "0.6KB"]].concat(),
    );
    assert_same_folder(&dir.path().join("r"), &fixture("expected/model_600"));
    succeeds(dir.path(), &[model, "-o", "r2/", "--max-shard-size", "600"]);
    succeeds(dir.path(), &["r2", "-o", "back.safetensors"]);
    let back = fs::read(dir.path().join("back.safetensors")).unwrap();
    assert!(back == fs::read(fixture("expected/model.safetensors")).unwrap());
}

#[test]
fn sharded_tensor_parallel_ranks_join_into_a_sharded_set() {
    let dir = tempfile::tempdir().unwrap();
    let args = fs::read_to_string(fixture("tp/args.txt")).unwrap();
    let mut args: Vec<String> = args.lines().map(String::from).collect();
    // The merged set's header proves the merge complete (issue 41).
    args.extend([
        "--like".to_string(),
        fixture("tp/expected").display().to_string(),
    ]);
    for rank in ["rank0", "rank1"] {
        args.push(fixture(&format!("tp/{rank}")).display().to_string());
    }
    args.extend(["-o".to_string(), "merged/".to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let plan = succeeds(dir.path(), &[&["--dry-run=json"][..], &args].concat());
    assert!(!dir.path().join("merged").exists(), "a dry run wrote");
    let plan: serde_json::Value = serde_json::from_slice(&plan).unwrap();
    let files = plan["shards"]["files"].as_array().unwrap();
    assert_eq!(files.len(), 3);
    assert_eq!(files[0]["name"], "model-00001-of-00003.safetensors");
    assert_eq!(files[0]["tensors"][0], "embed.weight");
    assert_eq!(files[0]["bytes"], 480);
    assert_eq!(plan["shards"]["index"], "model.safetensors.index.json");
    assert_eq!(
        plan["inputs"][0]["index"]["files"]
            .as_array()
            .unwrap()
            .len(),
        4
    );
    let text = succeeds(dir.path(), &[&["--dry-run"][..], &args].concat());
    let text = String::from_utf8(text).unwrap();
    assert_mentions(
        &text,
        &[
            "shards: 3 in merged/",
            "  model-00002-of-00003.safetensors  4 tensors  432 bytes\n    layers.0.norm.weight",
            "model.safetensors.index.json  the index, placed last",
        ],
    );
    succeeds(dir.path(), &args);
    assert_same_folder(&dir.path().join("merged"), &fixture("tp/expected"));
}

#[test]
fn prefix_names_the_files_and_file_colon_name_picks_a_tensor_of_a_set() {
    let dir = tempfile::tempdir().unwrap();
    let model = fixture("model");
    let args = [
        model.to_str().unwrap(),
        "-o",
        "p/",
        "--prefix",
        "pytorch",
        "--max-shard-size",
        "1KB",
    ];
    succeeds(dir.path(), &args);
    assert_eq!(
        dir_entries(&dir.path().join("p")),
        [
            "pytorch-00001-of-00002.safetensors",
            "pytorch-00002-of-00002.safetensors",
            "pytorch.safetensors.index.json"
        ]
    );
    let index = fs::read_to_string(dir.path().join("p/pytorch.safetensors.index.json")).unwrap();
    assert!(
        index.contains("\"logit_scale\": \"pytorch-00002-of-00002.safetensors\""),
        "{index}"
    );
    let one = format!(
        "{}:logit_scale",
        model.join("model.safetensors.index.json").display()
    );
    succeeds(dir.path(), &[&one, "-o", "scale.npy"]);
    let npy = crate::util::read_npy(&dir.path().join("scale.npy"));
    assert_eq!((npy.descr.as_str(), npy.shape.len()), ("<f4", 0));
}

#[test]
fn variants_are_recognised_and_keep_their_names() {
    let dir = tempfile::tempdir().unwrap();
    let set = dir.path().join("unet");
    fs::create_dir(&set).unwrap();
    let prefix = "diffusion_pytorch_model";
    let index = fs::read_to_string(fixture(&format!(
        "diffusers/{prefix}.safetensors.index.json"
    )));
    let index = index
        .unwrap()
        .replace(&format!("{prefix}-"), &format!("{prefix}.fp16-"));
    fs::write(
        set.join(format!("{prefix}.safetensors.index.fp16.json")),
        index,
    )
    .unwrap();
    for i in 1..=3 {
        let shard = format!("-0000{i}-of-00003.safetensors");
        let from = fixture(&format!("diffusers/{prefix}{shard}"));
        fs::copy(from, set.join(format!("{prefix}.fp16{shard}"))).unwrap();
    }
    succeeds(dir.path(), &["unet", "-o", "merged.safetensors"]);
    let merged = fs::read(dir.path().join("merged.safetensors")).unwrap();
    assert!(merged == fs::read(fixture("expected/diffusers.safetensors")).unwrap());
    succeeds(
        dir.path(),
        &["unet", "-o", "again/", "--max-shard-size", "400"],
    );
    assert_same_folder(&dir.path().join("again"), &set);
}

/// A broken copy of the model set in `dir`: `edit` changes the index's text.
fn broken_set(dir: &Path, edit: impl Fn(String) -> String) -> PathBuf {
    let folder = copy_set("model", dir, "ckpt");
    let index = folder.join("model.safetensors.index.json");
    fs::write(&index, edit(fs::read_to_string(&index).unwrap())).unwrap();
    folder
}

#[test]
fn a_missing_or_damaged_shard_is_named_with_its_index() {
    let dir = tempfile::tempdir().unwrap();
    let folder = broken_set(dir.path(), |text| text);
    fs::remove_file(folder.join("model-00003-of-00004.safetensors")).unwrap();
    let stderr = refused(dir.path(), &["ckpt", "-o", "m.safetensors"], 1);
    assert_mentions(
        &stderr,
        &[
            "cannot open input 1 (ckpt/model-00003-of-00004.safetensors)",
            "the index ckpt/model.safetensors.index.json lists it for 3 tensors",
        ],
    );
    fs::write(
        folder.join("model-00003-of-00004.safetensors"),
        b"\x10\0\0\0\0\0\0\0{",
    )
    .unwrap();
    let stderr = refused(dir.path(), &["ckpt", "-o", "m.safetensors"], 1);
    assert_mentions(
        &stderr,
        &[
            "input 1 (ckpt/model-00003-of-00004.safetensors) is not a valid safetensors file",
            "it is a shard the index ckpt/model.safetensors.index.json lists",
        ],
    );
}

#[test]
fn an_index_that_disagrees_with_its_shards_is_refused_with_each_problem() {
    let dir = tempfile::tempdir().unwrap();
    // A tensor mapped to a file that does not hold it (which holds it unlisted there).
    broken_set(dir.path(), |text| {
        text.replace(
            "\"logit_scale\": \"model-00004-of-00004.safetensors\"",
            "\"logit_scale\": \"model-00001-of-00004.safetensors\"",
        )
    });
    let stderr = refused(dir.path(), &["ckpt", "-o", "m.safetensors"], 1);
    assert_mentions(
        &stderr,
        &[
            "the sharded checkpoint ckpt/model.safetensors.index.json does not agree with its shards",
            "the index maps 1 tensor to model-00001-of-00004.safetensors, which does not hold it: logit_scale",
            "model-00004-of-00004.safetensors holds tensor `logit_scale`, which the index maps to model-00001-of-00004.safetensors",
            "hint: ",
        ],
    );
    fs::remove_dir_all(dir.path().join("ckpt")).unwrap();
    // A tensor in a shard that the map does not list.
    broken_set(dir.path(), |text| {
        text.replace(
            "    \"logit_scale\": \"model-00004-of-00004.safetensors\",\n",
            "",
        )
    });
    let stderr = refused(dir.path(), &["ckpt", "-o", "m.safetensors"], 1);
    assert_mentions(
        &stderr,
        &[
            "model-00004-of-00004.safetensors holds tensor `logit_scale`, which the index's weight_map does not list",
        ],
    );
    fs::remove_dir_all(dir.path().join("ckpt")).unwrap();
    // A tensor listed twice.
    broken_set(dir.path(), |text| {
        text.replace(
            "\"logit_scale\": \"model-00004-of-00004.safetensors\",",
            "\"logit_scale\": \"model-00004-of-00004.safetensors\",\n    \"logit_scale\": \"model-00002-of-00004.safetensors\",",
        )
    });
    let stderr = refused(dir.path(), &["ckpt", "-o", "m.safetensors"], 1);
    assert_mentions(
        &stderr,
        &[
            "tensor `logit_scale` is listed twice, in model-00004-of-00004.safetensors and in model-00002-of-00004.safetensors",
        ],
    );
}

#[test]
fn a_wrong_total_size_is_a_warning_and_the_dry_run_shows_both_numbers() {
    let dir = tempfile::tempdir().unwrap();
    broken_set(dir.path(), |text| text.replace("1624", "9999"));
    let output = run(dir.path(), &["ckpt", "-o", "m.safetensors"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_mentions(
        &stderr,
        &[
            "tjoin: warning: ckpt/model.safetensors.index.json: its metadata.total_size says 9999 bytes, but the tensors it maps hold 1624",
        ],
    );
    let merged = fs::read(dir.path().join("m.safetensors")).unwrap();
    assert!(merged == fs::read(fixture("expected/model.safetensors")).unwrap());
    let quiet = run(dir.path(), &["-q", "ckpt", "-o", "m.safetensors"]);
    assert!(quiet.stderr.is_empty());
    let plan = run(dir.path(), &["--dry-run", "ckpt"]);
    let plan = String::from_utf8_lossy(&plan.stdout);
    assert_mentions(
        &plan,
        &[
            "input 1: 4 shards; the index says total_size 9999 bytes, which differs; the tensors hold 1624 bytes",
        ],
    );
}

#[test]
fn a_folder_with_several_indexes_or_none_is_refused_with_what_it_holds() {
    let dir = tempfile::tempdir().unwrap();
    let folder = copy_set("model", dir.path(), "ckpt");
    let index = fs::read(folder.join("model.safetensors.index.json")).unwrap();
    fs::write(folder.join("model.safetensors.index.fp16.json"), index).unwrap();
    let stderr = refused(dir.path(), &["ckpt", "-o", "m.safetensors"], 2);
    assert_mentions(
        &stderr,
        &[
            "input 1 (ckpt) is a folder with 2 indexes of sharded checkpoints",
            "  model.safetensors.index.fp16.json\n  model.safetensors.index.json",
            "hint: name the index to read instead of the folder, e.g. ckpt/model.safetensors.index.fp16.json",
        ],
    );
    fs::remove_file(folder.join("model.safetensors.index.fp16.json")).unwrap();
    fs::remove_file(folder.join("model.safetensors.index.json")).unwrap();
    let stderr = refused(dir.path(), &["ckpt", "-o", "m.safetensors"], 2);
    assert_mentions(
        &stderr,
        &[
            "input 1 (ckpt) is a folder with no *.safetensors.index.json and 4 .safetensors files",
            "  model-00001-of-00004.safetensors\n",
        ],
    );
    // A folder with one .safetensors file is that file.
    let one = dir.path().join("one");
    fs::create_dir(&one).unwrap();
    fs::copy(
        fixture("expected/model.safetensors"),
        one.join("x.safetensors"),
    )
    .unwrap();
    succeeds(dir.path(), &["one", "-o", "o/", "--max-shard-size", "600"]);
    assert_same_folder(&dir.path().join("o"), &fixture("expected/model_600"));
}

#[test]
fn shards_given_one_by_one_are_pointed_to_their_index_or_folder() {
    let dir = tempfile::tempdir().unwrap();
    let folder = copy_set("model", dir.path(), "ckpt");
    let shards: Vec<String> = (1..=4)
        .map(|i| format!("ckpt/model-0000{i}-of-00004.safetensors"))
        .collect();
    let mut args: Vec<&str> = vec!["-a", "0"];
    args.extend(shards.iter().map(String::as_str));
    args.extend(["-o", "m.safetensors"]);
    let stderr = refused(dir.path(), &args, 2);
    assert_mentions(
        &stderr,
        &[
            "the 4 inputs hold different tensors (no name is in two of them)",
            "hint: ckpt/model.safetensors.index.json lists them all: pass it instead",
        ],
    );
    fs::remove_file(folder.join("model.safetensors.index.json")).unwrap();
    let stderr = refused(dir.path(), &args, 2);
    assert_mentions(
        &stderr,
        &["or the folder that holds it, e.g. tjoin ckpt/ -o"],
    );
}

/// A folder as the output is a checkpoint of named tensors: .npy and JSON inputs have none,
/// and `-o existing_dir` was most likely meant as a file in it, so it is refused with the
/// forms that work; `--name` names the tensor, and then the folder gets a checkpoint.
#[test]
fn a_folder_output_for_unnamed_tensors_is_refused_with_the_forms_that_work() {
    let dir = tempfile::tempdir().unwrap();
    write_npy(
        &dir.path().join("a.npy"),
        "<f4",
        &[2],
        false,
        &f32_le(&[1.0, 2.0]),
    );
    let b = r#"{"dtype": "float32", "shape": [1], "data": [3.0]}"#;
    fs::write(dir.path().join("b.json"), b).unwrap();
    fs::create_dir(dir.path().join("existing")).unwrap();
    let join = |out: &str| ["-a", "0", "a.npy", "b.json", "-o", out].map(str::to_string);
    for (out, hint) in [
        ("existing", "such as -o existing/out.npy"),
        ("existing/", "such as -o existing/out.npy"),
        ("new/", "such as -o out.npy"),
        (
            "existing/model.safetensors.index.json",
            "such as -o existing/out.npy",
        ),
    ] {
        let args = join(out);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        for dry_run in [&[][..], &["--dry-run"]] {
            let stderr = refused(dir.path(), &[dry_run, &args].concat(), 2);
            assert_mentions(
                &stderr,
                &[
                    &format!("-o {out}: a folder or an index as the output is a sharded"),
                    "the inputs' tensors have no names",
                    hint,
                    "--name",
                ],
            );
        }
        assert!(dir_entries(&dir.path().join("existing")).is_empty());
    }
    let args = join("existing");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    succeeds(dir.path(), &[&args[..], &["--name", "w"]].concat());
    assert_eq!(
        dir_entries(&dir.path().join("existing")),
        ["model.safetensors"]
    );
}

#[test]
fn shard_flags_need_a_sharded_output() {
    let dir = tempfile::tempdir().unwrap();
    let model = fixture("model");
    let model = model.to_str().unwrap();
    let stderr = refused(
        dir.path(),
        &[model, "-o", "m.safetensors", "--max-shard-size", "2GB"],
        2,
    );
    assert_mentions(
        &stderr,
        &[
            "--max-shard-size applies to sharded outputs only",
            "-o merged/",
        ],
    );
    let stderr = refused(dir.path(), &[model, "-o", "out/", "--format", "npz"], 2);
    assert_mentions(&stderr, &["--format npz", "sharded checkpoint"]);
    let stderr = refused(dir.path(), &[model, "-o", "merged"], 2);
    assert_mentions(&stderr, &["end its name with / (-o merged/)"]);
}

#[test]
fn one_input_is_copied_without_an_axis() {
    let dir = tempfile::tempdir().unwrap();
    let input = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/npy/dml_ex1_axis3/in0.npy");
    succeeds(dir.path(), &[input.to_str().unwrap(), "-o", "copy.npy"]);
    assert!(fs::read(dir.path().join("copy.npy")).unwrap() == fs::read(&input).unwrap());
    // Two inputs still need one.
    let stderr = refused(
        dir.path(),
        &[
            input.to_str().unwrap(),
            input.to_str().unwrap(),
            "-o",
            "two.npy",
        ],
        2,
    );
    assert_mentions(&stderr, &["no axis given"]);
}

#[test]
fn a_set_of_hundreds_of_shards_round_trips_with_its_shards_reopened() {
    use safetensors::tensor::{Dtype, TensorView};
    let dir = tempfile::tempdir().unwrap();
    // 300 tensors, each over the limit: 300 shards, more than a set keeps open.
    let names: Vec<String> = (0..300).map(|i| format!("layer.{i:03}.weight")).collect();
    let data: Vec<Vec<u8>> = (0..300u32).map(|i| i.to_le_bytes().repeat(2)).collect();
    let views: Vec<(&str, TensorView)> = names
        .iter()
        .zip(&data)
        .map(|(name, bytes)| {
            (
                name.as_str(),
                TensorView::new(Dtype::F32, vec![2], bytes).unwrap(),
            )
        })
        .collect();
    let metadata = std::collections::HashMap::from([("format".to_string(), "pt".to_string())]);
    let original = safetensors::serialize(views, Some(metadata)).unwrap();
    fs::write(dir.path().join("big.safetensors"), &original).unwrap();
    succeeds(
        dir.path(),
        &["big.safetensors", "-o", "many/", "--max-shard-size", "4"],
    );
    let files = dir_entries(&dir.path().join("many"));
    assert_eq!(files.len(), 301);
    assert_eq!(files[299], "model-00300-of-00300.safetensors");
    succeeds(dir.path(), &["many", "-o", "back.safetensors"]);
    assert!(fs::read(dir.path().join("back.safetensors")).unwrap() == original);
}

#[cfg(unix)] // ulimit
#[test]
fn a_set_of_more_shards_than_the_open_file_limit_is_read() {
    // 200 shards of one tensor each, read under a limit of 128 open files (tjoin keeps inputs
    // open up to a share of it, here 32): a set that does not fit keeps none open.
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<Vec<u8>> = (0..200u32).map(|i| i.to_le_bytes().repeat(4)).collect();
    let views: Vec<(String, safetensors::tensor::TensorView)> = data
        .iter()
        .enumerate()
        .map(|(i, bytes)| {
            let view =
                safetensors::tensor::TensorView::new(safetensors::Dtype::U32, vec![4], bytes);
            (format!("t{i:03}"), view.unwrap())
        })
        .collect();
    let whole = safetensors::serialize(views, None).unwrap();
    fs::write(dir.path().join("whole.safetensors"), &whole).unwrap();
    let split = ["whole.safetensors", "-o", "set/", "--max-shard-size", "16"];
    succeeds(dir.path(), &split);
    assert_eq!(dir_entries(&dir.path().join("set")).len(), 201);
    let output = crate::reliability::tjoin_limited(
        dir.path(),
        "ulimit -n 128",
        &["set", "-o", "again.safetensors"],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let again = fs::read(dir.path().join("again.safetensors")).unwrap();
    let again = safetensors::SafeTensors::deserialize(&again).unwrap();
    let whole = safetensors::SafeTensors::deserialize(&whole).unwrap();
    let tensors = |s: &safetensors::SafeTensors| {
        let mut all: Vec<(String, Vec<u8>)> = s
            .tensors()
            .into_iter()
            .map(|(name, view)| (name, view.data().to_vec()))
            .collect();
        all.sort();
        all
    };
    assert_eq!(tensors(&again).len(), 200);
    assert!(tensors(&again) == tensors(&whole));
}
