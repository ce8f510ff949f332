//! `--append`: grow a `.npy` file in place by the join of it and the other inputs, in time
//! proportional to what is added; and `--recover`: repair what an append that did not finish
//! left behind (`src/output/recovery.rs`, beside the journal's writer).
//!
//! An append is a join whose output is its first input. It is opened, checked and planned
//! exactly as a join (`join::open_inputs`, `join::plan`: shapes, types, `--cast`, `--spec`,
//! `--expect-shape`), with the target as input 1; the plan's output tensor is the grown file.
//! Along the growth axis (0 for a C-order file, the last for a Fortran-order one) that join
//! is a single round: the output's data is the target's data followed by the others', in the
//! target's storage order. So the engine runs a second plan over inputs 2 to n only, in the
//! target's layout, and writes its bytes after the target's end; then the header, whose length
//! does not change (numpy leaves room for the growth axis to reach 21 digits), is rewritten
//! with the new shape. How that is made safe against interrupts and crashes is
//! `src/output/grow.rs`'s contract.

use std::io;
use std::path::Path;

use crate::backend::Engine;
use crate::config::{Action, JoinConfig};
use crate::dtype::{DType, Swaps};
use crate::error::{Error, Refusal, Result};
use crate::flow::join;
use crate::format::Sink;
use crate::format::npy::{self, HeaderBytes, NpyWriter, PastEnd};
use crate::format::{Format, Layout, TensorInfo};
use crate::input::{Input, Tensor};
use crate::messages::shape_text;
use crate::output::grow::{self, Journaled, Target};
use crate::output::kind::Description;
use crate::output::progress::{self, Counted, When};
use crate::output::recovery;
/// `--recover`'s flow is the output stage's, beside the journal it reads.
pub use crate::output::recovery::recover;
use crate::output::reorder::Reordered;
use crate::plan::job;
use crate::plan::tensor_job::TensorJob;
use crate::report::plan::AppendReport;
use crate::report::{PlanReport, Warnings};
use crate::sys;
use crate::{messages, plan};

/// Runs the append `config` describes: its first input is the target. Checks and plans as a
/// join, then either prints the plan or grows the target. The one function of the append that
/// sees the whole config: each step below is handed its part of it.
pub fn run(config: &JoinConfig) -> Result<()> {
    if let Some(target) = config
        .inputs
        .first()
        .filter(|t| crate::sys::remote::is_url(t))
    {
        return Err(not_an_object(target));
    }
    let rules = &config.rules;
    let inputs = join::open_inputs(&config.open_config(), None)?;
    let first = &inputs[0];
    check_target(first, &inputs, rules.axis)?;
    if rules.cast.is_none() {
        check_types(&inputs)?;
    }
    let mut warnings = Warnings::new(config.quiet);
    let matcher = rules.matcher();
    let options = rules.job_options(&matcher, Format::Npy);
    let expected = rules.expect_shape.as_deref();
    let job = join::plan(
        &options,
        expected,
        config.target().kind,
        &inputs,
        &NpyWriter,
        &mut warnings,
    )?;
    let grown = &job[0];
    let target = &first.tensors[0];
    check_axis(grown, target)?;
    let cast = rules.cast.as_ref();
    check_cast(cast, target)?;
    check_not_appended_to_itself(&inputs)?;
    let old_header = read_header_bytes(target)?;
    let new_header = new_header(&old_header, grown, target, rules.axis)?;
    let added = added_job(grown, target, cast);
    let chosen = config.engine();
    let mut engine = Engine::choose(chosen.backend, chosen.adapter, std::slice::from_ref(&added))?;
    let old_len = target.info.data_offset + target.info.data_len;
    let report = || {
        let output = (
            Description::File(first.name.location.as_path()),
            Some(Format::Npy),
        );
        let mut report = PlanReport::new(&options, &inputs, &job, output, &engine);
        report.output.append = Some(AppendReport {
            bytes: added.plan.bytes,
            offset: old_len,
            data_before: target.info.data_len,
        });
        report
    };
    match config.action {
        Action::DryRun(form) => {
            let journal = grow::journal_path(first.name.location.as_path());
            if journal.exists() {
                return Err(interrupted(first.name.location.as_path(), &journal));
            }
            let mut report = report();
            report.warnings = warnings.into_vec();
            report.print(form)
        }
        Action::Write => {
            // `--print-plan`: the plan is made now, printed once the target has grown.
            let carried_out = config.print_plan.map(|form| {
                let mut report = report();
                report.written = true;
                (report, form)
            });
            let header = Headers {
                old: old_header,
                new: new_header,
            };
            grow_target(
                config.progress,
                &inputs,
                &added,
                &mut engine,
                header,
                old_len,
            )?;
            match carried_out {
                Some((report, form)) => report.print(form),
                None => Ok(()),
            }
        }
    }
}

