//! The job: which tensors the output holds, each the join of which input tensors, all
//! checked and planned before anything is written.

use crate::error::{Error, Result};
use crate::format::{OutTensor, TensorInfo};
use crate::input::{Input, Tensor};
use crate::plan::{self, JoinPlan};
use crate::spec;

/// One tensor of the output and how to make it.
pub struct TensorJob<'a> {
    /// What the output's header says about it.
    pub out: OutTensor,
    /// How the copy engine makes it.
    pub plan: JoinPlan,
    /// The input tensors it joins, one per entry of `plan.inputs`.
    pub sources: Vec<&'a Tensor>,
}

/// Checks and plans the join of every input's tensor along `axis`.
pub fn build(inputs: &[Input], axis: i64) -> Result<Vec<TensorJob<'_>>> {
    let sources = inputs
        .iter()
        .map(only_tensor)
        .collect::<Result<Vec<&Tensor>>>()?;
    let axis = spec::check(&sources, axis)?;
    let infos: Vec<&TensorInfo> = sources.iter().map(|t| &t.info).collect();
    let plan = plan::plan(&infos, axis);
    let out = OutTensor {
        name: String::new(),
        dtype: plan.dtype.clone(),
        shape: plan.shape.clone(),
        layout: plan.layout,
        bytes: plan.bytes,
    };
    Ok(vec![TensorJob { out, plan, sources }])
}

/// The one tensor an input holds.
fn only_tensor(input: &Input) -> Result<&Tensor> {
    match input.tensors.as_slice() {
        [only] => Ok(only),
        tensors => Err(Error::Unsupported {
            input: input.name.clone(),
            reason: format!(
                "it holds {} tensors; tjoin joins files of one tensor",
                tensors.len()
            ),
        }),
    }
}
