//! A join or a split run by N workers (issue 45): `--workers N --begin`, `--worker I/N`,
//! `--workers N --commit`, and `--workers N --abandon`. Every step is the same command line
//! plus its flag, and every step but the abandon plans the run again from the inputs'
//! headers (the join's or the split's flow up to its outputs' plan), so that each can check
//! the others:
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
use std::path::{Path, PathBuf};

use crate::backend::Engine;
use crate::config::PlanForm;
use crate::config::When;
use crate::error::{Error, Result};
use crate::format::{Format, OutTensor, Sink, Writer};
use crate::input::{Input, Tensor};
use crate::output::OutputSet;
use crate::output::job::{self, Done, JobFile, Manifest, Paths, Step, Version, Window};
use crate::output::kind::{self, Description, Planned};
use crate::output::progress;
use crate::output::several::Several;
use crate::plan::tensor_job::TensorJob;
use crate::plan::window;
use crate::report::{PlanReport, ShareReport};

mod checks;
#[cfg(feature = "remote")]
mod s3;

use checks::{Remote, check_can_share, remote_output};

/// Shares start at multiples of this: a page, so that no two workers write one page.
const SHARE_ALIGN: u64 = 4096;

/// What a step of a job is given of the planned run.
pub(crate) struct Planning<'a, 'j> {
    /// The outputs: the join's one, or each of a split's.
    pub parts: Vec<Part<'a, 'j>>,
    /// The inputs, open.
    pub inputs: &'a [Input],
}

/// One output of a job: its files as its kind plans them, their tensors and its writer.
pub(crate) struct Part<'a, 'j> {
    /// Its files, each with its tensors (indexes into `job`) in the order written.
    pub planned: &'a Planned,
    /// Every output tensor's plan.
    pub job: &'a [TensorJob<'j>],
    /// Its format's writer.
    pub writer: &'a mut dyn Writer,
    /// Its format.
    pub format: Format,
}

/// What the command line asks of every step, beyond the plan.
pub(crate) struct Asked {
    /// Refuse to replace an existing output.
    pub no_clobber: bool,
    /// `--part-size`: the part size of an output in object storage, which `--begin` cuts
    /// by and records.
    pub part_size: Option<u64>,
    /// When to show progress (and a step's own lines).
    pub progress: When,
    /// Print nothing but errors.
    pub quiet: bool,
}

impl Asked {
    /// What the output's config asks of every step, with how to show progress.
    pub(crate) fn of(output: &crate::config::OutputConfig, progress: When, quiet: bool) -> Asked {
        Asked {
            no_clobber: output.no_clobber,
            part_size: output.part_size,
            progress,
            quiet,
        }
    }
}

impl<'a, 'j> Planning<'a, 'j> {
    /// The join's one output, as `planned` plans it.
    pub(crate) fn join(
        planned: &'a Planned,
        inputs: &'a [Input],
        job: &'a [TensorJob<'j>],
        writer: &'a mut dyn Writer,
        format: Format,
    ) -> Planning<'a, 'j> {
        Planning {
            parts: vec![Part {
                planned,
                job,
                writer,
                format,
            }],
            inputs,
        }
    }
}

/// The output's files as bytes one after another.
struct Layout {
    files: Vec<FileLayout>,
    total: u64,
    /// The folders the files are in: the job's first (where its manifest is), then each
    /// other in the order of the files (a split's sharded outputs, each in its own).
    folders: Vec<PathBuf>,
}

/// One file of the layout.
struct FileLayout {
    /// The output it belongs to, and its place among that output's files.
    part: usize,
    file: usize,
    /// Where it goes.
    target: PathBuf,
    /// Its name in the output's folder.
    name: String,
    /// The folder it is in, numbered in [`Layout::folders`].
    folder: u32,
    /// Where its bytes start among all the files'.
    start: u64,
    /// Its length.
    len: u64,
    /// Where each of its tensors' data starts in it, with the tensor's index in the job.
    tensors: Vec<(usize, u64)>,
    /// The digest of its framing (headers), which the workers whose shares hold it write.
    framing: u128,
}

