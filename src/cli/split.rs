//! `tjoin split`: its flags as clap parses them (`SplitArgs`), and the second stage that
//! checks them and turns them into a `config::SplitConfig`: the cut, the tensor rules and the
//! outputs, a template's expansions or the paths given, no two the same file.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use clap::ValueHint;

use super::{Offering, format_flag, parse_key_value};
use crate::config::{
    Action, Cut, DEFAULT_MAX_SHARD_SIZE, OutputConfig, PlanForm, ShardedOutput, SplitConfig,
    SplitOutput, When,
};
use crate::error::{Error, Result};
use crate::format::Format;
use crate::format::json::JsonForm;
use crate::plan::rules::{self, AxisRule};
use crate::plan::spec::Spec;
use crate::plan::spec::directml_split::SplitRules;

/// The flags of `tjoin split`; its --help text is `Subcommand::Split`'s doc comment.
#[derive(Debug, clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct SplitArgs {
    /// The file to split: .npy, .npz, .safetensors, .json, a PyTorch checkpoint, a sharded
    /// checkpoint (its index or folder), or FILE:NAME for one tensor of a file.
    #[arg(value_name = "INPUT", value_hint = ValueHint::FilePath)]
    pub input: PathBuf,

    /// The axis to cut every tensor along (negative ones count from the back); with --ranks,
    /// that of the tensors no rule decides.
    #[arg(short, long, allow_negative_numbers = true, value_name = "AXIS", value_hint = ValueHint::Other)]
    pub axis: Option<i64>,

    /// Cut into N parts as numpy.array_split does (the first len % N parts one longer).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=65536),
          required_unless_present_any = ["sizes", "ranks", "max_tensors", "max_shard_size"],
          conflicts_with_all = ["sizes", "ranks"])]
    pub parts: Option<u64>,

    /// With --parts: refuse a length that N does not divide, instead of uneven parts.
    #[arg(long, requires = "parts")]
    pub exact: bool,

    /// Cut into parts of these sizes along the axis (they must add up to its length): 900,100.
    #[arg(long, value_name = "SIZES", value_parser = parse_sizes, value_hint = ValueHint::Other,
          conflicts_with = "ranks")]
    pub sizes: Option<std::vec::Vec<u64>>,

    /// Cut into N tensor-parallel ranks by the tensor rules (--rules, --axis-for, --keep).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=65536))]
    pub ranks: Option<u64>,

    /// The outputs: one template for all (`part-{part:05}.npy`, `tp{rank}/model.safetensors`:
    /// {part} and {rank} count from 0, :0W pads to W digits), or one -o per output, in order.
    /// URLs (s3://B/p{part}.npy, s3://B/tp{rank}/; gs://, az://) are uploaded, all or none.
    #[arg(short, long, value_name = "OUTPUT", required = true, value_hint = ValueHint::AnyPath)]
    pub output: Vec<PathBuf>,

    /// The most tensor bytes per shard of an output that names a folder (`tp{rank}/`): a
    /// sharded checkpoint, as a join writes one (5GB by default; 500MB, 2GiB). For a GGUF
    /// input, the most tensor bytes per file of the set it is split into.
    #[arg(long, value_name = "SIZE", value_parser = super::parse_size, value_hint = ValueHint::Other)]
    pub max_shard_size: Option<u64>,

    /// Split a GGUF file into a set of files of at most N tensors each, named as gguf-split
    /// names them (-o out/ gives out/MODEL-00001-of-0000K.gguf).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..),
          conflicts_with_all = ["parts", "sizes", "ranks", "max_shard_size"])]
    pub max_tensors: Option<u64>,

    /// The outputs' format (npy, json, npz, safetensors); overrides their extensions.
    #[arg(long, value_name = "FORMAT", value_parser = Offering::any(Format::output_names), hide_possible_values = true)]
    pub format: Option<String>,

    /// Read the input in this format instead of guessing from its content and name.
    #[arg(long, value_name = "FORMAT", value_parser = Offering::any(Format::names), hide_possible_values = true)]
    pub input_format: Option<String>,

    /// Refuse to replace an existing output (checked for every output before any is written).
    #[arg(short = 'n', long)]
    pub no_clobber: bool,

    /// The size of each part of outputs in object storage (-o s3://...): 5MiB to 5GiB, as
    /// for a join (default: 8 MiB, or the least that fits an object in 10,000 parts; a job's
    /// --begin cuts by it and records it, its default 5 MiB or the least that fits).
    #[arg(long, value_name = "SIZE", value_parser = super::parse_part_size, value_hint = ValueHint::Other)]
    pub part_size: Option<u64>,

    /// Deflate the members of .npz outputs, as numpy.savez_compressed does.
    #[arg(long)]
    pub compress: bool,

    /// The shape of JSON outputs: nested arrays, or an object with dtype, shape and data.
    #[arg(long, value_enum, default_value_t = JsonForm::Nested, value_name = "FORM")]
    pub json_form: JsonForm,

    /// Add or replace an entry of the .safetensors outputs' __metadata__ (the input's is
    /// carried over); repeatable.
    #[arg(long, value_name = "KEY=VALUE", value_parser = parse_key_value, value_hint = ValueHint::Other)]
    pub metadata: Vec<(String, String)>,

    /// Read rules from FILE, `GLOB = AXIS [WORDS]` or `GLOB = keep` a line, as a join reads
    /// them (see tjoin --help): the same file splits and joins back.
    #[arg(long, value_name = "FILE", value_hint = ValueHint::FilePath)]
    pub rules: Vec<PathBuf>,

    /// Cut tensors whose names match GLOB along AXIS (and WORDS: chunks N, replicas K).
    #[arg(long = "axis-for", value_name = "GLOB=AXIS", value_hint = ValueHint::Other)]
    pub axis_for: Vec<AxisRule>,

    /// Copy tensors matching GLOB whole into every output.
    #[arg(long, value_name = "GLOB", value_hint = ValueHint::Other)]
    pub keep: Vec<String>,

    /// The model's attention heads and key-value heads (Q:KV, or Q when they are equal),
    /// instead of those of the config.json beside the input: with --ranks, every rank must
    /// get whole heads.
    #[arg(long, value_name = "Q:KV", value_parser = parse_heads, value_hint = ValueHint::Other,
          requires = "ranks")]
    pub heads: Option<(u64, u64)>,

    /// Check every tensor's cut against DirectML's Split (DML_SPLIT_OPERATOR_DESC) at a
    /// feature level: directml (4.1), directml:LEVEL.
    #[arg(long, value_name = "PROFILE", value_parser = Offering::new(Spec::parse, Spec::names),
          hide_possible_values = true)]
    pub spec: Option<Spec>,

    /// Accept --rules lines that match no tensor of the input (refused by default).
    #[arg(long)]
    pub allow_unmatched: bool,

    /// Check everything and print every output, its tensors and slices (=json: as one JSON
    /// object); write nothing.
    #[arg(long, value_enum, value_name = "FORM", num_args = 0..=1, require_equals = true, default_missing_value = "text")]
    pub dry_run: Option<PlanForm>,

    /// After writing, print on stdout the plan that was carried out, as --dry-run prints it
    /// (=json: as one JSON object; a refusal or a failure then as JSON on stdout too).
    #[arg(long, value_enum, value_name = "FORM", num_args = 0..=1, require_equals = true,
          default_missing_value = "text", conflicts_with = "dry_run")]
    pub print_plan: Option<PlanForm>,

    /// The engine that moves the data: `--backend`, `--dml-adapter`.
    #[command(flatten)]
    pub engine: super::EngineArgs,

    /// A job that N workers share: `--workers`, `--begin`, `--worker`, `--commit`,
    /// `--abandon`.
    #[command(flatten)]
    pub workers: super::workers::WorkerArgs,

    /// When to show a progress bar on stderr.
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = When::Auto)]
    pub progress: When,

    /// Print nothing but errors (no progress bar).
    #[arg(short, long)]
    pub quiet: bool,

    /// Print help.
    #[arg(short, long, action = clap::ArgAction::Help)]
    pub help: Option<bool>,
}

