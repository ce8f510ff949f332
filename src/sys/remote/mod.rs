//! Object storage: an input or an output named by a URL (`s3://BUCKET/KEY`, `gs://`, `az://`,
//! `https://`) instead of a path. This file parses and names such locations, whatever the
//! build; with the `remote` feature, `store.rs` reads them (ranged GETs pinned to the
//! version seen first) and `upload.rs` writes them (one multipart upload, visible only when
//! complete, aborted on any failure or signal), both through the `object_store` crate, with
//! credentials and endpoints from the standard environment (README.md, "Object storage").
//!
//! A location is shown through `crate::messages`, which redacts a URL's secrets (userinfo,
//! every query value) wherever it is echoed.

#[cfg(feature = "remote")]
pub mod parts;
#[cfg(feature = "remote")]
mod store;
#[cfg(feature = "remote")]
mod upload;

#[cfg(feature = "remote")]
pub use store::{Object, Seen, list, no_etag};
#[cfg(feature = "remote")]
pub use upload::{Streaming, Upload, abort_uploads, check_part_size};

use std::fmt;
use std::path::Path;

/// The stores a URL may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// `s3://BUCKET/KEY`: Amazon S3 or an S3-compatible store (MinIO, moto, R2...).
    S3,
    /// `gs://BUCKET/KEY`: Google Cloud Storage.
    Gcs,
    /// `az://CONTAINER/BLOB`: Azure Blob Storage (the account from the environment).
    Azure,
    /// `https://HOST/PATH` (or `http://`): any server that answers ranged GETs.
    Http,
}

impl Scheme {
    /// The environment variables that configure this store, for hints.
    pub fn environment(self) -> &'static str {
        match self {
            Scheme::S3 => {
                "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), \
                 AWS_REGION, AWS_ENDPOINT_URL for an S3-compatible store"
            }
            Scheme::Gcs => {
                "GOOGLE_APPLICATION_CREDENTIALS or GOOGLE_SERVICE_ACCOUNT (a service account's \
                 key file)"
            }
            Scheme::Azure => {
                "AZURE_STORAGE_ACCOUNT_NAME and AZURE_STORAGE_ACCOUNT_KEY (or \
                 AZURE_STORAGE_SAS_KEY, or AZURE_CLIENT_ID, AZURE_CLIENT_SECRET and \
                 AZURE_TENANT_ID)"
            }
            Scheme::Http => "nothing (https:// URLs are read without credentials)",
        }
    }
}

/// An object's location: a store, a bucket (or an HTTP server's origin) and a key.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Location {
    /// Which store.
    pub scheme: Scheme,
    /// The bucket or container; for `https://`, the origin (`https://host:port`).
    pub bucket: String,
    /// The object's key inside it, without a leading `/`; ends with `/` for a prefix.
    pub key: String,
}

/// The schemes tjoin reads as URLs, with the store each names.
const SCHEMES: [(&str, Scheme); 5] = [
    ("s3://", Scheme::S3),
    ("gs://", Scheme::Gcs),
    ("az://", Scheme::Azure),
    ("https://", Scheme::Http),
    ("http://", Scheme::Http),
];

/// Whether `path`, as the user wrote it, names an object rather than a local file: it starts
/// with one of the schemes tjoin reads (`s3://`, `gs://`, `az://`, `https://`, `http://`).
/// A local file whose name starts so is named `./s3://...`.
pub fn is_url(path: &Path) -> bool {
    let text = path.to_string_lossy();
    SCHEMES
        .iter()
        .any(|(prefix, _)| starts_with_ignoring_case(&text, prefix))
}

