//! The store calls of a job whose output is one object (`src/output/job/s3.rs`): a multipart
//! upload that `--begin` creates, whose parts each worker uploads by number, each part's body
//! streamed as it is produced ([`PartStream`]), that the commit completes with every part's
//! ETag in order (conditionally with `--no-clobber`) or `--abandon` aborts; and the small objects
//! the job keeps beside the output (its manifest, created only where none is; the workers'
//! records), read whole with a limit. Every call blocks on the process's one runtime.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use object_store::multipart::PartId;
use object_store::signer::{SignedUrlOptions, Signer};
use object_store::{GetOptions, GetRange, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use reqwest::Method;
use reqwest::header::{CONTENT_LENGTH, ETAG};

use super::Location;
use super::store::{explain, key_path, multipart_for, runtime, s3_signer_for, store_for};

/// A streamed part's bytes go to its request in chunks of this size, at most [`QUEUED`] of
/// them waiting for the connection: what a part being sent holds in memory, whatever its
/// size.
const CHUNK: usize = 1 << 20;
const QUEUED: usize = 4;
/// Parts whose bytes are all sent, waiting for the store's answer (which holds no bytes).
const ANSWERS: usize = 4;
/// How long a part's signed URL holds: S3 checks it when the request starts.
const PART_SIGNED_FOR: Duration = Duration::from_secs(60 * 60);

/// Begins a multipart upload to `location`: its id, as the store gave it.
pub fn create_upload(location: &Location) -> io::Result<String> {
    let store = multipart_for(location)?;
    let path = key_path(location)?;
    runtime()?
        .block_on(async move { store.create_multipart(&path).await })
        .map_err(|e| explain(location, e))
}

/// The parts of an upload, written in order as a stream: `len` bytes, every `part_size` of
/// them a part (the last shorter), numbered from `first` (0 is S3's part 1). Each part is
/// one PUT of S3's UploadPart through a URL signed by object_store's signer, whose body is
/// streamed from the writes as they come, through a channel of a few MiB: a part is never
/// held whole, so that memory holds a few MiB whatever the part size. While one part is
/// sent, up to [`ANSWERS`] sent before wait for their answers.
///
/// A part the network or the store failed (a dropped connection, a stalled one, a 5xx, a
/// 429, a success answered before the request took all its bytes) is left out, `None` among [`Sent::etags`]: its bytes are gone, and the caller produces them again
/// for a new stream of that part alone. Any other refusal (a 403, an upload that is no
/// more) ends the stream with its error. Dropped unfinished, it cancels the parts under way
/// (the upload's abort, or a worker run again, deals with those sent). Uploading a part
/// again replaces it.
pub struct PartStream {
    sender: Arc<PartSender>,
    /// The first part's number, from 0.
    first: usize,
    part_size: u64,
    len: u64,
    /// The bytes written so far.
    written: u64,
    /// The part being sent.
    feeding: Option<Feeding>,
    /// The parts sent, waiting for their answers: each one's place among the stream's.
    answers: VecDeque<(usize, Answer)>,
    etags: Vec<Option<String>>,
    /// The last failure the network or the store made of a part.
    failure: Option<io::Error>,
}

/// What a part's request ends with: its ETag, or why not.
type Answer = tokio::task::JoinHandle<Result<String, Failed>>;

/// A part the store did not take: whether sending it again may do, and why.
struct Failed {
    again: bool,
    error: io::Error,
}

/// The part whose bytes are being written.
struct Feeding {
    /// Its place among the stream's parts.
    at: usize,
    len: u64,
    fed: u64,
    chunk: Vec<u8>,
    /// The way to its request's body; `None` once the request ended (its answer says why).
    channel: Option<tokio::sync::mpsc::Sender<Bytes>>,
    answer: Answer,
}

/// What sends one part: the upload, its signer and a client.
struct PartSender {
    signer: Arc<dyn Signer>,
    client: reqwest::Client,
    path: object_store::path::Path,
    id: String,
}

/// What a [`PartStream`] sent: each part's ETag in order, `None` for a part the network or
/// the store failed (to send again), and the last such failure.
pub struct Sent {
    /// Each part's ETag, `None` where it failed.
    pub etags: Vec<Option<String>>,
    /// Why the last part that failed did.
    pub failure: Option<io::Error>,
}

impl PartStream {
    /// The parts of the upload `id` of `location` from number `first`, of `part_size` bytes,
    /// holding `len` bytes. Only an S3 upload's parts are streamed.
    pub fn new(
        location: &Location,
        id: &str,
        (first, part_size): (u32, u64),
        len: u64,
    ) -> io::Result<Self> {
        let signer = s3_signer_for(location)?.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::Unsupported,
                "only S3's multipart uploads are written by a job's workers",
            )
        })?;
        let part_size = part_size.max(1);
        let count = usize::try_from(len.div_ceil(part_size)).map_err(io::Error::other)?;
        let sender = PartSender {
            signer,
            client: part_client()?,
            path: key_path(location)?,
            id: id.to_string(),
        };
        Ok(PartStream {
            sender: Arc::new(sender),
            first: usize::try_from(first).map_err(io::Error::other)?,
            part_size,
            len,
            written: 0,
            feeding: None,
            answers: VecDeque::new(),
            etags: vec![None; count],
            failure: None,
        })
    }

    /// Starts sending the part the next byte belongs to.
    fn start_part(&mut self) -> io::Result<()> {
        let at = usize::try_from(self.written / self.part_size).map_err(io::Error::other)?;
        let start = self.written - self.written % self.part_size;
        let len = self.part_size.min(self.len - start);
        let (channel, body) = tokio::sync::mpsc::channel::<Bytes>(QUEUED);
        // The bytes the request took from the body: all of them before a store that read
        // the whole part can answer.
        let taken = Arc::new(AtomicU64::new(0));
        let counted = taken.clone();
        let body = futures_util::stream::unfold(body, move |mut body| {
            let counted = counted.clone();
            async move {
                let chunk = body.recv().await?;
                counted.fetch_add(chunk.len() as u64, Ordering::SeqCst);
                Some((Ok::<Bytes, io::Error>(chunk), body))
            }
        });
        let sender = self.sender.clone();
        let number = self.first + at + 1;
        let answer =
            runtime()?.spawn(async move { sender.send(number, (len, &taken), body).await });
        self.feeding = Some(Feeding {
            at,
            len,
            fed: 0,
            chunk: Vec::with_capacity(CHUNK),
            channel: Some(channel),
            answer,
        });
        Ok(())
    }

    /// Ends the part whose bytes are all written: its answer awaited among the others'.
    fn end_part(&mut self) -> io::Result<()> {
        let Some(feeding) = self.feeding.take() else {
            return Ok(());
        };
        if feeding.fed != feeding.len {
            return Err(io::Error::other(format!(
                "{} bytes of a part of {} were written",
                feeding.fed, feeding.len
            )));
        }
        // The channel closed: the body ends, as long as its Content-Length says.
        drop(feeding.channel);
        self.answers.push_back((feeding.at, feeding.answer));
        while self.answers.len() > ANSWERS {
            self.wait_oldest()?;
        }
        Ok(())
    }

    /// Waits for the oldest part's answer: its ETag kept, or its failure.
    fn wait_oldest(&mut self) -> io::Result<()> {
        let Some((at, answer)) = self.answers.pop_front() else {
            return Ok(());
        };
        match runtime()?.block_on(answer).map_err(io::Error::other)? {
            Ok(etag) => self.etags[at] = Some(etag),
            Err(Failed { again: true, error }) => self.failure = Some(error),
            Err(Failed { error, .. }) => return Err(error),
        }
        Ok(())
    }

    /// Waits for every part: their ETags in order, and which failed.
    pub fn finish(mut self) -> io::Result<Sent> {
        if self.written != self.len {
            return Err(io::Error::other(format!(
                "{} bytes of the parts' {} were written",
                self.written, self.len
            )));
        }
        while !self.answers.is_empty() {
            self.wait_oldest()?;
        }
        Ok(Sent {
            etags: std::mem::take(&mut self.etags),
            failure: self.failure.take(),
        })
    }
}

