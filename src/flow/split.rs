//! The split command's flow (`tjoin split`): open the input and read its headers, plan every
//! output's tensors as slices of the input's (`plan::slices`), check that every output's
//! format can hold them, then either report the plan (`--dry-run`) or write every output
//! under a temporary name and commit them together: a failure or an interrupt leaves none of
//! them, a success all. Outputs named by URL are uploaded as they are written, one output
//! after another (`in_lockstep` says why), and completed together at the commit
//! (`output::several`).

use std::path::{Path, PathBuf};

use crate::backend::split_engine::SplitEngine;
use crate::backend::{Backend, Engine};
use crate::config::{Action, Cut, OpenConfig, SplitConfig, SplitOutput, Target, When};
use crate::error::{Error, Result};
use crate::format::Sink;
use crate::format::{Format, OutTensor, Writer};
use crate::output::folders::Folders;
use crate::output::job::Step;
use crate::output::kind::{Planned, Tensors};
use crate::output::progress::{self, Counted};
use crate::output::several::{Opened, Several};
use crate::output::upload;
use crate::plan::complete;
use crate::plan::heads::Heads;
use crate::plan::rules::{self, Matcher};
use crate::plan::slices::{self, SplitOptions};
use crate::plan::tensor_job::TensorJob;
use crate::report::SplitReport;
use crate::sys::{Accept, Limit, read_text};

use super::join::workers::{self, Asked, Part, Planning};

/// One output of a split, planned: its tensors, and its files as its kind plans them.
struct PlannedOutput<'a> {
    /// Its tensors, in the writer's order (a file's) or the job's (a sharded set's).
    jobs: Vec<TensorJob<'a>>,
    /// Its format, and its writer.
    format: Format,
    writer: Box<dyn Writer>,
    /// The files it writes, each with its tensors (indexes into `jobs`) in the order the
    /// file lists them: one for a file; the shards and their index for a sharded checkpoint.
    planned: Planned,
}

/// Runs the split `config` describes.
pub fn run(config: &SplitConfig) -> Result<()> {
    if let Some(Step::Abandon(n)) = config.job {
        return abandon(config, n);
    }
    let open = OpenConfig {
        paths: std::slice::from_ref(&config.input),
        format: config.input_format,
        out_of_order: None,
        stack: false,
        axis: None,
    };
    let inputs = super::join::open_inputs(&open, None)?;
    let input = &inputs[0];
    let targets: Vec<Target> = config.outputs.iter().map(|o| config.target(o)).collect();
    let formats = config
        .outputs
        .iter()
        .zip(&targets)
        .map(|(output, target)| match target.kind.format() {
            Some(format) => Ok(format),
            None => Format::of_output(&output.path, target.format),
        })
        .collect::<Result<Vec<Format>>>()?;
    let matcher = Matcher::new(&config.tensor_rules);
    check_rules_match(input, &matcher)?;
    let heads = heads(config)?;
    let options = SplitOptions {
        cut: &config.cut,
        axis: config.axis,
        rules: &matcher,
        formats: &formats,
        heads: heads.as_ref(),
        spec: config.spec,
    };
    let jobs = slices::build(input, &options)?;
    let mut planned = Vec::with_capacity(formats.len());
    for (rank, ((output, &format), jobs)) in
        config.outputs.iter().zip(&formats).zip(jobs).enumerate()
    {
        let target = (output, &targets[rank]);
        planned.push(plan_output(config, input, (rank, target), format, jobs)?);
    }
    // The engine, chosen (and DirectML's plans made) before anything is written.
    let mut engine = choose_engine(config, &planned)?;
    if let Some(step) = config.job {
        // `--dry-run` shows the shares; `--print-plan` prints the plan with them once the
        // step is done.
        let form = match (step, config.action) {
            (Step::Shares(_), Action::DryRun(form)) => Some(form),
            (Step::Shares(_), _) => None,
            _ => config.print_plan,
        };
        let report = form.map(|form| (report(config, input, &planned, heads, &engine), form));
        return run_job(config, step, &inputs, &mut planned, report);
    }
    if let Action::DryRun(form) = config.action {
        return report(config, input, &planned, heads, &engine).print(form);
    }
    // `--print-plan`: the plan is made now, printed once the outputs are in place.
    let carried_out = config.print_plan.map(|form| {
        let mut report = report(config, input, &planned, heads, &engine);
        report.written = true;
        (report, form)
    });
    let several = Several::new(
        planned.iter().map(|p| &p.planned).collect(),
        config.output.no_clobber,
    );
    several.check_no_clobber()?;
    if several.uploaded() {
        check_input_kept(input, &several.targets())?;
    }
    let total = planned
        .iter()
        .flat_map(|p| &p.jobs)
        .map(|t| t.plan.bytes)
        .sum();
    let paths = several.targets();
    let files: Vec<&Path> = paths.iter().map(|p| p.as_path()).collect();
    let progress = progress::start_all(total, config.progress, &files);
    let folders = make_folders(&targets)?;
    let described: Vec<Vec<OutTensor>> = planned.iter().map(|p| described(&p.jobs)).collect();
    let described: Vec<&[OutTensor]> = described.iter().map(Vec::as_slice).collect();
    let mut set = several.open_outputs(&described)?;
    drop(several);
    let compress = config.output.compress;
    let written = write_all(&mut planned, &mut set, compress, &mut engine, &progress.bar);
    progress.finish();
    written?;
    input.check_unchanged()?;
    // An output may replace the input, which Windows refuses while the input is mapped or
    // open: every map and handle goes before the commit.
    drop(planned);
    drop(inputs);
    set.commit()?;
    folders.keep();
    progress.summary();
    match carried_out {
        Some((report, form)) => report.print(form),
        None => Ok(()),
    }
}

