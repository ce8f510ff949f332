//! The parts of an object a job's workers upload (issue 45): each part streamed to S3 as it
//! is produced, never held whole, so that a worker's memory is tens of MiB whatever the part
//! size (`--part-size`); a part the network fails produced again and sent again; and the
//! commit's `--no-clobber` a conditional completion. Against moto's S3 server (`moto.rs`), with
//! real failures made by a proxy on loopback between tjoin and moto ([`Proxy`]).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::moto::Moto;
use crate::workers::{absolute, start_worker, two_npy};
use crate::workers_s3::{no, ok, run_in};

/// What the proxy does with a request, told its head (request line and headers).
pub(crate) enum Verdict {
    /// Passes it on.
    Forward,
    /// Passes on its head and this many bytes of its body, then drops both connections: the
    /// network failing in the middle of a request.
    Cut(u64),
    /// Passes on nothing, and reads nothing more for 90 s: a store, or a network, that
    /// stalls (moto, given the head, would end the request itself).
    Stall,
    /// Passes it on after this long: a store slower than the input.
    Delay(Duration),
    /// Passes on its head and this many bytes of its body, then answers the client 200 with
    /// an ETag and drops both connections: a store, or a middlebox, that answers a success
    /// before it read the body.
    AnswerEarly(u64),
}

pub(crate) type Rule = Arc<dyn Fn(&str) -> Verdict + Send + Sync>;

/// A proxy on loopback in front of moto: each connection to it is one to moto, whose
/// requests it reads one after another (by their Content-Length) to ask `rule` of each.
pub(crate) struct Proxy {
    port: u16,
}

impl Proxy {
    pub(crate) fn start(upstream: u16, rule: Rule) -> Proxy {
        let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let rule = rule.clone();
                std::thread::spawn(move || relay(client, upstream, &*rule));
            }
        });
        Proxy { port }
    }

    /// The environment of a tjoin run through the proxy.
    pub(crate) fn env(&self, moto: &Moto) -> Vec<(&'static str, String)> {
        let mut env = moto.env();
        for (name, value) in &mut env {
            if *name == "AWS_ENDPOINT_URL" {
                *value = format!("http://127.0.0.1:{}", self.port);
            }
        }
        env
    }
}

/// Relays one client's connection to moto, as [`Proxy`] says.
fn relay(client: TcpStream, upstream: u16, rule: &(dyn Fn(&str) -> Verdict + Send + Sync)) {
    let Ok(mut server) = TcpStream::connect(("127.0.0.1", upstream)) else {
        return;
    };
    let (mut answers, mut to_client) = (server.try_clone().unwrap(), client.try_clone().unwrap());
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut answers, &mut to_client);
        let _ = to_client.shutdown(Shutdown::Both);
    });
    let mut reader = BufReader::new(client.try_clone().unwrap());
    loop {
        let mut head = String::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                let _ = server.shutdown(Shutdown::Both);
                return;
            }
            head.push_str(&line);
            if line == "\r\n" {
                break;
            }
        }
        let len: u64 = head
            .lines()
            .find_map(|l| {
                let (name, value) = l.split_once(':')?;
                let length = name.eq_ignore_ascii_case("content-length");
                length.then(|| value.trim().parse().ok()).flatten()
            })
            .unwrap_or(0);
        let verdict = rule(&head);
        if matches!(verdict, Verdict::Stall) {
            std::thread::sleep(Duration::from_secs(90));
            let _ = server.shutdown(Shutdown::Both);
            let _ = client.shutdown(Shutdown::Both);
            return;
        }
        if let Verdict::Delay(pause) = verdict {
            std::thread::sleep(pause);
        }
        if server.write_all(head.as_bytes()).is_err() {
            return;
        }
        let sent = match verdict {
            Verdict::Forward | Verdict::Delay(_) => len,
            Verdict::Cut(bytes) | Verdict::AnswerEarly(bytes) => bytes.min(len),
            Verdict::Stall => 0,
        };
        let copied = std::io::copy(&mut (&mut reader).take(sent), &mut server).unwrap_or(0);
        if matches!(verdict, Verdict::AnswerEarly(_)) {
            let answer = "HTTP/1.1 200 OK\r\nETag: \"early\"\r\nContent-Length: 0\r\n\r\n";
            let _ = (&client).write_all(answer.as_bytes());
        }
        if !matches!(verdict, Verdict::Forward | Verdict::Delay(_)) || copied < sent {
            let _ = server.shutdown(Shutdown::Both);
            let _ = client.shutdown(Shutdown::Both);
            return;
        }
    }
}

