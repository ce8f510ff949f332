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
    tjoin -a 0 x.npy y.npy -o x.npy

  Merge tensor-parallel shards tensor by tensor, with per-tensor axes and replicated tensors:
    tjoin -a 0 --axis-for '*.o_proj.weight=1' --keep '*norm*' tp0.safetensors tp1.safetensors \\
      -o model.safetensors

  Merge numpy.savez shards (every array joined with its namesakes):
    tjoin -a 0 day1.npz day2.npz day3.npz -o all.npz

  Pick one tensor of a multi-tensor file with FILE:NAME:
    tjoin -a 0 model.safetensors:embed.weight extra.npy -o emb.npy

Multi-tensor files (.safetensors, .npz):
  When every input and the output hold named tensors, each tensor is joined with its namesakes
  in the other inputs, which must all hold the same names. A .safetensors output lists its
  tensors as the safetensors library writes them: by element type, widest alignment first
  (U64, I64, F64, C64, F32, U32, I32, BF16, F16, U16, I16, F8_*, I8, U8, F6_*, F4, BOOL), then by
  name; its __metadata__ is the first input's, with --metadata entries added (keys sorted). An
  .npz output lists its tensors in the first input's order.";

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

    /// Join the tensors whose names match GLOB (`*` any text, `?` one character) along AXIS
    /// instead of --axis. Repeatable; the first matching rule wins.
    #[arg(long = "axis-for", value_name = "GLOB=AXIS", value_parser = parse_axis_rule)]
    pub axis_for: Vec<AxisRule>,

    /// Copy the tensors whose names match GLOB from the first input unchanged, after checking
    /// that every input holds the same bytes. Repeatable.
    #[arg(long, value_name = "GLOB")]
    pub keep: Vec<String>,

    /// The name of the joined tensor when the inputs are single tensors (default: the first
    /// input's tensor name, else arr_0 in an .npz).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,

    /// Add or replace an entry of a .safetensors output's __metadata__. Repeatable.
    #[arg(long, value_name = "KEY=VALUE", value_parser = parse_key_value)]
    pub metadata: Vec<(String, String)>,

    /// Deflate the members of an .npz output, as numpy.savez_compressed does.
    #[arg(long)]
    pub compress: bool,
}

/// `--axis-for GLOB=AXIS`: tensors whose names match `glob` join along `axis`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AxisRule {
    /// The pattern tensor names are matched against.
    pub glob: String,
    /// The axis, possibly negative.
    pub axis: i64,
}

fn parse_axis_rule(text: &str) -> Result<AxisRule, String> {
    let (glob, axis) = text
        .rsplit_once('=')
        .ok_or("expected GLOB=AXIS, e.g. '*.o_proj.weight=1'")?;
    let axis = axis.trim().parse().map_err(|_| {
        format!("`{axis}` is not an axis; expected GLOB=AXIS, e.g. '*.o_proj.weight=1'")
    })?;
    Ok(AxisRule {
        glob: glob.to_string(),
        axis,
    })
}

fn parse_key_value(text: &str) -> Result<(String, String), String> {
    let (key, value) = text
        .split_once('=')
        .ok_or("expected KEY=VALUE, e.g. format=pt")?;
    Ok((key.to_string(), value.to_string()))
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
    fn axis_rules_split_at_the_last_equals_sign() {
        let rule = parse_axis_rule("a=b*=-1").unwrap();
        assert_eq!((rule.glob.as_str(), rule.axis), ("a=b*", -1));
        assert!(parse_axis_rule("*.weight").is_err());
        assert!(parse_axis_rule("*.weight=x").is_err());
    }

    #[test]
    fn negative_axes_parse() {
        let cli = Cli::try_parse_from(["tjoin", "-a", "-1", "a.npy", "-o", "b.npy"]).unwrap();
        assert_eq!(cli.axis, -1);
    }
}
