//! A job whose output is one object in S3 (`-o s3://BUCKET/KEY`): the objects it keeps in
//! the bucket beside the output, and what each step may do with them.
//!
//! # The objects
//! Under `KEY.tjoin-job/`:
//! - `manifest.json`: the local job's manifest ([`Manifest`]) with its
//!   [`Upload`](super::Upload): the multipart upload `--begin` created, its part size, and each
//!   worker's first part and count. It is written by a conditional create
//!   (`If-None-Match: *`), which only one of two concurrent begins can make;
//! - `done-I.json`: worker `I`'s record ([`Done`]), with the ETag of each part it uploaded,
//!   written once its parts are in (a worker run again writes it again: the last upload of a
//!   part number wins, and its record names those parts).
//!
//! # The parts
//! The output's bytes are cut into parts of one size ([`part_size`]: S3 takes 5 MiB to
//! 5 GiB, at most 10,000 parts), and the parts into N runs balanced by bytes ([`cut`]);
//! a worker's share is its run's bytes. The commit completes the upload with every worker's
//! ETags in order, so the object appears whole or not at all.
//!
//! # What an attacker's objects can do
//! The manifest and the records are data whoever can write to the bucket controls: read with
//! a limit, parsed strictly, and checked against the plan every step makes again (the
//! digest, the shares, the parts, which [`cut`] must give again from the output's length and
//! the worker count). No key is taken from them: every key is made from the output's. The
//! upload id goes to the store as a query value only, and must be printable ASCII; ETags too.

use std::path::Path;

use super::{Done, Manifest, Upload};
use crate::error::{Error, Result};
use crate::limits::JOB_MANIFEST;
use crate::messages;
use crate::sys::remote::{Location, parts};

/// S3's limits on a multipart upload's parts: 5 MiB to 5 GiB each (but the last), at most
/// 10,000.
const LEAST_PART: u64 = 5 << 20;
const MOST_PART: u64 = 5 << 30;
const MOST_PARTS: u64 = 10_000;
/// The longest upload id and ETag read from a manifest or a record.
const LONGEST_ID: usize = 1024;
/// A record's bytes beyond its ETags, and the most each ETag (quoted, with JSON's comma) adds.
const RECORD_BYTES: u64 = 4 << 10;
const ETAG_BYTES: u64 = LONGEST_ID as u64 + 4;

/// The objects of the job of the output `output`, made from its key alone.
#[derive(Debug, Clone)]
pub struct Objects {
    /// The output object.
    pub output: Location,
    /// The manifest.
    pub manifest: Location,
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
        }
    }

    /// Worker `worker`'s record.
    pub fn done(&self, worker: u32) -> Location {
        Location {
            key: format!("{}.tjoin-job/done-{worker}.json", self.output.key),
            ..self.output.clone()
        }
    }

    /// The output as messages show it.
    pub fn shown(&self) -> String {
        messages::path(Path::new(&self.output.url()))
    }

    fn manifest_shown(&self) -> String {
        messages::path(Path::new(&self.manifest.url()))
    }
}

/// The size of every part (but the last) of an object of `len` bytes: 5 MiB, or the least
/// whole number of MiB that fits it in 10,000 parts; `None` past 10,000 parts of 5 GiB.
pub fn part_size(len: u64) -> Option<u64> {
    let least = len
        .div_ceil(MOST_PARTS)
        .div_ceil(1 << 20)
        .checked_mul(1 << 20)?;
    let size = least.max(LEAST_PART);
    (size <= MOST_PART).then_some(size)
}

/// An object cut into parts, and the parts into runs, one per worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    /// The size of every part but the last.
    pub part_size: u64,
    /// Each worker's first part and count.
    pub parts: Vec<[u32; 2]>,
    /// Each worker's share of the object's bytes.
    pub shares: Vec<[u64; 2]>,
}

