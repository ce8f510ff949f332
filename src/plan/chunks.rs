//! How each input holds its piece of a tensor, when it is more than a plain slice: the words
//! a rule may write after its axis (`docs/rules.md`, "How each rank holds its piece").
//!
//! - `chunks N` or `chunks P:Q:R`: each input's tensor is parts side by side along the axis
//!   (a fused projection: `[gate_r; up_r]`, `[q_r | k_r | v_r]`), N equal ones or in the
//!   proportions given, and the parts are joined part-wise: the output is part 1 of every
//!   input in order, then part 2 of every input, and so on. A join of slices
//!   ([`crate::plan::Source`]): nothing is copied twice, nothing reordered in memory.
//! - `plain`: each input holds whole heads or groups of a fused tensor (GPT-NeoX's
//!   `query_key_value`, Megatron-Core's `linear_qkv`), so the plain join is right; said
//!   explicitly because the name alone cannot tell.
//! - `replicas K`: consecutive inputs in groups of K hold the same piece (vLLM gives each
//!   key-value head to several ranks when there are more ranks than heads); the first of each
//!   group is joined, the others are compared with it and refused if they differ.
//! - `chunks 4:2:2 replicas 1:2:2`: the same, part by part, for a fused tensor whose parts
//!   are not all split alike (vLLM's `qkv_proj` with more ranks than key-value heads: each
//!   rank holds `[q_r; k_(r/2); v_(r/2)]`). The proportions are the output's; a rank's piece
//!   holds part j in the proportion `share_j * replicas_j`.
//!
//! A fused projection joined along its fused axis with no layout stated is refused
//! ([`unstated`]): the plain join of chunk-wise pieces is a wrong model of the right shape,
//! which no check downstream (`--like`, `--strict`) can see. The names are listed in
//! [`FUSED`], the one place that knows them.

use std::fmt;
use std::ops::Range;

use crate::error::{Error, Refusal, Result};
use crate::input::Tensor;
use crate::messages::excerpt;
use crate::plan::compare;
use crate::plan::rules::text::{shell_quote, suggest_globs};

/// The most parts a `chunks` rule may name: enough for any fused projection.
pub const MOST_CHUNKS: usize = 64;

/// What a rule says about the pieces beyond the axis: their layout, and replication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parts {
    /// How a fused tensor's parts lie in each piece.
    pub fused: Fused,
    /// How many consecutive inputs hold the same piece (1: each its own).
    pub replicas: u64,
    /// With `chunks`, how many consecutive inputs hold the same piece of each part
    /// (`replicas 1:2:2`); empty when the rule gives one count or none.
    pub part_replicas: Vec<u64>,
}

impl Default for Parts {
    fn default() -> Parts {
        Parts {
            fused: Fused::Unstated,
            replicas: 1,
            part_replicas: Vec::new(),
        }
    }
}

/// How the parts of a fused tensor lie in each input's piece.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fused {
    /// The rule says nothing: a plain join, refused for a fused name along its fused axis.
    Unstated,
    /// `plain`: each piece holds whole heads or groups; the plain join is right.
    Plain,
    /// `chunks`: each piece is parts side by side in these proportions, joined part-wise.
    Chunks(Vec<u64>),
}

impl Parts {
    /// Whether the rule says nothing beyond its axis.
    pub fn is_plain_join(&self) -> bool {
        self.replicas == 1 && !matches!(self.fused, Fused::Chunks(_))
    }
}

impl fmt::Display for Parts {
    /// The words after the axis, as a rules line writes them, with a space before each:
    /// ` chunks 4:1:1 replicas 2`, or nothing.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.fused {
            Fused::Unstated => {}
            Fused::Plain => f.write_str(" plain")?,
            Fused::Chunks(shares) => {
                let first = shares[0];
                if shares.iter().all(|&s| s == first) && first == 1 {
                    write!(f, " chunks {}", shares.len())?;
                } else {
                    let shares: Vec<String> = shares.iter().map(u64::to_string).collect();
                    write!(f, " chunks {}", shares.join(":"))?;
                }
            }
        }
        if self.replicas > 1 {
            write!(f, " replicas {}", self.replicas)?;
        }
        if !self.part_replicas.is_empty() {
            let counts: Vec<String> = self.part_replicas.iter().map(u64::to_string).collect();
            write!(f, " replicas {}", counts.join(":"))?;
        }
        Ok(())
    }
}

