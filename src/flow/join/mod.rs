//! The join command's flow: open the inputs and read their headers, check the join rules
//! and plan every output tensor, plan the output's files by its kind, then either report the
//! plan (`--dry-run`) or write each file's framing and stream the data with the chosen engine
//! into temporary files that are committed over the targets when complete
//! (`src/output/kind/mod.rs`: the same steps for every kind of output). Before the plan is whole
//! the inputs' headers are read, and tensor data only where a check needs it (`--keep` and
//! replicated tensors are compared, `plan::compare`), where an input must first become a
//! mappable file (standard input, a pipe, JSON, a deflated `.npz` member) and where the early
//! copy (`engine::early`) appends small `.npy` inputs to a temporary output as they are
//! opened; none of it reaches the target, so a refusal writes nothing. A job of several
//! workers (`--workers`) is this plan run by `workers`, which the split's flow uses too.

pub(crate) mod workers;

/// The join of inputs or into an output named by URL (object storage): staged locally, then
/// this flow.
pub mod remote;

use std::path::Path;

use crate::backend::Engine;
use crate::config::{Action, JoinConfig, JoinRules, OpenConfig, OutputKind, PlanForm, When};
use crate::engine::early::{self, EarlyCopy};
use crate::error::{Error, Refusal, Result, capped};
use crate::format::{OutTensor, Writer};
use crate::input::{self, Input, Observer, OpenAll};
use crate::output::job::Step;
use crate::output::kind::{Description, Planned, Tensors, Written};
use crate::output::progress::{self, Counted};
use crate::plan::complete;
use crate::plan::families;
use crate::plan::job::hints::{self, Suggested};
use crate::plan::job::{self, JobOptions};
use crate::plan::rules::{Matcher, Rule};
use crate::plan::stack;
use crate::plan::tensor_job::TensorJob;
use crate::report::{PlanReport, Warning, Warnings};

use workers::Planning;

