//! What a run is asked to do, once the command line is understood: the one input of every
//! stage below the command line. `src/cli/config.rs` builds it from the flags (checking each flag
//! on its own and reading `--files-from` lists); nothing below it knows the flags.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::backend::Backend;
use crate::backend::directml::Adapter;
use crate::dtype::DType;
use crate::format::Format;
use crate::format::index::SetName;
use crate::format::json::JsonForm;
use crate::plan::rules::Rule;
use crate::plan::spec::Spec;
use crate::report::progress::When;

/// What the command line asks for: one of tjoin's commands, each with its own flow.
#[derive(Debug, Clone)]
pub enum Command {
    /// Join the inputs into an output, or report the plan (`src/flow/join.rs`).
    Join(JoinConfig),
    /// Grow the first input in place by the others, under the same rules (`--append`,
    /// `src/flow/append.rs`). `output` names nothing: the first input is the target.
    Append(JoinConfig),
    /// Cut a `.npy` file an interrupted append left longer than its header says back to its
    /// header's shape (`--recover FILE`, `src/flow/append.rs`).
    Recover(PathBuf),
}

/// A join: which inputs, by which rules, into what.
#[derive(Debug, Clone, Default)]
pub struct JoinConfig {
    /// The inputs in order: those named on the command line, then those a list names.
    /// `-` is standard input; `FILE:NAME` names one tensor of a file.
    /// Shared: each input's messages name it by the same copy, and a join may have 100,000.
    pub inputs: Vec<Arc<Path>>,
    /// Read every input in this format instead of sniffing it.
    pub input_format: Option<Format>,
    /// Join along a new axis inserted at `rules.axis`, as numpy.stack.
    pub stack: bool,
    /// How tensors are matched, checked and joined.
    pub rules: JoinRules,
    /// Where the result goes, and in what form.
    pub output: OutputConfig,
    /// Write the output, or only report the plan.
    pub action: Action,
    /// The engine that moves the data.
    pub engine: EngineConfig,
    /// When to show a progress bar (`Never` when asked to be quiet).
    pub progress: When,
    /// Print nothing on stderr but errors: no progress bar, no warnings.
    pub quiet: bool,
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
    /// Take numbered inputs (`tp3`, `rank_03`, `-00002-of-00004`) in the order given.
    pub any_order: bool,
    /// Join a merge's tensors whose sizes along the axis no split gives.
    pub uneven: bool,
    /// Refuse rules that match no tensor, instead of warning.
    pub strict: bool,
    /// The references (`--like`, given once or more) whose headers give every output
    /// tensor's expected shape.
    pub like: Vec<PathBuf>,
    /// The output tensor's name in a single-tensor join.
    pub name: Option<String>,
    /// The element type every input is converted to.
    pub cast: Option<DType>,
    /// The shape every output tensor must have.
    pub expect_shape: Option<Vec<u64>>,
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
    /// Deflate .npz members.
    pub compress: bool,
    /// The shape of a JSON output.
    pub json_form: JsonForm,
    /// Entries added to (or replacing those of) a .safetensors output's `__metadata__`.
    pub metadata: Vec<(String, String)>,
    /// A sharded checkpoint to write, when the output names a folder or an index.
    pub sharded: Option<ShardedOutput>,
}

/// A sharded checkpoint to write: safetensors shards and their index, in one folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardedOutput {
    /// The folder the set is written in (created when it does not exist).
    pub folder: PathBuf,
    /// The set's name when the output (an index) or `--prefix` gives it; else the first
    /// input's index's, or `model`.
    pub name: Option<SetName>,
    /// The most bytes of tensor data in one shard (`--max-shard-size`).
    pub max_shard_size: u64,
    /// `--names-from`: the index whose weight_map assigns each tensor its file.
    pub names_from: Option<PathBuf>,
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

/// How a dry run prints the plan (`--dry-run[=FORM]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PlanForm {
    /// A table for people.
    Text,
    /// One JSON object for scripts; a refusal is printed as one too.
    Json,
}

/// The engine asked for.
#[derive(Debug, Clone, Copy, Default)]
pub struct EngineConfig {
    /// CPU, DirectML, or DirectML when it can.
    pub backend: Backend,
    /// DirectML's adapter, when one was named.
    pub adapter: Option<Adapter>,
}
