//! Inputs in object storage: read from a real S3 server (moto's, `moto.rs`) and from a small
//! HTTP server of the test's own (`RangeServer`: ranged GETs, ETags and `If-Match`, or a
//! server that ignores Range): the same output as the same join of local copies, for single
//! objects, sharded sets by index and by prefix, `.bin` sets, DCP folders and remote to
//! remote; an object replaced while it is read is refused, never read half old, half new.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::moto::Moto;
use crate::util::{f32_le, write_npy};

fn fixture(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(path)
}

/// Uploads every file of a fixture folder (dot files too) under `prefix`.
fn upload_folder(moto: &Moto, bucket: &str, folder: &Path, prefix: &str) {
    for entry in std::fs::read_dir(folder).unwrap() {
        let entry = entry.unwrap();
        if entry.path().is_file() {
            let name = entry.file_name().into_string().unwrap();
            moto.put(
                bucket,
                &format!("{prefix}/{name}"),
                &std::fs::read(entry.path()).unwrap(),
            );
        }
    }
}

/// Runs tjoin with `args` in `dir` and returns what it wrote to `out`.
fn joined(moto: &Moto, dir: &Path, args: &[&str], out: &str) -> Vec<u8> {
    moto.tjoin()
        .current_dir(dir)
        .args(args)
        .args(["-o", out])
        .assert()
        .success();
    std::fs::read(dir.join(out)).unwrap()
}

#[test]
fn remote_inputs_give_the_output_of_their_local_copies() {
    let Some(moto) = Moto::start() else { return };
    // Two objects joined on either axis, a sharded set by its index and by its prefix: as
    // against Azurite and fake-gcs-server.
    crate::emulated_inputs::inputs_give_the_output_of_their_local_copies(&moto);
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = ("s3://inputs/npy/a.npy", "s3://inputs/npy/b.npy");
    // Remote to remote.
    moto.tjoin()
        .current_dir(dir.path())
        .args(["-a", "0", a, b, "-o", "s3://inputs/out/ab.npy"])
        .assert()
        .success();
    let local = joined(&moto, dir.path(), &["-a", "0", a, b], "local.npy");
    assert!(
        moto.get("inputs", "out/ab.npy").unwrap() == local,
        "remote to remote differs"
    );

    // A .bin set; a DCP folder.
    upload_folder(&moto, "inputs", &fixture("pytorch_set/model"), "bin");
    upload_folder(&moto, "inputs", &fixture("dcp_default/ranks3"), "dcp");
    let bin_local = fixture("pytorch_set/model/pytorch_model.bin.index.json");
    let bin_local = joined(
        &moto,
        dir.path(),
        &[bin_local.to_str().unwrap()],
        "bin.safetensors",
    );
    let bin = joined(
        &moto,
        dir.path(),
        &["s3://inputs/bin/pytorch_model.bin.index.json"],
        "bin.safetensors",
    );
    assert!(bin == bin_local, "the .bin set differs");
    let dcp = joined(&moto, dir.path(), &["s3://inputs/dcp/"], "dcp.safetensors");
    assert!(dcp == std::fs::read(fixture("dcp_default/ranks3.expected.safetensors")).unwrap());
    assert!(
        moto.requests().iter().all(|r| !r.starts_with("HEAD")),
        "no HEAD for an input"
    );
}

#[test]
fn messages_and_the_plan_name_a_remote_input_by_its_url() {
    let Some(moto) = Moto::start() else { return };
    moto.bucket("inputs");
    upload_folder(&moto, "inputs", &fixture("sharded/model"), "model");
    let run = moto
        .tjoin()
        .args(["s3://inputs/model/", "--dry-run"])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&run.get_output().stdout).into_owned();
    assert!(
        text.contains("s3://inputs/model/model.safetensors.index.json"),
        "{text}"
    );
    assert!(!text.contains(".tjoin-download"), "{text}");
    for (url, says) in [
        ("s3://inputs/model/nope.npy", "no such object"),
        ("s3://nothere/a.npy", "no such bucket"),
        // A prefix is listed, and object_store's list error is no NotFound.
        ("s3://nothere/model/", "no such bucket"),
    ] {
        let run = moto
            .tjoin()
            .args(["-a", "0", url, "-o", "x.npy"])
            .assert()
            .failure();
        let stderr = String::from_utf8_lossy(&run.get_output().stderr).into_owned();
        crate::util::assert_mentions(&stderr, &[url, says]);
    }
}

