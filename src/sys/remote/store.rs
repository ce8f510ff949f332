//! Reading objects: the store a URL names, built once per bucket from the standard
//! environment; ranged GETs pinned to the version seen by the first, each checked to bring
//! exactly the bytes asked for; listings of a prefix. Every call blocks the caller on one
//! runtime shared by the process (object_store is async; tjoin's stages are not).
//!
//! No HEAD is ever sent for an input: the first ranged GET of an object (its header) returns
//! its length and ETag too, and every later GET carries `If-Match` with that ETag, so that an
//! object replaced during the run is refused by name instead of read half old, half new.

use std::collections::HashMap;
use std::io;
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};
use object_store::aws::AmazonS3Builder;
use object_store::azure::MicrosoftAzureBuilder;
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::http::HttpBuilder;
use object_store::multipart::MultipartStore;
use object_store::signer::Signer;
use object_store::{ClientOptions, GetOptions, GetRange, ObjectStore};

use super::{Location, Scheme};

/// The runtime every remote call runs on: two worker threads, enough to keep a few requests
/// in flight while the caller blocks.
pub(super) fn runtime() -> io::Result<&'static tokio::runtime::Runtime> {
    static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    let made = RUNTIME.get_or_init(|| {
        // rustls needs its cryptography chosen once per process (ring: see Cargo.toml).
        let _ = rustls::crypto::ring::default_provider().install_default();
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("remote")
            .enable_all()
            .build()
            .map_err(|e| e.to_string())
    });
    made.as_ref()
        .map_err(|e| io::Error::other(format!("cannot start the network runtime: {e}")))
}

/// What the first read of an object saw: its length and version. Every later read is pinned
/// to it, and a run compares it before its output is committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// The object's length in bytes.
    pub len: u64,
    /// Its ETag, when the store gives one.
    pub etag: Option<String>,
    /// Its version id, when the bucket keeps versions.
    pub version: Option<String>,
}

/// One object to read.
#[derive(Debug, Clone)]
pub struct Object {
    location: Location,
    store: Arc<dyn ObjectStore>,
    path: object_store::path::Path,
}

impl Object {
    /// The object at `location`, through its bucket's store (built from the environment the
    /// first time the bucket is named). Sends no request.
    pub fn new(location: &Location) -> io::Result<Object> {
        Ok(Object {
            location: location.clone(),
            store: store_for(location)?,
            path: key_path(location)?,
        })
    }

    /// Where it is.
    pub fn location(&self) -> &Location {
        &self.location
    }

    /// Bytes `range` of the object (cut at its end), with what the response says of the
    /// object; with `etag`, only from that version (`If-Match`), else the object changed and
    /// the read is refused. One ranged GET (object_store retries it on 5xx, timeouts and
    /// throttling, and resumes a body cut short by the network from where it stopped, under
    /// the same Range); a body other than the bytes asked for is an error.
    pub fn read(&self, range: Range<u64>, etag: Option<&str>) -> io::Result<(Bytes, Seen)> {
        let options = GetOptions {
            range: Some(GetRange::Bounded(range.clone())),
            if_match: etag.map(str::to_string),
            ..GetOptions::default()
        };
        let (store, path) = (self.store.clone(), self.path.clone());
        let got = runtime()?.block_on(get(store, path, options));
        checked(&self.location, range, etag, got)
    }

