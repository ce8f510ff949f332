//! A job whose output is in S3 (`-o s3://BUCKET/KEY`, or a sharded set: `-o
//! s3://BUCKET/PREFIX/` or its index's URL): the objects it keeps in the bucket beside the
//! output, and what each step may do with them.
//!
//! # The objects
//! Under `KEY.tjoin-job/` (`KEY` the output's key as `-o` names it, a split's first
//! output's: `PREFIX/.tjoin-job/` for a prefix):
//! - `manifest.json`: the local job's manifest ([`Manifest`]) with its
//!   [`Upload`](super::Upload): the multipart upload `--begin` created for each output file,
//!   its part size, and each worker's first part and count. It is written by a conditional
//!   create (`If-None-Match: *`), which only one of two concurrent begins can make;
//! - `done-I.json`: worker `I`'s record ([`Done`]), with the ETag of each part it uploaded,
//!   written once its parts are in (a worker run again writes it again: the last upload of a
//!   part number wins, and its record names those parts).
//!
//! # The parts
//! Each output file's bytes are cut into parts of one size ([`part_size`]: S3 takes 5 MiB
//! to 5 GiB, at most 10,000 parts), and the parts of all the files, one after another, into
//! N runs balanced by bytes ([`cut`]); a worker's share is its run's bytes. The commit
//! completes each file's upload with its parts' ETags in order, so that each object appears
//! whole or not at all, then writes a sharded set's index, last.
//!
//! The output files' objects are named from the prefixes the command line names
//! ([`Objects::folders`]: the first output's, then a split's other sharded outputs'), each
//! file's by its plain name in the prefix the manifest numbers.
//!
//! # What an attacker's objects can do
//! The manifest and the records are data whoever can write to the bucket controls: read with
//! a limit, parsed strictly, and checked against the plan every step makes again (the
//! digest, the shares, the parts, which [`cut`] must give again from the output's length and
//! the worker count). No key is taken from them: every key is made from the output's. The
//! upload id goes to the store as a query value only, and must be printable ASCII; ETags too.

use std::path::Path;

use super::{Done, FileUpload, JobFile, Manifest, Upload};
use crate::error::{Error, Result};
use crate::limits::JOB_MANIFEST;
use crate::messages;
use crate::sys::remote::Location;
use crate::sys::remote::parts::{self, LONGEST_ID, printable};

/// S3's limits on a multipart upload's parts: 5 MiB to 5 GiB each (but the last), at most
/// 10,000.
const LEAST_PART: u64 = 5 << 20;
const MOST_PART: u64 = 5 << 30;
const MOST_PARTS: u64 = 10_000;
/// A record's bytes beyond its ETags, and the most each ETag (quoted, with JSON's comma) adds.
const RECORD_BYTES: u64 = 4 << 10;
const ETAG_BYTES: u64 = LONGEST_ID as u64 + 4;

/// The objects of the job of the output `output`, made from its key alone (and, for a
/// split's sharded outputs, from the prefixes the command line names).
#[derive(Debug, Clone)]
pub struct Objects {
    /// The output object (a split's first output).
    pub output: Location,
    /// The manifest.
    pub manifest: Location,
    /// The prefixes the output files are in, numbered as [`JobFile::folder`] numbers them:
    /// the output's own first (its prefix, or the prefix it is in), then (a split's sharded
    /// outputs) each other output's. Made from the command line, never from the manifest.
    folders: Vec<Location>,
}

impl Objects {
    /// The job's objects beside `output`.
    pub fn of(output: &Location) -> Objects {
        Objects {
            output: output.clone(),
            manifest: Location {
                key: format!("{}.tjoin-job/manifest.json", output.key),
                ..output.clone()
            },
            folders: vec![folder_of(output)],
        }
    }

    /// The same job, its files also under the prefixes `more` (each counted once, in
    /// order): a split's other sharded outputs, or the prefix of each.
    pub fn with_folders(mut self, more: impl IntoIterator<Item = Location>) -> Objects {
        for folder in more.into_iter().map(|l| folder_of(&l)) {
            if !self.folders.contains(&folder) {
                self.folders.push(folder);
            }
        }
        self
    }

    /// How many prefixes the job's files are in.
    pub fn folders(&self) -> usize {
        self.folders.len()
    }

    /// Worker `worker`'s record.
    pub fn done(&self, worker: u32) -> Location {
        Location {
            key: format!("{}.tjoin-job/done-{worker}.json", self.output.key),
            ..self.output.clone()
        }
    }