/// Runs the join `config` describes: open the inputs, check and plan every output tensor,
/// then either print the plan or write the output and commit it. The one function of the
/// join that sees the whole config: each step below is handed its part of it.
pub fn run(config: &JoinConfig) -> Result<()> {
    if let Some(Step::Abandon(n)) = config.job {
        let folder = config.output.sharded.as_ref().map(|s| s.folder.as_path());
        return workers::abandon(config.output.path.as_deref(), folder, n, config.quiet);
    }
    let open = config.open_config();
    let target = config.target();
    let chosen = config.engine();
    // A job's steps write no output of their own: no early copy.
    let early = config.early_copy().filter(|_| config.job.is_none());
    let mut early = early.map(EarlyCopy::new);
    let mut inputs = open_inputs(&open, early.as_mut())?;
    if let Some(output) = &config.output.path {
        check_output_not_an_input(&inputs, output)?;
    }
    let filtered = crate::plan::filter::apply(&mut inputs, &config.filters)?;
    let mut warnings = opening_warnings(&inputs, config.quiet);
    // A dry run without an output plans as if the output were like the first input.
    // A format tjoin only reads (a checkpoint) plans the output as safetensors.
    let format = target.format.unwrap_or(inputs[0].format).planned_output();
    // What a rank file records of its rank is not true of the merged model.
    let metadata = complete::without_rank_records(inputs.first().and_then(Input::metadata));
    let options = config.output.write_options(format, metadata.as_deref())?;
    let mut writer = format.writer(&options)?;
    let rules = &config.rules;
    let (family, family_rules) = family_and_rules(rules, &inputs, format)?;
    let matcher = match family {
        Some(_) => Matcher::new(&family_rules),
        None => rules.matcher(),
    };
    let options = rules.job_options(&matcher, format);
    let expected = rules.expect_shape.as_deref();
    let planned = plan(
        &options,
        expected,
        target.kind,
        &inputs,
        writer.as_ref(),
        &mut warnings,
    );
    let job = planned.or_else(|error| hinted(error, rules, &inputs, format))?;
    // Said once the join is planned: a refusal says what is wrong instead.
    let left_out = inputs.iter().map(|i| (i.name.to_string(), i.left_out()));
    if let Some(warning) = Warning::left_out(left_out) {
        warnings.push(warning);
    }
    let tensors = Tensors {
        described: &described(&job),
        named: rules.name.is_some() || inputs.iter().any(|i| i.format.is_container()),
        set_name: inputs[0].shards().map(|set| &set.name),
        no_clobber: target.no_clobber,
        part_size: config.output.part_size,
    };
    let planned = target.kind.plan(&tensors, writer.as_ref())?;
    if let Some(file) = planned.shadowing_file() {
        warnings.push(Warning::Shadowing { file });
    }
    let mut engine = Engine::choose(chosen.backend, chosen.adapter, &job)?;
    let form = plan_form(config.action, planned.writes());
    let output = (planned.describe(), target.format);
    if let Some(form) = form {
        let mut report = PlanReport::new(&options, &inputs, &job, output, &engine);
        if let Some(Step::Shares(n)) = config.job {
            shares_need_an_output(planned.writes())?;
            let planning = Planning::join(&planned, &inputs, &job, writer.as_mut(), format);
            report.workers = Some(workers::share_report(planning, n, config.output.part_size)?);
        }
        report.family = family.map(|(family, evidence)| format!("{}, by {evidence}", family.name));
        report.warnings = warnings.into_vec();
        report.filtered = filtered.iter().cloned().map(Into::into).collect();
        return report.print(form);
    }
    // `--print-plan`: the plan is made now, printed once the output is in place.
    let carried_out = config.print_plan.map(|form| {
        let mut report = PlanReport::new(&options, &inputs, &job, output, &engine);
        report.written = true;
        report.filtered = filtered.into_iter().map(Into::into).collect();
        (report, form)
    });
    if let Some(step) = config.job {
        let planning = Planning::join(&planned, &inputs, &job, writer.as_mut(), format);
        let asked = workers::Asked::of(&config.output, config.progress, config.quiet);
        return workers::run(&asked, step, planning, Some(&mut engine), carried_out);
    }
    // The early copy writes one file, the one a file output plans.
    let one_file = matches!(planned.describe(), Description::File(_));
    let early = early.filter(|_| one_file);
    let early = early.and_then(|early| early.fits(&inputs, &job));
    let writer = writer.as_mut();
    let finished = write(
        &planned,
        &inputs,
        &job,
        writer,
        &mut engine,
        early,
        target.progress,
    )?;
    // The output may replace one of the inputs, which Windows refuses while the input is
    // mapped or open: every map and handle of the inputs goes before the commit.
    drop((engine, job));
    drop(inputs);
    finished.commit()?;
    match carried_out {
        Some((report, form)) => report.print(form),
        None => Ok(()),
    }
}

/// `error`, a refusal of the plan given the flags of `rules`, with the "no flags needed" hint
/// when the inputs' family merges them by its rules alone ([`hint_no_flags`]).
fn hinted<T>(
    error: Error,
    rules: &JoinRules,
    inputs: &[Input],
    format: crate::format::Format,
) -> Result<T> {
    match error {
        Error::Refused(mut refused) => {
            hint_no_flags(rules, inputs, format, &mut refused)?;
            Err(Error::Refused(refused))
        }
        other => Err(other),
    }
}