/// A rule that cuts, `times` times, the request that uploads part `number`, after 1 MiB of
/// its body; and the count of the requests of that part.
fn cutting_part(number: u32, times: usize) -> (Rule, Arc<AtomicUsize>) {
    failing_part(number, times, Verdict::Cut(1 << 20))
}

/// A rule that fails, `times` times, the request that uploads part `number` as `verdict`
/// says; and the count of the requests of that part.
fn failing_part(number: u32, times: usize, verdict: Verdict) -> (Rule, Arc<AtomicUsize>) {
    let cut = Arc::new(AtomicUsize::new(0));
    let counted = cut.clone();
    let rule = move |head: &str| {
        let line = head.lines().next().unwrap_or_default();
        let ours = line.starts_with("PUT ")
            && line.contains("uploadId=")
            && line
                .split(['?', '&', ' '])
                .any(|p| p == format!("partNumber={number}"));
        if ours && counted.fetch_add(1, Ordering::SeqCst) < times {
            return match verdict {
                Verdict::Cut(bytes) => Verdict::Cut(bytes),
                Verdict::AnswerEarly(bytes) => Verdict::AnswerEarly(bytes),
                _ => Verdict::Stall,
            };
        }
        Verdict::Forward
    };
    (Arc::new(rule), cut)
}

/// Runs worker `worker` of `n` of `args` through a proxy that cuts the request of part
/// `number` `times` times: its output, and how many times that part's request came.
fn worker_cut(
    moto: &Moto,
    args: &[String],
    (worker, n): (u32, u32),
    (number, times): (u32, usize),
) -> (std::process::Output, usize) {
    let (rule, cut) = cutting_part(number, times);
    let proxy = Proxy::start(port_of(moto), rule);
    let (child, _own) = start_worker(args, (worker, n), &proxy.env(moto));
    let output = child.wait_with_output().unwrap();
    (output, cut.load(Ordering::SeqCst))
}

/// A moto server with the bucket `out`; a folder with `a.npy` and `b.npy` of `rows` rows of
/// `cols` columns each (float32), their one-process join's bytes, and the arguments of
/// their join into `s3://out/j.npy`.
fn set_up(rows: u64, cols: u64) -> Option<(Moto, tempfile::TempDir, Vec<u8>, Vec<String>)> {
    let moto = Moto::start()?;
    moto.bucket("out");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    two_npy(d, rows, (cols, cols));
    let flags = ["-a", "0", "a.npy", "b.npy"];
    let mut one = absolute(d, &flags);
    one.extend(["-o".to_string(), d.join("one.npy").display().to_string()]);
    ok(&moto, d, &one, &["-q"]);
    let want = std::fs::read(d.join("one.npy")).unwrap();
    std::fs::remove_file(d.join("one.npy")).unwrap();
    let mut args = absolute(d, &flags);
    args.extend(["-o".to_string(), "s3://out/j.npy".to_string()]);
    Some((moto, dir, want, args))
}

/// What a worker held at most, in KiB.
#[derive(Debug, Clone, Copy, Default)]
struct Peak {
    /// The kernel's high-water mark of its resident memory (`VmHWM`): its own memory, and
    /// the pages of its inputs' maps and of its binary it touched.
    resident: u64,
    /// Its own memory (`RssAnon`) at its highest, sampled every 5 ms: what holding a part
    /// whole would show for as long as the part is sent.
    own: u64,
}

