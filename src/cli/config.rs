//! The second stage of the arguments: the flags clap parsed, checked one by one and turned
//! into the `JoinConfig` every later stage takes (after fd's `construct_config` and ripgrep's
//! `HiArgs::from_low_args`). `Command::from_cli` is where every command line is read: it hands
//! a split's flags to `split.rs` and a GGUF merge's or split's to `gguf.rs`, and turns the
//! rest into a join, an append or a recovery. It may touch files: it reads the `--files-from`
//! lists and the `--like` references' headers.

use std::path::Path;
use std::sync::Arc;

use super::{Cli, JoinArgs, Subcommand, format_flag};
use crate::config::{
    Action, Command, DEFAULT_MAX_SHARD_SIZE, EngineConfig, JoinConfig, JoinRules, OutputConfig,
    ShardedOutput, SplitConfig,
};
use crate::dtype::DType;
use crate::dtype::cast;
use crate::error::STDIN;
use crate::error::{Error, Result};
use crate::format::Format;
use crate::format::index::SetName;
use crate::input::reference::Reference;
use crate::limits;
use crate::output::progress::When;
use crate::plan::complete::ModelSizes;
use crate::plan::filter::{Filter, FilterKind};
use crate::plan::ranks;
use crate::plan::rules::{self, Rule};
use crate::sys::STDOUT;
use crate::sys::{self, Accept};

impl Command {
    /// The command the command line asks for: a subcommand's, or else (`from_join_args`)
    /// `--recover FILE`, `--append`, or a join. `crate::run` runs its flow.
    pub fn from_cli(cli: &Cli) -> Result<Command> {
        match &cli.command {
            Some(Subcommand::Split(args)) => match super::gguf::split(args)? {
                Some(config) => Ok(Command::Gguf(config)),
                None => Ok(Command::Split(SplitConfig::from_args(args)?)),
            },
            Some(Subcommand::Rules(args)) => Ok(Command::Rules(args.family.clone())),
            None => Command::from_join_args(&cli.join),
        }
    }

    /// The command a join's flags ask for: `--recover FILE`, `--append`, or a join.
    fn from_join_args(cli: &JoinArgs) -> Result<Command> {
        if let Some(file) = &cli.recover {
            return Ok(Command::Recover(file.clone()));
        }
        if let Some(config) = super::gguf::merge(cli)? {
            return Ok(Command::Gguf(config));
        }
        let mut config = JoinConfig::from_args(cli)?;
        if !cli.append {
            config.rules.like = references(cli)?;
            return Ok(Command::Join(config));
        }
        if let Some(output) = &cli.output {
            return Err(Error::refused(
                format!(
                    "--append grows its first input in place and writes no other file, but -o \
                     names {}",
                    crate::messages::path(output)
                ),
                "drop -o to grow the first input in place, or drop --append to write the join \
                 to that file (a rewrite, which may replace the first input)",
            ));
        }
        // Flags that say how to write a new output file: an append writes none.
        let misplaced = [
            (cli.no_clobber, "--no-clobber"),
            (cli.part_size.is_some(), "--part-size"),
            (cli.format.is_some(), "--format"),
            (cli.compress, "--compress"),
            (!cli.metadata.is_empty(), "--metadata"),
            (cli.json_form != Default::default(), "--json-form"),
            (cli.stack, "--stack"),
        ];
        if let Some((_, flag)) = misplaced.iter().find(|(given, _)| *given) {
            return Err(Error::refused(
                format!(
                    "{flag} does not apply to --append, which grows a .npy file in place along \
                     an axis it has"
                ),
                format!("drop {flag}, or drop --append and write the join to a file with -o"),
            ));
        }
        config.rules.like = references(cli)?;
        Ok(Command::Append(config))
    }
}

/// The references `--like` names, read (headers only), when any is given: read once, here,
/// as the `--files-from` lists are, so that the flows receive their shapes rather than
/// their paths.
fn references(cli: &JoinArgs) -> Result<Option<Reference>> {
    (!cli.like.is_empty())
        .then(|| Reference::read(&cli.like))
        .transpose()
}

