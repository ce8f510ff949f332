//! FSDP2 / DTensor rank files as one input: the `torch.save` files each rank of a job writes
//! of its state dict (verl's `model_world_size_N_rank_R.pt`), whose values are DTensors (a
//! local block, its placements on a device mesh, the global shape) and plain tensors that
//! every rank holds whole (buffers).
//!
//! Each DTensor block is placed where its placements put it: along each mesh dimension in
//! turn, `Shard(d)` cuts the part of axis `d` left so far into as many pieces as the
//! dimension has ranks, as `torch.chunk` cuts (pieces of `ceil(size / n)`, the last ones
//! shorter or empty), and the rank's coordinate on that dimension picks its piece;
//! `Replicate()` leaves it whole. The block's shape must be the piece's, every coordinate of
//! the mesh must be present, and every rank from 0 to the world size (the file names' `N`, or
//! the mesh's size) must have its file: a missing rank, a rank given twice, ranks that
//! disagree on a tensor's global shape, dtype, placements or mesh are refused, naming the
//! files and the tensor. Blocks that several ranks hold (replicated along a mesh dimension,
//! and the plain tensors) are kept once; the other copies become the input's replicas, which
//! planning compares byte for byte with the copy kept (`src/plan/compare.rs`).
//!
//! The input's tensors and offsets then take the path of a distributed checkpoint's blocks
//! (`src/input/dcp.rs`, `src/plan/grid.rs`), whose tiling check also holds here.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;

use crate::error::{Error, InputRef, Refusal, Result, capped};
use crate::format::Format;
use crate::format::pickle::dtensor::{Distributed, Spread};
use crate::input::{Extras, Input, OpenOptions, Tensor};
use crate::messages::excerpt;
use crate::messages::shape_text;
use crate::sys::spill::Spill;

/// The most ranks a set of rank files may have.
const MAX_WORLD: u64 = 1 << 24;

/// Whether `input` is one rank's file of DTensors.
pub(in crate::input) fn is_rank_file(input: &Input) -> bool {
    input
        .extras
        .as_ref()
        .is_some_and(|e| !e.distributed.is_empty())
}

/// Whether a file's name is a `torch.save` rank file's: `.pt`, `.pth` or `.bin`, with `rank`
/// and a number in it (`model_world_size_2_rank_0.pt`, `rank1.pt`).
pub fn is_rank_file_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    let pickle = [".pt", ".pth", ".bin"].iter().any(|e| lower.ends_with(e));
    pickle
        && lower.rfind("rank").is_some_and(|at| {
            let rest = lower[at + 4..].trim_start_matches(['_', '-']);
            rest.starts_with(|c: char| c.is_ascii_digit())
        })
}

/// Opens the rank files of a folder (those [`is_rank_file_name`] picks) as one input;
/// refuses when one of them holds no DTensor.
pub fn open_folder(
    name: &InputRef,
    files: &[PathBuf],
    options: OpenOptions,
    spill: &mut Spill,
) -> Result<Input> {
    // verl's folder holds `model_`, `optim_` and `extra_state_` files of every rank: one
    // set is one state dict. The model's is read when there are several; other mixtures are
    // refused.
    let mut sets: BTreeMap<String, Vec<&PathBuf>> = BTreeMap::new();
    for path in files {
        let file_name = path.file_name().unwrap_or_default().to_string_lossy();
        sets.entry(set_pattern(&file_name)).or_default().push(path);
    }
    let mut note = None;
    let files: Vec<&PathBuf> = if sets.len() == 1 {
        files.iter().collect()
    } else {
        let models: Vec<&String> = sets.keys().filter(|p| p.starts_with("model")).collect();
        let [chosen] = models.as_slice() else {
            return Err(Error::Refused(vec![Refusal {
                headline: format!(
                    "{name} holds {} sets of rank files, and tjoin cannot tell which one to \
                     read",
                    sets.len()
                ),
                details: capped(sets.keys().map(|p| excerpt(p).into()).collect(), 10),
                hint: Some(
                    "name the files of one set (e.g. with a glob: folder/model_*_rank_*.pt)"
                        .to_string(),
                ),
            }]));
        };
        let chosen = (*chosen).clone();
        let others: Vec<String> = sets
            .keys()
            .filter(|p| **p != chosen)
            .map(|p| format!("`{}`", excerpt(p)))
            .collect();
        note = Some(format!(
            "the folder holds several sets of rank files: read `{}`, the model's; left \
             out {} (name those files to read them)",
            excerpt(&chosen),
            capped(others, 5).join(", ")
        ));
        sets.remove(&chosen).unwrap_or_default()
    };
    let members = files.iter().map(|path| path.as_path());
    let opened = Input::open_members(name.position, members, options, spill)?;
    let others: Vec<String> = opened
        .iter()
        .filter(|i| !is_rank_file(i))
        .map(|i| i.name.location.to_string())
        .collect();
    if !others.is_empty() {
        return Err(Error::Refused(vec![Refusal {
            headline: format!(
                "{name} holds {} files named like ranks' files, and {} of them hold{} no \
                 DTensor: tjoin cannot tell how they fit together",
                opened.len(),
                others.len(),
                if others.len() == 1 { "s" } else { "" }
            ),
            details: capped(others, 10),
            hint: Some(
                "name the files themselves to join them along an axis, or move the files \
                 that are not DTensor rank files out of the folder"
                    .to_string(),
            ),
        }]));
    }
    let mut input = combine(name.clone(), opened)?;
    if let Some(note) = note {
        input
            .extras
            .get_or_insert_with(Box::default)
            .notes
            .insert(0, note);
    }
    Ok(input)
}