/// The target's header before and after the append.
struct Headers {
    old: Vec<u8>,
    new: Vec<u8>,
}

/// Refuses targets that cannot grow in place (not a `.npy` file, standard input) and an
/// append with nothing to append. `axis` is `-a`'s, for the hint.
fn check_target(first: &Input, inputs: &[Input], axis: Option<i64>) -> Result<()> {
    let name = &first.name;
    if name.is_stdin() {
        return Err(Error::refused(
            "--append grows its first input in place, and standard input (-) is not a file",
            "name the .npy file to grow first, then the inputs to append to it",
        ));
    }
    let why = first.format.cannot_grow();
    if let Some(why) = why {
        return Err(Error::refused(
            format!("cannot append to {name} in place: only .npy files grow in place; {why}"),
            rewrite_hint(axis, inputs),
        ));
    }
    if inputs.len() < 2 {
        return Err(Error::refused(
            format!("--append has nothing to append: only the target, {name}, was named"),
            format!(
                "name the inputs to append after it: tjoin --append -a 0 {} new.npy",
                name.location
            ),
        ));
    }
    Ok(())
}

/// A normal join of the same inputs into the target (along `axis`, `-a`'s), which rewrites it
/// whole.
fn rewrite_hint(axis: Option<i64>, inputs: &[Input]) -> String {
    let axis = axis.map_or(String::new(), |a| format!(" -a {a}"));
    let mut names: Vec<String> = inputs.iter().take(3).map(|i| i.name.label()).collect();
    if inputs.len() > 3 {
        names.push("...".to_string());
    }
    format!(
        "a normal join rewrites the whole file, and can replace it: tjoin{axis} {} -o {}",
        names.join(" "),
        inputs[0].name.location
    )
}

/// Refuses a join along any axis but the target's growth axis: the one along which the
/// target's bytes are followed by the others' (0 in C order, the last in Fortran order).
fn check_axis(grown: &TensorJob, target: &Tensor) -> Result<()> {
    let rank = target.info.shape.len();
    let (growth, order, lie) = match target.info.layout {
        Layout::C => (0, "C order", "its rows lie one after another"),
        Layout::Fortran => (
            rank - 1,
            "Fortran order",
            "its columns lie one after another",
        ),
    };
    if !grown.parts.is_plain_join() {
        return Err(Error::refused(
            format!(
                "cannot append to {} in place: its rule says `{}`, so its bytes are not \
                 followed by the others' in the joined tensor",
                target.name,
                grown.parts.to_string().trim()
            ),
            "rewrite it with a normal join (without --append), or drop the rule's words \
             after the axis",
        ));
    }
    if grown.plan.axis == growth {
        return Ok(());
    }
    let axis = grown.plan.axis;
    Err(Error::refused(
        format!(
            "cannot append along axis {axis} in place: {} is stored in {order}, so only axis \
             {growth} grows by adding bytes at its end ({lie}); along axis {axis}, new elements \
             go between the old ones",
            target.name
        ),
        format!(
            "append along axis {growth}, or rewrite it with a normal join: tjoin -a {axis} {} \
             ... -o {}",
            target.name.location, target.name.location
        ),
    ))
}

/// `--cast` may only name the target's own type: the data the target holds is not rewritten.
fn check_cast(cast: Option<&DType>, target: &Tensor) -> Result<()> {
    let own = &target.info.dtype;
    match cast {
        Some(cast) if cast != own => Err(Error::refused(
            format!(
                "--cast {cast}: {} holds {own}, and an append does not convert the data it \
                 already holds",
                target.name
            ),
            format!(
                "--cast {own} converts the new inputs to the file's own type; a normal join \
                 with -o rewrites the whole file as {cast}"
            ),
        )),
        _ => Ok(()),
    }
}