impl JoinConfig {
    /// The join the command line asks for, with every flag checked that can be checked
    /// before an input is opened.
    pub fn from_args(cli: &JoinArgs) -> Result<JoinConfig> {
        let forced = format_flag(&cli.format, "--format")?;
        let sharded = sharded_output(cli)?;
        let output_format = match (&cli.output, &sharded) {
            (Some(_), Some(_)) => match forced {
                Some(other) if other != Format::SafeTensors => {
                    return Err(Error::refused(
                        format!(
                            "--format {}: a folder or an index as the output is a sharded \
                             checkpoint, which is written in safetensors",
                            other.name()
                        ),
                        "drop --format, or name a file as the output",
                    ));
                }
                _ => Some(Format::SafeTensors),
            },
            (Some(path), None) => Some(Format::of_output(path, forced)?),
            (None, _) => forced,
        };
        let action = cli.dry_run.map_or(Action::Write, Action::DryRun);
        if let (Some(_), Some(path)) = (cli.print_plan, &cli.output)
            && (path.as_os_str() == STDOUT || path == Path::new("/dev/stdout"))
        {
            return Err(Error::refused(
                "--print-plan prints the plan on standard output, where -o - writes the data",
                "write the output to a file, or drop --print-plan",
            ));
        }
        let inputs = input_paths(cli)?;
        // Whether numbered inputs are in order is told by their names alone; the refusal
        // waits in the config until the inputs are open (DTensor rank files are exempt).
        let out_of_order = match cli.any_order {
            true => None,
            false => ranks::order_refusal(&inputs),
        };
        let model = model_config(cli.config.as_deref(), &inputs)?;
        let job = cli.workers.step(cli.dry_run.is_some(), cli.append)?;
        super::workers::refuse_remote_join(job, cli.output.as_deref())?;
        let remote = cli
            .output
            .as_deref()
            .is_some_and(crate::sys::remote::is_url);
        if cli.part_size.is_some() && !remote {
            return Err(Error::refused(
                "--part-size sizes the parts of an output in object storage, and -o names none",
                "drop --part-size, or write to s3://BUCKET/KEY",
            ));
        }
        Ok(JoinConfig {
            inputs,
            out_of_order,
            input_format: format_flag(&cli.input_format, "--input-format")?,
            stack: cli.stack,
            filters: filters(cli),
            rules: JoinRules {
                axis: cli.axis,
                spec: cli.spec.unwrap_or_default(),
                tensor_rules: tensor_rules(cli)?,
                join_identical: cli.join_identical,
                uneven: cli.uneven,
                strict: cli.strict,
                // Read once the command is known (`references`).
                like: None,
                name: cli.name.clone(),
                cast: cli.cast.as_deref().map(cast_type).transpose()?,
                expect_shape: cli.expect_shape.clone(),
                model,
            },
            output: OutputConfig {
                path: cli.output.clone(),
                format: output_format,
                no_clobber: cli.no_clobber,
                part_size: cli.part_size,
                compress: cli.compress,
                json_form: cli.json_form,
                metadata: cli.metadata.clone(),
                sharded,
            },
            action,
            print_plan: cli.print_plan,
            engine: EngineConfig {
                backend: cli.engine.backend,
                adapter: cli.engine.dml_adapter,
            },
            progress: if cli.quiet { When::Never } else { cli.progress },
            quiet: cli.quiet,
            job,
        })
    }
}

/// The most bytes of a config.json tjoin reads: a model's is a few KiB.
const CONFIG_LIMIT: sys::Limit = sys::Limit {
    bytes: 1 << 20,
    of: "a model's config.json",
    advice: "give the unsplit model's header with --like instead",
};

/// The model's config.json: `--config FILE` (refused when it cannot be read), else the
/// `config.json` beside the first input when there is one (a directory's own when the input
/// is a folder). `None` when neither is there.
fn model_config(given: Option<&Path>, inputs: &[Arc<Path>]) -> Result<Option<ModelSizes>> {
    let path = match given {
        Some(path) => path.to_path_buf(),
        None => {
            let Some(first) = inputs.first().filter(|p| p.as_os_str() != STDIN) else {
                return Ok(None);
            };
            let folder = match first.is_dir() {
                true => first.to_path_buf(),
                false => first.parent().map(Path::to_path_buf).unwrap_or_default(),
            };
            let beside = folder.join("config.json");
            if std::fs::symlink_metadata(&beside).is_err() {
                return Ok(None);
            }
            beside
        }
    };
    let named = crate::messages::path(&path);
    let text = sys::read_text(&path, &CONFIG_LIMIT, Accept::Regular)
        .map_err(|e| Error::io("read the model's config", &path, e))?;
    ModelSizes::from_config(&text, &named)
        .map(|sizes| {
            Some(ModelSizes {
                given: given.is_some(),
                ..sizes
            })
        })
        .map_err(|why| {
            Error::refused(
                format!("cannot read the model's sizes from {named}: {why}"),
                "name the model's own config.json with --config, or move the file away",
            )
        })
}

