//! Outputs named by URL (`-o s3://BUCKET/KEY`, a sharded set under `s3://BUCKET/PREFIX/`),
//! uploaded as they are written: each file of the planned output is a multipart upload
//! (`sys::remote::Streaming`) that the writer's bytes go straight into, part by part, with no
//! local copy. This works because every writer the join uses writes its file front to back
//! through the `Sink` (npy, safetensors, JSON, npz and GGUF frame their data without going
//! back); the one writer that goes back, the early copy's header (`engine::early`), is not
//! used for a URL (`JoinConfig::early_copy`).
//!
//! The files are written in order, and a file's last part is sent as soon as the next file
//! takes its first byte, so that memory holds one part being filled and the parts in flight,
//! never a file. The commit first sends every file's last part (so that a key the store
//! refuses fails the run before any object appears), then completes each upload in order, a
//! sharded set's index after its shards, so that a reader who finds the index finds every
//! shard; dropping the output before its commit, on any failure, aborts every upload: no
//! key is written half, and none of a set's files appears. A signal during the completions
//! waits for them to end, as one during a local set's renames does. A completion that fails
//! after others (rare: a `--no-clobber` race, a store failing between two requests) names
//! the objects in place and those not written, since a store takes no completed object back.
//! The split's outputs are one such output, every file of every output in order
//! (`output::several`). Nothing under a prefix is removed: a previous set's extra shards
//! stay, and the new index no longer names them.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{Error, Result};
use crate::format::Sink;

#[cfg(feature = "remote")]
use crate::sys::remote::{Location, Streaming};

/// Room left in a file's planned size for its framing (headers, an index): the tensors'
/// bytes are known, a header's length not yet; a part size planned a little large costs
/// nothing, one planned too small could exceed the store's 10,000 parts.
const FRAMING: u64 = 1 << 30;

/// Whether `target` is an object to upload rather than a local file.
pub fn is_url(target: &Path) -> bool {
    crate::sys::remote::is_url(target)
}

/// The files of one output, uploaded as they are written; committed together.
pub struct Uploads {
    members: Vec<Member>,
    shared: Arc<Mutex<Shared>>,
}

/// The uploads, shared by the members that write them.
struct Shared {
    objects: Vec<Object>,
    /// The member being written: those before it are written whole.
    writing: usize,
    /// Each member's name, for the error of one that fails as the next begins.
    names: Vec<PathBuf>,
}

#[cfg(feature = "remote")]
type Object = Streaming;

/// A build without object storage never opens an upload.
#[cfg(not(feature = "remote"))]
enum Object {}

/// One file of the output, a sink its writer writes into.
pub struct Member {
    shared: Arc<Mutex<Shared>>,
    at: usize,
    name: PathBuf,
}

impl Uploads {
    /// Starts an upload for each of `targets` (each a URL with the bytes planned for it),
    /// in the order they are written, in parts of `part_size` when given. With `no_clobber`,
    /// every key is checked before a byte of any is sent, and those that exist are refused
    /// together.
    pub fn open(
        targets: &[(PathBuf, u64)],
        no_clobber: bool,
        part_size: Option<u64>,
    ) -> Result<Uploads> {
        check_distinct(targets)?;
        if let Some(asked) = part_size {
            for (target, planned) in targets {
                check_part_size(target, planned.saturating_add(FRAMING), asked)?;
            }
        }
        let mut objects = Vec::with_capacity(targets.len());
        let mut existing: Vec<(&Path, io::Error)> = Vec::new();
        for (target, planned) in targets {
            let planned = planned.saturating_add(FRAMING);
            match begin(target, planned, (no_clobber, part_size)) {
                Ok(object) => objects.push(object),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => existing.push((target, e)),
                Err(e) => return Err(Error::io("write", target, e)),
            }
        }
        if let Some(refused) = refuse_existing(existing) {
            return Err(refused);
        }
        let shared = Arc::new(Mutex::new(Shared {
            objects,
            writing: 0,
            names: targets.iter().map(|(target, _)| target.clone()).collect(),
        }));
        let members = targets
            .iter()
            .enumerate()
            .map(|(at, (target, _))| Member {
                shared: shared.clone(),
                at,
                name: target.clone(),
            })
            .collect();
        Ok(Uploads { members, shared })
    }

