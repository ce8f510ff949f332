//! The store calls of a job whose output is one object (`src/output/job/s3.rs`): a multipart
//! upload that `--begin` creates, whose parts each worker uploads by number, that the commit
//! completes with every part's ETag in order or `--abandon` aborts; and the small objects
//! the job keeps beside the output (its manifest, created only where none is; the workers'
//! records), read whole with a limit. Every call blocks on the process's one runtime.

use std::fs::File;
use std::io;
use std::sync::Arc;

use futures_util::{StreamExt, TryStreamExt};
use object_store::multipart::PartId;
use object_store::{GetOptions, GetRange, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use super::Location;
use super::store::{explain, key_path, multipart_for, runtime, store_for};

/// The most bytes of parts held at once by a worker; at least one part is.
const BYTES_IN_FLIGHT: u64 = 64 << 20;
/// The most parts uploaded at once.
const MOST_IN_FLIGHT: u64 = 4;

/// Begins a multipart upload to `location`: its id, as the store gave it.
pub fn create_upload(location: &Location) -> io::Result<String> {
    let store = multipart_for(location)?;
    let path = key_path(location)?;
    runtime()?
        .block_on(async move { store.create_multipart(&path).await })
        .map_err(|e| explain(location, e))
}

/// How many parts of `part_size` bytes go at once: as many as fit in 64 MiB, from 1 to 4.
fn in_flight(part_size: u64) -> usize {
    (BYTES_IN_FLIGHT / part_size.max(1)).clamp(1, MOST_IN_FLIGHT) as usize
}

/// Uploads the first `len` bytes of `file` as parts of `part_size` bytes (the last may be
/// shorter), numbered from `first` (0 is S3's part 1), to the upload `id` of `location`;
/// a few at once, each read from the file when it is sent, so that at most 64 MiB (or one
/// part) are held. The parts' ETags, in order. Uploading a part again replaces it.
pub fn put_parts(
    location: &Location,
    id: &str,
    (file, len): (&File, u64),
    first: u32,
    part_size: u64,
) -> io::Result<Vec<String>> {
    let store = multipart_for(location)?;
    let path = key_path(location)?;
    let count = len.div_ceil(part_size.max(1));
    let file = Arc::new(file.try_clone()?);
    let id = id.to_string();
    let sent: io::Result<Vec<PartId>> = runtime()?.block_on(async move {
        futures_util::stream::iter(0..count)
            .map(|index| {
                let (file, store, path, id) =
                    (file.clone(), store.clone(), path.clone(), id.clone());
                async move {
                    let start = index * part_size;
                    let size = part_size.min(len - start);
                    let bytes = tokio::task::spawn_blocking(move || {
                        let mut bytes = vec![0; usize::try_from(size).map_err(io::Error::other)?];
                        crate::sys::read_exact_at(&file, &mut bytes, start).map(|()| bytes)
                    })
                    .await
                    .map_err(io::Error::other)??;
                    let number = u64::from(first) + index;
                    let number = usize::try_from(number).map_err(io::Error::other)?;
                    store
                        .put_part(&path, &id, number, PutPayload::from(bytes))
                        .await
                        .map_err(|e| io::Error::other(Failed(e)))
                }
            })
            .buffered(in_flight(part_size))
            .try_collect()
            .await
    });
    let parts = sent.map_err(|e| explained(location, e))?;
    Ok(parts.into_iter().map(|p| p.content_id).collect())
}

/// Completes the upload `id` of `location` with `etags`, every part's in order from part 1:
/// the object appears whole.
pub fn complete(location: &Location, id: &str, etags: Vec<String>) -> io::Result<()> {
    let store = multipart_for(location)?;
    let path = key_path(location)?;
    let parts: Vec<PartId> = etags
        .into_iter()
        .map(|content_id| PartId { content_id })
        .collect();
    let id = id.to_string();
    runtime()?
        .block_on(async move { store.complete_multipart(&path, &id, parts).await })
        .map(|_| ())
        .map_err(|e| explain(location, e))
}

/// Aborts the upload `id` of `location`, dropping every part sent; an upload the store no
/// longer knows (aborted or completed before) is no error.
pub fn abort(location: &Location, id: &str) -> io::Result<()> {
    let store = multipart_for(location)?;
    let path = key_path(location)?;
    let id = id.to_string();
    match runtime()?.block_on(async move { store.abort_multipart(&path, &id).await }) {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
        Err(e) => Err(explain(location, e)),
    }
}

/// Writes `bytes` as the object `location` only where there is none (`If-None-Match: *`):
/// whether it did (`false`: an object was there, and is left as it was).
pub fn create_object(location: &Location, bytes: Vec<u8>) -> io::Result<bool> {
    put(location, bytes, PutMode::Create)
}

/// Writes `bytes` as the object `location`, over any that is there.
pub fn put_object(location: &Location, bytes: Vec<u8>) -> io::Result<()> {
    put(location, bytes, PutMode::Overwrite).map(|_| ())
}

fn put(location: &Location, bytes: Vec<u8>, mode: PutMode) -> io::Result<bool> {
    let store = store_for(location)?;
    let path = key_path(location)?;
    let options = PutOptions::from(mode);
    let put = runtime()?.block_on(async move {
        store
            .put_opts(&path, PutPayload::from(bytes), options)
            .await
    });
    match put {
        Ok(_) => Ok(true),
        Err(
            object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. },
        ) => Ok(false),
        Err(e) => Err(explain(location, e)),
    }
}

