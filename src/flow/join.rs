//! The join command's flow: open the inputs and read their headers, check the join rules
//! and plan every output tensor, then either report the plan (`--dry-run`) or write the
//! output's framing and stream the data with the chosen engine into a temporary file that is
//! committed over the target when complete. Only headers are read before the plan is whole,
//! so a refusal costs microseconds and writes nothing.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use indicatif::ProgressBar;

use crate::backend::Engine;
use crate::config::{Action, JoinConfig, OpenConfig, OutputKind, PlanForm, Target};
use crate::engine::early::{self, EarlyCopy, WHOLE_FILE_MAX};
use crate::error::{Error, Result};
use crate::format::{OutTensor, Writer};
use crate::input::{self, Input, OpenOptions, Prefetch};
use crate::output::progress::{self, Counted};
use crate::output::shards::{self, NewFolder, ShardPlan};
use crate::output::{Output, OutputSet, Sink};
use crate::plan::job::{self, JobOptions, TensorJob};
use crate::plan::stack;
use crate::report::{PlanReport, Warning, Warnings};
use crate::sys;
use crate::sys::spill::Spill;

/// Runs the join `config` describes: open the inputs, check and plan every output tensor,
/// then either print the plan or write the output and commit it. The one function of the
/// join that sees the whole config: each step below is handed its part of it.
pub fn run(config: &JoinConfig) -> Result<()> {
    let mut early = config.early_copy().map(EarlyCopy::new);
    let inputs = open_inputs(&config.open_config(), early.as_mut())?;
    let target = config.target();
    let mut warnings = Warnings::new(config.quiet);
    for input in &inputs {
        if let Some(warning) = input.shards().and_then(Warning::total_size) {
            warnings.push(warning);
        }
    }
    // A dry run without an output plans as if the output were like the first input.
    // A format tjoin only reads (a checkpoint) plans the output as safetensors.
    let format = target.format.unwrap_or(inputs[0].format).planned_output();
    let metadata = inputs.first().and_then(Input::metadata);
    let mut writer = format.writer(&config.output.write_options(format, metadata)?)?;
    let rules = &config.rules;
    let matcher = rules.matcher();
    let reference = rules.reference()?;
    let options = rules.job_options(&matcher, reference.as_ref(), format);
    let expected = rules.expect_shape.as_deref();
    let job = plan(
        &options,
        expected,
        &target,
        &inputs,
        writer.as_ref(),
        &mut warnings,
    )?;
    let named = rules.name.is_some();
    let shards = shard_plan(
        &target,
        named,
        &inputs,
        &job,
        writer.as_ref(),
        &mut warnings,
    )?;
    let chosen = config.engine();
    let mut engine = Engine::choose(chosen.backend, chosen.adapter, &job)?;
    let finished = match (target.kind, config.action, shards.as_ref()) {
        // A sharded target has its shard plan.
        (OutputKind::Sharded { .. }, Action::Write, Some(shards)) => {
            let (writer, engine) = (writer.as_mut(), &mut engine);
            write_shards(&target, shards, &inputs, &job, writer, engine)?
        }
        (OutputKind::File(path), Action::Write, _) => {
            let early = early.and_then(|early| early.fits(&inputs, &job));
            let (writer, engine) = (writer.as_mut(), &mut engine);
            write_checked(&target, path, &inputs, &job, writer, engine, early)?
        }
        (_, action, shards) => {
            let output = target.path().zip(target.format);
            let mut report = PlanReport::new(&options, &inputs, &job, output, &engine, shards);
            report.warnings = warnings.into_vec();
            let form = match action {
                Action::DryRun(form) => form,
                // A write needs -o (clap requires it without --dry-run); without one, the
                // plan as text.
                Action::Write => PlanForm::Text,
            };
            return report.print(form);
        }
    };
    // The output may replace one of the inputs, which Windows refuses while the input is
    // mapped or open: every map and handle of the inputs goes before the commit.
    drop((engine, job));
    drop(inputs);
    finished.commit()
}

/// A complete output whose inputs were all checked unchanged: only its commit remains.
struct Finished {
    output: Complete,
    progress: progress::Progress,
}

enum Complete {
    One(Output),
    /// A sharded output, and the folder made for it, which the commit keeps.
    Set(OutputSet, NewFolder),
}

impl Finished {
    /// Puts the output in place, then prints the summary.
    fn commit(self) -> Result<()> {
        match self.output {
            Complete::One(output) => output.commit()?,
            Complete::Set(set, folder) => {
                set.commit()?;
                folder.keep();
            }
        }
        self.progress.summary();
        Ok(())
    }
}

