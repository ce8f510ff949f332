//! The steps of a job whose output is in S3 (`-o s3://BUCKET/KEY`, or a sharded set under
//! `s3://BUCKET/PREFIX/`; a split's outputs, files under one prefix or sharded outputs each
//! under its own, in one bucket): the same plan, layout and checks as a local job's
//! (`super`), with each output file's bytes uploaded as the parts of its multipart upload
//! instead of written into a data file beside it (`output::job::s3` keeps the job's objects,
//! beside the first output; `sys::remote::parts` makes the calls):
//!
//! - `--begin` cuts the files into parts and the parts into N runs balanced by bytes,
//!   creates the uploads, and records the manifest in the bucket by a conditional create;
//! - `--worker I/N` streams its share through the window into parts, each part's body sent
//!   as it is produced (a few MiB in memory whatever the part size; no temporary file), a
//!   part the network failed produced again and sent again; checks the inputs unchanged once
//!   all is read, and records the parts' ETags;
//! - `--commit` reads every record, refuses naming the workers missing (nothing is
//!   completed), checks the inputs unchanged, completes each upload with its ETags in order
//!   (every sharded set's index after every file, each as one PUT) and removes the job's
//!   objects; `--abandon` aborts the uploads and removes them.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{Asked, FileLayout, Layout, Planning, Remote, says};
use crate::backend::Engine;
use crate::error::{Error, Result};
use crate::output::job::s3::{self as objects, Objects};
use crate::output::job::{self, Done, FileUpload, Manifest, Step, Window};
use crate::output::kind::Planned;
use crate::output::progress;
use crate::sys::remote::Location;
use crate::sys::remote::parts::{self, PartStream, Sent};

/// The output's URL as a location: an object in S3, or (`sharded`) a prefix or an index.
pub(super) fn location(url: &Path, sharded: bool) -> Result<Location> {
    let location = Location::parse(&url.to_string_lossy()).map_err(|why| {
        Error::refused(
            format!(
                "the output {} is not a URL tjoin writes: {why}",
                crate::messages::path(url)
            ),
            "name the object as s3://BUCKET/KEY",
        )
    })?;
    if location.scheme != crate::sys::remote::Scheme::S3 || (location.is_prefix() && !sharded) {
        return Err(Error::refused(
            format!(
                "{} is not in S3 as a job of several workers writes it: one object, or a \
                 sharded set under a prefix",
                crate::messages::path(url)
            ),
            "name an object as s3://BUCKET/KEY or a prefix as s3://BUCKET/PREFIX/ (S3, or an \
             S3-compatible store through AWS_ENDPOINT_URL), or run it in one process",
        ));
    }
    Ok(location)
}

/// Refuses a split's outputs a job in S3 cannot keep together (`first` the first output):
/// outputs in several buckets, or files (not sharded outputs, each in its own prefix)
/// outside the first output's prefix, where the job's objects are.
pub(super) fn check_outputs(planning: &Planning, first: Remote) -> Result<()> {
    let first_at = location(first.url, first.sharded)?;
    let prefix = objects::folder_of(&first_at);
    for part in planning.parts.iter().skip(1) {
        let Some(remote) = Remote::of(part.planned.describe()) else {
            continue;
        };
        let at = location(remote.url, remote.sharded)?;
        let (shown, other) = (
            crate::messages::path(first.url),
            crate::messages::path(remote.url),
        );
        if at.bucket != first_at.bucket {
            return Err(Error::refused(
                format!(
                    "the outputs {shown} and {other} are in different buckets, and a job keeps \
                     its objects in one, beside its first output"
                ),
                "name every output in one bucket (and copy them elsewhere once the job is \
                 committed)",
            ));
        }
        if !remote.sharded && objects::folder_of(&at) != prefix {
            return Err(Error::refused(
                format!(
                    "the outputs {shown} and {other} are under different prefixes, and a job \
                     keeps its objects under one, beside its first output"
                ),
                "name the outputs under one prefix (-o 's3://BUCKET/PREFIX/tp{rank}.safetensors'), \
                 or as sharded outputs each under its own (-o 's3://BUCKET/tp{rank}/')",
            ));
        }
    }
    Ok(())
}