    /// Writes the whole object into `to` (from its offset 0), `first` being its first bytes
    /// as a read of them saw the object (`seen`, which must carry an ETag): the rest in
    /// 8 MiB ranges, four in flight, each pinned to that ETag. At most 32 MiB are held.
    pub fn download(&self, first: &[u8], seen: &Seen, to: &std::fs::File) -> io::Result<()> {
        const PIECE: u64 = 8 << 20;
        const IN_FLIGHT: usize = 4;
        let etag = seen.etag.clone().ok_or_else(no_etag)?;
        crate::sys::write_all_at(to, first, 0)?;
        let start = first.len() as u64;
        let len = seen.len;
        let pieces = len.saturating_sub(start).div_ceil(PIECE);
        let to = Arc::new(to.try_clone()?);
        let this = self.clone();
        runtime()?.block_on(async move {
            futures_util::stream::iter(0..pieces)
                .map(|piece| {
                    let (this, to, etag) = (this.clone(), to.clone(), etag.clone());
                    async move {
                        let from = start + piece * PIECE;
                        let range = from..(from + PIECE).min(len);
                        let options = GetOptions {
                            range: Some(GetRange::Bounded(range.clone())),
                            if_match: Some(etag.clone()),
                            ..GetOptions::default()
                        };
                        let got = get(this.store.clone(), this.path.clone(), options).await;
                        let (bytes, _) = checked(&this.location, range, Some(&etag), got)?;
                        tokio::task::spawn_blocking(move || {
                            crate::sys::write_all_at(&to, &bytes, from)
                        })
                        .await
                        .map_err(io::Error::other)?
                    }
                })
                .buffer_unordered(IN_FLIGHT)
                .try_collect::<Vec<()>>()
                .await
                .map(drop)
        })
    }
}

/// Why an object without an ETag is not read.
pub fn no_etag() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        "its server gives no ETag, so tjoin could not tell whether it changes while being \
         read\nhint: serve it from a server that sends ETags, or download it and join the \
         local copy",
    )
}

/// One GET: its body, the object's metadata, and the range the response says it holds.
async fn get(
    store: Arc<dyn ObjectStore>,
    path: object_store::path::Path,
    options: GetOptions,
) -> object_store::Result<(Bytes, object_store::ObjectMeta, Range<u64>)> {
    let result = store.get_opts(&path, options).await?;
    let (meta, returned) = (result.meta.clone(), result.range.clone());
    let bytes = result.bytes().await?;
    Ok((bytes, meta, returned))
}

/// A GET's result, checked to be exactly bytes `range` of the object (cut at its end) and,
/// when the read was pinned to `pinned`, from that version: a server (or a proxy) that does
/// not honour `If-Match` answers with the new object's ETag, and object_store passes that on
/// unchecked, so the ETag the response carries is compared here too.
fn checked(
    location: &Location,
    range: Range<u64>,
    pinned: Option<&str>,
    got: object_store::Result<(Bytes, object_store::ObjectMeta, Range<u64>)>,
) -> io::Result<(Bytes, Seen)> {
    let (bytes, meta, returned) = got.map_err(|e| match e {
        // `If-Match` compares strongly: a weak ETag never matches, the object unchanged.
        object_store::Error::Precondition { .. } if pinned.is_some_and(|p| p.starts_with("W/")) => {
            weak_etag()
        }
        e => explain(location, e),
    })?;
    let seen = Seen {
        len: meta.size,
        etag: meta.e_tag,
        version: meta.version,
    };
    if let Some(pinned) = pinned {
        if seen.etag.as_deref() != Some(pinned) {
            return Err(changed(seen.etag.as_deref()));
        }
    }
    let wanted = range.start..range.end.min(seen.len);
    if returned != wanted || bytes.len() as u64 != wanted.end - wanted.start {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!(
                "asked for bytes {}..{} of its {} bytes, the server sent {} bytes for {}..{}: \
                 a short or misplaced body is never used",
                wanted.start,
                wanted.end,
                seen.len,
                bytes.len(),
                returned.start,
                returned.end
            ),
        ));
    }
    Ok((bytes, seen))
}

