//! What config.json says of a model beyond its heads and vocabulary (issue 41, item 7): the
//! width of its MLPs (`intermediate_size`, a mixture of experts' `moe_intermediate_size`,
//! DeepSeek's shared experts), how many experts a layer has (`num_local_experts`,
//! `n_routed_experts`, `num_experts`) and whether the output head is the embedding
//! (`tie_word_embeddings`); and, with or without config.json, that the embedding and the
//! output head hold the same vocabulary. A merged tensor that breaks one of these is a rank
//! missing, a wrong axis or two splits mixed, which `plan::complete` refuses.

use std::collections::{BTreeMap, BTreeSet};

use crate::messages::{excerpt, shape_text};
use crate::plan::heads::Object;

/// The sizes of config.json this module checks, each when config.json states it as a
/// positive whole number (a list of per-layer widths states none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Widths {
    /// `intermediate_size`: a dense MLP's width.
    pub intermediate: Option<u64>,
    /// `moe_intermediate_size`: one expert's width (else `intermediate_size`, as Mixtral's).
    pub expert: Option<u64>,
    /// `n_shared_experts`: DeepSeek's shared experts, one MLP of `expert` x this width.
    pub shared: Option<u64>,
    /// `num_local_experts`, `n_routed_experts` or `num_experts`: experts in a layer.
    pub experts: Option<u64>,
    /// `tie_word_embeddings`, when stated.
    pub tied: Option<bool>,
}

impl Widths {
    /// The widths the language model's part of config.json (`object`) states.
    pub fn from_config(object: &Object) -> Widths {
        let count = |keys: &[&str]| {
            keys.iter()
                .find_map(|key| object.get(*key).and_then(serde_json::Value::as_u64))
                .filter(|&n| n > 0)
        };
        Widths {
            intermediate: count(&["intermediate_size"]),
            expert: count(&["moe_intermediate_size"]),
            shared: count(&["n_shared_experts"]),
            experts: count(&["num_local_experts", "n_routed_experts", "num_experts"]),
            tied: object
                .get("tie_word_embeddings")
                .and_then(serde_json::Value::as_bool),
        }
    }

    /// The width the MLP weight `name` of `shape` must have, the axis it lies along (0 for
    /// gate and up, 1 for down) and what it is; `None` when config.json does not fix it.
    pub fn expected(&self, name: &str, shape: &[u64]) -> Option<(usize, u64, String)> {
        let [.., parent, module, "weight"] = name.split('.').collect::<Vec<_>>()[..] else {
            return None;
        };
        if shape.len() != 2 {
            return None;
        }
        let (axis, factor) = match module {
            "gate_proj" | "up_proj" | "w1" | "w3" => (0, 1),
            "gate_up_proj" => (0, 2),
            "down_proj" | "w2" => (1, 1),
            _ => return None,
        };
        let expert = name.contains(".experts.");
        let (width, what) = if expert {
            (self.expert.or(self.intermediate)?, "an expert's width")
        } else if parent == "shared_experts" {
            let shared = self.expert?.checked_mul(self.shared?)?;
            (shared, "the shared experts' width")
        } else if parent == "mlp" && matches!(module, "gate_proj" | "up_proj" | "down_proj") {
            (self.intermediate?, "intermediate_size")
        } else if parent == "mlp" && module == "gate_up_proj" {
            (self.intermediate?, "intermediate_size, for gate and up")
        } else {
            return None;
        };
        Some((axis, width.checked_mul(factor)?, what.to_string()))
    }

    /// The merged model's breaches of config.json's expert count and tied head, one line
    /// each: `names` are the output tensors' names and shapes; `from`, config.json as
    /// messages name it.
    pub fn breaches(&self, outputs: &[(&str, &[u64])], from: &str) -> Vec<String> {
        let mut found = Vec::new();
        if let Some(count) = self.experts {
            for (layer, experts) in experts_by_layer(outputs) {
                let first_missing = (0..count).find(|e| !experts.contains(e));
                let beyond = experts.iter().find(|&&e| e >= count);
                if first_missing.is_some() || beyond.is_some() {
                    found.push(format!(
                        "`{}` holds {} experts, numbered {}, but {from} gives {count} experts",
                        excerpt(&layer),
                        experts.len(),
                        numbered(&experts)
                    ));
                }
            }
        }
        let embedding = outputs.iter().find(|(n, _)| is_embedding(n));
        let head = outputs.iter().find(|(n, _)| is_head(n));
        match (self.tied, embedding, head) {
            (Some(false), Some((embedding, _)), None) => found.push(format!(
                "{from} says tie_word_embeddings false, so the model has an output head of its \
                 own besides `{}`, but no input holds `lm_head.weight` (nor `embed_out.weight`)",
                excerpt(embedding)
            )),
            (Some(true), Some((embedding, e)), Some((head, h))) if e != h => {
                found.push(format!(
                    "{from} says tie_word_embeddings true, so `{}` is `{}`, but they merge \
                     to {} and {}",
                    excerpt(head),
                    excerpt(embedding),
                    shape_text(h),
                    shape_text(e)
                ));
            }
            _ => {}
        }
        found
    }
}

/// Whether `name` is a causal language model's input embedding (transformers' names).
fn is_embedding(name: &str) -> bool {
    name.ends_with("embed_tokens.weight") || name.ends_with("embed_in.weight")
}

