//! Which engine writes a split's parts (`tjoin split --backend`): the CPU engine's one pass
//! (`engine::splitter`), or DirectML's Split operator, which takes one tensor and writes every
//! part into its sink. Chosen for every tensor before anything is written, as the join's.

use super::directml::plan::split_dispatches::SplitPlan;
use super::directml::{self, Adapter};
use super::{Backend, Chosen};
use crate::engine::{self, splitter::Part, splitter::Splitter};
use crate::error::Result;
use crate::format::{Layout, Sink};
use crate::plan::tensor_job::TensorJob;

/// The engine chosen for a split, and what it says about the choice.
pub struct SplitEngine {
    /// The DirectML session, when DirectML runs the split.
    session: Option<Box<directml::Session>>,
    /// Per tensor of the split, in the order written: DirectML's plan, or `None` where the
    /// CPU engine writes it (a tensor copied whole to every output, or one with no bytes).
    plans: Vec<Option<SplitPlan>>,
    /// One line on the backend and why; `None` for the default CPU engine.
    pub note: Option<String>,
    /// The CPU engine, which keeps its buffers from one tensor to the next.
    cpu: Splitter,
}

impl SplitEngine {
    /// Chooses the engine for a split whose tensors are `tensors` (each its parts' jobs, one
    /// per output, in the order written; `None` when the outputs are not written in
    /// lockstep, which DirectML's Split needs: sharded, in object storage, ordered unlike, or
    /// too many): opens the DirectML device when asked to and plans every tensor on it, so
    /// that a refusal comes before any output.
    pub fn choose(
        backend: Backend,
        adapter: Option<Adapter>,
        tensors: Option<&[Vec<&TensorJob>]>,
    ) -> Result<SplitEngine> {
        let chosen = super::choose(backend, adapter, "split", |session, declined| {
            let Some(tensors) = tensors else {
                declined.push(
                    "its outputs are sharded, in object storage (uploaded one after another), \
                     list the tensors in different orders, or are too many to write at once: \
                     DirectML's Split writes every part of a tensor at once, into outputs \
                     written in step"
                        .to_string(),
                );
                return Vec::new();
            };
            let mut plans = Vec::with_capacity(tensors.len());
            for jobs in tensors {
                match plan(session, jobs) {
                    Ok(plan) => plans.push(plan),
                    Err(why) => {
                        let name = crate::messages::name(&jobs[0].out.name);
                        declined.push(format!("tensor `{name}`: {why}"));
                    }
                }
            }
            plans
        })?;
        Ok(match chosen {
            Chosen::Cpu(note) => SplitEngine {
                session: None,
                plans: Vec::new(),
                note,
                cpu: Splitter::default(),
            },
            Chosen::DirectMl {
                session,
                plans,
                note,
            } => SplitEngine {
                session: Some(session),
                plans,
                note: Some(note),
                cpu: Splitter::default(),
            },
        })
    }

    /// Writes the data of tensor `index` of the split: each of its parts' `jobs` (one per
    /// output) into its sink in `outs`.
    pub fn execute(
        &mut self,
        index: usize,
        jobs: &[&TensorJob],
        outs: &mut [&mut dyn Sink],
    ) -> Result<()> {
        if let Some(session) = &mut self.session
            && let Some(plan) = &self.plans[index]
        {
            let tensor = jobs[0].sources[0];
            let region = engine::map(tensor, &jobs[0].plan.inputs[0])?;
            session.split(plan, region.bytes(), outs)?;
            return engine::splitter::verify_whole(tensor, region.bytes());
        }
        let parts: Vec<Part> = jobs
            .iter()
            .map(|job| Part {
                plan: &job.plan,
                sources: &job.sources,
            })
            .collect();
        self.cpu.execute(&parts, outs)
    }
}

/// DirectML's plan of one tensor's split into `jobs` (its parts, one per output), `None`
/// where the CPU engine writes it, or why DirectML cannot: its Split moves the bytes of a
/// C-order tensor as they are into parts that cut it once each, in order.
fn plan(
    session: &directml::Session,
    jobs: &[&TensorJob],
) -> std::result::Result<Option<SplitPlan>, String> {
    let first = jobs[0];
    let Some(&tensor) = first.sources.first() else {
        return Ok(None);
    };
    let info = &tensor.info;
    if jobs.iter().all(|job| job.kept) || info.data_len == 0 {
        // A copy to every output, or nothing to move: no split to run.
        return Ok(None);
    }
    if !info.swaps.is_none() {
        return Err(
            "its bytes are stored in the other byte order, which only the CPU engine swaps"
                .to_string(),
        );
    }
    let axis = first.plan.axis;
    let mut sizes = Vec::with_capacity(jobs.len());
    let mut end = 0;
    for job in jobs {
        let one_slice = match (job.sources.len(), job.ranges.as_deref()) {
            (1, Some([range])) if !job.kept && std::ptr::eq(job.sources[0], tensor) => {
                Some(range.clone())
            }
            _ => None,
        };
        let Some(range) = one_slice else {
            return Err(
                "its parts are not single slices of it (a rule's chunks or replicas, \
                        or a copy kept whole), which only the CPU engine writes"
                    .to_string(),
            );
        };
        let as_stored = job.plan.inputs.iter().all(|p| p.dtype == job.plan.dtype);
        if range.start != end || job.plan.axis != axis || !as_stored {
            return Err("its parts do not cut it in order along one axis".to_string());
        }
        if info.layout != Layout::C || (job.plan.bytes > 0 && job.plan.layout != Layout::C) {
            return Err(
                "it is stored in Fortran order, which only the CPU engine splits".to_string(),
            );
        }
        sizes.push(range.end - range.start);
        end = range.end;
    }
    if end != info.shape[axis] {
        return Err("its parts do not cover it".to_string());
    }
    session
        .plan_split(&info.dtype, &info.shape, axis, &sizes)
        .map(Some)
}