/// The shards of a sharded output, their tensors in the order each file lists them: the job's
/// (the first input's) order split by huggingface_hub's rule, each shard then in the writer's
/// order. Warns of a single-file checkpoint that loaders would read instead of the new set.
/// `named`: `--name` names the tensor.
fn shard_plan(
    target: &Target,
    named: bool,
    inputs: &[Input],
    job: &[TensorJob],
    writer: &dyn Writer,
    warnings: &mut Warnings,
) -> Result<Option<ShardPlan>> {
    let OutputKind::Sharded { path, set: sharded } = target.kind else {
        return Ok(None);
    };
    check_named(path, &sharded.folder, named, inputs)?;
    let name = sharded.name.clone().unwrap_or_else(|| {
        let index = inputs[0].shards();
        index.map(|s| s.name.clone()).unwrap_or_default()
    });
    let sizes: Vec<u64> = job.iter().map(|t| t.out.bytes).collect();
    let (folder, max) = (&sharded.folder, sharded.max_shard_size);
    let mut plan = match &sharded.names_from {
        Some(index) => {
            let names: Vec<&str> = job.iter().map(|t| t.out.name.as_str()).collect();
            let (from_index, files) = shards::names_from(index, &names)?;
            let name = sharded.name.clone().unwrap_or(from_index);
            ShardPlan::assigned(folder, name, max, &sizes, files, true)?
        }
        None => ShardPlan::new(folder, name, max, &sizes)?,
    };
    for file in &mut plan.files {
        let described: Vec<OutTensor> = file.tensors.iter().map(|&t| job[t].out.clone()).collect();
        let order = writer.order(&described);
        file.tensors = order.into_iter().map(|at| file.tensors[at]).collect();
    }
    if target.no_clobber {
        plan.check_no_clobber()?;
    }
    if let Some(file) = plan.shadowing_file() {
        warnings.push(Warning::Shadowing { file });
    }
    Ok(Some(plan))
}

/// Refuses a sharded output (a folder, or an index) for tensors that have no names (.npy and
/// JSON files each hold one, unnamed) when `--name` gives none either: a checkpoint's files
/// are found by their tensors' names, and `-o existing_dir` was most likely meant as a file in
/// that folder. `output` is the path given, `folder` the set's, `named`: `--name` names the
/// tensor.
fn check_named(output: &Path, folder: &Path, named: bool, inputs: &[Input]) -> Result<()> {
    let containers = inputs.iter().any(|i| i.format.is_container());
    if containers || named {
        return Ok(());
    }
    // A file in the folder, when there is one to write it in.
    let file = match Some(folder).filter(|f| f.is_dir()) {
        Some(folder) => folder.join("out.npy"),
        None => Path::new("out.npy").to_path_buf(),
    };
    Err(Error::refused(
        format!(
            "-o {}: a folder or an index as the output is a sharded checkpoint of named \
             tensors, but the inputs' tensors have no names (.npy and JSON files hold one \
             unnamed tensor each)",
            crate::messages::path(output)
        ),
        format!(
            "name a file to write, such as -o {}, or name the tensor with --name to write it \
             as a safetensors checkpoint in the folder",
            crate::messages::path(&file)
        ),
    ))
}

/// Writes every shard of a sharded output and its index under temporary names and checks
/// every input unchanged; the commit puts them in place together (the index last), removing
/// the previous set's shards the new index does not list. On any failure the folder is left
/// as it was, and a folder this run created is removed again.
fn write_shards(
    target: &Target,
    shards: &ShardPlan,
    inputs: &[Input],
    job: &[TensorJob],
    writer: &mut dyn Writer,
    engine: &mut Engine,
) -> Result<Finished> {
    let total = job.iter().map(|t| t.plan.bytes).sum();
    let progress = progress::start(total, target.progress, &shards.folder);
    let folder = shards.prepare_folder()?;
    let mut set = shards.members(target.no_clobber)?;
    let mut written = Ok(());
    for (file, member) in shards.files.iter().zip(set.members_mut()) {
        written = write(job, &file.tensors, writer, engine, member, &progress.bar);
        if written.is_err() {
            break;
        }
    }
    progress.finish();
    written?;
    if shards.index.is_some() {
        let names: Vec<&str> = job.iter().map(|t| t.out.name.as_str()).collect();
        shards::write_index(&mut set, &shards.index_text(&names))?;
    }
    for input in inputs {
        input.check_unchanged()?;
    }
    Ok(Finished {
        output: Complete::Set(set, folder),
        progress,
    })
}