    /// The object of the output file `name` (a plain name: the manifest's are checked) in
    /// the job's prefix numbered `folder`; `None` for a folder the job has not, or a name
    /// that would leave its prefix.
    pub fn file(&self, folder: u32, name: &str) -> Option<Location> {
        self.folders.get(folder as usize)?.sibling(name)
    }

    /// The output as messages show it.
    pub fn shown(&self) -> String {
        messages::path(Path::new(&self.output.url()))
    }

    fn manifest_shown(&self) -> String {
        messages::path(Path::new(&self.manifest.url()))
    }
}

/// The prefix `location`'s files are in: itself for a prefix, else the one it is in.
pub fn folder_of(location: &Location) -> Location {
    let key = match location.key.rfind('/') {
        Some(at) => &location.key[..=at],
        None => "",
    };
    Location {
        key: key.to_string(),
        ..location.clone()
    }
}

/// The size of every part (but the last) of an object of `len` bytes: `asked` (`--part-size`)
/// when given; else 5 MiB, or the least whole number of MiB that fits it in 10,000 parts.
/// `None` past S3's limits: parts of 5 MiB to 5 GiB, at most 10,000 of them.
pub fn part_size(len: u64, asked: Option<u64>) -> Option<u64> {
    let size = match asked {
        Some(size) => size,
        None => len
            .div_ceil(MOST_PARTS)
            .div_ceil(1 << 20)
            .checked_mul(1 << 20)?
            .max(LEAST_PART),
    };
    let fits = (LEAST_PART..=MOST_PART).contains(&size) && len.div_ceil(size) <= MOST_PARTS;
    fits.then_some(size)
}

/// The output's files cut into parts, and the parts into runs, one per worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    /// Each file's part size.
    pub part_sizes: Vec<u64>,
    /// Each file's part count.
    pub counts: Vec<u32>,
    /// Each worker's first part and count, the files' parts counted one after another.
    pub parts: Vec<[u32; 2]>,
    /// Each worker's share of the files' bytes, one after another.
    pub shares: Vec<[u64; 2]>,
}

/// Files of `lens` bytes cut for `n` workers, into parts of `asked` bytes when given (see
/// [`part_size`]): each file's part size and count, then each
/// worker's run of parts (the files' one after another) and its share of the bytes. Each run
/// ends at the part boundary nearest to an even cut of the bytes, so shares are balanced to
/// within a part; a worker may have no part when there are fewer parts than workers. `None`
/// past S3's limits.
pub fn cut(lens: &[u64], n: u32, asked: Option<u64>) -> Option<Cut> {
    let (mut part_sizes, mut counts) = (Vec::new(), Vec::new());
    // Where each part starts, the files' bytes one after another, then where the last ends.
    let mut bounds = vec![0u64];
    let mut at = 0u64;
    for &len in lens {
        let size = part_size(len, asked)?;
        let count = len.div_ceil(size).max(1);
        bounds.extend((1..count).map(|i| at + i * size));
        at = at.checked_add(len)?;
        bounds.push(at);
        part_sizes.push(size);
        counts.push(u32::try_from(count).ok()?);
    }
    let (total, last) = (at, bounds.len() - 1);
    let n = u64::from(n.max(1));
    let mut cuts = vec![0usize];
    for k in 1..n {
        let even = (u128::from(total) * u128::from(k) / u128::from(n)) as u64;
        let after = bounds.partition_point(|&b| b < even).min(last);
        let nearer = match after.checked_sub(1) {
            Some(before) if even - bounds[before] < bounds[after] - even => before,
            _ => after,
        };
        cuts.push(nearer.max(*cuts.last()?));
    }
    cuts.push(last);
    let mut parts = Vec::new();
    let mut shares = Vec::new();
    for pair in cuts.windows(2) {
        parts.push([
            u32::try_from(pair[0]).ok()?,
            u32::try_from(pair[1] - pair[0]).ok()?,
        ]);
        shares.push([bounds[pair[0]], bounds[pair[1]]]);
    }
    Some(Cut {
        part_sizes,
        counts,
        parts,
        shares,
    })
}

