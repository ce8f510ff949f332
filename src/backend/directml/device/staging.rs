//! The device's buffers as Join and Split both use them: the input buffer made ready for
//! uploads and for the operator, an operator bound and recorded, and the output read back
//! through the readback buffer a slab at a time.

use std::ffi::c_void;
use std::ops::Range;

use super::super::bindings::*;
use super::{Gpu, Operator, Outcome, binding_desc, buffer_binding, failed, transition};
use crate::error::{Error, Result};
use crate::format::Sink;

impl Gpu {
    /// The input buffer, of at least `bytes`, ready to be copied into (step 11's uploads).
    pub(super) fn input_to_fill(&mut self, bytes: u64) -> Outcome<ID3D12Resource> {
        let (input, new) = Gpu::ensure(
            &self.device,
            &mut self.input,
            bytes,
            D3D12_RESOURCE_STATE_COPY_DEST,
        )?;
        if !new {
            let barrier = transition(
                &input,
                D3D12_RESOURCE_STATE_UNORDERED_ACCESS,
                D3D12_RESOURCE_STATE_COPY_DEST,
            );
            // SAFETY: records a barrier on a live buffer.
            unsafe { self.list.ResourceBarrier(&[barrier]) };
        }
        Ok(input)
    }

    /// The input buffer, its copies recorded, made ready for the operator to read.
    pub(super) fn input_filled(&mut self, input: &ID3D12Resource) {
        let barrier = transition(
            input,
            D3D12_RESOURCE_STATE_COPY_DEST,
            D3D12_RESOURCE_STATE_UNORDERED_ACCESS,
        );
        // SAFETY: records a barrier on a live buffer.
        unsafe { self.list.ResourceBarrier(&[barrier]) };
    }

    /// Binds `inputs`, `outputs` (which borrow live buffers) and the temporary and
    /// persistent resources to `operator`, runs it, and makes `output` ready to copy from.
    pub(super) fn record(
        &mut self,
        operator: &Operator,
        inputs: &[DML_BINDING_DESC],
        outputs: &[DML_BINDING_DESC],
        output: &ID3D12Resource,
    ) -> Outcome<()> {
        let (compiled, properties) = (&operator.compiled, operator.properties);
        let table = self.binding_table(compiled, properties.RequiredDescriptorCount)?;
        // SAFETY (this block): every binding borrows a live buffer for the call reading it;
        // the dispatch is recorded on the live list with the table just filled.
        unsafe {
            if properties.TemporaryResourceSize > 0
                && let Some((buffer, size)) = &self.temporary
            {
                let binding = buffer_binding(buffer, 0, *size);
                table.BindTemporaryResource(Some(&binding_desc(&binding)));
            }
            if let Some((buffer, size)) = &operator.persistent {
                let binding = buffer_binding(buffer, 0, *size);
                table.BindPersistentResource(Some(&binding_desc(&binding)));
            }
            table.BindInputs(Some(inputs));
            table.BindOutputs(Some(outputs));
            self.recorder.RecordDispatch(&self.list, compiled, &table);
            self.list.ResourceBarrier(&[transition(
                output,
                D3D12_RESOURCE_STATE_UNORDERED_ACCESS,
                D3D12_RESOURCE_STATE_COPY_SOURCE,
            )]);
        }
        self.submit()
    }

    /// The output buffer, which a dispatch has written.
    pub(super) fn output_buffer(&self) -> Result<ID3D12Resource> {
        self.output
            .as_ref()
            .map(|(b, _)| b.clone())
            .ok_or_else(|| self.device_error("no output buffer".to_string()))
    }

    /// Copies the byte ranges `slabs` of `output` (each at most `SLAB` bytes), in order, to
    /// `out` through the readback buffer.
    pub(super) fn read_back_slabs(
        &mut self,
        output: &ID3D12Resource,
        slabs: impl Iterator<Item = Range<u64>>,
        out: &mut dyn Sink,
    ) -> Result<()> {
        for slab in slabs {
            let len = slab.end - slab.start;
            // SAFETY: records a copy between live buffers, within both.
            unsafe {
                self.list
                    .CopyBufferRegion(&self.readback, 0, output, slab.start, len)
            };
            self.submit().map_err(|why| self.device_error(why))?;
            let mut mapped: *mut c_void = std::ptr::null_mut();
            let read = D3D12_RANGE {
                Begin: 0,
                End: len as usize,
            };
            // SAFETY: maps the readback buffer, whose copy has completed.
            unsafe { self.readback.Map(0, Some(&read), &mut mapped) }
                .ok()
                .map_err(|e| self.device_error(failed("mapping the readback buffer", e)))?;
            // SAFETY: the map covers `len <= SLAB` bytes and lasts until Unmap below.
            let bytes = unsafe { std::slice::from_raw_parts(mapped.cast::<u8>(), len as usize) };
            let written = out.write_all(bytes);
            let nothing_written = D3D12_RANGE { Begin: 0, End: 0 };
            // SAFETY: unmaps what was mapped above; `bytes` is not used after this.
            unsafe { self.readback.Unmap(0, Some(&nothing_written)) };
            written.map_err(|e| Error::io("write the output", out.name(), e))?;
        }
        Ok(())
    }

    /// `output`, read back, made ready for the next dispatch to write.
    pub(super) fn output_read(&mut self, output: &ID3D12Resource) -> Result<()> {
        let barrier = transition(
            output,
            D3D12_RESOURCE_STATE_COPY_SOURCE,
            D3D12_RESOURCE_STATE_UNORDERED_ACCESS,
        );
        // SAFETY: records a barrier on a live buffer. It runs now, so that no recorded
        // command outlives a buffer the next dispatch may replace.
        unsafe { self.list.ResourceBarrier(&[barrier]) };
        self.submit().map_err(|why| self.device_error(why))
    }
}

/// The `DML_TENSOR_DESC`s of buffer tensors, pointing into `buffers`, which must outlive them.
pub(super) fn tensor_descs(buffers: &[DML_BUFFER_TENSOR_DESC]) -> Vec<DML_TENSOR_DESC> {
    buffers
        .iter()
        .map(|b| DML_TENSOR_DESC {
            Type: DML_TENSOR_TYPE_BUFFER,
            Desc: b as *const _ as *const c_void,
        })
        .collect()
}