/// Refuses new inputs whose element type is not the target's, without `--cast`: an append
/// keeps the file's own type, so the one fix it accepts is `--cast` to that type (the join's
/// own refusal would suggest the type numpy promotes to, which the append then refuses).
fn check_types(inputs: &[Input]) -> Result<()> {
    let Some(target) = inputs[0].tensors.first() else {
        return Ok(());
    };
    let own = &target.info.dtype;
    let differing: Vec<&Tensor> = inputs[1..]
        .iter()
        .flat_map(|i| i.tensors.iter())
        .filter(|t| &t.info.dtype != own)
        .collect();
    let Some(first) = differing.first() else {
        return Ok(());
    };
    let castable = differing
        .iter()
        .all(|t| crate::dtype::cast::castable(&t.info.dtype, own));
    let hint = if castable {
        format!(
            "add --cast {own}: it converts the new inputs to the file's own type (a value that \
             does not fit is refused, naming it); to hold another type, rewrite the whole file \
             with a join and -o instead"
        )
    } else {
        format!(
            "{} cannot be cast to {own}: rewrite the whole file with a join and -o instead",
            first.info.dtype
        )
    };
    Err(Error::Refused(vec![Refusal {
        headline: format!(
            "cannot append to {}, which holds {own}: an append keeps the file's own type, and \
             {} new input{}",
            inputs[0].name,
            differing.len(),
            if differing.len() == 1 {
                " holds another"
            } else {
                "s hold others"
            }
        ),
        details: crate::error::capped(
            differing
                .iter()
                .map(|t| format!("{}  {}", t.name, t.info.dtype))
                .collect(),
            10,
        ),
        hint: Some(hint),
    }]))
}

/// Refuses an input that is the target itself: it grows while it is read.
fn check_not_appended_to_itself(inputs: &[Input]) -> Result<()> {
    let id = |path: &Path| sys::path_id(path);
    let Some(target) = id(inputs[0].name.location.as_path()) else {
        return Ok(());
    };
    let same = inputs[1..]
        .iter()
        .find(|input| !input.name.is_stdin() && id(input.name.location.as_path()) == Some(target));
    match same {
        Some(input) => Err(Error::refused(
            format!(
                "{} is the file being appended to, {}: it would grow while it is read",
                input.name, inputs[0].name
            ),
            "leave it out of the inputs to append (a glob that matches the file being \
             appended to matches it too), or append a copy of it",
        )),
        None => Ok(()),
    }
}

/// The target's whole header: its bytes up to its data.
fn read_header_bytes(target: &Tensor) -> Result<Vec<u8>> {
    let file = target.file.open(&target.name)?;
    let mut header = vec![0; target.info.data_offset as usize];
    sys::read_exact_at(&file, &mut header, 0)
        .map_err(|e| target.name.io_error("read the header of", e))?;
    Ok(header)
}

/// The target's header for its grown shape, of the same length, checked to read back as
/// the same type, layout and data offset with the new shape. Refuses a header without room,
/// with a hint along `axis` (`-a`'s).
fn new_header(
    old: &[u8],
    grown: &TensorJob,
    target: &Tensor,
    axis: Option<i64>,
) -> Result<Vec<u8>> {
    let shape = &grown.out.shape;
    let header = npy::reshaped_header(old, shape).filter(|header| {
        let len = header.len() as u64 + grown.out.bytes;
        let from = HeaderBytes {
            head: header,
            rest: &mut io::empty(),
            start: 0,
            len,
            past_end: PastEnd::Malformed,
        };
        let read = npy::read_header(from, &target.name);
        read.is_ok_and(|info| {
            let was = &target.info;
            (&info.dtype, &info.swaps, info.layout, info.data_offset)
                == (&was.dtype, &was.swaps, was.layout, was.data_offset)
                && *info.shape == **shape
        })
    });
    header.ok_or_else(|| {
        Error::refused(
            format!(
                "cannot append to {} in place: its {}-byte header has no room for the shape {} \
                 (numpy and tjoin leave room for the growth axis to reach 21 digits; the \
                 program that wrote this file did not)",
                target.name,
                old.len(),
                shape_text(shape)
            ),
            format!(
                "rewrite it once with a normal join, which leaves that room, and append in \
                 place from then on: tjoin -a {} {} ... -o {}",
                axis.unwrap_or(0),
                target.name.location,
                target.name.location
            ),
        )
    })
}

