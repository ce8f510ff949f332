//! The model families tjoin knows, as one table: each family's rules file (`tjoin rules
//! NAME` prints it; `rules/` holds the same files), how config.json names it (`model_type`,
//! `architectures`), the tensor names that tell it, and the rules its head counts add (the
//! `replicas` of key-value heads shared by ranks, the proportions of a fused `qkv_proj`).
//!
//! A merge given no axis and no rules (`tjoin $(ls -v tp*/model.safetensors) -o
//! model.safetensors`) of a recognized family merges by its built-in rules; the other checks
//! (a proof of completeness, config.json's sizes, each layer's shapes) apply as ever.

use std::path::Path;

use crate::error::{Error, Result};
use crate::plan::complete::ModelSizes;
use crate::plan::rules::{self, Origin, Rule};

pub mod flags;
mod texts;

/// What a family's head counts add to its rules, with the ranks' count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FromHeads {
    /// Nothing.
    Nothing,
    /// More ranks than key-value heads: `k_proj` and `v_proj` (weights and biases) are held
    /// by groups of consecutive ranks (`replicas N`, N = ranks / key-value heads).
    KeyValueReplicas,
    /// A fused `qkv_proj` (the glob) of q, k and v heads (`chunks Q:K:K`); with `true`, its
    /// k and v held by groups of ranks when there are more ranks than key-value heads
    /// (`replicas 1:N:N`).
    FusedQkv(&'static str, bool),
}

/// One model family.
#[derive(Debug)]
pub struct Family {
    /// Its name: `tjoin rules NAME`, and `rules/NAME.rules`.
    pub name: &'static str,
    /// The rules file's text.
    pub text: &'static str,
    /// config.json's `model_type` values it has.
    pub model_types: &'static [&'static str],
    /// config.json's `architectures` it has.
    pub architectures: &'static [&'static str],
    /// Pieces of tensor names it holds: each is in some name.
    pub signature: &'static [&'static str],
    /// Pieces of tensor names it never holds.
    pub lacks: &'static [&'static str],
    /// What its head counts add to its rules.
    pub from_heads: FromHeads,
}