/// The refusal of an output past S3's limits: a file of `len` bytes does not fit in 10,000
/// parts of `asked` (`--part-size`), or of 5 GiB.
pub fn too_large(objects: &Objects, len: u64, asked: Option<u64>) -> Error {
    match asked {
        Some(size) if part_size(len, None).is_some() => Error::refused(
            format!(
                "{} would have a file of {len} bytes: {} parts of --part-size {size} bytes, \
                 more than the 10,000 S3 takes in one object",
                objects.shown(),
                len.div_ceil(size.max(1))
            ),
            format!(
                "give --part-size {}MiB or more, or leave it out (each file's parts are then \
                 the least size that fits)",
                part_size(len, None).unwrap_or(MOST_PART) >> 20
            ),
        ),
        _ => Error::refused(
            format!(
                "{} would be {len} bytes, more than one object holds (10,000 parts of 5 GiB)",
                objects.shown()
            ),
            "write a sharded output (--max-shard-size), or split the join",
        ),
    }
}

/// The job recorded beside the output, if any; refuses one this build did not write, or
/// whose upload is not the one its output and worker count give.
pub fn read(objects: &Objects) -> Result<Option<Manifest>> {
    let bytes = parts::get_object(&objects.manifest, JOB_MANIFEST.bytes).map_err(|e| {
        Error::io(
            "read the job's manifest",
            Path::new(&objects.manifest.url()),
            e,
        )
    })?;
    let Some(bytes) = bytes else { return Ok(None) };
    let manifest = super::parse(&bytes).map_err(|why| refused(objects, &why))?;
    let why = match &manifest.upload {
        None => Some("it records no upload, where the output is in object storage".to_string()),
        Some(upload) => {
            let lens: Vec<u64> = manifest.files.iter().map(|f| f.len).collect();
            let planned = cut(&lens, manifest.workers, upload.part_size);
            let same = planned.as_ref().is_some_and(|cut| {
                let sizes = upload.files.iter().map(|f| f.part_size);
                sizes.eq(cut.part_sizes.iter().copied())
                    && upload.parts == cut.parts
                    && manifest.shares == cut.shares
            });
            if upload.url != objects.output.url() {
                Some(format!(
                    "its upload is to {}, not to the output",
                    messages::name(&upload.url)
                ))
            } else if !upload.files.iter().all(|f| printable(&f.upload_id)) {
                Some("an upload id is not printable ASCII of at most 1024 bytes".to_string())
            } else if !same {
                Some("its parts are not those its output's lengths and worker count give".into())
            } else if let Some(file) = manifest
                .files
                .iter()
                .find(|f| f.folder as usize >= objects.folders())
            {
                Some(format!(
                    "it puts {} in prefix {} of the job, whose outputs are in {}",
                    messages::name(&file.name),
                    file.folder,
                    objects.folders()
                ))
            } else if manifest
                .files
                .iter()
                .any(|f| objects.file(f.folder, &f.name).is_none())
            {
                Some("it names an output file that is not a plain name".to_string())
            } else {
                None
            }
        }
    };
    match why {
        Some(why) => Err(refused(objects, &why)),
        None => Ok(Some(manifest)),
    }
}

fn refused(objects: &Objects, why: &str) -> Error {
    super::refused_manifest_at(&objects.manifest_shown(), &objects.shown(), why)
}

/// The refusal of a worker or a commit with no job recorded.
pub fn not_begun(objects: &Objects) -> Error {
    Error::refused(
        format!(
            "no job is recorded for {} (there is no {})",
            objects.shown(),
            objects.manifest_shown()
        ),
        "begin it first with the same command and --workers N --begin; a job that was \
         committed or abandoned is over",
    )
}

fn already_begun(objects: &Objects, workers: u32) -> Error {
    Error::refused(
        format!(
            "a job of {workers} workers is already recorded for {} ({})",
            objects.shown(),
            objects.manifest_shown()
        ),
        "run its workers and commit it (--workers N --commit), or abandon it (--workers N \
         --abandon) before beginning another",
    )
}

/// An error of the store about `location`.
fn failed(action: &str, location: &Location, error: std::io::Error) -> Error {
    Error::io(action, Path::new(&location.url()), error)
}