/// Opens every input and reads its headers, handing each to the early copy if there is one;
/// with `--stack`, inserts the new axis. An append (`src/flow/append.rs`) opens its inputs here
/// too.
pub(crate) fn open_inputs(
    config: &OpenConfig,
    mut early: Option<&mut EarlyCopy>,
) -> Result<Vec<Input>> {
    let paths = config.paths;
    if !config.any_order {
        crate::plan::ranks::check_order(paths)?;
    }
    let open_files = sys::raise_open_file_limit();
    // Inputs beyond a share of the open-file limit are closed after their header is read.
    let keep_open = (open_files.min(1 << 20) / 2).saturating_sub(32) as usize;
    // Every descriptor open at once: the inputs kept open, those opened ahead, a few more.
    let open_at_once = paths.len().min(keep_open) + input::PREFETCH_FILES + 64;
    sys::reserve_file_descriptors((open_at_once as u64).min(open_files));
    // Small inputs are read whole while the early copy takes them; once it stops, reading
    // them whole is of no use. Shared with the thread that opens inputs ahead.
    let whole_up_to = AtomicU64::new(if early.is_some() { WHOLE_FILE_MAX } else { 0 });
    let mut spill = Spill::default();
    let mut head = Vec::new();
    // Files held open so far: a sharded checkpoint holds one per shard.
    let mut held = 0;
    // Collected into room for every input at once: growing by doubling would hold two
    // copies of the list for a moment, which for 100,000 inputs is tens of MiB.
    let mut inputs = Vec::with_capacity(paths.len());
    std::thread::scope(|scope| {
        let mut prefetch = Prefetch::start(scope, paths, &whole_up_to);
        let opened = paths.iter().enumerate().map(|(index, path)| {
            let options = OpenOptions {
                format: config.format,
                keep_open: keep_open.saturating_sub(held),
                read_whole_up_to: whole_up_to.load(Ordering::Relaxed),
            };
            let fetched = prefetch.take_next();
            let input = Input::open(
                index + 1,
                Arc::clone(path),
                options,
                &mut spill,
                &mut head,
                fetched,
            )?;
            held += input.open_files();
            if let Some(early) = early.as_deref_mut() {
                early.take(&input, &head);
                if !early.taking() {
                    whole_up_to.store(0, Ordering::Relaxed);
                }
            }
            prefetch.recycle(&mut head);
            Ok(input)
        });
        for input in opened {
            inputs.push(input?);
        }
        Ok::<_, Error>(())
    })?;
    if inputs.is_empty() {
        return Err(Error::refused(
            "nothing to join: the --files-from list names no inputs",
            "list one path per line (or NUL-separated with -0)",
        ));
    }
    // The files of a distributed checkpoint are one input, whose tensors are blocks.
    let mut inputs = input::dcp::gather(inputs)?;
    if config.stack {
        stack::insert_axis(&mut inputs, config.axis)?;
    }
    Ok(inputs)
}

/// Checks and plans every output tensor by `options` into `target`, in the order `writer` lists
/// them, and checks that the output format can hold them and that they have the shape
/// `--expect-shape` gives (`expected`). An append plans its grown file here too, so that it
/// follows the join's rules to the letter.
pub(crate) fn plan<'a>(
    options: &JobOptions,
    expected: Option<&[u64]>,
    target: &Target,
    inputs: &'a [Input],
    writer: &dyn Writer,
    warnings: &mut Warnings,
) -> Result<Vec<TensorJob<'a>>> {
    if !options.strict {
        for described in job::unmatched_rules(inputs, options) {
            warnings.push(Warning::UnmatchedRule(described));
        }
    }
    let output = target.path();
    let job = job::build(inputs, options)
        .map_err(|e| input::sharded::explain_disjoint(inputs, output, e))?;
    if let Some(expected) = expected {
        job::check_expected_shape(&job, expected)?;
    }
    if let Some(reference) = options.like {
        let checked: Vec<_> = job.iter().map(|t| t.checked(inputs.len())).collect();
        reference.check(&checked, options.rules.rules())?;
    }
    // A sharded output is split in the job order first, each shard then in the writer order.
    let job = if target.is_sharded() {
        job
    } else {
        in_writer_order(job, writer)
    };
    writer.check(&described(&job)).map_err(|mut refusal| {
        let target = crate::messages::path(output.unwrap_or(Path::new("the output")));
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
/// and checks every input unchanged. `path` is `target`'s file.
fn write_checked(
    target: &Target,
    path: &Path,
    inputs: &[Input],
    job: &[TensorJob],
    writer: &mut dyn Writer,
    engine: &mut Engine,
    early: Option<early::Fitted>,
) -> Result<Finished> {
    let total = job.iter().map(|t| t.plan.bytes).sum();
    let progress = progress::start(total, target.progress, path);
    let output = if let Some(early) = early {
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
        output
    } else {
        let mut output = Output::create(path, target.no_clobber)?;
        let all: Vec<usize> = (0..job.len()).collect();
        let written = write(job, &all, writer, engine, &mut output, &progress.bar);
        progress.finish();
        written?;
        for input in inputs {
            input.check_unchanged()?;
        }
        output
    };
    Ok(Finished {
        output: Complete::One(output),
        progress,
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

/// Streams the tensors `order` lists (indexes into the job) into `sink` with `engine`, framed
/// by the output format's `writer`. A split (`src/flow/split.rs`) writes each output here.
pub(crate) fn write(
    job: &[TensorJob],
    order: &[usize],
    writer: &mut dyn Writer,
    engine: &mut Engine,
    sink: &mut dyn Sink,
    bar: &ProgressBar,
) -> Result<()> {
    let failed = |e, sink: &dyn Sink| Error::io("write the output", sink.name(), e);
    let described: Vec<OutTensor> = order.iter().map(|&t| job[t].out.clone()).collect();
    writer
        .start(sink, &described)
        .map_err(|e| failed(e, sink))?;
    for &index in order {
        let tensor = &job[index];
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
