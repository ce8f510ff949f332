//! tjoin joins tensors stored in files along one axis: the ONNX Concat / DirectML Join
//! operator as a command-line tool for files far larger than memory.
//!
//! A run has two stages of arguments and one flow per command: `cli` parses the flags and
//! turns them into a [`config::JoinConfig`]; `join::run` opens the inputs, plans every output
//! tensor and writes the output or reports the plan. `docs/design.md` describes the stages.
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod backend;
pub mod cast;
pub mod cli;
pub mod config;
pub mod copy;
pub mod dtype;
pub mod early;
pub mod error;
pub mod format;
pub mod input;
pub mod job;
pub mod join;
pub mod outliers;
pub mod output;
pub mod plan;
pub mod progress;
pub mod report;
pub mod rules;
pub mod source;
pub mod spec;
pub mod spill;
pub mod stack;

pub use error::{Error, ExitCode, Result};

use std::path::Path;

use cli::Cli;
use config::JoinConfig;

/// Runs what the command line asks for: print a generated file (`--generate`), or turn the
/// flags into a join configuration and run the join.
pub fn run(cli: &Cli) -> Result<()> {
    if let Some(kind) = cli.generate {
        let mut stdout = std::io::stdout().lock();
        return cli::generate::generate(kind, &mut stdout)
            .map_err(|e| Error::io("write", Path::new("standard output"), e));
    }
    join::run(&JoinConfig::from_cli(cli)?)
}