/// The shares of files of `lens` bytes among `n` workers: runs of whole parts, of
/// `part_size` bytes when given.
pub(super) fn shares(
    url: &Path,
    sharded: bool,
    lens: &[u64],
    (n, part_size): (u32, Option<u64>),
) -> Result<Vec<[u64; 2]>> {
    let objects = Objects::of(&location(url, sharded)?);
    let longest = lens.iter().copied().max().unwrap_or(0);
    let cut = objects::cut(lens, n, part_size)
        .ok_or_else(|| objects::too_large(&objects, longest, part_size))?;
    Ok(cut.shares)
}

/// The job's objects beside `output`, its files under the prefixes `layout`'s targets name;
/// and each file's object as the plan names it.
fn objects_for(output: &Location, layout: &Layout) -> (Objects, Vec<Option<Location>>) {
    let planned: Vec<Option<Location>> = layout
        .files
        .iter()
        .map(|file| Location::parse(&file.target.to_string_lossy()).ok())
        .collect();
    let objects = Objects::of(output).with_folders(planned.iter().flatten().cloned());
    (objects, planned)
}

/// The part size the shares of `step` of the job of `output`, laid out as `layout`, are cut
/// by: `asked` (`--part-size`) at `--begin` and in a dry run; for a worker and the commit,
/// the one `--begin` recorded (given to them, `--part-size` must be that one). With it, for
/// a worker and the commit, the job's manifest as read (once: [`run`] checks that one).
pub(super) fn part_size_of(
    (output, layout): (Remote, &Layout),
    step: Step,
    asked: Option<u64>,
) -> Result<(Option<u64>, Option<Manifest>)> {
    if !matches!(step, Step::Worker(..) | Step::Commit(_)) {
        return Ok((asked, None));
    }
    let (objects, _) = objects_for(&location(output.url, output.sharded)?, layout);
    let manifest = objects::read(&objects)?;
    let upload = manifest.as_ref().and_then(|m| m.upload.as_ref());
    let Some(recorded) = upload.map(|upload| upload.part_size) else {
        // No job: the step refuses it once planned.
        return Ok((asked, manifest));
    };
    match asked {
        Some(given) if recorded != Some(given) => {
            let began = recorded
                .map_or("the least that fits (no --part-size)".to_string(), |size| {
                    format!("--part-size {size} bytes")
                });
            Err(Error::refused(
                format!(
                    "--part-size {given} bytes: the job recorded for {} cut its parts by {began}",
                    objects.shown()
                ),
                "drop --part-size (the workers and the commit use the size --begin recorded)",
            ))
        }
        _ => Ok((recorded, manifest)),
    }
}

/// Runs `step` of the job whose output is at `output`; `fresh` is this step's plan of the
/// manifest, with the input each of its inputs' files belongs to, and `read` the job's
/// manifest as [`part_size_of`] read it (for a worker and the commit).
pub(super) fn run(
    asked: &Asked,
    step: Step,
    output: &Location,
    (fresh, positions, read): (Manifest, &[usize], Option<Manifest>),
    planning: Planning,
    layout: &Layout,
    engine: Option<&mut Engine>,
) -> Result<()> {
    let (objects, planned) = objects_for(output, layout);
    // Each file's object, as the plan names it, must be the one its name and prefix in the
    // manifest give (the later steps know it by those alone).
    for (file, planned) in layout.files.iter().zip(&planned) {
        if planned.is_none() || *planned != objects.file(file.folder, &file.name) {
            let why = std::io::Error::other("its object is not named as the job names it");
            return Err(Error::io("plan the job of", &file.target, why));
        }
    }
    match step {
        Step::Begin(_) => begin(asked, &objects, fresh, &planning),
        Step::Worker(worker, _) => {
            let manifest = recorded(&objects, read, &fresh, positions)?;
            work(
                asked,
                (&objects, &manifest, worker),
                planning,
                layout,
                engine,
            )
        }
        Step::Commit(_) => {
            let manifest = recorded(&objects, read, &fresh, positions)?;
            commit(asked, &objects, &manifest, planning)
        }
        Step::Shares(_) | Step::Abandon(_) => unreachable!("handled by the flow"),
    }
}

/// The job recorded in the bucket (`read`), checked to be the one `fresh` describes.
fn recorded(
    objects: &Objects,
    read: Option<Manifest>,
    fresh: &Manifest,
    positions: &[usize],
) -> Result<Manifest> {
    let manifest = read.ok_or_else(|| objects::not_begun(objects))?;
    let shown = (
        objects.shown(),
        crate::messages::path(Path::new(&objects.manifest.url())),
    );
    super::check_recorded(manifest, fresh, positions, shown)
}

