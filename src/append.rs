//! `--append`: grow a `.npy` file in place by the join of it and the other inputs, in time
//! proportional to what is added; and `--recover`: repair what an append that did not finish
//! left behind.
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

use std::path::Path;

use crate::backend::Engine;
use crate::config::{Action, JoinConfig, PlanForm};
use crate::dtype::Swaps;
use crate::error::{Error, InputRef, Result};
use crate::format::npy::{self, NpyWriter};
use crate::format::{Format, Layout, OutTensor, TensorInfo, shape_text};
use crate::input::{Input, Tensor};
use crate::job::TensorJob;
use crate::output::Sink;
use crate::output::grow::{self, Journaled, Target};
use crate::output::reorder::Reordered;
use crate::progress::{self, Counted};
use crate::{join, plan, report, source};

/// Runs the append `config` describes: its first input is the target. Checks and plans as a
/// join, then either prints the plan or grows the target.
pub fn run(config: &JoinConfig) -> Result<()> {
    let inputs = join::open_inputs(config, None)?;
    let first = &inputs[0];
    check_target(first, &inputs, config)?;
    let job = join::plan(config, &inputs, Format::Npy, &NpyWriter)?;
    let grown = &job[0];
    let target = &first.tensors[0];
    check_axis(grown, target)?;
    check_cast(config, target)?;
    check_not_appended_to_itself(&inputs)?;
    let old_header = read_header_bytes(target)?;
    let new_header = new_header(&old_header, grown, target, config)?;
    let added = added_job(grown, target, config);
    let mut engine = Engine::choose(
        config.engine.backend,
        config.engine.adapter,
        std::slice::from_ref(&added),
    )?;
    let old_len = target.info.data_offset + target.info.data_len;
    match config.action {
        Action::DryRun(form) => {
            let journal = grow::journal_path(&first.name.path);
            if journal.exists() {
                return Err(interrupted(&first.name.path, &journal));
            }
            let output = Some((&*first.name.path, Format::Npy));
            let rules = &config.rules;
            let plan = match form {
                PlanForm::Json => {
                    let text = report::dry_run_json(rules, &inputs, &job, output, &engine, None);
                    with_append_json(&text, old_len, &added)
                }
                PlanForm::Text => {
                    let text = report::dry_run(rules, &inputs, &job, output, &engine, None);
                    format!("{text}{}", append_line(first, old_len, &added))
                }
            };
            print!("{plan}");
            Ok(())
        }
        Action::Write => {
            let header = Headers {
                old: old_header,
                new: new_header,
            };
            grow_target(config, &inputs, &added, &mut engine, header, old_len)
        }
    }
}

/// The target's header before and after the append.
struct Headers {
    old: Vec<u8>,
    new: Vec<u8>,
}

/// Refuses targets that cannot grow in place (not a `.npy` file, standard input) and an
/// append with nothing to append.
fn check_target(first: &Input, inputs: &[Input], config: &JoinConfig) -> Result<()> {
    let name = &first.name;
    if name.is_stdin() {
        return Err(Error::refused(
            "--append grows its first input in place, and standard input (-) is not a file",
            "name the .npy file to grow first, then the inputs to append to it",
        ));
    }
    let why = match first.format {
        Format::Npy => None,
        Format::Npz => Some(
            "an .npz archive lists its members in a directory at its end, and a member cannot \
             grow without moving everything after it",
        ),
        Format::SafeTensors => Some(
            "a .safetensors header lists every tensor's byte offsets, and the tensors after a \
             grown one would have to move (so would the data, were the header to grow)",
        ),
        Format::Json => Some("JSON text closes its brackets at its end"),
    };
    if let Some(why) = why {
        return Err(Error::refused(
            format!("cannot append to {name} in place: only .npy files grow in place; {why}"),
            rewrite_hint(config, inputs),
        ));
    }
    if inputs.len() < 2 {
        return Err(Error::refused(
            format!("--append has nothing to append: only the target, {name}, was named"),
            format!(
                "name the inputs to append after it: tjoin --append -a 0 {} new.npy",
                name.path.display()
            ),
        ));
    }
    Ok(())
}

