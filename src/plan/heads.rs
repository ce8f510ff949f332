//! Attention heads in a rank split (`tjoin split --ranks`): which tensors are attention
//! projections (by name, the one list of them), the head counts a model's config.json
//! states, and the check that every rank gets whole heads. A cut inside a head joins back
//! byte for byte but is a wrong model for every inference framework (vLLM, Megatron, HF
//! tp_plan give each rank whole heads and replicate key-value heads when there are more
//! ranks than heads), so a cut tjoin cannot check is refused.

use serde::Serialize;

use crate::plan::chunks::{FUSED, Fused, Parts};

/// The model's head counts, and where they come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Heads {
    /// Query (attention) heads.
    pub query: u64,
    /// Key-value heads (= query heads without grouped-query attention).
    pub key_value: u64,
    /// The size of one head, when known (config.json's `head_dim`, or `hidden_size` over the
    /// query heads).
    pub head_dim: Option<u64>,
    /// Where they come from: `--heads`, or the config.json read (its path).
    pub from: String,
}

/// What an attention projection holds along its head axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Query heads (`q_proj`), along its output features.
    Query,
    /// Key or value heads (`k_proj`, `v_proj`), along its output features.
    KeyValue,
    /// Query, key and value side by side (a fused name of [`FUSED`]), along its output
    /// features.
    Fused,
    /// The attention output (`o_proj`), query heads along its input features.
    Output,
}

/// Unfused attention projections by module name (the next-to-last dotted part), with what
/// they hold and whether they are GPT-2 Conv1D (`[in, out]` weights).
const PROJECTIONS: &[(&str, Role, bool)] = &[
    ("q_proj", Role::Query, false),
    ("k_proj", Role::KeyValue, false),
    ("v_proj", Role::KeyValue, false),
    ("o_proj", Role::Output, false),
    ("out_proj", Role::Output, false), // torch.nn.MultiheadAttention, BART, CLIP
    ("query", Role::Query, false),     // BERT
    ("key", Role::KeyValue, false),
    ("value", Role::KeyValue, false),
];

/// Output projections whose name is used outside attention too: an attention one only under
/// a module of attention (`attn`, `attention`, `self_attention`).
const ATTENTION_ONLY: &[(&str, Role, bool)] = &[
    ("c_proj", Role::Output, true),       // GPT-2 `attn.c_proj`
    ("dense", Role::Output, false), // GPT-NeoX `attention.dense`, BERT `attention.output.dense`
    ("linear_proj", Role::Output, false), // Megatron-Core `self_attention.linear_proj`
];

/// The fused projections of [`FUSED`] that are attention (query, key and value).
const FUSED_ATTENTION: &[&str] = &[
    "qkv_proj",
    "c_attn",
    "query_key_value",
    "linear_qkv",
    "W_pack",
    "Wqkv",
    "qkv",
    "in_proj_weight",
    "in_proj_bias",
];

/// The attention projection the tensor `name` of `rank` axes is, and its head axis (counted
/// from the front), if it is one.
pub fn role(name: &str, rank: usize) -> Option<(Role, usize)> {
    if rank == 0 {
        return None;
    }
    let parts: Vec<&str> = name.split('.').collect();
    let leaf = *parts.last()?;
    let module = if parts.len() >= 2 {
        parts[parts.len() - 2]
    } else {
        ""
    };
    let bias = leaf == "bias" || leaf.ends_with("_bias");
    if FUSED_ATTENTION.contains(&leaf) || FUSED_ATTENTION.contains(&module) {
        let conv = FUSED
            .iter()
            .any(|&(m, conv)| conv && (m == module || m == leaf));
        return Some((Role::Fused, if conv || bias { rank - 1 } else { 0 }));
    }
    let in_attention = parts[..parts.len().saturating_sub(2)]
        .iter()
        .any(|p| p.contains("attn") || p.contains("attention"));
    let known = PROJECTIONS.iter().find(|(m, ..)| *m == module);
    let known = known.or_else(|| {
        ATTENTION_ONLY
            .iter()
            .find(|(m, ..)| *m == module && in_attention)
    });
    let &(_, role, conv) = known?;
    let axis = match role {
        // An output projection's bias is along its output features: no heads.
        Role::Output if bias => return None,
        Role::Output if conv => 0,
        Role::Output => rank.checked_sub(1)?.min(1),
        _ if conv => rank - 1,
        _ => 0,
    };
    Some((role, axis))
}

