//! The command line, as clap parses it. Nothing here touches a file.

use std::path::PathBuf;

use clap::Parser;

use crate::progress::When;
use crate::spec::Spec;

/// Examples as (what it does, the command). `--help` shows the first four; the man page
/// shows all.
pub const EXAMPLES: &[(&str, &str)] = &[
    (
        "Join two tensors along their last axis ([1,1,2,3] + [1,1,2,4] -> [1,1,2,7]):",
        "tjoin --axis 3 a.npy b.npy -o out.npy",
    ),
    (
        "Merge dataset shards along the first axis, in the order the shell lists them:",
        "tjoin -a 0 part-*.npy -o all.npy",
    ),
    (
        "Check that DirectML at feature level 3.0 would accept a join, writing nothing:",
        "tjoin --spec directml:3.0 --dry-run -a 1 a.npy b.npy",
    ),
    (
        "Stack frames along a new first axis, as numpy.stack:",
        "tjoin --stack -a 0 frame-*.npy -o video.npy",
    ),
    (
        "Negative axes count from the back; -1 is the last axis:",
        "tjoin -a -1 left.npy right.npy -o wide.npy",
    ),
    (
        "Append to a file in place (x.npy is replaced only once the output is complete):",
        "tjoin -a 0 x.npy y.npy -o x.npy",
    ),
];

/// The first four examples, as `--help` ends.
fn help_examples() -> String {
    let mut text = String::from("Examples:");
    for (what, command) in &EXAMPLES[..4] {
        text.push_str(&format!("\n  {what}\n    {command}\n"));
    }
    text
}

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
    after_help = help_examples(),
    disable_help_flag = true,
    max_term_width = 100
)]
pub struct Cli {
    /// The tensors to join, in order (.npy files).
    #[arg(required_unless_present = "generate", value_name = "INPUT")]
    pub inputs: Vec<PathBuf>,

    /// The axis to join along; negative ones count from the back (-1 is the last).
    #[arg(short, long, allow_negative_numbers = true, value_name = "AXIS")]
    pub axis: Option<i64>,

    /// The file to write; replaced only when complete, so it may be an input.
    #[arg(
        short,
        long,
        value_name = "OUTPUT",
        required_unless_present = "dry_run"
    )]
    pub output: Option<PathBuf>,

    /// Check against a runtime's join rules: onnx[-13|-11|-4|-1], openvino, directml[:LEVEL].
    #[arg(long, value_name = "PROFILE", value_parser = Spec::parse)]
    pub spec: Option<Spec>,

    /// Refuse the join unless the output's shape is exactly DIMS, e.g. 1,1,2,7.
    #[arg(long, value_name = "DIMS", value_delimiter = ',')]
    pub expect_shape: Option<Vec<u64>>,

    /// Check everything and print the plan on stdout; write nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// Join along a new axis inserted at --axis, as numpy.stack (identical shapes).
    #[arg(long)]
    pub stack: bool,

    /// Refuse to replace an existing output (by default it is replaced atomically).
    #[arg(short = 'n', long)]
    pub no_clobber: bool,

    /// When to show a progress bar on stderr.
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = When::Auto)]
    pub progress: When,

    /// Print nothing but errors (no progress bar).
    #[arg(short, long)]
    pub quiet: bool,

    /// Print help (the man page has more).
    #[arg(short, long, action = clap::ArgAction::HelpShort)]
    pub help: Option<bool>,

    /// Print the man page or a shell's completions (checked in under man/, completions/).
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
