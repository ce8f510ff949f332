//! The store calls of a job whose output is one object (`src/output/job/s3.rs`): a multipart
//! upload that `--begin` creates, whose parts each worker uploads by number, that the commit
//! completes with every part's ETag in order or `--abandon` aborts; and the small objects
//! the job keeps beside the output (its manifest, created only where none is; the workers'
//! records), read whole with a limit. Every call blocks on the process's one runtime.

use std::collections::VecDeque;
use std::io;
use std::sync::Arc;

use object_store::multipart::{MultipartStore, PartId};
use object_store::{GetOptions, GetRange, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use super::Location;
use super::store::{explain, key_path, multipart_for, runtime, store_for};

/// The most bytes of parts in flight at once; at least one part is.
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

/// The parts of an upload, written in order as a stream: every `part_size` bytes make a
/// part, numbered from the first one given (0 is S3's part 1), sent while the next fills,
/// a few at once, so that at most 64 MiB (or one part) are in flight besides the one
/// filling. [`PartStream::finish`] sends the last (shorter) part and gives every part's ETag
/// in order; dropping it unfinished cancels the parts under way (the upload's abort, or a
/// worker run again, deals with those sent). Uploading a part again replaces it.
pub struct PartStream {
    location: Location,
    store: Arc<dyn MultipartStore>,
    path: object_store::path::Path,
    id: String,
    part_size: usize,
    next: usize,
    filling: Vec<u8>,
    sent: VecDeque<tokio::task::JoinHandle<object_store::Result<PartId>>>,
    most: usize,
    etags: Vec<String>,
}

impl PartStream {
    /// The parts of the upload `id` of `location`, from number `first`, of `part_size` bytes.
    pub fn new(location: &Location, id: &str, first: u32, part_size: u64) -> io::Result<Self> {
        Ok(PartStream {
            location: location.clone(),
            store: multipart_for(location)?,
            path: key_path(location)?,
            id: id.to_string(),
            part_size: usize::try_from(part_size.max(1)).map_err(io::Error::other)?,
            next: usize::try_from(first).map_err(io::Error::other)?,
            filling: Vec::new(),
            sent: VecDeque::new(),
            most: in_flight(part_size),
            etags: Vec::new(),
        })
    }

    /// Sends the part filled, once fewer than the most are in flight.
    fn send(&mut self) -> io::Result<()> {
        while self.sent.len() >= self.most {
            self.wait_oldest()?;
        }
        let bytes = std::mem::take(&mut self.filling);
        let (store, path, id) = (self.store.clone(), self.path.clone(), self.id.clone());
        let number = self.next;
        let put = async move {
            store
                .put_part(&path, &id, number, PutPayload::from(bytes))
                .await
        };
        self.sent.push_back(runtime()?.spawn(put));
        self.next += 1;
        Ok(())
    }

    /// Waits for the oldest part in flight, and keeps its ETag.
    fn wait_oldest(&mut self) -> io::Result<()> {
        let Some(oldest) = self.sent.pop_front() else {
            return Ok(());
        };
        let part = runtime()?
            .block_on(oldest)
            .map_err(io::Error::other)?
            .map_err(|e| explain(&self.location, e))?;
        self.etags.push(part.content_id);
        Ok(())
    }

    /// Sends the last part (when any byte is left), waits for every part: their ETags in
    /// order.
    pub fn finish(mut self) -> io::Result<Vec<String>> {
        if !self.filling.is_empty() {
            self.send()?;
        }
        while !self.sent.is_empty() {
            self.wait_oldest()?;
        }
        Ok(std::mem::take(&mut self.etags))
    }
}

impl io::Write for PartStream {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if self.filling.capacity() == 0 {
            self.filling.reserve_exact(self.part_size);
        }
        let take = (self.part_size - self.filling.len()).min(bytes.len());
        self.filling.extend_from_slice(&bytes[..take]);
        if self.filling.len() == self.part_size {
            self.send()?;
        }
        Ok(take)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for PartStream {
    fn drop(&mut self) {
        for part in &self.sent {
            part.abort();
        }
    }
}

/// Completes the upload `id` of `location` with `etags`, every part's in order from part 1:
/// the object appears whole. A store that has not those parts (S3's `InvalidPart`: an ETag
/// that is not its part's) completes nothing, and answers [`io::ErrorKind::InvalidData`].
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
        .map_err(|e| match format!("{e:?} {e}").contains("InvalidPart") {
            true => io::Error::new(
                io::ErrorKind::InvalidData,
                "the store has not the parts the workers' records name (InvalidPart)",
            ),
            false => explain(location, e),
        })
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