/// The job that writes the appended bytes: inputs 2 to n joined along the growth axis in the
/// target's layout and type, which, for that axis, is the grown file's data after the
/// target's. Built by the job's constructor, as a join's tensors are; it keeps the rule that
/// decided the grown tensor.
fn added_job<'a>(grown: &TensorJob<'a>, target: &Tensor, cast: Option<&DType>) -> TensorJob<'a> {
    let sources: Vec<&'a Tensor> = grown.sources[1..].to_vec();
    let infos: Vec<&TensorInfo> = sources.iter().map(|t| &t.info).collect();
    let plan = plan::plan_with(&infos, grown.plan.axis, Some(target.info.layout), cast);
    debug_assert!(plan.outer <= 1 && plan.dtype == target.info.dtype);
    TensorJob {
        rule: grown.rule,
        ..job::job(&grown.out.name, plan, sources)
    }
}

/// The refusal of an append while an earlier one's journal is beside the target.
fn interrupted(path: &Path, journal: &Path) -> Error {
    Error::Unfinished {
        what: format!(
            "an earlier append to {} did not finish: its journal {} is still there",
            messages::path(path),
            messages::path(journal)
        ),
        hint: format!(
            "run `tjoin --recover {}` first: it checks the journal against the file, then \
             undoes that append (or keeps it, if its header was written), or removes a \
             journal the append left before it changed the file",
            messages::path(path)
        ),
    }
}

/// Locks the target, checks that it is still the file that was read and that no earlier
/// append left its journal, then writes the new data after its end and commits it.
/// `progress`: when to show a progress bar.
fn grow_target(
    progress: When,
    inputs: &[Input],
    added: &TensorJob,
    engine: &mut Engine,
    header: Headers,
    old_len: u64,
) -> Result<()> {
    let first = &inputs[0];
    let path = first.name.location.as_path();
    let target = Target::lock(path, "append to")?;
    if !matches!(target.journal()?, Journaled::None) {
        // Only a journal `--recover` would act on is reported as an append to recover from;
        // for any other, the refusal says what disagrees.
        recovery::check(&target)?;
        return Err(interrupted(path, &target.journal_path()));
    }
    let mut head = vec![0; header.old.len()];
    let same = target.is_at_path()
        && target.length()? == old_len
        && sys::read_exact_at(target.file(), &mut head, 0).is_ok()
        && head == header.old;
    if !same {
        let why = "it changed after tjoin read its header (another program wrote to it); \
                   nothing was appended, run again";
        return Err(Error::io("append to", path, std::io::Error::other(why)));
    }
    first.check_unchanged()?;
    let new_len = old_len + added.plan.bytes;
    let mut growth = target.grow(header.old, header.new, new_len)?;
    let progress = progress::start(added.plan.bytes, progress, path);
    let swaps = &first.tensors[0].info.swaps;
    let written = write_data(engine, added, &mut growth, swaps, &progress.bar);
    progress.finish();
    let checked = written.and_then(|()| inputs[1..].iter().try_for_each(Input::check_unchanged));
    match checked {
        Ok(()) => growth.commit(),
        Err(error) => Err(growth.abandon(error)),
    }
}

/// Runs the engine on the added job into `sink`, counting bytes on `bar`; elements are
/// stored in the target's byte order (`swaps` reversed in each, when it is not
/// little-endian).
fn write_data(
    engine: &mut Engine,
    added: &TensorJob,
    sink: &mut dyn Sink,
    swaps: &Swaps,
    bar: &indicatif::ProgressBar,
) -> Result<()> {
    if swaps.is_none() {
        let mut counted = Counted { inner: sink, bar };
        return engine.execute(0, added, &mut counted);
    }
    let name = sink.name().to_path_buf();
    let mut reordered = Reordered::new(sink, &added.plan.dtype, swaps.clone());
    let mut counted = Counted {
        inner: &mut reordered,
        bar,
    };
    engine.execute(0, added, &mut counted)?;
    reordered
        .finish()
        .map_err(|e| Error::io("append to", &name, e))
}

/// The refusal of an append whose target is an object (`s3://...`): an object in a store is
/// written whole, once; it cannot grow in place.
fn not_an_object(target: &Path) -> Error {
    Error::refused(
        format!(
            "--append grows a file in place, but {} is an object, which a store writes whole \
             and never grows",
            crate::messages::path(target)
        ),
        format!(
            "join it with the new inputs into a new object instead: tjoin -a AXIS {} \
             INPUTS... -o s3://BUCKET/NEW_KEY",
            crate::messages::path(target)
        ),
    )
}