impl io::Write for PartStream {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if bytes.is_empty() {
            return Ok(0);
        }
        if self.written >= self.len {
            return Err(io::Error::other(format!(
                "more bytes than the {} of the parts came",
                self.len
            )));
        }
        if self.feeding.is_none() {
            self.start_part()?;
        }
        let Some(feeding) = self.feeding.as_mut() else {
            return Ok(0);
        };
        let room = (feeding.len - feeding.fed).min((CHUNK - feeding.chunk.len()) as u64);
        let take = bytes.len().min(room as usize);
        feeding.chunk.extend_from_slice(&bytes[..take]);
        feeding.fed += take as u64;
        self.written += take as u64;
        let ended = feeding.fed == feeding.len;
        if ended || feeding.chunk.len() == CHUNK {
            let chunk = std::mem::replace(&mut feeding.chunk, Vec::with_capacity(CHUNK));
            // A request that ended takes no more bytes: the rest of its part is dropped.
            let gone = feeding
                .channel
                .as_ref()
                .is_some_and(|c| c.blocking_send(Bytes::from(chunk)).is_err());
            if gone {
                feeding.channel = None;
            }
        }
        if ended {
            self.end_part()?;
        }
        Ok(take)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for PartStream {
    fn drop(&mut self) {
        if let Some(feeding) = self.feeding.take() {
            feeding.answer.abort();
        }
        for (_, answer) in &self.answers {
            answer.abort();
        }
    }
}

impl PartSender {
    /// Sends part `number` (from 1), `len` bytes streamed from `body`: its ETag. A success
    /// answered before the request took all `len` bytes (`taken` counts them) is a failure
    /// to send again: its ETag, if the store has it, is of a part cut short.
    async fn send<S>(
        &self,
        number: usize,
        (len, taken): (u64, &AtomicU64),
        body: S,
    ) -> Result<String, Failed>
    where
        S: futures_util::Stream<Item = io::Result<Bytes>> + Send + 'static,
    {
        let fatal = |error| Failed {
            again: false,
            error,
        };
        let options = SignedUrlOptions::new().with_query([
            ("partNumber", number.to_string()),
            ("uploadId", self.id.clone()),
        ]);
        let signed =
            self.signer
                .signed_url_opts(Method::PUT, &self.path, PART_SIGNED_FOR, &options);
        let url = signed
            .await
            .map_err(|e| fatal(io::Error::other(format!("cannot sign part {number}: {e}"))))?;
        let sent = self
            .client
            .put(url)
            .header(CONTENT_LENGTH, len)
            .body(reqwest::Body::wrap_stream(body))
            .send()
            .await;
        // The error without its URL, whose query carries the signature.
        let response = sent.map_err(|e| Failed {
            again: true,
            error: io::Error::other(format!("part {number}: {}", e.without_url())),
        })?;
        let status = response.status().as_u16();
        let etag = response.headers().get(ETAG).cloned();
        let text = response.text().await.unwrap_or_default();
        let taken = taken.load(Ordering::SeqCst);
        if (200..=299).contains(&status) && taken != len {
            return Err(Failed {
                again: true,
                error: io::Error::other(format!(
                    "part {number}: the store answered HTTP {status} having been sent {taken} \
                     of its {len} bytes"
                )),
            });
        }
        match (status, etag) {
            (200..=299, Some(etag)) => etag
                .to_str()
                .ok()
                .filter(|etag| printable(etag))
                .map(str::to_string)
                .ok_or_else(|| {
                    fatal(io::Error::other(format!(
                        "part {number}: its ETag is not printable ASCII"
                    )))
                }),
            (200..=299, None) => Err(fatal(io::Error::other(format!(
                "part {number}: the store answered without an ETag"
            )))),
            _ => {
                let code = super::upload::element(&text, "Code");
                let said = code
                    .as_ref()
                    .map_or(String::new(), |code| format!(", {code}"));
                let error = io::Error::other(format!("part {number}: HTTP {status}{said}"));
                let again = status >= 500 || status == 429 || status == 408;
                Err(Failed { again, error })
            }
        }
    }
}

/// The longest upload id and ETag a job takes (from the store, or from its manifest and
/// records).
pub const LONGEST_ID: usize = 1024;

/// Whether `text` is 1 to [`LONGEST_ID`] bytes of printable ASCII: an upload id, an ETag.
pub fn printable(text: &str) -> bool {
    !text.is_empty() && text.len() <= LONGEST_ID && text.bytes().all(|b| b.is_ascii_graphic())
}

/// The client that sends streamed parts: plain HTTP only where `AWS_ALLOW_HTTP` allows it
/// (as object_store's), and no time limit on a request, whose body may take minutes; a
/// connection must open within 10 s, take the bytes sent within 30 (`TCP_USER_TIMEOUT`, on
/// Linux: a store or a network that stalls fails the part, which is sent again) and answer
/// each read within 60.
fn part_client() -> io::Result<reqwest::Client> {
    static CLIENT: OnceLock<Result<reqwest::Client, String>> = OnceLock::new();
    // The runtime installs rustls's cryptography, which the client needs.
    runtime()?;
    let allow_http = super::store::is_true("AWS_ALLOW_HTTP");
    let made = CLIENT.get_or_init(|| {
        let builder = reqwest::Client::builder();
        #[cfg(target_os = "linux")]
        let builder = builder.tcp_user_timeout(Duration::from_secs(30));
        builder
            .https_only(!allow_http)
            .connect_timeout(Duration::from_secs(10))
            .read_timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| e.to_string())
    });
    made.clone()
        .map_err(|e| io::Error::other(format!("cannot make the HTTP client: {e}")))
}