/// What is directly under a prefix (`s3://b/ckpt/`): each name after the prefix, and
/// whether it is an object (else a "folder": a prefix of further keys), in key order.
pub fn list(prefix: &Location) -> io::Result<Vec<(String, bool)>> {
    if prefix.scheme == Scheme::Http {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "an https:// server cannot list a folder\nhint: name the index \
             (`.../model.safetensors.index.json`) or the files themselves",
        ));
    }
    let store = store_for(prefix)?;
    let key = prefix.key.trim_end_matches('/');
    let path = (!key.is_empty())
        .then(|| {
            key_path(&Location {
                key: key.to_string(),
                ..prefix.clone()
            })
        })
        .transpose()?;
    let listed = runtime()?
        .block_on(async move { store.list_with_delimiter(path.as_ref()).await })
        .map_err(|e| explain(prefix, e))?;
    let name = |path: &object_store::path::Path| path.filename().unwrap_or_default().to_string();
    let mut entries: Vec<(String, bool)> = listed
        .objects
        .iter()
        .map(|meta| (name(&meta.location), true))
        .chain(listed.common_prefixes.iter().map(|p| (name(p), false)))
        .collect();
    entries.sort();
    Ok(entries)
}

/// The key as object_store's path (which refuses empty, `.` and `..` parts, and control
/// characters). Its refusal repeats the key, which is quoted here: the message's lines are
/// quoted one by one, so a newline left in the key would start a line of its own (a forged
/// `hint:`).
pub(super) fn key_path(location: &Location) -> io::Result<object_store::path::Path> {
    object_store::path::Path::parse(&location.key).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "not an object's key: {}\nhint: a key is parts between single slashes, none \
                 of them empty, `.` or `..`, and without control characters",
                crate::messages::quote(&e.to_string())
            ),
        )
    })
}

/// A bucket's store, and the same as a store of multipart uploads (all but `https://`) and,
/// for S3, as a signer of requests object_store does not send itself.
#[derive(Clone)]
struct Built {
    store: Arc<dyn ObjectStore>,
    multipart: Option<Arc<dyn MultipartStore>>,
    s3_signer: Option<Arc<dyn Signer>>,
}

/// The store of a location's bucket, built once per bucket and kept for the process.
fn built_for(location: &Location) -> io::Result<Built> {
    type Stores = Mutex<HashMap<(Scheme, String), Built>>;
    static STORES: OnceLock<Stores> = OnceLock::new();
    let stores = STORES.get_or_init(Stores::default);
    let key = (location.scheme, location.bucket.clone());
    let mut stores = stores
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(built) = stores.get(&key) {
        return Ok(built.clone());
    }
    // The builders make reqwest clients, which need the runtime's provider installed.
    runtime()?;
    let built = build(location)?;
    stores.insert(key, built.clone());
    Ok(built)
}

/// The store of a location's bucket.
pub(super) fn store_for(location: &Location) -> io::Result<Arc<dyn ObjectStore>> {
    built_for(location).map(|built| built.store)
}

/// The store of a location's bucket, as a store of multipart uploads.
pub(super) fn multipart_for(location: &Location) -> io::Result<Arc<dyn MultipartStore>> {
    built_for(location)?.multipart.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::Unsupported,
            "this store takes no multipart uploads",
        )
    })
}

/// The S3 store of a location's bucket, as a signer of requests (`upload.rs` completes an
/// upload with `If-None-Match`, which object_store does not send); `None` for other stores.
pub(super) fn s3_signer_for(location: &Location) -> io::Result<Option<Arc<dyn Signer>>> {
    built_for(location).map(|built| built.s3_signer)
}

/// Both views of one store.
fn both<S: ObjectStore + MultipartStore>(store: S) -> Built {
    let store = Arc::new(store);
    Built {
        store: store.clone(),
        multipart: Some(store),
        s3_signer: None,
    }
}

/// An environment variable's value, when set and not empty.
fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|value| !value.is_empty())
}