/// The objects a job writes: each output file's and each index's.
fn targets(objects: &Objects, manifest: &Manifest, planning: &Planning) -> Vec<Location> {
    let files = manifest
        .files
        .iter()
        .filter_map(|f| objects.file(f.folder, &f.name));
    let indexes = indexes(planning).into_iter().map(|(at, _)| at);
    files.chain(indexes).collect()
}

/// `--no-clobber`: refuses when any of `targets` exists.
fn refuse_existing(asked: &Asked, targets: &[Location]) -> Result<()> {
    if !asked.no_clobber {
        return Ok(());
    }
    let targets: Vec<&Location> = targets.iter().collect();
    match objects::existing(&targets)? {
        Some(there) => Err(exists(there)),
        None => Ok(()),
    }
}

/// Each sharded output's index, in the outputs' order: its object and its text.
fn indexes(planning: &Planning) -> Vec<(Location, String)> {
    let index = |planned: &Planned| {
        let at = Location::parse(&planned.index_target()?.to_string_lossy()).ok()?;
        Some((at, planned.index_text()?.to_string()))
    };
    planning
        .parts
        .iter()
        .filter_map(|part| index(part.planned))
        .collect()
}

/// `--workers N --begin`: creates the uploads and records the job in the bucket.
fn begin(asked: &Asked, objects: &Objects, fresh: Manifest, planning: &Planning) -> Result<()> {
    refuse_existing(asked, &targets(objects, &fresh, planning))?;
    let manifest = objects::begin(
        objects,
        Manifest {
            token: job::new_token(),
            ..fresh
        },
        asked.part_size,
    )?;
    if says(asked) {
        let n = manifest.workers;
        let (total, parts) = match &manifest.upload {
            Some(upload) => (
                manifest.files.iter().map(|f| f.len).sum::<u64>(),
                upload.parts.iter().map(|[_, count]| count).sum::<u32>(),
            ),
            None => (0, 0),
        };
        crate::messages::eprintln(format!(
            "began a job of {n} workers for {} ({total} bytes in {parts} parts): run \
             --worker I/{n} for each I from 0 to {}, then --workers {n} --commit",
            super::outputs_shown(objects.shown(), planning),
            n - 1
        ));
    }
    Ok(())
}

/// `--worker I/N`: streams share `worker` into its parts, checks the inputs unchanged, and
/// records the parts' ETags.
fn work(
    asked: &Asked,
    (objects, manifest, worker): (&Objects, &Manifest, u32),
    mut planning: Planning,
    layout: &Layout,
    engine: Option<&mut Engine>,
) -> Result<()> {
    let upload = manifest
        .upload
        .as_ref()
        .ok_or_else(|| objects::not_begun(objects))?;
    let [start, end] = manifest.shares[worker as usize];
    let [_, count] = upload.parts[worker as usize];
    let output = Path::new(&objects.output.url()).to_path_buf();
    let progress = progress::start(end - start, asked.progress, &output);
    let mut etags = Vec::new();
    let mut engine = engine;
    for ((file, uploaded), job_file) in layout.files.iter().zip(&upload.files).zip(&manifest.files)
    {
        let keep = super::overlap(start..end, file.start..file.start + file.len);
        if keep.is_empty() {
            continue;
        }
        // Shares start at part boundaries: this one at a part of this file.
        let keep = keep.start - file.start..keep.end - file.start;
        let location = objects
            .file(job_file.folder, &job_file.name)
            .ok_or_else(|| objects::not_begun(objects))?;
        objects::check_upload(objects, &location, uploaded)?;
        let parts = Parts {
            location: &location,
            upload: uploaded,
            worker: (worker, manifest.workers),
        };
        let sent = parts.send(
            (&mut planning, file),
            keep,
            &progress.bar,
            engine.as_deref_mut(),
        )?;
        etags.extend(sent);
    }
    progress.finish();
    if etags.len() != count as usize {
        let why = format!("{} parts were sent, of the {count} planned", etags.len());
        return Err(Error::io("upload", &output, std::io::Error::other(why)));
    }
    for input in planning.inputs {
        input.check_unchanged()?;
    }
    objects::record_done(objects, &Done::of(manifest, worker, etags))?;
    progress.summary();
    Ok(())
}

/// How many times a part the network or the store failed is sent again, and the wait before
/// the first time (doubled each time).
const RETRIES: u32 = 3;
const BACKOFF: Duration = Duration::from_millis(500);