/// The tensor rules in the order they apply: the flags, then each `--rules` file's lines.
/// `--exclude` and `--only`, as given.
fn filters(cli: &JoinArgs) -> Vec<Filter> {
    let exclude = cli.exclude.iter().map(|glob| (FilterKind::Exclude, glob));
    let only = cli.only.iter().map(|glob| (FilterKind::Only, glob));
    exclude
        .chain(only)
        .map(|(kind, glob)| Filter {
            kind,
            glob: glob.clone(),
        })
        .collect()
}

fn tensor_rules(cli: &JoinArgs) -> Result<Vec<Rule>> {
    let mut files = Vec::new();
    for path in &cli.rules {
        files.extend(rules::read_file(path)?);
    }
    for rule in &mut files {
        rule.required = !rule.optional && !cli.allow_unmatched;
    }
    Ok(rules::ordered(&cli.keep, &cli.axis_for, files))
}

/// The sharded checkpoint the output names, if it names one: a folder (`-o merged/`, or an
/// existing folder) or an index (`-o merged/model.safetensors.index.json`). `--max-shard-size`
/// and `--prefix` apply to no other output.
fn sharded_output(cli: &JoinArgs) -> Result<Option<ShardedOutput>> {
    let path = cli.output.as_deref().filter(|p| p.as_os_str() != STDOUT);
    let text = path
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let trailing = text.ends_with('/') || (cfg!(windows) && text.ends_with('\\'));
    let file_name = path.and_then(Path::file_name).and_then(|n| n.to_str());
    let from_index = file_name.filter(|_| !trailing).and_then(SetName::of_index);
    let folder = match (path, &from_index) {
        (Some(path), Some(_)) => Some(crate::sys::folder_of(path).to_path_buf()),
        // A folder named like a file (`out.npy/`) is refused as the target it was meant as.
        (Some(path), None)
            if trailing || (path.is_dir() && Format::of_extension(path).is_none()) =>
        {
            Some(path.to_path_buf())
        }
        _ => None,
    };
    let Some(folder) = folder else {
        let flag = match (cli.max_shard_size, &cli.prefix, &cli.names_from) {
            (Some(_), _, _) => "--max-shard-size",
            (None, Some(_), _) => "--prefix",
            (None, None, Some(_)) => "--names-from",
            (None, None, None) => return Ok(None),
        };
        return Err(Error::refused(
            format!("{flag} applies to sharded outputs only"),
            "name a folder as the output (-o merged/) or an index (-o \
             merged/model.safetensors.index.json) to write a sharded checkpoint",
        ));
    };
    let name = match (from_index, &cli.prefix) {
        (Some(_), Some(_)) => {
            return Err(Error::refused(
                "--prefix names the files of a sharded output, but the output already names \
                 its index",
                "drop --prefix, or name the folder alone as the output",
            ));
        }
        (Some(name), None) => Some(name),
        (None, Some(prefix)) => {
            if prefix.is_empty() || prefix.contains(['/', '\\']) {
                return Err(Error::refused(
                    format!("--prefix `{prefix}`: a prefix is the start of a file name"),
                    "name it like model or diffusion_pytorch_model, without a folder",
                ));
            }
            Some(SetName {
                prefix: prefix.clone(),
                variant: None,
            })
        }
        (None, None) => None,
    };
    if cli.names_from.is_some() && cli.max_shard_size.is_some() {
        return Err(Error::refused(
            "--names-from and --max-shard-size both say which file each tensor goes in",
            "drop one of them",
        ));
    }
    Ok(Some(ShardedOutput {
        folder,
        name,
        max_shard_size: cli.max_shard_size.unwrap_or(DEFAULT_MAX_SHARD_SIZE),
        names_from: cli.names_from.clone(),
    }))
}