/// The head counts config.json's text states (`num_attention_heads`, `num_key_value_heads`,
/// `head_dim` or `hidden_size`; a multimodal model's `text_config`), or why they cannot be
/// read. `from` is the file's name for the report.
pub fn from_config(text: &str, from: &str) -> std::result::Result<Heads, String> {
    let value = config_object(text)?;
    let object = text_part(&value, "num_attention_heads");
    let count = |key: &str| -> std::result::Result<Option<u64>, String> {
        match object.get(key) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(v) => match v.as_u64() {
                Some(n) if n > 0 => Ok(Some(n)),
                _ => Err(format!("its `{key}` is {v}, not a positive whole number")),
            },
        }
    };
    let query = count("num_attention_heads")?
        .ok_or("it has no `num_attention_heads` (is it a transformers model's config?)")?;
    let key_value = count("num_key_value_heads")?.unwrap_or(query);
    if query % key_value != 0 {
        return Err(format!(
            "its {query} attention heads are not a multiple of its {key_value} key-value heads"
        ));
    }
    let head_dim = match count("head_dim")? {
        Some(dim) => Some(dim),
        None => count("hidden_size")?
            .filter(|h| h % query == 0)
            .map(|h| h / query),
    };
    Ok(Heads {
        query,
        key_value,
        head_dim,
        from: from.to_string(),
    })
}

/// A JSON object's members.
pub type Object = serde_json::Map<String, serde_json::Value>;

/// config.json's text as a JSON object, or why it is not one.
pub fn config_object(text: &str) -> std::result::Result<Object, String> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("it is not JSON: {e}"))?;
    match value {
        serde_json::Value::Object(object) => Ok(object),
        _ => Err("it is not a JSON object".to_string()),
    }
}

/// The part of config.json's `object` that describes the language model: a multimodal
/// model's `text_config`, unless the object itself has `key`.
pub fn text_part<'o>(object: &'o Object, key: &str) -> &'o Object {
    match object.get("text_config").and_then(|c| c.as_object()) {
        Some(text) if !object.contains_key(key) => text,
        _ => object,
    }
}

/// Why the cut of an attention projection (`role`) of `len` along its head axis into `ranks`
/// by `parts` would not give each rank whole heads, with what would; `None` when it does.
/// `rule` is the tensor's name, for the hint's `--axis-for`.
pub fn check(
    role: Role,
    len: u64,
    axis: usize,
    ranks: u64,
    parts: &Parts,
    heads: &Heads,
    name: &str,
) -> Option<(String, String)> {
    let counts = format!(
        "{} query and {} key-value heads, as {} says",
        heads.query,
        heads.key_value,
        crate::messages::quote(&heads.from)
    );
    let (shares, replicas): (Vec<u64>, Vec<u64>) = match role {
        Role::Query | Role::Output => (vec![heads.query], vec![parts.replicas]),
        Role::KeyValue => (vec![heads.key_value], vec![parts.replicas]),
        Role::Fused => match fused_shares(len, ranks, parts, heads, &counts, name, axis) {
            Ok(shares) => shares,
            Err(answer) => return answer,
        },
    };
    let total: u64 = shares.iter().sum();
    if len % total != 0 {
        return Some((
            format!("its size {len} does not hold {counts}"),
            "check that the config.json or --heads is this model's".to_string(),
        ));
    }
    if let Some(dim) = heads.head_dim
        && len != total * dim
    {
        return Some((
            format!("its size {len} is not {total} heads of {dim} ({counts}, head_dim {dim})"),
            "check that the config.json or --heads is this model's".to_string(),
        ));
    }
    let mut needed = Vec::new();
    for &count in &shares {
        let need = if ranks <= count {
            (count % ranks == 0).then_some(1)
        } else if role != Role::Query && role != Role::Output && ranks % count == 0 {
            // More ranks than key-value heads: each head to ranks / heads ranks.
            Some(ranks / count)
        } else {
            None
        };
        let Some(need) = need else {
            return Some((
                format!(
                    "{ranks} ranks cannot each get whole heads of {count} \
                     ({counts})"
                ),
                format!(
                    "split into a number of ranks that divides {count}{}",
                    if role == Role::Query || role == Role::Output {
                        ""
                    } else {
                        ", or a multiple of it (each head then replicated)"
                    }
                ),
            ));
        };
        needed.push(need);
    }
    if needed == replicas {
        return None;
    }
    let words = if role == Role::Fused {
        format!(
            " chunks {} replicas {}",
            share_text(&shares),
            share_text(&needed)
        )
    } else {
        format!(" replicas {}", needed[0])
    };
    Some((
        format!(
            "{ranks} ranks would cut inside an attention head ({counts}): each rank must get \
             whole heads{}",
            if needed.iter().any(|&n| n > 1) {
                ", each key-value head given to several ranks"
            } else {
                ""
            }
        ),
        format!("give it the rule --axis-for '{name}={axis}{words}'"),
    ))
}