/// Runs worker `worker` of `n` of `args` with `env`: whether it succeeded, its standard
/// error, and its peaks, read from `/proc` as it runs (after its exec, so that the test
/// binary's own memory is not counted, as `wait4`'s would be).
fn measured_worker(
    args: &[String],
    (worker, n): (u32, u32),
    env: &[(&str, String)],
) -> (bool, String, Peak) {
    let (mut child, _own) = start_worker(args, (worker, n), env);
    let status = format!("/proc/{}/status", child.id());
    let mut peak = Peak::default();
    let kib = |text: &str, key: &str| {
        let line = text.lines().find(|l| l.starts_with(key))?;
        line.split_whitespace().nth(1)?.parse::<u64>().ok()
    };
    loop {
        if let Ok(text) = std::fs::read_to_string(&status) {
            peak.resident = peak.resident.max(kib(&text, "VmHWM:").unwrap_or(0));
            peak.own = peak.own.max(kib(&text, "RssAnon:").unwrap_or(0));
        }
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.success(), stderr, peak)
}

/// The most a worker may hold, whatever the part size: tens of MiB, of which its own memory
/// under 32 (it held two parts whole: 128 MiB of 64 MiB parts).
const WORKER_PEAK_KIB: u64 = 64 << 10;
const WORKER_OWN_KIB: u64 = 32 << 10;

#[test]
fn workers_stream_parts_of_64_mib_in_tens_of_mib_each() {
    // 200 MiB: parts of 64, 64, 64 and 8 MiB, two for each worker.
    let Some((moto, dir, want, args)) = set_up(3000, 8738) else {
        return;
    };
    let d = dir.path();
    ok(
        &moto,
        d,
        &args,
        &["--workers", "2", "--begin", "--part-size", "64MiB", "-q"],
    );
    let manifest = moto.get("out", "j.npy.tjoin-job/manifest.json").unwrap();
    let manifest = String::from_utf8(manifest).unwrap();
    assert!(manifest.contains("\"part_size\": 67108864"), "{manifest}");
    // The workers take the begin's part size from the manifest, given none.
    let env = moto.env();
    let first = std::thread::spawn({
        let (args, env) = (args.clone(), env.clone());
        move || measured_worker(&args, (0, 2), &env)
    });
    let second = measured_worker(&args, (1, 2), &env);
    for (worker, (succeeded, stderr, peak)) in [(0, first.join().unwrap()), (1, second)] {
        assert!(succeeded, "worker {worker}: {stderr}");
        eprintln!("worker {worker}/2 of 64 MiB parts: {peak:?} KiB");
        assert!(
            peak.resident < WORKER_PEAK_KIB && peak.own < WORKER_OWN_KIB,
            "worker {worker}/2 peaked at {peak:?} KiB, more than {WORKER_PEAK_KIB} or (its own) \
             {WORKER_OWN_KIB}"
        );
    }
    assert_eq!(parts_taken(&moto, "j.npy"), 4, "{:#?}", moto.requests());
    ok(&moto, d, &args, &["--workers", "2", "--commit", "-q"]);
    assert!(moto.get("out", "j.npy").unwrap() == want);
    assert!(moto.uploads("out").is_empty());
}

#[test]
fn a_part_the_network_drops_is_produced_again_and_sent_again_never_held_whole() {
    // 64.1 MiB: parts of 64 MiB and 0.1; worker 0 of 1 sends both.
    let Some((moto, dir, want, args)) = set_up(3000, 2800) else {
        return;
    };
    let d = dir.path();
    let begin = ["--workers", "1", "--begin", "--part-size", "64MiB", "-q"];
    ok(&moto, d, &args, &begin);
    let (rule, cut) = cutting_part(1, 1);
    let proxy = Proxy::start(port_of(&moto), rule);
    let (succeeded, stderr, peak) = measured_worker(&args, (0, 1), &proxy.env(&moto));
    assert!(succeeded, "{stderr}");
    assert_eq!(cut.load(Ordering::SeqCst), 2, "cut once, then sent again");
    // Sent again from the inputs, not from a copy of the part (as object_store resends one
    // it holds whole).
    assert!(peak.own < WORKER_OWN_KIB, "{peak:?} KiB");
    ok(&moto, d, &args, &["--workers", "1", "--commit", "-q"]);
    assert!(moto.get("out", "j.npy").unwrap() == want);
    assert!(moto.uploads("out").is_empty());
}