/// Begins the job `manifest` (its upload not yet made): refuses when a job is recorded
/// already; creates the multipart upload and records the manifest with it, by a
/// conditional create (a concurrent begin that wins it leaves this one refused, its upload
/// aborted). The manifest as recorded.
pub fn begin(objects: &Objects, manifest: Manifest, part_size: Option<u64>) -> Result<Manifest> {
    if let Some(existing) = read(objects).map_err(|e| match e {
        // One this build cannot read is a job all the same.
        Error::Refused(_) => already_begun(objects, manifest.workers),
        other => other,
    })? {
        return Err(already_begun(objects, existing.workers));
    }
    let lens: Vec<u64> = manifest.files.iter().map(|f| f.len).collect();
    let longest = lens.iter().copied().max().unwrap_or(0);
    let cut = cut(&lens, manifest.workers, part_size)
        .ok_or_else(|| too_large(objects, longest, part_size))?;
    // Every upload made is aborted unless the manifest that names them is recorded.
    let mut created = Created(Vec::new());
    let mut files = Vec::new();
    for (file, part_size) in manifest.files.iter().zip(cut.part_sizes) {
        let location = file_of(objects, file)?;
        let upload_id = parts::create_upload(&location)
            .map_err(|e| failed("begin the multipart upload to", &location, e))?;
        created.0.push((location, upload_id.clone()));
        files.push(FileUpload {
            upload_id,
            part_size,
        });
    }
    let manifest = Manifest {
        upload: Some(Upload {
            url: objects.output.url(),
            files,
            parts: cut.parts,
            part_size,
        }),
        ..manifest
    };
    let text = serde_json::to_vec_pretty(&manifest)
        .map_err(|e| failed("write the job's manifest", &objects.manifest, e.into()))?;
    match parts::create_object(&objects.manifest, text) {
        Ok(true) => {
            created.0.clear();
            Ok(manifest)
        }
        Ok(false) => Err(already_begun(objects, manifest.workers)),
        Err(e) => Err(failed("write the job's manifest", &objects.manifest, e)),
    }
}

/// Uploads a step created, aborted again unless it succeeds.
struct Created(Vec<(Location, String)>);

impl Drop for Created {
    fn drop(&mut self) {
        for (location, upload_id) in &self.0 {
            let _ = parts::abort(location, upload_id);
        }
    }
}

/// The object of the output file `file`.
fn file_of(objects: &Objects, file: &JobFile) -> Result<Location> {
    objects.file(file.folder, &file.name).ok_or_else(|| {
        refused(
            objects,
            &format!(
                "{} is not a plain file name in one of the job's prefixes",
                messages::name(&file.name)
            ),
        )
    })
}

/// Refuses the upload `uploaded` of the output file at `location` unless the store lists it
/// under that very key: a manifest edited to give one file another's upload (or an upload
/// completed, or aborted, since) would otherwise have a store that does not tie an upload to
/// its key (moto) put this file's parts into another's object. A store that does not let
/// the worker list its uploads is trusted to tie each to its key, as S3 does.
pub fn check_upload(objects: &Objects, location: &Location, uploaded: &FileUpload) -> Result<()> {
    let listed = parts::has_upload(location, &uploaded.upload_id)
        .map_err(|e| failed("list the multipart uploads of", location, e))?;
    if listed != Some(false) {
        return Ok(());
    }
    Err(refused(
        objects,
        &format!(
            "the store lists no upload of {} with the id it records (the upload was completed \
             or aborted since, or the manifest was edited)",
            messages::path(Path::new(&location.url()))
        ),
    ))
}

/// Records that `done.worker` finished: its parts' ETags, over any record of an earlier run.
pub fn record_done(objects: &Objects, done: &Done) -> Result<()> {
    let location = objects.done(done.worker);
    let text = serde_json::to_vec(done).map_err(std::io::Error::from);
    let text = text.map_err(|e| failed("record the worker's finish in", &location, e))?;
    parts::put_object(&location, text)
        .map_err(|e| failed("record the worker's finish in", &location, e))
}

/// Every part's ETag in order, from the workers' records; or the workers of `manifest` with
/// no record of finishing its job (a record of another job, another share, or with other
/// than its parts' count of ETags counts as none).
pub fn finished(
    objects: &Objects,
    manifest: &Manifest,
) -> Result<std::result::Result<Vec<String>, Vec<u32>>> {
    let upload = manifest.upload.as_ref().ok_or_else(|| not_begun(objects))?;
    let mut missing = Vec::new();
    let mut etags = Vec::new();
    for worker in 0..manifest.workers {
        let [_, count] = upload.parts[worker as usize];
        let location = objects.done(worker);
        let limit = RECORD_BYTES + ETAG_BYTES * u64::from(count);
        let bytes = parts::get_object(&location, limit)
            .map_err(|e| failed("read the worker's record", &location, e))?;
        let done: Option<Done> = bytes.and_then(|b| serde_json::from_slice(&b).ok());
        let tags = done.as_ref().map(|d| d.etags.clone()).unwrap_or_default();
        let expected = Done::of(manifest, worker, tags);
        let whole = expected.etags.len() == count as usize
            && expected.etags.iter().all(|tag| printable(tag));
        if done.as_ref() == Some(&expected) && whole {
            etags.extend(expected.etags);
        } else {
            missing.push(worker);
        }
    }
    Ok(if missing.is_empty() {
        Ok(etags)
    } else {
        Err(missing)
    })
}

