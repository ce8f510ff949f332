//! A real S3 server for the object-storage tests: moto's (`moto_server`, from `pip install
//! 'moto[server]'`, which CI installs: `.ci/requirements.txt`), started by each test on 127.0.0.1 at a free
//! port and killed when the test ends. It enforces S3's part sizes, conditional reads and
//! writes, and lists leftover multipart uploads. Where moto is absent the tests say so and
//! return untried (and fail under CI, which must have it: `util::cannot_run`).
//!
//! The tests set objects up and look at them with plain HTTP requests of their own, carrying
//! an `Authorization` header that moto, which checks no signatures, takes as the test's
//! identity. Every request moto answers is in its access log ([`Moto::requests`]), which is
//! how a test counts what tjoin asked for.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The variable that names the `moto_server` to run; without it, `moto_server` on the PATH
/// (CI's tools environment puts it there), then `python3 -m moto.server`.
const MOTO_VARIABLE: &str = "TJOIN_TEST_MOTO";

/// A running moto server, killed when dropped.
pub struct Moto {
    child: Child,
    port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

/// The identity moto files the test's objects under; any key works.
const KEY_ID: &str = "testing";

impl Moto {
    /// Starts one, or returns `None` after saying why it cannot (no moto here).
    pub fn start() -> Option<Moto> {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("moto.log");
        let mut dir = Some(dir);
        for _ in 0..5 {
            let port = free_port();
            let Some(child) = spawn(port, &log) else {
                crate::util::cannot_run(
                    "moto's S3 server is not installed (pip install 'moto[server]==5.2.1')",
                );
                return None;
            };
            let mut moto = Moto {
                child,
                port,
                log: log.clone(),
                _dir: dir.take().unwrap(),
            };
            if moto.wait_ready() {
                return Some(moto);
            }
            let _ = moto.child.kill();
            let _ = moto.child.wait();
            dir = Some(std::mem::replace(
                &mut moto._dir,
                tempfile::tempdir().unwrap(),
            ));
        }
        panic!(
            "moto's server did not start: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }

    /// Its endpoint, `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The environment a tjoin run needs to reach it, as a user of an S3-compatible store
    /// sets it.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID", KEY_ID.to_string()),
            ("AWS_SECRET_ACCESS_KEY", "testing-secret".to_string()),
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_ALLOW_HTTP", "true".to_string()),
            ("AWS_REGION", "us-east-1".to_string()),
        ]
    }

    /// tjoin with [`Moto::env`] set and every other AWS variable cleared.
    pub fn tjoin(&self) -> assert_cmd::Command {
        let mut command = crate::util::tjoin();
        for (name, _) in std::env::vars() {
            if name.starts_with("AWS_") {
                command.env_remove(name);
            }
        }
        command.envs(self.env());
        command
    }

    /// Starts tjoin `args` in `dir` (stderr piped), and waits until moto has taken a part of
    /// an object whose key ends with `key` (any object's with an empty `key`). For the
    /// signal tests, Unix's.
    #[cfg(unix)]
    pub fn sending(&self, dir: &std::path::Path, args: &[&str], key: &str) -> Child {
        let mut command = Command::new(crate::util::bin());
        command.current_dir(dir).envs(self.env()).args(args);
        let mut child = command.stderr(Stdio::piped()).spawn().unwrap();
        let start = Instant::now();
        let part = format!("{key}?partNumber=");
        while !self.requests().iter().any(|r| r.contains(&part)) {
            assert!(start.elapsed() < Duration::from_secs(120), "no part sent");
            assert!(child.try_wait().unwrap().is_none(), "tjoin ended first");
            std::thread::sleep(Duration::from_millis(20));
        }
        child
    }

    /// Creates a bucket.
    pub fn bucket(&self, name: &str) {
        let (status, _, body) = self.request("PUT", &format!("/{name}"), &[], b"");
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    }

    /// Writes an object.
    pub fn put(&self, bucket: &str, key: &str, bytes: &[u8]) {
        let (status, _, body) = self.request("PUT", &format!("/{bucket}/{key}"), &[], bytes);
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    }

    /// An object's bytes, or `None` when there is no such key.
    pub fn get(&self, bucket: &str, key: &str) -> Option<Vec<u8>> {
        let (status, _, body) = self.request("GET", &format!("/{bucket}/{key}"), &[], b"");
        match status {
            200 => Some(body),
            404 => None,
            _ => panic!("GET {key}: {status} {}", String::from_utf8_lossy(&body)),
        }
    }

    /// The keys of a bucket.
    pub fn keys(&self, bucket: &str) -> Vec<String> {
        let (_, _, body) = self.request("GET", &format!("/{bucket}?list-type=2"), &[], b"");
        elements(&String::from_utf8_lossy(&body), "Key")
    }

