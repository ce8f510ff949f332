//! The remote source: objects named by URL (`s3://BUCKET/KEY`, `gs://`, `az://`, `https://`),
//! read through `sys::remote` (object_store, credentials from the standard environment).
//! Registered in `sources::SCHEMES` for each scheme.
//!
//! No HEAD is sent: what is at a location is asked with a ranged GET of its first bytes,
//! whose answer gives its length and ETag too, and the bytes are kept for the read that
//! follows (an input's header). Every later read carries `If-Match` with that ETag, so that
//! an object replaced during the run fails its next read by name. An object whose server
//! gives no ETag is refused: tjoin could not tell whether it changed.

#[cfg(feature = "remote")]
use std::ffi::OsString;
use std::io;
#[cfg(feature = "remote")]
use std::sync::Mutex;

#[cfg(feature = "remote")]
use super::source::Kind;
use super::source::{Entry, Head, Source, Version};
use crate::location::Location;
#[cfg(feature = "remote")]
use crate::sys::remote::Object;
use crate::sys::remote::{self, Location as Url};

/// How many bytes the first GET of an object asks for: enough for most headers (a 70B
/// model's safetensors shard has about 40 KiB of header; a `torch.save` shard's pickle is
/// in its first bytes too), so that reading a set's headers costs one request per file, and
/// a 100-shard set's at most about 13 MB.
pub const FIRST_READ: u64 = 128 << 10;

/// The remote source: one for every scheme; each bucket's store is built once
/// (`sys::remote`).
#[derive(Default)]
pub struct Objects;

/// The first bytes of the object headed last, to serve the read of its header without a
/// second request (an input is opened right after its head): one object's, so that
/// re-checking 100,000 objects before the commit keeps no more than one.
#[cfg(feature = "remote")]
static FIRST: Mutex<Option<(Location, String, bytes::Bytes)>> = Mutex::new(None);

#[cfg(feature = "remote")]
fn first() -> std::sync::MutexGuard<'static, Option<(Location, String, bytes::Bytes)>> {
    FIRST
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The first bytes the head of `location` read (as `etag`), taken from the cache.
#[cfg(feature = "remote")]
fn take_first(location: &Location, etag: &str) -> Option<bytes::Bytes> {
    let mut first = first();
    match first.take() {
        Some((at, tag, bytes)) if at == *location && tag == etag => Some(bytes),
        other => {
            *first = other;
            None
        }
    }
}

/// Downloads the object at `location`, whose `head` its source gave, into `to` (an empty
/// file), every read pinned to the version its first read saw, in bounded pieces, four in
/// flight (`sys::remote::Object::download`).
#[cfg(feature = "remote")]
fn download(location: &Location, head: &Head, to: &std::fs::File) -> io::Result<()> {
    let Version::Tag(etag) = &head.version else {
        return Err(io::Error::other("not an object"));
    };
    if head.kind != Kind::Object {
        return Err(io::Error::other("it is a prefix (a folder), not an object"));
    }
    let first = take_first(location, etag).unwrap_or_default();
    let seen = remote::Seen {
        len: head.len,
        etag: Some(etag.to_string()),
        version: None,
    };
    Object::new(&url(location)?)?.download(&first, &seen, to)
}

/// Opens the source (no request is sent until a location is asked about).
pub fn open() -> io::Result<Box<dyn Source>> {
    Ok(Box::new(Objects))
}

/// The URL a location holds.
pub fn url(location: &Location) -> io::Result<Url> {
    Url::parse(&location.as_path().to_string_lossy())
        .map_err(|why| io::Error::new(io::ErrorKind::InvalidInput, why))
}

#[cfg(not(feature = "remote"))]
impl Source for Objects {
    fn head(&self, location: &Location) -> io::Result<Head> {
        Err(remote::not_built(&url(location)?))
    }

    fn read_at(&self, location: &Location, _: &Version, _: u64, _: &mut [u8]) -> io::Result<()> {
        Err(remote::not_built(&url(location)?))
    }

    fn list(&self, prefix: &Location) -> io::Result<Vec<Entry>> {
        Err(remote::not_built(&url(prefix)?))
    }
}

#[cfg(feature = "remote")]
impl Objects {
    /// A prefix's head: a folder when anything is under it.
    fn head_prefix(&self, at: &Url) -> io::Result<Head> {
        let folder = Url {
            key: format!("{}/", at.key.trim_end_matches('/')),
            ..at.clone()
        };
        let listed = if folder.key == "/" {
            remote::list(&Url {
                key: String::new(),
                ..at.clone()
            })?
        } else {
            remote::list(&folder)?
        };
        if listed.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "no such object, and no object under it as a prefix",
            ));
        }
        Ok(Head {
            len: 0,
            version: Version::Tag("".into()),
            kind: Kind::Folder,
        })
    }
}

#[cfg(feature = "remote")]
impl Source for Objects {
    fn head(&self, location: &Location) -> io::Result<Head> {
        let at = url(location)?;
        if at.is_prefix() {
            return self.head_prefix(&at);
        }
        let read = Object::new(&at)?.read(0..FIRST_READ, None);
        let (first, seen) = match read {
            Ok(read) => read,
            // `s3://b/ckpt` for the prefix `ckpt/`, as a folder named without its slash.
            Err(e) if e.kind() == io::ErrorKind::NotFound && at.scheme != remote::Scheme::Http => {
                return self.head_prefix(&at).map_err(|_| e);
            }
            Err(e) => return Err(e),
        };
        let etag = seen.etag.ok_or_else(remote::no_etag)?;
        first_cache_insert(location, &etag, first);
        Ok(Head {
            len: seen.len,
            version: Version::Tag(etag.into()),
            kind: Kind::Object,
        })
    }

    fn read_at(
        &self,
        location: &Location,
        version: &Version,
        offset: u64,
        buf: &mut [u8],
    ) -> io::Result<()> {
        let Version::Tag(etag) = version else {
            return Err(io::Error::other("a local file's version for an object"));
        };
        let end = offset
            .checked_add(buf.len() as u64)
            .ok_or_else(|| io::Error::other("a read past 2^64 bytes"))?;
        let cached = first()
            .as_ref()
            .filter(|(at, tag, _)| at == location && **tag == **etag)
            .map(|(_, _, bytes)| bytes.clone());
        if let Some(first) = cached.filter(|f| end <= f.len() as u64) {
            buf.copy_from_slice(&first[offset as usize..end as usize]);
            return Ok(());
        }
        let (bytes, _) = Object::new(&url(location)?)?.read(offset..end, Some(etag))?;
        if bytes.len() != buf.len() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "a read past its end",
            ));
        }
        buf.copy_from_slice(&bytes);
        Ok(())
    }

    fn download(&self, location: &Location, head: &Head, to: &std::fs::File) -> io::Result<()> {
        download(location, head, to)
    }

    fn list(&self, prefix: &Location) -> io::Result<Vec<Entry>> {
        let at = url(prefix)?;
        let folder = Url {
            key: match at.key.trim_end_matches('/') {
                "" => String::new(),
                key => format!("{key}/"),
            },
            ..at
        };
        let listed = remote::list(&folder)?;
        Ok(listed
            .into_iter()
            .map(|(name, is_object)| Entry {
                name: OsString::from(name),
                is_object,
            })
            .collect())
    }
}

/// Keeps the first bytes of an object headed (as `etag`), for the reads that follow.
#[cfg(feature = "remote")]
fn first_cache_insert(location: &Location, etag: &str, bytes: bytes::Bytes) {
    *first() = Some((location.clone(), etag.to_string(), bytes));
}
