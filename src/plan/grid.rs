//! Blocks placed by offset: the tensors of a PyTorch distributed checkpoint, each saved as
//! blocks that start at given offsets inside it (`src/input/dcp/`), checked and planned.
//! No I/O.
//!
//! A tensor's full shape is, per axis, the largest offset plus size of its blocks that hold
//! elements; a block with none must lie within that shape, and a tensor whose blocks all hold
//! none must have no element and no hole along any axis, so that the header never claims
//! bytes no block supplies. Its blocks must agree in element type and tile it exactly, as a
//! grid: along each axis the blocks' starts and ends are the cut points, and every cell the
//! cuts make is exactly one block. A gap, an overlap, or a block across a cut is refused,
//! naming the blocks and the region. The check sorts the blocks by cell, so it takes time of
//! the order of `n log n` for `n` blocks.
//!
//! A grid cut on no axis is one block, copied; cut on one axis, it is an ordinary join along
//! it (`JoinPlan`, with every fast path of the engine). Cut on several axes, it is a join of
//! joins: in C order the output is, for each round before the first cut axis, each segment
//! of that axis in turn, whose rows are each a join along the next cut axis, and so on; at
//! the last cut axis each block gives its next run. The engine walks that (`Grid`, plan data
//! in `src/plan/runs.rs`; `src/engine/blocks.rs`) reading each block front to back, in constant
//! memory. What this module plans (`Placed`) becomes a `TensorJob` in `src/plan/job/mod.rs`.

use std::collections::HashMap;

use crate::dtype::DType;
use crate::error::{Refusal, capped};
use crate::format::{Layout, TensorInfo};
use crate::input::Tensor;
use crate::messages::excerpt;
use crate::messages::shape_text;
use crate::plan::{self, Grid, InputPlan, JoinPlan, Placement};

/// A tensor planned from its blocks: how the engine makes it, from which blocks, placed how.
pub struct Placed<'a> {
    /// The plan of its data: a copy, a join along the one cut axis, or a grid's rounds.
    pub plan: JoinPlan,
    /// The blocks it is made from, one per entry of `plan.inputs`, in cell order.
    pub sources: Vec<&'a Tensor>,
    /// Where they go; `None` for a tensor with no elements.
    pub placement: Option<Placement>,
}

/// One block: a tensor of some rank's file and where it starts in the full tensor.
#[derive(Clone, Copy)]
pub struct Block<'a> {
    /// The block as its file holds it.
    pub tensor: &'a Tensor,
    /// Where it starts in the full tensor, per axis.
    pub offsets: &'a [u64],
}

impl Block<'_> {
    fn end(&self, axis: usize) -> u64 {
        self.offsets[axis].saturating_add(self.tensor.info.shape[axis])
    }

    /// `input 2 (shard-00002.safetensors:w)  float32  [3, 2] at [0, 2]`.
    fn describe(&self) -> String {
        let info = &self.tensor.info;
        format!(
            "{}  {}  {} at {}",
            self.tensor.name,
            info.dtype,
            info.shape_text(),
            shape_text(self.offsets)
        )
    }
}

/// The blocks of every tensor, grouped by name in the order the files first hold them.
pub fn by_tensor<'a>(blocks: impl Iterator<Item = Block<'a>>) -> Vec<(&'a str, Vec<Block<'a>>)> {
    let mut at: HashMap<&str, usize> = HashMap::new();
    let mut grouped: Vec<(&str, Vec<Block>)> = Vec::new();
    for block in blocks {
        let name = block.tensor.name.tensor.as_deref().unwrap_or_default();
        let slot = *at.entry(name).or_insert_with(|| {
            grouped.push((name, Vec::new()));
            grouped.len() - 1
        });
        grouped[slot].1.push(block);
    }
    grouped
}