    /// The multipart uploads a bucket has under way (neither completed nor aborted).
    pub fn uploads(&self, bucket: &str) -> Vec<String> {
        let (_, _, body) = self.request("GET", &format!("/{bucket}?uploads"), &[], b"");
        elements(&String::from_utf8_lossy(&body), "UploadId")
    }

    /// The requests moto has answered so far, each as `METHOD /path?query STATUS`, from its
    /// access log, without the test's own (which [`Moto::request`] marks).
    pub fn requests(&self) -> Vec<String> {
        let log = strip_styles(&std::fs::read_to_string(&self.log).unwrap_or_default());
        log.lines()
            .filter_map(|line| {
                let (_, rest) = line.split_once("] \"")?;
                let (request, status) = rest.split_once("\" ")?;
                let mut words = request.split(' ');
                let (method, path) = (words.next()?, words.next()?);
                let status = status.split(' ').next()?;
                Some(format!("{method} {path} {status}"))
            })
            .filter(|line| !line.contains("x-test-own"))
            .collect()
    }

    /// Forgets the requests logged so far ([`Moto::requests`] starts again from here).
    pub fn clear_requests(&self) {
        std::fs::write(&self.log, "").unwrap();
    }

    /// One request of the test's own, marked in the log by a query parameter: its status,
    /// headers and body.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> (u16, String, Vec<u8>) {
        let mark = if path.contains('?') {
            "&x-test-own"
        } else {
            "?x-test-own"
        };
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        let mut head = format!(
            "{method} {path}{mark} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: {}\r\n\
             Connection: close\r\nAuthorization: AWS4-HMAC-SHA256 Credential={KEY_ID}/20260101/\
             us-east-1/s3/aws4_request, SignedHeaders=host, Signature=00\r\n",
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
        (status, head, answer[split + 4..].to_vec())
    }

    fn wait_ready(&mut self) -> bool {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(30) {
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
}

/// moto as the tests of inputs run against every store's server (`emulated_inputs.rs`).
impl crate::emulators::Store for Moto {
    fn scheme(&self) -> &'static str {
        "s3"
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
        let get = format!("GET /{bucket}/{key} ");
        self.requests()
            .iter()
            .filter(|r| r.starts_with(&get))
            .count()
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `moto_server` (or `python3 -m moto.server`) on `port`, logging to `log`; `None`
/// when neither exists.
fn spawn(port: u16, log: &std::path::Path) -> Option<Child> {
    let port = port.to_string();
    let named = std::env::var(MOTO_VARIABLE).ok().filter(|p| !p.is_empty());
    let commands: Vec<(String, &[&str])> = match named {
        Some(program) => vec![(program, &[])],
        None => vec![
            ("moto_server".into(), &[]),
            ("python3".into(), &["-m", "moto.server"]),
        ],
    };
    for (program, first) in commands {
        let file = std::fs::File::create(log).unwrap();
        let child = Command::new(&program)
            .args(first)
            .args(["-H", "127.0.0.1", "-p", &port])
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn();
        let Ok(mut child) = child else { continue };
        // `python3 -m moto.server` without moto ends within its start-up.
        std::thread::sleep(Duration::from_millis(if first.is_empty() {
            50
        } else {
            700
        }));
        if let Ok(Some(_)) = child.try_wait() {
            continue;
        }
        return Some(child);
    }
    None
}

/// A port nothing listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The text of every `<NAME>` element in an XML answer.
fn elements(xml: &str, name: &str) -> Vec<String> {
    let (open, close) = (format!("<{name}>"), format!("</{name}>"));
    xml.split(&open)
        .skip(1)
        .filter_map(|rest| rest.split_once(&close).map(|(text, _)| text.to_string()))
        .collect()
}

/// `text` without its ANSI styles (`ESC [ ... m`): werkzeug colours the access log's lines
/// by status (a 206 in magenta, a 404 in yellow) in some installs even into a file, which
/// would hide those requests from [`Moto::requests`] (CI's own moto did).
fn strip_styles(text: &str) -> String {
    let mut plain = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain
}

#[test]
fn a_coloured_access_log_line_reads_as_a_plain_one() {
    let coloured =
        "127.0.0.1 - - [29/Nov/2026 07:30:49] \"\u{1b}[35mGET /b/x HTTP/1.1\u{1b}[0m\" 206 -";
    assert_eq!(
        strip_styles(coloured),
        "127.0.0.1 - - [29/Nov/2026 07:30:49] \"GET /b/x HTTP/1.1\" 206 -"
    );
}