/// An object of `len` bytes cut for `n` workers: the part size, each worker's first part and
/// count (runs of whole parts balanced by bytes: counts differ by at most one), and each
/// worker's share of the bytes. A worker may have no part when there are fewer parts than
/// workers. `None` past S3's limits.
pub fn cut(len: u64, n: u32) -> Option<Cut> {
    let size = part_size(len)?;
    let count = len.div_ceil(size).max(1);
    let n = u64::from(n.max(1));
    let first = |k: u64| (u128::from(count) * u128::from(k) / u128::from(n)) as u64;
    let mut parts = Vec::new();
    let mut shares = Vec::new();
    for k in 0..n {
        let (from, to) = (first(k), first(k + 1));
        parts.push([u32::try_from(from).ok()?, u32::try_from(to - from).ok()?]);
        shares.push([(from * size).min(len), (to * size).min(len)]);
    }
    Some(Cut {
        part_size: size,
        parts,
        shares,
    })
}

/// The refusal of an output past S3's limits.
pub fn too_large(objects: &Objects, len: u64) -> Error {
    Error::refused(
        format!(
            "{} would be {len} bytes, more than one object holds (10,000 parts of 5 GiB)",
            objects.shown()
        ),
        "write a sharded output (--max-shard-size), or split the join",
    )
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
    let why = match (&manifest.upload, manifest.files.as_slice()) {
        (None, _) => Some("it records no upload, where the output is an object".to_string()),
        (_, [_, _, ..]) => Some("it names several files, where the output is one object".into()),
        (Some(upload), [file]) => {
            let planned = cut(file.len, manifest.workers);
            let same = planned.as_ref().is_some_and(|cut| {
                upload.part_size == cut.part_size
                    && upload.parts == cut.parts
                    && manifest.shares == cut.shares
            });
            if upload.url != objects.output.url() {
                Some(format!(
                    "its upload is to {}, not to the output",
                    messages::name(&upload.url)
                ))
            } else if !printable(&upload.upload_id) {
                Some("its upload id is not printable ASCII of at most 1024 bytes".to_string())
            } else if !same {
                Some("its parts are not those its output's length and worker count give".into())
            } else {
                None
            }
        }
        (Some(_), []) => Some("it names no file".to_string()),
    };
    match why {
        Some(why) => Err(refused(objects, &why)),
        None => Ok(Some(manifest)),
    }
}

