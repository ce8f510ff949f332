//! Whether a checkpoint merge is complete and its shapes are the model's: a merge missing its
//! last rank splits evenly and misses no tensor, so it writes a smaller model unless
//! something records the whole. The proofs, any one of which will do:
//!
//! - the count `tjoin split --ranks N` records in each rank file's `__metadata__`
//!   ([`RANKS_KEY`], [`RANK_KEY`]): N inputs, in rank order;
//! - names numbered `1-of-N` to `N-of-N`, all of them (`ranks::complete_by_names`);
//! - `--like`, whose reference gives every output tensor's shape (checked elsewhere);
//! - the model's config.json (`--config`, or one beside the first input): the size of an
//!   attention projection's heads ([`heads::role`]) or of the vocabulary, which a merged
//!   tensor must have in full;
//! - the family's invariants, where the architecture fixes a merged size by one that is never
//!   split: GPT-2's `c_attn` is `[h, 3h]`, GPT-NeoX's `attention.query_key_value` is
//!   `[3h, h]`, BERT's `attention.self.query` is `[h, h]`.
//!
//! Without one, the merge is refused, saying what would prove it. Whatever proves the merge
//! complete, config.json's sizes that a merged tensor contradicts are refused too (a rank
//! missing, a wrong axis, two tensor-parallel degrees mixed).

use crate::error::{Error, Refusal, Result, capped};
use crate::input::Input;
use crate::messages::{excerpt, quote, shape_text};
use crate::plan::heads::{self, Role};
use crate::plan::ranks;
use crate::plan::sizes::{self, Widths};
use crate::plan::tensor_job::TensorJob;

/// The `__metadata__` key of a rank file that `tjoin split --ranks N` writes: the count N.
pub const RANKS_KEY: &str = "tjoin.ranks";
/// The `__metadata__` key of a rank file that `tjoin split --ranks N` writes: its rank, from 0.
pub const RANK_KEY: &str = "tjoin.rank";

/// `__metadata__` without the records of a rank (`RANK_KEY`, `RANKS_KEY`), which are not
/// true of a merge of ranks nor of a file cut from a rank; `None` when nothing else is left
/// of metadata that held them.
pub fn without_rank_records(
    metadata: Option<&[(String, String)]>,
) -> Option<Vec<(String, String)>> {
    let metadata = metadata?;
    let kept: Vec<(String, String)> = metadata
        .iter()
        .filter(|(key, _)| key != RANK_KEY && key != RANKS_KEY)
        .cloned()
        .collect();
    (!kept.is_empty() || metadata.is_empty()).then_some(kept)
}

/// How many items a refusal lists before "... and N more".
const SHOWN: usize = 10;

/// The sizes a model's config.json states, each when it states it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSizes {
    /// The file read, as messages name it.
    pub from: String,
    /// `hidden_size` (`n_embd`, `d_model`).
    pub hidden: Option<u64>,
    /// `vocab_size`.
    pub vocab: Option<u64>,
    /// Query heads, key-value heads and the size of one head.
    pub heads: Option<heads::Heads>,
    /// `model_type`, which names the family.
    pub model_type: Option<String>,
    /// `architectures`, the model classes.
    pub architectures: Vec<String>,
    /// DeepSeek's multi-head latent attention, when config.json has its `kv_lora_rank`.
    pub latent: Option<Latent>,
    /// The MLPs' widths, the experts' count, the tied head.
    pub widths: Widths,
    /// Given with `--config` (not found beside the first input): a file copied as it is is
    /// checked against it too.
    pub given: bool,
}

/// The widths of one head of DeepSeek's multi-head latent attention (config.json's
/// `qk_nope_head_dim`, `qk_rope_head_dim`, `v_head_dim`), which its `head_dim` (the rope
/// width) does not give: a query head is nope + rope wide, a value head v.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Latent {
    /// `qk_nope_head_dim`.
    pub nope: u64,
    /// `qk_rope_head_dim`.
    pub rope: u64,
    /// `v_head_dim`.
    pub value: u64,
}