/// Whether the store lists the multipart upload `id` under `location`'s very key (S3's
/// ListMultipartUploads of the key as a prefix, page after page, through a URL object_store's
/// signer signs). An upload id comes from a job's manifest, which whoever can write to the
/// bucket may have edited: a store that takes a part for one key into another key's upload,
/// and completes it there (moto does; S3 answers NoSuchUpload), would put one output's bytes
/// at another's key. `None` when the store does not let it list them (403: a role without
/// `s3:ListBucketMultipartUploads`; 405, 501: a store without the call): S3 itself ties an
/// upload to its key, and a worker needs no more than it did.
pub fn has_upload(location: &Location, id: &str) -> io::Result<Option<bool>> {
    let root = object_store::path::Path::from("");
    let mut after: Option<(String, String)> = None;
    // A listing holds at most 1,000 uploads: a key with more than 100,000 is given up on.
    for _ in 0..100 {
        let mut query = vec![("uploads", String::new()), ("prefix", location.key.clone())];
        if let Some((key, upload)) = after.take() {
            query.extend([("key-marker", key), ("upload-id-marker", upload)]);
        }
        let Some(text) = listing(location, &root, query, "its uploads")? else {
            return Ok(None);
        };
        let mut rest = text.as_str();
        while let Some((upload, after_it)) = between(rest, "<Upload>", "</Upload>") {
            let field = |name: &str| {
                between(upload, &format!("<{name}>"), &format!("</{name}>"))
                    .map(|(text, _)| unescaped(text))
            };
            if field("Key").as_deref() == Some(location.key.as_str())
                && field("UploadId").as_deref() == Some(id)
            {
                return Ok(Some(true));
            }
            rest = after_it;
        }
        let field = |name: &str| {
            between(&text, &format!("<{name}>"), &format!("</{name}>"))
                .map(|(text, _)| unescaped(text))
        };
        match (
            field("IsTruncated").as_deref(),
            field("NextKeyMarker"),
            field("NextUploadIdMarker"),
        ) {
            (Some("true"), Some(key), Some(upload)) if !key.is_empty() || !upload.is_empty() => {
                after = Some((key, upload));
            }
            _ => return Ok(Some(false)),
        }
    }
    Ok(Some(false))
}