/// Abandons the job of `n` workers over the outputs `config` names: its folder is the first
/// output's (a sharded output's own); a sharded output's data files are in its folder.
fn abandon(config: &SplitConfig, n: u32) -> Result<()> {
    let first = config.outputs.first();
    let folder = |o: &SplitOutput| o.sharded.as_ref().map(|s| s.folder.clone());
    let more = config.outputs.iter().filter_map(folder).collect();
    let path = first.map(|output| output.path.as_path());
    let first = first
        .and_then(|o| o.sharded.as_ref())
        .map(|s| s.folder.as_path());
    let quiet = config.progress == When::Never;
    workers::abandon_in(path, first, more, n, quiet)
}

/// Runs `step` of a job of N workers over the planned outputs (`src/flow/join/workers/`):
/// outputs that are files, all in one folder, or sharded outputs, each in its own folder;
/// `carried_out` is the plan `--dry-run` or `--print-plan` prints with the workers' shares
/// (once the step is done).
fn run_job(
    config: &SplitConfig,
    step: Step,
    inputs: &[crate::input::Input],
    planned: &mut [PlannedOutput],
    carried_out: Option<(SplitReport, crate::config::PlanForm)>,
) -> Result<()> {
    let parts = planned
        .iter_mut()
        .map(|o| Part {
            planned: &o.planned,
            job: &o.jobs,
            writer: o.writer.as_mut(),
            format: o.format,
        })
        .collect();
    let planning = Planning { parts, inputs };
    let asked = Asked {
        no_clobber: config.output.no_clobber,
        part_size: config.output.part_size,
        progress: config.progress,
        quiet: config.progress == When::Never,
    };
    let shares = match step {
        Step::Shares(n) => workers::share_report(planning, n, asked.part_size)?,
        _ => workers::run_step(&asked, step, planning, None)?,
    };
    match carried_out {
        Some((mut report, form)) => {
            report.written = matches!(step, Step::Commit(_));
            report.workers = Some(shares);
            report.print(form)
        }
        None => Ok(()),
    }
}

/// The most bytes of a config.json tjoin reads: a model's is a few KiB.
const CONFIG_LIMIT: Limit = Limit {
    bytes: 1 << 20,
    of: "a model's config.json",
    advice: "give the heads with --heads Q:KV instead",
};

