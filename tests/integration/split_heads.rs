//! `tjoin split --ranks` and attention heads: every rank gets whole heads, by the head
//! counts of the config.json beside the model or of --heads, or the split is refused.

use std::fs;
use std::path::{Path, PathBuf};

use crate::util::{assert_mentions, refused, succeeds};

fn heads_fixture(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/split/heads")
        .join(case)
}

/// A copy of the fixture `case`, so that outputs are written beside it.
fn copy_of(case: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in fs::read_dir(heads_fixture(case)).unwrap() {
        let entry = entry.unwrap();
        fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
    }
    dir
}

fn llama_rules() -> String {
    let rules = Path::new(env!("CARGO_MANIFEST_DIR")).join("rules/llama.rules");
    rules.to_str().unwrap().to_string()
}

const K_REPLICAS_4: &str = "*.k_proj.weight=0 replicas 4";
const V_REPLICAS_4: &str = "*.v_proj.weight=0 replicas 4";

/// 1 key-value head into 4 ranks: refused as a cut inside the head, with the exact rule that
/// replicates it; with that rule, each rank holds the whole head and the ranks join back.
#[test]
fn one_key_value_head_into_4_ranks_is_refused_unless_replicated() {
    let dir = copy_of("one_kv");
    let dir = dir.path();
    let rules = llama_rules();
    let split = [
        "split",
        "--ranks",
        "4",
        "--rules",
        &rules,
        "model.safetensors",
        "-o",
        "tp{rank}.safetensors",
    ];
    let stderr = refused(dir, &split, 2);
    assert_mentions(
        &stderr,
        &[
            "cannot split tensor `model.layers.0.self_attn.k_proj.weight` of model.safetensors \
             [2, 8] along axis 0 into 4 ranks: 4 ranks would cut inside an attention head \
             (4 query and 1 key-value heads, as config.json says)",
            "hint: give it the rule --axis-for '*.k_proj.weight=0 replicas 4'",
            "hint: give it the rule --axis-for '*.v_proj.weight=0 replicas 4'",
        ],
    );
    let replicated = ["--axis-for", K_REPLICAS_4, "--axis-for", V_REPLICAS_4];
    succeeds(dir, &[&split[..], &replicated[..]].concat());
    let model = fs::read(dir.join("model.safetensors")).unwrap();
    let mut join = vec!["--rules", &rules];
    join.extend(replicated);
    join.extend([
        "tp0.safetensors",
        "tp1.safetensors",
        "tp2.safetensors",
        "tp3.safetensors",
        "-o",
        "back.safetensors",
    ]);
    succeeds(dir, &join);
    assert!(fs::read(dir.join("back.safetensors")).unwrap() == model);
    // Each rank holds the key-value head whole: its k_proj is the model's.
    let one = |path: &str, out: &str| {
        let tensor = format!("{path}:model.layers.0.self_attn.k_proj.weight");
        succeeds(dir, &[&tensor, "-o", out]);
        fs::read(dir.join(out)).unwrap()
    };
    assert_eq!(
        one("tp2.safetensors", "k2.npy"),
        one("model.safetensors", "k.npy")
    );
}

/// 8 query and 2 key-value heads into 4 ranks with `replicas 2`: rank r holds query heads
/// 2r and 2r+1, key-value head r / 2, and o_proj's columns of its query heads, exactly as
/// the generator's numpy slicing makes them.
#[test]
fn two_key_value_heads_into_4_ranks_give_each_rank_its_head() {
    let dir = copy_of("gqa");
    let dir = dir.path();
    let rules = llama_rules();
    let split = [
        "split",
        "--ranks",
        "4",
        "--rules",
        &rules,
        "--axis-for",
        "*.k_proj.weight=0 replicas 2",
        "--axis-for",
        "*.v_proj.weight=0 replicas 2",
        "model.safetensors",
        "-o",
        "out{rank}.safetensors",
    ];
    succeeds(dir, &split);
    for rank in 0..4 {
        let got = dir.join(format!("out{rank}.safetensors"));
        let want = dir.join(format!("tp{rank}.safetensors"));
        crate::util::assert_rank_file(&got, &want, rank, 4);
    }
    // `replicas 4` would give each rank both heads: refused with the count that fits.
    let mut wrong = split;
    wrong[6] = "*.k_proj.weight=0 replicas 4";
    let stderr = refused(dir, &wrong, 2);
    assert_mentions(
        &stderr,
        &["hint: give it the rule --axis-for '*.k_proj.weight=0 replicas 2'"],
    );
    // --heads says the same as the config.json.
    fs::remove_file(dir.join("config.json")).unwrap();
    let mut flagged = split.to_vec();
    flagged[11] = "x{rank}.safetensors";
    flagged.extend(["--heads", "8:2"]);
    succeeds(dir, &flagged);
    for rank in 0..4 {
        let got = dir.join(format!("x{rank}.safetensors"));
        let want = dir.join(format!("tp{rank}.safetensors"));
        crate::util::assert_rank_file(&got, &want, rank, 4);
    }
}