/// A part as the store lists it: its ETag and size, if it lists it.
pub type Listed = Option<(String, u64)>;

/// The parts `first..first + count` (numbered from 0: S3's `first + 1` on) of the upload `id`
/// of `location` as the store lists them (S3's ListParts, page after page): each one's ETag
/// and size, `None` for one it lists not. A worker checks by it that the store holds each
/// part it sent whole, as the ETag it answered names: a success answered before the store
/// read the body (a middlebox) is not seen by the bytes the socket took, which kernel
/// buffers hold whatever the store read. `None` when the store does not let it list them
/// (403: a role without `s3:ListMultipartUploadParts`; 405, 501: a store without the call).
pub fn listed_parts(
    location: &Location,
    id: &str,
    (first, count): (u32, u32),
) -> io::Result<Option<Vec<Listed>>> {
    let path = key_path(location)?;
    let mut listed = vec![None; count as usize];
    // From the first part: a store may take the marker for an index into the parts it
    // holds (moto does), where S3 takes a part number; each page after is the one the
    // store names.
    let mut marker: Option<String> = None;
    // A page holds at most 1,000 parts; an upload at most 10,000.
    for _ in 0..12 {
        let mut query = vec![("uploadId", id.to_string())];
        if let Some(marker) = marker.take() {
            query.push(("part-number-marker", marker));
        }
        let Some(text) = listing(location, &path, query, "its parts")? else {
            return Ok(None);
        };
        let mut rest = text.as_str();
        let mut last = 0;
        while let Some((part, after_it)) = between(rest, "<Part>", "</Part>") {
            let field = |name: &str| {
                between(part, &format!("<{name}>"), &format!("</{name}>"))
                    .map(|(text, _)| unescaped(text))
            };
            let number = field("PartNumber").and_then(|n| n.trim().parse::<u32>().ok());
            let size = field("Size").and_then(|n| n.trim().parse::<u64>().ok());
            if let (Some(number), Some(etag), Some(size)) = (number, field("ETag"), size) {
                last = last.max(number);
                let at = number.checked_sub(first + 1).map(|at| at as usize);
                if let Some(slot) = at.and_then(|at| listed.get_mut(at)) {
                    *slot = Some((etag, size));
                }
            }
            rest = after_it;
        }
        let field = |name: &str| {
            between(&text, &format!("<{name}>"), &format!("</{name}>"))
                .map(|(text, _)| unescaped(text).trim().to_string())
        };
        // Done once the page is the last, or past the parts asked.
        match (
            field("IsTruncated").as_deref(),
            field("NextPartNumberMarker"),
        ) {
            (Some("true"), Some(next)) if !next.is_empty() && last < first + count => {
                marker = Some(next);
            }
            _ => break,
        }
    }
    Ok(Some(listed))
}

