//! What a run is asked to do, once the command line is understood: a [`Command`], built from
//! the flags by `src/cli/` (`Command::from_cli` in `src/cli/config.rs`, which builds a join's
//! [`JoinConfig`], checking each flag on its own and reading `--files-from` lists;
//! `src/cli/split.rs` a [`SplitConfig`]; `src/cli/gguf.rs` a [`GgufConfig`]); nothing below it
//! knows the flags.
//!
//! A join's (or an append's) flow receives the whole [`JoinConfig`] and nothing below the
//! flow does: its methods hand each stage the narrow config it needs (after ripgrep's
//! `HiArgs::matcher()`, `printer()`, `searcher()`), each derived once, here, beside the
//! fields it reads:
//! - [`JoinConfig::open_config`]: what opening the inputs needs ([`OpenConfig`]);
//! - [`JoinRules::matcher`] and [`JoinRules::job_options`]: what planning needs
//!   (`plan::job::JobOptions`);
//! - [`OutputConfig::write_options`]: what the output format's writer needs
//!   (`format::WriteOptions`), with the flags it has no use for refused;
//! - [`JoinConfig::engine`]: the engine asked for ([`EngineConfig`]);
//! - [`JoinConfig::target`]: where the output goes, and how its writing is shown ([`Target`]);
//! - [`JoinConfig::early_copy`]: the early copy's target, when the run is one it can take
//!   (`engine::early::EarlyTarget`).
//!
//! They are methods rather than a struct built once in `src/cli/config.rs`: the job options
//! borrow the config's rules, and the write options depend on what is known only once the
//! inputs are open (the output's format may be the first input's, and the first input's
//! `__metadata__` is carried over).
//!
//! Two derived values are resolved once by `src/cli/config.rs` instead, so that the flows pass
//! the decided value rather than what it comes from: the `--like` references' shapes (read
//! there, headers only, as the `--files-from` lists are) and the refusal of inputs numbered
//! out of order (told by their names alone).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::backend::Backend;
use crate::backend::directml::Adapter;
use crate::dtype::DType;
use crate::engine::early::EarlyTarget;
use crate::error::{Error, Refusal, Result};
use crate::format::json::JsonForm;
use crate::format::{Format, WriteOptions};
use crate::input::reference::Reference;
pub use crate::output::kind::{Asked, OutputKind};
pub use crate::output::progress::When;
pub use crate::output::shards::ShardedOutput;
use crate::plan::complete::ModelSizes;
use crate::plan::filter::Filter;
use crate::plan::job::JobOptions;
use crate::plan::rules::{Matcher, Rule};
pub use crate::plan::slices::Cut;
use crate::plan::spec::Spec;

/// How a dry run prints the plan: the report stage's, named here as a command's choice.
pub use crate::report::plan::PlanForm;

/// What the command line asks for: one of tjoin's commands, each with its own flow.
#[derive(Debug, Clone)]
pub enum Command {
    /// Join the inputs into an output, or report the plan (`src/flow/join/mod.rs`).
    Join(JoinConfig),
    /// Grow the first input in place by the others, under the same rules (`--append`,
    /// `src/flow/append.rs`). `output` names nothing: the first input is the target.
    Append(JoinConfig),
    /// Cut a `.npy` file an interrupted append left longer than its header says back to its
    /// header's shape (`--recover FILE`, `src/flow/append.rs`).
    Recover(PathBuf),
    /// Split one input into several outputs, committed together (`tjoin split`,
    /// `src/flow/split.rs`).
    Split(SplitConfig),
    /// Merge a GGUF input into one GGUF file, or split it into a set, carrying keys and
    /// tensors as they are (`src/flow/gguf.rs`).
    Gguf(GgufConfig),
    /// Print a family's built-in rules file, or list the families (`tjoin rules [FAMILY]`,
    /// `src/flow/rules.rs`).
    Rules(Option<String>),
}

/// A GGUF merge or split: `-o *.gguf` with GGUF inputs, or `tjoin split` of a GGUF file.
#[derive(Debug, Clone)]
pub struct GgufConfig {
    /// The input: one file, the first file of a split set, or every file of a set in order.
    pub inputs: Vec<Arc<Path>>,
    /// What to write.
    pub job: GgufJob,
    /// Refuse to replace an existing output.
    pub no_clobber: bool,
    /// The size of each part of files uploaded (`None`: the upload's own).
    pub part_size: Option<u64>,
    /// Write, or only report the plan.
    pub action: Action,
    /// `--print-plan`: once written, print the plan carried out, as a dry run prints it.
    pub print_plan: Option<PlanForm>,
    /// When to show a progress bar (`Never` when asked to be quiet).
    pub progress: When,
    /// Print nothing on stderr but errors.
    pub quiet: bool,
}