/// Checks the blocks of the tensor `name` and plans writing it whole, converted to `cast`.
/// `recorded` is its full shape, when the checkpoint records one (DCP's `.metadata`): the
/// blocks must then reach exactly that far.
pub fn plan_tensor<'a>(
    name: &str,
    blocks: &[Block<'a>],
    cast: Option<&DType>,
    recorded: Option<&[u64]>,
) -> Result<Placed<'a>, Refusal> {
    let refusal = |headline, details, hint| tensor_refusal(name, headline, details, hint);
    check_alike(name, blocks)?;
    let first = &blocks[0].tensor.info;
    let rank = first.shape.len();
    let extent = |blocks: &[Block]| -> Vec<u64> {
        (0..rank)
            .map(|axis| blocks.iter().map(|b| b.end(axis)).max().unwrap_or(0))
            .collect()
    };
    if extent(blocks).contains(&u64::MAX) {
        return Err(refusal(
            "a block's offset plus its size overflows".to_string(),
            capped(blocks.iter().map(|b| b.describe()).collect(), SHOWN),
            "a file is damaged: save the checkpoint again",
        ));
    }
    // Blocks with no elements hold nothing to place, but they are evidence of the shape too:
    // they must lie within what the other blocks tile, and a tensor made of them alone must
    // hold no element, so that the header never claims bytes no block supplies.
    let (placed, empty): (Vec<Block>, Vec<Block>) = blocks
        .iter()
        .copied()
        .partition(|b| b.tensor.info.shape.iter().all(|&d| d > 0));
    let uncovered = |region: &[(u64, u64)], why: String, culprit: Option<&Block>| {
        let mut details = Vec::new();
        if let Some(culprit) = culprit {
            details.push(format!(
                "the block with no elements: {}",
                culprit.describe()
            ));
        }
        details.push("its blocks:".to_string());
        let listed = blocks.iter().map(|b| format!("  {}", b.describe()));
        details.extend(capped(listed.collect(), SHOWN));
        refusal(
            format!("no block covers {} ({why})", region_text(region)),
            details,
            "each element must come from exactly one block: a rank's file is missing or \
             extra, or the checkpoint's metadata (DCP_SHARDING_INFO, .metadata) is wrong",
        )
    };
    if let Some(full) = recorded
        && let Some((region, short, why)) = short_of(&extent(&placed), full, rank)
    {
        if short {
            return Err(uncovered(&region, why, None));
        }
        return Err(refusal(
            format!("its blocks cover {}: {why}", region_text(&region)),
            capped(blocks.iter().map(|b| b.describe()).collect(), SHOWN),
            "the checkpoint's metadata and its files disagree: save the checkpoint again",
        ));
    }
    if placed.is_empty() {
        let shape = recorded.map_or_else(|| extent(blocks), <[u64]>::to_vec);
        if let Some(region) = unsupported_extent(&empty, &shape) {
            let why = "its blocks hold no elements, and only they reach there: tjoin does not \
                       guess a shape that no data shows";
            return Err(uncovered(&region, why.to_string(), None));
        }
        return Ok(Placed {
            plan: empty_plan(first, &shape, cast),
            sources: vec![blocks[0].tensor],
            placement: None,
        });
    }
    let shape = extent(&placed);
    if let Some((block, region)) = empty.iter().find_map(|b| Some((b, outside(b, &shape)?))) {
        let why = format!(
            "a block with no elements lies there, past the {} its other blocks tile, so the \
             tensor's shape cannot be told",
            shape_text(&shape)
        );
        return Err(uncovered(&region, why, Some(block)));
    }
    place(name, placed, &shape, cast)
}

/// The refusal of the tensor `name`: `headline` after its name, `details`, `hint`.
fn tensor_refusal(name: &str, headline: String, details: Vec<String>, hint: &str) -> Refusal {
    Refusal {
        headline: format!("tensor `{}`: {headline}", excerpt(name)),
        details,
        hint: Some(hint.to_string()),
    }
}

/// Refuses blocks of the tensor `name` that differ from the first in element type or rank.
fn check_alike(name: &str, blocks: &[Block]) -> Result<(), Refusal> {
    let first = &blocks[0].tensor.info;
    let disagreeing: Vec<&Block> = blocks
        .iter()
        .filter(|b| b.tensor.info.dtype != first.dtype || b.offsets.len() != first.shape.len())
        .collect();
    if disagreeing.is_empty() {
        return Ok(());
    }
    let mut details = vec![blocks[0].describe()];
    details.extend(disagreeing.iter().map(|b| b.describe()));
    Err(tensor_refusal(
        name,
        "its blocks differ in element type or rank, so they are not pieces of one tensor"
            .to_string(),
        capped(details, SHOWN),
        "the files come from different checkpoints, or one was rewritten: save the \
         checkpoint again",
    ))
}