/// A rank file's name with its rank number replaced by `*`: the name of its set.
fn set_pattern(file_name: &str) -> String {
    let lower = file_name.to_ascii_lowercase();
    let Some(at) = lower.rfind("rank") else {
        return file_name.to_string();
    };
    let digits_from = at
        + 4
        + lower[at + 4..]
            .chars()
            .take_while(|c| matches!(c, '_' | '-'))
            .count();
    let digits = lower[digits_from..]
        .chars()
        .take_while(char::is_ascii_digit)
        .count();
    format!(
        "{}*{}",
        &file_name[..digits_from],
        &file_name[digits_from + digits..]
    )
}

/// `(N, R)` of a name like `model_world_size_N_rank_R.pt` (verl's), or `R` of `rank_R`, or
/// `rankR`.
fn numbers_in_name(input: &Input) -> (Option<u64>, Option<u64>) {
    let name = input
        .name
        .location
        .as_path()
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let after = |key: &str| -> Option<u64> {
        let at = name.rfind(key)? + key.len();
        let rest = name[at..].trim_start_matches('_');
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    };
    (after("world_size"), after("rank"))
}

/// The place of one rank's block: its offsets and shape inside the full tensor.
fn place(layout: &Distributed) -> (Vec<u64>, Vec<u64>) {
    let mut offsets = vec![0; layout.shape.len()];
    let mut sizes = layout.shape.clone();
    for (dim, spread) in layout.placements.iter().enumerate() {
        if let Spread::Shard(axis) = *spread {
            let (n, c) = (layout.mesh[dim], layout.coordinate[dim]);
            let size = sizes[axis];
            let chunk = size.div_ceil(n.max(1));
            let start = c.saturating_mul(chunk).min(size);
            offsets[axis] += start;
            sizes[axis] = chunk.min(size - start);
        }
    }
    (offsets, sizes)
}

/// One rank file's tensor: which file, the tensor, its layout if it is a DTensor's block.
struct Piece {
    file: usize,
    tensor: Tensor,
    layout: Option<Distributed>,
}

