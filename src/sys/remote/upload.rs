//! Writing an object: a finished local file uploaded as one multipart upload, which the store
//! shows under its key only once completed. Until then the upload is registered, so that a
//! failure, a refusal, Ctrl-C or SIGTERM aborts it ([`abort_uploads`], which the signal
//! handler calls through `staging::on_signal`): no part is left billed, and the key is never half-written. An abort that
//! fails prints the upload's id, for `aws s3api abort-multipart-upload`.

use std::fs::File;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures_util::{StreamExt, TryStreamExt};
use object_store::multipart::{MultipartStore, PartId};
use object_store::{MultipartId, PutMode, PutOptions, PutPayload};

use super::store::{explain, key_path, runtime, store_for};
use super::{Location, Scheme};

/// Parts uploaded at once.
const IN_FLIGHT: usize = 4;
/// The smallest part: S3's minimum is 5 MiB (but for the last part).
const MIN_PART: u64 = 8 << 20;
/// S3's limits: 10,000 parts of at most 5 GiB.
const MAX_PARTS: u64 = 10_000;
const MAX_PART: u64 = 5 << 30;
/// How long an abort on a signal may take before the process ends anyway.
const ABORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The size of each part of an upload of `len` bytes: 8 MiB, or the least whole number of
/// MiB that fits the object in 10,000 parts; `None` past 10,000 parts of 5 GiB (48.8 TiB).
pub fn part_size(len: u64) -> Option<u64> {
    let least = len
        .div_ceil(MAX_PARTS)
        .div_ceil(1 << 20)
        .checked_mul(1 << 20)?;
    let size = least.max(MIN_PART);
    (size <= MAX_PART).then_some(size)
}

/// An upload under way, registered for [`abort_uploads`] until it completes or is aborted.
struct Pending {
    location: Location,
    store: Arc<dyn MultipartStore>,
    path: object_store::path::Path,
    id: MultipartId,
}

static PENDING: Mutex<Vec<Arc<Pending>>> = Mutex::new(Vec::new());

fn pending() -> MutexGuard<'static, Vec<Arc<Pending>>> {
    PENDING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Aborts every upload under way (the signal handler's call, before the process dies), each
/// within [`ABORT_TIMEOUT`]; one that cannot be aborted is named with its id on standard
/// error.
pub fn abort_uploads() {
    let uploads: Vec<Arc<Pending>> = pending().drain(..).collect();
    for upload in uploads {
        if let Err(e) = abort(&upload) {
            crate::messages::eprintln(abort_failed(&upload, &e));
        }
    }
}

fn abort(upload: &Pending) -> io::Result<()> {
    let (store, path, id) = (upload.store.clone(), upload.path.clone(), upload.id.clone());
    let aborted = runtime()?.block_on(async move {
        tokio::time::timeout(ABORT_TIMEOUT, store.abort_multipart(&path, &id)).await
    });
    match aborted {
        Ok(result) => result.map_err(|e| explain(&upload.location, e)),
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "no answer in 10 seconds",
        )),
    }
}

fn abort_failed(upload: &Pending, error: &io::Error) -> String {
    let location = &upload.location;
    let mut text = format!(
        "tjoin: warning: could not abort the multipart upload to {} (upload id {}): {error}",
        crate::messages::redact_urls(&location.to_string()),
        upload.id
    );
    if location.scheme == Scheme::S3 {
        text.push_str(&format!(
            "\nhint: its parts are billed until it is aborted: aws s3api \
             abort-multipart-upload --bucket {} --key {} --upload-id {}",
            location.bucket, location.key, upload.id
        ));
    }
    text
}

/// Uploads a finished object.
pub struct Upload;