/// Places the blocks of the tensor `name` that hold elements (`placed`) in the tensor of
/// `shape` they tile: the grid their offsets cut, each block's cell, and the plan that writes
/// them in C order, converted to `cast`.
fn place<'a>(
    name: &str,
    placed: Vec<Block<'a>>,
    shape: &[u64],
    cast: Option<&DType>,
) -> Result<Placed<'a>, Refusal> {
    let refusal = |headline, details, hint| tensor_refusal(name, headline, details, hint);
    let rank = shape.len();
    let cuts: Vec<Vec<u64>> = (0..rank)
        .map(|axis| {
            let mut cuts: Vec<u64> = placed.iter().map(|b| b.offsets[axis]).collect();
            cuts.extend(placed.iter().map(|b| b.end(axis)));
            cuts.push(0);
            cuts.sort_unstable();
            cuts.dedup();
            cuts
        })
        .collect();
    let cells = cells(&placed, &cuts).map_err(|problem| {
        let (headline, details) = problem.describe(&placed, &cuts);
        let hint = match problem {
            Problem::Overlap(..) if replicated(&placed, shape) => {
                "every block is the whole tensor (saved whole by every rank): keep one copy \
                 with --keep NAME, which checks that the copies are identical"
            }
            Problem::Across(..) => {
                "tjoin places blocks that form a grid (as a device mesh saves them): \
                 consolidate this tensor with PyTorch"
            }
            _ => {
                "each element must come from exactly one block: a rank's file is missing \
                 or extra, or the checkpoint's metadata (DCP_SHARDING_INFO, .metadata) is wrong"
            }
        };
        refusal(headline, details, hint)
    })?;
    let mut ordered: Vec<(u64, Block)> = cells.into_iter().zip(placed).collect();
    ordered.sort_by_key(|&(cell, _)| cell);
    let ordered: Vec<Block> = ordered.into_iter().map(|(_, b)| b).collect();

    let axes: Vec<usize> = (0..rank).filter(|&a| cuts[a].len() > 2).collect();
    let grid = Grid {
        segments: axes
            .iter()
            .map(|&a| cuts[a].windows(2).map(|w| w[1] - w[0]).collect())
            .collect(),
        axes,
    };
    let placement = Placement {
        offsets: ordered.iter().map(|b| b.offsets.to_vec()).collect(),
        grid,
    };
    let sources: Vec<&Tensor> = ordered.iter().map(|b| b.tensor).collect();
    let infos: Vec<&TensorInfo> = sources.iter().map(|t| &t.info).collect();
    let unplaceable = |why| refusal(why, Vec::new(), "consolidate this tensor with PyTorch");
    let plan = match placement.grid.axes.as_slice() {
        [] => plan::copy_as_is(infos[0], cast),
        &[axis] => {
            check_whole_bytes(&infos, shape, axis, false).map_err(unplaceable)?;
            plan::plan_with(&infos, axis, Some(Layout::C), cast)
        }
        &[.., last] => {
            check_whole_bytes(&infos, shape, last, true).map_err(unplaceable)?;
            grid_plan(&infos, shape, &placement.grid, cast)
        }
    };
    Ok(Placed {
        plan,
        sources,
        placement: Some(placement),
    })
}

/// Refuses `--keep` for the tensor `name` (copied from its first block, once the copies are
/// found identical) unless every block is the whole tensor.
pub fn check_kept_whole(name: &str, blocks: &[Block]) -> Result<(), Refusal> {
    let shape = &blocks[0].tensor.info.shape;
    if replicated(blocks, shape) {
        return Ok(());
    }
    let listed = blocks.iter().map(Block::describe).collect();
    Err(Refusal {
        headline: format!(
            "tensor `{}` matches --keep, but its blocks are pieces of it, not whole copies \
             (offsets all zero, one shape)",
            excerpt(name)
        ),
        details: capped(listed, SHOWN),
        hint: Some(
            "change --keep so that it does not match this tensor, and its blocks are placed"
                .to_string(),
        ),
    })
}

