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

use crate::dtype::DType;
use crate::error::{Error, Refusal, Result};
use crate::input::Tensor;
use crate::messages::excerpt;
use crate::plan::compare;
use crate::plan::globs::{shell_quote, suggest_globs};

pub use crate::plan::groups::{Grouped, grouped_refusal, replica_groups};

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
/// that a group size does not divide, a replicated part that differs, and, unless
/// `join_identical`, a part no count replicates that groups of consecutive pieces hold alike
/// (ranks sharing key-value heads: joined, each would come out once per rank).
pub fn chunked<'a>(
    name: &str,
    pieces: &[&'a Tensor],
    axis: usize,
    shares: &[u64],
    replicas: &[u64],
    join_identical: bool,
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
    check_proportions(name, pieces, axis, total, spec, &replicas)?;
    let mut sources = Vec::with_capacity(pieces.len() * shares.len());
    let mut differing = Vec::new();
    let mut shared = replicas.clone();
    let mut before = 0;
    for (j, (&width, &k)) in widths.iter().zip(&replicas).enumerate() {
        let unit = pieces[0].info.shape[axis] / total;
        // A constant tensor (a fresh model's zero biases) cannot tell: its rule stands.
        let constant = || !compare::constant(pieces[0]).is_ok_and(|c| c.is_none());
        if k == 1 && !join_identical {
            let part = unit * before..unit * (before + width);
            let same = |a: &Tensor, b: &Tensor| {
                matches!(compare::differs_in(a, b, axis, part.clone()), Ok(None))
            };
            let n = pieces.len();
            if n > 1 && same(pieces[0], pieces[1]) && !constant() {
                let alike = |g: usize| {
                    pieces
                        .chunks(g)
                        .all(|c| c[1..].iter().all(|o| same(c[0], o)))
                };
                shared[j] = (2..=n).find(|&g| n % g == 0 && alike(g)).unwrap_or(1) as u64;
            }
        }
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
    if shared != replicas {
        return Err(vec![shared_refusal(
            name, spec, &widths, &shared, &replicas,
        )]);
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
    if let Some(refusal) = inside_a_byte(name, &sources, axis, &pieces[0].info.dtype) {
        return Err(vec![refusal]);
    }
    Ok(sources)
}

/// Refuses pieces whose size along `axis` is not a multiple of the proportions' sum
/// (`total`), and a count of pieces that a group size (`replicas`) does not divide; `spec` is
/// the rule's words.
fn check_proportions(
    name: &str,
    pieces: &[&Tensor],
    axis: usize,
    total: u64,
    spec: &str,
    replicas: &[u64],
) -> std::result::Result<(), Vec<Refusal>> {
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
    Ok(())
}

/// The refusal of a part that groups of consecutive inputs hold alike (`shared`: each part's
/// group size, found) where the rule (`spec`, its parts' `widths` and counts `replicas`)
/// says otherwise, with the rule that would say it.
fn shared_refusal(
    name: &str,
    spec: &str,
    widths: &[u64],
    shared: &[u64],
    replicas: &[u64],
) -> Refusal {
    // The rule that says it: the output's proportions, with a count for every part.
    let lcm = shared.iter().fold(1, |l, &k| l * k / gcd(l, k));
    let out: Vec<u64> = widths
        .iter()
        .zip(shared)
        .map(|(w, k)| w * lcm / k)
        .collect();
    let g = out.iter().fold(0, |g, &x| gcd(g, x)).max(1);
    let text = |v: &[u64]| {
        v.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(":")
    };
    let out: Vec<u64> = out.iter().map(|x| x / g).collect();
    let parts_shared: Vec<String> = (0..shared.len())
        .filter(|&j| shared[j] != replicas[j])
        .map(|j| {
            format!(
                "part {} of {} in groups of {}",
                j + 1,
                shared.len(),
                shared[j]
            )
        })
        .collect();
    Refusal {
        headline: format!(
            "tensor `{}`: its rule says `{spec}`, but consecutive inputs hold the same \
             bytes for a part ({}): joined part by part, each would come out once per input",
            excerpt(name),
            parts_shared.join(", ")
        ),
        details: Vec::new(),
        hint: Some(format!(
            "if ranks share that part (more ranks than key-value heads), say so: `chunks {} \
             replicas {}`; check that no rank's file is given twice (a fused tensor's \
             parts are never meant to be joined twice: no check could tell that model \
             from a wrong one)",
            text(&out),
            text(shared)
        )),
    }
}

/// The refusal of a part of `sources` that starts or ends inside a byte of `dtype` (float4's
/// two elements a byte), when one does.
fn inside_a_byte(
    name: &str,
    sources: &[(&Tensor, Range<u64>)],
    axis: usize,
    dtype: &DType,
) -> Option<Refusal> {
    if dtype.bits() % 8 == 0 {
        return None;
    }
    let inner = |t: &Tensor| t.info.shape[axis + 1..].iter().product::<u64>();
    let (t, range) = sources.iter().find(|(t, range)| {
        let bits = |elements: u64| elements * inner(t) * dtype.bits() % 8 != 0;
        bits(range.start) || bits(range.end)
    })?;
    Some(Refusal {
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
    })
}

/// The greatest common divisor (`gcd(0, x)` is x).
fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
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
    /// Query, key and value laid out head by head or query group by query group, so that
    /// each rank of its framework's split holds whole heads or groups: `plain`, never
    /// `chunks` (GPT-NeoX's `attention.query_key_value`, Megatron-Core's `linear_qkv`).
    WholeHeads,
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

/// A tensor refused by [`unstated`]: its name, fused axis and kind; the proportions of its
/// q, k and v that its output projection tells ([`qkv_shares`]), if it does; and the
/// `chunks` its rule states, when they disagree with those.
#[derive(Debug, Clone)]
pub struct Unstated {
    name: String,
    axis: usize,
    kind: Kind,
    told: Option<[u64; 3]>,
    stated: Option<String>,
}

/// The proportions q:k:v an output projection tells, if it does ([`qkv_shares`]).
type Told = Option<[u64; 3]>;

/// The fused q, k, v projections whose attention output projection, a sibling row-parallel
/// Linear, takes q's heads as its input features: so its input size is q's share of a rank's
/// piece, and the rest is k and v, equal (vLLM's and Phi-3's `qkv_proj`, Baichuan's `W_pack`).
const QKV_OUTPUTS: &[(&str, &str)] = &[("qkv_proj", "o_proj"), ("W_pack", "o_proj")];

/// The proportions q:k:v of each rank's piece of a fused `qkv` tensor of `rows` along its
/// fused axis, told by its output projection's input features (`out_inputs`), reduced.
fn qkv_shares(rows: u64, out_inputs: u64) -> Option<[u64; 3]> {
    let kv = rows
        .checked_sub(out_inputs)
        .filter(|r| r % 2 == 0 && *r > 0)?
        / 2;
    let g = gcd(out_inputs, kv).max(1);
    (out_inputs > 0).then_some([out_inputs / g, kv / g, kv / g])
}

/// Whether the tensor `name` of `shape` is a fused projection joined along its fused axis
/// (`axis`, counted from the front) by a rule that does not say how its parts lie (`parts`).
/// `sibling` gives the shape of another tensor of the first input by name: a gated MLP's
/// first layer is told from a plain one by its second layer's size. `whole`: `shape` is the
/// whole model's tensor (a split's input), whose parts stand in the proportions of the chunks
/// alone, whatever ranks share them; else it is a rank's piece, in which part j is
/// `share_j * replicas_j` wide (`parts.part_replicas`).
pub fn unstated(
    name: &str,
    shape: &[u64],
    axis: usize,
    parts: &Parts,
    whole: bool,
    sibling: &dyn Fn(&str) -> Option<Vec<u64>>,
) -> Option<Unstated> {
    if parts.fused == Fused::Plain || shape.is_empty() {
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
    // The module's parent (`model.layers.0.self_attn.`), where its siblings are.
    let front = (name.strip_suffix(leaf))
        .and_then(|f| f.strip_suffix('.'))
        .and_then(|f| f.strip_suffix(*module))
        .unwrap_or("");
    let kind = match *module {
        // GPT-NeoX's (under `attention.`; Falcon's, BLOOM's and ChatGLM's are under
        // `self_attention.`, laid out otherwise) and Megatron-Core's.
        "query_key_value" if front.ends_with(".attention.") || front == "attention." => {
            Kind::WholeHeads
        }
        "linear_qkv" => Kind::WholeHeads,
        _ => kind(module),
    };
    let told = QKV_OUTPUTS
        .iter()
        .find(|(m, _)| *m == *module)
        .and_then(|(_, out)| sibling(&format!("{front}{out}.weight")))
        .and_then(|out| qkv_shares(shape[fused_axis], *out.last()?));
    if let Fused::Chunks(shares) = &parts.fused {
        // A stated layout stands, unless the output projection tells other proportions: a
        // rank's piece holds part j in the proportion share_j * replicas_j.
        let told = told?;
        let replicas = |j: usize| match whole {
            true => 1,
            false => parts.part_replicas.get(j).copied().unwrap_or(1),
        };
        let reps = (0..shares.len()).map(replicas);
        let widths: Vec<u64> = shares.iter().zip(reps).map(|(s, r)| s * r).collect();
        let total: u64 = widths.iter().sum();
        let agree = widths.len() == 3
            && widths[1] == widths[2]
            && widths[0] * (told[0] + 2 * told[1]) == told[0] * total;
        // The words the check held: of a whole tensor, the chunks alone.
        let stated = match whole {
            true => Parts {
                part_replicas: Vec::new(),
                ..parts.clone()
            },
            false => parts.clone(),
        };
        let stated = stated.to_string().trim().to_string();
        return (!agree).then(|| Unstated {
            name: name.to_string(),
            axis,
            kind,
            told: Some(told),
            stated: Some(stated),
        });
    }
    if let Kind::Gated(second) = kind {
        // Gated when the first layer is twice the second's input; plain when it is its size.
        // Without the second layer, tjoin cannot tell, and asks.
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
        told,
        stated: None,
    })
}

/// The refusals of fused tensors joined with no layout stated, or with proportions their
/// output projection contradicts ([`unstated`]), with the rules that state each layout for
/// them; `names` are every tensor of the inputs, for the globs.
pub fn unstated_refusals(fused: &[Unstated], names: &[&str]) -> Vec<Refusal> {
    let (stated, unstated): (Vec<Unstated>, Vec<Unstated>) =
        fused.iter().cloned().partition(|f| f.stated.is_some());
    let mut refusals = Vec::new();
    if !stated.is_empty() {
        let details = stated.iter().map(|f| {
            let told = f.told.unwrap_or_default();
            format!(
                "{}  `{}`, but its output projection's input says q holds {} of every {} \
                 rows of a rank's piece: `chunks {}:{}:{}`",
                excerpt(&f.name),
                f.stated.as_deref().unwrap_or_default(),
                told[0],
                told[0] + 2 * told[1],
                told[0],
                told[1],
                told[2]
            )
        });
        refusals.push(Refusal {
            headline: format!(
                "{} fused q, k, v tensor{} would be cut into parts of other sizes than {} \
                 q, k and v: the result has the right shape and is a wrong model",
                stated.len(),
                if stated.len() == 1 { "" } else { "s" },
                if stated.len() == 1 { "its" } else { "their" }
            ),
            details: crate::error::capped(details.collect(), 10),
            hint: Some(
                "give the proportions config.json's head counts give (num_attention_heads : \
                 num_key_value_heads : num_key_value_heads); when several ranks hold each \
                 key-value head, add `replicas 1:N:N`"
                    .to_string(),
            ),
        });
    }
    if !unstated.is_empty() {
        refusals.push(unstated_refusal(&unstated, names));
    }
    refusals
}

/// The refusal of fused tensors joined with no layout stated ([`unstated`]), with the rules
/// that state each layout for them; `names` are every tensor of the inputs, for the globs.
fn unstated_refusal(fused: &[Unstated], names: &[&str]) -> Refusal {
    let details: Vec<String> = fused
        .iter()
        .map(|f| format!("{}  along axis {}", excerpt(&f.name), f.axis))
        .collect();
    let details = crate::error::capped(details, 10);
    // Globs for the tensors of one axis and kind, which one rule can state.
    let mut groups: Vec<(usize, Kind, Told, Vec<&str>)> = Vec::new();
    for f in fused {
        let key = (f.axis, f.kind, f.told);
        match groups.iter_mut().find(|(a, k, t, _)| (*a, *k, *t) == key) {
            Some((_, _, _, members)) => members.push(&f.name),
            None => groups.push((f.axis, f.kind, f.told, vec![&f.name])),
        }
    }
    let mut flags = Vec::new();
    for (axis, kind, told, targets) in &groups {
        let chunks = match (kind, told) {
            (Kind::Qkv, Some([q, k, v])) => format!("chunks {q}:{k}:{v}"),
            (Kind::Qkv, None) => "chunks 3".to_string(),
            (Kind::GateUp | Kind::Gated(_), _) => "chunks 2".to_string(),
            (Kind::Several, _) => "chunks P:Q:R".to_string(),
            (Kind::WholeHeads, _) => {
                for (glob, _) in suggest_globs(targets, names) {
                    let glob = excerpt(&glob);
                    flags.push(format!(
                        "--axis-for {} (laid out head by head or group by group: each rank \
                         of its framework's split holds whole ones)",
                        shell_quote(&format!("{glob}={axis} plain"))
                    ));
                }
                continue;
            }
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
mod tests;