/// The parts of a projection (their proportions) and each one's replicas.
type Shares = (Vec<u64>, Vec<u64>);

/// The parts of a fused projection (query, key, value) and each one's replicas, by its rule
/// (`parts`) checked against the heads' proportions; else the answer of [`check`].
fn fused_shares(
    len: u64,
    ranks: u64,
    parts: &Parts,
    heads: &Heads,
    counts: &str,
    name: &str,
    axis: usize,
) -> std::result::Result<Shares, Option<(String, String)>> {
    let stated = match &parts.fused {
        Fused::Chunks(stated) => stated,
        Fused::Plain => return Err(groups(len, ranks, parts, heads, counts)),
        // Without `chunks` or `plain` the fused check (chunks::unstated) refuses it.
        Fused::Unstated => return Err(None),
    };
    let want = [heads.query, heads.key_value, heads.key_value];
    let total: u64 = want.iter().sum();
    let stated_total: u64 = stated.iter().sum();
    let same = stated.len() == 3
        && stated
            .iter()
            .zip(want)
            .all(|(&s, w)| s * total == w * stated_total);
    if !same {
        return Err(Some((
            format!(
                "its rule's chunks {} are not the proportions of {counts}",
                share_text(stated)
            ),
            format!(
                "state them: --axis-for '{name}={axis} chunks {}'",
                share_text(&want)
            ),
        )));
    }
    let replicas = if parts.part_replicas.len() == 3 {
        parts.part_replicas.clone()
    } else {
        vec![parts.replicas; 3]
    };
    Ok((want.to_vec(), replicas))
}

/// The check of a fused projection whose rule says `plain`: its heads lie in key-value
/// groups (Megatron's `linear_qkv`, GPT-NeoX's `query_key_value`: each group its query heads,
/// then its key and value head), so a rank must get whole groups, and a group cannot be
/// given to several ranks (its query heads would be too).
fn groups(
    len: u64,
    ranks: u64,
    parts: &Parts,
    heads: &Heads,
    counts: &str,
) -> Option<(String, String)> {
    let total = heads.query + 2 * heads.key_value;
    let fits = match heads.head_dim {
        Some(dim) => len == total * dim,
        None => len % total == 0,
    };
    if !fits {
        return Some((
            format!("its size {len} does not hold {counts}"),
            "check that the config.json or --heads is this model's".to_string(),
        ));
    }
    let groups = heads.key_value;
    if parts.replicas != 1 || groups % ranks != 0 {
        return Some((
            format!(
                "its rule's `plain` says it holds whole key-value groups side by side, and \
                 {ranks} ranks cannot each get whole groups of {groups} ({counts})"
            ),
            format!("split into a number of ranks that divides {groups}"),
        ));
    }
    None
}

