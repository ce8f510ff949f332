//! tjoin joins tensors stored in files along one axis: the ONNX Concat / DirectML Join
//! operator as a command-line tool for files far larger than memory.
//!
//! The flow of one run (`run`): open the inputs and read their headers, check the join
//! rules, plan, then write the output header and stream the data with the copy engine into a
//! temporary file that is renamed over the target only when complete.
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod cli;
pub mod copy;
pub mod dtype;
pub mod error;
pub mod format;
pub mod input;
pub mod output;
pub mod plan;
pub mod source;
pub mod spec;

use std::io::Write;

pub use error::{Error, ExitCode, Result};

use cli::Cli;
use input::Input;
use output::Output;

/// Runs the join the command line asks for.
pub fn run(cli: &Cli) -> Result<()> {
    let inputs = cli
        .inputs
        .iter()
        .enumerate()
        .map(|(index, path)| Input::open(index + 1, path))
        .collect::<Result<Vec<Input>>>()?;
    let axis = spec::check(&inputs, cli.axis)?;
    let infos: Vec<&format::TensorInfo> = inputs.iter().map(|i| &i.info).collect();
    let plan = plan::plan(&infos, axis);
    let header = format::npy::header(&plan.dtype, &plan.shape, plan.layout)
        .map_err(|e| Error::io("write the output header for", &cli.output, e))?;
    let output = Output::create(&cli.output)?;
    output
        .file()
        .write_all(&header)
        .map_err(|e| Error::io("write the output", output.target(), e))?;
    copy::execute(&plan, &inputs, output.file(), output.target())?;
    for input in &inputs {
        input.check_unchanged()?;
    }
    output.commit()
}