/// What a GGUF run writes.
#[derive(Debug, Clone)]
pub enum GgufJob {
    /// One file (`None`: a dry run without an output).
    Merge(Option<PathBuf>),
    /// A set, its files named as gguf-split names them: in `folder` after the input's stem,
    /// or after `stem` (a path without `.gguf`).
    Split {
        /// The folder the files go in and the stem of their names.
        folder: PathBuf,
        /// The stem.
        stem: String,
        /// How the tensors are cut into files.
        by: crate::plan::gguf_files::SplitBy,
    },
}

/// A join: which inputs, by which rules, into what.
#[derive(Debug, Clone, Default)]
pub struct JoinConfig {
    /// The inputs in order: those named on the command line, then those a list names.
    /// `-` is standard input; `FILE:NAME` names one tensor of a file.
    /// Shared: each input's messages name it by the same copy, and a join may have 100,000.
    pub inputs: Vec<Arc<Path>>,
    /// The refusal of `inputs` numbered out of order (`plan::ranks`), decided from their
    /// names alone; `None` when they are in order or `--any-order` is given. It is made once
    /// the inputs are open, unless they are DTensor rank files, whose records place them.
    pub out_of_order: Option<Refusal>,
    /// Read every input in this format instead of sniffing it.
    pub input_format: Option<Format>,
    /// Join along a new axis inserted at `rules.axis`, as numpy.stack.
    pub stack: bool,
    /// `--exclude` and `--only`: which tensors of the multi-tensor inputs take part.
    pub filters: Vec<Filter>,
    /// How tensors are matched, checked and joined.
    pub rules: JoinRules,
    /// Where the result goes, and in what form.
    pub output: OutputConfig,
    /// Write the output, or only report the plan.
    pub action: Action,
    /// Once the output is written, print the plan that was carried out (`--print-plan`).
    pub print_plan: Option<PlanForm>,
    /// The engine that moves the data.
    pub engine: EngineConfig,
    /// When to show a progress bar (`Never` when asked to be quiet).
    pub progress: When,
    /// Print nothing on stderr but errors: no progress bar, no warnings.
    pub quiet: bool,
    /// The step of a job that N workers share (`src/flow/join/workers/`); `None` for a join
    /// run whole by this process.
    pub job: Option<crate::output::job::Step>,
}

/// The rules every output tensor is planned by.
#[derive(Debug, Clone, Default)]
pub struct JoinRules {
    /// The axis of every tensor no rule decides (`None`: the spec's default).
    pub axis: Option<i64>,
    /// The runtime whose join rules are checked.
    pub spec: Spec,
    /// Per-tensor axes and tensors kept from the first input, in the order they apply (the
    /// first match wins): `--keep` flags, `--axis-for` flags, then the `--rules` files' lines.
    pub tensor_rules: Vec<Rule>,
    /// Join tensors that no rule decides even when they are the same in every input, and
    /// identical pieces an axis rule decides; and a merge's file given twice.
    pub join_identical: bool,
    /// Join a merge's tensors whose sizes along the axis no split gives.
    pub uneven: bool,
    /// Refuse rules that match no tensor, instead of warning.
    pub strict: bool,
    /// The references (`--like`, given once or more), their headers read by the config
    /// stage: they give every output tensor's expected shape, and tell constant tensors'
    /// splits.
    pub like: Option<Reference>,
    /// The output tensor's name in a single-tensor join.
    pub name: Option<String>,
    /// The element type every input is converted to.
    pub cast: Option<DType>,
    /// The shape every output tensor must have.
    pub expect_shape: Option<Vec<u64>>,
    /// The model's config.json (`--config`, or one beside the first input), read.
    pub model: Option<ModelSizes>,
}

/// The output: its path and format, and what its writer is told.
#[derive(Debug, Clone, Default)]
pub struct OutputConfig {
    /// The file to write (`-`: standard output); `None` only for a dry run.
    pub path: Option<PathBuf>,
    /// Its format when the path or a flag says; else, for a dry run, the first input's.
    pub format: Option<Format>,
    /// Refuse to replace an existing file.
    pub no_clobber: bool,
    /// `--part-size`: the size of each part of an output in object storage (`None`: the
    /// least that fits, from 8 MiB; a job's from 5 MiB).
    pub part_size: Option<u64>,
    /// Deflate .npz members.
    pub compress: bool,
    /// The shape of a JSON output.
    pub json_form: JsonForm,
    /// Entries added to (or replacing those of) a .safetensors output's `__metadata__`.
    pub metadata: Vec<(String, String)>,
    /// A sharded checkpoint to write, when the output names a folder or an index.
    pub sharded: Option<ShardedOutput>,
}

