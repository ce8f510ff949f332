//! Merges that wrote a wrong model with exit 0 (issue 41, items 1 to 3 and 8): a rank
//! missing, the replica groups of tensors `-a` joins, fused tensors whose hint offered the
//! wrong layout. Each test fails on the code before it.

use std::fs;
use std::path::{Path, PathBuf};

use crate::families::refuses;
use crate::util::{assert_mentions, refused, succeeds};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The ranks of fixtures/families/FAMILY split into `n`, rank `r` for each of `which`.
fn ranks(family: &str, n: usize, which: &[usize]) -> Vec<String> {
    which
        .iter()
        .map(|r| format!("{ROOT}/fixtures/families/{family}/tp{n}/tp{r}.safetensors"))
        .collect()
}

fn expected(family: &str) -> PathBuf {
    Path::new(ROOT).join(format!("fixtures/families/{family}/expected.safetensors"))
}

fn rules(family: &str) -> String {
    format!("{ROOT}/rules/{family}.rules")
}

/// The tiny Llama's config.json (fixtures/make_family_fixtures.py's LLAMA_LIKE).
const LLAMA_CONFIG: &str = r#"{"model_type": "llama", "architectures": ["LlamaForCausalLM"],
  "hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 4,
  "num_key_value_heads": 2, "vocab_size": 64, "num_hidden_layers": 2,
  "tie_word_embeddings": false}"#;

fn words(list: &[&str]) -> Vec<String> {
    list.iter().map(|w| w.to_string()).collect()
}

/// A Qwen2 with 2 key-value heads on 4 ranks, joined by `-a 0` with the replicas said for
/// the weights only: the equally replicated biases, joined by `-a`, came out twice as long.
#[test]
fn tensors_joined_by_a_get_the_replica_group_check() {
    let mut args = words(&[
        "-a",
        "0",
        "--keep",
        "*norm.weight",
        "--axis-for",
        "*.k_proj.weight=0 replicas 2",
        "--axis-for",
        "*.v_proj.weight=0 replicas 2",
        "--axis-for",
        "*.o_proj.weight=1",
        "--axis-for",
        "*.down_proj.weight=1",
        "--like",
    ]);
    args.push(expected("qwen2").to_str().unwrap().to_string());
    args.extend(ranks("qwen2", 4, &[0, 1, 2, 3]));
    let stderr = refuses(&args);
    assert_mentions(
        &stderr,
        &[
            "4 tensors joined along an axis have the same bytes in groups of consecutive \
             inputs",
            "model.layers.0.self_attn.k_proj.bias  the same in each group of 2 consecutive \
             inputs; joined by -a 0",
            "--axis-for '*.k_proj.bias=0 replicas 2' --axis-for '*.v_proj.bias=0 replicas 2'",
        ],
    );
    // The hint's flags merge the original.
    let dir = tempfile::tempdir().unwrap();
    let mut fixed = args.clone();
    fixed.splice(
        0..0,
        words(&[
            "--axis-for",
            "*.k_proj.bias=0 replicas 2",
            "--axis-for",
            "*.v_proj.bias=0 replicas 2",
        ]),
    );
    fixed.extend(words(&["-o", "model.safetensors"]));
    let fixed: Vec<&str> = fixed.iter().map(String::as_str).collect();
    succeeds(dir.path(), &fixed);
    let written = fs::read(dir.path().join("model.safetensors")).unwrap();
    assert!(written == fs::read(expected("qwen2")).unwrap());
}

/// GPT-NeoX's `attention.query_key_value` and Megatron-Core's `linear_qkv` hold whole heads
/// or groups per rank: their hint offers `plain` only, never `chunks 3`.
#[test]
fn the_fused_hint_offers_plain_only_for_per_head_layouts() {
    for family in ["gpt-neox", "megatron-gpt"] {
        let mut args = words(&["-a", "0"]);
        args.extend(ranks(family, 2, &[0, 1]));
        let stderr = refuses(&args);
        let hint = stderr
            .lines()
            .find(|l| l.starts_with("hint: say how each rank holds its piece"))
            .unwrap_or_else(|| panic!("{family}: no fused hint:\n{stderr}"));
        let module = match family {
            "gpt-neox" => "query_key_value",
            _ => "linear_qkv",
        };
        assert!(
            hint.contains(&format!("{module}.weight=0 plain' (laid out head by head")),
            "{family}: {hint}"
        );
        assert!(
            !hint.contains(&format!("{module}.weight=0 chunks")),
            "{family}: {hint}"
        );
    }
}

