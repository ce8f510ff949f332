//! PyTorch distributed checkpoints (DCP) opened as one input, in the two forms torch writes:
//! - the default `FileSystemWriter`'s (`torch.distributed.checkpoint.save(state_dict,
//!   checkpoint_id=folder)`): a `.metadata` pickle ([`metadata`]) and the ranks' `.distcp`
//!   files ([`distcp`]); it records every tensor's full size;
//! - `HuggingFaceStorageWriter(save_distributed=True)`'s: safetensors rank files whose
//!   `__metadata__` carries `DCP_SHARDING_INFO` ([`hf`]); named one by one, as their folder,
//!   or through an index. It records no full size: the shapes are inferred from the blocks.
//!
//! Either way the input's tensors are blocks, `Input::offsets` holds where each starts
//! inside its full tensor, and `src/plan/grid.rs` checks that they tile it and plans it.

pub mod distcp;
pub mod hf;
pub(crate) mod metadata;

pub use hf::{SHARDING_INFO, open_folder};

use crate::input::{Input, Tensor};

/// The tensors and offsets of a DCP input, as blocks.
pub fn blocks(input: &Input) -> Option<impl Iterator<Item = (&Tensor, &[u64])>> {
    let offsets = input.offsets()?;
    Some(input.tensors.iter().zip(offsets.iter().map(Vec::as_slice)))
}

/// Whether `input` is a distributed checkpoint in the HF writer's form
/// (`HuggingFaceStorageWriter(save_distributed=True)`, `hf.rs`: the one safetensors input of
/// blocks), whose full shapes are inferred from its blocks: it records none, so a missing
/// last rank's file is not seen.
pub fn shapes_inferred(input: &Input) -> bool {
    input.format == crate::format::Format::SafeTensors
        && input.offsets().is_some()
        && input.recorded().is_none()
}

/// The full shape `.metadata` records for the input's tensor `name`, if the checkpoint records
/// one (the default form does; the HF writer's does not).
pub fn recorded_shape<'a>(input: &'a Input, name: &str) -> Option<&'a [u64]> {
    input.recorded()?.get(name).map(Vec::as_slice)
}