/// The refusal of a commit while `missing` workers have not finished.
pub fn refuse_unfinished(objects: &Objects, manifest: &Manifest, missing: &[u32]) -> Error {
    let folder = format!("{}.tjoin-job/", objects.output.url());
    let beside = format!("under {}", messages::path(Path::new(&folder)));
    super::refuse_unfinished_of(&objects.shown(), manifest, missing, &beside)
}

/// Completes each file's upload with its parts' ETags (`etags`: every part's, the files'
/// one after another): each object appears whole. Then writes `indexes` (each sharded
/// set's, at its object), once every file is complete, and removes the job's objects. With
/// `no_clobber`, each completion and each index are conditional creates: an object another
/// writer made is kept, and refused.
pub fn complete(
    objects: &Objects,
    manifest: &Manifest,
    etags: Vec<String>,
    (indexes, no_clobber): (&[(Location, String)], bool),
) -> Result<()> {
    let upload = manifest.upload.as_ref().ok_or_else(|| not_begun(objects))?;
    let lens: Vec<u64> = manifest.files.iter().map(|f| f.len).collect();
    let cut = cut(&lens, manifest.workers, upload.part_size).ok_or_else(|| not_begun(objects))?;
    let mut etags = etags.into_iter();
    let mut first = 0u32;
    // The objects completed: in place, whatever fails after them.
    let mut placed: Vec<Location> = Vec::new();
    for ((file, count), uploaded) in manifest.files.iter().zip(cut.counts).zip(&upload.files) {
        let location = file_of(objects, file)?;
        let tags: Vec<String> = etags.by_ref().take(count as usize).collect();
        let completed = parts::complete(&location, &uploaded.upload_id, tags, no_clobber);
        completed.map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => appeared(objects, manifest, &location, &placed),
            std::io::ErrorKind::InvalidData => {
                let file_parts = first..first + count;
                // The workers whose runs hold a part of this file.
                let workers: Vec<u32> = (0..manifest.workers)
                    .filter(|&w| {
                        let [at, n] = upload.parts[w as usize];
                        n > 0 && at < file_parts.end && file_parts.start < at + n
                    })
                    .collect();
                wrong_parts(objects, manifest, (&location, &placed), &workers)
            }
            _ => failed(
                "complete the multipart upload to",
                &location,
                std::io::Error::new(e.kind(), format!("{e}{}", in_place(&placed))),
            ),
        })?;
        placed.push(location);
        first += count;
    }
    for (location, text) in indexes {
        let bytes = text.as_bytes().to_vec();
        let written = match no_clobber {
            true => parts::create_object(location, bytes),
            false => parts::put_object(location, bytes).map(|()| true),
        };
        let written = written.map_err(|e| {
            let why = format!("{e}{}", in_place(&placed));
            failed(
                "write the index",
                location,
                std::io::Error::new(e.kind(), why),
            )
        })?;
        if !written {
            return Err(appeared(objects, manifest, location, &placed));
        }
        placed.push(location.clone());
    }
    remove(objects, manifest.workers)
}

/// What a commit's failure says of the objects `placed` it completed before (a store takes
/// back no completed object): nothing when there are none.
fn in_place(placed: &[Location]) -> String {
    if placed.is_empty() {
        return String::new();
    }
    let named = placed
        .iter()
        .map(|l| messages::path(Path::new(&l.url())))
        .collect();
    format!(
        "; in place already (completed before it, and left): {}",
        crate::error::capped(named, 10).join(", ")
    )
}

