//! Writing an object as it is produced ([`Streaming`]): its parts uploaded as they fill, in
//! one multipart upload, which the store shows under its key only once completed. Until
//! then the upload is registered, so that a failure, a refusal, Ctrl-C or SIGTERM aborts it
//! ([`abort_uploads`], which the signal handler calls before the process dies): no part
//! is left billed, and the key is never half-written. An abort that fails prints the
//! upload's id, for `aws s3api abort-multipart-upload`.

use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use object_store::client::{HttpConnector, HttpRequest, HttpRequestBody, ReqwestConnector};
use object_store::multipart::{MultipartStore, PartId};
use object_store::signer::{SignedUrlOptions, Signer};
use object_store::{ClientOptions, MultipartId, PutMode, PutOptions, PutPayload};
use reqwest::Method;
use reqwest::header::{HeaderValue, IF_NONE_MATCH};

use super::store::{explain, key_path, runtime, store_for};
use super::{Location, Scheme};

/// The most bytes of parts in flight at once besides the one filling (at least one part),
/// and the most parts: each part is held whole, as object_store sends it (and sends it again
/// when the network fails it, which a part streamed could not be: its bytes are gone).
const BYTES_IN_FLIGHT: u64 = 64 << 20;
const MOST_IN_FLIGHT: u64 = 4;
/// The smallest part tjoin picks, and S3's minimum (but for the last part), which
/// `--part-size` may ask for.
const MIN_PART: u64 = 8 << 20;
const MIN_ASKED: u64 = 5 << 20;
/// S3's limits: 10,000 parts of at most 5 GiB.
const MAX_PARTS: u64 = 10_000;
const MAX_PART: u64 = 5 << 30;
/// How long an abort on a signal may take before the process ends anyway.
const ABORT_TIMEOUT: Duration = Duration::from_secs(10);

/// How many parts of `part_size` bytes go at once: as many as fit in 64 MiB, from 1 to 4.
fn in_flight(part_size: u64) -> usize {
    (BYTES_IN_FLIGHT / part_size.max(1)).clamp(1, MOST_IN_FLIGHT) as usize
}

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