/// The parts of one output file's upload that a worker sends.
struct Parts<'a> {
    location: &'a Location,
    upload: &'a FileUpload,
    /// The worker, of how many.
    worker: (u32, u32),
}

impl Parts<'_> {
    /// Streams the bytes `keep` of `file` (from a part's start) as the upload's parts; a part
    /// the network or the store failed is produced again from the inputs (a part's bytes are
    /// the same each time) and sent again, up to [`RETRIES`] times with a growing wait.
    /// Every part's ETag, in order.
    fn send(
        &self,
        (planning, file): (&mut Planning, &FileLayout),
        keep: Range<u64>,
        bar: &indicatif::ProgressBar,
        mut engine: Option<&mut Engine>,
    ) -> Result<Vec<String>> {
        let part_size = self.upload.part_size;
        let sent = self.stream(
            (planning, file),
            keep.clone(),
            Some(bar),
            engine.as_deref_mut(),
        )?;
        let (mut etags, mut failure) = (sent.etags, sent.failure);
        self.check_listed(file, &keep, (&mut etags, &mut failure))?;
        for attempt in 0..RETRIES {
            let failed: Vec<usize> = (0..etags.len()).filter(|&at| etags[at].is_none()).collect();
            if failed.is_empty() {
                break;
            }
            std::thread::sleep(BACKOFF * 2u32.pow(attempt));
            for at in failed {
                let start = keep.start + at as u64 * part_size;
                let part = start..(start + part_size).min(keep.end);
                let again = self.stream((planning, file), part, None, engine.as_deref_mut())?;
                etags[at] = again.etags.into_iter().next().flatten();
                failure = again.failure.or(failure);
            }
            self.check_listed(file, &keep, (&mut etags, &mut failure))?;
        }
        let failed: Vec<u64> = (0..etags.len())
            .filter(|&at| etags[at].is_none())
            .map(|at| keep.start / part_size + at as u64)
            .collect();
        match failed.is_empty() {
            true => Ok(etags.into_iter().flatten().collect()),
            false => Err(self.failed(file, &failed, failure)),
        }
    }

    /// Forgets the ETag of each part of `keep` sent (`etags`) that the store does not list
    /// with that ETag and its size, so that it is sent again (`failure` says why): a success
    /// answered before the store read the whole body is not seen by the bytes the socket
    /// took, and its ETag, recorded, would leave the commit refused. Nothing when the store
    /// does not let the worker list them (S3 itself answers once it has the whole body).
    fn check_listed(
        &self,
        file: &FileLayout,
        keep: &Range<u64>,
        (etags, failure): (&mut [Option<String>], &mut Option<std::io::Error>),
    ) -> Result<()> {
        if etags.iter().all(Option::is_none) {
            return Ok(());
        }
        let part_size = self.upload.part_size;
        let failed = |e| Error::io("list the parts sent of", &file.target, e);
        let first = u32::try_from(keep.start / part_size).map_err(std::io::Error::other);
        let count = u32::try_from(etags.len()).map_err(std::io::Error::other);
        let listed = parts::listed_parts(
            self.location,
            &self.upload.upload_id,
            (first.map_err(failed)?, count.map_err(failed)?),
        )
        .map_err(failed)?;
        let Some(listed) = listed else {
            return Ok(());
        };
        for (at, (etag, listed)) in etags.iter_mut().zip(listed).enumerate() {
            let start = keep.start + at as u64 * part_size;
            let len = (start + part_size).min(keep.end) - start;
            let Some(sent) = etag.as_ref() else {
                continue;
            };
            if listed.as_ref() != Some(&(sent.clone(), len)) {
                let lists = match &listed {
                    Some((tag, size)) => {
                        format!("{size} bytes, ETag {}", crate::messages::name(tag))
                    }
                    None => "no such part".to_string(),
                };
                *failure = Some(std::io::Error::other(format!(
                    "part {}: the store answered ETag {} for its {len} bytes, but lists {lists}",
                    start / part_size + 1,
                    crate::messages::name(sent)
                )));
                *etag = None;
            }
        }
        Ok(())
    }

    /// Streams the bytes `range` of `file` (from a part's start) as the parts they make.
    fn stream(
        &self,
        (planning, file): (&mut Planning, &FileLayout),
        range: Range<u64>,
        bar: Option<&indicatif::ProgressBar>,
        engine: Option<&mut Engine>,
    ) -> Result<Sent> {
        let failed = |e| Error::io("upload the parts of", &file.target, e);
        let part_size = self.upload.part_size;
        let first = u32::try_from(range.start / part_size).map_err(std::io::Error::other);
        let len = range.end - range.start;
        let mut parts = PartStream::new(
            self.location,
            &self.upload.upload_id,
            (first.map_err(failed)?, part_size),
            len,
        )
        .map_err(failed)?;
        let mut window = Window::streamed(&mut parts, &file.target, range);
        if let Some(bar) = bar {
            window = window.counted(bar);
        }
        super::write_window(planning, file, &mut window, engine)?;
        if window.stream_written() != len {
            let why = format!(
                "{} bytes of its share of {len} were written",
                window.stream_written()
            );
            return Err(Error::io(
                "write a share of",
                &file.target,
                std::io::Error::other(why),
            ));
        }
        drop(window);
        parts.finish().map_err(failed)
    }

    /// The failure of a worker whose parts `indexes` (from 0) the store never took; `failure`
    /// the last failure of any of them.
    fn failed(&self, file: &FileLayout, indexes: &[u64], failure: Option<std::io::Error>) -> Error {
        let (worker, n) = self.worker;
        let why = failure.map_or(String::new(), |e| format!(" (the last failure: {e})"));
        let numbers: Vec<String> = indexes.iter().map(|i| (i + 1).to_string()).collect();
        let parts = match numbers.len() {
            1 => format!("part {} was", numbers[0]),
            _ => format!(
                "parts {} were each",
                crate::error::capped(numbers, 10).join(", ")
            ),
        };
        Error::io(
            "upload the parts of",
            &file.target,
            std::io::Error::other(format!(
                "{parts} sent {} times and the store took none of them{why}\nhint: run \
                 --worker {worker}/{n} again (a worker run again is safe)",
                RETRIES + 1
            )),
        )
    }
}

