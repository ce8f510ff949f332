//! The join command's flow: open the inputs and read their headers, check the join rules
//! and plan every output tensor, then either report the plan (`--dry-run`) or write the
//! output's framing and stream the data with the chosen engine into a temporary file that is
//! committed over the target when complete. Only headers are read before the plan is whole,
//! so a refusal costs microseconds and writes nothing.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use indicatif::ProgressBar;

use crate::backend::Engine;
use crate::config::{Action, JoinConfig, PlanForm};
use crate::early::{self, EarlyCopy, WHOLE_FILE_MAX};
use crate::error::{Error, Result};
use crate::format::json::JsonForm;
use crate::format::{Format, OutTensor, WriteOptions, Writer};
use crate::input::{self, Input, OpenOptions, Prefetch, Spill};
use crate::job::{self, TensorJob};
use crate::output::{Output, Sink};
use crate::progress::{self, Counted};
use crate::{report, source, stack};

/// Runs the join `config` describes: open the inputs, check and plan every output tensor,
/// then either print the plan or write the output and commit it.
pub fn run(config: &JoinConfig) -> Result<()> {
    crate::format::npz::forget_stored_crcs();
    let mut early = EarlyCopy::for_run(config);
    let inputs = open_inputs(config, early.as_mut())?;
    // A dry run without an output plans as if the output were like the first input.
    let format = config.output.format.unwrap_or(inputs[0].format);
    let mut writer = format.writer(&write_options(config, format, &inputs)?);
    let job = plan(config, &inputs, format, writer.as_ref())?;
    let mut engine = Engine::choose(config.engine.backend, config.engine.adapter, &job)?;
    match (&config.output.path, config.action) {
        (Some(path), Action::Write) => {
            let early = early.and_then(|early| early.fits(&inputs, &job));
            let (writer, engine) = (writer.as_mut(), &mut engine);
            write_and_commit(config, path, &inputs, &job, writer, engine, early)
        }
        (_, action) => {
            let output = config.output.path.as_deref().zip(config.output.format);
            let report = match action {
                Action::DryRun(PlanForm::Json) => report::dry_run_json,
                _ => report::dry_run,
            };
            let (spec, axis) = (config.rules.spec, config.rules.axis);
            print!("{}", report(spec, &inputs, &job, axis, output, &engine));
            Ok(())
        }
    }
}