impl ModelSizes {
    /// The sizes config.json's text states, or why they cannot be read. `from` is the file as
    /// messages name it.
    pub fn from_config(text: &str, from: &str) -> std::result::Result<ModelSizes, String> {
        let value = heads::config_object(text)?;
        let object = heads::text_part(&value, "vocab_size");
        let count = |keys: &[&str]| -> std::result::Result<Option<u64>, String> {
            for key in keys {
                match object.get(*key) {
                    None | Some(serde_json::Value::Null) => continue,
                    Some(v) => {
                        return match v.as_u64() {
                            Some(n) if n > 0 => Ok(Some(n)),
                            _ => Err(format!("its `{key}` is {v}, not a positive whole number")),
                        };
                    }
                }
            }
            Ok(None)
        };
        let hidden = count(&["hidden_size", "n_embd", "d_model"])?;
        let vocab = count(&["vocab_size"])?;
        // GPT-2 names its heads `n_head`: the same counts, under transformers' names.
        let mut named = object.clone();
        if !named.contains_key("num_attention_heads")
            && let Some(n) = object.get("n_head")
        {
            named.insert("num_attention_heads".to_string(), n.clone());
        }
        if !named.contains_key("hidden_size")
            && let Some(h) = hidden
        {
            named.insert("hidden_size".to_string(), h.into());
        }
        let text = serde_json::Value::Object(named).to_string();
        let heads = match heads::from_config(&text, from) {
            Ok(heads) => Some(heads),
            Err(_) if object.get("num_attention_heads").is_none() => None,
            Err(e) => return Err(e),
        };
        let latent = match count(&["kv_lora_rank"])? {
            None => None,
            Some(_) => match (
                count(&["qk_nope_head_dim"])?,
                count(&["qk_rope_head_dim"])?,
                count(&["v_head_dim"])?,
            ) {
                (Some(nope), Some(rope), Some(value)) => Some(Latent { nope, rope, value }),
                _ => None,
            },
        };
        let text = |v: &serde_json::Value| v.as_str().map(str::to_string);
        let model_type = value.get("model_type").and_then(text);
        let architectures = match value.get("architectures") {
            Some(serde_json::Value::Array(list)) => list.iter().filter_map(text).collect(),
            _ => Vec::new(),
        };
        Ok(ModelSizes {
            from: from.to_string(),
            hidden,
            vocab,
            heads,
            model_type,
            architectures,
            latent,
            widths: Widths::from_config(object),
            given: false,
        })
    }

    /// The size a projection of DeepSeek's latent attention must have, by its head widths:
    /// the query's (`q_proj`, `q_b_proj`: nope + rope a head), `kv_b_proj`'s (nope + v a
    /// head) along the output features, `o_proj`'s (v a head) along its input features.
    fn latent(&self, module: &str, shape: &[u64]) -> Option<(usize, u64, String)> {
        let latent = self.latent?;
        let q = self.heads.as_ref()?.query;
        let (axis, width, what) = match module {
            "q_proj" | "q_b_proj" => (0, latent.nope.checked_add(latent.rope)?, "query"),
            "kv_b_proj" => (0, latent.nope.checked_add(latent.value)?, "key and value"),
            "o_proj" if shape.len() == 2 => (1, latent.value, "value"),
            _ => return None,
        };
        let why = format!("{q} {what} heads of {width}");
        Some((axis, q.checked_mul(width)?, why))
    }