/// The model's attention heads for a rank split: `--heads`, or those of the config.json
/// beside the input (in its folder, or the folder named), if there is one. A config.json
/// that cannot be read is refused, naming it. `None` for other splits, or when no
/// config.json is there.
fn heads(config: &SplitConfig) -> Result<Option<Heads>> {
    if !matches!(config.cut, Cut::Ranks(ranks) if ranks > 1) {
        return Ok(None);
    }
    if let Some((query, key_value)) = config.heads {
        return Ok(Some(Heads {
            query,
            key_value,
            head_dim: None,
            from: "--heads".to_string(),
        }));
    }
    let input: &Path = &config.input;
    let folder = if input.is_dir() {
        input.to_path_buf()
    } else {
        // FILE:NAME names one tensor of FILE.
        let text = input.to_string_lossy();
        let file = match text.rsplit_once(':') {
            Some((file, _)) if !input.exists() => PathBuf::from(file),
            _ => input.to_path_buf(),
        };
        file.parent().map(Path::to_path_buf).unwrap_or_default()
    };
    let path = folder.join("config.json");
    if std::fs::symlink_metadata(&path).is_err() {
        return Ok(None);
    }
    let named = crate::messages::path(&path);
    let text = read_text(&path, &CONFIG_LIMIT, Accept::Regular).map_err(|e| e.to_string());
    let heads =
        text.and_then(|text| crate::plan::heads::from_config(&text, &path.display().to_string()));
    heads.map(Some).map_err(|why| {
        Error::refused(
            format!("cannot read the model's attention heads from {named}: {why}"),
            "fix it, or give the heads with --heads Q:KV (num_attention_heads and \
             num_key_value_heads)",
        )
    })
}

/// Plans the output `output` (the `index`-th, from 0, going to `target`) in `format` of the
/// tensors `jobs`: a file,
/// its tensors in the writer's order, or a sharded checkpoint (`DIR/`), its tensors in shards
/// of at most `--max-shard-size` in the input's order, each shard in the writer's order. A
/// safetensors output records its place among the outputs and their count (N of `--ranks N`
/// or `--parts N`) in its `__metadata__`, which a merge reads to prove itself complete
/// (`plan::complete`).
fn plan_output<'a>(
    config: &SplitConfig,
    input: &crate::input::Input,
    (index, (output, target)): (usize, (&SplitOutput, &Target)),
    format: Format,
    jobs: Vec<TensorJob<'a>>,
) -> Result<PlannedOutput<'a>> {
    let path = output.path.as_path();
    let mut options = config.output.clone();
    if format == Format::SafeTensors {
        options.metadata.extend([
            (complete::RANK_KEY.to_string(), index.to_string()),
            (
                complete::RANKS_KEY.to_string(),
                config.cut.outputs().to_string(),
            ),
        ]);
    }
    options.sharded.clone_from(&output.sharded);
    let carried = complete::without_rank_records(input.metadata());
    let writer = format.writer(&options.write_options(format, carried.as_deref())?)?;
    let kind = target.kind;
    let in_job_order = described(&jobs);
    let jobs = kind.job_order(jobs, &in_job_order, writer.as_ref());
    let described = described(&jobs);
    writer.check(&described).map_err(|mut refusal| {
        let target = crate::messages::path(path);
        refusal.headline = format!("cannot write {target}: {}", refusal.headline);
        Error::Refused(vec![refusal])
    })?;
    let tensors = Tensors {
        described: &described,
        // A split names an unnamed tensor itself (`plan::job::DEFAULT_NAME`), and its
        // sharded outputs are asked for by a trailing `/`, never by an existing folder's
        // name: the refusal of unnamed tensors in a folder is not for it.
        named: true,
        set_name: input.shards().map(|set| &set.name),
        no_clobber: target.no_clobber,
        part_size: config.output.part_size,
    };
    let planned = kind.plan(&tensors, writer.as_ref())?;
    Ok(PlannedOutput {
        jobs,
        format,
        writer,
        planned,
    })
}

/// The output tensors of `jobs`, as the writer sees them.
fn described(jobs: &[TensorJob]) -> Vec<OutTensor> {
    jobs.iter().map(|t| t.out.clone()).collect()
}