/// A family the inputs were recognized as, and the evidence.
type Recognized = Option<(&'static families::Family, String)>;

/// The family `inputs` are recognized as (and the evidence), and its rules for them; without
/// one, the flags are checked as they are. The rules are empty when no family is recognized.
fn family_and_rules(
    rules: &JoinRules,
    inputs: &[Input],
    format: crate::format::Format,
) -> Result<(Recognized, Vec<Rule>)> {
    let family = recognized(rules, inputs)?;
    if family.is_none() {
        check_flags(rules, inputs, format)?;
    }
    let family_rules = match &family {
        Some((family, _)) => family.rules(inputs.len(), rules.model.as_ref())?,
        None => Vec::new(),
    };
    Ok((family, family_rules))
}

/// How the plan is printed instead of written, if it is: a dry run's form, or as text when no
/// output is named (a write needs -o: clap requires it without --dry-run).
fn plan_form(action: Action, writes: bool) -> Option<PlanForm> {
    match action {
        Action::Write if writes => None,
        Action::DryRun(form) => Some(form),
        Action::Write => Some(PlanForm::Text),
    }
}

/// Refuses `--workers N --dry-run` without an output (`writes` false): the shares it shows
/// are of an output.
fn shares_need_an_output(writes: bool) -> Result<()> {
    if writes {
        return Ok(());
    }
    Err(Error::refused(
        "--workers with --dry-run shows each worker's share of the output, and no output is \
         named",
        "name the output with -o",
    ))
}

/// The warnings of a join (none printed when `quiet`), starting with what opening `inputs`
/// found: a sharded set whose tensors do not hold the total size its index says.
fn opening_warnings(inputs: &[Input], quiet: bool) -> Warnings {
    let mut warnings = Warnings::new(quiet);
    for input in inputs {
        if let Some(warning) = input.shards().and_then(Warning::total_size) {
            warnings.push(warning);
        }
    }
    warnings
}

/// Refuses a join of several inputs whose output is one of them (the same file by device and
/// inode, whatever the names: `./x`, a symbolic link, a hard link): run again, a glob that
/// matches its own output (`shards/*.npy -o shards/train.npy`) would join the old output as
/// data, every row twice, as `cat` refuses to. One input rewritten in place (a `--cast`, a
/// conversion) reads nothing else and stays allowed.
fn check_output_not_an_input(inputs: &[Input], output: &Path) -> Result<()> {
    if inputs.len() < 2 {
        return Ok(());
    }
    let files = inputs
        .iter()
        .filter(|input| !input.name.is_stdin())
        .collect::<Vec<_>>();
    let Some(at) =
        super::input_written_over(output, files.iter().map(|i| i.name.location.as_path()))
    else {
        return Ok(());
    };
    let input = files[at];
    let first = input.name.position == 1;
    Err(Error::refused(
        format!(
            "the output {} is {}: the join would read the old output as data (a glob that \
             matches its own output, run again, joins it twice)",
            crate::messages::path(output),
            input.name
        ),
        if first {
            "to add the other inputs to it in place, use --append with it first (tjoin \
             --append -a AXIS OUTPUT INPUTS...); to replace it with the join of the others, \
             leave it out of the inputs"
        } else {
            "leave it out of the inputs to replace it with the join of the others (a glob \
             that matches the output matches it too), or name another output"
        },
    ))
}

/// The model family whose built-in rules merge `inputs` (`plan::families`), and what told
/// it: when no axis and no rules are given, and the inputs are several files of several
/// named tensors (a model's ranks). `None` otherwise, or when no family fits.
fn recognized(
    rules: &JoinRules,
    inputs: &[Input],
) -> Result<Option<(&'static families::Family, String)>> {
    if rules.axis.is_some() || !rules.tensor_rules.is_empty() || !is_merge(inputs) {
        return Ok(None);
    }
    families::recognize(&tensor_names(inputs), rules.model.as_ref())
}

/// Whether `inputs` are a model's ranks: several files of several named tensors (one input,
/// a sharded set made one file, is copied as it is).
fn is_merge(inputs: &[Input]) -> bool {
    inputs.len() > 1
        && inputs
            .iter()
            .all(|i| i.format.is_container() && i.selected().is_none() && i.tensors.len() > 1)
}

/// The first input's tensor names.
fn tensor_names(inputs: &[Input]) -> Vec<&str> {
    inputs[0]
        .tensors
        .iter()
        .filter_map(|t| t.name.tensor.as_deref())
        .collect()
}

/// Refuses a merge whose flags (`-a`, `--rules`) join a tensor otherwise than the family its
/// names tell does (issue 41, item 6; `plan::families::flags`). Before its hint says that no
/// flags are needed, the merge by the family's own rules alone is planned and checked, as a
/// run without the flags would plan it.
fn check_flags(rules: &JoinRules, inputs: &[Input], format: crate::format::Format) -> Result<()> {
    if (rules.axis.is_none() && rules.tensor_rules.is_empty()) || !is_merge(inputs) {
        return Ok(());
    }
    let names = tensor_names(inputs);
    let model = rules.model.as_ref();
    let candidates = families::candidates(&names, model);
    if candidates.is_empty() {
        return Ok(());
    }
    let tensors: Vec<(&str, usize)> = inputs[0]
        .tensors
        .iter()
        .filter_map(|t| Some((t.name.tensor.as_deref()?, t.info.shape.len())))
        .collect();
    let axis = rules.axis.or(rules.spec.profile.default_axis);
    let given = rules.matcher();
    let ranks = inputs.len();
    let checked = families::flags::check(&candidates, (ranks, model), &given, axis, &tensors)?;
    let Some((family, found)) = checked else {
        return Ok(());
    };
    let (evidence, flagless) = without_flags(rules, inputs, format)?;
    let refusal = families::flags::refusal((family, &evidence), &found, flagless);
    Err(Error::Refused(vec![refusal]))
}

/// What the merge of `inputs` by the built-in rules of the family their names tell gives, as
/// a run without `-a` and the tensor rules would plan it: what tells the family, and `Ok`
/// when the plan passes every check, else its refusals (those of recognizing the family
/// too).
fn without_flags(
    rules: &JoinRules,
    inputs: &[Input],
    format: crate::format::Format,
) -> Result<(String, std::result::Result<(), Vec<Refusal>>)> {
    let names = tensor_names(inputs);
    let model = rules.model.as_ref();
    let (family, evidence) = match families::recognize(&names, model) {
        Ok(Some(recognized)) => recognized,
        // Not reached when a family fits the names, but never said to need no flags.
        Ok(None) => {
            let none = Refusal {
                headline: "no family of tjoin's table fits the tensor names".to_string(),
                details: Vec::new(),
                hint: None,
            };
            return Ok(("the tensor names".to_string(), Err(vec![none])));
        }
        Err(Error::Refused(refused)) => return Ok(("the tensor names".to_string(), Err(refused))),
        Err(other) => return Err(other),
    };
    let family_rules = family.rules(inputs.len(), model)?;
    let matcher = Matcher::new(&family_rules);
    let options = JobOptions {
        axis: None,
        ..rules.job_options(&matcher, format)
    };
    let expected = rules.expect_shape.as_deref();
    match checked_job(
        &options,
        (expected, None),
        inputs,
        &mut Suggested::default(),
    ) {
        Ok(_) => Ok((evidence, Ok(()))),
        Err(Error::Refused(refused)) => Ok((evidence, Err(refused))),
        Err(other) => Err(other),
    }
}

/// Adds to the first of `refused`, a merge's refusals under the flags it was given, the
/// hint (after its own) that no flags are needed, when the family its names tell merges it by its built-in rules alone, tried
/// first (issue 41, item 10): that hint is safe where the others' flags may not be.
fn hint_no_flags(
    rules: &JoinRules,
    inputs: &[Input],
    format: crate::format::Format,
    refused: &mut [Refusal],
) -> Result<()> {
    let flags = rules.axis.is_some() || !rules.tensor_rules.is_empty();
    let Some(first) = refused.first_mut().filter(|_| flags && is_merge(inputs)) else {
        return Ok(());
    };
    let names = tensor_names(inputs);
    let Ok(Some((family, _))) = families::recognize(&names, rules.model.as_ref()) else {
        return Ok(());
    };
    if let (_, Ok(())) = without_flags(rules, inputs, format)? {
        let name = family.name;
        let hint = format!(
            "no flags needed: the tensor names are a {name} model's, and without `-a`, \
             `--rules`, `--axis-for` and `--keep` tjoin merges it by its built-in rules \
             (`tjoin rules {name}` prints them), which it has tried on these inputs"
        );
        first.hint = Some(match first.hint.take() {
            Some(others) => format!("{others}\nhint: {hint}"),
            None => hint,
        });
    }
    Ok(())
}

/// A complete output whose inputs were all checked unchanged: only its commit remains.
struct Finished {
    output: Written,
    progress: progress::Progress,
}

impl Finished {
    /// Puts the output in place, then prints the summary.
    fn commit(self) -> Result<()> {
        self.output.commit()?;
        self.progress.summary();
        Ok(())
    }
}

/// Opens the inputs `config` names (the early copy, when there is one, watching), then
/// applies `--stack`.
pub(crate) fn open_inputs(
    config: &OpenConfig,
    early: Option<&mut EarlyCopy>,
) -> Result<Vec<Input>> {
    let all = OpenAll {
        paths: config.paths,
        format: config.format,
        out_of_order: config.out_of_order,
    };
    let observer = early.map(|early| early as &mut dyn Observer);
    let mut inputs = input::open_all(&all, observer)?;
    if config.stack {
        stack::insert_axis(&mut inputs, config.axis)?;
    }
    Ok(inputs)
}

/// Checks and plans every output tensor by `options` into an output of `kind`, in the order
/// `writer` lists them when the kind writes them so, and checks that the output format can hold them and that they have the shape
/// `--expect-shape` gives (`expected`). An append plans its grown file here too, so that it
/// follows the join's rules to the letter.
pub(crate) fn plan<'a>(
    options: &JobOptions,
    expected: Option<&[u64]>,
    kind: OutputKind,
    inputs: &'a [Input],
    writer: &dyn Writer,
    warnings: &mut Warnings,
) -> Result<Vec<TensorJob<'a>>> {
    for input in inputs {
        for said in input.consolidated().map_or(&[][..], |c| &c.warnings) {
            warnings.push(Warning::Input(said.clone()));
        }
    }
    if !options.strict {
        for described in job::unmatched_rules(inputs, options) {
            warnings.push(Warning::UnmatchedRule(described));
        }
    }
    let output = kind.path();
    let mut suggested = Suggested::default();
    let job = match checked_job(options, (expected, output), inputs, &mut suggested) {
        Ok(job) => job,
        Err(Error::Refused(mut refusals)) => {
            if let Some(headline) = suggested.uneven.take() {
                let with = JobOptions {
                    uneven: true,
                    ..*options
                };
                let checks = (expected, output);
                let planned = checked_job(&with, checks, inputs, &mut Suggested::default());
                let planned = match planned {
                    Ok(_) => Ok(()),
                    Err(Error::Refused(still)) => Err(still),
                    Err(other) => return Err(other),
                };
                hints::uneven_tried(&mut refusals, &headline, planned);
            }
            let suggested = suggested.rules;
            let tried = hints_tried(options, (expected, output), inputs, suggested, &refusals);
            refusals.extend(tried);
            return Err(Error::Refused(refusals));
        }
        Err(other) => return Err(other),
    };
    // A sharded output is split in the job order first, each shard then in the writer order.
    let in_job_order = described(&job);
    let job = kind.job_order(job, &in_job_order, writer);
    writer.check(&described(&job)).map_err(|mut refusal| {
        let target = crate::messages::path(output.unwrap_or(Path::new("the output")));
        refusal.headline = format!("cannot write {target}: {}", refusal.headline);
        Error::Refused(vec![refusal])
    })?;
    Ok(job)
}