/// A region blocks do not reach as the recorded shape says: the region, whether they fall
/// short of it (else they reach past it), and why.
type Shortfall = (Vec<(u64, u64)>, bool, String);

/// Where blocks that reach `reached` fall short of (or past) the recorded full shape `full`:
/// the region, and why. `None` when they reach it exactly, or when `full` has no elements
/// (blocks with none then only need to lie within it).
fn short_of(reached: &[u64], full: &[u64], rank: usize) -> Option<Shortfall> {
    if full.len() != rank {
        let whole = full.iter().map(|&d| (0, d)).collect();
        let why = format!(
            "the checkpoint records a full shape {} of rank {}, but its blocks have rank {rank}",
            shape_text(full),
            full.len()
        );
        return Some((whole, false, why));
    }
    if full.contains(&0) && reached.iter().all(|&d| d == 0) {
        return None;
    }
    let axis = (0..rank).find(|&a| reached[a] != full[a])?;
    let (from, to) = (reached[axis].min(full[axis]), reached[axis].max(full[axis]));
    let region = (0..rank)
        .map(|a| if a == axis { (from, to) } else { (0, full[a]) })
        .collect();
    let why = if reached[axis] < full[axis] {
        format!(
            "the checkpoint records its full shape as {}, and its blocks reach only {}",
            shape_text(full),
            shape_text(reached)
        )
    } else {
        format!(
            "its blocks reach {} there, past the full shape {} the checkpoint records",
            shape_text(reached),
            shape_text(full)
        )
    };
    Some((region, reached[axis] < full[axis], why))
}

/// How many blocks a refusal lists before "... and N more".
const SHOWN: usize = 10;

/// Whether every block is the whole tensor: a tensor each rank saved whole.
fn replicated(blocks: &[Block], shape: &[u64]) -> bool {
    blocks
        .iter()
        .all(|b| *b.tensor.info.shape == *shape && b.offsets.iter().all(|&o| o == 0))
}

/// The region past `shape` that the block `block` (one with no elements) reaches, if it
/// reaches past it: from `shape` to the block's end along the first axis it passes, the whole
/// of the rest.
fn outside(block: &Block, shape: &[u64]) -> Option<Vec<(u64, u64)>> {
    let axis = (0..shape.len()).find(|&a| block.end(a) > shape[a])?;
    let region = (0..shape.len())
        .map(|a| match a == axis {
            true => (shape[a], block.end(a)),
            false => (0, shape[a].max(block.end(a))),
        })
        .collect();
    Some(region)
}

/// For a tensor whose blocks all hold no elements and whose extent is `shape`: the region of
/// the shape they do not support, if any. The shape must hold no element (else the header
/// would claim bytes no block supplies), and along each axis the blocks' spans must cover it
/// without a hole (torch places an empty block inside its tensor's extent or at its end).
fn unsupported_extent(blocks: &[Block], shape: &[u64]) -> Option<Vec<(u64, u64)>> {
    let whole: Vec<(u64, u64)> = shape.iter().map(|&d| (0, d)).collect();
    if !shape.contains(&0) {
        return Some(whole);
    }
    for axis in 0..shape.len() {
        let mut spans: Vec<(u64, u64)> = blocks
            .iter()
            .map(|b| (b.offsets[axis], b.end(axis)))
            .collect();
        spans.sort_unstable();
        let mut reached = 0;
        for (start, end) in spans.into_iter().chain([(shape[axis], shape[axis])]) {
            if start > reached {
                let mut region = whole;
                region[axis] = (reached, start);
                return Some(region);
            }
            reached = reached.max(end);
        }
    }
    None
}

/// The plan of a tensor with no elements.
fn empty_plan(first: &TensorInfo, shape: &[u64], cast: Option<&DType>) -> JoinPlan {
    let mut plan = plan::copy_as_is(first, cast);
    plan.shape = shape.to_vec();
    plan.outer = 0;
    plan.bytes = 0;
    plan
}

