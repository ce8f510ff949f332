//! The command line, as clap parses it. Nothing here touches a file.

use std::path::PathBuf;

use clap::Parser;

use crate::spec::Spec;

/// The examples `--help` ends with and the man page lists.
pub const EXAMPLES: &str = "\
Examples:
  Join two tensors along their last axis (DirectML's example: [1,1,2,3] + [1,1,2,4] -> [1,1,2,7]):
    tjoin --axis 3 a.npy b.npy -o out.npy

  Merge dataset shards along the first axis, in the order the shell lists them:
    tjoin -a 0 part-*.npy -o all.npy

  Negative axes count from the back; -1 is the last axis:
    tjoin -a -1 left.npy right.npy -o wide.npy

  Append to a file in place (the output replaces x.npy only once it is complete):
    tjoin -a 0 x.npy y.npy -o x.npy

  Check that DirectML at feature level 3.0 would accept the join, writing nothing:
    tjoin --spec directml:3.0 --dry-run -a 1 a.npy b.npy";

/// Join tensors stored in .npy files along one axis, like numpy.concatenate, ONNX Concat or
/// DirectML Join, streaming the data so that files larger than memory join in constant memory.
///
/// The output is the file numpy.save(out, numpy.concatenate(inputs, axis)) would write, byte
/// for byte. Every rule is checked on the inputs' headers before anything is written, and a
/// refusal names each offending file, the dimension and the sizes, and the axes that would
/// work. The output is written under a temporary name beside the target and renamed into place
/// only when complete: a failed run leaves no partial file and an existing target untouched.
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
    #[arg(required_unless_present = "generate", value_name = "INPUT")]
    pub inputs: Vec<PathBuf>,

    /// The axis to join along; negative values count from the back (-1 is the last axis).
    /// Required, except under --spec onnx-1, whose default is 1.
    #[arg(short, long, allow_negative_numbers = true, value_name = "AXIS")]
    pub axis: Option<i64>,

    /// The file to write. It is written under a temporary name and renamed into place when
    /// complete, so it may be one of the inputs.
    #[arg(
        short,
        long,
        value_name = "OUTPUT",
        required_unless_present = "dry_run"
    )]
    pub output: Option<PathBuf>,

    /// Check the join against a runtime's rules: onnx (= onnx-13), onnx-11, onnx-4, onnx-1,
    /// openvino, directml (= directml:4.1), directml:1.0|2.1|3.0|4.1. Without it, ONNX
    /// Concat-13's shape rules apply to every element type numpy stores.
    #[arg(long, value_name = "PROFILE", value_parser = Spec::parse)]
    pub spec: Option<Spec>,

    /// Refuse the join unless the output's shape is exactly this, e.g. 1,1,2,7 (DirectML's
    /// check of the output tensor's sizes).
    #[arg(long, value_name = "DIMS", value_delimiter = ',')]
    pub expect_shape: Option<Vec<u64>>,

    /// Check everything and print the plan on standard output, but write nothing. Exits 0
    /// when the join would be accepted.
    #[arg(long)]
    pub dry_run: bool,

    /// Print the man page or a shell's completion script on standard output (for packagers;
    /// the generated files are checked in under man/ and completions/).
    #[arg(long, hide = true, value_enum, exclusive = true, value_name = "KIND")]
    pub generate: Option<crate::generate::Kind>,
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
        assert_eq!(cli.axis, Some(-1));
    }

    #[test]
    fn dry_runs_need_no_output_and_shapes_split_on_commas() {
        let cli = Cli::try_parse_from(["tjoin", "--dry-run", "--expect-shape", "1,1,2,7", "a.npy"])
            .unwrap();
        assert_eq!(cli.expect_shape, Some(vec![1, 1, 2, 7]));
        assert_eq!(cli.inputs.len(), 1);
        assert!(Cli::try_parse_from(["tjoin", "-a", "0", "a.npy"]).is_err());
    }
}