/// The examples `tjoin split --help` ends with.
const EXAMPLES: &str = "Examples:
  Cut a dataset into 8 shards along its first axis (array_split's sizes):
    tjoin split -a 0 --parts 8 train.npy -o 'train-{part:05}.npy'
  Cut it into a training and a validation file:
    tjoin split -a 0 --sizes 90000,10000 data.npy -o train.npy -o val.npy
  Split a model into 4 tensor-parallel ranks by its family's rules:
    tjoin split --ranks 4 --rules rules/llama.rules model.safetensors -o 'tp{rank}/model.safetensors'
";

impl SplitConfig {
    /// The split the flags ask for, with every flag checked that can be checked before the
    /// input is opened.
    pub fn from_args(args: &SplitArgs) -> Result<SplitConfig> {
        if args.parts.is_none() && args.sizes.is_none() && args.ranks.is_none() {
            return Err(Error::refused(
                "a split needs --parts, --sizes or --ranks (--max-shard-size alone splits GGUF                  files only)",
                "add --parts N and -a AXIS, or --ranks N with the tensor rules",
            ));
        }
        let cut = match (args.parts, &args.sizes, args.ranks) {
            (_, Some(sizes), _) => Cut::Sizes(sizes.clone()),
            (_, _, Some(ranks)) => Cut::Ranks(ranks),
            (count, _, _) => Cut::Parts {
                count: count.unwrap_or(1),
                exact: args.exact,
            },
        };
        if !matches!(cut, Cut::Ranks(_)) && args.axis.is_none() {
            return Err(Error::refused(
                "a split by --parts or --sizes needs the axis to cut along",
                "add -a AXIS (-a 0 cuts rows)",
            ));
        }
        if let Some(spec) = &args.spec
            && SplitRules::of(spec).is_none()
        {
            return Err(Error::refused(
                format!(
                    "--spec {}: tjoin split checks DirectML's Split only ({} is a join's \
                     rules)",
                    spec.profile.name,
                    spec.title()
                ),
                "use --spec directml or --spec directml:LEVEL (1.0, 2.1, 3.0, 4.1, ...)",
            ));
        }
        let mut files = Vec::new();
        for path in &args.rules {
            files.extend(rules::read_file(path)?);
        }
        for rule in &mut files {
            rule.required = !rule.optional && !args.allow_unmatched;
        }
        let outputs = outputs(&args.output, cut.outputs())?;
        let forced = format_flag(&args.format, "--format")?;
        let folders = outputs.iter().filter(|p| names_folder(p)).count();
        if args.max_shard_size.is_some() && folders == 0 {
            return Err(Error::refused(
                "--max-shard-size applies to outputs that name a folder (a sharded checkpoint)",
                "end the output's name with / (-o 'tp{rank}/'), or drop --max-shard-size",
            ));
        }
        if folders > 0 && forced.is_some_and(|f| f != Format::SafeTensors) {
            return Err(Error::refused(
                "--format: an output that names a folder is a sharded checkpoint, written in \
                 safetensors",
                "drop --format, or name files as the outputs",
            ));
        }
        let job = args.workers.step(args.dry_run.is_some(), false)?;
        super::workers::refuse_remote_split(job, &outputs)?;
        if args.part_size.is_some() && !outputs.iter().any(|p| crate::sys::remote::is_url(p)) {
            return Err(Error::refused(
                "--part-size sizes the parts of outputs in object storage, and -o names none",
                "drop --part-size, or split into s3://BUCKET/PREFIX/",
            ));
        }
        Ok(SplitConfig {
            input: Arc::from(args.input.as_path()),
            input_format: format_flag(&args.input_format, "--input-format")?,
            cut,
            axis: args.axis,
            tensor_rules: rules::ordered(&args.keep, &args.axis_for, files),
            outputs: split_outputs(&outputs, args.max_shard_size),
            output: OutputConfig {
                path: None,
                format: forced,
                no_clobber: args.no_clobber,
                part_size: args.part_size,
                compress: args.compress,
                json_form: args.json_form,
                metadata: args.metadata.clone(),
                sharded: None,
            },
            heads: args.heads,
            spec: args.spec,
            backend: args.engine.backend,
            adapter: args.engine.dml_adapter,
            action: args.dry_run.map_or(Action::Write, Action::DryRun),
            print_plan: args.print_plan,
            progress: if args.quiet {
                When::Never
            } else {
                args.progress
            },
            job,
        })
    }
}

/// `--sizes 900,100`.
fn parse_sizes(text: &str) -> std::result::Result<Vec<u64>, String> {
    let sizes: std::result::Result<Vec<u64>, _> =
        text.split(',').map(|s| s.trim().parse::<u64>()).collect();
    match sizes {
        Ok(sizes) if !sizes.is_empty() => Ok(sizes),
        _ => Err("expected sizes separated by commas: 900,100".to_string()),
    }
}

/// `--heads Q:KV` (or `Q`, the key-value heads as many): both positive, Q a multiple of KV.
fn parse_heads(text: &str) -> std::result::Result<(u64, u64), String> {
    let (query, key_value) = text.split_once(':').unwrap_or((text, text));
    let count = |t: &str| t.trim().parse::<u64>().ok().filter(|&n| n > 0);
    match (count(query), count(key_value)) {
        (Some(q), Some(kv)) if q % kv == 0 => Ok((q, kv)),
        (Some(q), Some(kv)) => Err(format!(
            "{q} attention heads are not a multiple of {kv} key-value heads"
        )),
        _ => Err("expected the attention and key-value heads: 32:8 (or 32)".to_string()),
    }
}

/// Whether the output `path` names a folder (`tp{rank}/`): a sharded checkpoint.
fn names_folder(path: &Path) -> bool {
    let text = path.as_os_str().to_string_lossy();
    text.ends_with('/') || (cfg!(windows) && text.ends_with('\\'))
}

/// The outputs `paths`, each a file, or a sharded checkpoint of shards of at most
/// `max_shard_size` bytes of tensors (huggingface_hub's 5 GB by default) where it names a
/// folder.
fn split_outputs(paths: &[PathBuf], max_shard_size: Option<u64>) -> Vec<SplitOutput> {
    let sharded = |path: &PathBuf| ShardedOutput {
        folder: path.clone(),
        name: None,
        max_shard_size: max_shard_size.unwrap_or(DEFAULT_MAX_SHARD_SIZE),
        names_from: None,
    };
    paths
        .iter()
        .map(|path| SplitOutput {
            path: path.clone(),
            sharded: names_folder(path).then(|| sharded(path)),
        })
        .collect()
}

/// The `count` outputs `given` names: a template's expansions, or the paths in order. Refuses
/// standard output, a count that differs, and two outputs that are the same file.
fn outputs(given: &[PathBuf], count: u64) -> Result<Vec<PathBuf>> {
    if let Some(stdout) = given.iter().find(|p| p.as_os_str() == crate::sys::STDOUT) {
        return Err(Error::refused(
            format!(
                "-o {}: a split writes several files, not standard output",
                crate::messages::path(stdout)
            ),
            "name the output files, or one template such as -o 'part-{part}.npy'",
        ));
    }
    let outputs: Vec<PathBuf> = match given {
        [template] if count > 1 || has_fields(template) => {
            let text = template.to_str().ok_or_else(|| {
                Error::refused(
                    format!(
                        "the template {} is not valid UTF-8",
                        crate::messages::path(template)
                    ),
                    "name the outputs in UTF-8, or one -o per output",
                )
            })?;
            (0..count)
                .map(|index| expand(text, index).map(PathBuf::from))
                .collect::<std::result::Result<_, String>>()
                .map_err(|why| {
                    Error::refused(
                        format!("-o {}: {why}", crate::messages::path(template)),
                        "write {part} or {rank} where the number goes, with :0W to pad it to W \
                         digits ({part:05}); {{ and }} for braces",
                    )
                })?
        }
        _ if given.len() as u64 == count => given.to_vec(),
        _ => {
            return Err(Error::refused(
                format!(
                    "the split makes {count} outputs, but -o names {}",
                    given.len()
                ),
                format!(
                    "give one -o per output ({count}), or one template such as -o 'part-{{part}}.npy'"
                ),
            ));
        }
    };
    check_distinct(&outputs, given.len() == 1)?;
    Ok(outputs)
}

/// Whether `template` has a `{...}` field.
fn has_fields(template: &Path) -> bool {
    template.to_string_lossy().replace("{{", "").contains('{')
}

/// The template `text` with its fields replaced by `index`: `{part}`, `{rank}`, `{part:05}`.
fn expand(text: &str, index: u64) -> std::result::Result<String, String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(['{', '}']) {
        out.push_str(&rest[..at]);
        let brace = &rest[at..];
        if brace.starts_with("{{") || brace.starts_with("}}") {
            out.push_str(&brace[..1]);
            rest = &brace[2..];
            continue;
        }
        if brace.starts_with('}') {
            return Err("a `}` closes no field (write `}}` for a brace)".to_string());
        }
        let end = brace
            .find('}')
            .ok_or("a `{` opens a field that no `}` closes (write `{{` for a brace)")?;
        let field = &brace[1..end];
        let (name, spec) = field.split_once(':').unwrap_or((field, ""));
        if name != "part" && name != "rank" {
            return Err(format!(
                "`{{{}}}` is not a field: write {{part}} or {{rank}}",
                crate::messages::name(field)
            ));
        }
        let width = match spec {
            "" => 0,
            _ => spec
                .strip_prefix('0')
                .and_then(|w| w.parse::<usize>().ok())
                .filter(|&w| w <= 20)
                .ok_or_else(|| {
                    format!(
                        "`{{{}}}`: a field pads with :0W, W at most 20 ({{part:05}})",
                        crate::messages::name(field)
                    )
                })?,
        };
        out.push_str(&format!("{index:0width$}"));
        rest = &brace[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Refuses outputs of which two are the same file: the same path once `.` and `..` are
/// resolved where their folders exist.
fn check_distinct(outputs: &[PathBuf], template: bool) -> Result<()> {
    let keys: Vec<PathBuf> = outputs.iter().map(|p| same_file_key(p)).collect();
    for (later, key) in keys.iter().enumerate() {
        if let Some(first) = keys[..later].iter().position(|k| k == key) {
            let (a, b) = (&outputs[first], &outputs[later]);
            let headline = if template {
                format!(
                    "the template makes outputs {} and {} the same file, {}",
                    first,
                    later,
                    crate::messages::path(a)
                )
            } else {
                format!(
                    "-o {} and -o {} are the same file",
                    crate::messages::path(a),
                    crate::messages::path(b)
                )
            };
            let hint = if template {
                "put {part} (or {rank}) in the template's name, such as -o 'part-{part}.npy'"
            } else {
                "name a different file for every output"
            };
            return Err(Error::refused(headline, hint));
        }
    }
    Ok(())
}

/// `path` with its folder resolved where it exists, else cleaned of `.` components.
fn same_file_key(path: &Path) -> PathBuf {
    let name = path.file_name().map(PathBuf::from).unwrap_or_default();
    let folder = path.parent().filter(|f| !f.as_os_str().is_empty());
    let folder = folder.unwrap_or(Path::new("."));
    match folder.canonicalize() {
        Ok(folder) => folder.join(name),
        Err(_) => path
            .components()
            .filter(|c| *c != Component::CurDir)
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_expand_part_and_rank_with_padding() {
        assert_eq!(expand("train-{part:05}.npy", 7).unwrap(), "train-00007.npy");
        assert_eq!(
            expand("tp{rank}/m.safetensors", 3).unwrap(),
            "tp3/m.safetensors"
        );
        assert_eq!(expand("{{x}}-{part}", 12).unwrap(), "{x}-12");
        for bad in ["{nope}", "{part", "a}b", "{part:5}", "{part:0x}"] {
            assert!(expand(bad, 0).is_err(), "{bad}");
        }
    }

    #[test]
    fn outputs_are_counted_and_distinct() {
        let paths = |names: &[&str]| names.iter().map(PathBuf::from).collect::<Vec<_>>();
        let made = outputs(&paths(&["p{part}.npy"]), 3).unwrap();
        assert_eq!(made, paths(&["p0.npy", "p1.npy", "p2.npy"]));
        assert!(outputs(&paths(&["same.npy"]), 2).is_err());
        assert!(outputs(&paths(&["a.npy", "./a.npy"]), 2).is_err());
        assert!(outputs(&paths(&["a.npy", "b.npy"]), 3).is_err());
        assert!(outputs(&paths(&["-"]), 1).is_err());
        assert_eq!(outputs(&paths(&["a.npy"]), 1).unwrap(), paths(&["a.npy"]));
    }
}