/// Every family, most particular first (Mixtral before Llama, whose names it shares).
pub const FAMILIES: &[Family] = &[
    Family {
        name: "deepseek",
        text: texts::DEEPSEEK,
        model_types: &["deepseek_v2", "deepseek_v3"],
        architectures: &["DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM"],
        signature: &[".self_attn.kv_b_proj."],
        lacks: &[],
        from_heads: FromHeads::Nothing,
    },
    Family {
        name: "mixtral",
        text: texts::MIXTRAL,
        model_types: &["mixtral"],
        architectures: &["MixtralForCausalLM"],
        signature: &[".block_sparse_moe.experts."],
        lacks: &[],
        from_heads: FromHeads::KeyValueReplicas,
    },
    Family {
        name: "megatron-gpt",
        text: texts::MEGATRON_GPT,
        model_types: &[],
        architectures: &[],
        signature: &[".self_attention.linear_qkv."],
        lacks: &[],
        from_heads: FromHeads::Nothing,
    },
    Family {
        name: "gpt-neox",
        text: texts::GPT_NEOX,
        model_types: &["gpt_neox"],
        architectures: &["GPTNeoXForCausalLM", "GPTNeoXModel"],
        signature: &[".attention.query_key_value.", "embed_in."],
        lacks: &[],
        from_heads: FromHeads::Nothing,
    },
    Family {
        name: "gpt2",
        text: texts::GPT2,
        model_types: &["gpt2"],
        architectures: &["GPT2LMHeadModel", "GPT2Model"],
        signature: &[".attn.c_attn."],
        lacks: &[],
        from_heads: FromHeads::Nothing,
    },
    Family {
        name: "bert-mlm",
        text: texts::BERT_MLM,
        model_types: &[],
        architectures: &["BertForMaskedLM"],
        signature: &[".attention.self.query.", "cls.predictions."],
        lacks: &[],
        from_heads: FromHeads::Nothing,
    },
    Family {
        name: "bert",
        text: texts::BERT,
        model_types: &["bert"],
        architectures: &["BertModel"],
        signature: &[".attention.self.query."],
        lacks: &["cls.predictions."],
        from_heads: FromHeads::Nothing,
    },
    Family {
        name: "phi3",
        text: texts::PHI3,
        model_types: &["phi3"],
        architectures: &["Phi3ForCausalLM"],
        signature: &[".self_attn.qkv_proj.", ".mlp.gate_up_proj."],
        lacks: &[],
        from_heads: FromHeads::FusedQkv("*.qkv_proj.weight", false),
    },
    Family {
        name: "vllm",
        text: texts::VLLM,
        model_types: &["llama", "mistral", "qwen2"],
        architectures: &["LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM"],
        signature: &[".self_attn.qkv_proj.", ".mlp.gate_up_proj."],
        lacks: &[],
        from_heads: FromHeads::FusedQkv("*.qkv_proj.*", true),
    },
    Family {
        name: "qwen2",
        text: texts::QWEN2,
        model_types: &["qwen2"],
        architectures: &["Qwen2ForCausalLM"],
        signature: &[".self_attn.q_proj.bias", ".mlp.gate_proj.weight"],
        lacks: &[".block_sparse_moe."],
        from_heads: FromHeads::KeyValueReplicas,
    },
    Family {
        name: "llama",
        text: texts::LLAMA,
        model_types: &["llama", "mistral"],
        architectures: &["LlamaForCausalLM", "MistralForCausalLM"],
        signature: &[".self_attn.q_proj.weight", ".mlp.gate_proj.weight"],
        lacks: &[
            ".self_attn.q_proj.bias",
            ".block_sparse_moe.",
            ".pre_feedforward_layernorm.",
        ],
        from_heads: FromHeads::KeyValueReplicas,
    },
    // Gemma's names are Llama's, and so are its rules: names alone tell Llama (the same
    // merge); config.json's model_type tells Gemma, and Gemma 2's extra norms do.
    Family {
        name: "gemma",
        text: texts::GEMMA,
        model_types: &["gemma", "gemma2"],
        architectures: &["GemmaForCausalLM", "Gemma2ForCausalLM"],
        signature: &[".self_attn.q_proj.weight", ".mlp.gate_proj.weight"],
        lacks: &[".self_attn.q_proj.bias", ".block_sparse_moe."],
        from_heads: FromHeads::KeyValueReplicas,
    },
];

/// How the rules of a family's built-in file are named (`built-in llama.rules:15`), and
/// those its head counts add (`config.json's heads:1`).
const BUILT_IN: &str = "built-in ";
const FROM_HEADS: &str = "'s heads";

/// Whether `rule` is a line of a family's built-in rules file, or one its heads add.
pub fn is_built_in(rule: &Rule) -> bool {
    let Origin::File { path, .. } = &rule.origin else {
        return false;
    };
    let text = path.to_string_lossy();
    text.starts_with(BUILT_IN) || text.ends_with(FROM_HEADS)
}

/// The family named `name` (`tjoin rules NAME`).
pub fn by_name(name: &str) -> Option<&'static Family> {
    FAMILIES.iter().find(|f| f.name == name)
}

impl Family {
    /// Whether the tensor names `names` are this family's.
    fn fits(&self, names: &[&str]) -> bool {
        let holds = |piece: &&str| names.iter().any(|n| n.contains(piece));
        self.signature.iter().all(holds) && !self.lacks.iter().any(holds)
    }

    /// Whether this family's rules are `other`'s, line for line (Gemma's and Llama's):
    /// names that fit both merge the same by either.
    fn same_rules(&self, other: &Family) -> bool {
        let rules = |f: &Family| -> Option<Vec<(String, rules::Treatment, String, bool)>> {
            let parsed = rules::parse_file(Path::new(f.name), f.text).ok()?;
            let lines = parsed.into_iter();
            Some(
                lines
                    .map(|r| (r.glob, r.treatment, r.parts.to_string(), r.optional))
                    .collect(),
            )
        };
        self.from_heads == other.from_heads && rules(self).is_some_and(|a| Some(a) == rules(other))
    }