/// The plan of a grid cut on several axes: its blocks in cell order, each giving runs of its
/// size along the last cut axis times the sizes after it.
fn grid_plan(infos: &[&TensorInfo], shape: &[u64], grid: &Grid, cast: Option<&DType>) -> JoinPlan {
    let dtype = cast.unwrap_or(&infos[0].dtype).clone();
    let last = grid.axes[grid.axes.len() - 1];
    // Saturating as in `plan::plan_with`: after a dimension of size 0 nothing bounds them.
    let product = |dims: &[u64]| dims.iter().fold(1u64, |n, &d| n.saturating_mul(d));
    let inner = product(&shape[last + 1..]);
    let elements = product(shape);
    let inputs = infos
        .iter()
        .map(|info| InputPlan::in_runs(info, info.shape[last].saturating_mul(inner)))
        .collect();
    JoinPlan {
        axis: grid.axes[0],
        bytes: dtype.bytes_for(elements).unwrap_or(u64::MAX),
        dtype,
        shape: shape.into(),
        layout: Layout::C,
        outer: product(&shape[..grid.axes[0]]),
        inputs,
    }
}

/// Sub-byte types (float4) pack elements across bytes: with several rounds, each block's
/// runs (its size along `axis` times the sizes after it) must end on a byte.
fn check_whole_bytes(
    infos: &[&TensorInfo],
    shape: &[u64],
    axis: usize,
    grid: bool,
) -> Result<(), String> {
    let dtype = &infos[0].dtype;
    let inner: u64 = shape[axis + 1..].iter().product();
    let rounds: u64 = shape[..axis].iter().product();
    let whole = dtype.bits() % 8 == 0
        || (rounds <= 1 && !grid)
        || infos.iter().all(|i| {
            dtype
                .bytes_for(i.shape[axis].saturating_mul(inner))
                .is_some()
        });
    if whole {
        Ok(())
    } else {
        Err(format!(
            "its {dtype} blocks cut along axis {axis} give runs that end inside a byte"
        ))
    }
}

/// What is wrong with a tiling, by block index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Problem {
    /// Two blocks cover the same cell.
    Overlap(usize, usize),
    /// No block covers the cell of this row-major index.
    Gap(u64),
    /// A block spans several segments along this axis.
    Across(usize, usize),
}

/// Each block's cell (its row-major index among the cells the cuts make), after checking that
/// every cell is exactly one block.
fn cells(blocks: &[Block], cuts: &[Vec<u64>]) -> Result<Vec<u64>, Problem> {
    let mut cells = Vec::with_capacity(blocks.len());
    for (index, block) in blocks.iter().enumerate() {
        let mut cell = 0u64;
        for (axis, cuts) in cuts.iter().enumerate() {
            let segments = cuts.len() as u64 - 1;
            let start = cuts.binary_search(&block.offsets[axis]).unwrap_or(0);
            if cuts.get(start + 1) != Some(&block.end(axis)) {
                return Err(match blocks.iter().position(|b| intersect(b, block)) {
                    Some(other) => Problem::Overlap(other, index),
                    _ => Problem::Across(index, axis),
                });
            }
            // Fewer cells than blocks fit in a u64 whenever a tiling is exact; past that, the
            // saturated index is a gap.
            cell = cell.saturating_mul(segments).saturating_add(start as u64);
        }
        cells.push(cell);
    }
    let mut order: Vec<usize> = (0..blocks.len()).collect();
    order.sort_by_key(|&i| cells[i]);
    for pair in order.windows(2) {
        if cells[pair[0]] == cells[pair[1]] {
            return Err(Problem::Overlap(pair[0], pair[1]));
        }
    }
    // Distinct cells, sorted: a gap is the first index the sequence skips.
    for (expected, &i) in order.iter().enumerate() {
        if cells[i] != expected as u64 {
            return Err(Problem::Gap(expected as u64));
        }
    }
    let total = cuts
        .iter()
        .try_fold(1u64, |n, c| n.checked_mul(c.len() as u64 - 1));
    if total != Some(blocks.len() as u64) {
        return Err(Problem::Gap(blocks.len() as u64));
    }
    Ok(cells)
}