/// A normal join of the same inputs into the target, which rewrites it whole.
fn rewrite_hint(config: &JoinConfig, inputs: &[Input]) -> String {
    let axis = config
        .rules
        .axis
        .map_or(String::new(), |a| format!(" -a {a}"));
    let mut names: Vec<String> = inputs.iter().take(3).map(|i| i.name.label()).collect();
    if inputs.len() > 3 {
        names.push("...".to_string());
    }
    format!(
        "a normal join rewrites the whole file, and can replace it: tjoin{axis} {} -o {}",
        names.join(" "),
        inputs[0].name.path.display()
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
            target.name.path.display(),
            target.name.path.display()
        ),
    ))
}

/// `--cast` may only name the target's own type: the data the target holds is not rewritten.
fn check_cast(config: &JoinConfig, target: &Tensor) -> Result<()> {
    let own = &target.info.dtype;
    match &config.rules.cast {
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

/// Refuses an input that is the target itself: it grows while it is read.
fn check_not_appended_to_itself(inputs: &[Input]) -> Result<()> {
    let id = |path: &Path| file_id(path);
    let Some(target) = id(&inputs[0].name.path) else {
        return Ok(());
    };
    let same = inputs[1..]
        .iter()
        .find(|input| !input.name.is_stdin() && id(&input.name.path) == Some(target));
    match same {
        Some(input) => Err(Error::refused(
            format!(
                "{} is the file being appended to, {}: it would grow while it is read",
                input.name, inputs[0].name
            ),
            format!(
                "append a copy of it, or join with a rewrite: tjoin -a 0 {} {} -o {}",
                inputs[0].name.path.display(),
                input.name.label(),
                inputs[0].name.path.display()
            ),
        )),
        None => Ok(()),
    }
}

/// A file's device and inode, where the platform says.
fn file_id(path: &Path) -> Option<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

/// The target's whole header: its bytes up to its data.
fn read_header_bytes(target: &Tensor) -> Result<Vec<u8>> {
    let file = target.file.open(&target.name)?;
    let mut header = vec![0; target.info.data_offset as usize];
    source::read_exact_at(&file, &mut header, 0)
        .map_err(|e| target.name.io_error("read the header of", e))?;
    Ok(header)
}

/// The target's header for its grown shape, of the same length, checked to read back as
/// the same type, layout and data offset with the new shape. Refuses a header without room.
fn new_header(
    old: &[u8],
    grown: &TensorJob,
    target: &Tensor,
    config: &JoinConfig,
) -> Result<Vec<u8>> {
    let shape = &grown.out.shape;
    let header = npy::reshaped_header(old, shape).filter(|header| {
        let len = header.len() as u64 + grown.out.bytes;
        let read = npy::read_header_at(&mut &header[..], 0, len, &target.name);
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
                config.rules.axis.unwrap_or(0),
                target.name.path.display(),
                target.name.path.display()
            ),
        )
    })
}

/// The job that writes the appended bytes: inputs 2 to n joined along the growth axis in the
/// target's layout and type, which, for that axis, is the grown file's data after the
/// target's.
fn added_job<'a>(grown: &TensorJob<'a>, target: &Tensor, config: &JoinConfig) -> TensorJob<'a> {
    let sources: Vec<&'a Tensor> = grown.sources[1..].to_vec();
    let infos: Vec<&TensorInfo> = sources.iter().map(|t| &t.info).collect();
    let cast = config.rules.cast.as_ref();
    let plan = plan::plan_with(&infos, grown.plan.axis, Some(target.info.layout), cast);
    debug_assert!(plan.outer <= 1 && plan.dtype == target.info.dtype);
    TensorJob {
        out: OutTensor {
            name: grown.out.name.clone(),
            dtype: plan.dtype.clone(),
            shape: plan.shape.clone(),
            layout: plan.layout,
            bytes: plan.bytes,
        },
        plan,
        sources,
        placement: None,
        kept: false,
        rule: grown.rule,
    }
}

/// The refusal of an append while an earlier one's journal is beside the target.
fn interrupted(path: &Path, journal: &Path) -> Error {
    Error::Unfinished {
        what: format!(
            "an earlier append to {} did not finish: its journal {} is still there",
            path.display(),
            journal.display()
        ),
        hint: format!(
            "run `tjoin --recover {}` first: it undoes that append (or finishes it, if its \
             header was written)",
            path.display()
        ),
    }
}

/// The dry run's last line: what the append would write where.
fn append_line(first: &Input, old_len: u64, added: &TensorJob) -> String {
    let target = &first.tensors[0].info;
    format!(
        "append: in place, {} bytes written at byte {old_len} of {}, after its {} bytes of \
         data; then its header rewritten for the new shape\n",
        added.plan.bytes,
        first.name.path.display(),
        target.data_len
    )
}