/// The blocks of every rank file, placed, as one input named `name`.
pub(in crate::input) fn combine(name: InputRef, mut files: Vec<Input>) -> Result<Input> {
    let world = world_of(&name, &files)?;
    check_ranks(&name, &files, &world)?;
    let metadata = files[0].metadata().map(<[_]>::to_vec);
    let (order, pieces) = pieces_by_name(&mut files);
    let placed = place_all(&name, &files, &world.ranks, order, pieces)?;
    let world_from = match world.named {
        false => "its meshes",
        true => "the files' names",
    };
    let mut notes = vec![format!(
        "DTensor rank files of ranks 0 to {} (a world of {}, by {world_from}): each \
         block is placed by its DTensor's placements and the mesh coordinate its file records",
        world.size - 1,
        world.size
    )];
    if !placed.replicas.is_empty() {
        notes.push(format!(
            "{} copies of blocks that several ranks hold (replicated, or plain tensors every \
             rank saved) are compared with the copy kept, which is written once",
            placed.replicas.len()
        ));
    }
    let mut watched = files.into_iter().flat_map(Input::into_watched);
    Ok(Input {
        name,
        tensors: placed.tensors.into(),
        format: Format::PyTorch,
        watched: watched.next().expect("at least one rank file"),
        extras: Extras {
            metadata,
            offsets: Some(placed.offsets),
            more_watched: watched.collect(),
            notes,
            replicas: placed.replicas,
            ..Extras::default()
        }
        .boxed(),
    })
}

/// The world the rank files come from: each file's rank, from its DTensors' meshes and
/// checked against its name, and the world's size.
struct World {
    /// Each file's rank, in the files' order.
    ranks: Vec<u64>,
    /// How many ranks the world has.
    size: u64,
    /// Whether the files' names give the world's size.
    named: bool,
    /// What is wrong so far (refused once the ranks are checked too).
    problems: Vec<String>,
}

/// The world of the rank `files`, or the refusal of a world too large to read.
fn world_of(name: &InputRef, files: &[Input]) -> Result<World> {
    let mut problems = Vec::new();
    let mut ranks = Vec::with_capacity(files.len());
    let mut named_world = BTreeSet::new();
    let mut world = 0u64;
    for file in files {
        let layouts = &file
            .extras
            .as_ref()
            .expect("a rank file has extras")
            .distributed;
        let seen: BTreeSet<u64> = layouts.iter().map(|(_, l)| l.rank).collect();
        let rank = *seen.first().expect("a rank file holds a DTensor");
        if seen.len() > 1 {
            problems.push(format!(
                "{}: its DTensors were saved by several ranks ({}): the file is not one \
                 rank's",
                file.name,
                list(&seen)
            ));
        }
        let (in_world, in_rank) = numbers_in_name(file);
        if let Some(named) = in_rank
            && named != rank
        {
            problems.push(format!(
                "{}: its name says rank {named}, but its DTensors were saved by rank {rank}",
                file.name
            ));
        }
        named_world.extend(in_world);
        for (_, layout) in layouts {
            world = world.max(layout.mesh.iter().product());
        }
        world = world.max(rank.saturating_add(1));
        ranks.push(rank);
    }
    if named_world.len() > 1 {
        problems.push(format!(
            "the files' names give different world sizes ({}): they come from different runs",
            list(&named_world)
        ));
    }
    if let Some(&named) = named_world.last() {
        world = world.max(named);
    }
    if world > MAX_WORLD {
        problems.push(format!(
            "the files' names or records give a world of {world} ranks, more than tjoin reads \
             ({MAX_WORLD}): a file is damaged, or its name's numbers are not ranks"
        ));
        return Err(refused(name, files.len(), problems));
    }
    Ok(World {
        ranks,
        size: world,
        named: !named_world.is_empty(),
        problems,
    })
}

/// Checks that every rank of `world` has one file, and that nothing else is wrong.
fn check_ranks(name: &InputRef, files: &[Input], world: &World) -> Result<()> {
    let (ranks, world, mut problems) = (&world.ranks, world.size, world.problems.clone());
    let mut by_rank: HashMap<u64, usize> = HashMap::new();
    for (at, &rank) in ranks.iter().enumerate() {
        if let Some(&first) = by_rank.get(&rank) {
            problems.push(format!(
                "rank {rank} is given twice: {} and {}",
                files[first].name, files[at].name
            ));
        } else {
            by_rank.insert(rank, at);
        }
    }
    let missing: Vec<u64> = (0..world).filter(|r| !by_rank.contains_key(r)).collect();
    if !missing.is_empty() && !problems.is_empty() {
        problems.push(format!(
            "of a world of {world} ranks, rank{} {} {} no file",
            if missing.len() == 1 { "" } else { "s" },
            list(&missing),
            if missing.len() == 1 { "has" } else { "have" }
        ));
    }
    if !missing.is_empty() && problems.is_empty() {
        let example = files[0]
            .name
            .location
            .as_path()
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        return Err(Error::Refused(vec![Refusal {
            headline: format!(
                "{name}: the rank files of a world of {world} ranks lack rank{} {}: without \
                 {} its blocks of every sharded tensor are missing",
                if missing.len() == 1 { "" } else { "s" },
                list(&missing),
                if missing.len() == 1 { "it" } else { "them" }
            ),
            details: capped(
                files
                    .iter()
                    .zip(ranks)
                    .map(|(f, r)| format!("rank {r}: {}", f.name))
                    .collect(),
                10,
            ),
            hint: Some(format!(
                "name every rank's file (like {}), or the folder that holds them all",
                excerpt(&example)
            )),
        }]));
    }
    if !problems.is_empty() {
        return Err(refused(name, files.len(), problems));
    }
    Ok(())
}

