//! A join run by N workers (issue 45): `--workers N --begin`, `--worker I/N`,
//! `--workers N --commit`, and `--workers N --abandon`. Every step is the same join command
//! line plus its flag, and every step but the abandon plans the join again from the inputs'
//! headers (`flow::join::run` up to its output's plan), so that each can check the others:
//!
//! - **the layout**: the output's files' bytes one after another, framed by the format's
//!   writer with every tensor's data at a place its header fixes (`.npy` and safetensors
//!   only: a format whose bytes depend on the data, compressed or text, is refused);
//! - **the shares**: that byte range cut into N at page boundaries, balanced by bytes;
//! - **the digest**: of the plan, the layout and the shares ([`digest`]), with the inputs'
//!   versions, recorded by `--begin` in the job's manifest (`src/output/job/`) and compared
//!   by every later step, which refuses any difference.
//!
//! A worker writes its share in place in the job's data files, through a window that drops
//! every byte outside it (`output::job::Window`), and reads only what its share needs: a
//! tensor wholly outside is skipped, one at its edge cut to the rounds or the elements the
//! share touches (`plan::window`). It flushes its bytes, checks the inputs unchanged, and
//! only then records that it finished. The commit checks every record, the inputs' versions
//! again, and puts the data files in place as the output's commit puts any set of files
//! (`OutputSet`, whose contract holds: all the files or none, the previous ones kept until
//! the new ones are in place).

use std::fs::File;
use std::ops::Range;
use std::path::Path;

use crate::backend::Engine;
use crate::config::PlanForm;
use crate::config::{JoinConfig, OutputConfig, When};
use crate::error::{Error, Result};
use crate::format::{Format, OutTensor, Writer};
use crate::input::{Input, Tensor};
use crate::output::OutputSet;
use crate::output::job::{self, Done, JobFile, Manifest, Paths, Step, Version, Window};
use crate::output::kind::{self, Description, Planned};
use crate::output::progress;
use crate::plan::job::TensorJob;
use crate::plan::window;
use crate::report::{PlanReport, ShareReport};

/// Shares start at multiples of this: a page, so that no two workers write one page.
const SHARE_ALIGN: u64 = 4096;

/// What a step of a job is given of the planned join.
pub(crate) struct Planning<'a, 'j> {
    /// The output's files.
    pub planned: &'a Planned,
    /// The inputs, open.
    pub inputs: &'a [Input],
    /// Every output tensor's plan, in the order the planned files index.
    pub job: &'a [TensorJob<'j>],
    /// The output format's writer.
    pub writer: &'a mut dyn Writer,
    /// The output's format.
    pub format: Format,
}

/// The output's files as bytes one after another.
struct Layout {
    files: Vec<FileLayout>,
    total: u64,
}

/// One file of the layout.
struct FileLayout {
    /// Its name in the output's folder.
    name: String,
    /// Where its bytes start among all the files'.
    start: u64,
    /// Its length.
    len: u64,
    /// Where each of its tensors' data starts in it, with the tensor's index in the job.
    tensors: Vec<(usize, u64)>,
    /// The digest of its framing (headers), which the workers whose shares hold it write.
    framing: u128,
}

/// Runs `step` of a job over the planned join; the abandon needs no plan ([`abandon`]).
pub(crate) fn run(
    config: &JoinConfig,
    step: Step,
    planning: Planning,
    engine: &mut Engine,
    carried_out: Option<(PlanReport, PlanForm)>,
) -> Result<()> {
    check_can_share(&planning)?;
    let paths = paths(&planning.planned.describe()).expect("an output that writes");
    let described: Vec<OutTensor> = planning.job.iter().map(|t| t.out.clone()).collect();
    let layout = layout(planning.planned, &mut *planning.writer, &described)?;
    let n = step.workers();
    let shares = shares(layout.total, n);
    let fresh = Manifest {
        tjoin_job: job::LAYOUT,
        tjoin: env!("CARGO_PKG_VERSION").to_string(),
        token: String::new(),
        workers: n,
        digest: format!("{:032x}", digest(planning.job, &layout, &shares)),
        inputs: versions(planning.inputs),
        files: layout
            .files
            .iter()
            .map(|f| JobFile {
                name: f.name.clone(),
                len: f.len,
            })
            .collect(),
        shares,
        upload: None,
    };
    let shares = share_reports(&layout, &fresh.shares);
    match step {
        Step::Begin(_) => begin(config, &paths, &planning, fresh)?,
        Step::Worker(worker, _) => {
            let manifest = recorded(&paths, &fresh)?;
            let planned = (planning, &layout, &described[..]);
            work(config, &paths, &manifest, worker, planned, engine)?;
        }
        Step::Commit(_) => {
            let manifest = recorded(&paths, &fresh)?;
            commit(config, &paths, &manifest, planning)?;
        }
        Step::Shares(_) | Step::Abandon(_) => unreachable!("handled by the join's flow"),
    }
    // `--print-plan`: the plan with the shares, once the step is done; the plan carried out
    // only once the commit put the output in place.
    match carried_out {
        Some((mut report, form)) => {
            report.written = matches!(step, Step::Commit(_));
            report.workers = Some(shares);
            report.print(form)
        }
        None => Ok(()),
    }
}