/// Whether two different blocks share an element.
fn intersect(a: &Block, b: &Block) -> bool {
    !std::ptr::eq(a.tensor, b.tensor)
        && (0..a.offsets.len())
            .all(|axis| a.offsets[axis] < b.end(axis) && b.offsets[axis] < a.end(axis))
}

impl Problem {
    /// The headline and the lines under it.
    fn describe(self, blocks: &[Block], cuts: &[Vec<u64>]) -> (String, Vec<String>) {
        match self {
            Problem::Overlap(a, b) => {
                let (a, b) = (&blocks[a.min(b)], &blocks[a.max(b)]);
                let region: Vec<(u64, u64)> = (0..cuts.len())
                    .map(|axis| {
                        let start = a.offsets[axis].max(b.offsets[axis]);
                        (start, a.end(axis).min(b.end(axis)))
                    })
                    .collect();
                (
                    format!(
                        "two blocks overlap: both cover {} (overlapping blocks would \
                         overwrite each other)",
                        region_text(&region)
                    ),
                    vec![a.describe(), b.describe()],
                )
            }
            Problem::Gap(cell) => {
                let mut rest = cell;
                let mut region = vec![(0, 0); cuts.len()];
                for (axis, cuts) in cuts.iter().enumerate().rev() {
                    let segments = cuts.len() as u64 - 1;
                    let at = (rest % segments) as usize;
                    rest /= segments;
                    region[axis] = (cuts[at], cuts[at + 1]);
                }
                let mut details = vec!["its blocks:".to_string()];
                let listed = blocks.iter().map(|b| format!("  {}", b.describe()));
                details.extend(capped(listed.collect(), SHOWN));
                (
                    format!(
                        "no block covers {} (a gap would be left as zeros)",
                        region_text(&region)
                    ),
                    details,
                )
            }
            Problem::Across(index, axis) => {
                let block = &blocks[index];
                let (start, end) = (block.offsets[axis], block.end(axis));
                let cut = cuts[axis]
                    .iter()
                    .copied()
                    .find(|&c| c > start && c < end)
                    .unwrap_or(end);
                let cutting: Vec<String> = blocks
                    .iter()
                    .filter(|b| b.offsets[axis] == cut || b.end(axis) == cut)
                    .map(Block::describe)
                    .collect();
                let mut details = vec![block.describe(), format!("cut at {cut} by:")];
                details.extend(capped(cutting, SHOWN).into_iter().map(|l| format!("  {l}")));
                let covered = (0..cuts.len())
                    .map(|a| (block.offsets[a], block.end(a)))
                    .collect::<Vec<_>>();
                (
                    format!(
                        "its blocks do not form a grid: the block covering {} spans a cut \
                         at {cut} along axis {axis} that other blocks make",
                        region_text(&covered)
                    ),
                    details,
                )
            }
        }
    }
}