/// Every file's tensors, by name, in the order the files first hold them.
fn pieces_by_name(files: &mut [Input]) -> (Vec<String>, HashMap<String, Vec<Piece>>) {
    let mut order: Vec<String> = Vec::new();
    let mut pieces: HashMap<String, Vec<Piece>> = HashMap::new();
    for (at, file) in files.iter_mut().enumerate() {
        let extras = file.extras.as_mut().expect("a rank file has extras");
        let mut layouts: HashMap<usize, Distributed> = std::mem::take(&mut extras.distributed)
            .into_iter()
            .collect();
        for (index, tensor) in std::mem::take(&mut file.tensors)
            .into_vec()
            .into_iter()
            .enumerate()
        {
            let key = tensor
                .name
                .tensor
                .as_deref()
                .unwrap_or_default()
                .to_string();
            let entry = pieces.entry(key.clone()).or_insert_with(|| {
                order.push(key);
                Vec::new()
            });
            entry.push(Piece {
                file: at,
                tensor,
                layout: layouts.remove(&index),
            });
        }
    }
    (order, pieces)
}

/// The pieces of every tensor, placed; the first copy of each block is kept.
struct Placed {
    tensors: Vec<Tensor>,
    offsets: Vec<Vec<u64>>,
    replicas: Vec<(usize, Tensor)>,
}

/// Places the `pieces` of every tensor named in `order`, or refuses all that cannot be.
fn place_all(
    name: &InputRef,
    files: &[Input],
    ranks: &[u64],
    order: Vec<String>,
    mut pieces: HashMap<String, Vec<Piece>>,
) -> Result<Placed> {
    let mut problems = Vec::new();
    let mut tensors = Vec::new();
    let mut offsets = Vec::new();
    let mut replicas = Vec::new();
    for key in &order {
        let pieces = pieces.remove(key).unwrap_or_default();
        let placed = match place_pieces(key, &pieces, files, ranks) {
            Ok(placed) => placed,
            Err(why) => {
                problems.extend(why);
                continue;
            }
        };
        // The first copy of each block is kept; the others are its replicas.
        let mut kept: HashMap<(Vec<u64>, Vec<u64>), usize> = HashMap::new();
        for (piece, at) in pieces.into_iter().zip(placed) {
            let shape = piece.tensor.info.shape.to_vec();
            match kept.get(&(at.clone(), shape.clone())) {
                Some(&index) => replicas.push((index, piece.tensor)),
                None => {
                    kept.insert((at.clone(), shape), tensors.len());
                    offsets.push(at);
                    tensors.push(piece.tensor);
                }
            }
        }
    }
    if !problems.is_empty() {
        return Err(refused(name, files.len(), problems));
    }
    Ok(Placed {
        tensors,
        offsets,
        replicas,
    })
}