/// The plan report: every file of every output, with its tensors; the heads a rank split
/// was checked by, the engine's note and the rules of `--spec`.
fn report(
    config: &SplitConfig,
    input: &crate::input::Input,
    planned: &[PlannedOutput],
    heads: Option<Heads>,
    engine: &SplitEngine,
) -> SplitReport {
    let mut files = Vec::new();
    for output in planned {
        let format = output.format.name();
        for file in output.planned.files() {
            let jobs: Vec<&TensorJob> = file.tensors.iter().map(|&t| &output.jobs[t]).collect();
            files.push((file.target.display().to_string(), format, jobs));
        }
        if let Some(path) = output.planned.index_target() {
            files.push((path.display().to_string(), "index", Vec::new()));
        }
    }
    let mut report = SplitReport::new(input, &files);
    report.heads = heads;
    report.backend = engine.note.clone();
    report.rules = config
        .spec
        .as_ref()
        .and_then(crate::plan::spec::directml_split::SplitRules::of)
        .map(|rules| rules.title());
    report
}

/// Writes every file of every output into its member of `set`, in the order they were added:
/// in lockstep when the outputs allow it (`in_lockstep`; `compress` deflates .npz members),
/// by `engine`, else one output after another, by the CPU engine (the only one
/// `SplitEngine::choose` allows then).
fn write_all(
    planned: &mut [PlannedOutput],
    set: &mut Opened,
    compress: bool,
    engine: &mut SplitEngine,
    bar: &indicatif::ProgressBar,
) -> Result<()> {
    if in_lockstep(planned, compress)
        && let Some(files) = set.files_mut()
    {
        return write_lockstep(planned, files, engine, bar);
    }
    // The CPU engine plans nothing per tensor, so the job it is chosen for does not matter.
    let mut cpu = Engine::choose(Backend::Cpu, None, &[])?;
    let mut sinks = set.sinks();
    let mut members = sinks.iter_mut().map(|s| &mut **s);
    for output in planned {
        let described = described(&output.jobs);
        let jobs = &output.jobs;
        let mut data = |index: usize, sink: &mut dyn Sink| {
            let mut counted = Counted { inner: sink, bar };
            cpu.execute(index, &jobs[index], &mut counted)
        };
        let writer = output.writer.as_mut();
        output
            .planned
            .write_into(&mut members, writer, &described, &mut data)?;
    }
    Ok(())
}

/// The most outputs written in lockstep; more are written one after another, sparing the
/// memory of a writer's state and of the engine's buffer for each.
const LOCKSTEP_OUTPUTS: usize = 256;
/// The most outputs written in lockstep when their writers hold a buffer per tensor (JSON's
/// text of 1 MiB, a deflated .npz member's state).
const LOCKSTEP_BUFFERED: usize = 16;

/// The engine that writes `planned`'s outputs (DirectML's plans made now, before anything is
/// written): when the outputs are written in lockstep, it is shown each tensor's parts, one
/// per output, in the order the outputs' files list them.
fn choose_engine(config: &SplitConfig, planned: &[PlannedOutput]) -> Result<SplitEngine> {
    let lockstep = in_lockstep(planned, config.output.compress);
    let listed: Vec<Vec<&TensorJob>> = match lockstep {
        true => planned
            .iter()
            .map(|o| file_order(&o.jobs, &o.planned))
            .collect(),
        false => Vec::new(),
    };
    let tensors: Vec<Vec<&TensorJob>> = match listed.first() {
        Some(first) => (0..first.len())
            .map(|index| listed.iter().map(|o| o[index]).collect())
            .collect(),
        None => Vec::new(),
    };
    drop(listed);
    SplitEngine::choose(
        config.backend,
        config.adapter,
        lockstep.then_some(tensors.as_slice()),
    )
}

/// The tensors of an output that is one file, in the order the file lists them.
fn file_order<'p, 'a>(jobs: &'p [TensorJob<'a>], planned: &Planned) -> Vec<&'p TensorJob<'a>> {
    let listed = planned.files().first().map_or(&[][..], |f| &f.tensors);
    listed.iter().map(|&t| &jobs[t]).collect()
}