/// Checks and plans every output tensor by `options` (`job::build`), checks their shapes
/// against `--expect-shape` (`expected`) and `--like`, and that the merge is proven
/// complete; adds to `suggested` the fixes the refusals' hints would offer. `output` is the output's
/// path, for the refusal of shards given one by one.
fn checked_job<'a>(
    options: &JobOptions,
    (expected, output): (Option<&[u64]>, Option<&Path>),
    inputs: &'a [Input],
    suggested: &mut Suggested,
) -> Result<Vec<TensorJob<'a>>> {
    let job = job::build_suggesting(inputs, options, suggested)
        .map_err(|e| job::explain_disjoint(inputs, output, e))?;
    if let Some(expected) = expected {
        job::check_expected_shape(&job, expected)?;
    }
    if let Some(reference) = options.like {
        let checked: Vec<_> = job.iter().map(|t| t.checked(inputs.len())).collect();
        reference.check(&checked, options.rules.rules())?;
    }
    let evidence = complete::Evidence {
        like: options.like.is_some(),
        rules: !options.rules.rules().is_empty(),
        model: options.model,
    };
    complete::check(&job, inputs, &evidence)?;
    Ok(job)
}

/// How many times the hints' flags are added and the plan made again: a hint's flags may
/// reveal a refusal whose own hint gives more.
const HINT_ROUNDS: usize = 4;