/// The JSON plan with `output.append`: where the new bytes go and how many there are.
fn with_append_json(text: &str, old_len: u64, added: &TensorJob) -> String {
    let Ok(mut plan) = serde_json::from_str::<serde_json::Value>(text) else {
        return text.to_string();
    };
    if let Some(output) = plan.get_mut("output").and_then(|o| o.as_object_mut()) {
        output.insert(
            "append".to_string(),
            serde_json::json!({ "offset": old_len, "bytes": added.plan.bytes }),
        );
    }
    format!("{plan}\n")
}

/// Locks the target, checks that it is still the file that was read and that no earlier
/// append left its journal, then writes the new data after its end and commits it.
fn grow_target(
    config: &JoinConfig,
    inputs: &[Input],
    added: &TensorJob,
    engine: &mut Engine,
    header: Headers,
    old_len: u64,
) -> Result<()> {
    let first = &inputs[0];
    let path = &first.name.path;
    let target = Target::lock(path, "append to")?;
    match target.journal()? {
        Journaled::None => {}
        Journaled::Found(_) | Journaled::Stale => {
            return Err(interrupted(path, &target.journal_path()));
        }
    }
    let mut head = vec![0; header.old.len()];
    let same = target.is_at_path()
        && target.length()? == old_len
        && source::read_exact_at(target.file(), &mut head, 0).is_ok()
        && head == header.old;
    if !same {
        let why = "it changed after tjoin read its header (another program wrote to it); \
                   nothing was appended, run again";
        return Err(Error::io("append to", path, std::io::Error::other(why)));
    }
    first.check_unchanged()?;
    let new_len = old_len + added.plan.bytes;
    let mut growth = target.grow(header.old, header.new, new_len)?;
    let progress = progress::start(added.plan.bytes, config.progress, path);
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

/// Repairs `path` after an append that did not finish: with the append's journal, undoes it
/// (the old length, and the old header if the new one was being written) or, when the new
/// header had reached the disk, keeps it; without one, cuts the file back to the end of the
/// data its header declares. Says on standard error what it did.
pub fn recover(path: &Path) -> Result<()> {
    let target = Target::lock(path, "recover")?;
    let len = target.length()?;
    let name = InputRef {
        position: 1,
        path: path.into(),
        tensor: None,
    };
    let shown = path.display();
    let mut done = Vec::new();
    let (keep, header) = match target.journal()? {
        Journaled::Found(journal) => {
            let mut head = vec![0; journal.new_header.len()];
            let head = source::read_exact_at(target.file(), &mut head, 0).map(|()| head);
            match head {
                Ok(head) if head == journal.new_header && len >= journal.new_len => {
                    done.push(
                        "kept the appended data: the append had finished, its new header was \
                         on the disk"
                            .to_string(),
                    );
                    (journal.new_len, None)
                }
                Ok(head) if head == journal.old_header => (journal.old_len, None),
                _ => {
                    done.push(
                        "put its old header back (the crash came while the new one was being \
                         written)"
                            .to_string(),
                    );
                    (journal.old_len, Some(journal.old_header))
                }
            }
        }
        found => {
            if let Journaled::Stale = found {
                done.push(
                    "removed a journal left by an append to an earlier file of that name"
                        .to_string(),
                );
            }
            let info = npy::read_header_past_end(target.file(), len, &name)?;
            (info.data_offset + info.data_len, None)
        }
    };
    if len < keep {
        return Err(Error::Unfinished {
            what: format!(
                "cannot recover {shown}: it is {len} bytes long, shorter than the {keep} bytes \
                 its append journal says it had; something other than tjoin changed it"
            ),
            hint: format!(
                "restore it from a copy; the journal {} says what the append did",
                target.journal_path().display()
            ),
        });
    }
    if len > keep {
        done.push(format!(
            "removed {} bytes after the end of its data",
            len - keep
        ));
    }
    target.repair(keep, header.as_deref())?;
    let info = npy::read_header(target.file(), keep, &name)?;
    target.remove_journal()?;
    let holds = format!("{} {}, {keep} bytes", info.dtype, info.shape_text());
    if done.is_empty() {
        eprintln!("tjoin: {shown} needs no recovery: it ends where its header says ({holds})");
    } else {
        eprintln!(
            "tjoin: recovered {shown}: {}; it holds {holds}",
            done.join("; ")
        );
    }
    Ok(())
}