    /// The size the tensor `name` of `shape` must have along one axis, by config.json: the
    /// axis, the size, and what it is. `None` when config.json does not fix one.
    fn expected(&self, name: &str, shape: &[u64]) -> Option<(usize, u64, String)> {
        let leaf = name.rsplit('.').next().unwrap_or("");
        // A projection's weight or bias (not a norm fused into it: Megatron-Core's
        // `linear_qkv.layer_norm_weight`).
        let projection = matches!(leaf, "weight" | "bias" | "in_proj_weight" | "in_proj_bias");
        if self.latent.is_some() {
            let module = name.rsplit('.').nth(1).unwrap_or("");
            if let Some(expected) = self.latent(module, shape).filter(|_| leaf == "weight") {
                return Some(expected);
            }
        }
        if let Some((role, axis)) = heads::role(name, shape.len()).filter(|_| projection) {
            let heads = self.heads.as_ref()?;
            let dim = heads.head_dim?;
            let (q, kv) = (heads.query, heads.key_value);
            let (count, why) = match role {
                Role::Query | Role::Output => (q, format!("{q} query heads of {dim}")),
                Role::KeyValue => (kv, format!("{kv} key-value heads of {dim}")),
                Role::Fused => (
                    q.checked_add(kv.checked_mul(2)?)?,
                    format!("{q} query and 2 x {kv} key-value heads of {dim}"),
                ),
            };
            return Some((axis, count.checked_mul(dim)?, why));
        }
        let module = name.rsplit('.').nth(1).unwrap_or("");
        if VOCABULARY.contains(&module) && leaf == "weight" && shape.len() == 2 {
            return Some((0, self.vocab?, "the vocabulary".to_string()));
        }
        self.widths.expected(name, shape)
    }
}

/// The modules that hold a row per token of the vocabulary (axis 0 of their weight).
const VOCABULARY: &[&str] = &[
    "embed_tokens",
    "lm_head",
    "wte",
    "word_embeddings",
    "embed_in",
    "embed_out",
    "output_layer",
];

/// What the command line gives that may prove a merge complete.
#[derive(Debug, Clone, Copy)]
pub struct Evidence<'c> {
    /// `--like` was given: its check gives every output tensor's shape.
    pub like: bool,
    /// Tensor rules were given: the inputs are a model's ranks, not a dataset's shards.
    pub rules: bool,
    /// The model's config.json, read.
    pub model: Option<&'c ModelSizes>,
}

/// Whether the join of `inputs` is a merge of a model's ranks: every input holds several
/// named tensors, some a model's parameters (`*.weight`), and rules or `--like` say how to
/// merge them.
fn is_merge(inputs: &[Input], evidence: &Evidence) -> bool {
    let given = evidence.model.is_some_and(|m| m.given);
    (evidence.rules || evidence.like || (is_copy(inputs) && given) || blocks_inferred(inputs))
        && inputs
            .iter()
            .all(|i| i.format.is_container() && i.selected().is_none() && i.tensors.len() > 1)
        && inputs[0].tensors.iter().any(|t| {
            t.name
                .tensor
                .as_deref()
                .is_some_and(|n| n.ends_with(".weight"))
        })
}

/// Whether `inputs` are a distributed checkpoint whose full shapes are inferred from its
/// blocks (`HuggingFaceStorageWriter(save_distributed=True)`'s rank files): a merge like any
/// other, which something must prove complete.
fn blocks_inferred(inputs: &[Input]) -> bool {
    matches!(inputs, [one] if crate::input::dcp::shapes_inferred(one))
}

/// Whether `inputs` are one file copied as it is (a conversion, a sharded checkpoint made one
/// file): with a config.json given by `--config`, its shapes are checked against it (one rank
/// of several, given alone, is not the model), but there is no merge to prove complete. A
/// config.json merely beside the file is not taken to describe it.
fn is_copy(inputs: &[Input]) -> bool {
    matches!(inputs, [one] if crate::input::dcp::blocks(one).is_none())
}