/// Whether parts of `asked` bytes (`--part-size`) fit an object of about `len` bytes in
/// S3's 10,000 (the flag's parser holds it within 5 MiB and 5 GiB); else why not, and the
/// hint.
pub fn check_part_size(len: u64, asked: u64) -> Result<(), (String, String)> {
    let parts = len.div_ceil(asked.max(1));
    if parts <= MAX_PARTS {
        return Ok(());
    }
    let why = format!(
        "about {len} bytes in parts of --part-size {asked} bytes would be {parts} parts, more \
         than the 10,000 S3 takes in one object"
    );
    let hint = match part_size(len) {
        Some(_) => format!(
            "give --part-size {}MiB or more, or leave it out (the parts are then the least \
             size that fits)",
            len.div_ceil(MAX_PARTS)
                .div_ceil(1 << 20)
                .max(MIN_ASKED >> 20)
        ),
        None => "write a sharded output (--max-shard-size), or split the join".to_string(),
    };
    Err((why, hint))
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

/// An object written as it is produced, front to back: its bytes gathered into parts of the
/// size planned for it ([`part_size`]), each sent as soon as it is full, at most 64 MiB of
/// them (or one part) at once ([`in_flight`]), so that memory holds those parts and the one
/// being filled: 5 parts of 8 MiB, 2 of 105 MiB (a 1 TiB object), whatever the object's
/// size. The multipart upload starts with the second part: an object
/// that fits in one part is one PUT at [`Streaming::complete`] (a conditional create with
/// `no_clobber`). Dropped before it is complete, it aborts its upload.
pub struct Streaming {
    location: Location,
    path: object_store::path::Path,
    part: usize,
    no_clobber: bool,
    /// The part being filled.
    buffer: Vec<u8>,
    /// The multipart upload, once a part is sent.
    upload: Option<Arc<Pending>>,
    in_flight: VecDeque<tokio::task::JoinHandle<object_store::Result<PartId>>>,
    /// The parts the store has taken, in order.
    parts: Vec<PartId>,
    /// How many parts were sent.
    sent: usize,
    done: bool,
}

impl Streaming {
    /// Prepares to write an object of about `planned` bytes to `location`, in parts of
    /// `part_size` when given (else sized for that: [`part_size`]). With `no_clobber`, an
    /// existing object is refused now, before a byte is sent.
    pub fn begin(
        location: &Location,
        planned: u64,
        (no_clobber, part_size): (bool, Option<u64>),
    ) -> io::Result<Streaming> {
        if location.scheme == Scheme::Http {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "https:// outputs are not written\nhint: write to s3://, gs:// or az://, or \
                 to a local file",
            ));
        }
        let path = key_path(location)?;
        if no_clobber {
            Upload::check_absent(location)?;
        }
        let part = match part_size {
            Some(size) => Some(size).filter(|size| {
                (MIN_ASKED..=MAX_PART).contains(size) && check_part_size(planned, *size).is_ok()
            }),
            None => self::part_size(planned),
        };
        let part = part.ok_or_else(|| match part_size {
            Some(size) => io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "parts of {size} bytes for {planned}: S3 takes 5 MiB to 5 GiB a part, at \
                     most 10,000 parts"
                ),
            ),
            None => io::Error::new(
                io::ErrorKind::FileTooLarge,
                format!(
                    "{planned} bytes are more than one object may hold (10,000 parts of 5 GiB)"
                ),
            ),
        })?;
        Ok(Streaming {
            location: location.clone(),
            path,
            part: usize::try_from(part).map_err(io::Error::other)?,
            no_clobber,
            buffer: Vec::new(),
            upload: None,
            in_flight: VecDeque::new(),
            parts: Vec::new(),
            sent: 0,
            done: false,
        })
    }

    /// Appends `bytes` to the object.
    pub fn write(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            // A full part is sent only once more bytes come: an object of exactly one part
            // is then one PUT.
            if self.buffer.len() == self.part {
                self.send_part()?;
            }
            if self.buffer.capacity() == 0 {
                self.buffer.reserve_exact(self.part);
            }
            let take = (self.part - self.buffer.len()).min(bytes.len());
            self.buffer.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        Ok(())
    }

    /// Sends what is gathered as the object's last part, so that memory no longer holds
    /// it: the object is written whole, only its completion remains (a set's shard, while
    /// the next one is written).
    pub fn end(&mut self) -> io::Result<()> {
        if self.upload.is_none() || !self.buffer.is_empty() {
            self.send_part()?;
        }
        Ok(())
    }

    /// Waits for every part under way: the store has taken them all, or this is the error
    /// of the first it refused.
    pub fn settle(&mut self) -> io::Result<()> {
        while !self.in_flight.is_empty() {
            self.wait_oldest()?;
        }
        Ok(())
    }

    /// Sends the part gathered, starting the multipart upload first if need be, once fewer
    /// than [`in_flight`] parts are under way.
    fn send_part(&mut self) -> io::Result<()> {
        let upload = self.started()?;
        if self.sent >= MAX_PARTS as usize {
            return Err(io::Error::new(
                io::ErrorKind::FileTooLarge,
                format!(
                    "the object grew past its planned size, to more than 10,000 parts of {} \
                     MiB",
                    self.part >> 20
                ),
            ));
        }
        while self.in_flight.len() >= in_flight(self.part as u64) {
            self.wait_oldest()?;
        }
        if !registered(&upload) {
            interrupted();
        }
        let bytes = std::mem::take(&mut self.buffer);
        let (store, path, id) = (upload.store.clone(), upload.path.clone(), upload.id.clone());
        let index = self.sent;
        let sending = runtime()?.spawn(async move {
            store
                .put_part(&path, &id, index, PutPayload::from(bytes))
                .await
        });
        self.in_flight.push_back(sending);
        self.sent += 1;
        Ok(())
    }

    /// The multipart upload, started (and registered for [`abort_uploads`]) on first use.
    fn started(&mut self) -> io::Result<Arc<Pending>> {
        if let Some(upload) = &self.upload {
            return Ok(upload.clone());
        }
        let store = super::store::multipart_for(&self.location)?;
        let path = self.path.clone();
        let id = runtime()?
            .block_on(store.create_multipart(&path))
            .map_err(|e| explain(&self.location, e))?;
        let upload = Arc::new(Pending {
            location: self.location.clone(),
            store,
            path,
            id,
        });
        pending().push(upload.clone());
        self.upload = Some(upload.clone());
        Ok(upload)
    }

    /// Waits for the oldest part under way.
    fn wait_oldest(&mut self) -> io::Result<()> {
        let Some(sending) = self.in_flight.pop_front() else {
            return Ok(());
        };
        let sent = runtime()?.block_on(sending).map_err(io::Error::other)?;
        // A part refused because a signal's handler aborted the upload under it.
        if sent.is_err() && self.upload.as_ref().is_some_and(|u| !registered(u)) {
            interrupted();
        }
        self.parts
            .push(sent.map_err(|e| explain(&self.location, e))?);
        Ok(())
    }

    /// Makes the object visible under its key: the one PUT of an object that fits in one
    /// part, or the rest of its parts and the upload's completion. With `no_clobber`, both
    /// are conditional creates on S3 (`If-None-Match: *`: an object another writer creates
    /// meanwhile is kept, and this one refused). On GCS and Azure, whose completions
    /// object_store sends unconditionally, the key is checked again just before: an object
    /// created in the one round trip between that check and the completion is replaced.
    pub fn complete(mut self) -> io::Result<()> {
        let Some(upload) = self.upload.clone() else {
            let bytes = std::mem::take(&mut self.buffer);
            self.done = true;
            return self.put(bytes);
        };
        if !self.buffer.is_empty() {
            self.send_part()?;
        }
        while !self.in_flight.is_empty() {
            self.wait_oldest()?;
        }
        let signer = match self.no_clobber {
            true => super::store::s3_signer_for(&self.location)?,
            false => None,
        };
        if self.no_clobber && signer.is_none() {
            Upload::check_absent(&self.location)?;
        }
        if !unregister(&upload) {
            interrupted();
        }
        self.done = true;
        let parts = std::mem::take(&mut self.parts);
        if let Some(signer) = signer {
            let multipart = (&upload.path, upload.id.as_str());
            return complete_if_absent(&self.location, signer, multipart, &parts)
                .inspect_err(|_| abort_or_say(&upload));
        }
        let (store, path, id) = (upload.store.clone(), upload.path.clone(), upload.id.clone());
        let completed = runtime()?
            .block_on(async move { store.complete_multipart(&path, &id, parts).await })
            .map(|_| ())
            .map_err(|e| explain(&self.location, e));
        completed.inspect_err(|_| abort_or_say(&upload))
    }

    /// The one PUT of an object that fits in one part.
    fn put(&self, bytes: Vec<u8>) -> io::Result<()> {
        let store = store_for(&self.location)?;
        let path = self.path.clone();
        let mode = if self.no_clobber {
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
        put.map(|_| ()).map_err(|e| match e {
            object_store::Error::AlreadyExists { .. } => exists(),
            e => explain(&self.location, e),
        })
    }
}