/// Without head counts, a rank split of attention projections is refused, naming the flag.
#[test]
fn without_head_counts_a_rank_split_of_attention_is_refused() {
    let dir = copy_of("gqa");
    let dir = dir.path();
    fs::remove_file(dir.join("config.json")).unwrap();
    let rules = llama_rules();
    let split = [
        "split",
        "--ranks",
        "2",
        "--rules",
        &rules,
        "model.safetensors",
        "-o",
        "tp{rank}.safetensors",
    ];
    let stderr = refused(dir, &split, 2);
    assert_mentions(
        &stderr,
        &[
            "tjoin cannot tell whether 2 ranks cut inside an attention head",
            "`model.layers.0.self_attn.q_proj.weight`",
            "`model.layers.0.self_attn.o_proj.weight`",
            "hint: put the model's config.json beside it, or give --heads Q:KV",
        ],
    );
    // --parts cuts no ranks: no heads needed.
    succeeds(
        dir,
        &[
            "split",
            "-a",
            "0",
            "--parts",
            "2",
            "model.safetensors:model.layers.0.self_attn.q_proj.weight",
            "-o",
            "q{part}.npy",
        ],
    );
}

/// A config.json that does not state the heads, or is not JSON, is refused, naming it.
#[test]
fn a_malformed_config_json_is_refused() {
    let dir = copy_of("gqa");
    let dir = dir.path();
    let rules = llama_rules();
    let split = [
        "split",
        "--ranks",
        "2",
        "--rules",
        &rules,
        "model.safetensors",
        "-o",
        "tp{rank}.safetensors",
    ];
    for (text, why) in [
        ("{\"num_attention_heads\": 8,", "it is not JSON"),
        ("{\"hidden_size\": 8}", "it has no `num_attention_heads`"),
        (
            "{\"num_attention_heads\": 8, \"num_key_value_heads\": 3}",
            "its 8 attention heads are not a multiple of its 3 key-value heads",
        ),
    ] {
        fs::write(dir.join("config.json"), text).unwrap();
        let stderr = refused(dir, &split, 2);
        assert_mentions(
            &stderr,
            &[
                "cannot read the model's attention heads from config.json: ",
                why,
                "--heads Q:KV",
            ],
        );
    }
    // One longer than tjoin reads of a config (1 MiB) is refused before it is read.
    fs::write(dir.join("config.json"), vec![b' '; (1 << 20) + 1]).unwrap();
    let stderr = refused(dir, &split, 2);
    assert_mentions(
        &stderr,
        &["from config.json: it is longer than 1,048,576 bytes"],
    );
    // A config.json that is a folder is refused too; --heads replaces it.
    fs::remove_file(dir.join("config.json")).unwrap();
    fs::create_dir(dir.join("config.json")).unwrap();
    let stderr = refused(dir, &split, 2);
    assert_mentions(&stderr, &["config.json"]);
    succeeds(dir, &[&split[..], &["--heads", "8:2"][..]].concat());
    // --heads must be whole heads, the query heads a multiple of the key-value heads.
    for bad in ["8:3", "0", "8:x"] {
        let stderr =
            crate::util::fails_cleanly(dir, &[&split[..], &["--heads", bad][..]].concat(), b"", 2);
        assert_mentions(&stderr, &["--heads"]);
    }
}

/// --dry-run shows the head counts the split was checked by and where they come from.
#[test]
fn dry_run_shows_the_heads_and_where_they_come_from() {
    let dir = copy_of("gqa");
    let dir = dir.path();
    let rules = llama_rules();
    let split = [
        "split",
        "--ranks",
        "2",
        "--rules",
        &rules,
        "model.safetensors",
        "-o",
        "tp{rank}.safetensors",
    ];
    let text = succeeds(dir, &[&split[..], &["--dry-run"][..]].concat());
    let text = String::from_utf8(text).unwrap();
    assert!(
        text.contains("attention heads: 8 query, 2 key-value of 2 (from config.json)"),
        "{text}"
    );
    let json = succeeds(
        dir,
        &[&split[..], &["--dry-run=json", "--heads", "8:2"][..]].concat(),
    );
    let json: serde_json::Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(
        json["heads"],
        serde_json::json!({"query": 8, "key_value": 2, "head_dim": null, "from": "--heads"})
    );
}
