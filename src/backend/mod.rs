//! Which engine moves the data (`--backend`): the CPU copy engine, or DirectML's Join
//! operator on a Direct3D 12 device. Both write through the same `Sink`, inside the output
//! format's framing, so every format works with either and the bytes are the same.

pub mod directml;
pub mod split_engine;

use crate::engine;
use crate::error::{Error, Refusal, Result};
use crate::format::Sink;
use crate::plan::tensor_job::TensorJob;
use directml::Adapter;
use directml::plan::{self as dml, DmlPlan};

/// `--backend`: the engine the user asks for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    /// The CPU copy engine.
    #[default]
    Cpu,
    /// DirectML (Windows, built with the `directml` feature); fails when it cannot run.
    Directml,
    /// DirectML when a device is available and runs every tensor, else the CPU engine.
    Auto,
}

/// The engine chosen for a job, and what `--dry-run` says about the choice.
pub struct Engine {
    kind: Kind,
    /// One line on the backend and why, for `--dry-run`; `None` for the default CPU engine.
    pub note: Option<String>,
}

enum Kind {
    Cpu,
    DirectMl {
        session: Box<directml::Session>,
        /// One plan per tensor of the job, in the job's order.
        plans: Vec<DmlPlan>,
    },
}

impl Engine {
    /// Chooses the engine for `job` (in the order it is written): opens the DirectML device
    /// when asked to and plans every tensor on it, so that a refusal comes before any output.
    pub fn choose(backend: Backend, adapter: Option<Adapter>, job: &[TensorJob]) -> Result<Engine> {
        let chosen = choose(backend, adapter, "join", |session, declined| {
            let mut plans = Vec::with_capacity(job.len());
            for tensor in job {
                let name = crate::messages::name(&tensor.out.name);
                if tensor.placement.as_ref().is_some_and(|p| p.grid.walked()) {
                    let why = "its blocks are cut on several axes, which only the CPU engine joins";
                    declined.push(format!("tensor `{name}`: {why}"));
                    continue;
                }
                match dml::plan(&tensor.plan, &session.device) {
                    Ok(plan) => plans.push(plan),
                    Err(why) => declined.push(format!("tensor `{name}`: {why}")),
                }
            }
            plans
        })?;
        Ok(match chosen {
            Chosen::Cpu(note) => Engine {
                kind: Kind::Cpu,
                note,
            },
            Chosen::DirectMl {
                session,
                plans,
                note,
            } => Engine {
                kind: Kind::DirectMl { session, plans },
                note: Some(note),
            },
        })
    }

    /// What the engine does with tensor `index` of the job, for `--dry-run`.
    pub fn describe(&self, index: usize) -> Option<String> {
        match &self.kind {
            Kind::Cpu => None,
            Kind::DirectMl { plans, .. } => plans.get(index).map(DmlPlan::describe),
        }
    }

    /// Writes the data of tensor `index` of the job to `out`.
    pub fn execute(&mut self, index: usize, tensor: &TensorJob, out: &mut dyn Sink) -> Result<()> {
        match &mut self.kind {
            Kind::Cpu => match tensor.placement.as_ref().filter(|p| p.grid.walked()) {
                Some(p) => engine::blocks::execute(&tensor.plan, &p.grid, &tensor.sources, out),
                None => engine::execute(&tensor.plan, &tensor.sources, out),
            },
            Kind::DirectMl { session, plans } => {
                session.execute(&plans[index], &tensor.plan, &tensor.sources, out)
            }
        }
    }
}

/// What choosing a backend came to, for the join's engine and the split's alike.
pub(crate) enum Chosen<P> {
    /// The CPU engine, with what `--dry-run` says about the choice (`None`: the default).
    Cpu(Option<String>),
    /// DirectML, with a plan for every tensor, in order.
    DirectMl {
        session: Box<directml::Session>,
        plans: Vec<P>,
        note: String,
    },
}

/// Chooses the engine for a `what` (a join, a split): the CPU engine for `--backend cpu`;
/// else opens the DirectML device and plans every tensor on it with `plan_all`, which pushes
/// onto its second argument the tensors DirectML cannot run and why. `--backend auto` falls
/// back to the CPU engine, saying why; `--backend directml` refuses, before any output.
pub(crate) fn choose<P>(
    backend: Backend,
    adapter: Option<Adapter>,
    what: &str,
    plan_all: impl FnOnce(&directml::Session, &mut Vec<String>) -> Vec<P>,
) -> Result<Chosen<P>> {
    if backend == Backend::Cpu {
        if adapter.is_some() {
            return Err(Error::refused(
                "--dml-adapter applies to --backend directml or auto only",
                "drop --dml-adapter, or add --backend directml",
            ));
        }
        return Ok(Chosen::Cpu(None));
    }
    let session = match directml::open(adapter.unwrap_or_default()) {
        Ok(session) => session,
        Err(why) if backend == Backend::Auto => {
            return Ok(Chosen::Cpu(Some(format!(
                "cpu, as --backend auto chose: {why}"
            ))));
        }
        Err(why) => {
            return Err(Error::Device {
                reason: why,
                hint: format!(
                    "--backend auto runs the {what} on the CPU engine when DirectML is \
                     unavailable, as does --backend cpu"
                ),
            });
        }
    };
    let on = format!(
        "DirectML on {} (feature level {})",
        session.adapter, session.device.level
    );
    let mut declined = Vec::new();
    let plans = plan_all(&session, &mut declined);
    if declined.is_empty() {
        let why = match backend {
            Backend::Auto => {
                ", as --backend auto chose: the device is available and runs every tensor"
            }
            _ => "",
        };
        return Ok(Chosen::DirectMl {
            session: Box::new(session),
            plans,
            note: format!("{on}{why}"),
        });
    }
    if backend == Backend::Auto {
        return Ok(Chosen::Cpu(Some(format!(
            "cpu, as --backend auto chose: {on} cannot run {}",
            declined.join("; ")
        ))));
    }
    Err(Error::Refused(vec![Refusal {
        headline: format!("cannot run this {what} through {on}"),
        details: declined,
        hint: Some(format!(
            "--backend auto runs such {what}s on the CPU engine, as does --backend cpu"
        )),
    }]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adapters_parse_by_name_or_index() {
        assert_eq!(Adapter::parse("default"), Ok(Adapter::Default));
        assert_eq!(Adapter::parse("warp"), Ok(Adapter::Warp));
        assert_eq!(Adapter::parse("2"), Ok(Adapter::Index(2)));
        assert!(Adapter::parse("gpu").unwrap_err().contains("default, warp"));
        assert_eq!(Adapter::Index(3).to_string(), "3");
    }
}