/// Waits until moto has answered `count` GETs of `path` (`/BUCKET/KEY`).
fn wait_for_gets(moto: &Moto, path: &str, count: usize) {
    let start = Instant::now();
    let prefix = format!("GET {path}");
    let gets = || {
        moto.requests()
            .iter()
            .filter(|r| r.starts_with(&prefix))
            .count()
    };
    while gets() < count {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "tjoin sent no GET of {path}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn an_object_replaced_while_it_is_read_is_refused_never_mixed() {
    let Some(moto) = Moto::start() else { return };
    moto.bucket("inputs");
    let dir = tempfile::tempdir().unwrap();
    // 160 MB: twenty pieces after the first read, four at a time.
    let old: Vec<u8> = (0..40_000_000u32)
        .flat_map(|v| (v as f32).to_le_bytes())
        .collect();
    write_npy(
        &dir.path().join("old.npy"),
        "<f4",
        &[40_000_000],
        false,
        &old,
    );
    let old_file = std::fs::read(dir.path().join("old.npy")).unwrap();
    let new_file = crate::util::npy_bytes("<f4", &[2], false, &f32_le(&[1.0, 2.0]));
    let mut refused = 0;
    for _ in 0..3 {
        moto.put("inputs", "x.npy", &old_file);
        let _ = std::fs::remove_file(dir.path().join("out.npy"));
        moto.clear_requests();
        let mut command = std::process::Command::new(crate::util::bin());
        command
            .current_dir(dir.path())
            .envs(moto.env())
            .stderr(std::process::Stdio::piped());
        command.args(["-a", "0", "s3://inputs/x.npy", "-o", "out.npy"]);
        let child = command.spawn().unwrap();
        // The second GET is a piece after the first read, pinned to the ETag that read saw.
        wait_for_gets(&moto, "/inputs/x.npy", 2);
        moto.put("inputs", "x.npy", &new_file);
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        if output.status.success() {
            // It read the whole of the old object before the new one landed.
            let got = std::fs::read(dir.path().join("out.npy")).unwrap();
            assert!(
                got == old_file,
                "an output that is neither the old object nor refused"
            );
        } else {
            assert_eq!(output.status.code(), Some(1), "{stderr}");
            crate::util::assert_mentions(&stderr, &["s3://inputs/x.npy", "changed"]);
            assert!(
                !dir.path().join("out.npy").exists(),
                "a refused run left an output"
            );
            refused += 1;
        }
    }
    assert!(
        refused > 0,
        "the replacement never landed during a read: the test proved nothing"
    );
}

/// A small HTTP server on 127.0.0.1 that serves one body: with ranged GETs (206), an ETag
/// and `If-Match` (412 when it does not match), or, `ignore_range`, the whole body with 200
/// to every GET. Each request's first line is kept.
struct RangeServer {
    port: u16,
    requests: Arc<Mutex<Vec<String>>>,
}

impl RangeServer {
    fn start(body: Vec<u8>, ignore_range: bool) -> RangeServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        let body = Arc::new(body);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (body, seen) = (body.clone(), seen.clone());
                std::thread::spawn(move || serve(stream, &body, ignore_range, &seen));
            }
        });
        RangeServer { port, requests }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}/{path}", self.port)
    }
}

/// Answers the requests of one connection (keep-alive) until it closes.
fn serve(stream: TcpStream, body: &[u8], ignore_range: bool, seen: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut stream = stream;
    loop {
        let mut first = String::new();
        if reader.read_line(&mut first).unwrap_or(0) == 0 {
            return;
        }
        let (mut range, mut if_match, mut length) = (None, None, 0usize);
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(':').unwrap();
            match name.to_ascii_lowercase().as_str() {
                "range" => range = Some(value.trim().to_string()),
                "if-match" => if_match = Some(value.trim().to_string()),
                "content-length" => length = value.trim().parse().unwrap(),
                _ => {}
            }
        }
        let mut discard = vec![0; length];
        reader.read_exact(&mut discard).unwrap();
        seen.lock().unwrap().push(first.trim_end().to_string());
        let etag = "\"v1\"";
        let answer = |status: &str, headers: String, data: &[u8]| {
            let mut head = format!(
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\nETag: {etag}\r\n\
                 Last-Modified: Sun, 29 Nov 2026 05:00:00 GMT\r\n{headers}\r\n",
                data.len()
            );
            if first.starts_with("HEAD") {
                head = head.replace(
                    &format!("Content-Length: {}", data.len()),
                    &format!("Content-Length: {}", body.len()),
                );
                return [head.into_bytes()].concat();
            }
            [head.into_bytes(), data.to_vec()].concat()
        };
        let reply = match (range, if_match) {
            (_, Some(tag)) if tag != etag => answer("412 Precondition Failed", String::new(), b""),
            (Some(range), _) if !ignore_range => {
                let (from, to) = range.trim_start_matches("bytes=").split_once('-').unwrap();
                let from: usize = from.parse().unwrap();
                let to = to.parse::<usize>().unwrap().min(body.len() - 1);
                let range = format!("Content-Range: bytes {from}-{to}/{}\r\n", body.len());
                answer("206 Partial Content", range, &body[from..=to])
            }
            _ => answer("200 OK", String::new(), body),
        };
        if stream.write_all(&reply).is_err() {
            return;
        }
    }
}