/// Opens every input and reads its headers, handing each to the early copy if there is one;
/// with `--stack`, inserts the new axis.
fn open_inputs(config: &JoinConfig, mut early: Option<&mut EarlyCopy>) -> Result<Vec<Input>> {
    let paths = &config.inputs;
    let open_files = source::raise_open_file_limit();
    // Inputs beyond a share of the open-file limit are closed after their header is read.
    let keep_open = (open_files.min(1 << 20) / 2).saturating_sub(32) as usize;
    // Every descriptor open at once: the inputs kept open, those opened ahead, a few more.
    let open_at_once = paths.len().min(keep_open) + input::PREFETCH_FILES + 64;
    source::reserve_file_descriptors((open_at_once as u64).min(open_files));
    // Small inputs are read whole while the early copy takes them; once it stops, reading
    // them whole is of no use. Shared with the thread that opens inputs ahead.
    let whole_up_to = AtomicU64::new(if early.is_some() { WHOLE_FILE_MAX } else { 0 });
    let mut spill = Spill::default();
    let mut head = Vec::new();
    let mut inputs = std::thread::scope(|scope| {
        let mut prefetch = Prefetch::start(scope, paths, &whole_up_to);
        paths
            .iter()
            .enumerate()
            .map(|(index, path)| {
                let options = OpenOptions {
                    format: config.input_format,
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
    if config.stack {
        stack::insert_axis(&mut inputs, config.rules.axis)?;
    }
    Ok(inputs)
}

/// Checks and plans every output tensor, in the order `writer` lists them, and checks that
/// the output format can hold them.
fn plan<'a>(
    config: &JoinConfig,
    inputs: &'a [Input],
    format: Format,
    writer: &dyn Writer,
) -> Result<Vec<TensorJob<'a>>> {
    let rules = &config.rules;
    let options = job::JobOptions {
        cast: rules.cast.as_ref(),
        axis: rules.axis,
        spec: rules.spec,
        axis_for: &rules.axis_for,
        keep: &rules.keep,
        name: rules.name.as_deref(),
        output: format,
    };
    let job = job::build(inputs, &options)?;
    if let Some(expected) = &rules.expect_shape {
        job::check_expected_shape(&job, expected)?;
    }
    let job = in_writer_order(job, writer);
    writer.check(&described(&job)).map_err(|mut refusal| {
        let target = config.output.path.as_deref();
        let target = target.unwrap_or(Path::new("the output")).display();
        refusal.headline = format!("cannot write {target}: {}", refusal.headline);
        Error::Refused(vec![refusal])
    })?;
    Ok(job)
}

/// The output tensors of `job`, as the writer sees them.
fn described(job: &[TensorJob]) -> Vec<OutTensor> {
    job.iter().map(|t| t.out.clone()).collect()
}

/// Writes the output under a temporary name (or completes the early copy's), with progress,
/// and commits it once every input is checked unchanged.
fn write_and_commit(
    config: &JoinConfig,
    path: &Path,
    inputs: &[Input],
    job: &[TensorJob],
    writer: &mut dyn Writer,
    engine: &mut Engine,
    early: Option<early::Fitted>,
) -> Result<()> {
    let total = job.iter().map(|t| t.plan.bytes).sum();
    let progress = progress::start(total, config.progress);
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
    let mut output = Output::create(path, config.output.no_clobber)?;
    let written = write(job, writer, engine, &mut output, &progress.bar);
    progress.finish();
    written?;
    for input in inputs {
        input.check_unchanged()?;
    }
    output.commit()
}

/// The writer's options from the configuration, refusing options the output format has no
/// use for.
fn write_options(config: &JoinConfig, format: Format, inputs: &[Input]) -> Result<WriteOptions> {
    let options = &config.output;
    let misplaced = |flag: &str, kind: &str| {
        Error::refused(
            format!("{flag} applies to {kind} outputs only"),
            format!("drop {flag}, or name the output with the {kind} extension"),
        )
    };
    if options.compress && format != Format::Npz {
        return Err(misplaced("--compress", ".npz"));
    }
    if !options.metadata.is_empty() && format != Format::SafeTensors {
        return Err(misplaced("--metadata", ".safetensors"));
    }
    if options.json_form != JsonForm::default() && format != Format::Json {
        return Err(misplaced("--json-form", ".json"));
    }
    let mut metadata: Option<BTreeMap<String, String>> = inputs
        .first()
        .and_then(|input| input.metadata.clone())
        .map(|pairs| pairs.into_iter().collect());
    if !options.metadata.is_empty() {
        metadata
            .get_or_insert_default()
            .extend(options.metadata.iter().cloned());
    }
    Ok(WriteOptions {
        compress: options.compress,
        json_form: options.json_form,
        metadata,
    })
}

/// The job's tensors in the order the output format lists them.
fn in_writer_order<'a>(job: Vec<TensorJob<'a>>, writer: &dyn Writer) -> Vec<TensorJob<'a>> {
    let order = writer.order(&described(&job));
    let mut slots: Vec<Option<TensorJob>> = job.into_iter().map(Some).collect();
    order
        .into_iter()
        .filter_map(|index| slots.get_mut(index).and_then(Option::take))
        .collect()
}

/// Streams every tensor of the job into `sink` with `engine`, framed by the output format's
/// `writer`.
fn write(
    job: &[TensorJob],
    writer: &mut dyn Writer,
    engine: &mut Engine,
    sink: &mut dyn Sink,
    bar: &ProgressBar,
) -> Result<()> {
    let failed = |e, sink: &dyn Sink| Error::io("write the output", sink.name(), e);
    writer
        .start(sink, &described(job))
        .map_err(|e| failed(e, sink))?;
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