/// huggingface_hub's default `max_shard_size`: 5 GB.
pub const DEFAULT_MAX_SHARD_SIZE: u64 = 5_000_000_000;

/// What a run does once every tensor is planned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Action {
    /// Write the output and commit it.
    #[default]
    Write,
    /// Print the plan on standard output, writing nothing.
    DryRun(PlanForm),
}

/// The engine asked for.
#[derive(Debug, Clone, Copy, Default)]
pub struct EngineConfig {
    /// CPU, DirectML, or DirectML when it can.
    pub backend: Backend,
    /// DirectML's adapter, when one was named.
    pub adapter: Option<Adapter>,
}

/// What opening the inputs needs (`flow::join::open_inputs`, then `input::open_all`).
#[derive(Debug, Clone, Copy)]
pub struct OpenConfig<'c> {
    /// The inputs in order (see [`JoinConfig::inputs`]).
    pub paths: &'c [Arc<Path>],
    /// Read every input in this format instead of sniffing it.
    pub format: Option<Format>,
    /// The refusal of inputs numbered out of order (see [`JoinConfig::out_of_order`]).
    pub out_of_order: Option<&'c Refusal>,
    /// `--stack`: insert a new axis in every input's tensors, at `axis`.
    pub stack: bool,
    /// The axis `--stack` inserts (`None`: the spec's default).
    pub axis: Option<i64>,
}

/// Where the output goes, and how writing it is shown.
#[derive(Debug, Clone, Copy)]
pub struct Target<'c> {
    /// What kind of output, and its path.
    pub kind: OutputKind<'c>,
    /// Its format when the path or a flag says; else, for a dry run, the first input's.
    pub format: Option<Format>,
    /// Refuse to replace an existing file.
    pub no_clobber: bool,
    /// When to show a progress bar while it is written.
    pub progress: When,
}

impl JoinConfig {
    /// What opening the inputs needs.
    pub fn open_config(&self) -> OpenConfig<'_> {
        OpenConfig {
            paths: &self.inputs,
            format: self.input_format,
            out_of_order: self.out_of_order.as_ref(),
            stack: self.stack,
            axis: self.rules.axis,
        }
    }

    /// Where the output goes: its kind chosen from what was asked by the table of kinds
    /// (`output::kind::KINDS`). A sharded output is one only with a path (the command line
    /// gives it none without).
    pub fn target(&self) -> Target<'_> {
        let output = &self.output;
        let asked = Asked {
            path: output.path.as_deref(),
            sharded: output.sharded.as_ref(),
        };
        Target {
            kind: OutputKind::choose(&asked),
            format: output.format,
            no_clobber: output.no_clobber,
            progress: self.progress,
        }
    }

    /// The engine asked for.
    pub fn engine(&self) -> EngineConfig {
        self.engine
    }

    /// The early copy's target (`src/engine/early.rs`), when the run is a join the early copy
    /// can take: written to a regular .npy file along a given axis, on the CPU, with nothing
    /// to convert, stack, name or decide per tensor, and no input read as another format;
    /// else `None`.
    pub fn early_copy(&self) -> Option<EarlyTarget> {
        let target = self.output.path.as_deref()?;
        let rules = &self.rules;
        let plain = self.action == Action::Write
            && !crate::output::written_directly(target)
            // An object is uploaded as written, front to back: the early copy goes back.
            && !crate::sys::remote::is_url(target)
            && self.output.format == Some(Format::Npy)
            && self.input_format.is_none_or(|format| format == Format::Npy)
            && rules.cast.is_none()
            && !self.stack
            && rules.tensor_rules.is_empty()
            && rules.name.is_none()
            && self.engine.backend == Backend::Cpu
            && self.engine.adapter.is_none();
        let axis = rules.axis?;
        plain.then(|| EarlyTarget {
            path: target.to_path_buf(),
            no_clobber: self.output.no_clobber,
            axis,
        })
    }
}

impl JoinRules {
    /// The tensor rules, indexed for matching.
    pub fn matcher(&self) -> Matcher<'_> {
        Matcher::new(&self.tensor_rules)
    }

    /// What planning needs: these rules, `matcher` (built by [`JoinRules::matcher`]), the
    /// references `--like` names, and the output's format.
    pub fn job_options<'c>(&'c self, matcher: &'c Matcher<'c>, output: Format) -> JobOptions<'c> {
        JobOptions {
            cast: self.cast.as_ref(),
            axis: self.axis,
            spec: self.spec,
            rules: matcher,
            join_identical: self.join_identical,
            uneven: self.uneven,
            like: self.like.as_ref(),
            model: self.model.as_ref(),
            strict: self.strict,
            name: self.name.as_deref(),
            output,
        }
    }
}