impl Drop for Streaming {
    /// An object not completed: its parts under way stopped, its upload aborted.
    fn drop(&mut self) {
        if self.done {
            return;
        }
        for sending in self.in_flight.drain(..) {
            sending.abort();
        }
        if let Some(upload) = self.upload.take().filter(unregister) {
            abort_or_say(&upload);
        }
    }
}

/// Completes an S3 multipart upload only if its key does not exist: the request object_store
/// sends, with `If-None-Match: *` (which S3 takes on a completion, answering 412 when the key
/// exists), signed by object_store's signer and sent through its HTTP client. Sent once: a
/// retry after a completion whose answer was lost would find its own object and say 412.
/// The upload is `(path, id)`; a refusal because the key exists is
/// [`io::ErrorKind::AlreadyExists`] (the caller aborts the upload).
pub(super) fn complete_if_absent(
    location: &Location,
    signer: Arc<dyn Signer>,
    (path, id): (&object_store::path::Path, &str),
    parts: &[PartId],
) -> io::Result<()> {
    let options = SignedUrlOptions::new()
        .with_query([("uploadId", id)])
        .with_signed_header(IF_NONE_MATCH, HeaderValue::from_static("*"));
    let allow_http = super::store::is_true("AWS_ALLOW_HTTP");
    let client = ReqwestConnector::default()
        .connect(&ClientOptions::new().with_allow_http(allow_http))
        .map_err(|e| explain(location, e))?;
    let (path, body) = (path.clone(), completion_body(parts));
    let answer = runtime()?.block_on(async move {
        let signed = signer.signed_url_opts(Method::POST, &path, SIGNED_FOR, &options);
        let url = signed.await.map_err(|e| explain(location, e))?;
        let mut request = HttpRequest::new(HttpRequestBody::from(body));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = url.as_str().parse().map_err(io::Error::other)?;
        let headers = request.headers_mut();
        headers.insert(IF_NONE_MATCH, HeaderValue::from_static("*"));
        let response = client.execute(request).await.map_err(io::Error::other)?;
        let status = response.status();
        let text = response
            .into_body()
            .bytes()
            .await
            .map_err(io::Error::other)?;
        Ok::<_, io::Error>((status.as_u16(), String::from_utf8_lossy(&text).into_owned()))
    });
    let (status, text) = answer?;
    completion_answer(status, &text)
}

