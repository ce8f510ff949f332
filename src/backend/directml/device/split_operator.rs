//! DirectML's Split on the join's device: for each dispatch of a `SplitPlan`, the operator
//! (compiled and initialized once per shape), the upload of the input's bytes through the
//! upload staging buffer, the dispatch, and each output read back to its part's sink. The
//! same buffers, staging and submission as the join's.

use std::ffi::c_void;

use super::super::bindings::*;
use super::super::plan::SLAB;
use super::super::plan::split_dispatches::{SplitDispatch, SplitPlan};
use super::{Gpu, Outcome, binding_desc, buffer_binding, buffer_tensor_desc, tensor_descs};
use crate::error::Result;
use crate::format::Sink;

impl Gpu {
    /// Runs every dispatch of `plan`, reading the tensor's packed bytes from `input` and
    /// writing each part's bytes, in order, to `outputs[part]`.
    pub fn split(
        &mut self,
        plan: &SplitPlan,
        input: &[u8],
        outputs: &mut [&mut dyn Sink],
    ) -> Result<()> {
        for dispatch in plan.dispatches() {
            self.split_operator(&dispatch)
                .map_err(|why| self.device_error(why))?;
            self.upload_split_input(&dispatch, input)
                .map_err(|why| self.device_error(why))?;
            self.run_split(&dispatch)
                .map_err(|why| self.device_error(why))?;
            self.read_back_parts(&dispatch, outputs)?;
        }
        Ok(())
    }

    /// The Split of this dispatch's shapes, made the first time it is met.
    fn split_operator(&mut self, dispatch: &SplitDispatch) -> Outcome<()> {
        let key = dispatch.shape_key();
        if self.split_operators.contains_key(&key) {
            return Ok(());
        }
        let input = buffer_tensor_desc(&dispatch.input);
        let input_desc = tensor_descs(std::slice::from_ref(&input));
        let outputs: Vec<DML_BUFFER_TENSOR_DESC> = dispatch
            .outputs
            .iter()
            .map(|b| buffer_tensor_desc(&b.desc))
            .collect();
        let output_descs = tensor_descs(&outputs);
        let split = DML_SPLIT_OPERATOR_DESC {
            InputTensor: &input_desc[0],
            OutputCount: output_descs.len() as u32,
            OutputTensors: output_descs.as_ptr(),
            Axis: dispatch.axis,
        };
        let desc = DML_OPERATOR_DESC {
            Type: DML_OPERATOR_SPLIT,
            Desc: &split as *const _ as *const c_void,
        };
        // Every description `desc` points into lives until the end of this function.
        let operator = self.compile(&desc, "Split")?;
        self.split_operators.insert(key, operator);
        Ok(())
    }

    /// Copies the dispatch's byte range of `input` into the input buffer, a slab at a time.
    fn upload_split_input(&mut self, dispatch: &SplitDispatch, input: &[u8]) -> Outcome<()> {
        let buffer = self.input_to_fill(dispatch.input.total_bytes)?;
        let range = dispatch.input_bytes.clone();
        let bytes = input
            .get(range.start as usize..range.end as usize)
            .ok_or("the input is shorter than its shape says")?;
        for (index, slab) in bytes.chunks(SLAB as usize).enumerate() {
            // SAFETY: the upload buffer is mapped for SLAB bytes and a slab is at most that;
            // the GPU reads it only in submitted copies, and each is submitted (and waited
            // for) below before the next slab overwrites it.
            let staging = unsafe { std::slice::from_raw_parts_mut(self.upload_bytes, slab.len()) };
            staging.copy_from_slice(slab);
            let at = index as u64 * SLAB;
            // SAFETY: records a copy between live buffers, within both.
            unsafe {
                self.list
                    .CopyBufferRegion(&buffer, at, &self.upload, 0, slab.len() as u64)
            };
            self.submit()?;
        }
        self.input_filled(&buffer);
        Ok(())
    }

    /// Binds the input, outputs, temporary and persistent resources, and runs the Split.
    fn run_split(&mut self, dispatch: &SplitDispatch) -> Outcome<()> {
        let (output, _) = Gpu::ensure(
            &self.device,
            &mut self.output,
            dispatch.output_buffer_bytes,
            D3D12_RESOURCE_STATE_UNORDERED_ACCESS,
        )?;
        let operator = self
            .split_operators
            .get(&dispatch.shape_key())
            .ok_or("the operator was not compiled")?
            .clone();
        let input = self
            .input
            .as_ref()
            .map(|(b, _)| b.clone())
            .ok_or("no input buffer")?;
        let in_binding = buffer_binding(&input, 0, dispatch.input.total_bytes);
        let outputs: Vec<DML_BUFFER_BINDING> = dispatch
            .outputs
            .iter()
            .map(|b| buffer_binding(&output, b.offset, b.desc.total_bytes))
            .collect();
        let output_descs: Vec<DML_BINDING_DESC> = outputs.iter().map(binding_desc).collect();
        self.record(
            &operator,
            &[binding_desc(&in_binding)],
            &output_descs,
            &output,
        )
    }

    /// Copies each output of the dispatch to its part's sink through the readback buffer.
    fn read_back_parts(
        &mut self,
        dispatch: &SplitDispatch,
        sinks: &mut [&mut dyn Sink],
    ) -> Result<()> {
        let output = self.output_buffer()?;
        for bound in &dispatch.outputs {
            let (offset, len) = (bound.offset, bound.desc.data_bytes());
            let slabs = (0..len)
                .step_by(SLAB as usize)
                .map(move |at| offset + at..offset + (at + SLAB).min(len));
            self.read_back_slabs(&output, slabs, &mut *sinks[bound.part])?;
        }
        self.output_read(&output)
    }
}