/// Refuses the merge `jobs` of `inputs` unless something proves it complete, and refuses
/// merged shapes that config.json contradicts (see the module's comment).
pub fn check(jobs: &[TensorJob], inputs: &[Input], evidence: &Evidence) -> Result<()> {
    if inputs.is_empty() || !is_merge(inputs, evidence) {
        return Ok(());
    }
    let broken = broken_invariants(jobs);
    if !broken.is_empty() {
        return Err(Error::Refused(vec![broken_refusal(broken)]));
    }
    let outputs: Vec<(&str, &[u64])> = jobs
        .iter()
        .map(|t| (t.out.name.as_str(), &*t.out.shape))
        .collect();
    if let Some(mismatch) = sizes::vocabulary_mismatch(&outputs) {
        return Err(Error::refused(
            format!("the merged embedding and output head disagree: {mismatch}"),
            "give every rank's file of one split, in rank order: both are split along the \
             vocabulary (axis 0), by the same ranks",
        ));
    }
    let recorded = recorded(inputs)?;
    let mut proven_by: Option<String> =
        recorded.map(|n| format!("the rank count {n} that each input's metadata records"));
    if evidence.like {
        proven_by.get_or_insert_with(|| "--like".to_string());
    }
    let paths: Vec<&std::path::Path> = inputs.iter().map(|i| i.name.location.as_path()).collect();
    if let Some(n) = ranks::complete_by_names(&paths) {
        proven_by.get_or_insert_with(|| format!("the names, numbered 1 to {n} of {n}"));
    }
    let merged = |t: &&TensorJob| !t.kept && t.sources.len() > 1;
    if let Some(model) = evidence.model {
        let mut wrong = Vec::new();
        for t in jobs {
            let Some((axis, size, why)) = model.expected(&t.out.name, &t.out.shape) else {
                continue;
            };
            let Some(&have) = t.out.shape.get(axis) else {
                continue;
            };
            // A vocabulary padded to a multiple (vLLM's, Megatron-LM's) is longer, never
            // shorter.
            let padded = why == "the vocabulary" && have > size;
            if have == size {
                if merged(&t) {
                    proven_by.get_or_insert_with(|| {
                        format!(
                            "{}'s {why} ({size}), which `{}` has in full",
                            model.from,
                            excerpt(&t.out.name)
                        )
                    });
                }
            } else if !padded {
                wrong.push(format!(
                    "{}  {}: {have} along axis {axis}, but {} gives {size} ({why})",
                    excerpt(&t.out.name),
                    shape_text(&t.out.shape),
                    model.from
                ));
            }
        }
        if !wrong.is_empty() {
            return Err(Error::Refused(vec![contradicted(wrong, model)]));
        }
        let breaches = model.widths.breaches(&outputs, &model.from);
        if !breaches.is_empty() {
            return Err(Error::Refused(vec![Refusal {
                headline: format!(
                    "the merged model is not the one {} describes",
                    quote(&model.from)
                ),
                details: capped(breaches, SHOWN),
                hint: Some(format!(
                    "give every file the model's tensors are in (a pipeline stage's or an \
                     expert rank's too), and check that {} is the config of the model these \
                     ranks were split from",
                    quote(&model.from)
                )),
            }]));
        }
    }
    if is_copy(inputs) && !evidence.rules && !evidence.like {
        return Ok(());
    }
    if proven_by.is_none() {
        proven_by = jobs
            .iter()
            .filter(merged)
            .find_map(|t| invariant(&t.out.name, &t.out.shape));
    }
    match proven_by {
        Some(_) => Ok(()),
        None if blocks_inferred(inputs) => {
            Err(Error::Refused(vec![unproven_blocks(jobs, &inputs[0])]))
        }
        None => Err(Error::Refused(vec![unproven(jobs, inputs)])),
    }
}

/// The refusal of a distributed checkpoint in the HF writer's form that nothing proves whole.
fn unproven_blocks(jobs: &[TensorJob], checkpoint: &Input) -> Refusal {
    let mut details = vec![format!("{}, for instance:", checkpoint.name)];
    details.extend(jobs.iter().take(3).map(|t| {
        format!(
            "  {}  {} from its blocks",
            excerpt(&t.out.name),
            shape_text(&t.out.shape)
        )
    }));
    Refusal {
        headline: format!(
            "cannot tell whether every rank's file of the distributed checkpoint {} is here: \
             the files HuggingFaceStorageWriter(save_distributed=True) writes record no full \
             shapes, and without the last rank's file every tensor is smaller, its blocks \
             still fitting",
            checkpoint.name
        ),
        details,
        hint: Some(
            "prove it with the model's config.json (--config FILE, or a config.json beside \
             the first file) or the unsplit model's header (--like REFERENCE); torch's \
             default form (FileSystemWriter, with its .metadata) records every full shape"
                .to_string(),
        ),
    }
}