    /// Its files, to write in order.
    pub fn members_mut(&mut self) -> &mut [Member] {
        &mut self.members
    }

    /// Completes every upload, in order: the objects appear under their keys, a set's index
    /// last. A failure aborts the uploads not yet complete; after the first completion it
    /// names the objects already in place and those not written (a store takes back no
    /// completed object).
    pub fn commit(self) -> Result<()> {
        let Uploads { members, shared } = self;
        let names: Vec<PathBuf> = members.into_iter().map(|m| m.name).collect();
        let mut objects = std::mem::take(&mut lock(&shared).objects);
        if objects.len() > 1 {
            // Every file's last part is sent (its upload started) before the first is
            // completed: a key the store refuses fails the run with nothing in place. One
            // file stays one PUT when it fits in one part.
            for (object, name) in objects.iter_mut().zip(&names) {
                end(object).map_err(|e| Error::io("upload", name, e))?;
            }
            // And every part is taken: a part the store refused fails the run here, with
            // nothing in place, rather than at its file's completion, after others.
            for (object, name) in objects.iter_mut().zip(&names) {
                settle(object).map_err(|e| Error::io("upload", name, e))?;
            }
        }
        // Once begun, the completions go to their end, as a local set's renames do: a
        // signal waits for them (its handler would abort the uploads not yet complete,
        // leaving some objects in place, a set's shards without their index, and nothing
        // said). Each is one request now, every part being taken.
        let _signals_wait = (objects.len() > 1).then(super::temporary::hold_signals);
        for (done, (object, name)) in objects.into_iter().zip(&names).enumerate() {
            // On a failure the rest of the iterator is dropped: their uploads are aborted.
            complete(object, name).map_err(|e| partly_completed(&names, done, e))?;
        }
        Ok(())
    }
}

/// Refuses targets two of which name one object (`-o s3://B/x/model.safetensors -o
/// s3://B/x/`, a split whose second output's one shard is the first's key): both would be
/// uploaded, and the one completed last would replace the other, with nothing to say so.
fn check_distinct(targets: &[(PathBuf, u64)]) -> Result<()> {
    let mut seen = std::collections::HashSet::new();
    for (target, _) in targets {
        let text = target.to_string_lossy();
        // A URL that does not parse is refused when its upload begins.
        let object = crate::sys::remote::Location::parse(&text).map_err(|_| text.to_string());
        if !seen.insert(object) {
            return Err(Error::refused(
                format!(
                    "the outputs name {} twice: the one completed last would replace the other",
                    crate::messages::path(target)
                ),
                "name a different key for every output (a sharded output's shards are named \
                 in its prefix)",
            ));
        }
    }
    Ok(())
}

/// The refusal of `--no-clobber` when objects of `existing` (each with the store's answer)
/// exist: the first named as any failed write is, with the others after it.
fn refuse_existing(existing: Vec<(&Path, io::Error)>) -> Option<Error> {
    let mut existing = existing.into_iter();
    let (first, error) = existing.next()?;
    let others: Vec<String> = existing.map(|(p, _)| crate::messages::path(p)).collect();
    if others.is_empty() {
        return Some(Error::io("write", first, error));
    }
    let why = format!(
        "the object exists, and --no-clobber keeps it; so do {} more: {}\nhint: name other \
         keys, or leave out --no-clobber to replace them",
        others.len(),
        crate::error::capped(others, 10).join(", ")
    );
    Some(Error::io(
        "write",
        first,
        io::Error::new(io::ErrorKind::AlreadyExists, why),
    ))
}

/// The error of a completion that failed (`error`, from `names[done]`'s) after `done` others
/// were completed: those are in place and stay, the rest are not written.
fn partly_completed(names: &[PathBuf], done: usize, error: Error) -> Error {
    let Error::Io { path, source, .. } = error else {
        return error;
    };
    if done == 0 {
        return Error::io("upload", &path, source);
    }
    let list = |paths: &[PathBuf]| {
        let named = paths.iter().map(|p| crate::messages::path(p)).collect();
        crate::error::capped(named, 10).join(", ")
    };
    let text = source.to_string();
    let (why, hint) = text.split_once("\nhint: ").unwrap_or((&text, ""));
    let hint = match hint {
        "" => String::new(),
        hint => format!("; {hint}"),
    };
    let why = format!(
        "{why}\n  in place already (completed before it): {}\n  not written (their \
         uploads aborted, their keys as they were): {}\nhint: run again to write them all \
         (--no-clobber would refuse the objects now in place){hint}",
        list(&names[..done]),
        list(&names[done..]),
    );
    Error::io("upload", &path, io::Error::new(source.kind(), why))
}

fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    shared
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The error `e` of the object `name`, met as a later one was written (the caller names
/// that one): it says which failed.
fn failed_before(name: &Path, e: io::Error) -> io::Error {
    let failed = crate::messages::path(name);
    io::Error::new(
        e.kind(),
        format!("an object before it, {failed}, failed: {e}"),
    )
}

impl Sink for Member {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        let mut shared = lock(&self.shared);
        if self.at < shared.writing {
            // Its last part is sent: a byte more would make that part one in the middle,
            // which the store refuses when under 5 MiB. Files are written one after another.
            return Err(io::Error::other(
                "a file of the upload was written to after the next one began",
            ));
        }
        // The files before this one are written whole: their last parts go now.
        while shared.writing < self.at {
            let at = shared.writing;
            end(&mut shared.objects[at]).map_err(|e| failed_before(&shared.names[at], e))?;
            // The file before that one has all its parts taken before this one's are sent:
            // parts of at most two files in flight, whatever the number of files (each
            // file's in flight bounded by `Streaming`).
            if let Some(before) = at.checked_sub(1) {
                settle(&mut shared.objects[before])
                    .map_err(|e| failed_before(&shared.names[before], e))?;
            }
            shared.writing += 1;
        }
        write(&mut shared.objects[self.at], bytes)
    }

    fn name(&self) -> &Path {
        &self.name
    }
}

#[cfg(feature = "remote")]
fn begin(
    target: &Path,
    planned: u64,
    (no_clobber, part_size): (bool, Option<u64>),
) -> io::Result<Object> {
    let location = Location::parse(&target.to_string_lossy()).map_err(io::Error::other)?;
    Streaming::begin(&location, planned, (no_clobber, part_size))
}

/// Refuses parts of `asked` bytes (`--part-size`) for the object `target` of about
/// `planned` bytes, when they would be more than S3's 10,000.
#[cfg(feature = "remote")]
fn check_part_size(target: &Path, planned: u64, asked: u64) -> Result<()> {
    crate::sys::remote::check_part_size(planned, asked).map_err(|(why, hint)| {
        Error::refused(format!("{}: {why}", crate::messages::path(target)), hint)
    })
}

#[cfg(feature = "remote")]
fn write(object: &mut Object, bytes: &[u8]) -> io::Result<()> {
    object.write(bytes)
}

#[cfg(feature = "remote")]
fn end(object: &mut Object) -> io::Result<()> {
    object.end()
}

#[cfg(feature = "remote")]
fn settle(object: &mut Object) -> io::Result<()> {
    object.settle()
}

#[cfg(feature = "remote")]
fn complete(object: Object, name: &Path) -> Result<()> {
    object.complete().map_err(|e| Error::io("upload", name, e))
}

#[cfg(not(feature = "remote"))]
fn check_part_size(_target: &Path, _planned: u64, _asked: u64) -> Result<()> {
    Ok(())
}

#[cfg(not(feature = "remote"))]
fn begin(_target: &Path, _planned: u64, _asked: (bool, Option<u64>)) -> io::Result<Object> {
    let why = "this tjoin was built without object storage (the `remote` feature)\nhint: \
               install a release build, or build with `cargo build --features remote`";
    Err(io::Error::other(why))
}

#[cfg(not(feature = "remote"))]
fn write(object: &mut Object, _bytes: &[u8]) -> io::Result<()> {
    match *object {}
}

#[cfg(not(feature = "remote"))]
fn end(object: &mut Object) -> io::Result<()> {
    match *object {}
}

#[cfg(not(feature = "remote"))]
fn settle(object: &mut Object) -> io::Result<()> {
    match *object {}
}

#[cfg(not(feature = "remote"))]
fn complete(object: Object, _name: &Path) -> Result<()> {
    match object {}
}