/// Each worker's share, for `--dry-run` with `--workers N`.
pub(crate) fn share_report(planning: &mut Planning, n: u32) -> Result<Vec<ShareReport>> {
    if !planning.planned.writes() {
        return Err(Error::refused(
            "--workers with --dry-run shows each worker's share of the output, and no output \
             is named",
            "name the output with -o",
        ));
    }
    check_can_share(planning)?;
    let described: Vec<OutTensor> = planning.job.iter().map(|t| t.out.clone()).collect();
    let layout = layout(planning.planned, &mut *planning.writer, &described)?;
    Ok(share_reports(&layout, &shares(layout.total, n)))
}

/// What the plan report shows of `shares` of `layout`.
fn share_reports(layout: &Layout, shares: &[[u64; 2]]) -> Vec<ShareReport> {
    let files = |start, end| {
        let within = |f: &&FileLayout| !overlap(start..end, f.start..f.start + f.len).is_empty();
        layout
            .files
            .iter()
            .filter(within)
            .map(|f| f.name.clone())
            .collect()
    };
    shares
        .iter()
        .enumerate()
        .map(|(worker, &[start, end])| ShareReport {
            end,
            files: files(start, end),
            start,
            worker: worker as u32,
        })
        .collect()
}

/// `--workers N --abandon`: removes the job's files beside the output, planning nothing
/// (its inputs may be gone).
pub(crate) fn abandon(output: &OutputConfig, n: u32, quiet: bool) -> Result<()> {
    let Some(path) = output.path.as_deref() else {
        return Err(Error::refused(
            "--abandon needs the output whose job it abandons",
            "give the same -o as the job's other steps",
        ));
    };
    let folder = output.sharded.as_ref().map(|s| s.folder.as_path());
    let paths = Paths::of(path, folder);
    let abandoned = job::abandon(&paths, n)?;
    if !quiet {
        crate::messages::eprintln(format!(
            "abandoned the job of {}: removed {} of its files; the output is as it was",
            crate::messages::path(path),
            abandoned.removed.len()
        ));
    }
    Ok(())
}

/// The job's paths for an output described as `described`; `None` for no output.
fn paths(described: &Description) -> Option<Paths> {
    match *described {
        Description::None => None,
        Description::File(path) => Some(Paths::of(path, None)),
        Description::Sharded { path, shards } => Some(Paths::of(path, Some(&shards.folder))),
    }
}

/// Refuses what a job cannot share: no output, standard output or a device, a format
/// whose bytes depend on the data, inputs read from standard input (each worker would
/// read its own).
fn check_can_share(planning: &Planning) -> Result<()> {
    let output = match planning.planned.describe() {
        Description::None => {
            return Err(Error::refused(
                "a job of several workers needs an output",
                "name it with -o, the same in every step",
            ));
        }
        Description::File(path) => path,
        Description::Sharded { path, .. } => path,
    };
    let shown = crate::messages::path(output);
    let direct = matches!(planning.planned.describe(), Description::File(p)
        if crate::output::written_directly(p)
            || p.as_os_str() == crate::sys::STDOUT
            || p.symlink_metadata().is_ok_and(|m| m.file_type().is_symlink()));
    if direct {
        return Err(Error::refused(
            format!(
                "the output {shown} is not a regular file that a job can replace: a job's \
                 workers write a file beside it, which the commit renames over it"
            ),
            "name a regular file (the file a link points to, not the link) on a file system \
             every worker sees",
        ));
    }
    if planning.format != Format::Npy && planning.format != Format::SafeTensors {
        return Err(Error::refused(
            format!(
                "a job of several workers writes .npy and .safetensors outputs, whose headers \
                 fix every tensor's place before its data is written; {shown} is {}",
                planning.format.name()
            ),
            "write a .npy or .safetensors output (or a sharded folder), or join in one process",
        ));
    }
    if let Some(input) = planning.inputs.iter().find(|i| i.name.is_stdin()) {
        return Err(Error::refused(
            format!(
                "{} is standard input, which each worker of a job would read for itself",
                input.name
            ),
            "save it to a file every worker sees, and name that file",
        ));
    }
    Ok(())
}

