//! Where each tensor of a ZeRO checkpoint's consolidated state dict lies in its files, as
//! DeepSpeed's `zero_to_fp32.py` finds it. No I/O: records in, pieces out.
//!
//! - **Stages 1 and 2:** group `g`'s flat fp32 vector is every rank's
//!   `single_partition_of_fp32_groups[g]` back to back, in rank order; its parameters are
//!   consecutive slices of it in `param_shapes[g]` order (each followed by its
//!   `param_alignment_paddings` entry when the file records them), and a slice may straddle
//!   ranks. DeepSpeed saves the partitions without the group's padding and records it
//!   (`group_paddings`): the slices must then use the vector up exactly. (The script only
//!   checks that both ends round up to the same multiple of `2 x world size`, which lets a
//!   `param_shapes` that is off by less than the padding through, shifting every later
//!   parameter; tjoin applies that check only to files without `group_paddings`.)
//! - **Stage 3:** every parameter is partitioned on its own, `ceil(n / ws)` elements per rank at
//!   the same offset of every rank's `fp32_flat_groups` (back to back), the last ranks' tails
//!   padding; the ranks' slices back to back, cut to `n`, are the parameter. The offsets must
//!   use up the ranks' vectors exactly.
//! - **Frozen parameters:** stage 2's `frozen_param_fragments` are whole; stage 3's are each
//!   rank's part, joined back to back and cut to the shape's size; stage 1 saves none, and
//!   they are taken from the model file's `module`, as the model held them.
//! - **Buffers** are rank 0's `module` entries that `buffer_names` lists; **tied names**
//!   (`shared_params`) are copies of the tensor they name.

use std::collections::{HashMap, HashSet};

use super::records::{ModelStates, OptimStates, Stored};
use crate::dtype::DType;
use crate::messages::{excerpt, shape_text};

/// Which file a piece's bytes are in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The model-states file of this rank (stages 1 and 2: rank 0's, the only one).
    Model(usize),
    /// The optimizer-states file of this rank.
    Optim(usize),
}

/// A run of elements of one file that is part of an output tensor.
#[derive(Debug, Clone, PartialEq)]
pub struct Piece {
    /// The file.
    pub origin: Origin,
    /// Where its first element lies in the file, in bytes.
    pub start: u64,
    /// How many elements it has.
    pub numel: u64,
    /// Where it goes in the output tensor, flattened, in elements.
    pub at: u64,
}

/// What an output tensor is to the model.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// A buffer, from rank 0's `module`.
    Buffer,
    /// A trained parameter, from the flat fp32 partitions.
    Trained,
    /// A frozen parameter, from `frozen_param_fragments`.
    Frozen,
    /// A frozen parameter that DeepSpeed saved only in the model file's `module` (stage 1).
    FrozenFromModule,
    /// A tied name, a copy of the tensor named.
    Tied(String),
}

/// One tensor of the output: its name, shape, the element type its pieces hold, and pieces
/// that tile its elements.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Its name in the state dict.
    pub name: String,
    /// Its shape.
    pub shape: Vec<u64>,
    /// Its pieces' element type.
    pub dtype: DType,
    /// Whether it is one piece that is the stored tensor itself (a buffer, a whole frozen
    /// parameter), rather than runs of flat vectors.
    pub whole: bool,
    /// Its pieces, in order.
    pub pieces: Vec<Piece>,
    /// What it is.
    pub kind: Kind,
}

impl Entry {
    fn whole(name: &str, stored: &Stored, origin: Origin, kind: Kind) -> Entry {
        Entry {
            name: name.to_string(),
            shape: stored.shape.clone(),
            dtype: stored.dtype.clone(),
            whole: true,
            pieces: vec![Piece {
                origin,
                start: stored.start,
                numel: stored.numel(),
                at: 0,
            }],
            kind,
        }
    }
}

