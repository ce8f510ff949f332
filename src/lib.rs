//! tjoin joins tensors stored in files along one axis: the ONNX Concat / DirectML Join
//! operator as a command-line tool for files far larger than memory.
//!
//! The flow of one run (`run`): open the inputs and read their headers, check the join
//! rules and plan every output tensor, then write the output's framing and stream the data
//! with the copy engine into a temporary file that is renamed over the target when complete.
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod backend;
pub mod cast;
pub mod cli;
pub mod copy;
pub mod dtype;
pub mod early;
pub mod error;
pub mod format;
pub mod generate;
pub mod input;
pub mod job;
pub mod output;
pub mod plan;
pub mod progress;
pub mod report;
pub mod source;
pub mod spec;
pub mod spill;
pub mod stack;

pub use error::{Error, ExitCode, Result};

use backend::Engine;
use cli::Cli;
use dtype::DType;
use early::{EarlyCopy, WHOLE_FILE_MAX};
use error::Refusal;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use format::{Format, OutTensor, WriteOptions, Writer};
use indicatif::ProgressBar;
use input::{Input, OpenOptions, Prefetch, STDIN};
use job::TensorJob;
use output::{Output, Sink};
use progress::{Counted, When};
use spill::Spill;

/// Runs the join the command line asks for: open the inputs, check and plan every output
/// tensor, then either print the plan (`--dry-run`) or write the output and commit it.
pub fn run(cli: &Cli) -> Result<()> {
    if let Some(kind) = cli.generate {
        let mut stdout = std::io::stdout().lock();
        return generate::generate(kind, &mut stdout)
            .map_err(|e| Error::io("write", Path::new("standard output"), e));
    }
    let formats = Formats::from_cli(cli)?;
    let mut early = EarlyCopy::for_run(cli, formats.output, formats.input);
    let inputs = open_inputs(cli, formats.input, early.as_mut())?;
    // A dry run without an output plans as if the output were like the first input.
    let format = formats.output.unwrap_or(inputs[0].format);
    let spec = cli.spec.unwrap_or_default();
    let mut writer = format.writer(&write_options(cli, format, &inputs)?);
    let job = plan(cli, &inputs, spec, format, writer.as_ref())?;
    let mut engine = Engine::choose(cli.backend, cli.dml_adapter, &job)?;
    match (&cli.output, cli.dry_run) {
        (Some(path), false) => {
            let early = early.and_then(|early| early.fits(&inputs, &job));
            write_and_commit(
                cli,
                path,
                &inputs,
                &job,
                writer.as_mut(),
                &mut engine,
                early,
            )
        }
        _ => {
            let output = cli.output.as_deref().zip(formats.output);
            let report = if formats.plan_as_json {
                report::dry_run_json
            } else {
                report::dry_run
            };
            print!("{}", report(spec, &inputs, &job, cli.axis, output, &engine));
            Ok(())
        }
    }
}

/// The formats the flags and the output's name ask for.
struct Formats {
    /// The output's format, when there is an output or `--format` names one.
    output: Option<Format>,
    /// `--input-format`.
    input: Option<Format>,
    /// `--dry-run --format json`: the plan as JSON (the output's format still comes from
    /// its extension).
    plan_as_json: bool,
}

impl Formats {
    fn from_cli(cli: &Cli) -> Result<Formats> {
        let named = |name: &Option<String>, flag| {
            name.as_deref()
                .map(|n| Format::from_name(n, flag))
                .transpose()
        };
        let forced = named(&cli.format, "--format")?;
        let plan_as_json = cli.dry_run && forced == Some(Format::Json);
        let forced = forced.filter(|_| !plan_as_json);
        let output = match &cli.output {
            Some(path) => Some(Format::of_output(path, forced)?),
            None => forced,
        };
        let input = named(&cli.input_format, "--input-format")?;
        Ok(Formats {
            output,
            input,
            plan_as_json,
        })
    }
}