/// Builds the store for a location's bucket from the standard environment, refusing what
/// object_store would misread or silently ignore.
fn build(location: &Location) -> io::Result<Built> {
    let refused = |why: String| io::Error::new(io::ErrorKind::InvalidInput, why);
    let built: object_store::Result<Built> = match location.scheme {
        Scheme::S3 => {
            check_aws_environment().map_err(refused)?;
            let mut builder = AmazonS3Builder::from_env().with_bucket_name(&location.bucket);
            // The AWS CLI's order: the S3-specific endpoint, then the general one;
            // AWS_ENDPOINT is object_store's older name. from_env read them in whatever order
            // the environment lists them.
            let endpoint = ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT"]
                .into_iter()
                .find_map(env);
            if let Some(endpoint) = endpoint {
                builder = builder.with_endpoint(endpoint);
            }
            // The AWS SDKs prefer AWS_REGION to AWS_DEFAULT_REGION.
            if let Some(region) = env("AWS_REGION").or_else(|| env("AWS_DEFAULT_REGION")) {
                builder = builder.with_region(region);
            }
            builder.build().map(|s3| {
                let s3 = Arc::new(s3);
                Built {
                    store: s3.clone(),
                    multipart: Some(s3.clone()),
                    s3_signer: Some(s3),
                }
            })
        }
        Scheme::Gcs => {
            check_plain_http("GOOGLE_BASE_URL", "GOOGLE_ALLOW_HTTP", "a local emulator")
                .map_err(refused)?;
            GoogleCloudStorageBuilder::from_env()
                .with_bucket_name(&location.bucket)
                .build()
                .map(both)
        }
        Scheme::Azure => {
            check_azure_environment().map_err(refused)?;
            MicrosoftAzureBuilder::from_env()
                .with_container_name(&location.bucket)
                .build()
                .map(both)
        }
        Scheme::Http => HttpBuilder::new()
            .with_url(&location.bucket)
            .with_client_options(
                ClientOptions::new().with_allow_http(location.bucket.starts_with("http://")),
            )
            .build()
            .map(|store| Built {
                store: Arc::new(store),
                multipart: None,
                s3_signer: None,
            }),
    };
    built.map_err(|e| {
        refused(format!(
            "its store cannot be set up from the environment: {}\nhint: {} configure it",
            one_line(&e.to_string()),
            location.scheme.environment()
        ))
    })
}

/// What object_store would misread in the AWS environment: a profile it does not read
/// (it would fall back to another identity), a plain-http endpoint it would refuse at the
/// first request.
fn check_aws_environment() -> Result<(), String> {
    if let Some(profile) = env("AWS_PROFILE").filter(|_| env("AWS_ACCESS_KEY_ID").is_none()) {
        return Err(format!(
            "AWS_PROFILE={profile} is set, but tjoin does not read the AWS CLI's profiles \
             (~/.aws/config, ~/.aws/credentials)\nhint: export the profile's credentials \
             first: eval \"$(aws configure export-credentials --profile {profile} --format \
             env)\""
        ));
    }
    match ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT"]
        .into_iter()
        .find(|name| env(name).is_some())
    {
        Some(name) => check_plain_http(name, "AWS_ALLOW_HTTP", "a local MinIO"),
        None => Ok(()),
    }
}

/// Whether a variable is set to what object_store reads as true (`true`, `1`, `yes`, `on`,
/// `y`, in any case): what a request tjoin sends itself must read as object_store does
/// (`AWS_ALLOW_HTTP=1`, taken by the store, refused by a client of tjoin's own, failed the
/// completion after every part was sent).
pub(super) fn is_true(name: &str) -> bool {
    env(name).is_some_and(|value| {
        ["1", "true", "on", "yes", "y"]
            .iter()
            .any(|yes| value.eq_ignore_ascii_case(yes))
    })
}

/// A plain-http endpoint in `endpoint` that object_store would take, then fail at the first
/// request with no more than "builder error", unless `allow` is true; `local` is what such
/// an endpoint usually is, for the hint.
fn check_plain_http(endpoint: &str, allow: &str, local: &str) -> Result<(), String> {
    match env(endpoint) {
        Some(url) if url.starts_with("http://") && !is_true(allow) => Err(format!(
            "{endpoint}={url} is a plain-http endpoint, which is refused unless {allow}=true\n\
             hint: set {allow}=true if the endpoint is meant to be reached without TLS \
             ({local}), or give its https:// address"
        )),
        _ => Ok(()),
    }
}

