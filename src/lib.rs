//! tjoin joins tensors stored in files along one axis: the ONNX Concat / DirectML Join
//! operator as a command-line tool for files far larger than memory.
//!
//! The flow of one run (`run`): open the inputs and read their headers, check the join
//! rules and plan every output tensor, then write the output's framing and stream the data
//! with the copy engine into a temporary file that is renamed over the target when complete.
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod backend;
pub mod cli;
pub mod copy;
pub mod dtype;
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
pub mod stack;

pub use error::{Error, ExitCode, Result};

use backend::Engine;
use cli::Cli;
use error::Refusal;
use std::collections::BTreeMap;

use format::{Format, OutTensor, WriteOptions, Writer};
use indicatif::ProgressBar;
use input::Input;
use job::TensorJob;
use output::{Output, Sink};
use progress::{Counted, When};

/// Runs the join the command line asks for.
pub fn run(cli: &Cli) -> Result<()> {
    if let Some(kind) = cli.generate {
        let mut stdout = std::io::stdout().lock();
        return generate::generate(kind, &mut stdout)
            .map_err(|e| Error::io("write", std::path::Path::new("standard output"), e));
    }
    let output_format = cli.output.as_deref().map(Format::of_output).transpose()?;
    let mut inputs = cli
        .inputs
        .iter()
        .enumerate()
        .map(|(index, path)| Input::open(index + 1, path))
        .collect::<Result<Vec<Input>>>()?;
    if cli.stack {
        stack::insert_axis(&mut inputs, cli.axis)?;
    }
    // A dry run without an output plans as if the output were like the first input.
    let format = output_format.unwrap_or(inputs[0].format);
    let options = write_options(cli, format, &inputs)?;
    let spec = cli.spec.unwrap_or_default();
    let job = job::build(&inputs, &job_options(cli, spec, format))?;
    if let Some(expected) = &cli.expect_shape {
        job::check_expected_shape(&job, expected)?;
    }
    let mut writer = format.writer(&options);
    let job = in_writer_order(job, writer.as_ref());
    let described: Vec<OutTensor> = job.iter().map(|t| t.out.clone()).collect();
    let target = cli
        .output
        .as_deref()
        .unwrap_or(std::path::Path::new("the output"));
    writer.check(&described).map_err(|reason| {
        let mut lines = reason.lines().map(str::to_string);
        let first = lines.next().unwrap_or_default();
        Error::Refused(vec![Refusal {
            headline: format!("cannot write {}: {first}", target.display()),
            details: lines.collect(),
            hint: None,
        }])
    })?;
    let mut engine = Engine::choose(cli.backend, cli.dml_adapter, &job)?;
    let (Some(path), false) = (&cli.output, cli.dry_run) else {
        let output = cli.output.as_deref().zip(output_format);
        print!(
            "{}",
            report::dry_run(spec, &inputs, &job, cli.axis, output, &engine)
        );
        return Ok(());
    };
    let mut output = Output::create(path, cli.no_clobber)?;
    let total = job.iter().map(|t| t.plan.bytes).sum();
    let progress = progress::start(total, if cli.quiet { When::Never } else { cli.progress });
    let written = write(
        &job,
        &described,
        writer.as_mut(),
        &mut output,
        &progress.bar,
        &mut engine,
    );
    progress.finish();
    written?;
    for input in &inputs {
        input.check_unchanged()?;
    }
    output.commit()
}

fn job_options(cli: &Cli, spec: spec::Spec, format: Format) -> job::JobOptions<'_> {
    job::JobOptions {
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
        Error::Refused(vec![Refusal {
            headline: format!("{flag} applies to {kind} outputs only"),
            details: Vec::new(),
            hint: Some(format!(
                "drop {flag}, or name the output with the {kind} extension"
            )),
        }])
    };
    if cli.compress && format != Format::Npz {
        return Err(misplaced("--compress", ".npz"));
    }
    if !cli.metadata.is_empty() && format != Format::SafeTensors {
        return Err(misplaced("--metadata", ".safetensors"));
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
        metadata,
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
