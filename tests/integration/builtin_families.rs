//! Families built in (issue 41, items 4 and 5): the shipped rules files are one table in
//! the code (`tjoin rules NAME` prints each; `rules/` is kept in sync here), and a merge
//! given no axis and no rules of a recognized family merges by its built-in rules. The
//! ranks are fixtures/families/ (`fixtures/make_family_fixtures.py`); each family's
//! config.json is written here with the sizes of that script's tiny configurations.

use std::fs;
use std::path::Path;

use crate::families::{FAMILIES, Family};
use crate::util::{assert_mentions, refused, succeeds, tjoin};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The config.json of each family's tiny model, as `make_family_fixtures.py` configures it
/// (Megatron-Core's has no transformers `model_type`: it is told by its names).
pub(crate) fn config(family: &str) -> String {
    let llama = |model_type: &str| {
        format!(
            r#"{{"model_type": "{model_type}", "hidden_size": 32, "intermediate_size": 64,
                "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 64}}"#
        )
    };
    match family {
        "llama" | "vllm" => llama("llama"),
        "mistral" | "qwen2" | "mixtral" => llama(family),
        "gpt2" => r#"{"model_type": "gpt2", "n_embd": 32, "n_head": 4, "vocab_size": 64}"#.into(),
        "gpt-neox" => r#"{"model_type": "gpt_neox", "hidden_size": 32,
                          "num_attention_heads": 4, "vocab_size": 64}"#
            .into(),
        "bert" | "bert-mlm" => {
            let class = if family == "bert" {
                "BertModel"
            } else {
                "BertForMaskedLM"
            };
            format!(
                r#"{{"model_type": "bert", "architectures": ["{class}"], "hidden_size": 32,
                    "num_attention_heads": 4, "vocab_size": 64}}"#
            )
        }
        "phi3" => r#"{"model_type": "phi3", "hidden_size": 32, "num_attention_heads": 8,
                      "num_key_value_heads": 4, "vocab_size": 64}"#
            .into(),
        "megatron-gpt" => r#"{"hidden_size": 32, "num_attention_heads": 8,
                              "num_key_value_heads": 4, "vocab_size": 64}"#
            .into(),
        // transformers' own, written by make_family_fixtures.py beside the model.
        "gemma" | "gemma2" | "deepseek-v2" | "deepseek-v3" => {
            let file = Path::new(ROOT).join(format!("fixtures/families/{family}/config.json"));
            fs::read_to_string(file).unwrap()
        }
        other => panic!("no config for {other}"),
    }
}

/// A folder holding `family`'s ranks of the split into `n` as `tp0.safetensors`, ... and,
/// with `with_config`, its config.json beside them; returns it and the ranks' names.
pub(crate) fn ranks_beside_config(
    family: &Family,
    n: usize,
    with_config: bool,
) -> (tempfile::TempDir, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<String> = (0..n).map(|r| format!("tp{r}.safetensors")).collect();
    for (r, name) in names.iter().enumerate() {
        fs::copy(family.rank(n, r), dir.path().join(name)).unwrap();
    }
    if with_config {
        fs::write(dir.path().join("config.json"), config(family.name)).unwrap();
    }
    (dir, names)
}