/// Whether `text` is 1 to 1024 bytes of printable ASCII: an upload id, an ETag.
fn printable(text: &str) -> bool {
    !text.is_empty() && text.len() <= LONGEST_ID && text.bytes().all(|b| b.is_ascii_graphic())
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
pub fn begin(objects: &Objects, manifest: Manifest) -> Result<Manifest> {
    if let Some(existing) = read(objects).map_err(|e| match e {
        // One this build cannot read is a job all the same.
        Error::Refused(_) => already_begun(objects, manifest.workers),
        other => other,
    })? {
        return Err(already_begun(objects, existing.workers));
    }
    let len = manifest.files.iter().map(|f| f.len).sum();
    let Cut {
        part_size, parts, ..
    } = cut(len, manifest.workers).ok_or_else(|| too_large(objects, len))?;
    let upload_id = parts::create_upload(&objects.output)
        .map_err(|e| failed("begin the multipart upload to", &objects.output, e))?;
    let manifest = Manifest {
        upload: Some(Upload {
            url: objects.output.url(),
            upload_id: upload_id.clone(),
            part_size,
            parts,
        }),
        ..manifest
    };
    let abort = |error: Error| {
        let _ = parts::abort(&objects.output, &upload_id);
        error
    };
    let text = serde_json::to_vec_pretty(&manifest).map_err(|e| {
        abort(failed(
            "write the job's manifest",
            &objects.manifest,
            e.into(),
        ))
    })?;
    match parts::create_object(&objects.manifest, text) {
        Ok(true) => Ok(manifest),
        Ok(false) => Err(abort(already_begun(objects, manifest.workers))),
        Err(e) => Err(abort(failed(
            "write the job's manifest",
            &objects.manifest,
            e,
        ))),
    }
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
    let beside = format!(
        "under {}",
        messages::name(&format!("{}.tjoin-job/", objects.output.key))
    );
    super::refuse_unfinished_of(&objects.shown(), manifest, missing, &beside)
}

/// Completes the upload: the object appears whole. Then removes the job's objects.
pub fn complete(objects: &Objects, manifest: &Manifest, etags: Vec<String>) -> Result<()> {
    let upload = manifest.upload.as_ref().ok_or_else(|| not_begun(objects))?;
    parts::complete(&objects.output, &upload.upload_id, etags)
        .map_err(|e| failed("complete the multipart upload to", &objects.output, e))?;
    remove(objects, manifest.workers)
}

/// Whether the output object exists (`--no-clobber`).
pub fn output_exists(objects: &Objects) -> Result<bool> {
    parts::exists(&objects.output).map_err(|e| failed("look for", &objects.output, e))
}

/// Removes the records of workers `0..workers` and then the manifest.
fn remove(objects: &Objects, workers: u32) -> Result<()> {
    for worker in 0..workers {
        let location = objects.done(worker);
        parts::delete_object(&location).map_err(|e| failed("remove", &location, e))?;
    }
    parts::delete_object(&objects.manifest).map_err(|e| failed("remove", &objects.manifest, e))
}

/// What `--abandon` did: whether it aborted an upload (else the manifest could not be read,
/// and named none).
pub struct Abandoned {
    /// The upload aborted, if any.
    pub aborted: Option<String>,
}

/// Abandons the job beside the output: aborts its upload (every part sent is dropped), then
/// removes its records and its manifest. `workers` must be the job's count. Refuses when
/// there is no job.
pub fn abandon(objects: &Objects, workers: u32) -> Result<Abandoned> {
    let manifest = match read(objects) {
        Ok(manifest) => manifest.ok_or_else(|| not_begun(objects))?,
        // One this build cannot read names no upload it can trust: its objects go.
        Err(Error::Refused(_)) => {
            remove(objects, workers)?;
            return Ok(Abandoned { aborted: None });
        }
        Err(other) => return Err(other),
    };
    super::check_count(&objects.shown(), &manifest, workers)?;
    let upload = manifest.upload.as_ref().ok_or_else(|| not_begun(objects))?;
    parts::abort(&objects.output, &upload.upload_id)
        .map_err(|e| failed("abort the multipart upload to", &objects.output, e))?;
    remove(objects, workers)?;
    Ok(Abandoned {
        aborted: Some(upload.upload_id.clone()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_cut_into_runs_balanced_by_bytes() {
        let mib = 1u64 << 20;
        let Cut {
            part_size,
            parts,
            shares,
        } = cut(23 * mib, 3).unwrap();
        assert_eq!(part_size, 5 * mib);
        // Five parts (the last 3 MiB): 1, 2 and 2 of them.
        assert_eq!(parts, [[0, 1], [1, 2], [3, 2]]);
        assert_eq!(
            shares,
            [[0, 5 * mib], [5 * mib, 15 * mib], [15 * mib, 23 * mib]]
        );
        // Fewer parts than workers: some have none.
        let few = cut(100, 2).unwrap();
        assert_eq!(few.parts, [[0, 0], [0, 1]]);
        assert_eq!(few.shares, [[0, 0], [0, 100]]);
        // 1 TB by 8: 9,935 parts of 96 MiB, 1,241 or 1,242 each.
        let tb = cut(1_000_000_000_000, 8).unwrap();
        assert_eq!(tb.part_size, 96 * mib);
        assert_eq!(tb.parts.iter().map(|[_, n]| n).sum::<u32>(), 9935);
        let counts = tb.parts.iter().map(|[_, n]| *n);
        assert!(
            counts.clone().all(|n| (1241..=1242).contains(&n)),
            "{:?}",
            tb.parts
        );
        assert!(cut(MOST_PARTS * MOST_PART + 1, 1).is_none());
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