/// Where each rank's piece of the tensor `key` starts in the full tensor, after checking
/// that the ranks agree on it, or what is wrong.
fn place_pieces(
    key: &str,
    pieces: &[Piece],
    files: &[Input],
    ranks: &[u64],
) -> std::result::Result<Vec<Vec<u64>>, Vec<String>> {
    let shown = format!("tensor `{}`", excerpt(key));
    let rank_of = |p: &Piece| ranks[p.file];
    let mut problems = Vec::new();
    if pieces.len() < files.len() {
        let holding: BTreeSet<usize> = pieces.iter().map(|p| p.file).collect();
        let lacking: Vec<String> = (0..files.len())
            .filter(|f| !holding.contains(f))
            .map(|f| format!("rank {} ({})", ranks[f], files[f].name))
            .collect();
        problems.push(format!(
            "{shown} is in {} of the {} rank files; it is not in {}",
            pieces.len(),
            files.len(),
            capped(lacking, 5).join(", ")
        ));
        return Err(problems);
    }
    let first = &pieces[0];
    let describe = |p: &Piece| -> String {
        match &p.layout {
            Some(l) => format!(
                "rank {}: {} of global shape {} placed {} on a mesh of shape {}",
                rank_of(p),
                p.tensor.info.dtype,
                shape_text(&l.shape),
                placements_text(&l.placements),
                shape_text(&l.mesh)
            ),
            None => format!(
                "rank {}: a plain {} tensor of shape {}",
                rank_of(p),
                p.tensor.info.dtype,
                p.tensor.info.shape_text()
            ),
        }
    };
    let agree = |p: &Piece| -> bool {
        p.tensor.info.dtype == first.tensor.info.dtype
            && match (&p.layout, &first.layout) {
                (Some(a), Some(b)) => {
                    a.shape == b.shape && a.placements == b.placements && a.mesh == b.mesh
                }
                (None, None) => p.tensor.info.shape == first.tensor.info.shape,
                _ => false,
            }
    };
    let disagreeing: Vec<&Piece> = pieces.iter().filter(|p| !agree(p)).collect();
    if !disagreeing.is_empty() {
        let mut details = vec![describe(first)];
        details.extend(disagreeing.iter().map(|p| describe(p)));
        problems.push(format!(
            "the ranks disagree on {shown}: {}",
            capped(details, 6).join("; ")
        ));
        return Err(problems);
    }
    let Some(layout) = &first.layout else {
        // A plain tensor: every rank holds it whole.
        return Ok(vec![vec![0; first.tensor.info.shape.len()]; pieces.len()]);
    };
    let mut placed = Vec::with_capacity(pieces.len());
    let mut coordinates = BTreeSet::new();
    for piece in pieces {
        let layout_of = piece.layout.as_ref().unwrap_or(layout);
        let (at, shape) = place(layout_of);
        if *shape != *piece.tensor.info.shape {
            problems.push(format!(
                "{}: its block of {shown} has shape {}, but its placements {} on mesh \
                 coordinate {} give the block {} at {} of {}",
                piece.tensor.name,
                piece.tensor.info.shape_text(),
                placements_text(&layout_of.placements),
                shape_text(&layout_of.coordinate),
                shape_text(&shape),
                shape_text(&at),
                shape_text(&layout_of.shape)
            ));
        }
        coordinates.insert(layout_of.coordinate.clone());
        placed.push(at);
    }
    let cells: u64 = layout.mesh.iter().product();
    if (coordinates.len() as u64) < cells {
        let absent = absent_coordinates(&layout.mesh, &coordinates);
        problems.push(format!(
            "{shown} lies on a mesh of shape {} and no rank file holds its block at mesh \
             coordinate{} {}",
            shape_text(&layout.mesh),
            if absent.len() == 1 { "" } else { "s" },
            capped(absent, 5).join(", ")
        ));
    }
    if problems.is_empty() {
        Ok(placed)
    } else {
        Err(problems)
    }
}

/// The mesh coordinates not in `seen`, as text.
fn absent_coordinates(mesh: &[u64], seen: &BTreeSet<Vec<u64>>) -> Vec<String> {
    let mut absent = Vec::new();
    let mut at = vec![0u64; mesh.len()];
    'cells: loop {
        if !seen.contains(&at) {
            absent.push(shape_text(&at));
            if absent.len() > 20 {
                break;
            }
        }
        for dim in (0..mesh.len()).rev() {
            at[dim] += 1;
            if at[dim] < mesh[dim] {
                continue 'cells;
            }
            at[dim] = 0;
        }
        break;
    }
    absent
}

