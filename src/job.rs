//! The job: which tensors the output holds, each the join of which input tensors, all
//! checked and planned before anything is written.

use crate::error::{Error, Refusal, Result};
use crate::format::{OutTensor, TensorInfo, shape_text};
use crate::input::{Input, Tensor};
use crate::plan::{self, JoinPlan};
use crate::spec::{self, Spec};

/// One tensor of the output and how to make it.
pub struct TensorJob<'a> {
    /// What the output's header says about it.
    pub out: OutTensor,
    /// How the copy engine makes it.
    pub plan: JoinPlan,
    /// The input tensors it joins, one per entry of `plan.inputs`.
    pub sources: Vec<&'a Tensor>,
}

/// Checks the join of every input's tensor along `axis` against `spec`, and plans it.
pub fn build(inputs: &[Input], spec: Spec, axis: Option<i64>) -> Result<Vec<TensorJob<'_>>> {
    let sources = inputs
        .iter()
        .map(only_tensor)
        .collect::<Result<Vec<&Tensor>>>()?;
    let axis = spec::check(spec, &sources, axis)?;
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

/// Refuses the job unless every output tensor has shape `expected` (DirectML's check that
/// `joinSize == OutputTensor.Sizes[Axis]` and that every other size matches).
pub fn check_expected_shape(job: &[TensorJob], expected: &[u64]) -> Result<()> {
    let refusals: Vec<Refusal> = job
        .iter()
        .filter(|t| t.out.shape != expected)
        .map(|t| {
            let differing: Vec<String> = if t.out.shape.len() == expected.len() {
                (0..expected.len())
                    .filter(|&d| t.out.shape[d] != expected[d])
                    .map(|d| format!("dimension {d}: {} != {}", t.out.shape[d], expected[d]))
                    .collect()
            } else {
                vec![format!("rank {} != {}", t.out.shape.len(), expected.len())]
            };
            let axis = t.plan.axis;
            let sizes: Vec<String> = t
                .sources
                .iter()
                .map(|s| s.info.shape[axis].to_string())
                .collect();
            Refusal {
                headline: format!(
                    "the output would have shape {}, not the expected {}",
                    shape_text(&t.out.shape),
                    shape_text(expected)
                ),
                details: vec![
                    differing.join(", "),
                    format!(
                        "along the join axis {axis}: {} = {}",
                        sizes.join(" + "),
                        t.out.shape[axis]
                    ),
                ],
                hint: None,
            }
        })
        .collect();
    if refusals.is_empty() {
        Ok(())
    } else {
        Err(Error::Refused(refusals))
    }
}