/// What a conditional completion's answer means. Only a store that says it does not
/// implement the condition is told to go without `--no-clobber`: a refusal of another kind
/// (access, a lost upload, a busy server) is no reason to replace an object.
fn completion_answer(status: u16, text: &str) -> io::Result<()> {
    let code = element(text, "Code");
    match status {
        412 => return Err(exists()),
        // S3 may answer 200 and put an error in the body.
        200..=299 if !text.contains("<Error>") => return Ok(()),
        _ => {}
    }
    let said = code
        .as_ref()
        .map_or(String::new(), |code| format!(", {code}"));
    let hint = if status == 501 || code.as_deref() == Some("NotImplemented") {
        "with --no-clobber it is completed only if the key does not exist (If-None-Match), \
         which this store does not take\nhint: leave out --no-clobber to complete it \
         unconditionally"
    } else {
        "the key is as it was\nhint: run again (a 403 needs s3:PutObject on the key, a 409 \
         or a 5xx only a retry)"
    };
    Err(io::Error::other(format!(
        "the store did not complete the upload (HTTP {status}{said}): {hint}"
    )))
}

/// How long the completion's signature holds.
const SIGNED_FOR: Duration = Duration::from_secs(15 * 60);

/// The body of a CompleteMultipartUpload: each part's number and ETag, in order.
fn completion_body(parts: &[PartId]) -> String {
    let mut xml = String::from("<CompleteMultipartUpload>");
    for (at, part) in parts.iter().enumerate() {
        let etag = part
            .content_id
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;");
        xml.push_str(&format!(
            "<Part><PartNumber>{}</PartNumber><ETag>{etag}</ETag></Part>",
            at + 1
        ));
    }
    xml.push_str("</CompleteMultipartUpload>");
    xml
}

/// The text of the first `<name>` element of an XML answer, its letters and digits only, at
/// most 100 (a store's error code, for a message: the server's text reaches a terminal).
pub(super) fn element(xml: &str, name: &str) -> Option<String> {
    let start = xml.find(&format!("<{name}>"))? + name.len() + 2;
    let end = start + xml[start..].find('<')?;
    let text = xml[start..end].chars().filter(char::is_ascii_alphanumeric);
    Some(text.take(100).collect())
}

/// Whether `upload` is still registered: a signal's handler takes every upload to abort it
/// as the process ends.
fn registered(upload: &Arc<Pending>) -> bool {
    pending().iter().any(|p| Arc::ptr_eq(p, upload))
}

/// Takes `upload` off the register; `false` when a signal's handler took it first.
fn unregister(upload: &Arc<Pending>) -> bool {
    let mut list = pending();
    let at = list.iter().position(|p| Arc::ptr_eq(p, upload));
    at.map(|at| list.swap_remove(at)).is_some()
}