/// The element type `--cast` names, if it is one the cast writes.
fn cast_type(name: &str) -> Result<DType> {
    let refused =
        |headline: String| Error::refused(headline, format!("name one of: {}", cast::CAST_TYPES));
    match DType::from_name(name) {
        Some(dtype) if cast::castable(&dtype, &dtype) => Ok(dtype),
        // float8/float4/float6 have no single rounding rule tjoin could apply silently, and
        // strings, records and dates are not numbers.
        Some(dtype) => Err(refused(format!(
            "--cast {name}: tjoin does not convert to {dtype}; --cast writes numeric types only, \
             and no 8-bit or smaller floats"
        ))),
        None => Err(refused(format!(
            "--cast {name}: not an element type --cast converts to"
        ))),
    }
}

/// The inputs in order: those on the command line, then those `--files-from` lists.
fn input_paths(cli: &JoinArgs) -> Result<Vec<Arc<Path>>> {
    let mut paths: Vec<Arc<Path>> = cli.inputs.iter().map(|p| p.as_path().into()).collect();
    if let Some(list) = &cli.files_from {
        paths.extend(read_list(list, cli.null)?);
    }
    let from_stdin = paths.iter().filter(|p| p.as_os_str() == STDIN).count()
        + usize::from(cli.files_from.as_deref() == Some(Path::new(STDIN)));
    if from_stdin > 1 {
        return Err(Error::refused(
            format!(
                "standard input is named {from_stdin} times (as an input `-` or \
                 --files-from -), but it can be read only once"
            ),
            "save all but one of the streams to files first",
        ));
    }
    Ok(paths)
}

/// The paths a `--files-from` list holds: one per line, or NUL-terminated with `--null`.
/// Empty entries are skipped, and so is the CR of a CRLF line end: a list written on
/// Windows names the same files. The list is read an entry at a time, never held whole (a
/// list of 100,000 inputs would otherwise be in memory twice), up to [`limits::FILE_LIST`]
/// bytes; a FIFO is opened without waiting for its writer.
fn read_list(list: &Path, null: bool) -> Result<Vec<Arc<Path>>> {
    let failed = |e| Error::io("read the file list", list, e);
    if list.as_os_str() == STDIN {
        return read_entries(std::io::stdin().lock(), false, list, null);
    }
    if crate::sys::remote::is_url(list) {
        // An object, read whole through its source (up to the list's limit).
        let location = crate::location::Location::new(list);
        let (text, _) = crate::input::objects::read_whole(&location, &limits::FILE_LIST)
            .map_err(|(_, e)| failed(e))?;
        return read_entries(text.as_slice(), false, list, null);
    }
    let (file, metadata) = sys::open_without_waiting(list).map_err(failed)?;
    if !metadata.is_file() {
        sys::stream_allowed(&file, &metadata, Accept::Stream).map_err(failed)?;
    }
    if metadata.is_file() && metadata.len() > limits::FILE_LIST.bytes {
        return Err(failed(limits::FILE_LIST.exceeded()));
    }
    read_entries(file, sys::is_fifo(&metadata), list, null)
}