/// Opens every input and reads its headers, handing each to the early copy if there is one;
/// with `--stack`, inserts the new axis.
fn open_inputs(
    cli: &Cli,
    format: Option<Format>,
    mut early: Option<&mut EarlyCopy>,
) -> Result<Vec<Input>> {
    let open_files = source::raise_open_file_limit();
    // Inputs beyond a share of the open-file limit are closed after their header is read.
    let keep_open = (open_files.min(1 << 20) / 2).saturating_sub(32) as usize;
    let paths = input_paths(cli)?;
    // Every descriptor open at once: the inputs kept open, those opened ahead, a few more.
    let open_at_once = paths.len().min(keep_open) + input::PREFETCH_FILES + 64;
    source::reserve_file_descriptors((open_at_once as u64).min(open_files));
    // Small inputs are read whole while the early copy takes them; once it stops, reading
    // them whole is of no use. Shared with the thread that opens inputs ahead.
    let whole_up_to = AtomicU64::new(if early.is_some() { WHOLE_FILE_MAX } else { 0 });
    let mut spill = Spill::default();
    let mut head = Vec::new();
    let mut inputs = std::thread::scope(|scope| {
        let mut prefetch = Prefetch::start(scope, &paths, &whole_up_to);
        paths
            .iter()
            .enumerate()
            .map(|(index, path)| {
                let options = OpenOptions {
                    format,
                    keep_open: index < keep_open,
                    read_whole_up_to: whole_up_to.load(Ordering::Relaxed),
                };
                let fetched = prefetch.take_next();
                let input = Input::open(index + 1, path, options, &mut spill, &mut head, fetched)?;
                if let Some(early) = early.as_deref_mut() {
                    early.take(&input, &head);
                    if !early.taking() {
                        whole_up_to.store(0, Ordering::Relaxed);
                    }
                }
                prefetch.recycle(&mut head);
                Ok(input)
            })
            .collect::<Result<Vec<Input>>>()
    })?;
    if inputs.is_empty() {
        return Err(Error::refused(
            "nothing to join: the --files-from list names no inputs",
            "list one path per line (or NUL-separated with -0)",
        ));
    }
    if cli.stack {
        stack::insert_axis(&mut inputs, cli.axis)?;
    }
    Ok(inputs)
}

/// Checks and plans every output tensor, in the order `writer` lists them, and checks that
/// the output format can hold them.
fn plan<'a>(
    cli: &Cli,
    inputs: &'a [Input],
    spec: spec::Spec,
    format: Format,
    writer: &dyn Writer,
) -> Result<Vec<TensorJob<'a>>> {
    let cast = cli.cast.as_deref().map(cast_type).transpose()?;
    let job = job::build(inputs, &job_options(cli, spec, format, cast.as_ref()))?;
    if let Some(expected) = &cli.expect_shape {
        job::check_expected_shape(&job, expected)?;
    }
    let job = in_writer_order(job, writer);
    let described: Vec<OutTensor> = job.iter().map(|t| t.out.clone()).collect();
    writer.check(&described).map_err(|reason| {
        let target = cli.output.as_deref().unwrap_or(Path::new("the output"));
        let mut lines = reason.lines().map(str::to_string);
        let first = lines.next().unwrap_or_default();
        Error::Refused(vec![Refusal {
            headline: format!("cannot write {}: {first}", target.display()),
            details: lines.collect(),
            hint: None,
        }])
    })?;
    Ok(job)
}

/// Writes the output under a temporary name (or completes the early copy's), with progress,
/// and renames it into place once every input is checked unchanged.
fn write_and_commit(
    cli: &Cli,
    path: &Path,
    inputs: &[Input],
    job: &[TensorJob],
    writer: &mut dyn Writer,
    engine: &mut Engine,
    early: Option<early::Fitted>,
) -> Result<()> {
    let total = job.iter().map(|t| t.plan.bytes).sum();
    let progress = progress::start(total, if cli.quiet { When::Never } else { cli.progress });
    if let Some(early) = early {
        // The inputs it took were read whole, header and data in one read: nothing to
        // re-check.
        let taken = early.inputs();
        progress.bar.inc(early.bytes());
        let output = early.finish(&job[0], &progress.bar);
        progress.finish();
        let output = output?;
        for input in &inputs[taken..] {
            input.check_unchanged()?;
        }
        return output.commit();
    }
    let mut output = Output::create(path, cli.no_clobber)?;
    let described: Vec<OutTensor> = job.iter().map(|t| t.out.clone()).collect();
    let written = write(job, &described, writer, &mut output, &progress.bar, engine);
    progress.finish();
    written?;
    for input in inputs {
        input.check_unchanged()?;
    }
    output.commit()
}

fn job_options<'c>(
    cli: &'c Cli,
    spec: spec::Spec,
    format: Format,
    cast: Option<&'c DType>,
) -> job::JobOptions<'c> {
    job::JobOptions {
        cast,
        axis: cli.axis,
        spec,
        axis_for: &cli.axis_for,
        keep: &cli.keep,
        name: cli.name.as_deref(),
        output: format,
    }
}

