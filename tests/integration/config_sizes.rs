//! Shapes proven by config.json beyond heads and vocabulary (issue 41, item 7): the MLPs'
//! `intermediate_size`, the experts' count (`n_routed_experts`, `num_local_experts`),
//! `tie_word_embeddings`; and, config.json or not, one vocabulary for the embedding and the
//! output head. Each refused merge below wrote a wrong model with exit 0 before.

use std::fs;

use crate::builtin_families::{config, ranks_beside_config};
use crate::families::FAMILIES;
use crate::family_flags::with_ranks as args;
use crate::util::{assert_mentions, refused, succeeds};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// `family`'s ranks of the split into 2 in a folder with its config.json, `edit`ed.
fn ranks_with(family: &str, edit: impl Fn(String) -> String) -> (tempfile::TempDir, Vec<String>) {
    let family = FAMILIES.iter().find(|f| f.name == family).unwrap();
    let (dir, ranks) = ranks_beside_config(family, 2, false);
    fs::write(dir.path().join("config.json"), edit(config(family.name))).unwrap();
    (dir, ranks)
}

/// A config.json whose `intermediate_size` is not the MLPs' (another model's config, or
/// ranks of another model) is refused, naming the MLP's weight.
#[test]
fn an_mlp_of_another_width_than_intermediate_size_is_refused() {
    let (dir, ranks) = ranks_with("llama", |c| {
        c.replace(r#""intermediate_size": 64"#, r#""intermediate_size": 128"#)
    });
    let stderr = refused(dir.path(), &args(&[], &ranks), 2);
    assert_mentions(
        &stderr,
        &[
            "have a size other than config.json gives",
            "model.layers.0.mlp.gate_proj.weight  [64, 32]: 64 along axis 0, but config.json \
             gives 128 (intermediate_size)",
            "model.layers.0.mlp.down_proj.weight  [32, 64]: 64 along axis 1",
        ],
    );
    // DeepSeek's experts are moe_intermediate_size wide, its shared experts that many
    // times n_shared_experts, its dense layer intermediate_size: its own config passes.
    let (dir, ranks) = ranks_with("deepseek-v3", |c| c);
    succeeds(dir.path(), &args(&[], &ranks));
    let (dir, ranks) = ranks_with("deepseek-v3", |c| {
        c.replace(
            r#""moe_intermediate_size": 16"#,
            r#""moe_intermediate_size": 8"#,
        )
    });
    let stderr = refused(dir.path(), &args(&[], &ranks), 2);
    assert_mentions(
        &stderr,
        &[
            "model.layers.1.mlp.experts.0.gate_proj.weight  [16, 32]: 16 along axis 0, but \
             config.json gives 8 (an expert's width)",
            // The 12 routed experts' weights, and the 3 shared experts' (16 = 8 x 2 wide).
            "15 merged tensors have a size other than config.json gives",
        ],
    );
}

/// An expert left out (here by --exclude; a checkpoint missing one) is refused by
/// config.json's expert count.
#[test]
fn a_layer_missing_an_expert_is_refused_by_the_expert_count() {
    for (family, expert) in [
        ("deepseek-v3", "model.layers.1.mlp.experts.3.*"),
        ("mixtral", "model.layers.0.block_sparse_moe.experts.1.*"),
    ] {
        let edit = |c: String| match family {
            "mixtral" => c.replacen('{', r#"{"num_local_experts": 2, "#, 1),
            _ => c,
        };
        let (dir, ranks) = ranks_with(family, edit);
        succeeds(dir.path(), &args(&[], &ranks));
        let stderr = refused(dir.path(), &args(&["--exclude", expert], &ranks), 2);
        let count = if family == "mixtral" {
            "1 experts, numbered 0"
        } else {
            "3 experts, numbered 0-2"
        };
        assert_mentions(
            &stderr,
            &[
                "the merged model is not the one config.json describes",
                &format!("holds {count}, but config.json gives"),
            ],
        );
    }
}

/// config.json's `tie_word_embeddings`: an untied model merged without its output head is
/// refused; a tied one (Gemma) has none and merges.
#[test]
fn an_untied_model_without_its_output_head_is_refused() {
    let (dir, ranks) = ranks_with("deepseek-v3", |c| c);
    let stderr = refused(
        dir.path(),
        &args(&["--exclude", "lm_head.weight"], &ranks),
        2,
    );
    assert_mentions(
        &stderr,
        &[
            "config.json says tie_word_embeddings false, so the model has an output head of its \
             own besides `model.embed_tokens.weight`, but no input holds `lm_head.weight`",
        ],
    );
    let (dir, ranks) = ranks_with("gemma", |c| c);
    assert!(config("gemma").contains(r#""tie_word_embeddings": true"#));
    succeeds(dir.path(), &args(&[], &ranks));
}

/// Without config.json: ranks whose split `tjoin split --ranks` recorded, merged with the
/// output head named onto axis 1, give a head of another vocabulary than the embedding's:
/// refused.
#[test]
fn an_embedding_and_head_of_two_vocabularies_are_refused() {
    let family = FAMILIES.iter().find(|f| f.name == "llama").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let rules = format!("{ROOT}/rules/llama.rules");
    let expected = family.expected();
    let split = [
        "split",
        "--ranks",
        "2",
        "--heads",
        "4:2",
        "--rules",
        &rules,
        &expected,
        "-o",
        "r{rank}.safetensors",
    ];
    succeeds(dir.path(), &split);
    let ranks = ["r0.safetensors".to_string(), "r1.safetensors".to_string()];
    succeeds(dir.path(), &args(&[], &ranks));
    let wrong = ["--rules", &rules, "--axis-for", "lm_head.weight=1"];
    let stderr = refused(dir.path(), &args(&wrong, &ranks), 2);
    assert_mentions(
        &stderr,
        &[
            "the merged embedding and output head disagree: `model.embed_tokens.weight`  \
             [64, 32] and `lm_head.weight`  [32, 64] hold vocabularies of 64 and 32 tokens",
        ],
    );
}
