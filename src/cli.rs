//! The command line, as clap parses it. Nothing here touches a file.

use std::path::PathBuf;

use clap::Parser;

const EXAMPLES: &str = "\
Examples:
  Join two tensors along their last axis (DirectML's example: [1,1,2,3] + [1,1,2,4] -> [1,1,2,7]):
    tjoin --axis 3 a.npy b.npy -o out.npy

  Merge dataset shards along the first axis, in the order the shell lists them:
    tjoin -a 0 part-*.npy -o all.npy

  Negative axes count from the back; -1 is the last axis:
    tjoin -a -1 left.npy right.npy -o wide.npy

  Append to a file in place (the output replaces x.npy only once it is complete):
    tjoin -a 0 x.npy y.npy -o x.npy";

/// Join tensors stored in .npy files along one axis, like numpy.concatenate, ONNX Concat or
/// DirectML Join, streaming the data so that files larger than memory join in constant memory.
#[derive(Debug, Parser)]
#[command(
    name = "tjoin",
    version,
    about,
    after_help = EXAMPLES,
    arg_required_else_help = true,
    max_term_width = 100
)]
pub struct Cli {
    /// The tensors to join, in order. Every input needs the same element type and rank, and
    /// the same size in every dimension but the join axis.
    #[arg(required = true, value_name = "INPUT")]
    pub inputs: Vec<PathBuf>,

    /// The axis to join along; negative values count from the back (-1 is the last axis).
    #[arg(short, long, allow_negative_numbers = true, value_name = "AXIS")]
    pub axis: i64,

    /// The file to write. It is written under a temporary name and renamed into place when
    /// complete, so it may be one of the inputs.
    #[arg(short, long, value_name = "OUTPUT")]
    pub output: PathBuf,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn negative_axes_parse() {
        let cli = Cli::try_parse_from(["tjoin", "-a", "-1", "a.npy", "-o", "b.npy"]).unwrap();
        assert_eq!(cli.axis, -1);
    }
}