/// `[3:4, 0:3]`: a region as numpy slices.
fn region_text(region: &[(u64, u64)]) -> String {
    let parts: Vec<String> = region.iter().map(|(s, e)| format!("{s}:{e}")).collect();
    format!("[{}]", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::{ByteOrder, Swaps};
    use crate::error::InputRef;
    use crate::input::DataFile;
    use std::sync::Arc;

    /// Float32 blocks of the given shapes, each named `r<i>:w`.
    fn tensors(shapes: &[&[u64]]) -> Vec<Tensor> {
        let file = DataFile::Open(Arc::new(tempfile::tempfile().unwrap()));
        shapes
            .iter()
            .enumerate()
            .map(|(i, shape)| Tensor {
                name: InputRef {
                    position: 1,
                    location: std::path::Path::new(&format!("r{i}")).into(),
                    tensor: Some("w".into()),
                },
                info: TensorInfo {
                    dtype: DType::Float32,
                    byte_order: ByteOrder::Little,
                    swaps: Swaps::None,
                    shape: (*shape).into(),
                    layout: Layout::C,
                    data_offset: 0,
                    data_len: shape.iter().product::<u64>() * 4,
                },
                file: file.clone(),
                stored_crc: None,
            })
            .collect()
    }

    fn planned(
        shapes: &[&[u64]],
        offsets: &[&[u64]],
    ) -> Result<(JoinPlan, Grid, Vec<String>), Refusal> {
        let tensors = tensors(shapes);
        let blocks: Vec<Block> = tensors
            .iter()
            .zip(offsets)
            .map(|(tensor, offsets)| Block { tensor, offsets })
            .collect();
        let job = plan_tensor("w", &blocks, None, None)?;
        let order = job.sources.iter().map(|t| t.name.location.to_string());
        let grid = job.placement.unwrap().grid;
        Ok((job.plan, grid, order.collect()))
    }

    #[test]
    fn a_2x2_grid_orders_its_blocks_by_cell_and_runs_by_the_last_cut_axis() {
        let shapes: [&[u64]; 4] = [&[2, 1], &[2, 3], &[1, 1], &[1, 3]];
        let offsets: [&[u64]; 4] = [&[1, 0], &[1, 1], &[0, 0], &[0, 1]];
        let (plan, grid, order) = planned(&shapes, &offsets).unwrap();
        assert_eq!(order, ["r2", "r3", "r0", "r1"]);
        assert_eq!(plan.shape, [3, 4]);
        assert_eq!(plan.bytes, 48);
        let runs: Vec<u64> = plan.inputs.iter().map(|p| p.run_bytes).collect();
        assert_eq!(runs, [4, 12, 4, 12]);
        assert_eq!(grid.axes, [0, 1]);
        assert_eq!(grid.describe(), "2 x 2 on axes 0, 1");
        assert_eq!(grid.segments, [vec![1, 2], vec![1, 3]]);
    }

    #[test]
    fn one_cut_axis_is_an_ordinary_join_and_none_a_copy() {
        let (plan, grid, order) = planned(&[&[3, 2], &[3, 1]], &[&[0, 1], &[0, 0]]).unwrap();
        assert_eq!(
            (plan.axis, plan.outer, grid.describe()),
            (1, 3, "2 on axis 1".into())
        );
        assert_eq!(order, ["r1", "r0"]);
        let (plan, grid, _) = planned(&[&[3, 2]], &[&[0, 0]]).unwrap();
        assert_eq!(
            (plan.outer, plan.bytes, grid.describe()),
            (1, 24, "whole".into())
        );
    }

    #[test]
    fn three_cut_axes_make_a_grid_of_three_levels() {
        let shapes: Vec<&[u64]> = vec![&[1, 1, 1]; 8];
        let offsets: Vec<Vec<u64>> = (0..8u64)
            .map(|i| vec![i >> 2, (i >> 1) & 1, i & 1])
            .collect();
        let offsets: Vec<&[u64]> = offsets.iter().map(Vec::as_slice).collect();
        let (_, grid, _) = planned(&shapes, &offsets).unwrap();
        assert_eq!(grid.axes, [0, 1, 2]);
    }

    #[test]
    fn gaps_overlaps_and_blocks_across_a_cut_are_refused_with_the_region() {
        let gap = planned(&[&[2, 2], &[1, 2]], &[&[0, 0], &[3, 0]]).unwrap_err();
        assert!(
            gap.headline.contains("no block covers [2:3, 0:2]"),
            "{}",
            gap.headline
        );
        let overlap = planned(&[&[3, 2], &[2, 2]], &[&[0, 0], &[2, 0]]).unwrap_err();
        assert!(
            overlap.headline.contains("both cover [2:3, 0:2]"),
            "{}",
            overlap.headline
        );
        let shapes: [&[u64]; 3] = [&[2, 4], &[2, 2], &[2, 2]];
        let offsets: [&[u64]; 3] = [&[0, 0], &[2, 0], &[2, 2]];
        let across = planned(&shapes, &offsets).unwrap_err();
        assert!(
            across.headline.contains("do not form a grid"),
            "{}",
            across.headline
        );
        let whole = planned(&[&[2, 2], &[2, 2]], &[&[0, 0], &[0, 0]]).unwrap_err();
        assert!(whole.hint.unwrap().contains("--keep"));
    }

    /// The shape `plan_tensor` gives the blocks, or its refusal's headline.
    fn shape_of(shapes: &[&[u64]], offsets: &[&[u64]]) -> Result<Vec<u64>, String> {
        let tensors = tensors(shapes);
        let blocks: Vec<Block> = tensors
            .iter()
            .zip(offsets)
            .map(|(tensor, offsets)| Block { tensor, offsets })
            .collect();
        match plan_tensor("w", &blocks, None, None) {
            Ok(job) => Ok(job.plan.shape),
            Err(refusal) => Err(refusal.headline),
        }
    }

    #[test]
    fn a_recorded_full_shape_must_be_reached_exactly() {
        let tensors = tensors(&[&[3, 4], &[2, 4]]);
        let offsets: [&[u64]; 2] = [&[0, 0], &[3, 0]];
        let blocks: Vec<Block> = tensors
            .iter()
            .zip(offsets)
            .map(|(tensor, offsets)| Block { tensor, offsets })
            .collect();
        let headline = |full: &[u64]| match plan_tensor("w", &blocks, None, Some(full)) {
            Ok(placed) => Ok(placed.plan.shape),
            Err(refusal) => Err(refusal.headline),
        };
        assert_eq!(headline(&[5, 4]), Ok(vec![5, 4]));
        let short = headline(&[6, 4]).unwrap_err();
        assert!(short.contains("no block covers [5:6, 0:4]"), "{short}");
        let past = headline(&[5, 3]).unwrap_err();
        assert!(past.contains("its blocks cover [0:5, 3:4]"), "{past}");
        let rank = headline(&[20]).unwrap_err();
        assert!(
            rank.contains("of rank 1, but its blocks have rank 2"),
            "{rank}"
        );
    }

    #[test]
    fn empty_blocks_must_lie_within_what_the_others_tile() {
        let past = shape_of(&[&[2, 4], &[0, 4]], &[&[0, 0], &[5, 0]]).unwrap_err();
        assert!(past.contains("no block covers [2:5, 0:4]"), "{past}");
        let wide = shape_of(&[&[2, 4], &[0, 8]], &[&[0, 0], &[2, 0]]).unwrap_err();
        assert!(wide.contains("no block covers [0:2, 4:8]"), "{wide}");
        // torch's uneven chunks: empty blocks at the end of the extent, or inside it.
        let shapes: [&[u64]; 3] = [&[1, 4], &[0, 4], &[1, 4]];
        let offsets: [&[u64]; 3] = [&[0, 0], &[1, 0], &[1, 0]];
        assert_eq!(shape_of(&shapes, &offsets), Ok(vec![2, 4]));
        let at_end = shape_of(&[&[2, 4], &[0, 4]], &[&[0, 0], &[2, 0]]);
        assert_eq!(at_end, Ok(vec![2, 4]));
    }

    #[test]
    fn a_tensor_of_empty_blocks_alone_has_no_element_and_no_hole() {
        let far = shape_of(&[&[0, 4], &[0, 4]], &[&[0, 0], &[1_000_000, 0]]).unwrap_err();
        assert!(far.contains("no block covers [0:1000000, 0:4]"), "{far}");
        let crossed = shape_of(&[&[0, 4], &[4, 0]], &[&[0, 0], &[0, 0]]).unwrap_err();
        assert!(crossed.contains("no block covers [0:4, 0:4]"), "{crossed}");
        let hole = shape_of(&[&[3, 0], &[2, 0]], &[&[0, 0], &[10, 0]]).unwrap_err();
        assert!(hole.contains("no block covers [3:10, 0:0]"), "{hole}");
        let split = shape_of(&[&[3, 0], &[2, 0], &[0, 0]], &[&[0, 0], &[3, 0], &[5, 0]]);
        assert_eq!(split, Ok(vec![5, 0]));
        assert_eq!(
            shape_of(&[&[0, 6], &[0, 6]], &[&[0, 0], &[0, 0]]),
            Ok(vec![0, 6])
        );
    }
}