/// `tjoin split --ranks N` records the rank and N in each rank file; a merge of them missing
/// a rank (the last, the first, one in the middle), with ranks swapped, or one twice, is
/// refused by the records; all of them in order merge the original byte for byte.
#[test]
fn rank_counts_recorded_by_split_prove_a_merge_complete() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let expected = expected("gpt2");
    let rules = rules("gpt2");
    let split = [
        "split",
        "--ranks",
        "4",
        "--heads",
        "4",
        "--rules",
        &rules,
        expected.to_str().unwrap(),
        "-o",
        "tp{rank}.safetensors",
    ];
    succeeds(dir, &split);
    let merge = |which: &[usize], extra: &[&str]| {
        let mut args = vec!["--rules".to_string(), rules.clone()];
        args.extend(extra.iter().map(|w| w.to_string()));
        args.extend(which.iter().map(|r| format!("tp{r}.safetensors")));
        args.extend(words(&["-o", "model.safetensors"]));
        args
    };
    let all = merge(&[0, 1, 2, 3], &[]);
    succeeds(dir, &all.iter().map(String::as_str).collect::<Vec<_>>());
    let written = dir.join("model.safetensors");
    assert!(fs::read(&written).unwrap() == fs::read(&expected).unwrap());
    fs::remove_file(&written).unwrap();
    for (which, extra, says) in [
        (&[0, 1, 2][..], &[][..], "given as rank"),
        (&[1, 2, 3][..], &[][..], "records rank 1 of a split into 4"),
        (
            &[0, 1, 3][..],
            &["--any-order"][..],
            "records rank 3 of a split into 4",
        ),
        (
            &[1, 0, 2, 3][..],
            &["--any-order"][..],
            "records rank 1 of a split into 4",
        ),
    ] {
        let args = merge(which, extra);
        let stderr = refused(dir, &args.iter().map(String::as_str).collect::<Vec<_>>(), 2);
        assert_mentions(
            &stderr,
            &[
                "the inputs' metadata records the ranks of their split",
                says,
                "give all 4 ranks' files, each once, in rank order (rank 0 first)",
            ],
        );
    }
    // A rank twice, under another name.
    fs::copy(dir.join("tp1.safetensors"), dir.join("again.safetensors")).unwrap();
    let args = words(&[
        "--rules",
        &rules,
        "tp0.safetensors",
        "tp1.safetensors",
        "again.safetensors",
        "tp3.safetensors",
        "-o",
        "model.safetensors",
    ]);
    let stderr = refused(dir, &args.iter().map(String::as_str).collect::<Vec<_>>(), 2);
    assert_mentions(
        &stderr,
        &[
            "input 3 (again.safetensors) records rank 1 of a split into 4 (ranks count from 0), but is given as rank 2 of 4",
        ],
    );
}

/// config.json's head counts and vocabulary, given with --config or beside the first
/// input, refuse a merge missing a rank, and a row-parallel weight joined on axis 0.
#[test]
fn config_json_sizes_refuse_a_missing_rank_and_a_wrong_axis() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.json");
    fs::write(&config, LLAMA_CONFIG).unwrap();
    let config = config.to_str().unwrap().to_string();
    // One rank of two: it splits evenly.
    let mut args = words(&["--rules", &rules("llama"), "--config", &config]);
    args.extend(ranks("llama", 2, &[0]));
    let stderr = refuses(&args);
    assert_mentions(
        &stderr,
        &[
            "merged tensors have a size other than",
            "model.layers.0.self_attn.q_proj.weight  [16, 32]: 16 along axis 0, but",
            "gives 32 (4 query heads of 8)",
            "model.embed_tokens.weight  [32, 32]: 32 along axis 0, but",
        ],
    );
    // The rules forgotten, the replicated tensors' hint followed: o_proj on axis 0.
    let mut args = words(&["-a", "0", "--keep", "*norm.weight", "--config", &config]);
    args.extend(ranks("llama", 2, &[0, 1]));
    let stderr = refuses(&args);
    assert_mentions(
        &stderr,
        &["model.layers.0.self_attn.o_proj.weight  [64, 16]: 16 along axis 1, but"],
    );
    // Beside the inputs: a copy of the ranks next to the config.
    for r in 0..2 {
        fs::copy(
            &ranks("llama", 2, &[r])[0],
            dir.path().join(format!("tp{r}.safetensors")),
        )
        .unwrap();
    }
    let args = [
        "--rules",
        &rules("llama"),
        "tp0.safetensors",
        "-o",
        "m.safetensors",
    ];
    let stderr = refused(dir.path(), &args, 2);
    assert_mentions(&stderr, &["config.json gives 32 (4 query heads of 8)"]);
    let args = [
        "--rules",
        &rules("llama"),
        "tp0.safetensors",
        "tp1.safetensors",
        "-o",
        "m.safetensors",
    ];
    succeeds(dir.path(), &args);
    let written = fs::read(dir.path().join("m.safetensors")).unwrap();
    assert!(written == fs::read(expected("llama")).unwrap());
}