/// What follows a rule's axis: `plain`, `chunks N` or `chunks P:Q:...`, `replicas K`, each at
/// most once (`plain` and `chunks` not together). Messages quote the words.
pub fn parse(words: &[&str]) -> std::result::Result<Parts, String> {
    let mut parts = Parts::default();
    let mut replicas_given = false;
    let mut rest = words.iter().peekable();
    while let Some(&word) = rest.next() {
        match word {
            "plain" | "chunks" if parts.fused != Fused::Unstated => {
                return Err(format!(
                    "`{}` after a layout already given: write one of `plain` or `chunks`",
                    crate::messages::name(word)
                ));
            }
            "plain" => parts.fused = Fused::Plain,
            "chunks" => {
                let Some(&value) = rest.next() else {
                    return Err("`chunks` needs a count or proportions: `chunks 2`, \
                                `chunks 4:1:1`"
                        .to_string());
                };
                parts.fused = Fused::Chunks(shares(value)?);
            }
            "replicas" if replicas_given => {
                return Err("`replicas` is given twice".to_string());
            }
            "replicas" => {
                replicas_given = true;
                if let Some(&counts) = rest.peek()
                    && counts.contains(':')
                {
                    rest.next();
                    parts.part_replicas = per_part(counts)?;
                    continue;
                }
                let count = rest.next().and_then(|v| v.parse::<u64>().ok());
                match count {
                    Some(count) if count >= 2 => parts.replicas = count,
                    _ => {
                        return Err("`replicas` needs a count of 2 or more: `replicas 2` \
                                    (each piece held by 2 consecutive inputs)"
                            .to_string());
                    }
                }
            }
            other => {
                return Err(format!(
                    "`{}` after the axis is not a word of a rule: expected `plain`, \
                     `chunks N`, `chunks P:Q:R`, `replicas K` or `replicas A:B:C`",
                    crate::messages::name(other)
                ));
            }
        }
    }
    if !parts.part_replicas.is_empty() {
        let parts_given = match &parts.fused {
            Fused::Chunks(shares) => shares.len(),
            _ => 0,
        };
        if parts_given != parts.part_replicas.len() {
            return Err(format!(
                "`replicas {}` gives a count for each part of a chunked tensor: it needs \
                 `chunks` with as many parts ({})",
                parts
                    .part_replicas
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(":"),
                parts.part_replicas.len()
            ));
        }
    }
    Ok(parts)
}

/// The counts of `replicas A:B:C`: one for each part, each 1 or more, one at least 2.
fn per_part(value: &str) -> std::result::Result<Vec<u64>, String> {
    let counts: Option<Vec<u64>> = value
        .split(':')
        .map(|s| s.parse::<u64>().ok().filter(|c| (1..=1 << 16).contains(c)))
        .collect();
    match counts {
        Some(counts) if counts.len() >= 2 && counts.iter().any(|&c| c >= 2) => Ok(counts),
        _ => Err(format!(
            "`replicas {}` is neither a count of 2 or more (`replicas 2`) nor a count for \
             each part, 1 or more and one at least 2 (`replicas 1:2:2`)",
            crate::messages::name(value)
        )),
    }
}

