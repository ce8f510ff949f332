//! The join plan: from the inputs' headers to what the copy engine does. No I/O here.
//!
//! A join in storage order is `outer` rounds; in each round every input contributes one
//! contiguous run of its bytes (`docs/rules.md`, "What a join computes"). Storage order is
//! the output's layout: C order as is, Fortran order as C order over the reversed shape.
//!
//! A join's sources are slices: a source is an input tensor and a range `[start, end)` along
//! the join axis ([`Source`]); today's joins take every tensor whole. In storage order a
//! slice is, per round, one contiguous run inside the tensor's own run: with `inner` elements
//! after the axis, round `r`'s run starts `start * inner` elements into the tensor's round
//! and is `(end - start) * inner` long ([`Runs::Sliced`], in bytes). A source laid out
//! differently from the output is gathered by strides from its slice's first element
//! ([`Gather::start`]). The whole data stays the source's region (`data_offset`, `data_len`):
//! the engine maps it, releases it behind its cursor and checks a stored .npz member's CRC-32
//! over all of it.

use std::ops::Range;

use crate::dtype::{DType, Swaps};
use crate::format::{Layout, TensorInfo};

/// What the copy engine executes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinPlan {
    /// The join axis, counted from the front of the logical shape.
    pub axis: usize,
    /// The output's element type (little-endian).
    pub dtype: DType,
    /// The output's logical shape.
    pub shape: Vec<u64>,
    /// The output's layout, chosen as `numpy.concatenate` followed by `numpy.save` would.
    pub layout: Layout,
    /// Number of rounds.
    pub outer: u64,
    /// One entry per input, in join order.
    pub inputs: Vec<InputPlan>,
    /// Bytes of output data.
    pub bytes: u64,
}

/// Where the blocks of a tensor made from blocks go (`src/plan/grid.rs`): the job's sources,
/// in the order of their cells (row-major over the cut axes), and the grid they make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// Where each source starts in the full tensor.
    pub offsets: Vec<Vec<u64>>,
    /// The grid the blocks make.
    pub grid: Grid,
}

/// A block grid: the axes it is cut on and the segments along each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grid {
    /// The cut axes, in increasing order.
    pub axes: Vec<usize>,
    /// The lengths of the segments along each cut axis.
    pub segments: Vec<Vec<u64>>,
}

impl Grid {
    /// Whether the engine walks it: cut on several axes. On one axis the job's plan is an
    /// ordinary join, on none a copy.
    pub fn walked(&self) -> bool {
        self.axes.len() > 1
    }

    /// `2 x 3 on axes 0, 1`, `2 on axis 0`, or `whole`.
    pub fn describe(&self) -> String {
        let counts: Vec<String> = self.segments.iter().map(|s| s.len().to_string()).collect();
        let axes: Vec<String> = self.axes.iter().map(usize::to_string).collect();
        match self.axes.len() {
            0 => "whole".to_string(),
            1 => format!("{} on axis {}", counts[0], axes[0]),
            _ => format!("{} on axes {}", counts.join(" x "), axes.join(", ")),
        }
    }
}

/// A source of a join: the elements of an input tensor from `range.start` to `range.end`
/// along the join axis.
#[derive(Debug, Clone)]
pub struct Source<'a> {
    /// The tensor it is a slice of.
    pub info: &'a TensorInfo,
    /// Its part along the join axis, within the tensor's size there.
    pub range: Range<u64>,
}