/// The output's files laid out as bytes one after another: each framed by the writer with
/// nothing written, each tensor's data counted where it goes.
fn layout(planned: &Planned, writer: &mut dyn Writer, described: &[OutTensor]) -> Result<Layout> {
    let mut files = Vec::new();
    let mut start = 0u64;
    for file in planned.files() {
        let mut window = Window::new(None, &file.target, 0..0);
        let at = window.position();
        let mut tensors = Vec::new();
        kind::write_file(
            &file.tensors,
            described,
            writer,
            &mut window,
            &mut |index, _| {
                tensors.push((index, at.get()));
                at.set(at.get() + described[index].bytes);
                Ok(())
            },
        )?;
        let len = at.get();
        let name = file.target.file_name().and_then(|n| n.to_str());
        let Some(name) = name else {
            return Err(Error::refused(
                format!(
                    "the output file {} has no name a job can record (it is not UTF-8)",
                    crate::messages::path(&file.target)
                ),
                "name the output in UTF-8",
            ));
        };
        files.push(FileLayout {
            name: name.to_string(),
            start,
            len,
            tensors,
            framing: window.digest(),
        });
        start = start.saturating_add(len);
    }
    Ok(Layout {
        files,
        total: start,
    })
}

/// `total` bytes cut into `n` shares at page boundaries, balanced by bytes; the last ends at
/// `total`. A share may be empty when there are fewer pages than workers.
fn shares(total: u64, n: u32) -> Vec<[u64; 2]> {
    let cut = |k: u64| -> u64 {
        let at = (u128::from(total) * u128::from(k) / u128::from(n)) as u64;
        at / SHARE_ALIGN * SHARE_ALIGN
    };
    (0..u64::from(n))
        .map(|k| {
            let end = if k + 1 == u64::from(n) {
                total
            } else {
                cut(k + 1)
            };
            [cut(k), end]
        })
        .collect()
}

/// The part of `a` inside `b`.
fn overlap(a: Range<u64>, b: Range<u64>) -> Range<u64> {
    a.start.max(b.start)..a.end.min(b.end).max(a.start.max(b.start))
}

/// The digest of the plan of every tensor, the layout and the shares: what must be the same
/// in every step of a job.
fn digest(job: &[TensorJob], layout: &Layout, shares: &[[u64; 2]]) -> u128 {
    let mut text = String::new();
    for tensor in job {
        text.push_str(&format!(
            "{:?}\n{:?}\n{:?}\n",
            tensor.out, tensor.plan, tensor.placement
        ));
    }
    for file in &layout.files {
        let (name, len, tensors) = (&file.name, file.len, &file.tensors);
        text.push_str(&format!("{name} {len} {tensors:?} {:x}\n", file.framing));
    }
    text.push_str(&format!("{shares:?}"));
    job::digest(text.as_bytes())
}

/// Every file the inputs were read from, as it is now.
fn versions(inputs: &[Input]) -> Vec<Version> {
    use crate::input::source::Version as Now;
    inputs
        .iter()
        .flat_map(Input::versions)
        .map(|(location, version)| {
            let path = location.to_string();
            match version {
                Now::Local(stamp) => {
                    let (inode, len, changed) = stamp.version();
                    Version {
                        path,
                        inode,
                        len,
                        changed,
                        tag: None,
                    }
                }
                // An object's tag, compared as it is written.
                other => Version {
                    path,
                    inode: 0,
                    len: 0,
                    changed: (0, 0),
                    tag: Some(format!("{other:?}")),
                },
            }
        })
        .collect()
}