#[test]
fn an_http_input_is_read_by_range_and_a_server_without_range_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<f32> = (0..300_000).map(|v| v as f32).collect();
    write_npy(
        &dir.path().join("a.npy"),
        "<f4",
        &[300_000],
        false,
        &f32_le(&data),
    );
    let bytes = std::fs::read(dir.path().join("a.npy")).unwrap();
    let server = RangeServer::start(bytes.clone(), false);
    let url = server.url("a.npy");
    crate::util::tjoin()
        .current_dir(dir.path())
        .args(["-a", "0", &url, "a.npy", "-o", "out.npy"])
        .assert()
        .success();
    crate::util::tjoin()
        .current_dir(dir.path())
        .args(["-a", "0", "a.npy", "a.npy", "-o", "local.npy"])
        .assert()
        .success();
    assert!(
        std::fs::read(dir.path().join("out.npy")).unwrap()
            == std::fs::read(dir.path().join("local.npy")).unwrap()
    );
    assert!(
        server
            .requests
            .lock()
            .unwrap()
            .iter()
            .all(|r| r.starts_with("GET ")),
        "no HEAD"
    );
    // The same bytes from a server that answers every GET with the whole body.
    let ignoring = RangeServer::start(bytes, true);
    let url = ignoring.url("a.npy");
    let run = crate::util::tjoin()
        .current_dir(dir.path())
        .args(["-a", "0", &url, "-o", "x.npy"])
        .assert()
        .failure();
    let stderr = String::from_utf8_lossy(&run.get_output().stderr).into_owned();
    crate::util::assert_mentions(&stderr, &[&url, "ignored the Range header"]);
    assert!(!dir.path().join("x.npy").exists());
}

#[cfg(unix)]
#[test]
fn a_signal_while_inputs_are_read_leaves_nothing_behind() {
    let Some(moto) = Moto::start() else { return };
    moto.bucket("inputs");
    let dir = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let data: Vec<u8> = (0..40_000_000u32)
        .flat_map(|v| (v as f32).to_le_bytes())
        .collect();
    moto.put(
        "inputs",
        "big.npy",
        &crate::util::npy_bytes("<f4", &[40_000_000], false, &data),
    );
    let mut command = std::process::Command::new(crate::util::bin());
    command
        .current_dir(dir.path())
        .envs(moto.env())
        .env("TMPDIR", tmp.path());
    command.args(["-a", "0", "s3://inputs/big.npy", "-o", "out.npy"]);
    let mut child = command.spawn().unwrap();
    wait_for_gets(&moto, "/inputs/big.npy", 2);
    // Read by range: nothing of the input is staged in TMPDIR.
    assert_eq!(tmp.path().read_dir().unwrap().count(), 0);
    // SAFETY: a plain kill(2) of the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(
        crate::util::killed_by(status),
        Some(libc::SIGINT),
        "{status:?}"
    );
    let left: Vec<_> = tmp.path().read_dir().unwrap().collect();
    assert!(left.is_empty(), "left in TMPDIR: {left:?}");
    assert!(!dir.path().join("out.npy").exists());
}

/// An empty object: its head's first read (bytes from 0) is answered 416, which was shown as
/// object_store's raw error with the server's XML; now it says what it is, with a fix.
#[test]
fn an_empty_object_is_named_as_too_short_not_as_a_raw_416() {
    let Some(moto) = crate::moto::Moto::start() else {
        return;
    };
    moto.bucket("inputs");
    moto.put("inputs", "empty.npy", b"");
    let dir = tempfile::tempdir().unwrap();
    let run = moto
        .tjoin()
        .current_dir(dir.path())
        .args(["-a", "0", "s3://inputs/empty.npy", "-o", "out.npy"])
        .assert()
        .code(1);
    let stderr = String::from_utf8_lossy(&run.get_output().stderr);
    crate::util::assert_mentions(
        &stderr,
        &["input 1 (s3://inputs/empty.npy)", "empty", "hint:"],
    );
    assert!(!stderr.contains("<?xml"), "{stderr}");
    assert!(!dir.path().join("out.npy").exists());
}