#[test]
fn a_part_answered_before_its_body_was_taken_is_sent_again_not_recorded() {
    // 64.1 MiB in parts of 64 MiB: the first is answered 200 with an ETag after 1 MiB of its
    // body, which the worker must not record as the part's.
    let Some((moto, dir, want, args)) = set_up(3000, 2800) else {
        return;
    };
    let d = dir.path();
    let begin = ["--workers", "1", "--begin", "--part-size", "64MiB", "-q"];
    ok(&moto, d, &args, &begin);
    let (rule, requests) = failing_part(1, 1, Verdict::AnswerEarly(1 << 20));
    let proxy = Proxy::start(port_of(&moto), rule);
    let (child, _own) = start_worker(&args, (0, 1), &proxy.env(&moto));
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(
        requests.load(Ordering::SeqCst),
        2,
        "answered early once, then sent again"
    );
    let done = moto.get("out", "j.npy.tjoin-job/done-0.json").unwrap();
    let done = String::from_utf8(done).unwrap();
    assert!(!done.contains("early"), "{done}");
    ok(&moto, d, &args, &["--workers", "1", "--commit", "-q"]);
    assert!(moto.get("out", "j.npy").unwrap() == want);
}

#[test]
fn a_part_of_5_mib_answered_early_is_found_by_listing_the_parts_and_sent_again() {
    // Parts of 5 MiB: the socket's buffers take a whole part before the early answer comes,
    // so only the store's listing of the parts shows that part 1 is not there.
    let Some((moto, dir, want, args)) = set_up(3000, 1000) else {
        return;
    };
    let d = dir.path();
    ok(&moto, d, &args, &["--workers", "2", "--begin", "-q"]);
    let (rule, requests) = failing_part(1, 1, Verdict::AnswerEarly(1 << 20));
    let proxy = Proxy::start(port_of(&moto), rule);
    let (child, _own) = start_worker(&args, (0, 2), &proxy.env(&moto));
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(requests.load(Ordering::SeqCst), 2, "{stderr}");
    let done = moto.get("out", "j.npy.tjoin-job/done-0.json").unwrap();
    let done = String::from_utf8(done).unwrap();
    assert!(!done.contains("early"), "{done}");
    ok(&moto, d, &args, &["--worker", "1/2", "-q"]);
    ok(&moto, d, &args, &["--workers", "2", "--commit", "-q"]);
    assert!(moto.get("out", "j.npy").unwrap() == want);
    // Always answered early: the worker fails, and records nothing.
    let (rule, _) = failing_part(1, usize::MAX, Verdict::AnswerEarly(1 << 20));
    let proxy = Proxy::start(port_of(&moto), rule);
    ok(&moto, d, &args, &["--workers", "2", "--begin", "-q"]);
    let (child, _own) = start_worker(&args, (0, 2), &proxy.env(&moto));
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    crate::util::assert_mentions(&stderr, &["part 1 was sent 4 times", "part 1: the store"]);
    assert!(moto.get("out", "j.npy.tjoin-job/done-0.json").is_none());
    ok(&moto, d, &args, &["--workers", "2", "--abandon", "-q"]);
}

#[test]
fn a_part_always_answered_before_its_body_was_taken_fails_the_worker_saying_how_much_was_taken() {
    // 64.1 MiB in parts of 64 MiB: the first always answered 200 after 1 MiB of its body.
    let Some((moto, dir, _, args)) = set_up(3000, 2800) else {
        return;
    };
    let d = dir.path();
    let begin = ["--workers", "1", "--begin", "--part-size", "64MiB", "-q"];
    ok(&moto, d, &args, &begin);
    let (rule, requests) = failing_part(1, usize::MAX, Verdict::AnswerEarly(1 << 20));
    let proxy = Proxy::start(port_of(&moto), rule);
    let (child, _own) = start_worker(&args, (0, 1), &proxy.env(&moto));
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_eq!(requests.load(Ordering::SeqCst), 4, "{stderr}");
    // Its last failure in one line, with the sizes (the bytes taken are those the socket
    // took, at least the 1 MiB the store read).
    crate::util::assert_mentions(
        &stderr,
        &[
            "part 1 was sent 4 times and the store took none of them",
            "the store answered HTTP 200 having been sent ",
        ],
    );
    let taken = stderr.split("having been sent ").nth(1).unwrap_or_default();
    let after = taken.trim_start_matches(|c: char| c.is_ascii_digit());
    assert!(after.starts_with(" of its 67108864 bytes)"), "{stderr}");
    assert!(moto.get("out", "j.npy.tjoin-job/done-0.json").is_none());
    ok(&moto, d, &args, &["--workers", "1", "--abandon", "-q"]);
}