/// The proportions of `chunks VALUE`: `3` is three equal parts, `4:1:1` three parts of which
/// the first is four times each other.
fn shares(value: &str) -> std::result::Result<Vec<u64>, String> {
    let wrong = || {
        format!(
            "`chunks {}` is neither a count of 2 or more (`chunks 2`) nor proportions of 2 to \
             {MOST_CHUNKS} positive integers (`chunks 4:1:1`)",
            crate::messages::name(value)
        )
    };
    let shares: Vec<u64> = if value.contains(':') {
        let shares: Option<Vec<u64>> = value
            .split(':')
            .map(|s| s.parse::<u64>().ok().filter(|&s| s > 0 && s <= 1 << 32))
            .collect();
        shares.ok_or_else(wrong)?
    } else {
        let count: usize = value.parse().map_err(|_| wrong())?;
        vec![1; count]
    };
    if shares.len() < 2 || shares.len() > MOST_CHUNKS {
        return Err(wrong());
    }
    Ok(shares)
}

/// The first input of each group of `parts.replicas` consecutive inputs, once every other
/// member of the group is checked to hold the same tensor (by [`compare::differs`]). Refuses
/// a count of inputs that is not a multiple of the group, and a member that differs, with
/// where; a damaged input (an .npz member failing its CRC-32) is the error it is.
pub fn representatives<'a>(
    name: &str,
    sources: &[&'a Tensor],
    parts: &Parts,
) -> Result<Vec<&'a Tensor>> {
    let k = parts.replicas as usize;
    if k <= 1 {
        return Ok(sources.to_vec());
    }
    let name = excerpt(name);
    if sources.len() % k != 0 {
        return Err(Error::Refused(vec![Refusal {
            headline: format!(
                "tensor `{name}`: its rule says `replicas {k}` (groups of {k} consecutive \
                 inputs hold the same piece), but there are {} inputs, not a multiple of {k}",
                sources.len()
            ),
            details: Vec::new(),
            hint: Some(
                "name every rank's file, in rank order, or correct the replica count: it is \
                 the number of ranks divided by the number of pieces (e.g. 4 ranks and 2 \
                 key-value heads: `replicas 2`)"
                    .to_string(),
            ),
        }]));
    }
    let mut differing = Vec::new();
    for group in sources.chunks(k) {
        let first = group[0];
        for other in &group[1..] {
            match compare::differs(first, other) {
                Ok(None) => {}
                Ok(Some(how)) => {
                    differing.push(format!("{} differs from {}: {how}", other.name, first.name))
                }
                Err(e @ Error::Malformed { .. }) => return Err(e),
                Err(e) => differing.push(format!("{}: cannot be compared: {e}", other.name)),
            }
        }
    }
    if !differing.is_empty() {
        return Err(Error::Refused(vec![Refusal {
            headline: format!(
                "tensor `{name}`: its rule says `replicas {k}`, but the inputs of a group do \
                 not hold the same piece"
            ),
            details: crate::error::capped(differing, 10),
            hint: Some(format!(
                "check that the inputs are in rank order and that each piece is held by {k} \
                 consecutive ranks; if each rank holds its own piece, drop `replicas {k}`"
            )),
        }]));
    }
    Ok(sources.iter().step_by(k).copied().collect())
}