/// `1:1` or `4:1:1`.
fn share_text(shares: &[u64]) -> String {
    let shares: Vec<String> = shares.iter().map(u64::to_string).collect();
    shares.join(":")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn heads(query: u64, key_value: u64, head_dim: Option<u64>) -> Heads {
        Heads {
            query,
            key_value,
            head_dim,
            from: "--heads".to_string(),
        }
    }

    #[test]
    fn attention_projections_are_known_by_name() {
        let q = role("model.layers.0.self_attn.q_proj.weight", 2);
        assert_eq!(q, Some((Role::Query, 0)));
        let o = role("model.layers.0.self_attn.o_proj.weight", 2);
        assert_eq!(o, Some((Role::Output, 1)));
        assert_eq!(role("model.layers.0.self_attn.o_proj.bias", 1), None);
        assert_eq!(role("h.0.attn.c_attn.weight", 2), Some((Role::Fused, 1)));
        assert_eq!(role("h.0.attn.c_proj.weight", 2), Some((Role::Output, 0)));
        assert_eq!(role("h.0.mlp.c_proj.weight", 2), None);
        assert_eq!(
            role("layers.0.attention.dense.weight", 2),
            Some((Role::Output, 1))
        );
        assert_eq!(role("layers.0.mlp.dense_4h_to_h.weight", 2), None);
        assert_eq!(
            role("decoder.layers.0.self_attention.linear_qkv.weight", 2),
            Some((Role::Fused, 0))
        );
        assert_eq!(role("model.layers.0.mlp.gate_proj.weight", 2), None);
        assert_eq!(
            role("model.layers.0.self_attn.k_proj.bias", 1),
            Some((Role::KeyValue, 0))
        );
    }

    #[test]
    fn config_json_states_the_heads() {
        let text = r#"{"num_attention_heads": 8, "num_key_value_heads": 2, "hidden_size": 64}"#;
        let read = from_config(text, "config.json").unwrap();
        assert_eq!((read.query, read.key_value, read.head_dim), (8, 2, Some(8)));
        let mha = from_config(r#"{"num_attention_heads": 4, "head_dim": 3}"#, "c").unwrap();
        assert_eq!((mha.key_value, mha.head_dim), (4, Some(3)));
        for bad in [
            "[1]",
            "{",
            r#"{"hidden_size": 4}"#,
            r#"{"num_attention_heads": -1}"#,
            r#"{"num_attention_heads": 4, "num_key_value_heads": 3}"#,
        ] {
            assert!(from_config(bad, "c").is_err(), "{bad}");
        }
    }

    #[test]
    fn ranks_get_whole_heads_or_are_refused() {
        let plain = Parts::default();
        let one_kv = heads(4, 1, Some(2));
        // 1 key-value head into 4 ranks: only with `replicas 4`.
        let (why, hint) = check(Role::KeyValue, 2, 0, 4, &plain, &one_kv, "k").unwrap();
        assert!(why.contains("inside an attention head"), "{why}");
        assert_eq!(hint, "give it the rule --axis-for 'k=0 replicas 4'");
        let four = Parts {
            replicas: 4,
            ..Parts::default()
        };
        assert_eq!(check(Role::KeyValue, 2, 0, 4, &four, &one_kv, "k"), None);
        // Query heads: 4 into 4 ranks, not into 8 nor 3.
        assert_eq!(check(Role::Query, 8, 0, 4, &plain, &one_kv, "q"), None);
        assert!(check(Role::Query, 8, 0, 8, &plain, &one_kv, "q").is_some());
        assert!(check(Role::Output, 8, 1, 3, &plain, &one_kv, "o").is_some());
        // 3 key-value heads into 2 ranks: neither divides the other.
        let three = heads(6, 3, None);
        assert!(check(Role::KeyValue, 6, 0, 2, &plain, &three, "k").is_some());
        // A size that is not the heads of head_dim.
        assert!(check(Role::Query, 12, 0, 2, &plain, &one_kv, "q").is_some());
        // Fused: the chunks must be the heads' proportions, replicas per part.
        let fused = Parts {
            fused: Fused::Chunks(vec![4, 1, 1]),
            part_replicas: vec![1, 4, 4],
            ..Parts::default()
        };
        assert_eq!(check(Role::Fused, 12, 0, 4, &fused, &one_kv, "qkv"), None);
        let equal = Parts {
            fused: Fused::Chunks(vec![1, 1, 1]),
            ..Parts::default()
        };
        let (_, hint) = check(Role::Fused, 12, 0, 4, &equal, &one_kv, "qkv").unwrap();
        assert!(hint.contains("chunks 4:1:1"), "{hint}");
        // `plain`: whole key-value groups (Megatron, GPT-NeoX), never replicated.
        let plain_groups = Parts {
            fused: Fused::Plain,
            ..Parts::default()
        };
        let gqa = heads(8, 2, Some(2));
        assert_eq!(
            check(Role::Fused, 24, 0, 2, &plain_groups, &gqa, "qkv"),
            None
        );
        let (why, hint) = check(Role::Fused, 24, 0, 4, &plain_groups, &gqa, "qkv").unwrap();
        assert!(why.contains("whole groups of 2"), "{why}");
        assert_eq!(hint, "split into a number of ranks that divides 2");
        assert!(check(Role::Fused, 20, 0, 2, &plain_groups, &gqa, "qkv").is_some());
    }
}