/// The answer of one page of a listing (`what`: "its uploads", "its parts") of S3 at `path`
/// in `location`'s bucket, asked by a signed GET with `query`. `None` when the store does not
/// let it list (403: a role without the permission; 405, 501: a store without the call).
fn listing(
    location: &Location,
    path: &object_store::path::Path,
    query: Vec<(&str, String)>,
    what: &str,
) -> io::Result<Option<String>> {
    let signer = s3_signer_for(location)?.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::Unsupported,
            "only S3's multipart uploads are listed by a job",
        )
    })?;
    let client = part_client()?;
    let options = SignedUrlOptions::new().with_query(query);
    let ask = || {
        runtime()?.block_on(async {
            let signed = signer.signed_url_opts(Method::GET, path, PART_SIGNED_FOR, &options);
            let url = signed
                .await
                .map_err(|e| io::Error::other(format!("cannot sign the listing of {what}: {e}")))?;
            // The error without its URL, whose query carries the signature.
            let failed = |e: reqwest::Error| {
                io::Error::other(format!("listing {what}: {}", e.without_url()))
            };
            let response = client.get(url).send().await.map_err(failed)?;
            let status = response.status().as_u16();
            Ok::<_, io::Error>((status, response.text().await.map_err(failed)?))
        })
    };
    // A GET, asked again when the request or its answer is lost (a pooled connection the
    // store or a middlebox closed meanwhile): twice more, half a second apart.
    let mut asked = ask();
    for _ in 0..2 {
        if asked.is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
        asked = ask();
    }
    let (status, text) = asked?;
    if matches!(status, 403 | 405 | 501) {
        return Ok(None);
    }
    if !(200..=299).contains(&status) {
        let said =
            super::upload::element(&text, "Code").map_or(String::new(), |code| format!(", {code}"));
        return Err(io::Error::other(format!(
            "listing {what}: HTTP {status}{said}"
        )));
    }
    Ok(Some(text))
}