impl<'a> Source<'a> {
    /// All of `info` along `axis`.
    pub fn whole(info: &'a TensorInfo, axis: usize) -> Source<'a> {
        Source {
            info,
            range: 0..info.shape[axis],
        }
    }

    /// Its size along the join axis.
    fn len(&self) -> u64 {
        self.range.end - self.range.start
    }

    /// Whether it is all of its tensor along `axis`.
    fn is_whole(&self, axis: usize) -> bool {
        self.range == (0..self.info.shape[axis])
    }

    /// Its tensor's shape with its size along `axis` cut to the slice.
    fn shape(&self, axis: usize) -> Vec<u64> {
        let mut shape = self.info.shape.to_vec();
        shape[axis] = self.len();
        shape
    }
}

/// How one source's bytes reach the output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputPlan {
    /// Where its tensor's data starts in its file.
    pub data_offset: u64,
    /// How many bytes of data its tensor has (all of it, for a slice too: the region the
    /// engine maps, releases and checks).
    pub data_len: u64,
    /// Bytes it contributes to each round (of its own element type).
    pub run_bytes: u64,
    /// Its element type; differs from the plan's when it is cast on the way.
    pub dtype: DType,
    /// Byte reversals that make its elements little-endian.
    pub swaps: Swaps,
    /// Where its runs lie when they are not its data back to back from the start: a slice,
    /// or a layout that differs from the output's (boxed: a join of 100,000 whole inputs
    /// keeps a plan for each).
    pub runs: Option<Box<Runs>>,
}

/// Where a source's runs lie in its tensor's data, when not back to back from its start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Runs {
    /// A slice along the join axis, in the output's layout: round `r`'s run starts
    /// `skip + r * pitch` bytes into the data.
    Sliced {
        /// Where round 0's run starts: the slice's start times the elements after the axis.
        skip: u64,
        /// How far apart two rounds' runs start: the whole tensor's run.
        pitch: u64,
    },
    /// A layout that differs from the output's: its elements are gathered by strides.
    Gathered(Gather),
}

/// Byte strides to read an input laid out differently from the output, in the output's
/// storage order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gather {
    /// Where the source's first element lies in the data: 0 for a whole tensor, else the
    /// slice's start times the stride of the join axis.
    pub start: u64,
    /// Dimensions before the join axis (their product is `outer`).
    pub outer_dims: Vec<u64>,
    /// The input's byte stride along each of `outer_dims`.
    pub outer_strides: Vec<u64>,
    /// The join axis (the source's size along it) and the dimensions after it: one run.
    pub run_dims: Vec<u64>,
    /// The input's byte stride along each of `run_dims`.
    pub run_strides: Vec<u64>,
}

/// Plans the join of tensors that passed the rules along `axis` (counted from the front), in
/// `layout` when the output format demands one, else as numpy would lay it out.
pub fn plan(infos: &[&TensorInfo], axis: usize, layout: Option<Layout>) -> JoinPlan {
    plan_with(infos, axis, layout, None)
}

/// [`plan`] for a join that converts every input to `cast` (`--cast`). Runs are still
/// counted in each input's own bytes; the plan's `bytes` are the output's, after the cast.
pub fn plan_with(
    infos: &[&TensorInfo],
    axis: usize,
    layout: Option<Layout>,
    cast: Option<&DType>,
) -> JoinPlan {
    let sources: Vec<Source> = infos.iter().map(|&i| Source::whole(i, axis)).collect();
    plan_sources(&sources, axis, layout, cast)
}

