//! The steps of a job whose output is one object in S3 (`-o s3://BUCKET/KEY`): the same
//! plan, layout and checks as a local job's (`super`), with the output's bytes uploaded as
//! the parts of one multipart upload instead of written into a data file beside it
//! (`output::job::s3` keeps the job's objects; `sys::remote::parts` makes the calls):
//!
//! - `--begin` cuts the output into parts and the parts into N runs balanced by bytes,
//!   creates the upload, and records the manifest in the bucket by a conditional create;
//! - `--worker I/N` streams its share through the window into parts, each sent while the
//!   next fills (at most 64 MiB, or one part, in flight besides the one filling: no
//!   temporary file), checks the inputs unchanged once all is read, waits for its parts, and
//!   records their ETags;
//! - `--commit` reads every record, refuses naming the workers missing (nothing is
//!   completed), checks the inputs unchanged, completes the upload with every ETag in order,
//!   and removes the job's objects; `--abandon` aborts the upload and removes them.

use std::path::Path;

use super::{Asked, Layout, Planning, says};
use crate::backend::Engine;
use crate::error::{Error, Result};
use crate::output::job::s3::{self as objects, Objects};
use crate::output::job::{self, Done, Manifest, Step, Window};
use crate::output::progress;
use crate::sys::remote::Location;
use crate::sys::remote::parts::PartStream;

/// The output's URL as a location: an object in S3.
pub(super) fn location(url: &Path) -> Result<Location> {
    let location = Location::parse(&url.to_string_lossy()).map_err(|why| {
        Error::refused(
            format!(
                "the output {} is not a URL tjoin writes: {why}",
                crate::messages::path(url)
            ),
            "name the object as s3://BUCKET/KEY",
        )
    })?;
    if location.scheme != crate::sys::remote::Scheme::S3 || location.is_prefix() {
        return Err(Error::refused(
            format!(
                "{} is not an object in S3, and a job of several workers uploads its output \
                 as one S3 object's parts",
                crate::messages::path(url)
            ),
            "name an object as s3://BUCKET/KEY (S3, or an S3-compatible store through \
             AWS_ENDPOINT_URL), or run the join in one process",
        ));
    }
    Ok(location)
}

/// The shares of an object of `total` bytes among `n` workers: runs of whole parts.
pub(super) fn shares(url: &Path, total: u64, n: u32) -> Result<Vec<[u64; 2]>> {
    let objects = Objects::of(&location(url)?);
    let cut = objects::cut(total, n).ok_or_else(|| objects::too_large(&objects, total))?;
    Ok(cut.shares)
}

/// Runs `step` of the job whose output is the object `output`; `fresh` is this step's plan
/// of the manifest, with the input each of its inputs' files belongs to.
pub(super) fn run(
    asked: &Asked,
    step: Step,
    output: &Location,
    (fresh, positions): (Manifest, &[usize]),
    planning: Planning,
    layout: &Layout,
    engine: Option<&mut Engine>,
) -> Result<()> {
    let objects = Objects::of(output);
    match step {
        Step::Begin(_) => begin(asked, &objects, fresh),
        Step::Worker(worker, _) => {
            let manifest = recorded(&objects, &fresh, positions)?;
            work(
                asked,
                (&objects, &manifest, worker),
                planning,
                layout,
                engine,
            )
        }
        Step::Commit(_) => {
            let manifest = recorded(&objects, &fresh, positions)?;
            commit(asked, &objects, &manifest, planning)
        }
        Step::Shares(_) | Step::Abandon(_) => unreachable!("handled by the flow"),
    }
}

/// The job recorded in the bucket, checked to be the one `fresh` describes.
fn recorded(objects: &Objects, fresh: &Manifest, positions: &[usize]) -> Result<Manifest> {
    let manifest = objects::read(objects)?.ok_or_else(|| objects::not_begun(objects))?;
    let shown = (
        objects.shown(),
        crate::messages::path(Path::new(&objects.manifest.url())),
    );
    super::check_recorded(manifest, fresh, positions, shown)
}

/// `--workers N --begin`: creates the upload and records the job in the bucket.
fn begin(asked: &Asked, objects: &Objects, fresh: Manifest) -> Result<()> {
    if asked.no_clobber && objects::output_exists(objects)? {
        return Err(exists(objects));
    }
    let manifest = objects::begin(
        objects,
        Manifest {
            token: job::new_token(),
            ..fresh
        },
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
            objects.shown(),
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
    let [first, count] = upload.parts[worker as usize];
    let output = Path::new(&objects.output.url()).to_path_buf();
    let progress = progress::start(end - start, asked.progress, &output);
    let mut etags = Vec::new();
    if let ([file], false) = (layout.files.as_slice(), start == end) {
        let mut parts =
            PartStream::new(&objects.output, &upload.upload_id, first, upload.part_size)
                .map_err(|e| Error::io("upload the parts of", &output, e))?;
        let mut window =
            Window::streamed(&mut parts, &file.target, start..end).counted(&progress.bar);
        super::write_window(&mut planning, file, &mut window, engine)?;
        if window.stream_written() != end - start {
            let why = format!(
                "{} bytes of its share of {} were written",
                window.stream_written(),
                end - start
            );
            return Err(Error::io(
                "write a share of",
                &output,
                std::io::Error::other(why),
            ));
        }
        for input in planning.inputs {
            input.check_unchanged()?;
        }
        etags = parts
            .finish()
            .map_err(|e| Error::io("upload the parts of", &output, e))?;
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
    if asked.no_clobber && objects::output_exists(objects)? {
        return Err(exists(objects));
    }
    objects::complete(objects, manifest, etags)?;
    if says(asked) {
        crate::messages::eprintln(format!(
            "committed the job of {} workers: {} is in place",
            manifest.workers,
            objects.shown()
        ));
    }
    Ok(())
}

/// The refusal `--no-clobber` makes of an existing output.
fn exists(objects: &Objects) -> Error {
    Error::refused(
        format!("{} exists, and --no-clobber keeps it", objects.shown()),
        "name another key, or leave out --no-clobber to replace it",
    )
}

/// `--workers N --abandon` of the job whose output is the object `url`: aborts its upload
/// and removes its objects, planning nothing.
pub(super) fn abandon(url: &Path, n: u32, quiet: bool) -> Result<()> {
    let objects = Objects::of(&location(url)?);
    let abandoned = objects::abandon(&objects, n)?;
    if !quiet {
        let what = match abandoned.aborted {
            Some(_) => "aborted its upload (no part is left) and removed its objects",
            None => {
                "removed its objects; its manifest could not be read, so no upload was \
                 aborted (`aws s3api list-multipart-uploads` lists any left)"
            }
        };
        crate::messages::eprintln(format!(
            "abandoned the job of {}: {what}; the output is as it was",
            objects.shown()
        ));
    }
    Ok(())
}