/// The sources of a part-wise join of `pieces` along `axis` in the proportions `shares`:
/// part 1 of every piece in order, then part 2 of every piece, and so on, each with its range
/// along the axis. With `replicas` (one count a part, `replicas 1:2:2`), part j is taken from
/// the first piece of each group of `replicas[j]` consecutive pieces, after the others' part
/// j is compared with it. Refuses a piece whose size along the axis is not a multiple of the
/// proportions' sum, parts that would start or end inside a byte (float4), a count of pieces
/// that a group size does not divide, and a replicated part that differs.
pub fn chunked<'a>(
    name: &str,
    pieces: &[&'a Tensor],
    axis: usize,
    shares: &[u64],
    replicas: &[u64],
) -> std::result::Result<Vec<(&'a Tensor, Range<u64>)>, Vec<Refusal>> {
    let replicas: Vec<u64> = match replicas.is_empty() {
        true => vec![1; shares.len()],
        false => replicas.to_vec(),
    };
    // A rank's piece holds part j in the proportion share_j * replicas_j.
    let widths: Vec<u64> = shares.iter().zip(&replicas).map(|(s, r)| s * r).collect();
    let total: u64 = widths.iter().sum();
    let spec = Parts {
        fused: Fused::Chunks(shares.to_vec()),
        part_replicas: match replicas.iter().all(|&k| k == 1) {
            true => Vec::new(),
            false => replicas.clone(),
        },
        ..Parts::default()
    }
    .to_string();
    let spec = spec.trim();
    let bad: Vec<String> = pieces
        .iter()
        .filter(|t| t.info.shape[axis] % total != 0)
        .map(|t| {
            format!(
                "{} is {}: {} along axis {axis} is not a multiple of {total}",
                t.name,
                t.info.shape_text(),
                t.info.shape[axis]
            )
        })
        .collect();
    if !bad.is_empty() {
        return Err(vec![Refusal {
            headline: format!(
                "tensor `{}`: its rule says `{spec}`, but a piece's size along axis {axis} \
                 does not divide into parts in those proportions (their sum is {total})",
                excerpt(name)
            ),
            details: bad,
            hint: Some(
                "correct the proportions to those of the fused parts in each rank's piece \
                 (e.g. 32 query and 8 key-value heads: `chunks 4:1:1`), or check the axis"
                    .to_string(),
            ),
        }]);
    }
    if let Some(k) = replicas.iter().find(|&&k| pieces.len() as u64 % k != 0) {
        return Err(vec![Refusal {
            headline: format!(
                "tensor `{}`: its rule says `{spec}` (groups of {k} consecutive inputs hold \
                 the same part), but there are {} inputs, not a multiple of {k}",
                excerpt(name),
                pieces.len()
            ),
            details: Vec::new(),
            hint: Some(
                "name every rank's file, in rank order, or correct the counts: a part's count \
                 is the number of ranks divided by the number of its heads (4 ranks, 2 \
                 key-value heads: `replicas 1:2:2`)"
                    .to_string(),
            ),
        }]);
    }
    let mut sources = Vec::with_capacity(pieces.len() * shares.len());
    let mut differing = Vec::new();
    let mut before = 0;
    for (&width, &k) in widths.iter().zip(&replicas) {
        for group in pieces.chunks(k as usize) {
            let first = group[0];
            let unit = first.info.shape[axis] / total;
            let range = unit * before..unit * (before + width);
            for other in &group[1..] {
                match compare::differs_in(first, other, axis, range.clone()) {
                    Ok(None) => {}
                    Ok(Some(how)) => {
                        differing.push(format!("{} differs from {}: {how}", other.name, first.name))
                    }
                    Err(e) => differing.push(format!("{}: cannot be compared: {e}", other.name)),
                }
            }
            sources.push((first, range));
        }
        before += width;
    }
    if !differing.is_empty() {
        return Err(vec![Refusal {
            headline: format!(
                "tensor `{}`: its rule says `{spec}`, but the inputs of a group do not hold \
                 the same part",
                excerpt(name)
            ),
            details: crate::error::capped(differing, 10),
            hint: Some(
                "check that the inputs are in rank order and that the counts after `replicas` \
                 are the number of ranks divided by each part's heads; if each rank holds its \
                 own slice of every part, drop them"
                    .to_string(),
            ),
        }]);
    }
    let dtype = &pieces[0].info.dtype;
    if dtype.bits() % 8 != 0 {
        let inner = |t: &Tensor| t.info.shape[axis + 1..].iter().product::<u64>();
        let split = sources.iter().find(|(t, range)| {
            let bits = |elements: u64| elements * inner(t) * dtype.bits() % 8 != 0;
            bits(range.start) || bits(range.end)
        });
        if let Some((t, range)) = split {
            return Err(vec![Refusal {
                headline: format!(
                    "tensor `{}`: the part {}..{} of {} along axis {axis} starts or ends \
                     inside a byte of {dtype}",
                    excerpt(name),
                    range.start,
                    range.end,
                    t.name
                ),
                details: Vec::new(),
                hint: Some(format!(
                    "{dtype} packs {} bits per element: its parts must hold whole bytes",
                    dtype.bits()
                )),
            }]);
        }
    }
    Ok(sources)
}