/// The job recorded beside the output, checked to be the one `fresh` (this step's plan)
/// describes: the same worker count, the same inputs unchanged, the same plan.
fn recorded(paths: &Paths, fresh: &Manifest) -> Result<Manifest> {
    let manifest = job::read(paths)?.ok_or_else(|| job::not_begun(paths))?;
    let output = crate::messages::path(&paths.output);
    if manifest.workers != fresh.workers {
        return Err(Error::refused(
            format!(
                "the job recorded for {output} has {} workers, and this step says {}",
                manifest.workers, fresh.workers
            ),
            format!(
                "give every step of the job the same count ({})",
                manifest.workers
            ),
        ));
    }
    let changed = fresh
        .inputs
        .iter()
        .zip(&manifest.inputs)
        .find(|(now, then)| !now.same(then));
    if let Some((now, then)) = changed {
        return Err(Error::refused(
            format!(
                "{} changed since the job began: it was {} bytes (inode {}, changed at {}.{:09}), \
                 and is {} bytes (inode {}, changed at {}.{:09}); a job never mixes old and new \
                 bytes",
                crate::messages::path(Path::new(&now.path)),
                then.len,
                then.inode,
                then.changed.0,
                then.changed.1,
                now.len,
                now.inode,
                now.changed.0,
                now.changed.1,
            ),
            "abandon the job (--workers N --abandon) and begin it again with the inputs as \
             they are now",
        ));
    }
    if manifest.inputs.len() != fresh.inputs.len()
        || manifest.digest != fresh.digest
        || manifest.files != fresh.files
        || manifest.shares != fresh.shares
    {
        return Err(Error::refused(
            format!(
                "this step plans {output} differently from the job recorded beside it ({}): \
                 the inputs, the flags or the output differ from those of --begin",
                crate::messages::path(&paths.manifest)
            ),
            "run every step of a job with the same command line (paths may differ, the files \
             they name may not); or abandon the job and begin it again",
        ));
    }
    Ok(manifest)
}

/// Whether a step says what it did on standard error: as a run prints its summary line,
/// where a progress bar would show (a terminal, or `--progress always`), unless `-q`.
fn says(config: &JoinConfig) -> bool {
    use std::io::IsTerminal;
    !config.quiet
        && match config.progress {
            When::Never => false,
            When::Always => true,
            When::Auto => std::io::stderr().is_terminal(),
        }
}

/// `--workers N --begin`: records the job and creates its data files.
fn begin(config: &JoinConfig, paths: &Paths, planning: &Planning, fresh: Manifest) -> Result<()> {
    if let Description::Sharded { shards, .. } = planning.planned.describe() {
        if config.output.no_clobber {
            shards.check_no_clobber()?;
        }
        shards.prepare_folder()?.keep();
    } else if config.output.no_clobber && paths.output.symlink_metadata().is_ok() {
        return Err(Error::refused(
            format!(
                "{} exists, and --no-clobber forbids replacing it",
                crate::messages::path(&paths.output)
            ),
            "remove it, or name another output",
        ));
    }
    let manifest = Manifest {
        token: job::new_token(),
        ..fresh
    };
    job::begin(paths, &manifest)?;
    if says(config) {
        let total: u64 = manifest.files.iter().map(|f| f.len).sum();
        let n = manifest.workers;
        crate::messages::eprintln(format!(
            "began a job of {n} workers for {} ({} bytes in {} file{}): run --worker I/{n} for \
             each I from 0 to {}, then --workers {n} --commit",
            crate::messages::path(&paths.output),
            total,
            manifest.files.len(),
            if manifest.files.len() == 1 { "" } else { "s" },
            n - 1
        ));
    }
    Ok(())
}

/// `--worker I/N`: writes share `worker` of the job into its data files, flushes them,
/// checks the inputs unchanged, and records that it finished.
fn work(
    config: &JoinConfig,
    paths: &Paths,
    manifest: &Manifest,
    worker: u32,
    (planning, layout, described): (Planning, &Layout, &[OutTensor]),
    engine: &mut Engine,
) -> Result<()> {
    let [start, end] = manifest.shares[worker as usize];
    let progress = progress::start(end - start, config.progress, planning.planned.shown_as());
    for (index, file) in layout.files.iter().enumerate() {
        let file_range = file.start..file.start + file.len;
        let keep = overlap(start..end, file_range);
        if keep.is_empty() {
            continue;
        }
        let keep = keep.start - file.start..keep.end - file.start;
        let data = job::open_data(paths, manifest, index)?;
        let target = &planning.planned.files()[index];
        let mut window =
            Window::new(Some(&data), &target.target, keep.clone()).counted(&progress.bar);
        let at = window.position();
        let job = planning.job;
        kind::write_file(
            &target.tensors,
            described,
            planning.writer,
            &mut window,
            &mut |t, sink| {
                let tensor_start = at.get();
                let bytes = described[t].bytes;
                let local = keep.start.saturating_sub(tensor_start)
                    ..keep.end.saturating_sub(tensor_start).min(bytes);
                if !local.is_empty() {
                    write_share(&job[t], t, local, (sink, &at, tensor_start), engine)?;
                }
                at.set(tensor_start + bytes);
                Ok(())
            },
        )?;
        data.sync_data()
            .map_err(|e| Error::io("flush the job's data file for", &target.target, e))?;
    }
    progress.finish();
    for input in planning.inputs {
        input.check_unchanged()?;
    }
    job::record_done(
        paths,
        &Done {
            tjoin_job: job::LAYOUT,
            token: manifest.token.clone(),
            digest: manifest.digest.clone(),
            worker,
            share: [start, end],
        },
    )?;
    progress.summary();
    Ok(())
}

