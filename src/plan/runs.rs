//! The join plan: from the inputs' headers to what the copy engine does. No I/O here.
//!
//! A join in storage order is `outer` rounds; in each round every input contributes one
//! contiguous run of its bytes (`docs/rules.md`, "What a join computes"). Storage order is
//! the output's layout: C order as is, Fortran order as C order over the reversed shape.

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

/// How one input's bytes reach the output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputPlan {
    /// Where its data starts in its file.
    pub data_offset: u64,
    /// How many bytes of data it has.
    pub data_len: u64,
    /// Bytes it contributes to each round (of its own element type).
    pub run_bytes: u64,
    /// Its element type; differs from the plan's when it is cast on the way.
    pub dtype: DType,
    /// Byte reversals that make its elements little-endian.
    pub swaps: Swaps,
    /// Set when its layout differs from the output's, so its runs are not contiguous (boxed:
    /// a join of 100,000 inputs that need none keeps a plan for each).
    pub gather: Option<Box<Gather>>,
}

/// Byte strides to read an input laid out differently from the output, in the output's
/// storage order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gather {
    /// Dimensions before the join axis (their product is `outer`).
    pub outer_dims: Vec<u64>,
    /// The input's byte stride along each of `outer_dims`.
    pub outer_strides: Vec<u64>,
    /// The join axis and the dimensions after it: one run.
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
    let dtype = cast.unwrap_or(&infos[0].dtype).clone();
    let itemsize = dtype.itemsize();
    let mut shape = infos[0].shape.to_vec();
    // The rules refuse sizes whose sum overflows.
    shape[axis] = infos.iter().map(|i| i.shape[axis]).sum();
    let bytes = if cast.is_some() {
        // The rules refuse casts of sub-byte types, so whole bytes per element.
        shape.iter().fold(itemsize, |n, &d| n.saturating_mul(d))
    } else {
        infos.iter().map(|i| i.data_len).sum()
    };
    let layout = layout.unwrap_or_else(|| numpy_layout(infos, &shape, itemsize));
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
    let inputs = infos
        .iter()
        .map(|info| InputPlan {
            gather: gather(info, &perm, storage_axis, layout).map(Box::new),
            ..InputPlan::in_runs(info, info.shape[axis].saturating_mul(inner))
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
            gather: None,
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
fn gather(
    info: &TensorInfo,
    perm: &[usize],
    storage_axis: usize,
    layout: Layout,
) -> Option<Gather> {
    let non_unit = info.shape.iter().filter(|&&d| d > 1).count();
    if info.layout == layout || non_unit <= 1 || info.data_len == 0 {
        return None;
    }
    let strides = byte_strides(&info.shape, info.layout, info.dtype.itemsize());
    let dims: Vec<u64> = perm.iter().map(|&a| info.shape[a]).collect();
    let strides: Vec<u64> = perm.iter().map(|&a| strides[a]).collect();
    Some(Gather {
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
fn numpy_layout(infos: &[&TensorInfo], shape: &[u64], itemsize: u64) -> Layout {
    let strides: Vec<Vec<u64>> = infos
        .iter()
        .map(|i| byte_strides(&i.shape, i.layout, itemsize))
        .collect();
    let rank = shape.len();
    let mut perm: Vec<usize> = (0..rank).collect();
    for i0 in 1..rank {
        let mut insert_at = i0;
        let ax0 = perm[i0];
        for i1 in (0..i0).rev() {
            let ax1 = perm[i1];
            let mut vote = None;
            for (info, strides) in infos.iter().zip(&strides) {
                if info.shape[ax0] != 1 && info.shape[ax1] != 1 {
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
    fn all_fortran_inputs_join_in_fortran_order_without_gathering() {
        let a = info(&[2, 3], Layout::Fortran);
        let b = info(&[4, 3], Layout::Fortran);
        let plan = plan(&[&a, &b], 0, None);
        assert_eq!(plan.layout, Layout::Fortran);
        // Storage order is [3, 6]: axis 0 is the fastest, so there are 3 rounds.
        assert_eq!(plan.outer, 3);
        assert_eq!(plan.inputs[0].run_bytes, 8);
        assert!(plan.inputs.iter().all(|i| i.gather.is_none()));
    }

    #[test]
    fn mixed_layouts_give_c_order_and_gather_the_fortran_input() {
        let a = info(&[2, 3], Layout::C);
        let b = info(&[2, 3], Layout::Fortran);
        let plan = plan(&[&a, &b], 1, None);
        assert_eq!(plan.layout, Layout::C);
        assert!(plan.inputs[0].gather.is_none());
        let gather = plan.inputs[1].gather.as_ref().unwrap();
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
        assert!(plan.inputs.iter().all(|i| i.gather.is_some()));
    }

    #[test]
    fn a_one_row_c_input_does_not_outvote_fortran_inputs() {
        let a = info(&[1, 5], Layout::C);
        let b = info(&[3, 5], Layout::Fortran);
        let plan = plan(&[&a, &b], 0, None);
        assert_eq!(plan.layout, Layout::Fortran);
        assert!(plan.inputs[0].gather.is_none());
    }
}