/// The entries of the `--files-from` list `list` read from `from`, each a path; `fifo` when
/// it is a pipe, which is refused when nothing was written to it.
fn read_entries(
    from: impl std::io::Read,
    fifo: bool,
    list: &Path,
    null: bool,
) -> Result<Vec<Arc<Path>>> {
    use std::io::BufRead;
    let failed = |e| Error::io("read the file list", list, e);
    let limit = &limits::FILE_LIST;
    let separator = if null { b'\0' } else { b'\n' };
    // One byte more than the limit tells a list that goes past it from one that ends there.
    let mut reader = std::io::BufReader::with_capacity(1 << 16, from.take(limit.bytes + 1));
    let (mut entry, mut total, mut paths) = (Vec::new(), 0u64, Vec::new());
    let mut entries = 0usize;
    let mut finish = |entry: &mut Vec<u8>| -> Result<()> {
        let mut path = entry.as_slice();
        if let [line @ .., b'\r'] = path
            && !null
        {
            path = line;
        }
        if !path.is_empty() {
            paths.push(path_from_bytes(path, list)?);
        }
        entry.clear();
        Ok(())
    };
    // A buffer at a time, not an entry at a time: `/dev/zero` with `--null` is 256 MiB of
    // empty entries.
    loop {
        let chunk = reader.fill_buf().map_err(failed)?;
        if chunk.is_empty() {
            break;
        }
        total += chunk.len() as u64;
        if total > limit.bytes {
            return Err(failed(limit.exceeded()));
        }
        for piece in chunk.split_inclusive(|&b| b == separator) {
            let (ends, piece) = match piece.split_last() {
                Some((&last, before)) if last == separator => (true, before),
                _ => (false, piece),
            };
            entry.extend_from_slice(piece);
            if entry.len() > limits::FILE_LIST_ENTRY {
                let why = format!(
                    "entry {} is longer than {} bytes, the most tjoin reads of a path in a --files-from \
                     list: check that it is \
                     a list of paths, one a line (NUL-terminated with --null)",
                    entries + 1,
                    crate::outliers::thousands(limits::FILE_LIST_ENTRY)
                );
                return Err(failed(std::io::Error::other(why)));
            }
            if ends {
                entries += 1;
                finish(&mut entry)?;
            }
        }
        let used = chunk.len();
        reader.consume(used);
    }
    finish(&mut entry)?;
    if total == 0 && fifo {
        return Err(failed(sys::nothing_written()));
    }
    Ok(paths)
}