/// Plans the join of `sources` (slices of tensors that passed the rules, within their sizes
/// along `axis`) along `axis`, in `layout` when the output format demands one, converted to
/// `cast` if given. A slice of a sub-byte type (float4) must start and end on whole bytes of
/// each round, as every run must when there are several rounds: its caller checks that.
pub fn plan_sources(
    sources: &[Source],
    axis: usize,
    layout: Option<Layout>,
    cast: Option<&DType>,
) -> JoinPlan {
    debug_assert!(
        sources
            .iter()
            .all(|s| s.range.start <= s.range.end && s.range.end <= s.info.shape[axis])
    );
    let first = sources[0].info;
    let dtype = cast.unwrap_or(&first.dtype).clone();
    let itemsize = dtype.itemsize();
    let mut shape = first.shape.to_vec();
    // The rules refuse sizes whose sum overflows.
    shape[axis] = sources.iter().map(Source::len).sum();
    let bytes = if cast.is_some() {
        // The rules refuse casts of sub-byte types, so whole bytes per element.
        shape.iter().fold(itemsize, |n, &d| n.saturating_mul(d))
    } else {
        sources.iter().map(|s| source_bytes(s, axis)).sum()
    };
    let layout = layout.unwrap_or_else(|| numpy_layout(sources, axis, &shape, itemsize));
    let perm = storage_perm(shape.len(), layout);
    let storage_axis = perm.iter().position(|&a| a == axis).unwrap_or(0);
    let storage_dims: Vec<u64> = perm.iter().map(|&a| shape[a]).collect();
    // With no bytes to move the round count is irrelevant, and could overflow.
    let outer = if bytes == 0 {
        0
    } else {
        storage_dims[..storage_axis].iter().product()
    };
    // Saturating: after a dimension of size 0 the sizes are bounded by nothing, and with no
    // elements the run lengths do not matter.
    let inner = storage_dims[storage_axis + 1..]
        .iter()
        .fold(1u64, |n, &d| n.saturating_mul(d));
    let inputs = sources
        .iter()
        .map(|source| {
            let info = source.info;
            let whole = InputPlan::in_runs(info, source.len().saturating_mul(inner));
            let runs = match gather(source, &perm, storage_axis, layout) {
                Some(gather) => Some(Runs::Gathered(gather)),
                None if source.is_whole(axis) || whole.run_bytes == 0 => None,
                None => {
                    let bytes = |elements: u64| info.dtype.bytes_for(elements).unwrap_or(0);
                    Some(Runs::Sliced {
                        skip: bytes(source.range.start.saturating_mul(inner)),
                        pitch: bytes(info.shape[axis].saturating_mul(inner)),
                    })
                }
            };
            InputPlan {
                runs: runs.map(Box::new),
                ..whole
            }
        })
        .collect();
    JoinPlan {
        axis,
        dtype,
        shape,
        layout,
        outer,
        inputs,
        bytes,
    }
}

/// The bytes of data a source holds: its tensor's for a whole one.
fn source_bytes(source: &Source, axis: usize) -> u64 {
    if source.is_whole(axis) {
        return source.info.data_len;
    }
    let elements = source
        .shape(axis)
        .iter()
        .fold(1u64, |n, &d| n.saturating_mul(d));
    source.info.dtype.bytes_for(elements).unwrap_or(0)
}

/// The plan that copies one tensor (`--keep`) in the layout it is stored in, converted to
/// `cast` if given: one round of all its data.
pub fn copy_as_is(info: &TensorInfo, cast: Option<&DType>) -> JoinPlan {
    let elements: u64 = info.shape.iter().product();
    let bytes = match cast {
        Some(to) => elements.saturating_mul(to.itemsize()),
        None => info.data_len,
    };
    JoinPlan {
        axis: 0,
        dtype: cast.unwrap_or(&info.dtype).clone(),
        shape: info.shape.to_vec(),
        layout: info.layout,
        outer: u64::from(info.data_len > 0),
        inputs: vec![InputPlan::in_runs(info, elements)],
        bytes,
    }
}

impl InputPlan {
    /// `info`'s data as it is stored (no gather), read in runs of `elements` of its own
    /// elements. Sub-byte types: the rules made sure runs fill whole bytes when there are
    /// several rounds; a run that does not is the one round, all of the input's data.
    pub fn in_runs(info: &TensorInfo, elements: u64) -> InputPlan {
        InputPlan {
            data_offset: info.data_offset,
            data_len: info.data_len,
            run_bytes: info.dtype.bytes_for(elements).unwrap_or(info.data_len),
            dtype: info.dtype.clone(),
            swaps: info.swaps.clone(),
            runs: None,
        }
    }

    /// The strides to gather it by, when its layout differs from the output's.
    pub fn gather(&self) -> Option<&Gather> {
        match self.runs.as_deref() {
            Some(Runs::Gathered(gather)) => Some(gather),
            _ => None,
        }
    }