/// The hints' flags (`suggested`) tried before they are printed (issue 41, item 10): the
/// plan is made again with them added (and with those the new plan's hints give, for a few
/// rounds). `None` when the flags give a plan that passes every check, or add nothing new
/// to the refusals `before`; else a refusal saying that they are not enough, and what the
/// plan with them refuses.
fn hints_tried(
    options: &JobOptions,
    checks: (Option<&[u64]>, Option<&Path>),
    inputs: &[Input],
    mut suggested: Vec<Rule>,
    before: &[Refusal],
) -> Option<Refusal> {
    let mut tried: Vec<Rule> = Vec::new();
    let mut after = Vec::new();
    for _ in 0..HINT_ROUNDS {
        let new: Vec<Rule> = suggested
            .drain(..)
            .filter(|rule| !tried.iter().any(|t| t.glob == rule.glob))
            .collect();
        if new.is_empty() {
            break;
        }
        tried.extend(new);
        let rules: Vec<Rule> = tried.iter().chain(options.rules.rules()).cloned().collect();
        let matcher = Matcher::new(&rules);
        let with = JobOptions {
            rules: &matcher,
            ..*options
        };
        let mut more = Suggested::default();
        match checked_job(&with, checks, inputs, &mut more) {
            Ok(_) => return None,
            Err(Error::Refused(refusals)) => after = refusals,
            Err(_) => return None,
        }
        suggested = more.rules;
    }
    let known = |r: &Refusal| before.iter().any(|b| b.headline == r.headline);
    let revealed: Vec<String> = after
        .iter()
        .filter(|r| !known(r))
        .map(|r| r.headline.clone())
        .collect();
    if revealed.is_empty() {
        return None;
    }
    let flags: Vec<String> = tried.iter().map(Rule::written).collect();
    Some(Refusal {
        headline: format!(
            "the flags these hints give are not enough: with {} added, tjoin still refuses \
             the merge",
            capped(flags, 10).join(" ")
        ),
        details: capped(revealed, 10),
        hint: Some(
            "give the model family's rules file (--rules rules/FAMILY.rules), which says \
             each tensor's axis, and the model's config.json (--config) or the unsplit \
             model's header (--like) to check the result"
                .to_string(),
        ),
    })
}