/// What kind of fused projection a name is, for the hint's example.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Query, key and value: `chunks 3`, or proportions under GQA.
    Qkv,
    /// Gate and up projections: `chunks 2`.
    GateUp,
    /// A first MLP layer that is gate and up when the model is gated: when it is twice the
    /// size of its second layer's input (the named sibling, in the same module).
    Gated(&'static str),
    /// Several parts of their own sizes (Mamba's `in_proj`).
    Several,
}

/// The fused projections tjoin knows, by module name (the next-to-last dotted part of the
/// tensor's name, before `weight` or `bias`): each holds several projections side by side
/// along its output features. `true` for a Conv1D (GPT-2's `[in, out]` weights), whose
/// output features are its last axis; a Linear's are its next-to-last.
pub const FUSED: &[(&str, bool)] = &[
    ("qkv_proj", false),        // vLLM, Phi-3
    ("gate_up_proj", false),    // vLLM, Phi-3
    ("c_attn", true),           // GPT-2 (Conv1D)
    ("query_key_value", false), // GPT-NeoX, Falcon, BLOOM, ChatGLM
    ("linear_qkv", false),      // Megatron-Core
    ("linear_fc1", false),      // Megatron-Core, when gated (SwiGLU)
    ("dense_h_to_4h", false),   // ChatGLM when gated; GPT-NeoX and BLOOM are not
    ("W_pack", false),          // Baichuan
    ("Wqkv", false),            // MPT
    ("qkv", false),             // ViT, timm
    ("w13", false),             // fused Mixtral-style experts
    ("in_proj", false),         // Mamba
    ("in_proj_weight", false),  // torch.nn.MultiheadAttention (the leaf itself)
    ("in_proj_bias", false),
];

/// The kind of each entry of [`FUSED`].
fn kind(module: &str) -> Kind {
    match module {
        "gate_up_proj" | "w13" => Kind::GateUp,
        "linear_fc1" => Kind::Gated("linear_fc2"),
        "dense_h_to_4h" => Kind::Gated("dense_4h_to_h"),
        "in_proj" => Kind::Several,
        _ => Kind::Qkv,
    }
}

/// A tensor refused by [`unstated`]: its name, fused axis and kind.
#[derive(Debug, Clone)]
pub struct Unstated {
    name: String,
    axis: usize,
    kind: Kind,
}

/// Whether the tensor `name` of `shape` is a fused projection joined along its fused axis
/// (`axis`, counted from the front) by a rule that does not say how its parts lie (`parts`).
/// `sibling` gives the shape of another tensor of the first input by name: a gated MLP's
/// first layer is told from a plain one by its second layer's size.
pub fn unstated(
    name: &str,
    shape: &[u64],
    axis: usize,
    parts: &Parts,
    sibling: &dyn Fn(&str) -> Option<Vec<u64>>,
) -> Option<Unstated> {
    if parts.fused != Fused::Unstated || shape.is_empty() {
        return None;
    }
    let (module, leaf) = match name.rsplit_once('.') {
        Some((front, leaf)) => (front.rsplit('.').next().unwrap_or(front), leaf),
        None => ("", name),
    };
    let (module, conv1d) = if leaf.starts_with("in_proj_") {
        FUSED.iter().find(|(m, _)| *m == leaf)?
    } else if leaf == "weight" || leaf == "bias" {
        FUSED.iter().find(|(m, _)| *m == module)?
    } else {
        return None;
    };
    let fused_axis = match (shape.len(), conv1d) {
        (1, _) => 0,
        (rank, true) => rank - 1,
        (rank, false) => rank - 2,
    };
    if axis != fused_axis {
        return None;
    }
    let kind = kind(module);
    if let Kind::Gated(second) = kind {
        // Gated when the first layer is twice the second's input; plain when it is its size.
        // Without the second layer, tjoin cannot tell, and asks.
        let front = &name[..name.len() - leaf.len() - 1];
        let front = &front[..front.len() - module.len()];
        let second = sibling(&format!("{front}{second}.weight"));
        if let Some(second) = second
            && let Some(&inner) = second.last()
            && shape[fused_axis] == inner
        {
            return None;
        }
    }
    Some(Unstated {
        name: name.to_string(),
        axis,
        kind,
    })
}