    /// Whether it is a slice of its tensor's runs, read in place (not gathered).
    pub fn sliced(&self) -> bool {
        matches!(self.runs.as_deref(), Some(Runs::Sliced { .. }))
    }

    /// Where round `round`'s run starts in its tensor's data (runs read in place).
    pub fn run_at(&self, round: u64) -> u64 {
        match self.runs.as_deref() {
            Some(&Runs::Sliced { skip, pitch }) => skip + round * pitch,
            _ => round * self.run_bytes,
        }
    }

    /// How far apart two rounds' runs start in its tensor's data (runs read in place).
    pub fn pitch(&self) -> u64 {
        match self.runs.as_deref() {
            Some(&Runs::Sliced { pitch, .. }) => pitch,
            _ => self.run_bytes,
        }
    }

    /// Where the bytes of a plan of one round lie in its tensor's data, and how many there
    /// are: all of its data for a whole tensor, its one run for a slice.
    pub fn one_round(&self) -> (u64, u64) {
        match self.runs.as_deref() {
            Some(&Runs::Sliced { skip, .. }) => (skip, self.run_bytes),
            _ => (0, self.data_len),
        }
    }

    /// Bytes it contributes to each round of an output of type `out`.
    pub fn out_run_bytes(&self, out: &DType) -> u64 {
        if &self.dtype == out {
            self.run_bytes
        } else {
            self.run_bytes / self.dtype.itemsize() * out.itemsize()
        }
    }
}

/// Logical axes in storage order, slowest first.
fn storage_perm(rank: usize, layout: Layout) -> Vec<usize> {
    match layout {
        Layout::C => (0..rank).collect(),
        Layout::Fortran => (0..rank).rev().collect(),
    }
}

/// `None` when the input's bytes are already in the output's storage order: same layout, or
/// a layout that does not matter (at most one dimension above 1, or no elements).
fn gather(source: &Source, perm: &[usize], storage_axis: usize, layout: Layout) -> Option<Gather> {
    let info = source.info;
    let non_unit = info.shape.iter().filter(|&&d| d > 1).count();
    if info.layout == layout || non_unit <= 1 || info.data_len == 0 || source.len() == 0 {
        return None;
    }
    let axis = perm[storage_axis];
    let strides = byte_strides(&info.shape, info.layout, info.dtype.itemsize());
    let shape = source.shape(axis);
    let dims: Vec<u64> = perm.iter().map(|&a| shape[a]).collect();
    let start = source.range.start * strides[axis];
    let strides: Vec<u64> = perm.iter().map(|&a| strides[a]).collect();
    Some(Gather {
        start,
        outer_dims: dims[..storage_axis].to_vec(),
        outer_strides: strides[..storage_axis].to_vec(),
        run_dims: dims[storage_axis..].to_vec(),
        run_strides: strides[storage_axis..].to_vec(),
    })
}

/// The byte stride of each logical axis of a contiguous tensor. Zero-sized dimensions count
/// as 1, as in numpy.
fn byte_strides(shape: &[u64], layout: Layout, itemsize: u64) -> Vec<u64> {
    let mut strides = vec![0; shape.len()];
    let mut stride = itemsize;
    let mut assign = |axis: usize| {
        strides[axis] = stride;
        stride = stride.saturating_mul(shape[axis].max(1));
    };
    match layout {
        Layout::C => (0..shape.len()).rev().for_each(&mut assign),
        Layout::Fortran => (0..shape.len()).for_each(&mut assign),
    }
    strides
}