/// Whether `name` is a causal language model's output head (transformers' names).
fn is_head(name: &str) -> bool {
    name == "lm_head.weight" || name.ends_with(".lm_head.weight") || name == "embed_out.weight"
}

/// Each layer's experts (`...mlp.experts.N....`): the layer's name up to `experts`, and the
/// numbers N its tensors hold.
fn experts_by_layer(outputs: &[(&str, &[u64])]) -> BTreeMap<String, BTreeSet<u64>> {
    let mut layers: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
    for (name, _) in outputs {
        let Some(at) = name.find(".experts.") else {
            continue;
        };
        let rest = &name[at + ".experts.".len()..];
        let Some(number) = rest.split('.').next().and_then(|n| n.parse().ok()) else {
            continue;
        };
        layers
            .entry(name[..at + ".experts".len()].to_string())
            .or_default()
            .insert(number);
    }
    layers
}

/// A set of numbers as ranges: `0-3, 5`.
fn numbered(numbers: &BTreeSet<u64>) -> String {
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for &n in numbers {
        match ranges.last_mut() {
            Some((_, end)) if end.checked_add(1) == Some(n) => *end = n,
            _ => ranges.push((n, n)),
        }
    }
    let shown: Vec<String> = ranges
        .iter()
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect();
    crate::error::capped(shown, 6).join(", ")
}

/// With or without config.json: the merged embedding and output head, when the model has
/// both, hold the same vocabulary (their axis 0). One line when they do not.
pub fn vocabulary_mismatch(outputs: &[(&str, &[u64])]) -> Option<String> {
    let (embedding, e) = outputs.iter().find(|(n, _)| is_embedding(n))?;
    let (head, h) = outputs.iter().find(|(n, _)| is_head(n))?;
    let (&[ev, _], &[hv, _]) = (*e, *h) else {
        return None;
    };
    (ev != hv).then(|| {
        format!(
            "`{}`  {} and `{}`  {} hold vocabularies of {ev} and {hv} tokens: the embedding \
             and the output head are split along the same vocabulary",
            excerpt(embedding),
            shape_text(e),
            excerpt(head),
            shape_text(h)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn widths(text: &str) -> Widths {
        let object: Object = serde_json::from_str(text).unwrap();
        Widths::from_config(&object)
    }

    #[test]
    fn mlp_widths_come_from_the_right_key() {
        let w = widths(
            r#"{"intermediate_size": 64, "moe_intermediate_size": 16, "n_shared_experts": 2,
                "n_routed_experts": 4, "tie_word_embeddings": false}"#,
        );
        let at = |name: &str, shape: &[u64]| w.expected(name, shape).map(|e| (e.0, e.1));
        assert_eq!(
            at("model.layers.0.mlp.gate_proj.weight", &[64, 32]),
            Some((0, 64))
        );
        assert_eq!(
            at("model.layers.0.mlp.down_proj.weight", &[32, 64]),
            Some((1, 64))
        );
        let expert = "model.layers.1.mlp.experts.3.up_proj.weight";
        assert_eq!(at(expert, &[16, 32]), Some((0, 16)));
        let shared = "model.layers.1.mlp.shared_experts.down_proj.weight";
        assert_eq!(at(shared, &[32, 32]), Some((1, 32)));
        // Qwen2-MoE's single shared expert has a width of its own: not checked.
        assert_eq!(
            at("model.layers.1.mlp.shared_expert.up_proj.weight", &[8, 32]),
            None
        );
        assert_eq!(at("model.layers.0.mlp.up_proj.bias", &[64]), None);
        // Mixtral's experts are intermediate_size wide.
        let mixtral = widths(r#"{"intermediate_size": 64, "num_local_experts": 2}"#);
        let w1 = "model.layers.0.block_sparse_moe.experts.1.w1.weight";
        assert_eq!(mixtral.expected(w1, &[64, 32]).map(|e| e.1), Some(64));
        // A list of per-layer widths states none.
        assert_eq!(
            widths(r#"{"intermediate_size": [64, 128]}"#).intermediate,
            None
        );
    }

    #[test]
    fn experts_and_the_tied_head_are_checked() {
        let w = widths(r#"{"num_local_experts": 4, "tie_word_embeddings": false}"#);
        let shape: &[u64] = &[8, 8];
        let outputs = [
            ("model.embed_tokens.weight", shape),
            ("model.layers.0.mlp.experts.0.w1.weight", shape),
            ("model.layers.0.mlp.experts.1.w1.weight", shape),
            ("model.layers.0.mlp.experts.2.w1.weight", shape),
        ];
        let found = w.breaches(&outputs, "config.json");
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].contains("holds 3 experts, numbered 0-2, but config.json gives 4"));
        assert!(found[1].contains("no input holds `lm_head.weight`"));
        let tied = widths(r#"{"tie_word_embeddings": true}"#);
        assert!(tied.breaches(&outputs[..1], "config.json").is_empty());
        let other: &[u64] = &[16, 8];
        let both = [outputs[0], ("lm_head.weight", other)];
        assert_eq!(tied.breaches(&both, "config.json").len(), 1);
        assert!(vocabulary_mismatch(&both).is_some());
        assert!(vocabulary_mismatch(&[outputs[0], ("lm_head.weight", shape)]).is_none());
    }
}