/// Writes the bytes `local` of tensor `index`'s data (at least: a cut plan's edges and a plan
/// run whole write more, which the window drops) through `sink`, whose position `at` is at
/// the tensor's first byte, `tensor_start`.
fn write_share(
    tensor: &TensorJob,
    index: usize,
    local: Range<u64>,
    (sink, at, tensor_start): (&mut dyn crate::format::Sink, &job::Position, u64),
    engine: &mut Engine,
) -> Result<()> {
    let walked = tensor.placement.as_ref().is_some_and(|p| p.grid.walked());
    let cut = match walked {
        true => None,
        false => window::narrow(&tensor.plan, local),
    };
    let (from, bytes) = match cut {
        Some(cut) => {
            at.set(tensor_start + cut.start);
            let sources: Vec<&Tensor> = cut.sources.iter().map(|&s| tensor.sources[s]).collect();
            crate::engine::execute(&cut.plan, &sources, sink)?;
            (tensor_start + cut.start, cut.plan.bytes)
        }
        None => {
            engine.execute(index, tensor, sink)?;
            (tensor_start, tensor.plan.bytes)
        }
    };
    // The engine writes exactly its plan's bytes; anything else would put the next ones
    // out of place.
    if at.get() != from + bytes {
        return Err(Error::io(
            "write a share of",
            sink.name(),
            std::io::Error::other(format!(
                "the engine wrote {} bytes of a plan of {bytes}",
                at.get() - from
            )),
        ));
    }
    Ok(())
}

/// `--workers N --commit`: checks that every worker finished, flushes the data files, checks
/// the inputs unchanged, and puts the files in place; then removes the job's files.
fn commit(
    config: &JoinConfig,
    paths: &Paths,
    manifest: &Manifest,
    planning: Planning,
) -> Result<()> {
    let missing = job::unfinished(paths, manifest)?;
    if !missing.is_empty() {
        return Err(job::refuse_unfinished(paths, manifest, &missing));
    }
    let no_clobber = config.output.no_clobber;
    let mut data: Vec<(File, std::path::PathBuf)> = Vec::new();
    for (index, file) in manifest.files.iter().enumerate() {
        let opened = job::open_data(paths, manifest, index)?;
        let path = paths.data(&file.name, &manifest.token);
        opened
            .sync_all()
            .map_err(|e| Error::io("flush the job's data file", &path, e))?;
        data.push((opened, path));
    }
    let (set, folder) = match planning.planned.describe() {
        Description::Sharded { shards, .. } => {
            let folder = shards.prepare_folder()?;
            let mut set = shards.members(no_clobber)?;
            for (member, (file, path)) in set.members_mut().iter_mut().zip(data) {
                member.adopt(file, &path)?;
            }
            if shards.index.is_some() {
                let names: Vec<&str> = planning.job.iter().map(|t| t.out.name.as_str()).collect();
                let text = shards.index_text(&names);
                let index = set.members_mut().last_mut().expect("the index's member");
                let target = index.target().to_path_buf();
                crate::format::Sink::write_all(index, text.as_bytes())
                    .map_err(|e| Error::io("write the output", &target, e))?;
            }
            (set, Some(folder))
        }
        Description::File(path) => {
            let mut set = OutputSet::new(no_clobber);
            let (file, from) = data.into_iter().next().expect("one file");
            set.add(path)?.adopt(file, &from)?;
            (set, None)
        }
        Description::None => unreachable!("checked: a job has an output"),
    };
    for input in planning.inputs {
        input.check_unchanged()?;
    }
    set.commit()?;
    if let Some(folder) = folder {
        folder.keep();
    }
    job::finish(paths, manifest)?;
    if says(config) {
        crate::messages::eprintln(format!(
            "committed the job of {} workers: {} is in place",
            manifest.workers,
            crate::messages::path(&paths.output)
        ));
    }
    Ok(())
}