/// The refusal of a commit with `--no-clobber` whose completion found `location` made by
/// another writer since the commit looked (S3 answered 412): that object is left as it is,
/// and the job abandoned (its uploads aborted, its objects removed), for it cannot complete;
/// the objects `placed` before it stay, and are named.
fn appeared(
    objects: &Objects,
    manifest: &Manifest,
    location: &Location,
    placed: &[Location],
) -> Error {
    let abandoned = match abandon(objects, manifest.workers) {
        Ok(_) => "the job was abandoned (its uploads aborted, its objects removed)".to_string(),
        Err(e) => format!("abandoning the job failed too ({e})"),
    };
    Error::refused(
        format!(
            "{} was created by another writer during the commit, and --no-clobber keeps it: \
             {abandoned}{}",
            messages::path(Path::new(&location.url())),
            in_place(placed)
        ),
        "name another key and begin the job again, or leave out --no-clobber to replace it",
    )
}

/// The refusal of a commit whose records name parts the store has not in `location`'s
/// upload (a record altered, or a part uploaded again since it was written): the store
/// completed nothing of it; `workers` hold its parts. The objects before it are complete,
/// and a commit again completes them again (S3 answers a completed upload's completion
/// again), so the hint is to run those workers again and commit; they are named
/// (`placed`).
fn wrong_parts(
    objects: &Objects,
    manifest: &Manifest,
    (location, placed): (&Location, &[Location]),
    workers: &[u32],
) -> Error {
    let n = manifest.workers;
    let listed: Vec<String> = workers.iter().map(|w| format!("{w}/{n}")).collect();
    let listed = crate::error::capped(listed, 20).join(", ");
    Error::refused(
        format!(
            "cannot commit {}: the store refused to complete {}, whose parts are not those \
             the records of workers {listed} under {} name (a record was altered, or a part \
             uploaded again since); that object, those after it and any index were not \
             written{}",
            objects.shown(),
            messages::path(Path::new(&location.url())),
            messages::path(Path::new(&format!("{}.tjoin-job/", objects.output.url()))),
            in_place(placed),
        ),
        format!(
            "run --worker I/{n} again for each of {listed} (a worker run again is safe), then \
             --workers {n} --commit again; or --workers {n} --abandon"
        ),
    )
}

/// The first of `locations` that exists (`--no-clobber`).
pub fn existing<'l>(locations: &[&'l Location]) -> Result<Option<&'l Location>> {
    for location in locations {
        if parts::exists(location).map_err(|e| failed("look for", location, e))? {
            return Ok(Some(location));
        }
    }
    Ok(None)
}

/// Removes the records of workers `0..workers` and then the manifest.
fn remove(objects: &Objects, workers: u32) -> Result<()> {
    for worker in 0..workers {
        let location = objects.done(worker);
        parts::delete_object(&location).map_err(|e| failed("remove", &location, e))?;
    }
    parts::delete_object(&objects.manifest).map_err(|e| failed("remove", &objects.manifest, e))
}

/// What `--abandon` did: how many uploads it aborted (none when the manifest could not be
/// read, and so named none).
pub struct Abandoned {
    /// The uploads aborted.
    pub aborted: usize,
}