/// The tensors `zero_to_fp32.py` writes for a checkpoint of `stage` (buffers, frozen
/// parameters, trained parameters, tied names, in its order), or every problem found.
/// `models` holds one model-states file per rank at stage 3, else rank 0's alone.
pub fn entries(
    stage: u64,
    models: &[ModelStates],
    optims: &[OptimStates],
) -> Result<Vec<Entry>, Vec<String>> {
    let mut problems = Vec::new();
    let mut out = buffers(&models[0], &mut problems);
    let trained: HashSet<&str> = models[0]
        .param_shapes
        .iter()
        .flatten()
        .map(|(n, _)| n.as_str())
        .collect();
    match stage {
        3 => {
            out.extend(frozen_partitioned(models, &mut problems));
            out.extend(trained_stage3(&models[0], optims, &mut problems));
        }
        _ => {
            out.extend(frozen_stage12(&models[0], &trained, &mut problems));
            out.extend(trained_stage12(&models[0], optims, &mut problems));
        }
    }
    tie(&mut out, &models[0].shared);
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

/// Rank 0's buffers, in `module`'s order.
fn buffers(model: &ModelStates, problems: &mut Vec<String>) -> Vec<Entry> {
    let listed: HashSet<&str> = model.buffer_names.iter().map(String::as_str).collect();
    let mut out: Vec<Entry> = model
        .module
        .iter()
        .filter(|(name, _)| listed.contains(name.as_str()))
        .map(|(name, stored)| Entry::whole(name, stored, Origin::Model(0), Kind::Buffer))
        .collect();
    for (name, why) in &model.unlocated {
        if listed.contains(name.as_str()) {
            problems.push(format!("the buffer `{}`: {why}", excerpt(name)));
        }
    }
    // The script keeps the module's order; a name listed twice is one entry.
    let mut seen = HashSet::new();
    out.retain(|e| seen.insert(e.name.clone()));
    out
}

/// Stages 1 and 2's frozen parameters: stage 2's `frozen_param_fragments`, whole; at stage 1
/// (which saves none), the parameters of `module` that are neither trained, buffers nor tied.
fn frozen_stage12(
    model: &ModelStates,
    trained: &HashSet<&str>,
    problems: &mut Vec<String>,
) -> Vec<Entry> {
    let Some(shapes) = &model.frozen_shapes else {
        let buffers: HashSet<&str> = model.buffer_names.iter().map(String::as_str).collect();
        let tied: HashSet<&str> = model.shared.iter().map(|(n, _)| n.as_str()).collect();
        let untold =
            |name: &str| !trained.contains(name) && !buffers.contains(name) && !tied.contains(name);
        for (name, why) in &model.unlocated {
            if untold(name) {
                problems.push(format!("the frozen parameter `{}`: {why}", excerpt(name)));
            }
        }
        return model
            .module
            .iter()
            .filter(|(name, _)| untold(name))
            .map(|(name, stored)| {
                Entry::whole(name, stored, Origin::Model(0), Kind::FrozenFromModule)
            })
            .collect();
    };
    let fragments: HashMap<&str, &Stored> = model
        .frozen_fragments
        .iter()
        .map(|(n, s)| (n.as_str(), s))
        .collect();
    let mut out = Vec::new();
    for (name, shape) in shapes {
        match fragments.get(name.as_str()) {
            Some(stored) if stored.shape == *shape => {
                out.push(Entry::whole(name, stored, Origin::Model(0), Kind::Frozen));
            }
            Some(stored) => problems.push(format!(
                "the frozen parameter `{}` has shape {} in `frozen_param_shapes` but {} in \
                 `frozen_param_fragments`",
                excerpt(name),
                shape_text(shape),
                shape_text(&stored.shape)
            )),
            None => problems.push(format!(
                "the frozen parameter `{}` is in `frozen_param_shapes` but not in \
                 `frozen_param_fragments`",
                excerpt(name)
            )),
        }
    }
    out
}

/// Stage 3's frozen parameters: every rank's fragment back to back, cut to the shape's size.
fn frozen_partitioned(models: &[ModelStates], problems: &mut Vec<String>) -> Vec<Entry> {
    let Some(shapes) = &models[0].frozen_shapes else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (name, shape) in shapes {
        let numel: u64 = shape.iter().product();
        let mut pieces = Vec::new();
        let mut at = 0u64;
        let mut dtype = None;
        for (rank, model) in models.iter().enumerate() {
            let found = model.frozen_fragments.iter().find(|(n, _)| n == name);
            let Some((_, stored)) = found else {
                problems.push(format!(
                    "rank {rank}'s model-states file lacks the frozen parameter `{}`",
                    excerpt(name)
                ));
                break;
            };
            if dtype.get_or_insert_with(|| stored.dtype.clone()) != &stored.dtype {
                problems.push(format!(
                    "the ranks hold the frozen parameter `{}` in different element types",
                    excerpt(name)
                ));
            }
            let take = stored.numel().min(numel - at);
            if take > 0 {
                pieces.push(Piece {
                    origin: Origin::Model(rank),
                    start: stored.start,
                    numel: take,
                    at,
                });
            }
            at += take;
        }
        if at < numel {
            problems.push(format!(
                "the ranks' parts of the frozen parameter `{}` hold {at} elements, fewer than \
                 its shape {} needs",
                excerpt(name),
                shape_text(shape)
            ));
            continue;
        }
        out.push(Entry {
            name: name.clone(),
            shape: shape.clone(),
            dtype: dtype.unwrap_or(DType::Float32),
            whole: false,
            pieces,
            kind: Kind::Frozen,
        });
    }
    out
}

/// Cuts the elements `[from, from + numel)` of the float32 vector that the `parts` make back
/// to back (each `(origin, start, numel)`) into pieces placed from `at`.
fn cut(parts: &[(Origin, u64, u64)], from: u64, numel: u64, at: u64) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let (mut begin, end) = (from, from + numel);
    let mut part_start = 0u64;
    for &(origin, start, len) in parts {
        let part_end = part_start + len;
        if begin < part_end && begin < end {
            let take = end.min(part_end) - begin;
            pieces.push(Piece {
                origin,
                start: start + (begin - part_start) * 4,
                numel: take,
                at: at + (begin - from),
            });
            begin += take;
        }
        part_start = part_end;
    }
    pieces
}