/// A path as a file list holds it: any bytes on Unix, UTF-8 text elsewhere.
fn path_from_bytes(bytes: &[u8], list: &Path) -> Result<Arc<Path>> {
    #[cfg(unix)]
    {
        let _ = list;
        use std::os::unix::ffi::OsStrExt;
        Ok(Path::new(std::ffi::OsStr::from_bytes(bytes)).into())
    }
    #[cfg(not(unix))]
    std::str::from_utf8(bytes)
        .map(|p| Path::new(p).into())
        .map_err(|_| {
            let why = "it holds a path that is not UTF-8 text";
            Error::io("read the file list", list, std::io::Error::other(why))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PlanForm;
    use clap::Parser;

    fn config(args: &[&str]) -> JoinConfig {
        let cli = Cli::parse_from(std::iter::once("tjoin").chain(args.iter().copied()));
        JoinConfig::from_args(&cli.join).expect("a valid command line")
    }

    #[test]
    fn the_early_copy_runs_only_for_plain_axis_0_joins_into_a_npy_file() {
        let early = |args: &[&str]| config(args).early_copy().is_some();
        assert!(early(&["-a", "0", "a.npy", "-o", "o.npy"]));
        assert!(early(&[
            "-a", "-2", "a.npy", "-o", "o.npy", "--spec", "onnx"
        ]));
        for args in [
            &["a.npy", "-o", "o.npy"][..],
            &["-a", "0", "a.npy", "-o", "-", "--format", "npy"],
            &["-a", "0", "a.npy", "-o", "o.npy", "--dry-run"],
            &["-a", "0", "a.npy", "-o", "o.npy", "--cast", "float64"],
            &["-a", "0", "a.npy", "-o", "o.npy", "--stack"],
            &["-a", "0", "a.npy", "-o", "o.npy", "--keep", "x"],
            &["-a", "0", "a.npy", "-o", "o.npy", "--name", "x"],
            &["-a", "0", "a.npy", "-o", "o.npy", "--backend", "auto"],
            &["-a", "0", "a.npy", "--dry-run"],
            &["-a", "0", "a.npy", "-o", "o.json"],
            &["-a", "0", "a.npy", "-o", "o.npy", "--input-format", "json"],
        ] {
            assert!(!early(args), "{args:?}");
        }
    }

    #[test]
    fn format_always_names_the_output_format_and_the_plan_has_its_own_spelling() {
        let dry = config(&[
            "-a",
            "0",
            "a.npy",
            "-o",
            "o.npy",
            "--dry-run",
            "--format",
            "json",
        ]);
        assert_eq!(dry.action, Action::DryRun(PlanForm::Text));
        assert_eq!(dry.output.format, Some(Format::Json));
        let json = config(&["-a", "0", "a.npy", "-o", "o.npy", "--dry-run=json"]);
        assert_eq!(json.action, Action::DryRun(PlanForm::Json));
        assert_eq!(json.output.format, Some(Format::Npy));
        // A bare --dry-run takes no value from the next argument.
        let bare = config(&["--dry-run", "json", "a.npy"]);
        assert_eq!(bare.action, Action::DryRun(PlanForm::Text));
        assert_eq!(bare.inputs.len(), 2);
        let written = config(&["-a", "0", "a.npy", "-o", "o.npy", "--format", "json"]);
        assert_eq!(written.action, Action::Write);
        assert_eq!(written.output.format, Some(Format::Json));
    }

    #[test]
    fn the_command_is_a_join_an_append_or_a_recovery() {
        let command = |args: &[&str]| {
            let cli = Cli::try_parse_from(std::iter::once("tjoin").chain(args.iter().copied()));
            Command::from_cli(&cli.expect("clap accepts it"))
        };
        assert!(matches!(
            command(&["-a", "0", "a.npy", "-o", "b.npy"]),
            Ok(Command::Join(_))
        ));
        let append = command(&["--append", "-a", "0", "t.npy", "n.npy", "--cast", "float32"]);
        assert!(matches!(append, Ok(Command::Append(c)) if c.output.path.is_none()));
        let recover = command(&["--recover", "t.npy"]);
        assert!(matches!(recover, Ok(Command::Recover(p)) if p == Path::new("t.npy")));
        for (args, flag) in [
            (
                &["--append", "t.npy", "n.npy", "-o", "x.npy"][..],
                "-o names x.npy",
            ),
            (
                &["--append", "t.npy", "n.npy", "--stack"],
                "--stack does not apply",
            ),
            (
                &["--append", "t.npy", "n.npy", "-n"],
                "--no-clobber does not apply",
            ),
            (
                &["--append", "t.npy", "n.npy", "--format", "npy"],
                "--format does not",
            ),
        ] {
            let refused = command(args).unwrap_err().to_string();
            assert!(refused.contains(flag), "{args:?}: {refused}");
        }
        // --recover takes nothing else.
        assert!(Cli::try_parse_from(["tjoin", "--recover", "t.npy", "-a", "0"]).is_err());
    }

    #[test]
    fn a_folder_or_an_index_as_the_output_is_a_sharded_checkpoint() {
        let sharded = |args: &[&str]| config(args).output.sharded;
        let folder = sharded(&["a.safetensors", "-o", "merged/"]).unwrap();
        assert_eq!(folder.folder, Path::new("merged/"));
        assert_eq!((folder.name, folder.max_shard_size), (None, 5_000_000_000));
        let index = sharded(&[
            "a.safetensors",
            "-o",
            "x/unet.safetensors.index.fp16.json",
            "--max-shard-size",
            "2GiB",
        ])
        .unwrap();
        assert_eq!(index.folder, Path::new("x"));
        let name = index.name.unwrap();
        assert_eq!(
            (name.prefix.as_str(), name.variant.as_deref()),
            ("unet", Some("fp16"))
        );
        assert_eq!(index.max_shard_size, 2 << 30);
        let prefixed = sharded(&[
            "a.safetensors",
            "-o",
            "m/",
            "--prefix",
            "diffusion_pytorch_model",
        ]);
        assert_eq!(
            prefixed.unwrap().name.unwrap().prefix,
            "diffusion_pytorch_model"
        );
        assert_eq!(sharded(&["a.safetensors", "-o", "out.safetensors"]), None);
        let refused = |args: &[&str]| {
            let cli = Cli::parse_from(std::iter::once("tjoin").chain(args.iter().copied()));
            JoinConfig::from_args(&cli.join).unwrap_err().to_string()
        };
        let twice = refused(&[
            "a.safetensors",
            "-o",
            "m/model.safetensors.index.json",
            "--prefix",
            "x",
        ]);
        assert!(twice.contains("already names its index"), "{twice}");
        let nested = refused(&["a.safetensors", "-o", "m/", "--prefix", "a/b"]);
        assert!(
            nested.contains("a prefix is the start of a file name"),
            "{nested}"
        );
    }

    #[test]
    fn quiet_means_no_progress_and_casts_are_checked_early() {
        assert_eq!(
            config(&["-q", "a.npy", "-o", "o.npy"]).progress,
            When::Never
        );
        let cli = Cli::parse_from(["tjoin", "--cast", "float8_e4m3fn", "a.npy", "-o", "o.npy"]);
        assert!(JoinConfig::from_args(&cli.join).is_err());
    }
}