/// Abandons the job beside the output: aborts its uploads (every part sent is dropped), then
/// removes its records and its manifest. `workers` must be the job's count. Refuses when
/// there is no job.
pub fn abandon(objects: &Objects, workers: u32) -> Result<Abandoned> {
    let manifest = match read(objects) {
        Ok(manifest) => manifest.ok_or_else(|| not_begun(objects))?,
        // One this build cannot read names no upload it can trust: its objects go.
        Err(Error::Refused(_)) => {
            remove(objects, workers)?;
            return Ok(Abandoned { aborted: 0 });
        }
        Err(other) => return Err(other),
    };
    super::check_count(&objects.shown(), &manifest, workers)?;
    let upload = manifest.upload.as_ref().ok_or_else(|| not_begun(objects))?;
    for (file, uploaded) in manifest.files.iter().zip(&upload.files) {
        let location = file_of(objects, file)?;
        parts::abort(&location, &uploaded.upload_id)
            .map_err(|e| failed("abort the multipart upload to", &location, e))?;
    }
    remove(objects, workers)?;
    Ok(Abandoned {
        aborted: upload.files.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_cut_into_runs_balanced_by_bytes() {
        let mib = 1u64 << 20;
        let one = cut(&[23 * mib], 3, None).unwrap();
        assert_eq!((one.part_sizes, one.counts), (vec![5 * mib], vec![5]));
        // Five parts (the last 3 MiB), cut nearest to 7.7 and 15.3 MiB: 2, 1 and 2 of them.
        assert_eq!(one.parts, [[0, 2], [2, 1], [3, 2]]);
        assert_eq!(
            one.shares,
            [[0, 10 * mib], [10 * mib, 15 * mib], [15 * mib, 23 * mib]]
        );
        // Fewer parts than workers: some have none.
        let few = cut(&[100], 2, None).unwrap();
        assert_eq!(few.parts, [[0, 1], [1, 0]]);
        assert_eq!(few.shares, [[0, 100], [100, 100]]);
        // Several files: each its own parts, the runs across them.
        let set = cut(&[12 * mib, 100, 7 * mib], 2, None).unwrap();
        assert_eq!(set.counts, [3, 1, 2]);
        // The even cut, 9.5 MiB, is nearest the second part's end.
        assert_eq!(set.parts, [[0, 2], [2, 4]]);
        assert_eq!(set.shares, [[0, 10 * mib], [10 * mib, 19 * mib + 100]]);
        // 1 TB by 8: 9,935 parts of 96 MiB, 1,241 to 1,243 each (each run ends at the part
        // boundary nearest its even cut).
        let tb = cut(&[1_000_000_000_000], 8, None).unwrap();
        assert_eq!(tb.part_sizes, [96 * mib]);
        assert_eq!(tb.parts.iter().map(|[_, n]| n).sum::<u32>(), 9935);
        let counts = tb.parts.iter().map(|[_, n]| *n);
        assert!(
            counts.clone().all(|n| (1241..=1243).contains(&n)),
            "{:?}",
            tb.parts
        );
        assert!(cut(&[MOST_PARTS * MOST_PART + 1], 1, None).is_none());
    }

    #[test]
    fn a_part_size_asked_cuts_every_file_by_it_within_s3s_limits() {
        let mib = 1u64 << 20;
        let asked = cut(&[200 * mib, 3 * mib], 2, Some(64 * mib)).unwrap();
        assert_eq!(asked.part_sizes, [64 * mib, 64 * mib]);
        assert_eq!(asked.counts, [4, 1]);
        // 101.5 MiB is the even cut: the part boundary at 128 MiB is nearer than 64's.
        assert_eq!(asked.parts, [[0, 2], [2, 3]]);
        assert_eq!(part_size(10 * mib, Some(5 * mib - 1)), None);
        assert_eq!(part_size(10 * mib, Some(MOST_PART + 1)), None);
        assert_eq!(part_size(50_000 * mib, Some(5 * mib)), Some(5 * mib));
        assert_eq!(part_size(50_000 * mib + 1, Some(5 * mib)), None);
        assert_eq!(part_size(0, Some(5 * mib)), Some(5 * mib));
    }

    #[test]
    fn files_are_named_under_the_prefixes_the_command_line_gives_never_past_them() {
        let at = |url: &str| Location::parse(url).unwrap();
        assert_eq!(folder_of(&at("s3://b/x/tp0.npy")).key, "x/");
        assert_eq!(folder_of(&at("s3://b/tp0/")).key, "tp0/");
        assert_eq!(folder_of(&at("s3://b/tp0.npy")).key, "");
        // A split's files: beside the first output.
        let files = Objects::of(&at("s3://b/x/tp0.npy"));
        assert_eq!(files.manifest.key, "x/tp0.npy.tjoin-job/manifest.json");
        assert_eq!(files.file(0, "tp1.npy").unwrap().key, "x/tp1.npy");
        // Sharded outputs: each under its own prefix, the first's counted once.
        let sharded = Objects::of(&at("s3://b/tp0/")).with_folders([
            at("s3://b/tp0/"),
            at("s3://b/tp1/"),
            at("s3://b/tp1/m.json"),
        ]);
        assert_eq!(sharded.folders(), 2);
        assert_eq!(sharded.manifest.key, "tp0/.tjoin-job/manifest.json");
        assert_eq!(
            sharded.file(1, "m.safetensors").unwrap().key,
            "tp1/m.safetensors"
        );
        assert!(sharded.file(2, "m.safetensors").is_none());
        assert!(sharded.file(0, "../x").is_none());
    }

    #[test]
    fn upload_ids_and_etags_are_printable_and_bounded() {
        assert!(printable("\"9b2cf535f27731c974343645a3985328\""));
        assert!(!printable(""));
        assert!(!printable("a b"));
        assert!(!printable("a\nb"));
        assert!(!printable(&"a".repeat(LONGEST_ID + 1)));
    }
}