    /// Whether config.json (its `model_type` and `architectures`) names this family.
    fn named_by(&self, model: &ModelSizes) -> bool {
        let typed = model
            .model_type
            .as_deref()
            .is_some_and(|t| self.model_types.contains(&t));
        let built = model
            .architectures
            .iter()
            .any(|a| self.architectures.contains(&a.as_str()));
        typed || built
    }

    /// Its rules for a merge of `ranks` inputs: those its head counts add (config.json's,
    /// named as such), then its rules file's lines, none required to match a tensor (a tied
    /// `lm_head` is absent, a pooler may be).
    pub fn rules(&self, ranks: usize, model: Option<&ModelSizes>) -> Result<Vec<Rule>> {
        let mut derived = String::new();
        let heads = model.and_then(|m| m.heads.as_ref().map(|h| (m, h)));
        if let Some((_, heads)) = heads {
            let ranks = ranks as u64;
            let shared = ranks > heads.key_value && ranks % heads.key_value == 0;
            let n = ranks / heads.key_value.max(1);
            match self.from_heads {
                FromHeads::Nothing => {}
                FromHeads::KeyValueReplicas if shared => {
                    derived.push_str(&format!("*.k_proj.* = 0 replicas {n}\n"));
                    derived.push_str(&format!("*.v_proj.* = 0 replicas {n}\n"));
                }
                FromHeads::KeyValueReplicas => {}
                FromHeads::FusedQkv(glob, replicated) => {
                    let (q, k) = (heads.query, heads.key_value);
                    derived.push_str(&format!("{glob} = 0 chunks {q}:{k}:{k}"));
                    if replicated && shared {
                        derived.push_str(&format!(" replicas 1:{n}:{n}"));
                    }
                    derived.push('\n');
                }
            }
        }
        let mut all = Vec::new();
        if !derived.is_empty() {
            let from = heads.map_or("config.json", |(m, _)| &m.from);
            let from = format!("{from}{FROM_HEADS}");
            all.extend(rules::parse_file(Path::new(&from), &derived)?);
        }
        let file = format!("{BUILT_IN}{}.rules", self.name);
        all.extend(rules::parse_file(Path::new(&file), self.text)?);
        for rule in &mut all {
            rule.required = false;
        }
        Ok(all)
    }
}

/// The families whose rules a merge given flags (`-a`, `--rules`) must not contradict
/// (`flags`): the one config.json (`model`) settles among those the names fit, else every
/// family that fits the names as closely as the first that fits (Phi-3's and vLLM's fused
/// names); none when no family fits.
pub fn candidates(names: &[&str], model: Option<&ModelSizes>) -> Vec<&'static Family> {
    let fitting: Vec<&'static Family> = FAMILIES.iter().filter(|f| f.fits(names)).collect();
    if let Some(model) = model
        && let Some(&family) = fitting.iter().find(|f| f.named_by(model))
    {
        return vec![family];
    }
    let Some(&first) = fitting.first() else {
        return Vec::new();
    };
    fitting
        .into_iter()
        .filter(|f| f.signature == first.signature)
        .collect()
}