/// The writer's options from the flags, refusing flags the output format has no use for.
fn write_options(cli: &Cli, format: Format, inputs: &[Input]) -> Result<WriteOptions> {
    let misplaced = |flag: &str, kind: &str| {
        Error::refused(
            format!("{flag} applies to {kind} outputs only"),
            format!("drop {flag}, or name the output with the {kind} extension"),
        )
    };
    if cli.compress && format != Format::Npz {
        return Err(misplaced("--compress", ".npz"));
    }
    if !cli.metadata.is_empty() && format != Format::SafeTensors {
        return Err(misplaced("--metadata", ".safetensors"));
    }
    if cli.json_form != format::json::JsonForm::default() && format != Format::Json {
        return Err(misplaced("--json-form", ".json"));
    }
    let mut metadata: Option<BTreeMap<String, String>> = inputs
        .first()
        .and_then(|input| input.metadata.clone())
        .map(|pairs| pairs.into_iter().collect());
    if !cli.metadata.is_empty() {
        metadata
            .get_or_insert_default()
            .extend(cli.metadata.iter().cloned());
    }
    Ok(WriteOptions {
        compress: cli.compress,
        json_form: cli.json_form,
        metadata,
    })
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
fn input_paths(cli: &Cli) -> Result<Vec<PathBuf>> {
    let mut paths = cli.inputs.clone();
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
/// Empty entries are skipped.
fn read_list(list: &Path, null: bool) -> Result<Vec<PathBuf>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    let read = if list.as_os_str() == STDIN {
        std::io::stdin().lock().read_to_end(&mut bytes)
    } else {
        std::fs::File::open(list).and_then(|mut f| f.read_to_end(&mut bytes))
    };
    read.map_err(|e| Error::io("read the file list", list, e))?;
    let separator = if null { b'\0' } else { b'\n' };
    bytes
        .split(|&b| b == separator)
        .filter(|entry| !entry.is_empty())
        .map(|entry| path_from_bytes(entry, list))
        .collect()
}

/// A path as a file list holds it: any bytes on Unix, UTF-8 text elsewhere.
fn path_from_bytes(bytes: &[u8], list: &Path) -> Result<PathBuf> {
    #[cfg(unix)]
    {
        let _ = list;
        use std::os::unix::ffi::OsStrExt;
        Ok(PathBuf::from(std::ffi::OsStr::from_bytes(bytes)))
    }
    #[cfg(not(unix))]
    std::str::from_utf8(bytes).map(PathBuf::from).map_err(|_| {
        let why = "it holds a path that is not UTF-8 text";
        Error::io("read the file list", list, std::io::Error::other(why))
    })
}

/// The job's tensors in the order the output format lists them.
fn in_writer_order<'a>(job: Vec<TensorJob<'a>>, writer: &dyn Writer) -> Vec<TensorJob<'a>> {
    let described: Vec<OutTensor> = job.iter().map(|t| t.out.clone()).collect();
    let mut slots: Vec<Option<TensorJob>> = job.into_iter().map(Some).collect();
    writer
        .order(&described)
        .into_iter()
        .filter_map(|index| slots.get_mut(index).and_then(Option::take))
        .collect()
}

/// Streams every tensor of the job into `sink` with `engine`, framed by the output format's
/// `writer`.
fn write(
    job: &[TensorJob],
    described: &[OutTensor],
    writer: &mut dyn Writer,
    sink: &mut dyn Sink,
    bar: &ProgressBar,
    engine: &mut Engine,
) -> Result<()> {
    let failed = |e, sink: &dyn Sink| Error::io("write the output", sink.name(), e);
    writer.start(sink, described).map_err(|e| failed(e, sink))?;
    for (index, tensor) in job.iter().enumerate() {
        writer
            .start_tensor(sink, &tensor.out)
            .map_err(|e| failed(e, sink))?;
        let mut data = writer.data_sink(sink);
        let mut counted = Counted {
            inner: data.as_mut(),
            bar,
        };
        engine.execute(index, tensor, &mut counted)?;
        drop(data);
        writer
            .end_tensor(sink, &tensor.out)
            .map_err(|e| failed(e, sink))?;
    }
    writer.finish(sink).map_err(|e| failed(e, sink))
}