/// Stages 1 and 2's trained parameters, group by group.
fn trained_stage12(
    model: &ModelStates,
    optims: &[OptimStates],
    problems: &mut Vec<String>,
) -> Vec<Entry> {
    let world = optims.len() as u64;
    let mut out = Vec::new();
    for (g, shapes) in model.param_shapes.iter().enumerate() {
        let mut parts = Vec::with_capacity(optims.len());
        for (rank, optim) in optims.iter().enumerate() {
            match optim.groups.get(g) {
                Some(group) => parts.push((Origin::Optim(rank), group.start, group.numel())),
                None => {
                    problems.push(format!(
                        "`param_shapes` has {} groups, but rank {rank}'s optimizer file has {} \
                         flat partitions",
                        model.param_shapes.len(),
                        optim.groups.len()
                    ));
                    return out;
                }
            }
        }
        let available: u64 = parts.iter().map(|p| p.2).sum();
        let paddings = optims[0].alignment.as_ref().map(|a| a.get(g));
        if let Some(paddings) = paddings
            && paddings.is_none_or(|p| p.len() != shapes.len())
        {
            problems.push(format!(
                "`param_alignment_paddings` does not list one padding for each of the {} \
                 parameters of group {g}",
                shapes.len()
            ));
            continue;
        }
        let mut offset = 0u64;
        for (i, (name, shape)) in shapes.iter().enumerate() {
            let numel: u64 = shape.iter().product();
            if offset.saturating_add(numel) > available {
                offset = offset.saturating_add(numel);
                break;
            }
            out.push(Entry {
                name: name.clone(),
                shape: shape.clone(),
                dtype: DType::Float32,
                whole: false,
                pieces: cut(&parts, offset, numel, 0),
                kind: Kind::Trained,
            });
            let padding = paddings.flatten().map_or(0, |p| p[i]);
            offset = offset.saturating_add(numel).saturating_add(padding);
        }
        let lean = optims.iter().all(|o| o.paddings.is_some());
        if let Some(problem) = group_misfit(g, shapes.len(), offset, available, world, lean) {
            problems.push(problem);
        }
    }
    out
}