fn starts_with_ignoring_case(text: &str, prefix: &str) -> bool {
    text.get(..prefix.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
}

impl Location {
    /// Parses a URL the user gave (or an index named): what is wrong with it otherwise,
    /// for a message that names it.
    pub fn parse(text: &str) -> Result<Location, String> {
        let Some(&(prefix, scheme)) = SCHEMES
            .iter()
            .find(|(prefix, _)| starts_with_ignoring_case(text, prefix))
        else {
            return Err("it does not start with s3://, gs://, az://, https:// or http://".into());
        };
        let rest = &text[prefix.len()..];
        if rest.contains(['?', '#']) {
            return Err(
                "a query or a fragment (a pre-signed URL) is not read yet: give the \
                        object's plain URL and its store's credentials in the environment"
                    .into(),
            );
        }
        let (authority, key) = rest.split_once('/').unwrap_or((rest, ""));
        if authority.is_empty() {
            return Err(match scheme {
                Scheme::Http => "it names no host".into(),
                _ => "it names no bucket".into(),
            });
        }
        if authority.contains('@') {
            return Err("credentials in a URL are not read: give them in the environment".into());
        }
        if key.split('/').any(|part| part == "." || part == "..")
            || key.contains("//")
            || key.starts_with('/')
        {
            return Err("its key has an empty, `.` or `..` part".into());
        }
        let bucket = match scheme {
            Scheme::Http => format!("{}{authority}", &prefix.to_ascii_lowercase()),
            _ => authority.to_string(),
        };
        Ok(Location {
            scheme,
            bucket,
            key: key.to_string(),
        })
    }

    /// Whether it names a prefix (`s3://b/ckpt/`, or a bucket's top) rather than an object.
    pub fn is_prefix(&self) -> bool {
        self.key.is_empty() || self.key.ends_with('/')
    }

    /// The object `name` beside this one (in the same "folder"): an index's shard. `None` when
    /// `name` would leave that folder (a `/` that starts it, a `.` or `..` part, an empty part,
    /// a query): the names come from files, which an attacker may have written.
    pub fn sibling(&self, name: &str) -> Option<Location> {
        let bad = name.is_empty()
            || name.starts_with('/')
            || name.contains(['?', '#', '\\'])
            || name
                .split('/')
                .any(|part| part.is_empty() || part == "." || part == "..");
        if bad {
            return None;
        }
        let folder = match self.key.rfind('/') {
            Some(at) => &self.key[..=at],
            None => "",
        };
        Some(Location {
            key: format!("{folder}{name}"),
            ..self.clone()
        })
    }

    /// The key's last part (the object's "file name").
    pub fn file_name(&self) -> &str {
        let key = self.key.trim_end_matches('/');
        key.rsplit('/').next().unwrap_or(key)
    }

    /// The URL as text (the path an input is named by in messages).
    pub fn url(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.scheme {
            Scheme::Http => write!(f, "{}/{}", self.bucket, self.key),
            Scheme::S3 => write!(f, "s3://{}/{}", self.bucket, self.key),
            Scheme::Gcs => write!(f, "gs://{}/{}", self.bucket, self.key),
            Scheme::Azure => write!(f, "az://{}/{}", self.bucket, self.key),
        }
    }
}

impl fmt::Debug for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the raw text: a Debug print must not leak what Display would redact.
        write!(f, "{}", crate::messages::redact_urls(&self.to_string()))
    }
}

/// The error a URL input or output meets in a build without the `remote` feature.
#[cfg(not(feature = "remote"))]
pub fn not_built(location: &Location) -> std::io::Error {
    let _ = location;
    std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "this tjoin was built without object storage (the `remote` feature)\n\
         hint: install a release build, or build with `cargo build --features remote`",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_into_store_bucket_and_key() {
        let s3 = Location::parse("s3://bucket/ckpt/model.safetensors").unwrap();
        assert_eq!((s3.scheme, s3.bucket.as_str()), (Scheme::S3, "bucket"));
        assert_eq!(s3.key, "ckpt/model.safetensors");
        assert!(!s3.is_prefix());
        assert_eq!(s3.file_name(), "model.safetensors");
        let prefix = Location::parse("gs://b/ckpt/").unwrap();
        assert!(prefix.is_prefix());
        let http = Location::parse("HTTPS://host:8443/a/b.npy").unwrap();
        assert_eq!(http.bucket, "https://host:8443");
        assert_eq!(http.to_string(), "https://host:8443/a/b.npy");
        assert!(is_url(Path::new("az://c/b")));
        assert!(!is_url(Path::new("./s3://b/k")));
        assert!(!is_url(Path::new("s3:/b/k")));
    }

    #[test]
    fn bad_urls_are_refused_with_what_is_wrong() {
        for (text, says) in [
            ("s3:///key", "no bucket"),
            ("https://user:pw@host/k", "credentials"),
            ("s3://b/a/../k", "`..`"),
            ("s3://b//k", "empty"),
            ("https://h/k?X-Amz-Signature=1", "pre-signed"),
        ] {
            let error = Location::parse(text).unwrap_err();
            assert!(error.contains(says), "{text}: {error}");
        }
    }

    #[test]
    fn a_sibling_stays_in_its_folder() {
        let index = Location::parse("s3://b/ckpt/model.safetensors.index.json").unwrap();
        let shard = index.sibling("model-00001-of-00002.safetensors").unwrap();
        assert_eq!(shard.key, "ckpt/model-00001-of-00002.safetensors");
        assert_eq!(index.sibling("sub/x.bin").unwrap().key, "ckpt/sub/x.bin");
        for bad in ["../x", "/etc/passwd", "a//b", "", "x?y", "./x"] {
            assert!(index.sibling(bad).is_none(), "{bad}");
        }
    }
}
