//! tjoin joins tensors stored in files along one axis: the ONNX Concat / DirectML Join
//! operator as a command-line tool for files far larger than memory.
//!
//! The flow of one run (`run`): open the inputs and read their headers, check the join
//! rules and plan every output tensor, then write the output's framing and stream the data
//! with the copy engine into a temporary file that is renamed over the target when complete.
#![deny(missing_docs)]
#![deny(unsafe_code)]

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

use cli::Cli;
use error::Refusal;
use format::{Format, OutTensor, Writer};
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
    let format = cli.output.as_deref().map(Format::of_output).transpose()?;
    let mut inputs = cli
        .inputs
        .iter()
        .enumerate()
        .map(|(index, path)| Input::open(index + 1, path))
        .collect::<Result<Vec<Input>>>()?;
    if cli.stack {
        stack::insert_axis(&mut inputs, cli.axis)?;
    }
    let spec = cli.spec.unwrap_or_default();
    let job = job::build(&inputs, spec, cli.axis)?;
    if let Some(expected) = &cli.expect_shape {
        job::check_expected_shape(&job, expected)?;
    }
    let mut writer = format.map(Format::writer);
    let described: Vec<OutTensor> = job.iter().map(|t| t.out.clone()).collect();
    if let (Some(writer), Some(path)) = (&writer, &cli.output) {
        writer.check(&described).map_err(|reason| {
            Error::Refused(vec![Refusal {
                headline: format!("cannot write {}: {reason}", path.display()),
                details: Vec::new(),
                hint: None,
            }])
        })?;
    }
    let (Some(writer), Some(path), false) = (writer.as_mut(), &cli.output, cli.dry_run) else {
        print!(
            "{}",
            report::dry_run(spec, &job, cli.axis, cli.output.as_deref())
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
    );
    progress.finish();
    written?;
    for input in &inputs {
        input.check_unchanged()?;
    }
    output.commit()
}

/// Streams every tensor of the job into `sink`, framed by the output format's `writer`.
fn write(
    job: &[TensorJob],
    described: &[OutTensor],
    writer: &mut dyn Writer,
    sink: &mut dyn Sink,
    bar: &ProgressBar,
) -> Result<()> {
    let failed = |e, sink: &dyn Sink| Error::io("write the output", sink.name(), e);
    writer.start(sink, described).map_err(|e| failed(e, sink))?;
    for tensor in job {
        writer
            .start_tensor(sink, &tensor.out)
            .map_err(|e| failed(e, sink))?;
        let mut data = writer.data_sink(sink);
        let mut counted = Counted {
            inner: data.as_mut(),
            bar,
        };
        copy::execute(&tensor.plan, &tensor.sources, &mut counted)?;
        drop(data);
        writer
            .end_tensor(sink, &tensor.out)
            .map_err(|e| failed(e, sink))?;
    }
    writer.finish(sink).map_err(|e| failed(e, sink))
}