/// The text of `text` between the first `open` and the `close` after it, and what follows.
fn between<'t>(text: &'t str, open: &str, close: &str) -> Option<(&'t str, &'t str)> {
    let start = text.find(open)? + open.len();
    let end = start + text[start..].find(close)?;
    Some((&text[start..end], &text[end + close.len()..]))
}

/// XML's text with its five entities replaced (a key's `&` is `&amp;` in a listing).
fn unescaped(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

/// Completes the upload `id` of `location` with `etags`, every part's in order from part 1:
/// the object appears whole. A store that has not those parts (S3's `InvalidPart`: an ETag
/// that is not its part's) completes nothing, and answers [`io::ErrorKind::InvalidData`].
/// With `no_clobber`, the completion is a conditional create (`If-None-Match: *`, as a
/// one-process upload's: `upload.rs`): an object at the key, however recent, is kept, the
/// answer is [`io::ErrorKind::AlreadyExists`], and the caller aborts the upload.
pub fn complete(
    location: &Location,
    id: &str,
    etags: Vec<String>,
    no_clobber: bool,
) -> io::Result<()> {
    let store = multipart_for(location)?;
    let path = key_path(location)?;
    let parts: Vec<PartId> = etags
        .into_iter()
        .map(|content_id| PartId { content_id })
        .collect();
    let invalid_part = |e: io::Error| match format!("{e:?} {e}").contains("InvalidPart") {
        true => io::Error::new(
            io::ErrorKind::InvalidData,
            "the store has not the parts the workers' records name (InvalidPart)",
        ),
        false => e,
    };
    if no_clobber {
        let signer = s3_signer_for(location)?.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::Unsupported,
                "only S3's multipart uploads are completed by a job",
            )
        })?;
        return super::upload::complete_if_absent(location, signer, (&path, id), &parts)
            .map_err(invalid_part);
    }
    let id = id.to_string();
    runtime()?
        .block_on(async move { store.complete_multipart(&path, &id, parts).await })
        .map(|_| ())
        .map_err(|e| match format!("{e:?} {e}").contains("InvalidPart") {
            true => invalid_part(io::Error::other("InvalidPart")),
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
    fn a_listings_fields_are_read_whole_and_unescaped() {
        let xml = "<Upload><Key>a&amp;b&lt;c</Key><UploadId>x</UploadId></Upload><Upload>\
                   <Key>d</Key></Upload>";
        let (first, rest) = between(xml, "<Upload>", "</Upload>").unwrap();
        let (key, _) = between(first, "<Key>", "</Key>").unwrap();
        assert_eq!(unescaped(key), "a&b<c");
        assert_eq!(unescaped("&amp;lt;"), "&lt;");
        let (second, rest) = between(rest, "<Upload>", "</Upload>").unwrap();
        assert_eq!(second, "<Key>d</Key>");
        assert!(between(rest, "<Upload>", "</Upload>").is_none());
    }
}