/// `--workers N --commit`: checks that every worker finished and the inputs are unchanged,
/// then completes the upload; then removes the job's objects.
fn commit(asked: &Asked, objects: &Objects, manifest: &Manifest, planning: Planning) -> Result<()> {
    let etags = match objects::finished(objects, manifest)? {
        Ok(etags) => etags,
        Err(missing) => return Err(objects::refuse_unfinished(objects, manifest, &missing)),
    };
    for input in planning.inputs {
        input.check_unchanged()?;
    }
    refuse_existing(asked, &targets(objects, manifest, &planning))?;
    objects::complete(
        objects,
        manifest,
        etags,
        (&indexes(&planning), asked.no_clobber),
    )?;
    if says(asked) {
        crate::messages::eprintln(format!(
            "committed the job of {} workers: {} {} in place",
            manifest.workers,
            super::outputs_shown(objects.shown(), &planning),
            if planning.parts.len() > 1 {
                "are"
            } else {
                "is"
            },
        ));
    }
    Ok(())
}

/// The refusal `--no-clobber` makes of an existing object.
fn exists(there: &Location) -> Error {
    Error::refused(
        format!(
            "{} exists, and --no-clobber keeps it",
            crate::messages::path(Path::new(&there.url()))
        ),
        "name another key, or leave out --no-clobber to replace it",
    )
}

/// `--workers N --abandon` of the job whose output is at `url` (and whose files may also be
/// under the prefixes `more`: a split's other sharded outputs): aborts its uploads and
/// removes its objects, planning nothing.
pub(super) fn abandon(url: &Path, more: &[PathBuf], n: u32, quiet: bool) -> Result<()> {
    let mut folders = Vec::new();
    for folder in more {
        folders.push(location(folder, true)?);
    }
    let objects = Objects::of(&location(url, true)?).with_folders(folders);
    let abandoned = objects::abandon(&objects, n)?;
    if !quiet {
        let what = match abandoned.aborted {
            0 => "removed its objects; its manifest could not be read, so no upload was \
                 aborted (`aws s3api list-multipart-uploads` lists any left)"
                .to_string(),
            1 => "aborted its upload (no part is left) and removed its objects".to_string(),
            n => format!("aborted its {n} uploads (no part is left) and removed its objects"),
        };
        crate::messages::eprintln(format!(
            "abandoned the job of {}: {what}; the output is as it was",
            objects.shown()
        ));
    }
    Ok(())
}
