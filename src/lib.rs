//! tjoin joins tensors stored in files along one axis: the ONNX Concat / DirectML Join
//! operator as a command-line tool for files far larger than memory.
//!
//! A run has two stages of arguments and one flow per command: `cli` parses the flags and
//! turns them into a [`config::Command`] (`Command::from_cli`), and [`run`] hands that
//! command to its flow in `flow/`: `flow::join::run` opens the inputs, plans every output
//! tensor and writes the output or reports the plan; `flow::append::run` plans the same way
//! and grows the first input in place, and `flow::append::recover` (`output::recovery`)
//! repairs what an interrupted append left; `flow::split::run` cuts one input into several
//! outputs (`tjoin split`); `flow::gguf::run` merges or splits GGUF files;
//! `flow::rules::run` prints a family's built-in rules (`tjoin rules`). `docs/design.md`
//! describes the stages.
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod backend;
pub mod cli;
pub mod config;
pub mod dtype;
pub(crate) mod engine;
pub mod error;
pub mod flow;
pub mod format;
pub(crate) mod input;
pub(crate) mod limits;
pub mod location;
pub mod messages;
pub(crate) mod outliers;
pub(crate) mod output;
pub mod plan;
pub mod report;
pub mod sys;

pub use error::{Error, ExitCode, Result};

/// Readers below the input stage that the fuzz targets (`fuzz/`) call on bytes directly; not
/// an API.
#[doc(hidden)]
pub mod fuzzing {
    /// Reads a DCP `.metadata` file's bytes as `input::dcp` does (the restricted pickle
    /// machine, then its `Metadata`): how many entries it lists, or why it cannot be read.
    pub fn dcp_metadata(bytes: &[u8]) -> std::result::Result<usize, String> {
        use crate::format::pickle::vm;
        let pickled = vm::run(bytes, vm::LIMITS).map_err(|fault| fault.describe())?;
        crate::input::dcp::metadata::read(&pickled).map(|metadata| metadata.entries.len())
    }
}

use std::path::Path;

use cli::Cli;
use config::Command;
use flow::{append, gguf, join, rules, split};

/// Runs what the command line asks for: print a generated file (`--generate`), or turn the
/// flags into a command and run its flow: a join, an append, or a recovery. A subcommand
/// (`cli::Subcommand`) becomes a `Command` of its own in `Command::from_cli`, and an arm here.
pub fn run(cli: &Cli) -> Result<()> {
    if let Some(kind) = cli.generate {
        let mut stdout = std::io::stdout().lock();
        return cli::generate::generate(kind, &mut stdout)
            .map_err(|e| Error::io("write", Path::new("standard output"), e));
    }
    // Before any work: a Ctrl-C while standard input or JSON is converted ends the run as
    // one during the write does.
    output::handle_signals()
        .map_err(|e| Error::io("start", Path::new("the thread that handles signals"), e))?;
    match Command::from_cli(cli)? {
        Command::Join(config) => join::remote::join(&config),
        Command::Append(config) => append::run(&config),
        Command::Recover(file) => append::recover(&file),
        Command::Split(config) => split::run(&config),
        Command::Gguf(config) => gguf::run(&config),
        Command::Rules(family) => rules::run(family.as_deref()),
    }
}