/// Whether the outputs can be written in lockstep, each tensor of the input into every
/// output before the next tensor, so that the engine reads it once for all of them
/// (`engine::splitter`): every output is one local file (a sharded one keeps the path of one
/// output after another; objects: below), they are not too many (`LOCKSTEP_OUTPUTS`,
/// `LOCKSTEP_BUFFERED`; `compress` deflates .npz members), and their files all list the same
/// tensors of the input in the same order (their writers may order them differently, with
/// different formats).
///
/// Objects (`-o 's3://B/p{part}.npy'`) are written one after another, never in lockstep:
/// an upload holds the part it fills (8 MiB at least: a store takes no smaller part but the
/// last) and its parts in flight, so N uploads in lockstep would hold N of each (256 outputs,
/// 10 GiB), where one after another holds one upload's whatever N. The price is reading the
/// input once per output instead of once: each output reads only its own slices (and the
/// tensors every output keeps whole) from the input's map (an object is downloaded once: the
/// splitter does not read by range yet), while the upload, slower, is what sets the pace.
fn in_lockstep(planned: &[PlannedOutput], compress: bool) -> bool {
    let Some(first) = planned.first() else {
        return false;
    };
    if first
        .planned
        .targets()
        .any(|target| upload::is_url(&target))
    {
        return false;
    }
    // Writers that hold a buffer per tensor (JSON's text, a deflated member's state) hold
    // one per output in lockstep: fewer outputs, so that memory stays bounded.
    let buffered = planned
        .iter()
        .any(|o| o.format == Format::Json || (o.format == Format::Npz && compress));
    let most = if buffered {
        LOCKSTEP_BUFFERED
    } else {
        LOCKSTEP_OUTPUTS
    };
    if planned.len() > most || !planned.iter().all(|o| o.planned.is_one_file()) {
        return false;
    }
    let source = |t: &TensorJob| t.sources.first().map(|&s| s as *const crate::input::Tensor);
    let first = file_order(&first.jobs, &first.planned);
    planned.iter().all(|o| {
        let listed = file_order(&o.jobs, &o.planned);
        listed.len() == first.len()
            && listed
                .iter()
                .zip(&first)
                .all(|(a, b)| source(a) == source(b) && a.out.name == b.out.name)
    })
}

/// Writes every output in lockstep (`in_lockstep` holds): every output's header, then each
/// tensor's parts into all of their outputs at once (`engine::splitter`), then every output's
/// end; `members` holds each output's one file, in the outputs' order, and `engine` (chosen
/// for these outputs) writes each tensor's parts.
fn write_lockstep(
    planned: &mut [PlannedOutput],
    members: &mut [crate::output::Member],
    engine: &mut SplitEngine,
    bar: &indicatif::ProgressBar,
) -> Result<()> {
    let failed = |e, sink: &dyn Sink| Error::io("write the output", sink.name(), e);
    let mut jobs: Vec<Vec<&TensorJob>> = Vec::with_capacity(planned.len());
    let mut writers: Vec<&mut dyn Writer> = Vec::with_capacity(planned.len());
    for output in planned.iter_mut() {
        let PlannedOutput {
            jobs: listed,
            writer,
            planned,
            ..
        } = output;
        jobs.push(file_order(listed, planned));
        writers.push(writer.as_mut());
    }
    for ((writer, jobs), member) in writers.iter_mut().zip(&jobs).zip(members.iter_mut()) {
        let described: Vec<OutTensor> = jobs.iter().map(|t| t.out.clone()).collect();
        writer
            .start(member, &described)
            .map_err(|e| failed(e, member))?;
    }
    for index in 0..jobs[0].len() {
        write_lockstep_tensor(index, &jobs, &mut writers, members, engine, bar)?;
    }
    for (writer, member) in writers.iter_mut().zip(members.iter_mut()) {
        writer.finish(member).map_err(|e| failed(e, member))?;
    }
    Ok(())
}