/// Why `taken` elements of a group's parameters do not fit the `available` elements of its
/// partitions, if they do not: more than there are; with the partitions saved without their
/// padding (`lean`), any other number; else a difference beyond the padding to a multiple of
/// `2 x world`.
fn group_misfit(
    g: usize,
    count: usize,
    taken: u64,
    available: u64,
    world: u64,
    lean: bool,
) -> Option<String> {
    let align = |n: u64| n.div_ceil(2 * world) * (2 * world);
    let start = format!(
        "group {g}: its {count} parameters in `param_shapes` take {taken} elements (with their \
         paddings)"
    );
    if taken > available {
        return Some(format!(
            "{start}, more than the {available} that the ranks' flat partitions of it hold"
        ));
    }
    let left = available - taken;
    if lean && left != 0 {
        return Some(format!(
            "{start}, but the ranks' flat partitions of it hold {available}, saved without \
             their padding (`group_paddings`): {left} element{} would be left over",
            if left == 1 { "" } else { "s" }
        ));
    }
    (align(taken) != align(available)).then(|| {
        format!(
            "{start}, and the ranks' flat partitions of it hold {available}: more than a \
             padding to a multiple of 2 x {world} ranks leaves over"
        )
    })
}

/// Stage 3's trained parameters: each partitioned on its own across the ranks.
fn trained_stage3(
    model: &ModelStates,
    optims: &[OptimStates],
    problems: &mut Vec<String>,
) -> Vec<Entry> {
    let world = optims.len() as u64;
    let sizes = |o: &OptimStates| o.groups.iter().map(Stored::numel).collect::<Vec<u64>>();
    let first = sizes(&optims[0]);
    for (rank, optim) in optims.iter().enumerate().skip(1) {
        if sizes(optim) != first {
            problems.push(format!(
                "rank {rank}'s flat partitions hold {} elements, rank 0's {}: every rank of \
                 stage 3 holds the same",
                shape_text(&sizes(optim)),
                shape_text(&first)
            ));
            return Vec::new();
        }
    }
    let per_rank: u64 = first.iter().sum();
    let ranks: Vec<Vec<(Origin, u64, u64)>> = optims
        .iter()
        .enumerate()
        .map(|(r, o)| {
            o.groups
                .iter()
                .map(|g| (Origin::Optim(r), g.start, g.numel()))
                .collect()
        })
        .collect();
    let mut out = Vec::new();
    let mut offset = 0u64;
    for (name, shape) in model.param_shapes.iter().flatten() {
        let numel: u64 = shape.iter().product();
        let part = numel.div_ceil(world);
        if offset.saturating_add(part) > per_rank {
            offset = offset.saturating_add(part);
            continue;
        }
        let mut pieces = Vec::new();
        for (r, parts) in ranks.iter().enumerate() {
            let at = r as u64 * part;
            let take = part.min(numel.saturating_sub(at));
            pieces.extend(cut(parts, offset, take, at));
        }
        out.push(Entry {
            name: name.clone(),
            shape: shape.clone(),
            dtype: DType::Float32,
            whole: false,
            pieces,
            kind: Kind::Trained,
        });
        offset = offset.saturating_add(part);
    }
    if offset != per_rank {
        problems.push(format!(
            "the {} parameters of `param_shapes` take {offset} elements of each rank's flat \
             partitions (ceil(size / {world}) each), but each rank's hold {per_rank}",
            model.param_shapes.iter().map(Vec::len).sum::<usize>()
        ));
    }
    out
}