/// The object `location`'s bytes, `None` when there is none; an object longer than `limit`
/// bytes is refused after reading at most `limit + 1` of them.
pub fn get_object(location: &Location, limit: u64) -> io::Result<Option<Vec<u8>>> {
    let store = store_for(location)?;
    let path = key_path(location)?;
    let options = GetOptions {
        range: Some(GetRange::Bounded(0..limit.saturating_add(1))),
        ..GetOptions::default()
    };
    let got = runtime()?.block_on(async move {
        let result = store.get_opts(&path, options).await?;
        let size = result.meta.size;
        result.bytes().await.map(|bytes| (size, bytes))
    });
    match got {
        Ok((size, bytes)) if size > limit || bytes.len() as u64 > limit => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("it is {size} bytes long, more than the {limit} a job writes"),
        )),
        Ok((_, bytes)) => Ok(Some(bytes.to_vec())),
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        // An empty object answers a range from 0 with 416.
        Err(e) if format!("{e:?}").contains("InvalidRange") => Ok(Some(Vec::new())),
        Err(e) => Err(explain(location, e)),
    }
}

/// Whether there is an object at `location` (one HEAD).
pub fn exists(location: &Location) -> io::Result<bool> {
    let store = store_for(location)?;
    let path = key_path(location)?;
    match runtime()?.block_on(async move { store.head(&path).await }) {
        Ok(_) => Ok(true),
        Err(object_store::Error::NotFound { .. }) => Ok(false),
        Err(e) => Err(explain(location, e)),
    }
}

/// Removes the object `location`; one that is not there is no error.
pub fn delete_object(location: &Location) -> io::Result<()> {
    let store = store_for(location)?;
    let path = key_path(location)?;
    match runtime()?.block_on(async move { store.delete(&path).await }) {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
        Err(e) => Err(explain(location, e)),
    }
}

/// object_store's error carried through an `io::Error` until [`explained`] reads it.
#[derive(Debug)]
struct Failed(object_store::Error);

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Failed {}

/// An error of a part's upload, explained when it was the store's.
fn explained(location: &Location, error: io::Error) -> io::Error {
    if error
        .get_ref()
        .is_some_and(|inner| inner.downcast_ref::<Failed>().is_some())
    {
        if let Some(Ok(failed)) = error.into_inner().map(|inner| inner.downcast::<Failed>()) {
            return explain(location, failed.0);
        }
        return io::Error::other("a part's upload failed");
    }
    error
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_in_flight_hold_at_most_64_mib_or_one_part() {
        assert_eq!(in_flight(5 << 20), 4);
        assert_eq!(in_flight(32 << 20), 2);
        assert_eq!(in_flight(105 << 20), 1);
        assert_eq!(in_flight(0), 4);
    }
}