/// The invariant of its family that the merged tensor `name` of `shape` meets, if one fixes
/// its merged size by a size never split.
fn invariant(name: &str, shape: &[u64]) -> Option<String> {
    let &[a, b] = shape else {
        return None;
    };
    let holds = |suffix: &str, ok: bool| name.ends_with(suffix) && ok;
    if holds("attn.c_attn.weight", b == a.checked_mul(3)?)
        || holds(".attention.query_key_value.weight", a == b.checked_mul(3)?)
        || holds(".attention.self.query.weight", a == b)
    {
        return Some(format!(
            "`{}` is {} as its family's architecture fixes it",
            excerpt(name),
            shape_text(shape)
        ));
    }
    None
}

/// A layer's input and output projections, by module name, whose merged shapes fix each
/// other: `(first, second, conv1d, gated)`. The second takes the first's output features as
/// its input features and gives back the first's input features (a Linear's weight is
/// `[out, in]`, a Conv1D's `[in, out]`); `gated`: the first may be gate and up side by side,
/// twice the second's input.
const PAIRS: &[(&str, &str, bool, bool)] = &[
    ("up_proj", "down_proj", false, false),
    ("gate_up_proj", "down_proj", false, true),
    ("w1", "w2", false, false),
    ("c_fc", "c_proj", true, false),
    ("dense_h_to_4h", "dense_4h_to_h", false, true),
    ("linear_fc1", "linear_fc2", false, true),
    ("q_proj", "o_proj", false, false),
];

/// The merged tensors whose shapes break an invariant of their layer ([`PAIRS`], and BERT's
/// `intermediate.dense` and `output.dense`): a tensor joined along the wrong axis. One line
/// each.
fn broken_invariants(jobs: &[TensorJob]) -> Vec<String> {
    let shapes: std::collections::HashMap<&str, &[u64]> = jobs
        .iter()
        .map(|t| (t.out.name.as_str(), &*t.out.shape))
        .collect();
    let mut broken = Vec::new();
    for t in jobs.iter().filter(|t| !t.kept) {
        let name = t.out.name.as_str();
        let Some(front) = name.strip_suffix(".weight") else {
            continue;
        };
        let (parent, module) = front.rsplit_once('.').unwrap_or(("", front));
        let mut firsts: Vec<(String, bool, bool)> = PAIRS
            .iter()
            .filter(|p| p.1 == module)
            .map(|&(first, _, conv, gated)| (format!("{parent}.{first}.weight"), conv, gated))
            .collect();
        if let Some(layer) = front.strip_suffix(".output.dense")
            && !layer.ends_with(".attention")
        {
            firsts.push((format!("{layer}.intermediate.dense.weight"), false, false));
        }
        // DeepSeek's latent attention: a query head is wider than a value head, so `o_proj`
        // takes fewer features than `q_proj` gives.
        let latent = shapes.contains_key(format!("{parent}.kv_b_proj.weight").as_str());
        firsts.retain(|(first, ..)| !(latent && first.ends_with(".q_proj.weight")));
        for (first, conv, gated) in firsts {
            let (Some(&[a0, a1]), &[b0, b1]) = (shapes.get(first.as_str()).copied(), &*t.out.shape)
            else {
                continue;
            };
            // As Linears: first [out, in], second [in', out'] with in' = out, out' = in.
            let (out, inner, back, input) = match conv {
                true => (a1, a0, b1, b0),
                false => (a0, a1, b0, b1),
            };
            let fits =
                back == inner && (input == out || (gated && input.checked_mul(2) == Some(out)));
            if !fits {
                broken.push(format!(
                    "{}  {} does not fit `{}`  {}: each layer's output projection takes its \
                     input projection's outputs and gives back its inputs",
                    excerpt(name),
                    shape_text(&t.out.shape),
                    excerpt(&first),
                    shape_text(&[a0, a1])
                ));
            }
        }
    }
    broken
}