/// Adds each tied name whose tensor is present as a copy of it.
fn tie(out: &mut Vec<Entry>, shared: &[(String, String)]) {
    for (name, source) in shared {
        let Some(found) = out.iter().find(|e| e.name == *source) else {
            continue;
        };
        let copy = Entry {
            name: name.clone(),
            kind: Kind::Tied(source.clone()),
            ..found.clone()
        };
        match out.iter().position(|e| e.name == *name) {
            Some(at) => out[at] = copy,
            None => out.push(copy),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flat(start: u64, numel: u64) -> Stored {
        Stored {
            dtype: DType::Float32,
            shape: vec![numel],
            start,
        }
    }

    fn optim(stage: u64, groups: Vec<Stored>) -> OptimStates {
        OptimStates {
            stage,
            partition_count: 2,
            groups,
            alignment: None,
            paddings: None,
            left_out: Vec::new(),
        }
    }

    fn model(shapes: &[(&str, &[u64])]) -> ModelStates {
        ModelStates {
            param_shapes: vec![
                shapes
                    .iter()
                    .map(|(n, s)| (n.to_string(), s.to_vec()))
                    .collect(),
            ],
            ..ModelStates::default()
        }
    }

    fn places(entry: &Entry) -> Vec<(u64, u64, u64)> {
        entry
            .pieces
            .iter()
            .map(|p| (p.start, p.numel, p.at))
            .collect()
    }

    #[test]
    fn a_stage_2_parameter_straddles_the_ranks() {
        // 7 + 5 = 12 elements, padded to 12 (a multiple of 4): 6 on each rank.
        let model = model(&[("a", &[7]), ("b", &[5])]);
        let optims = [optim(2, vec![flat(100, 6)]), optim(2, vec![flat(200, 6)])];
        let out = entries(2, &[model], &optims).unwrap();
        assert_eq!(out[0].pieces[1].origin, Origin::Optim(1));
        assert_eq!(places(&out[0]), [(100, 6, 0), (200, 1, 6)]);
        assert_eq!(places(&out[1]), [(204, 5, 0)]);
    }

    #[test]
    fn stage_3_parts_are_cut_to_the_size() {
        // 5 elements over 2 ranks: 3 + 2 (rank 1's third is padding), then 2: 1 + 1.
        let model = model(&[("a", &[5]), ("b", &[2])]);
        let optims = [optim(3, vec![flat(0, 4)]), optim(3, vec![flat(1000, 4)])];
        let out = entries(3, &[model], &optims).unwrap();
        assert_eq!(places(&out[0]), [(0, 3, 0), (1000, 2, 3)]);
        assert_eq!(places(&out[1]), [(12, 1, 0), (1012, 1, 1)]);
    }

    #[test]
    fn shapes_that_do_not_use_up_the_partitions_are_refused() {
        let model = model(&[("a", &[5])]);
        let optims = [optim(3, vec![flat(0, 4)]), optim(3, vec![flat(1000, 4)])];
        let problems = entries(3, &[model], &optims).unwrap_err();
        assert!(problems[0].contains("take 3 elements"), "{problems:?}");
        let model = self::model(&[("a", &[30])]);
        let optims = [optim(2, vec![flat(0, 6)]), optim(2, vec![flat(100, 6)])];
        let problems = entries(2, &[model], &optims).unwrap_err();
        assert!(problems[0].contains("more than the 12"), "{problems:?}");
        // Saved without padding (`group_paddings`), the partitions must be used up exactly:
        // 11 elements of 12 leave one over, which the script's rounded check lets through.
        let lean = |start| OptimStates {
            paddings: Some(vec![0]),
            ..optim(2, vec![flat(start, 6)])
        };
        let model = self::model(&[("a", &[7]), ("b", &[4])]);
        let problems = entries(2, &[model], &[lean(0), lean(100)]).unwrap_err();
        assert!(
            problems[0].contains("1 element would be left over"),
            "{problems:?}"
        );
        let model = self::model(&[("a", &[7]), ("b", &[4])]);
        let rounded = [optim(2, vec![flat(0, 6)]), optim(2, vec![flat(100, 6)])];
        assert!(entries(2, &[model], &rounded).is_ok());
    }
}