#[test]
fn a_part_whose_request_stalls_is_given_up_and_sent_again() {
    // 64.1 MiB in parts of 64 MiB: the first fills the connection's buffers and stalls, until
    // the kernel gives the connection up (TCP_USER_TIMEOUT, 30 s).
    let Some((moto, dir, want, args)) = set_up(3000, 2800) else {
        return;
    };
    let d = dir.path();
    let begin = ["--workers", "1", "--begin", "--part-size", "64MiB", "-q"];
    ok(&moto, d, &args, &begin);
    let (rule, requests) = failing_part(1, 1, Verdict::Stall);
    let proxy = Proxy::start(port_of(&moto), rule);
    let started = std::time::Instant::now();
    let (child, _own) = start_worker(&args, (0, 1), &proxy.env(&moto));
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(
        requests.load(Ordering::SeqCst),
        2,
        "stalled once, then sent again"
    );
    assert!(
        started.elapsed() < Duration::from_secs(80),
        "{:?}",
        started.elapsed()
    );
    ok(&moto, d, &args, &["--workers", "1", "--commit", "-q"]);
    assert!(moto.get("out", "j.npy").unwrap() == want);
}

#[test]
fn a_part_the_network_always_drops_fails_the_worker_saying_to_run_it_again() {
    let Some((moto, dir, _, args)) = set_up(3000, 1000) else {
        return;
    };
    let d = dir.path();
    ok(&moto, d, &args, &["--workers", "2", "--begin", "-q"]);
    let (output, cut) = worker_cut(&moto, &args, (0, 2), (1, usize::MAX));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    crate::util::assert_mentions(
        &stderr,
        &[
            "s3://out/j.npy",
            "part 1 was sent 4 times and the store took none of them",
            "run --worker 0/2 again",
        ],
    );
    assert!(!stderr.contains("X-Amz-Signature"), "{stderr}");
    assert_eq!(cut, 4);
    assert!(moto.get("out", "j.npy.tjoin-job/done-0.json").is_none());
    // Both of its parts always dropped: both named, not the first alone with the second's
    // failure.
    let every = |head: &str| match head.starts_with("PUT ") && head.contains("uploadId=") {
        true => Verdict::Cut(1 << 20),
        false => Verdict::Forward,
    };
    let proxy = Proxy::start(port_of(&moto), Arc::new(every));
    let (child, _own) = start_worker(&args, (0, 2), &proxy.env(&moto));
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    crate::util::assert_mentions(
        &stderr,
        &[
            "parts 1, 2 were each sent 4 times",
            "the last failure: part",
        ],
    );
    assert!(!stderr.contains("X-Amz-Signature"), "{stderr}");
    ok(&moto, d, &args, &["--workers", "2", "--abandon", "-q"]);
}