fn abort_or_say(upload: &Pending) {
    if let Err(e) = abort(upload) {
        crate::messages::eprintln(abort_failed(upload, &e));
    }
}

/// What the writer does once a signal's handler has taken its upload ([`abort_uploads`],
/// called only by that handler, which ends the process once the uploads are aborted): it
/// waits for that end, so that the process dies by the signal, not by an error of its own.
fn interrupted() -> ! {
    loop {
        std::thread::park();
    }
}

/// What `--no-clobber` checks of an upload.
pub struct Upload;

impl Upload {
    /// `--no-clobber`'s check of an upload: one HEAD, before anything is sent.
    pub fn check_absent(location: &Location) -> io::Result<()> {
        use object_store::ObjectStoreExt;
        let (store, path) = (store_for(location)?, key_path(location)?);
        match runtime()?.block_on(async move { store.head(&path).await }) {
            Ok(_) => Err(exists()),
            Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(explain(location, e)),
        }
    }
}

/// The refusal of `--no-clobber` (the caller's error names the object).
fn exists() -> io::Error {
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

    #[test]
    fn a_part_size_asked_must_fit_the_object_in_10000_parts() {
        assert!(check_part_size(10_000 * (5 << 20), 5 << 20).is_ok());
        let (why, hint) = check_part_size(10_000 * (5 << 20) + 1, 5 << 20).unwrap_err();
        assert!(why.contains("10001 parts"), "{why}");
        assert!(hint.contains("--part-size 6MiB or more"), "{hint}");
        let (_, hint) = check_part_size(u64::MAX, 5 << 30).unwrap_err();
        assert!(hint.contains("sharded output"), "{hint}");
    }

    #[test]
    fn parts_in_flight_hold_at_most_64_mib_or_one_part() {
        assert_eq!(in_flight(5 << 20), 4);
        assert_eq!(in_flight(32 << 20), 2);
        assert_eq!(in_flight(105 << 20), 1);
        assert_eq!(in_flight(0), 4);
    }

    #[test]
    fn a_completion_lists_its_parts_in_order_with_their_etags_escaped() {
        let parts = [
            PartId {
                content_id: "\"a1\"".to_string(),
            },
            PartId {
                content_id: "<b&>".to_string(),
            },
        ];
        assert_eq!(
            completion_body(&parts),
            "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>\"a1\"</ETag>\
             </Part><Part><PartNumber>2</PartNumber><ETag>&lt;b&amp;&gt;</ETag></Part>\
             </CompleteMultipartUpload>"
        );
    }

    #[test]
    fn only_a_store_without_the_condition_is_told_to_leave_out_no_clobber() {
        let error = |status, text| completion_answer(status, text).unwrap_err();
        let denied = error(403, "<Error><Code>AccessDenied</Code></Error>").to_string();
        assert!(denied.contains("HTTP 403, AccessDenied"), "{denied}");
        assert!(!denied.contains("leave out --no-clobber"), "{denied}");
        let in_body = error(200, "<Error><Code>InternalError</Code></Error>").to_string();
        assert!(!in_body.contains("leave out --no-clobber"), "{in_body}");
        let unsupported = error(501, "<Error><Code>NotImplemented</Code></Error>").to_string();
        assert!(
            unsupported.contains("leave out --no-clobber"),
            "{unsupported}"
        );
        let exists = error(412, "");
        assert_eq!(exists.kind(), io::ErrorKind::AlreadyExists);
        assert!(completion_answer(200, "<CompleteMultipartUploadResult/>").is_ok());
    }

    #[test]
    fn an_error_code_is_read_as_letters_and_digits_only() {
        let xml = "<Error><Code>NotImplemented</Code><Message>x</Message></Error>";
        assert_eq!(element(xml, "Code").as_deref(), Some("NotImplemented"));
        let hostile = "<Error><Code>Bad\u{1b}[31mCode</Code></Error>";
        assert_eq!(element(hostile, "Code").as_deref(), Some("Bad31mCode"));
        assert_eq!(element("<Error/>", "Code"), None);
    }
}