impl Upload {
    /// Uploads the first `len` bytes of `file` to `location`: in one PUT when they fit in
    /// one part, else in one multipart upload of parts sized by [`part_size`], four in
    /// flight, completed only once every part is in; aborted on any failure. With
    /// `no_clobber`, an existing object is refused before a byte is sent; a one-part upload
    /// is a conditional create (`If-None-Match: *`) too, while a multipart one is only
    /// checked before it starts (object_store completes uploads unconditionally).
    pub fn file(location: &Location, file: &File, len: u64, no_clobber: bool) -> io::Result<()> {
        if location.scheme == Scheme::Http {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "https:// outputs are not written\nhint: write to s3://, gs:// or az://, or \
                 to a local file",
            ));
        }
        let store = store_for(location)?;
        let path = key_path(location)?;
        if no_clobber {
            Upload::check_absent(location)?;
        }
        let part = part_size(len).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::FileTooLarge,
                format!("{len} bytes are more than one object may hold (10,000 parts of 5 GiB)"),
            )
        })?;
        if len <= part {
            let mut bytes = vec![0; usize::try_from(len).map_err(io::Error::other)?];
            crate::sys::read_exact_at(file, &mut bytes, 0)?;
            let mode = if no_clobber {
                PutMode::Create
            } else {
                PutMode::Overwrite
            };
            let options = PutOptions::from(mode);
            let put = runtime()?.block_on(async move {
                store
                    .put_opts(&path, PutPayload::from(bytes), options)
                    .await
            });
            return put.map(|_| ()).map_err(|e| match e {
                object_store::Error::AlreadyExists { .. } => exists(location),
                e => explain(location, e),
            });
        }
        let multipart = super::store::multipart_for(location)?;
        let id = runtime()?
            .block_on(multipart.create_multipart(&path))
            .map_err(|e| explain(location, e))?;
        let upload = Arc::new(Pending {
            location: location.clone(),
            store: multipart,
            path,
            id,
        });
        pending().push(upload.clone());
        let result = send_parts(&upload, file, len, part);
        let still_pending = {
            let mut list = pending();
            let at = list.iter().position(|p| Arc::ptr_eq(p, &upload));
            at.map(|at| list.swap_remove(at)).is_some()
        };
        if !still_pending {
            // A signal's handler took it, and aborts it: the process is ending.
            return Err(io::Error::new(io::ErrorKind::Interrupted, "interrupted"));
        }
        result.inspect_err(|_| {
            if let Err(e) = abort(&upload) {
                crate::messages::eprintln(abort_failed(&upload, &e));
            }
        })
    }
}

/// Sends every part, [`IN_FLIGHT`] at once, then completes the upload.
fn send_parts(upload: &Arc<Pending>, file: &File, len: u64, part: u64) -> io::Result<()> {
    let count = len.div_ceil(part);
    let file = file.try_clone()?;
    let (store, path, id) = (upload.store.clone(), upload.path.clone(), upload.id.clone());
    let sent: Result<Vec<PartId>, io::Error> = runtime()?.block_on(async move {
        let file = Arc::new(file);
        futures_util::stream::iter(0..count)
            .map(|index| {
                let (file, store, path, id) =
                    (file.clone(), store.clone(), path.clone(), id.clone());
                async move {
                    let start = index * part;
                    let size = part.min(len - start);
                    let bytes = tokio::task::spawn_blocking(move || {
                        let mut bytes = vec![0; size as usize];
                        crate::sys::read_exact_at(&file, &mut bytes, start).map(|()| bytes)
                    })
                    .await
                    .map_err(io::Error::other)??;
                    let index = usize::try_from(index).map_err(io::Error::other)?;
                    store
                        .put_part(&path, &id, index, PutPayload::from(bytes))
                        .await
                        .map_err(|e| io::Error::other(ObjectError(e)))
                }
            })
            .buffered(IN_FLIGHT)
            .try_collect()
            .await
    });
    let parts = sent.map_err(|e| match e.into_inner() {
        Some(inner) => match inner.downcast::<ObjectError>() {
            Ok(object) => explain(&upload.location, object.0),
            Err(other) => io::Error::other(other),
        },
        None => io::Error::other("a part's upload failed"),
    })?;
    let (store, path, id) = (upload.store.clone(), upload.path.clone(), upload.id.clone());
    runtime()?
        .block_on(async move { store.complete_multipart(&path, &id, parts).await })
        .map(|_| ())
        .map_err(|e| explain(&upload.location, e))
}

/// object_store's error carried through an `io::Error` until [`explain`] reads it.
#[derive(Debug)]
struct ObjectError(object_store::Error);

impl std::fmt::Display for ObjectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for ObjectError {}

impl Upload {
    /// `--no-clobber`'s check of an upload: one HEAD, before anything is sent.
    pub fn check_absent(location: &Location) -> io::Result<()> {
        use object_store::ObjectStoreExt;
        let (store, path) = (store_for(location)?, key_path(location)?);
        match runtime()?.block_on(async move { store.head(&path).await }) {
            Ok(_) => Err(exists(location)),
            Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(explain(location, e)),
        }
    }
}

fn exists(location: &Location) -> io::Error {
    let _ = location;
    io::Error::new(
        io::ErrorKind::AlreadyExists,
        "the object exists, and --no-clobber keeps it\nhint: name another key, or leave out \
         --no-clobber to replace it",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_follow_the_stores_rules() {
        assert_eq!(part_size(0), Some(MIN_PART));
        assert_eq!(part_size(1 << 30), Some(MIN_PART));
        // 1 TiB: 10,000 parts of 105 MiB (104.9 MiB rounded up to a whole MiB).
        let tib = 1u64 << 40;
        let part = part_size(tib).unwrap();
        assert_eq!(part, 105 << 20);
        assert!(tib.div_ceil(part) <= MAX_PARTS);
        assert!(part_size(MAX_PARTS * MAX_PART).is_some());
        assert_eq!(part_size(MAX_PARTS * MAX_PART + (1 << 30)), None);
        assert_eq!(part_size(u64::MAX), None);
    }
}