impl OutputConfig {
    /// The writer's options for an output in `format` whose first input carries `metadata`,
    /// refusing options the format has no use for.
    pub fn write_options(
        &self,
        format: Format,
        metadata: Option<&[(String, String)]>,
    ) -> Result<WriteOptions> {
        let misplaced = |flag: &str, kind: &str| {
            Error::refused(
                format!("{flag} applies to {kind} outputs only"),
                format!("drop {flag}, or name the output with the {kind} extension"),
            )
        };
        if self.compress && format != Format::Npz {
            return Err(misplaced("--compress", ".npz"));
        }
        if !self.metadata.is_empty() && format != Format::SafeTensors {
            return Err(misplaced("--metadata", ".safetensors"));
        }
        if self.json_form != JsonForm::default() && format != Format::Json {
            return Err(misplaced("--json-form", ".json"));
        }
        // Copied only for the one format that writes it: a header's metadata may be tens of
        // megabytes.
        let mut carried: Option<BTreeMap<String, String>> = metadata
            .filter(|_| format == Format::SafeTensors)
            .map(|pairs| pairs.iter().cloned().collect());
        // Every shard of a sharded output has `__metadata__`, as save_torch_state_dict writes it.
        if self.sharded.is_some() && carried.is_none() {
            carried = Some(BTreeMap::from([("format".to_string(), "pt".to_string())]));
        }
        if !self.metadata.is_empty() {
            carried
                .get_or_insert_default()
                .extend(self.metadata.iter().cloned());
        }
        Ok(WriteOptions {
            compress: self.compress,
            json_form: self.json_form,
            metadata: carried,
        })
    }
}

/// A split (`tjoin split`): one input cut along an axis into several outputs, the inverse of
/// a join.
#[derive(Debug, Clone)]
pub struct SplitConfig {
    /// The input (`FILE:NAME` names one tensor of a file).
    pub input: Arc<Path>,
    /// Read the input in this format instead of sniffing it.
    pub input_format: Option<Format>,
    /// How every tensor is cut.
    pub cut: Cut,
    /// The axis of every tensor no rule decides (`None`: a rule must decide each).
    pub axis: Option<i64>,
    /// Per-tensor axes and tensors copied whole to every output, in the order they apply
    /// (`--keep`, `--axis-for`, then `--rules` files' lines), as a join's rules.
    pub tensor_rules: Vec<Rule>,
    /// The outputs, one per part or rank, in order: the template's expansions or the paths
    /// given; no two the same.
    pub outputs: Vec<SplitOutput>,
    /// What every output's writer is told (`path` and `sharded` unused: each output's are
    /// its own).
    pub output: OutputConfig,
    /// The model's query and key-value heads (`--heads Q:KV`), instead of those its
    /// config.json states.
    pub heads: Option<(u64, u64)>,
    /// `--spec directml[:LEVEL]`: refuse a split DirectML's Split could not run at that level.
    pub spec: Option<Spec>,
    /// The engine that moves the data (`--backend`).
    pub backend: crate::backend::Backend,
    /// DirectML's adapter (`--dml-adapter`).
    pub adapter: Option<crate::backend::directml::Adapter>,
    /// Write the outputs, or only report the plan.
    pub action: Action,
    /// Once the outputs are written, print the plan that was carried out (`--print-plan`).
    pub print_plan: Option<PlanForm>,
    /// When to show a progress bar (`Never` when asked to be quiet).
    pub progress: When,
    /// The step of a job that N workers share (`src/flow/join/workers/`); `None` for a split
    /// run whole by this process.
    pub job: Option<crate::output::job::Step>,
}

/// One output of a split: where it goes, and the sharded checkpoint written there when it
/// names a folder (`tp{rank}/`, of at most `--max-shard-size` bytes of tensors a shard).
#[derive(Debug, Clone)]
pub struct SplitOutput {
    /// The file, or the folder.
    pub path: PathBuf,
    /// The sharded checkpoint asked for, when `path` names a folder.
    pub sharded: Option<ShardedOutput>,
}

impl SplitConfig {
    /// Where `output` (one of [`SplitConfig::outputs`]) goes: its kind chosen from what was
    /// asked by the table of kinds (`output::kind::KINDS`), as a join's is.
    pub fn target<'c>(&'c self, output: &'c SplitOutput) -> Target<'c> {
        let asked = Asked {
            path: Some(&output.path),
            sharded: output.sharded.as_ref(),
        };
        Target {
            kind: OutputKind::choose(&asked),
            format: self.output.format,
            no_clobber: self.output.no_clobber,
            progress: self.progress,
        }
    }
}