#[test]
fn part_sizes_outside_s3s_limits_are_refused_with_the_size_that_fits() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // 60 GB of float32, a sparse file: more than 10,000 parts of 5 MiB.
    let len: u64 = 15_000_000_000;
    crate::util::write_npy(&d.join("big.npy"), "<f4", &[len], false, &[]);
    let file = std::fs::OpenOptions::new()
        .append(true)
        .open(d.join("big.npy"))
        .unwrap();
    file.set_len(file.metadata().unwrap().len() + len * 4)
        .unwrap();
    two_npy(d, 3, (2, 2));
    let refused = |args: &[&str], words: &[&str]| {
        let output = crate::util::tjoin()
            .current_dir(d)
            .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
            .env("AWS_ALLOW_HTTP", "true")
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        crate::util::assert_mentions(&stderr, words);
    };
    let small = ["a.npy", "b.npy", "-o", "s3://out/x.npy", "--part-size"];
    refused(
        &[&small[..], &["4MiB"]].concat(),
        &["4MiB", "under the 5 MiB", "5MiB or more"],
    );
    refused(
        &[&small[..], &["6GiB"]].concat(),
        &["6GiB", "over the 5 GiB", "5GiB or less"],
    );
    refused(
        &["a.npy", "b.npy", "-o", "local.npy", "--part-size", "8MiB"],
        &["--part-size", "object storage", "drop --part-size"],
    );
    let big = [
        "-a",
        "0",
        "big.npy",
        "-o",
        "s3://out/big.npy",
        "--part-size",
        "5MiB",
    ];
    refused(
        &[&big[..], &["--workers", "2", "--dry-run"]].concat(),
        &[
            "s3://out/big.npy",
            "11445 parts",
            "--part-size 6MiB or more",
        ],
    );
    refused(
        &big,
        &[
            "s3://out/big.npy",
            "parts of --part-size 5242880 bytes",
            "--part-size 6MiB or more",
        ],
    );
    assert!(!d.join("local.npy").exists());
}

#[test]
fn a_worker_given_another_part_size_than_the_begins_is_refused() {
    let Some((moto, dir, _, args)) = set_up(3000, 1000) else {
        return;
    };
    let d = dir.path();
    ok(
        &moto,
        d,
        &args,
        &["--workers", "2", "--begin", "--part-size", "6MiB", "-q"],
    );
    let error = no(&moto, d, &args, &["--worker", "0/2", "--part-size", "8MiB"]);
    crate::util::assert_mentions(
        &error,
        &[
            "--part-size 8388608 bytes",
            "--part-size 6291456 bytes",
            "drop --part-size",
        ],
    );
    // The part size the manifest records is checked against its files' parts.
    let key = "j.npy.tjoin-job/manifest.json";
    let text = String::from_utf8(moto.get("out", key).unwrap()).unwrap();
    let recorded = "\"part_size\": 6291456";
    let at = text.rfind(recorded).expect(&text);
    let hostile = format!(
        "{}\"part_size\": 5242880{}",
        &text[..at],
        &text[at + recorded.len()..]
    );
    moto.put("out", key, hostile.as_bytes());
    let error = no(&moto, d, &args, &["--worker", "0/2"]);
    assert!(error.contains("its parts are not those"), "{error}");
    moto.put("out", key, text.as_bytes());
    ok(
        &moto,
        d,
        &args,
        &["--worker", "0/2", "--part-size", "6MiB", "-q"],
    );
    ok(&moto, d, &args, &["--worker", "1/2", "-q"]);
    ok(&moto, d, &args, &["--workers", "2", "--commit", "-q"]);
    // 24 MB in parts of 6 MiB: four.
    assert_eq!(parts_taken(&moto, "j.npy"), 4, "{:#?}", moto.requests());
}

#[test]
fn one_process_uploads_in_the_part_size_asked() {
    let Some((moto, dir, want, _)) = set_up(3000, 1000) else {
        return;
    };
    let d = dir.path();
    let args = ["-a", "0", "a.npy", "b.npy", "-o", "s3://out/one.npy"];
    ok(
        &moto,
        d,
        &args.map(String::from),
        &["--part-size", "6MiB", "-q"],
    );
    assert!(moto.get("out", "one.npy").unwrap() == want);
    // 24 MB: four parts of 6 MiB (of 8 MiB by default: three).
    assert_eq!(parts_taken(&moto, "one.npy"), 4, "{:#?}", moto.requests());
}