/// The layout `numpy.save(numpy.concatenate(inputs))` writes. concatenate orders the output's
/// axes by the inputs' strides (`PyArray_CreateMultiSortedStridePerm`: an insertion sort in
/// which each input whose two compared dimensions both exceed 1 votes, and C order wins a
/// conflict); save writes Fortran order only when the result is Fortran- but not C-contiguous.
/// A slice votes as numpy's view of it would: with its tensor's strides and its own shape.
fn numpy_layout(sources: &[Source], axis: usize, shape: &[u64], itemsize: u64) -> Layout {
    let strides: Vec<Vec<u64>> = sources
        .iter()
        .map(|s| byte_strides(&s.info.shape, s.info.layout, itemsize))
        .collect();
    let shapes: Vec<Vec<u64>> = sources.iter().map(|s| s.shape(axis)).collect();
    let rank = shape.len();
    let mut perm: Vec<usize> = (0..rank).collect();
    for i0 in 1..rank {
        let mut insert_at = i0;
        let ax0 = perm[i0];
        for i1 in (0..i0).rev() {
            let ax1 = perm[i1];
            let mut vote = None;
            for (shape, strides) in shapes.iter().zip(&strides) {
                if shape[ax0] != 1 && shape[ax1] != 1 {
                    let keep = strides[ax0] <= strides[ax1];
                    vote = Some(keep || vote == Some(true));
                }
            }
            match vote {
                Some(false) => insert_at = i1,
                Some(true) => break,
                None => {}
            }
        }
        let ax0 = perm.remove(i0);
        perm.insert(insert_at, ax0);
    }
    let non_unit: Vec<usize> = perm.into_iter().filter(|&a| shape[a] > 1).collect();
    let empty = shape.contains(&0);
    let reversed = non_unit.windows(2).all(|pair| pair[0] > pair[1]);
    if !empty && non_unit.len() >= 2 && reversed {
        Layout::Fortran
    } else {
        Layout::C
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::ByteOrder;

    fn info(shape: &[u64], layout: Layout) -> TensorInfo {
        TensorInfo {
            dtype: DType::Float32,
            byte_order: ByteOrder::Little,
            swaps: Swaps::None,
            shape: shape.into(),
            layout,
            data_offset: 128,
            data_len: shape.iter().product::<u64>() * 4,
        }
    }

    #[test]
    fn directml_example_1_is_two_rounds_of_runs() {
        let a = info(&[1, 1, 2, 3], Layout::C);
        let b = info(&[1, 1, 2, 4], Layout::C);
        let plan = plan(&[&a, &b], 3, None);
        assert_eq!(plan.shape, [1, 1, 2, 7]);
        assert_eq!(plan.outer, 2);
        assert_eq!(plan.inputs[0].run_bytes, 12);
        assert_eq!(plan.inputs[1].run_bytes, 16);
        assert_eq!(plan.bytes, 56);
    }

    #[test]
    fn a_slice_is_a_run_at_an_offset_inside_its_tensors_run() {
        let a = info(&[2, 5, 3], Layout::C);
        let b = info(&[2, 2, 3], Layout::C);
        let slice = Source {
            info: &a,
            range: 1..4,
        };
        let plan = plan_sources(&[slice, Source::whole(&b, 1)], 1, None, None);
        assert_eq!(plan.shape, [2, 5, 3]);
        assert_eq!(plan.outer, 2);
        assert_eq!(plan.bytes, 2 * (3 + 2) * 3 * 4);
        // Rows 1 to 3 of each round of 5 rows of 3 elements: 36 bytes from byte 12, then
        // from byte 60 + 12.
        let p = &plan.inputs[0];
        assert_eq!(p.run_bytes, 36);
        let sliced = Runs::Sliced {
            skip: 12,
            pitch: 60,
        };
        assert_eq!(p.runs.as_deref(), Some(&sliced));
        assert_eq!((p.run_at(0), p.run_at(1)), (12, 72));
        assert_eq!((p.data_offset, p.data_len), (128, 120));
        assert!(plan.inputs[1].runs.is_none());
        // One round (axis 0): the slice's bytes are one run.
        let slice = Source {
            info: &a,
            range: 1..2,
        };
        let plan = plan_sources(&[slice], 0, None, None);
        assert_eq!((plan.outer, plan.bytes), (1, 60));
        assert_eq!(plan.inputs[0].one_round(), (60, 60));
    }

    #[test]
    fn a_gathered_slice_starts_at_its_first_element() {
        // Columns 1 and 2 of a 2x3 Fortran-ordered tensor, read in C order.
        let a = info(&[2, 3], Layout::Fortran);
        let slice = Source {
            info: &a,
            range: 1..3,
        };
        let plan = plan_sources(&[slice], 1, Some(Layout::C), None);
        let gather = plan.inputs[0].gather().unwrap();
        assert_eq!(gather.start, 8);
        assert_eq!(
            (&gather.outer_dims, &gather.outer_strides),
            (&vec![2], &vec![4])
        );
        assert_eq!(
            (&gather.run_dims, &gather.run_strides),
            (&vec![2], &vec![8])
        );
        assert_eq!(plan.bytes, 16);
    }

    #[test]
    fn all_fortran_inputs_join_in_fortran_order_without_gathering() {
        let a = info(&[2, 3], Layout::Fortran);
        let b = info(&[4, 3], Layout::Fortran);
        let plan = plan(&[&a, &b], 0, None);
        assert_eq!(plan.layout, Layout::Fortran);
        // Storage order is [3, 6]: axis 0 is the fastest, so there are 3 rounds.
        assert_eq!(plan.outer, 3);
        assert_eq!(plan.inputs[0].run_bytes, 8);
        assert!(plan.inputs.iter().all(|i| i.runs.is_none()));
    }

    #[test]
    fn mixed_layouts_give_c_order_and_gather_the_fortran_input() {
        let a = info(&[2, 3], Layout::C);
        let b = info(&[2, 3], Layout::Fortran);
        let plan = plan(&[&a, &b], 1, None);
        assert_eq!(plan.layout, Layout::C);
        assert!(plan.inputs[0].runs.is_none());
        let gather = plan.inputs[1].gather().unwrap();
        assert_eq!(gather.outer_strides, [4]);
        assert_eq!(gather.run_dims, [3]);
        assert_eq!(gather.run_strides, [8]);
    }

    #[test]
    fn vectors_and_empty_outputs_are_saved_in_c_order() {
        let a = info(&[1, 5], Layout::Fortran);
        assert_eq!(plan(&[&a, &a], 1, None).layout, Layout::C);
        let e = info(&[0, 5], Layout::Fortran);
        assert_eq!(plan(&[&e, &e], 0, None).layout, Layout::C);
    }

    #[test]
    fn a_cast_changes_the_output_size_but_not_the_runs_read() {
        let mut a = info(&[2, 3], Layout::C);
        a.dtype = DType::Float16;
        a.data_len = 12;
        let b = info(&[2, 1], Layout::C);
        let plan = plan_with(&[&a, &b], 1, None, Some(&DType::Float64));
        assert_eq!(plan.bytes, 2 * 4 * 8);
        assert_eq!(plan.inputs[0].run_bytes, 6);
        assert_eq!(plan.inputs[0].out_run_bytes(&plan.dtype), 24);
        assert_eq!(plan.inputs[1].out_run_bytes(&plan.dtype), 8);
    }

    #[test]
    fn json_outputs_force_c_order_and_gather_fortran_inputs() {
        let a = info(&[2, 3], Layout::Fortran);
        let plan = plan_with(&[&a, &a], 0, Some(Layout::C), None);
        assert_eq!(plan.layout, Layout::C);
        assert!(plan.inputs.iter().all(|i| i.gather().is_some()));
    }

    #[test]
    fn a_one_row_c_input_does_not_outvote_fortran_inputs() {
        let a = info(&[1, 5], Layout::C);
        let b = info(&[3, 5], Layout::Fortran);
        let plan = plan(&[&a, &b], 0, None);
        assert_eq!(plan.layout, Layout::Fortran);
        assert!(plan.inputs[0].runs.is_none());
    }
}