/// The output tensors of `job`, as the writer sees them.
fn described(job: &[TensorJob]) -> Vec<OutTensor> {
    job.iter().map(|t| t.out.clone()).collect()
}

/// Writes every file of the planned output (or completes the early copy's file) with
/// `engine`, showing progress as `when` says, and checks every input unchanged: nothing is in
/// place until the commit.
fn write(
    planned: &Planned,
    inputs: &[Input],
    job: &[TensorJob],
    writer: &mut dyn Writer,
    engine: &mut Engine,
    early: Option<early::Fitted>,
    when: When,
) -> Result<Finished> {
    let total = job.iter().map(|t| t.plan.bytes).sum();
    let progress = progress::start(total, when, planned.shown_as());
    let bar = &progress.bar;
    let (written, taken) = match early {
        // The inputs it took were read whole, header and data in one read: nothing to
        // re-check.
        Some(early) => {
            let taken = early.inputs();
            bar.inc(early.bytes());
            (early.finish(&job[0], bar).map(Written::from), taken)
        }
        None => {
            let described = described(job);
            let written = planned.write(writer, &described, &mut |index, sink| {
                let mut counted = Counted { inner: sink, bar };
                engine.execute(index, &job[index], &mut counted)
            });
            (written, 0)
        }
    };
    progress.finish();
    let output = written?;
    for input in &inputs[taken..] {
        input.check_unchanged()?;
    }
    Ok(Finished { output, progress })
}