/// The family of a merge whose tensors are named `names`, and what tells it; `None` when
/// none fits. config.json (`model`), when there is one, picks among the families the names
/// fit; names that fit several families that it does not settle (Phi-3's and vLLM's fused
/// `qkv_proj`) are refused, asking for it.
pub fn recognize(
    names: &[&str],
    model: Option<&ModelSizes>,
) -> Result<Option<(&'static Family, String)>> {
    let fitting: Vec<&Family> = FAMILIES.iter().filter(|f| f.fits(names)).collect();
    let pieces = |f: &Family| {
        let pieces: Vec<String> = f.signature.iter().map(|p| format!("`{p}`")).collect();
        pieces.join(", ")
    };
    if let Some(model) = model {
        let named: Vec<&Family> = FAMILIES.iter().filter(|f| f.named_by(model)).collect();
        if let Some(family) = fitting
            .iter()
            .find(|f| named.iter().any(|n| n.name == f.name))
        {
            let says = match &model.model_type {
                Some(t) => format!("model_type `{}`", crate::messages::name(t)),
                None => "architectures".to_string(),
            };
            let evidence = format!(
                "{}'s {says} and the tensor names ({})",
                model.from,
                pieces(family)
            );
            return Ok(Some((family, evidence)));
        }
    }
    // The first fitting family, unless another one fits the names as well and is not one it
    // is more particular than (every fitting family's signature is in the table's order).
    let Some(&first) = fitting.first() else {
        return Ok(None);
    };
    let alike: Vec<&str> = fitting
        .iter()
        .filter(|f| f.signature == first.signature && !f.same_rules(first))
        .map(|f| f.name)
        .collect();
    let alike: Vec<&str> = match alike.as_slice() {
        [] => Vec::new(),
        _ => std::iter::once(first.name).chain(alike).collect(),
    };
    if alike.len() > 1 {
        return Err(Error::refused(
            format!(
                "the tensor names ({}) fit the families {}: tjoin cannot tell which rules \
                 merge them",
                pieces(first),
                alike.join(" and ")
            ),
            format!(
                "put the model's config.json beside the first input or give --config FILE \
                 (its model_type tells them apart, and its heads give the fused proportions), \
                 or give the rules: --rules rules/{}.rules",
                alike[0]
            ),
        ));
    }
    Ok(Some((
        first,
        format!("the tensor names ({})", pieces(first)),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_text_is_a_rules_file() {
        for family in FAMILIES {
            let rules = family.rules(2, None).unwrap();
            assert!(!rules.is_empty(), "{}", family.name);
            assert!(rules.iter().all(|r| !r.required));
        }
    }

    #[test]
    fn names_tell_the_family_and_config_settles_the_fused_ones() {
        let llama = [
            "model.layers.0.self_attn.q_proj.weight",
            "model.layers.0.mlp.gate_proj.weight",
        ];
        assert_eq!(recognize(&llama, None).unwrap().unwrap().0.name, "llama");
        let qwen = [llama[0], llama[1], "model.layers.0.self_attn.q_proj.bias"];
        assert_eq!(recognize(&qwen, None).unwrap().unwrap().0.name, "qwen2");
        let fused = [
            "model.layers.0.self_attn.qkv_proj.weight",
            "model.layers.0.mlp.gate_up_proj.weight",
        ];
        assert!(recognize(&fused, None).is_err());
        let text = r#"{"model_type": "phi3", "hidden_size": 32, "num_attention_heads": 8,
                       "num_key_value_heads": 4, "vocab_size": 64}"#;
        let model = ModelSizes::from_config(text, "config.json").unwrap();
        let (family, evidence) = recognize(&fused, Some(&model)).unwrap().unwrap();
        assert_eq!(family.name, "phi3");
        assert!(
            evidence.starts_with("config.json's model_type `phi3`"),
            "{evidence}"
        );
        let rules = family.rules(2, Some(&model)).unwrap();
        assert_eq!(
            rules[0].to_string(),
            "config.json's heads:1: *.qkv_proj.weight = 0 chunks 8:4:4"
        );
        assert!(recognize(&["w", "b"], None).unwrap().is_none());
    }

    #[test]
    fn more_ranks_than_key_value_heads_add_their_replicas() {
        let text = r#"{"model_type": "llama", "hidden_size": 32, "num_attention_heads": 4,
                       "num_key_value_heads": 2, "vocab_size": 64}"#;
        let model = ModelSizes::from_config(text, "config.json").unwrap();
        let llama = by_name("llama").unwrap();
        let at = |n| llama.rules(n, Some(&model)).unwrap()[0].to_string();
        assert_eq!(at(4), "config.json's heads:1: *.k_proj.* = 0 replicas 2");
        assert!(at(2).starts_with("built-in llama.rules:"), "{}", at(2));
    }
}
