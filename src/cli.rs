//! The command line, as clap parses it. Nothing here touches a file.

use std::path::PathBuf;

use clap::Parser;

use crate::backend::{Adapter, Backend};
use crate::progress::When;
use crate::spec::Spec;

/// Examples as (what it does, the command). `--help` shows the first four; the man page
/// shows all.
pub const EXAMPLES: &[(&str, &str)] = &[
    (
        "In a pipeline: JSON from standard input joined with a file, written as JSON to stdout:",
        "echo '[[1,2],[3,4]]' | tjoin -a 0 - b.json -o - --format json",
    ),
    (
        "Thousands of shards listed by find, converted to float32 on the way:",
        "find shards -name '*.npy' | sort | tjoin -a 0 --files-from - --cast float32 -o train.npy",
    ),
    (
        "Merge tensor-parallel checkpoint shards tensor by tensor, with per-tensor axes:",
        "tjoin -a 0 --axis-for '*.o_proj.weight=1' --keep '*norm*' tp*.safetensors -o model.safetensors",
    ),
    (
        "Check that DirectML at feature level 3.0 would accept a join, writing nothing:",
        "tjoin --spec directml:3.0 --dry-run -a 1 a.npy b.npy",
    ),
    (
        "Join two tensors along their last axis ([1,1,2,3] + [1,1,2,4] -> [1,1,2,7]):",
        "tjoin --axis 3 a.npy b.npy -o out.npy",
    ),
    (
        "Merge dataset shards along the first axis, in the order the shell lists them:",
        "tjoin -a 0 part-*.npy -o all.npy",
    ),
    (
        "Merge numpy.savez shards (every array joined with its namesakes):",
        "tjoin -a 0 day1.npz day2.npz day3.npz -o all.npz",
    ),
    (
        "Pick one tensor of a multi-tensor file with FILE:NAME:",
        "tjoin -a 0 model.safetensors:embed.weight extra.npy -o emb.npy",
    ),
    (
        "Stack frames along a new first axis, as numpy.stack:",
        "tjoin --stack -a 0 frame-*.npy -o video.npy",
    ),
    (
        "Append to a file in place (x.npy is replaced only once the output is complete):",
        "tjoin -a 0 x.npy y.npy -o x.npy",
    ),
    (
        "Join through DirectML's Join operator on Windows' software adapter (WARP):",
        "tjoin --backend directml --dml-adapter warp -a 1 a.npy b.npy -o out.npy",
    ),
    (
        "Say which engine --backend auto would use, and why, writing nothing:",
        "tjoin --backend auto --dry-run -a 1 a.npy b.npy",
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

/// Join tensors stored in .npy, .npz, .safetensors and .json files along one axis, like numpy.concatenate, ONNX Concat or
/// DirectML Join, streaming the data so that files larger than memory join in constant memory.
///
/// The output is the file numpy.save(out, numpy.concatenate(inputs, axis)) would write, byte
/// for byte. Every rule is checked on the inputs' headers before anything is written, and a
/// refusal names each offending file, the dimension and the sizes, and the axes that would
/// work. The output is written under a temporary name beside the target and renamed into place
/// only when complete: a failed run leaves no partial file and an existing target untouched.
///
/// Multi-tensor files (.safetensors, .npz): when every input and the output hold named tensors,
/// each tensor is joined with its namesakes in the other inputs, which must all hold the same
/// names. A .safetensors output lists its tensors as the safetensors library writes them: by
/// element type, widest alignment first (U64, I64, F64, C64, F32, U32, I32, BF16, F16, U16,
/// I16, F8_*, I8, U8, F6_*, F4, BOOL), then by name; its __metadata__ is the first input's, with
/// --metadata entries added (keys sorted). An .npz output lists its tensors in the first input's
/// order.
///
/// --backend directml runs the join through DirectML's Join operator on a Direct3D 12 device
/// (Windows, in a tjoin built with the directml cargo feature), writing the same bytes as the
/// CPU engine; a job whose element type or rank the device's feature level lacks runs as its
/// bytes in a 4-D UINT32/UINT16/UINT8 form. Where DirectML is unavailable it fails with exit
/// status 1; --backend auto then uses the CPU engine, and --dry-run says which and why. The man
/// page's DIRECTML section says how to check a Windows machine, and what is tested where.
/// In pipelines: `-` as an input reads standard input (its format sniffed from its first bytes,
/// or named with --input-format), `-o -` writes standard output (with --format), --files-from
/// reads the inputs' paths from a file, and --cast converts every input to one element type in
/// the same single pass.
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
    /// The tensors to join, in order: .npy, .npz, .safetensors, .json files, FILE:NAME, or `-`
    /// for standard input.
    #[arg(required_unless_present_any = ["generate", "files_from"], value_name = "INPUT")]
    pub inputs: Vec<PathBuf>,

    /// The axis to join along; negative ones count from the back (-1 is the last).
    #[arg(short, long, allow_negative_numbers = true, value_name = "AXIS")]
    pub axis: Option<i64>,

    /// The file to write (`-`: standard output); replaced only when complete, so it may be an
    /// input.
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

    /// Join tensors whose names match GLOB along AXIS instead; repeatable, first match wins.
    #[arg(long = "axis-for", value_name = "GLOB=AXIS", value_parser = parse_axis_rule)]
    pub axis_for: Vec<AxisRule>,

    /// Copy tensors matching GLOB from the first input, once checked identical in all.
    #[arg(long, value_name = "GLOB")]
    pub keep: Vec<String>,

    /// Name the joined tensor of single-tensor inputs (default: theirs, else arr_0).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,

    /// Add or replace an entry of a .safetensors output's __metadata__; repeatable.
    #[arg(long, value_name = "KEY=VALUE", value_parser = parse_key_value)]
    pub metadata: Vec<(String, String)>,

    /// Deflate the members of an .npz output, as numpy.savez_compressed does.
    #[arg(long)]
    pub compress: bool,

    /// The output's format (npy, json, npz, safetensors): required with `-o -`; overrides the
    /// extension.
    #[arg(long, value_name = "FORMAT")]
    pub format: Option<String>,

    /// Read every input in this format instead of guessing from its content and name.
    #[arg(long, value_name = "FORMAT")]
    pub input_format: Option<String>,

    /// The shape of a JSON output: nested arrays, or an object with dtype, shape and data.
    #[arg(long, value_enum, default_value_t = JsonForm::Nested, value_name = "FORM")]
    pub json_form: JsonForm,

    /// Also join the paths listed in FILE (`-`: standard input), one per line, after any INPUT.
    #[arg(long, value_name = "FILE")]
    pub files_from: Option<PathBuf>,

    /// The --files-from list separates paths with NUL bytes (as `find -print0` writes them).
    #[arg(short = '0', long, requires = "files_from")]
    pub null: bool,

    /// Convert every input to DTYPE while joining: bool, int8..int64, uint8..uint64, float16,
    /// bfloat16, float32, float64.
    #[arg(long, value_name = "DTYPE")]
    pub cast: Option<String>,

    /// Print help (the man page has more).
    #[arg(short, long, action = clap::ArgAction::HelpShort)]
    pub help: Option<bool>,

    /// Print the man page or a shell's completions (checked in under man/, completions/).
    #[arg(long, hide = true, value_enum, exclusive = true, value_name = "KIND")]
    pub generate: Option<crate::generate::Kind>,

    /// Move the data on the CPU, through DirectML (Windows), or auto: DirectML when it can.
    #[arg(long, value_enum, value_name = "ENGINE", default_value_t = Backend::Cpu)]
    pub backend: Backend,

    /// DirectML's adapter: default (first hardware GPU), warp (software), or an index.
    #[arg(long, value_name = "ADAPTER", value_parser = Adapter::parse)]
    pub dml_adapter: Option<Adapter>,
}

/// How a JSON output is shaped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum JsonForm {
    /// `[[1, 2], [3, 4]]`: the data as nested arrays.
    #[default]
    Nested,
    /// `{"dtype": "int64", "shape": [2, 2], "data": [[1, 2], [3, 4]]}`.
    Object,
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
    fn backends_default_to_the_cpu_and_adapters_parse() {
        let cli = Cli::try_parse_from(["tjoin", "-a", "0", "a.npy", "-o", "b.npy"]).unwrap();
        assert_eq!((cli.backend, cli.dml_adapter), (Backend::Cpu, None));
        let cli = Cli::try_parse_from([
            "tjoin",
            "--backend",
            "auto",
            "--dml-adapter",
            "warp",
            "a.npy",
            "-o",
            "b.npy",
        ])
        .unwrap();
        assert_eq!(
            (cli.backend, cli.dml_adapter),
            (Backend::Auto, Some(Adapter::Warp))
        );
        assert!(Cli::try_parse_from(["tjoin", "--dml-adapter", "x", "a.npy", "-o", "b"]).is_err());
    }

    #[test]
    fn a_file_list_replaces_positional_inputs() {
        let cli = Cli::try_parse_from(["tjoin", "-a", "0", "--files-from", "-", "-0", "-o", "-"])
            .unwrap();
        assert!(cli.inputs.is_empty() && cli.null);
        assert!(Cli::try_parse_from(["tjoin", "-a", "0", "-o", "x.npy"]).is_err());
        assert!(Cli::try_parse_from(["tjoin", "-a", "0", "-0", "a.npy", "-o", "x"]).is_err());
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