/// The refusal of merged shapes that break their layer's invariants.
fn broken_refusal(broken: Vec<String>) -> Refusal {
    let count = broken.len();
    Refusal {
        headline: format!(
            "{count} merged tensor{} would not fit {} layer's other projection: a tensor is \
             joined along the wrong axis",
            if count == 1 { "" } else { "s" },
            if count == 1 { "its" } else { "their" }
        ),
        details: capped(broken, SHOWN),
        hint: Some(
            "give each tensor its axis: a row-parallel weight (o_proj, down_proj, Mixtral's \
             w2, GPT-NeoX's dense_4h_to_h, Megatron's linear_proj and linear_fc2) joins \
             along its input features, axis 1 (axis 0 for GPT-2's Conv1D c_proj); the \
             model family's rules file (--rules rules/FAMILY.rules) says each"
                .to_string(),
        ),
    }
}

/// The rank count the inputs' metadata records (`tjoin split --ranks N`), when every input
/// records one; refuses inputs whose records disagree with the inputs given: a rank missing,
/// given twice, out of order, or ranks of two splits.
fn recorded(inputs: &[Input]) -> Result<Option<u64>> {
    let read = |input: &Input, key: &str| -> Option<String> {
        input
            .metadata()?
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    let records: Vec<Option<(Option<u64>, Option<u64>)>> = inputs
        .iter()
        .map(|i| {
            let count = read(i, RANKS_KEY)?;
            Some((
                count.parse().ok(),
                read(i, RANK_KEY).and_then(|r| r.parse().ok()),
            ))
        })
        .collect();
    if records.iter().all(Option::is_none) {
        return Ok(None);
    }
    let given = inputs.len() as u64;
    let mut problems = Vec::new();
    for (at, (input, record)) in inputs.iter().zip(&records).enumerate() {
        match record {
            None => problems.push(format!("{} records no rank count", input.name)),
            Some((Some(count), Some(rank))) if *count == given && *rank == at as u64 => {}
            Some((Some(count), Some(rank))) => problems.push(format!(
                "{} records rank {rank} of a split into {count} (ranks count from 0), but is \
                 given as rank {at} of {given}",
                input.name,
            )),
            Some(_) => problems.push(format!(
                "{} records a rank count or rank that is not a whole number",
                input.name
            )),
        }
    }
    if problems.is_empty() {
        return Ok(Some(given));
    }
    let counts: Vec<u64> = records.iter().flatten().filter_map(|r| r.0).collect();
    let hint = match counts.first() {
        Some(&n) if counts.iter().all(|&c| c == n) => format!(
            "give all {n} ranks' files, each once, in rank order (rank 0 first); tjoin split \
             --ranks {n} wrote these records"
        ),
        _ => "the inputs record different rank counts: they are ranks of different splits; \
              give the files of one split, each once, in rank order"
            .to_string(),
    };
    Err(Error::Refused(vec![Refusal {
        headline: format!(
            "the inputs' metadata records the ranks of their split, and the {given} inputs \
             given are not every rank, once each, in order"
        ),
        details: capped(problems, SHOWN),
        hint: Some(hint),
    }]))
}

/// The refusal of merged shapes that config.json contradicts.
fn contradicted(wrong: Vec<String>, model: &ModelSizes) -> Refusal {
    let count = wrong.len();
    Refusal {
        headline: format!(
            "{count} merged tensor{} {} a size other than {} gives: a rank is missing, a \
             tensor is joined along the wrong axis, or the inputs mix two splits",
            if count == 1 { "" } else { "s" },
            if count == 1 { "has" } else { "have" },
            model.from,
        ),
        details: capped(wrong, SHOWN),
        hint: Some(format!(
            "give every rank's file of one split, in rank order, and each tensor's axis (a \
             row-parallel weight, such as o_proj or down_proj, joins along axis 1); check that \
             {} is the config of the model these ranks were split from",
            quote(&model.from)
        )),
    }
}

/// The refusal of a merge nothing proves complete.
fn unproven(jobs: &[TensorJob], inputs: &[Input]) -> Refusal {
    let merged: Vec<String> = jobs
        .iter()
        .filter(|t| !t.kept && t.sources.len() > 1)
        .take(3)
        .map(|t| format!("{}  {}", excerpt(&t.out.name), shape_text(&t.out.shape)))
        .collect();
    let (first, last) = (&inputs[0].name, &inputs[inputs.len() - 1].name);
    let (these, whole) = match inputs.len() {
        1 => ("this one input is".to_string(), "whole"),
        n => (format!("these {n} inputs are"), "merged"),
    };
    let mut details = match inputs.len() {
        1 => vec![format!("{first}, for instance:")],
        n => vec![format!(
            "{n} inputs, {first} to {last}; merged, for instance:"
        )],
    };
    let merged = match inputs.len() {
        1 => jobs
            .iter()
            .take(3)
            .map(|t| format!("{}  {}", excerpt(&t.out.name), shape_text(&t.out.shape)))
            .collect(),
        _ => merged,
    };
    details.extend(merged.into_iter().map(|l| format!("  {l} {whole}")));
    Refusal {
        headline: format!(
            "cannot tell whether {these} every rank of the split: each tensor splits evenly \
             with a rank missing too, and nothing here records the whole model's sizes"
        ),
        details,
        hint: Some(
            "prove it with the model's config.json (--config FILE, or a config.json beside \
             the first input), the unsplit model's header (--like REFERENCE), or ranks \
             written by `tjoin split --ranks N`, which records the count in each rank's \
             metadata"
                .to_string(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_sizes_are_read_under_each_familys_names() {
        let llama = r#"{"hidden_size": 32, "vocab_size": 64, "num_attention_heads": 4,
                        "num_key_value_heads": 2}"#;
        let sizes = ModelSizes::from_config(llama, "config.json").unwrap();
        assert_eq!((sizes.hidden, sizes.vocab), (Some(32), Some(64)));
        let heads = sizes.heads.unwrap();
        assert_eq!(
            (heads.query, heads.key_value, heads.head_dim),
            (4, 2, Some(8))
        );
        let gpt2 = r#"{"n_embd": 32, "vocab_size": 64, "n_head": 4}"#;
        let heads = ModelSizes::from_config(gpt2, "c").unwrap().heads.unwrap();
        assert_eq!(
            (heads.query, heads.key_value, heads.head_dim),
            (4, 4, Some(8))
        );
        assert!(ModelSizes::from_config("[1]", "c").is_err());
        assert!(ModelSizes::from_config(r#"{"vocab_size": -1}"#, "c").is_err());
    }

    #[test]
    fn config_fixes_the_heads_and_the_vocabulary_of_a_tensor() {
        let text = r#"{"hidden_size": 32, "vocab_size": 64, "num_attention_heads": 4,
                       "num_key_value_heads": 2}"#;
        let sizes = ModelSizes::from_config(text, "config.json").unwrap();
        let size = |name: &str, shape: &[u64]| sizes.expected(name, shape).map(|e| (e.0, e.1));
        assert_eq!(
            size("model.layers.0.self_attn.q_proj.weight", &[32, 32]),
            Some((0, 32))
        );
        assert_eq!(
            size("model.layers.0.self_attn.k_proj.weight", &[16, 32]),
            Some((0, 16))
        );
        assert_eq!(
            size("model.layers.0.self_attn.o_proj.weight", &[32, 32]),
            Some((1, 32))
        );
        assert_eq!(size("model.embed_tokens.weight", &[64, 32]), Some((0, 64)));
        assert_eq!(size("model.layers.0.mlp.up_proj.weight", &[64, 32]), None);
    }

    #[test]
    fn invariants_hold_only_for_their_familys_shapes() {
        assert!(invariant("transformer.h.0.attn.c_attn.weight", &[32, 96]).is_some());
        assert!(invariant("transformer.h.0.attn.c_attn.weight", &[32, 72]).is_none());
        let neox = "gpt_neox.layers.0.attention.query_key_value.weight";
        assert!(invariant(neox, &[96, 32]).is_some());
        assert!(invariant(neox, &[72, 32]).is_none());
        assert!(
            invariant(
                "bert.encoder.layer.0.attention.self.query.weight",
                &[32, 32]
            )
            .is_some()
        );
        assert!(invariant("model.layers.0.self_attn.q_proj.weight", &[32, 32]).is_none());
    }
}