/// What object_store would misread in the Azure environment: an endpoint it ignores (with
/// the emulator on, it reads AZURITE_BLOB_STORAGE_URL instead), a plain-http endpoint it
/// would refuse at the first request.
fn check_azure_environment() -> Result<(), String> {
    let endpoint = ["AZURE_STORAGE_ENDPOINT", "AZURE_ENDPOINT"]
        .into_iter()
        .find(|name| env(name).is_some());
    if is_true("AZURE_STORAGE_USE_EMULATOR") {
        if let Some(name) = endpoint {
            return Err(format!(
                "{name} is set, but AZURE_STORAGE_USE_EMULATOR=true reads the emulator's \
                 address from AZURITE_BLOB_STORAGE_URL (else http://127.0.0.1:10000) and \
                 ignores {name}\nhint: set AZURITE_BLOB_STORAGE_URL=http://HOST:PORT instead, \
                 or unset AZURE_STORAGE_USE_EMULATOR to use {name} with an account's name and \
                 key"
            ));
        }
        return Ok(());
    }
    match endpoint {
        Some(name) => check_plain_http(name, "AZURE_ALLOW_HTTP", "Azurite"),
        None => Ok(()),
    }
}

/// The first line of a long error text.
fn one_line(text: &str) -> String {
    text.lines().next().unwrap_or("").to_string()
}

/// object_store's error, as what failed and what to do about it: no credentials, no such
/// bucket or key, access denied, the object changed, a server that ignores Range.
pub(super) fn explain(location: &Location, error: object_store::Error) -> io::Error {
    use object_store::Error as E;
    let scheme = location.scheme;
    let full = format!("{error:?} {error}");
    let (kind, text) = match &error {
        // S3's and GCS's code; Azure's names a container. Any variant: object_store gives a
        // list's 404 as a generic error, with the store's answer in it.
        _ if full.contains("NoSuchBucket") || full.contains("ContainerNotFound") => (
            io::ErrorKind::NotFound,
            format!(
                "no such {} \"{}\"\nhint: check its name, and the endpoint and region it is \
                 reached through",
                if scheme == Scheme::Azure {
                    "container"
                } else {
                    "bucket"
                },
                location.bucket
            ),
        ),
        E::NotFound { .. } => (
            io::ErrorKind::NotFound,
            "no such object\nhint: check the key (`aws s3 ls`, `gcloud storage ls`, `az \
             storage blob list` list what there is)"
                .to_string(),
        ),
        E::Precondition { .. } => (io::ErrorKind::Other, changed_text()),
        // Azure answers a signature made with a wrong key 403, as it does a request the
        // identity is not allowed.
        E::PermissionDenied { .. }
            if full.contains("AuthenticationFailed") || full.contains("failed to authenticate") =>
        {
            (
                io::ErrorKind::PermissionDenied,
                format!(
                    "the store did not accept the credentials (the request's signature did not \
                 match)\nhint: check {}",
                    scheme.environment()
                ),
            )
        }
        E::PermissionDenied { .. } => (
            io::ErrorKind::PermissionDenied,
            format!(
                "access denied\nhint: the credentials in the environment ({}) are not allowed \
                 this; check the identity's policy for this bucket",
                scheme.environment()
            ),
        ),
        E::Unauthenticated { .. } => (
            io::ErrorKind::PermissionDenied,
            format!(
                "the store did not accept the credentials\nhint: check {}",
                scheme.environment()
            ),
        ),
        _ if ["NotPartial", "RangeNotSupported", "non-partial"]
            .iter()
            .any(|said| full.contains(said)) =>
        {
            ignored_range()
        }
        // S3 answers a range past an object's end with 416 (InvalidRange): the first read of
        // an empty object (its head asks for bytes from 0), or one replaced by a shorter one.
        _ if full.contains("416 Range Not Satisfiable") || full.contains("InvalidRange") => (
            io::ErrorKind::UnexpectedEof,
            "it is shorter than the bytes asked of it (HTTP 416): empty, or replaced by a \
             shorter object; no format tjoin reads is empty\nhint: check that its upload \
             finished, and run again once it has"
                .to_string(),
        ),
        _ if is_missing_credentials(&full) => (
            io::ErrorKind::PermissionDenied,
            format!(
                "no credentials were found (none in the environment, and no instance or \
                 container metadata answered)\nhint: set {}",
                scheme.environment()
            ),
        ),
        _ => (io::ErrorKind::Other, one_line(&error.to_string())),
    };
    io::Error::new(kind, text)
}