#[test]
fn no_clobber_commit_refuses_an_object_that_appears_during_the_commit() {
    let Some((moto, dir, _, args)) = set_up(3000, 1000) else {
        return;
    };
    let moto = Arc::new(moto);
    let d = dir.path();
    ok(&moto, d, &args, &["--workers", "2", "--begin", "-n", "-q"]);
    crate::workers::run_workers(&args, &[0, 1], 2, &moto.env());
    // Another writer creates the key just as the completion goes: after the commit's look.
    // A weak handle: the proxy's thread, which keeps the rule, must not keep moto running
    // after the test.
    let other = Arc::downgrade(&moto);
    let rule = move |head: &str| {
        let line = head.lines().next().unwrap_or_default();
        if line.starts_with("POST /out/j.npy?") && line.contains("uploadId=") {
            if let Some(other) = other.upgrade() {
                other.put("out", "j.npy", b"theirs");
            }
        }
        Verdict::Forward
    };
    let proxy = Proxy::start(port_of(&moto), Arc::new(rule));
    let (code, stderr) = run_through(
        &moto,
        &proxy,
        d,
        &args,
        &["--workers", "2", "--commit", "-n"],
    );
    assert_eq!(code, Some(2), "{stderr}");
    crate::util::assert_mentions(
        &stderr,
        &[
            "s3://out/j.npy",
            "another writer",
            "--no-clobber keeps it",
            "abandoned",
        ],
    );
    assert_eq!(moto.get("out", "j.npy").unwrap(), b"theirs");
    assert!(moto.uploads("out").is_empty(), "{:?}", moto.uploads("out"));
    assert_eq!(moto.keys("out"), ["j.npy"], "the job's objects are removed");
    let refused = moto
        .requests()
        .iter()
        .any(|r| r.starts_with("POST /out/j.npy?") && r.ends_with(" 412"));
    assert!(refused, "{:#?}", moto.requests());
}

/// A step of a job (as `workers_s3::run`), through `proxy`: its exit code and standard error.
fn run_through(
    moto: &Moto,
    proxy: &Proxy,
    dir: &Path,
    args: &[String],
    extra: &[&str],
) -> (Option<i32>, String) {
    let mut command = moto.tjoin();
    command.envs(proxy.env(moto));
    run_in(command, dir, args, extra)
}

/// How many parts of `key` in the bucket `out` moto took.
pub(crate) fn parts_taken(moto: &Moto, key: &str) -> usize {
    let put = format!("PUT /out/{key}?");
    let requests = moto.requests();
    let taken = requests
        .iter()
        .filter(|r| r.starts_with(&put) && r.ends_with(" 200"));
    taken.count()
}

/// The port moto listens on.
pub(crate) fn port_of(moto: &Moto) -> u16 {
    let endpoint = moto.endpoint();
    endpoint.rsplit(':').next().unwrap().parse().unwrap()
}

#[test]
fn a_part_cut_in_the_middle_of_a_share_is_produced_again_from_its_own_bytes() {
    // 24 MB in 5 parts of 5 MiB: worker 1 of 2 sends parts 3 to 5; its second is cut after
    // 1 MiB, and must be produced again from its own place in the output, not its share's
    // start.
    let Some((moto, dir, want, args)) = set_up(3000, 1000) else {
        return;
    };
    let d = dir.path();
    ok(&moto, d, &args, &["--workers", "2", "--begin", "-q"]);
    let (output, cut) = worker_cut(&moto, &args, (1, 2), (4, 1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(cut, 2, "cut once, then sent again");
    crate::workers::run_workers(&args, &[0], 2, &moto.env());
    ok(&moto, d, &args, &["--workers", "2", "--commit", "-q"]);
    assert!(moto.get("out", "j.npy").unwrap() == want);
}

/// A worker sends its parts through a client of tjoin's own, which must read
/// `AWS_ALLOW_HTTP=1` as object_store does (1, yes, on, y): it read only `true`, so every
/// part was refused as plain HTTP ("builder error") where the store took the rest.
#[test]
fn a_worker_sends_its_parts_with_plain_http_allowed_as_1() {
    let Some((moto, dir, want, args)) = set_up(3000, 1000) else {
        return;
    };
    let d = dir.path();
    ok(&moto, d, &args, &["--workers", "1", "--begin", "-q"]);
    let mut env = moto.env();
    for (name, value) in &mut env {
        if *name == "AWS_ALLOW_HTTP" {
            *value = "1".to_string();
        }
    }
    crate::workers::run_workers(&args, &[0], 1, &env);
    ok(&moto, d, &args, &["--workers", "1", "--commit", "-q"]);
    assert!(moto.get("out", "j.npy").unwrap() == want);
    assert!(moto.uploads("out").is_empty());
}