#[test]
fn the_rules_folder_is_the_built_in_table_printed() {
    let listed = succeeds(Path::new(ROOT), &["rules"]);
    let names: Vec<String> = String::from_utf8(listed)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(names.len(), 12, "{names:?}");
    let regenerate = std::env::var_os("TJOIN_REGENERATE").is_some();
    for name in &names {
        let printed = succeeds(Path::new(ROOT), &["rules", name]);
        let file = Path::new(ROOT).join("rules").join(format!("{name}.rules"));
        if regenerate {
            fs::write(&file, &printed).unwrap();
        }
        assert!(
            fs::read(&file).unwrap() == printed,
            "rules/{name}.rules differs from `tjoin rules {name}`: run \
             TJOIN_REGENERATE=1 cargo test --test integration the_rules_folder"
        );
    }
    // Every file of rules/ is a family's.
    for entry in fs::read_dir(Path::new(ROOT).join("rules")).unwrap() {
        let file = entry.unwrap().file_name().into_string().unwrap();
        let name = file.strip_suffix(".rules").unwrap();
        assert!(
            names.iter().any(|n| n == name),
            "rules/{file} is no family's"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let stderr = refused(dir.path(), &["rules", "falcon"], 2);
    assert_mentions(
        &stderr,
        &["tjoin knows no model family named falcon", "name one of"],
    );
}

/// `tjoin $(ls -v tp*.safetensors) -o model.safetensors`, config.json beside the ranks:
/// every family and both splits give the original byte for byte, with no flag.
#[test]
fn every_family_merges_with_no_flags_beside_its_config() {
    let mut merges = 0;
    for family in FAMILIES {
        for n in [2, 4] {
            let (dir, names) = ranks_beside_config(family, n, true);
            let mut args: Vec<&str> = names.iter().map(String::as_str).collect();
            args.extend(["-o", "model.safetensors"]);
            succeeds(dir.path(), &args);
            let written = fs::read(dir.path().join("model.safetensors")).unwrap();
            assert!(
                written == fs::read(family.expected()).unwrap(),
                "{} tp{n}: not the original",
                family.name
            );
            merges += 1;
        }
    }
    assert_eq!(merges, 30);
}

/// Without config.json, the families whose shapes prove a merge complete (GPT-2, GPT-NeoX,
/// BERT) still merge with no flag; the others are refused, saying what would prove it.
#[test]
fn without_a_config_the_family_shapes_decide() {
    for family in FAMILIES {
        let (dir, names) = ranks_beside_config(family, 2, false);
        let mut args: Vec<&str> = names.iter().map(String::as_str).collect();
        args.extend(["-o", "model.safetensors"]);
        let output = tjoin()
            .current_dir(dir.path())
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        match family.name {
            "gpt2" | "gpt-neox" | "bert" | "bert-mlm" => {
                assert!(output.status.success(), "{}: {stderr}", family.name);
                let written = fs::read(dir.path().join("model.safetensors")).unwrap();
                assert!(
                    written == fs::read(family.expected()).unwrap(),
                    "{}",
                    family.name
                );
            }
            "phi3" | "vllm" => assert_mentions(&stderr, &["fit the families phi3 and vllm"]),
            _ => assert_mentions(
                &stderr,
                &["cannot tell whether these 2 inputs are every rank of the split"],
            ),
        }
    }
}

/// `tjoin split --ranks N` with a family's rules, then a merge with no flag, at 2 and 4
/// ranks (every family's heads allow both): the records of the split prove it complete, the
/// names tell the family (config.json beside the ranks for Phi-3's and vLLM's fused
/// proportions, and for the replicas of key-value heads shared by 4 ranks): the original,
/// byte for byte.
#[test]
fn a_split_by_ranks_then_a_flagless_merge_round_trips() {
    let mut round_trips = 0;
    for family in FAMILIES {
        for n in [2, 4] {
            let fused = matches!(family.name, "phi3" | "vllm");
            let shared = n == 4 && !family.args(4).iter().all(|a| !a.contains("replicas"));
            let (dir, _) = ranks_beside_config(family, n, fused || shared);
            let dir = dir.path();
            let expected = family.expected();
            let join = family.args(n);
            let mut args: Vec<String> = ["split", "--ranks", &n.to_string(), "--heads", "16"]
                .map(String::from)
                .to_vec();
            args[4] = match family.name {
                "megatron-gpt" | "phi3" => "8:4",
                "gpt2" | "gpt-neox" | "bert" | "bert-mlm" | "deepseek-v2" | "deepseek-v3" => "4",
                _ => "4:2",
            }
            .to_string();
            args.extend(join[..join.len() - 2].iter().cloned());
            args.extend([expected.clone(), "-o".into(), "r{rank}.safetensors".into()]);
            succeeds(dir, &args.iter().map(String::as_str).collect::<Vec<_>>());
            let ranks: Vec<String> = (0..n).map(|r| format!("r{r}.safetensors")).collect();
            let mut merge: Vec<&str> = ranks.iter().map(String::as_str).collect();
            merge.extend(["-o", "m.safetensors"]);
            succeeds(dir, &merge);
            let written = fs::read(dir.join("m.safetensors")).unwrap();
            assert!(
                written == fs::read(&expected).unwrap(),
                "{} tp{n}",
                family.name
            );
            round_trips += 1;
        }
    }
    assert_eq!(round_trips, 30);
}

/// The dry run names the family, what told it, and each tensor's built-in rule.
#[test]
fn the_dry_run_names_the_family_and_the_built_in_rules() {
    let family = FAMILIES.iter().find(|f| f.name == "llama").unwrap();
    let (dir, names) = ranks_beside_config(family, 4, true);
    let mut args = vec!["--dry-run"];
    args.extend(names.iter().map(String::as_str));
    let report = String::from_utf8(succeeds(dir.path(), &args)).unwrap();
    assert_mentions(
        &report,
        &[
            "family: llama, by config.json's model_type `llama` and the tensor names \
             (`.self_attn.q_proj.weight`, `.mlp.gate_proj.weight`)",
            "by config.json's heads:1: *.k_proj.* = 0 replicas 2",
            "by built-in llama.rules:15: *.o_proj.weight = 1",
        ],
    );
}

/// `path`'s tensors but `drop`, written to `to` (a model with tied embeddings has no
/// `lm_head`).
fn without(path: &str, drop: &str, to: &Path) {
    use safetensors::tensor::{SafeTensors, TensorView};
    let bytes = fs::read(path).unwrap();
    let file = SafeTensors::deserialize(&bytes).unwrap();
    let views: Vec<(String, TensorView)> = file
        .tensors()
        .into_iter()
        .filter(|(name, _)| name != drop)
        .collect();
    fs::write(to, safetensors::serialize(views, None).unwrap()).unwrap();
}

/// A tied model (no `lm_head`) merges by the shipped llama.rules, whose `lm_head` line is
/// `optional`: no refusal, no warning, no --allow-unmatched (issue 41, item 9).
#[test]
fn a_tied_model_merges_by_a_rules_file_whose_head_line_is_optional() {
    let family = FAMILIES.iter().find(|f| f.name == "llama").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    for r in 0..2 {
        without(
            &family.rank(2, r),
            "lm_head.weight",
            &dir.join(format!("tp{r}.safetensors")),
        );
    }
    without(
        &family.expected(),
        "lm_head.weight",
        &dir.join("tied.safetensors"),
    );
    let rules = format!("{ROOT}/rules/llama.rules");
    let args = [
        "--rules",
        &rules,
        "--like",
        "tied.safetensors",
        "tp0.safetensors",
        "tp1.safetensors",
        "-o",
        "model.safetensors",
    ];
    let output = tjoin().current_dir(dir).args(args).output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let merged = fs::read(dir.join("model.safetensors")).unwrap();
    let merged = safetensors::tensor::SafeTensors::deserialize(&merged).unwrap();
    assert!(merged.tensor("lm_head.weight").is_err());
    // A line without `optional` that matches nothing is still refused.
    fs::write(dir.join("more.rules"), "lm_head.weight = 0\n").unwrap();
    let args = [
        "--rules",
        "more.rules",
        "--rules",
        &rules,
        "--like",
        "tied.safetensors",
    ];
    let mut args = args.to_vec();
    args.extend([
        "tp0.safetensors",
        "tp1.safetensors",
        "-o",
        "again.safetensors",
    ]);
    let stderr = refused(dir, &args, 2);
    assert_mentions(
        &stderr,
        &["more.rules:1: lm_head.weight = 0 matches no tensor"],
    );
}