/// Why a read pinned to an ETag is refused: the server refused it (412), or answered it
/// with another ETag (`now`), which a server that ignores `If-Match` does, or with none.
fn changed(now: Option<&str>) -> io::Error {
    match now {
        Some(_) => io::Error::other(changed_text()),
        None => io::Error::other(
            "a later read of the object came without the ETag its first read saw, so tjoin \
             could not tell whether it changed while being read\nhint: serve it from a server \
             that sends the ETag with every read, or download it and join the local copy",
        ),
    }
}

/// Why a read pinned to a weak ETag (`W/"..."`) is refused: `If-Match` compares ETags
/// strongly, so the server answers 412 however unchanged the object is.
fn weak_etag() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        "its server gives only a weak ETag (W/...), which a pinned read (If-Match) never \
         matches, so tjoin could not tell whether it changes while being read\nhint: serve it \
         from a server that sends strong ETags (nginx: without gzip or sub_filter on it), or \
         download it and join the local copy",
    )
}

fn changed_text() -> String {
    "the object changed while tjoin read it (its ETag is no longer the one its first read \
     saw)\nhint: run again once whatever writes it has finished"
        .to_string()
}

/// A server that answered a ranged GET with the whole object.
fn ignored_range() -> (io::ErrorKind, String) {
    (
        io::ErrorKind::Unsupported,
        "the server ignored the Range header (it answered 200 with the whole object): \
         tjoin never takes byte 0 for the byte it asked for\nhint: serve the file from a \
         server that answers ranged GETs (206), or download it and join the local copy"
            .to_string(),
    )
}

/// Whether object_store's error says that it found no credentials: it tried the instance
/// metadata service last, and that failed.
fn is_missing_credentials(text: &str) -> bool {
    let text = text.to_ascii_lowercase();
    // S3's instance metadata (`/latest/api/token`, `/latest/meta-data/`), GCP's
    // (`computeMetadata`), Azure's managed identity (`/metadata/identity`).
    (text.contains("metadata") && (text.contains("token") || text.contains("credential")))
        || text.contains("/latest/api/token")
        || text.contains("/latest/meta-data")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_key_stays_on_its_line() {
        let location = Location::parse("s3://out/k\u{1b}[2J\nhint: run curl.npy").unwrap();
        let text = key_path(&location).unwrap_err().to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0].contains("k\\x1b[2J\\nhint: run curl.npy"),
            "{text}"
        );
        assert!(lines[1].starts_with("hint: a key is parts"), "{text}");
        assert!(!text.contains('\u{1b}'), "{text}");
    }

    #[test]
    fn a_weak_etag_refused_by_if_match_is_not_called_a_change() {
        let location = Location::parse("https://example.com/a.npy").unwrap();
        let refused = || {
            Err(object_store::Error::Precondition {
                path: "a.npy".to_string(),
                source: "412".into(),
            })
        };
        let weak = checked(&location, 0..8, Some("W/\"1\""), refused()).unwrap_err();
        assert!(weak.to_string().contains("weak ETag"), "{weak}");
        let strong = checked(&location, 0..8, Some("\"1\""), refused()).unwrap_err();
        assert!(strong.to_string().contains("changed"), "{strong}");
    }

    #[test]
    fn no_etag_reads_as_one_sentence_and_a_hint() {
        let text = no_etag().to_string();
        assert!(!text.contains("  "), "{text}");
        assert_eq!(text.lines().count(), 2, "{text}");
    }
}