/// Writes the `index`-th tensor of every output (`jobs`, each output's tensors in its file's
/// order) into its member, framed by its writer, its parts by `engine` in one pass.
fn write_lockstep_tensor(
    index: usize,
    jobs: &[Vec<&TensorJob>],
    writers: &mut [&mut dyn Writer],
    members: &mut [crate::output::Member],
    engine: &mut SplitEngine,
    bar: &indicatif::ProgressBar,
) -> Result<()> {
    let failed = |e, sink: &dyn Sink| Error::io("write the output", sink.name(), e);
    for ((writer, jobs), member) in writers.iter_mut().zip(jobs).zip(members.iter_mut()) {
        writer
            .start_tensor(member, &jobs[index].out)
            .map_err(|e| failed(e, member))?;
    }
    let parts: Vec<&TensorJob> = jobs.iter().map(|jobs| jobs[index]).collect();
    let mut data: Vec<Box<dyn Sink + '_>> = writers
        .iter_mut()
        .zip(members.iter_mut())
        .map(|(writer, member)| writer.data_sink(member))
        .collect();
    let mut counted: Vec<Counted> = data
        .iter_mut()
        .map(|inner| Counted {
            inner: inner.as_mut(),
            bar,
        })
        .collect();
    let mut outs: Vec<&mut dyn Sink> = counted.iter_mut().map(|c| c as &mut dyn Sink).collect();
    engine.execute(index, &parts, &mut outs)?;
    drop(outs);
    drop(counted);
    drop(data);
    for ((writer, jobs), member) in writers.iter_mut().zip(jobs).zip(members.iter_mut()) {
        writer
            .end_tensor(member, &jobs[index].out)
            .map_err(|e| failed(e, member))?;
    }
    Ok(())
}

/// Refuses rules that match no tensor of the input: a rule the user wrote for a tensor the
/// input does not hold is most likely a typo or the wrong rules file.
fn check_rules_match(input: &crate::input::Input, matcher: &Matcher) -> Result<()> {
    let names: Vec<&str> = input
        .tensors
        .iter()
        .map(|t| {
            t.name
                .tensor
                .as_deref()
                .unwrap_or(crate::plan::job::DEFAULT_NAME)
        })
        .collect();
    let unmatched: Vec<_> = matcher
        .unmatched(&names)
        .into_iter()
        .filter(|rule| rule.required)
        .collect();
    if unmatched.is_empty() {
        return Ok(());
    }
    Err(Error::Refused(vec![rules::unmatched_refusal(
        &unmatched, &names, false,
    )]))
}

/// Refuses outputs in object storage (`targets`, every file of every output, in the order
/// they are completed) one of which, but the last, is a file of `input` (`-o
/// s3://B/m.safetensors` splitting `s3://B/m.safetensors`): its completion replaces the
/// input, and one after it that fails would leave the input lost and the rest not written,
/// since no store takes a completed object back (a local set's commit puts the input back).
/// The last is completed once every other object is in place, as a local rename is.
fn check_input_kept(input: &crate::input::Input, targets: &[PathBuf]) -> Result<()> {
    let Some((_, before_last)) = targets.split_last() else {
        return Ok(());
    };
    let files: Vec<&Path> = input.versions().map(|(l, _)| l.as_path()).collect();
    for target in before_last {
        if let Some(at) = super::input_written_over(target, files.iter().copied()) {
            return Err(Error::refused(
                format!(
                    "the output {} is the input {}: its upload would replace it before the \
                     outputs after it are in place, and should one of them fail, the input \
                     would be lost and that output not written (a store takes no completed \
                     object back)",
                    crate::messages::path(target),
                    crate::messages::path(files[at]),
                ),
                "name another key for that output (copy it over the input once the split is \
                 done), or name it as the last output",
            ));
        }
    }
    Ok(())
}

/// Makes the missing folders the outputs (`targets`) are in (a sharded checkpoint's is its
/// own path), one level deep ([`Folders::make_one`]); they are removed again, when still
/// empty, unless the outputs are committed.
fn make_folders(targets: &[Target]) -> Result<Folders> {
    let mut made = Folders::none();
    let folders = targets.iter().filter_map(|target| target.kind.folder());
    // A prefix in object storage is no folder to make.
    for folder in folders.filter(|folder| !upload::is_url(folder)) {
        made.make_one(folder)?;
    }
    Ok(made)
}