/// The refusal of fused tensors joined with no layout stated ([`unstated`]), with the rules
/// that state each layout for them; `names` are every tensor of the inputs, for the globs.
pub fn unstated_refusal(fused: &[Unstated], names: &[&str]) -> Refusal {
    let details: Vec<String> = fused
        .iter()
        .map(|f| format!("{}  along axis {}", excerpt(&f.name), f.axis))
        .collect();
    let details = crate::error::capped(details, 10);
    // Globs for the tensors of one axis and kind, which one rule can state.
    let mut groups: Vec<(usize, Kind, Vec<&str>)> = Vec::new();
    for f in fused {
        match groups
            .iter_mut()
            .find(|(a, k, _)| (*a, *k) == (f.axis, f.kind))
        {
            Some((_, _, members)) => members.push(&f.name),
            None => groups.push((f.axis, f.kind, vec![&f.name])),
        }
    }
    let mut flags = Vec::new();
    for (axis, kind, targets) in &groups {
        let chunks = match kind {
            Kind::Qkv => "chunks 3",
            Kind::GateUp | Kind::Gated(_) => "chunks 2",
            Kind::Several => "chunks P:Q:R",
        };
        for (glob, _) in suggest_globs(targets, names) {
            let glob = excerpt(&glob);
            flags.push(format!(
                "--axis-for {} or --axis-for {}",
                shell_quote(&format!("{glob}={axis} {chunks}")),
                shell_quote(&format!("{glob}={axis} plain"))
            ));
        }
    }
    let flags = crate::error::capped(flags, 10);
    let count = fused.len();
    Refusal {
        headline: format!(
            "{count} fused tensor{} (several projections side by side: q, k and v, or gate \
             and up) \
             would be joined along {} fused axis with no layout stated: tjoin cannot tell \
             from the bytes which join is right, and the wrong one has the right shape",
            if count == 1 { "" } else { "s" },
            if count == 1 { "its" } else { "their" },
        ),
        details,
        hint: Some(format!(
            "say how each rank holds its piece, with {} (or the same words after the axis \
             in a --rules line): `chunks` when each rank holds a slice of each part \
             ([q_r; k_r; v_r], as vLLM and Megatron-LM's GPT-2 split do; `chunks 4:1:1` for \
             parts of unequal sizes, such as 32 query and 8 key-value heads), `plain` when \
             each rank holds whole heads or groups (as GPT-NeoX's query_key_value and \
             Megatron-Core's linear_qkv do)",
            flags.join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_and_replicas_are_read_and_written_back() {
        for (words, shown) in [
            ("", ""),
            ("plain", " plain"),
            ("chunks 2", " chunks 2"),
            ("chunks 1:1", " chunks 2"),
            ("chunks 4:1:1", " chunks 4:1:1"),
            ("replicas 2", " replicas 2"),
            ("chunks 3 replicas 4", " chunks 3 replicas 4"),
            ("replicas 4 plain", " plain replicas 4"),
            (
                "chunks 4:2:2 replicas 1:2:2",
                " chunks 4:2:2 replicas 1:2:2",
            ),
            ("replicas 1:2:2 chunks 3", " chunks 3 replicas 1:2:2"),
        ] {
            let words: Vec<&str> = words.split_whitespace().collect();
            assert_eq!(parse(&words).unwrap().to_string(), shown, "{words:?}");
        }
        for (words, says) in [
            ("chunks", "needs a count or proportions"),
            ("chunks 1", "is neither a count of 2 or more"),
            ("chunks 0:1", "is neither"),
            ("chunks 4:x", "is neither"),
            ("chunks 65", "is neither"),
            ("replicas", "needs a count of 2 or more"),
            ("replicas 1", "needs a count of 2 or more"),
            ("replicas 2 replicas 2", "given twice"),
            ("plain chunks 2", "one of `plain` or `chunks`"),
            ("replicas 1:2:2", "needs `chunks` with as many parts (3)"),
            (
                "chunks 2 replicas 1:2:2",
                "needs `chunks` with as many parts (3)",
            ),
            (
                "plain replicas 1:2",
                "needs `chunks` with as many parts (2)",
            ),
            ("chunks 2 replicas 1:1", "is neither a count of 2 or more"),
            ("chunks 2 replicas 0:2", "is neither"),
            ("chunks 2 replicas 2:x", "is neither"),
            (
                "sideways",
                "`sideways` after the axis is not a word of a rule",
            ),
        ] {
            let words: Vec<&str> = words.split_whitespace().collect();
            let error = parse(&words).unwrap_err();
            assert!(error.contains(says), "{words:?}: {error}");
        }
    }

    #[test]
    fn fused_names_are_found_along_their_fused_axis_only() {
        let none = |_: &str| None;
        let unstated_at = |name: &str, shape: &[u64], axis| {
            unstated(name, shape, axis, &Parts::default(), &none).map(|u| u.axis)
        };
        assert_eq!(
            unstated_at("m.layers.0.attn.qkv_proj.weight", &[12, 4], 0),
            Some(0)
        );
        assert_eq!(
            unstated_at("m.layers.0.attn.qkv_proj.bias", &[12], 0),
            Some(0)
        );
        assert_eq!(
            unstated_at("m.layers.0.attn.qkv_proj.weight", &[12, 4], 1),
            None
        );
        // Conv1D: the output features are the last axis.
        assert_eq!(
            unstated_at("transformer.h.0.attn.c_attn.weight", &[4, 12], 1),
            Some(1)
        );
        assert_eq!(
            unstated_at("transformer.h.0.attn.c_attn.weight", &[4, 12], 0),
            None
        );
        assert_eq!(
            unstated_at("transformer.h.0.attn.c_attn.bias", &[12], 0),
            Some(0)
        );
        assert_eq!(unstated_at("encoder.in_proj_weight", &[12, 4], 0), Some(0));
        // Not a fused module's weight or bias.
        assert_eq!(
            unstated_at("m.layers.0.attn.q_proj.weight", &[12, 4], 0),
            None
        );
        assert_eq!(
            unstated_at(
                "d.layers.0.self_attention.linear_qkv.layer_norm_weight",
                &[4],
                0
            ),
            None
        );
        assert_eq!(unstated_at("qkv_proj.weight.scale", &[4], 0), None);
        // A stated layout passes.
        let plain = parse(&["plain"]).unwrap();
        assert!(unstated("a.qkv_proj.weight", &[12, 4], 0, &plain, &none).is_none());
        let replicas = parse(&["replicas", "2"]).unwrap();
        assert!(unstated("a.qkv_proj.weight", &[12, 4], 0, &replicas, &none).is_some());
    }

    #[test]
    fn a_first_mlp_layer_is_fused_when_twice_its_second_layers_input() {
        let ask = |fc2: Option<Vec<u64>>| {
            let sibling = move |name: &str| {
                assert_eq!(name, "decoder.layers.0.mlp.linear_fc2.weight");
                fc2.clone()
            };
            unstated(
                "decoder.layers.0.mlp.linear_fc1.weight",
                &[16, 8],
                0,
                &Parts::default(),
                &sibling,
            )
            .is_some()
        };
        assert!(ask(Some(vec![8, 8])), "gated: [gate; up]");
        assert!(!ask(Some(vec![8, 16])), "not gated");
        assert!(ask(None), "cannot tell");
    }
}