/// Runs `step` of a job over the planned run; the abandon needs no plan ([`abandon`]).
/// `engine` is the join's (`None`: the CPU engine); `carried_out` the plan `--print-plan`
/// prints once the step is done.
pub(crate) fn run(
    asked: &Asked,
    step: Step,
    planning: Planning,
    engine: Option<&mut Engine>,
    carried_out: Option<(PlanReport, PlanForm)>,
) -> Result<()> {
    let shares = run_step(asked, step, planning, engine)?;
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

/// Runs `step` of a job over the planned run (as [`run`]), and returns each worker's share
/// as the plan report shows it.
pub(crate) fn run_step(
    asked: &Asked,
    step: Step,
    mut planning: Planning,
    engine: Option<&mut Engine>,
) -> Result<Vec<ShareReport>> {
    let (remote, paths, layout) = laid_out(&mut planning)?;
    let n = step.workers();
    // A worker's and the commit's job in the bucket, read once for its part size and checks.
    #[cfg_attr(not(feature = "remote"), allow(unused_variables))]
    let (part_size, read): (Option<u64>, Option<Manifest>) = match remote {
        #[cfg(feature = "remote")]
        Some(remote) => s3::part_size_of((remote, &layout), step, asked.part_size)?,
        _ => (None, None),
    };
    let shares = job_shares(remote, &layout, n, part_size)?;
    let fresh = Manifest {
        tjoin_job: job::LAYOUT,
        tjoin: env!("CARGO_PKG_VERSION").to_string(),
        token: String::new(),
        workers: n,
        digest: format!(
            "{:032x}",
            digest(&planning, &layout, &shares, remote.is_some())
        ),
        inputs: versions(planning.inputs),
        files: layout
            .files
            .iter()
            .map(|f| JobFile {
                name: f.name.clone(),
                len: f.len,
                folder: f.folder,
            })
            .collect(),
        shares,
        upload: None,
    };
    let shares = share_reports(&layout, &fresh.shares);
    let positions: Vec<usize> = planning
        .inputs
        .iter()
        .flat_map(|i| i.versions().map(|_| i.name.position))
        .collect();
    match (step, paths) {
        #[cfg(feature = "remote")]
        (_, None) => {
            let output = remote.map(|r| s3::location(r.url, r.sharded)).transpose()?;
            let output = output.ok_or_else(|| Error::io("write", Path::new(""), io_other()))?;
            let fresh = (fresh, positions.as_slice(), read);
            s3::run(asked, step, &output, fresh, planning, &layout, engine)?;
        }
        #[cfg(not(feature = "remote"))]
        (_, None) => return Err(not_built(remote.map(|r| r.url))),
        (Step::Begin(_), Some(paths)) => begin(asked, &paths, &planning, fresh)?,
        (Step::Worker(worker, _), Some(paths)) => {
            let manifest = recorded(&paths, &fresh, &positions)?;
            work(
                asked,
                (&paths, &manifest, worker),
                planning,
                &layout,
                engine,
            )?;
        }
        (Step::Commit(_), Some(paths)) => {
            let manifest = recorded(&paths, &fresh, &positions)?;
            commit(asked, &paths, &manifest, planning, &layout)?;
        }
        (Step::Shares(_) | Step::Abandon(_), Some(_)) => unreachable!("handled by the flow"),
    }
    Ok(shares)
}

#[cfg(feature = "remote")]
fn io_other() -> std::io::Error {
    std::io::Error::other("no output")
}

/// The refusal of an output in object storage by a build without it.
#[cfg(not(feature = "remote"))]
fn not_built(output: Option<&Path>) -> Error {
    let output = output.unwrap_or(Path::new(""));
    match crate::sys::remote::Location::parse(&output.to_string_lossy()) {
        Ok(location) => Error::io("write", output, crate::sys::remote::not_built(&location)),
        Err(why) => Error::io("write", output, std::io::Error::other(why)),
    }
}

/// The shares of a job of `n` workers over `layout`: at page boundaries for a local output,
/// at part boundaries for an object (`remote`), its parts of `part_size` when given.
fn job_shares(
    remote: Option<Remote>,
    layout: &Layout,
    n: u32,
    #[cfg_attr(not(feature = "remote"), allow(unused_variables))] part_size: Option<u64>,
) -> Result<Vec<[u64; 2]>> {
    match remote {
        None => Ok(shares(layout.total, n)),
        #[cfg(feature = "remote")]
        Some(remote) => {
            let lens: Vec<u64> = layout.files.iter().map(|f| f.len).collect();
            s3::shares(remote.url, remote.sharded, &lens, (n, part_size))
        }
        #[cfg(not(feature = "remote"))]
        Some(remote) => Err(not_built(Some(remote.url))),
    }
}

/// Each worker's share, for `--dry-run` with `--workers N` (an object's parts of `part_size`
/// when given).
pub(crate) fn share_report(
    mut planning: Planning,
    n: u32,
    part_size: Option<u64>,
) -> Result<Vec<ShareReport>> {
    let (remote, _, layout) = laid_out(&mut planning)?;
    Ok(share_reports(
        &layout,
        &job_shares(remote, &layout, n, part_size)?,
    ))
}

/// What the plan report shows of `shares` of `layout`.
/// Files are shown by name, or by path when they are in several folders.
fn share_reports(layout: &Layout, shares: &[[u64; 2]]) -> Vec<ShareReport> {
    let several = layout.folders.len() > 1;
    let files = |start, end| {
        let within = |f: &&FileLayout| !overlap(start..end, f.start..f.start + f.len).is_empty();
        layout
            .files
            .iter()
            .filter(within)
            .map(|f| match several {
                true => f.target.display().to_string(),
                false => f.name.clone(),
            })
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

/// `--workers N --abandon`: removes the job's files beside the output `path` (a sharded
/// output's folder `folder`), planning nothing (its inputs may be gone).
pub(crate) fn abandon(
    path: Option<&Path>,
    folder: Option<&Path>,
    n: u32,
    quiet: bool,
) -> Result<()> {
    abandon_in(path, folder, Vec::new(), n, quiet)
}

/// `--workers N --abandon` (as [`abandon`]) of a job whose data files may also be in the
/// folders `more` (a split's sharded outputs' own).
pub(crate) fn abandon_in(
    path: Option<&Path>,
    folder: Option<&Path>,
    more: Vec<PathBuf>,
    n: u32,
    quiet: bool,
) -> Result<()> {
    let Some(path) = path else {
        return Err(Error::refused(
            "--abandon needs the output whose job it abandons",
            "give the same -o as the job's other steps",
        ));
    };
    if crate::sys::remote::is_url(path) {
        #[cfg(feature = "remote")]
        return s3::abandon(path, &more, n, quiet);
        #[cfg(not(feature = "remote"))]
        return Err(not_built(Some(path)));
    }
    let paths = Paths::of(path, folder).with_folders(more);
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

/// The outputs' files laid out as bytes one after another: each framed by its writer with
/// nothing written, each tensor's data counted where it goes.
/// `first` is the job's folder (`None` for an output in object storage).
/// The planned run laid out for a job (every step's, and a dry run's, the same): the output
/// in object storage, if it is; else the local job's paths, with the layout's folders.
fn laid_out<'p>(
    planning: &mut Planning<'p, '_>,
) -> Result<(Option<Remote<'p>>, Option<Paths>, Layout)> {
    let remote = remote_output(planning)?;
    let paths = match remote {
        None => Some(check_can_share(planning)?),
        Some(_) => None,
    };
    let layout = layout(planning, paths.as_ref().map(|p| p.folder.as_path()))?;
    let paths = paths.map(|p| p.with_folders(layout.folders.iter().cloned()));
    Ok((remote, paths, layout))
}

fn layout(planning: &mut Planning, first: Option<&Path>) -> Result<Layout> {
    let mut files = Vec::new();
    let mut start = 0u64;
    let mut folders: Vec<PathBuf> = first.map(Path::to_path_buf).into_iter().collect();
    for (p, part) in planning.parts.iter_mut().enumerate() {
        let described = described(part.job);
        for (f, planned) in part.planned.files().iter().enumerate() {
            let (target, order) = (&planned.target, &planned.tensors);
            let mut window = Window::new(None, target, 0..0);
            let at = window.position();
            let mut tensors = Vec::new();
            kind::write_file(
                order,
                &described,
                &mut *part.writer,
                &mut window,
                &mut |index, _| {
                    tensors.push((index, at.get()));
                    at.set(at.get() + described[index].bytes);
                    Ok(())
                },
            )?;
            let len = at.get();
            let Some(name) = target.file_name().and_then(|n| n.to_str()) else {
                return Err(Error::refused(
                    format!(
                        "the output file {} has no name a job can record (it is not UTF-8)",
                        crate::messages::path(target)
                    ),
                    "name the output in UTF-8",
                ));
            };
            let folder = crate::sys::folder_of(target);
            let folder = match folders.iter().position(|known| known == folder) {
                Some(known) => known,
                None => {
                    folders.push(folder.to_path_buf());
                    folders.len() - 1
                }
            };
            files.push(FileLayout {
                part: p,
                file: f,
                target: target.clone(),
                name: name.to_string(),
                folder: u32::try_from(folder).unwrap_or(u32::MAX),
                start,
                len,
                tensors,
                framing: window.digest(),
            });
            start = start.saturating_add(len);
        }
    }
    Ok(Layout {
        files,
        total: start,
        folders,
    })
}

/// The output tensors of `job`, as the writer sees them.
fn described(job: &[TensorJob]) -> Vec<OutTensor> {
    job.iter().map(|t| t.out.clone()).collect()
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
/// in every step of a job. An output in object storage (`remote`) is named alike on every
/// machine, so its files' URLs are in it too: a step naming a split's other outputs
/// elsewhere is refused as a different plan, not left to upload into another key.
fn digest(planning: &Planning, layout: &Layout, shares: &[[u64; 2]], remote: bool) -> u128 {
    let mut text = String::new();
    for tensor in planning.parts.iter().flat_map(|p| p.job) {
        text.push_str(&format!(
            "{:?}\n{:?}\n{:?}\n",
            tensor.out, tensor.plan, tensor.placement
        ));
    }
    for file in &layout.files {
        let (name, len, tensors) = (&file.name, file.len, &file.tensors);
        text.push_str(&format!("{name} {len} {tensors:?} {:x}\n", file.framing));
        if remote {
            text.push_str(&format!("{}\n", file.target.display()));
        }
    }
    text.push_str(&format!("{shares:?}"));
    job::digest(text.as_bytes())
}

/// Every file the inputs were read from, as it is now: a local file's identity, length and
/// change time; an object's ETag, as its store gave it (every read of the object is pinned
/// to it, so that a step whose ETags are the manifest's reads the manifest's bytes). The
/// path is for messages only, its secrets redacted (a pre-signed URL's query): the manifest
/// is a file anyone who sees the output may read.
fn versions(inputs: &[Input]) -> Vec<Version> {
    use crate::input::source::Version as Now;
    inputs
        .iter()
        .flat_map(Input::versions)
        .map(|(location, version)| {
            let path = location.as_path().to_string_lossy();
            let path = crate::messages::redact_urls(&path).into_owned();
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
                Now::Tag(tag) => Version {
                    path,
                    inode: 0,
                    len: 0,
                    changed: (0, 0),
                    tag: Some(tag.to_string()),
                },
            }
        })
        .collect()
}

/// What a message says a recorded input file was: its ETag, or its length, inode and change
/// time.
fn was(version: &Version) -> String {
    match &version.tag {
        Some(tag) => format!("its ETag {}", crate::messages::name(tag)),
        None => format!(
            "{} bytes (inode {}, changed at {}.{:09})",
            version.len, version.inode, version.changed.0, version.changed.1
        ),
    }
}

/// The job recorded beside the output, checked to be the one `fresh` (this step's plan)
/// describes: the same worker count, the same inputs unchanged, the same plan.
/// `positions` gives the input each of `fresh.inputs` belongs to (a sharded input has a file
/// per shard).
fn recorded(paths: &Paths, fresh: &Manifest, positions: &[usize]) -> Result<Manifest> {
    let manifest = job::read(paths)?.ok_or_else(|| job::not_begun(paths))?;
    let shown = (
        crate::messages::path(&paths.output),
        crate::messages::path(&paths.manifest),
    );
    check_recorded(manifest, fresh, positions, shown)
}

/// `manifest`, the job recorded for the output, checked to be the one `fresh` describes
/// (see [`recorded`]); `output` and `manifest` as messages show them.
fn check_recorded(
    manifest: Manifest,
    fresh: &Manifest,
    positions: &[usize],
    (output, shown_manifest): (String, String),
) -> Result<Manifest> {
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
        .zip(positions)
        .find(|((now, then), _)| !now.same(then));
    if let Some(((now, then), position)) = changed {
        return Err(Error::refused(
            format!(
                "input {position} ({}) changed since the job began: it was {}, and is {}; a \
                 job never mixes old and new bytes",
                crate::messages::path(Path::new(&now.path)),
                was(then),
                was(now),
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
                "this step plans {output} differently from the job recorded beside it \
                 ({shown_manifest}): the inputs, the flags or the output differ from those of \
                 --begin"
            ),
            "run every step of a job with the same command line (paths may differ, the files \
             they name may not); or abandon the job and begin it again",
        ));
    }
    Ok(manifest)
}

/// The outputs of `planning` as a step's line names them: the first (`first`, shown), and
/// how many more a split has.
fn outputs_shown(first: String, planning: &Planning) -> String {
    match planning.parts.len() {
        0 | 1 => first,
        2 => format!("{first} and 1 more output"),
        n => format!("{first} and {} more outputs", n - 1),
    }
}

/// Whether a step says what it did on standard error: as a run prints its summary line,
/// where a progress bar would show (a terminal, or `--progress always`), unless `-q`.
fn says(asked: &Asked) -> bool {
    use std::io::IsTerminal;
    !asked.quiet
        && match asked.progress {
            When::Never => false,
            When::Always => true,
            When::Auto => std::io::stderr().is_terminal(),
        }
}

/// `--workers N --begin`: records the job and creates its data files.
fn begin(asked: &Asked, paths: &Paths, planning: &Planning, fresh: Manifest) -> Result<()> {
    let outputs: Vec<&Planned> = planning.parts.iter().map(|p| p.planned).collect();
    if asked.no_clobber {
        Several::new(outputs.clone(), true).check_no_clobber()?;
    }
    for output in outputs {
        if let Description::Sharded { shards, .. } = output.describe() {
            shards.prepare_folder()?.keep();
        }
    }
    let manifest = Manifest {
        token: job::new_token(),
        ..fresh
    };
    job::begin(paths, &manifest)?;
    if says(asked) {
        let total: u64 = manifest.files.iter().map(|f| f.len).sum();
        let n = manifest.workers;
        crate::messages::eprintln(format!(
            "began a job of {n} workers for {} ({} bytes in {} file{}): run --worker I/{n} for \
             each I from 0 to {}, then --workers {n} --commit",
            outputs_shown(crate::messages::path(&paths.output), planning),
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
    asked: &Asked,
    (paths, manifest, worker): (&Paths, &Manifest, u32),
    mut planning: Planning,
    layout: &Layout,
    mut engine: Option<&mut Engine>,
) -> Result<()> {
    let [start, end] = manifest.shares[worker as usize];
    let progress = progress::start(end - start, asked.progress, &paths.output);
    for (index, file) in layout.files.iter().enumerate() {
        let keep = overlap(start..end, file.start..file.start + file.len);
        if keep.is_empty() {
            continue;
        }
        let keep = keep.start - file.start..keep.end - file.start;
        let data = job::open_data(paths, manifest, index)?;
        let mut window = Window::new(Some(&data), &file.target, keep).counted(&progress.bar);
        write_window(&mut planning, file, &mut window, engine.as_deref_mut())?;
        data.sync_data()
            .map_err(|e| Error::io("flush the job's data file for", &file.target, e))?;
    }
    progress.finish();
    for input in planning.inputs {
        input.check_unchanged()?;
    }
    job::record_done(paths, &Done::of(manifest, worker, Vec::new()))?;
    progress.summary();
    Ok(())
}

/// Writes the bytes of `file` that `window` keeps (a range of the file's own bytes) through
/// it: the framing, and of each tensor only what the window needs ([`write_share`]).
fn write_window(
    planning: &mut Planning,
    file: &FileLayout,
    window: &mut Window,
    mut engine: Option<&mut Engine>,
) -> Result<()> {
    let keep = window.keep();
    let at = window.position();
    let part = &mut planning.parts[file.part];
    let described = described(part.job);
    let job = part.job;
    let order = &part.planned.files()[file.file].tensors;
    kind::write_file(
        order,
        &described,
        &mut *part.writer,
        window,
        &mut |t, sink| {
            let tensor_start = at.get();
            let bytes = described[t].bytes;
            let local = keep.start.saturating_sub(tensor_start)
                ..keep.end.saturating_sub(tensor_start).min(bytes);
            if !local.is_empty() {
                let engine = engine.as_deref_mut();
                write_share(&job[t], t, local, (sink, &at, tensor_start), engine)?;
            }
            at.set(tensor_start + bytes);
            Ok(())
        },
    )
}

/// Writes the bytes `local` of tensor `index`'s data (at least: a cut plan's edges and a plan
/// run whole write more, which the window drops) through `sink`, whose position `at` is at
/// the tensor's first byte, `tensor_start`; a plan not cut runs on `engine` (`None`: the CPU
/// engine).
fn write_share(
    tensor: &TensorJob,
    index: usize,
    local: Range<u64>,
    (sink, at, tensor_start): (&mut dyn Sink, &job::Position, u64),
    engine: Option<&mut Engine>,
) -> Result<()> {
    let walked = tensor.placement.as_ref().filter(|p| p.grid.walked());
    let cut = match walked {
        Some(_) => None,
        None => window::narrow(&tensor.plan, local),
    };
    let (from, bytes) = match (cut, engine) {
        (Some(cut), _) => {
            at.set(tensor_start + cut.start);
            let sources: Vec<&Tensor> = cut.sources.iter().map(|&s| tensor.sources[s]).collect();
            crate::engine::execute(&cut.plan, &sources, sink)?;
            (tensor_start + cut.start, cut.plan.bytes)
        }
        (None, Some(engine)) => {
            engine.execute(index, tensor, sink)?;
            (tensor_start, tensor.plan.bytes)
        }
        (None, None) => {
            match walked {
                Some(p) => {
                    crate::engine::blocks::execute(&tensor.plan, &p.grid, &tensor.sources, sink)?
                }
                None => crate::engine::execute(&tensor.plan, &tensor.sources, sink)?,
            }
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
    asked: &Asked,
    paths: &Paths,
    manifest: &Manifest,
    planning: Planning,
    layout: &Layout,
) -> Result<()> {
    let missing = job::unfinished(paths, manifest)?;
    if !missing.is_empty() {
        return Err(job::refuse_unfinished(paths, manifest, &missing));
    }
    let mut data: Vec<(File, PathBuf)> = Vec::new();
    for (index, file) in manifest.files.iter().enumerate() {
        let opened = job::open_data(paths, manifest, index)?;
        let path = paths.data_of(file, &manifest.token);
        opened
            .sync_all()
            .map_err(|e| Error::io("flush the job's data file", &path, e))?;
        data.push((opened, path));
    }
    let outputs: Vec<&Planned> = planning.parts.iter().map(|p| p.planned).collect();
    let set = adopted(&outputs, layout, data, asked.no_clobber)?;
    for input in planning.inputs {
        input.check_unchanged()?;
    }
    set.commit()?;
    job::finish(paths, manifest)?;
    if says(asked) {
        crate::messages::eprintln(format!(
            "committed the job of {} workers: {} {} in place",
            manifest.workers,
            outputs_shown(crate::messages::path(&paths.output), &planning),
            if planning.parts.len() > 1 {
                "are"
            } else {
                "is"
            },
        ));
    }
    Ok(())
}

/// The set the outputs are committed as, as any run's outputs are ([`Several`]: each one's
/// files, then its index, the previous set's files to remove), with `data` (the job's data
/// files, in the layout's order) adopted as their files and the indexes written. Their
/// folders exist: `--begin` made a sharded output's.
fn adopted(
    outputs: &[&Planned],
    layout: &Layout,
    data: Vec<(File, PathBuf)>,
    no_clobber: bool,
) -> Result<OutputSet> {
    let mut set = Several::new(outputs.to_vec(), no_clobber).open()?;
    let indexes: Vec<(PathBuf, &str)> = outputs
        .iter()
        .filter_map(|o| Some((o.index_target()?, o.index_text()?)))
        .collect();
    let mut data = layout.files.iter().map(|f| &f.target).zip(data);
    for member in set.members_mut() {
        let target = member.target().to_path_buf();
        if let Some((_, text)) = indexes.iter().find(|(index, _)| *index == target) {
            Sink::write_all(member, text.as_bytes())
                .map_err(|e| Error::io("write the output", &target, e))?;
            continue;
        }
        match data.next() {
            Some((planned, (file, from))) if *planned == target => member.adopt(file, &from)?,
            _ => {
                let why = std::io::Error::other("the job's files and the output's differ");
                return Err(Error::io("commit the job's output", &target, why));
            }
        }
    }
    Ok(set)
}