fn placements_text(placements: &[Spread]) -> String {
    let each: Vec<String> = placements
        .iter()
        .map(|p| match p {
            Spread::Shard(axis) => format!("Shard({axis})"),
            Spread::Replicate => "Replicate()".to_string(),
        })
        .collect();
    format!("({})", each.join(", "))
}

fn list(numbers: impl IntoIterator<Item = impl std::borrow::Borrow<u64>>) -> String {
    let each: Vec<String> = numbers
        .into_iter()
        .map(|n| n.borrow().to_string())
        .collect();
    capped(each, 10).join(", ")
}

fn refused(name: &InputRef, files: usize, problems: Vec<String>) -> Error {
    Error::Refused(vec![Refusal {
        headline: format!("the {files} DTensor rank files from {name} on do not fit together:"),
        details: capped(problems, 20),
        hint: Some(
            "give every rank's file of one save, each once (a file from another run or a \
             damaged one does not fit): save the state dict again if a file is damaged"
                .to_string(),
        ),
    }])
}

/// Whether `input` is the rank files of DTensors made one input (`src/input/ranks.rs`).
pub fn is_rank_set(input: &Input) -> bool {
    input.format == Format::PyTorch && input.offsets().is_some()
}

/// The copies of blocks several ranks hold, each with the place of the copy kept.
pub fn replicas(input: &Input) -> &[(usize, Tensor)] {
    input.extras.as_ref().map_or(&[], |e| e.replicas.as_slice())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(shape: &[u64], placements: &[Spread], mesh: &[u64], at: &[u64]) -> Distributed {
        Distributed {
            shape: shape.to_vec(),
            placements: placements.to_vec(),
            mesh: mesh.to_vec(),
            coordinate: at.to_vec(),
            rank: 0,
        }
    }

    #[test]
    fn blocks_are_cut_as_torch_chunk_cuts() {
        // 7 rows over 4 ranks: 2, 2, 2, 1.
        let rows = |c| place(&layout(&[7, 3], &[Spread::Shard(0)], &[4], &[c]));
        assert_eq!(rows(0), (vec![0, 0], vec![2, 3]));
        assert_eq!(rows(3), (vec![6, 0], vec![1, 3]));
        // 5 rows over 4 ranks: 2, 2, 1, 0 (the last rank's block is empty, at the end).
        let five = |c| place(&layout(&[5], &[Spread::Shard(0)], &[4], &[c]));
        assert_eq!(five(2), (vec![4], vec![1]));
        assert_eq!(five(3), (vec![5], vec![0]));
        // A 2x2 mesh cutting both axes, and one axis cut twice (the second within the first).
        let grid = place(&layout(
            &[5, 3],
            &[Spread::Shard(0), Spread::Shard(1)],
            &[2, 2],
            &[1, 1],
        ));
        assert_eq!(grid, (vec![3, 2], vec![2, 1]));
        let nested = place(&layout(
            &[9],
            &[Spread::Shard(0), Spread::Shard(0)],
            &[2, 2],
            &[1, 0],
        ));
        assert_eq!(nested, (vec![5], vec![2]));
        // Replicate leaves the tensor whole; a 0-d tensor has no axis.
        let whole = place(&layout(
            &[],
            &[Spread::Replicate, Spread::Replicate],
            &[2, 2],
            &[1, 0],
        ));
        assert_eq!(whole, (vec![], vec![]));
    }

    #[test]
    fn rank_files_are_told_and_grouped_by_name() {
        assert!(is_rank_file_name("model_world_size_4_rank_12.pt"));
        assert!(is_rank_file_name("Rank-3.bin"));
        assert!(!is_rank_file_name("model_world_size_4_rank_1.safetensors"));
        assert!(!is_rank_file_name("ranked.pt"));
        assert_eq!(
            set_pattern("optim_world_size_4_rank_12.pt"),
            "optim_world_size_4_rank_*.pt"
        );
        assert_eq!(set_pattern("rank-3.bin"), "rank-*.bin");
    }

    #[test]
    fn absent_coordinates_are_listed_in_order() {
        let seen: BTreeSet<Vec<u64>> = [vec![0, 0], vec![1, 1]].into_iter().collect();
        assert_eq!(absent_coordinates(&[2, 2], &seen), ["[0, 1]", "[1, 0]"]);
    }
}
