//! Outputs in Azure Blob Storage (`-o az://CONTAINER/BLOB`, `-o az://CONTAINER/PREFIX/`)
//! against a real Azure Storage server (Azurite's blob service, `emulators.rs`): the same
//! bytes as the same join written locally, one blob that exists only once its block list is
//! committed, a sharded set's index last, `--no-clobber` refused before a byte is sent, no
//! blob left by a signal midway, the standard environment's two ways to name the account,
//! and errors that never print the account's key or a SAS.

use std::path::Path;
#[cfg(unix)]
use std::time::{Duration, Instant};

use crate::emulators::{AZURE_ACCOUNT, AZURE_KEY, Azurite};
use crate::util::{f32_le, write_npy};

/// Writes `a.npy` [rows_a, width] and `b.npy` [rows_b, width] of distinct float32 values.
fn two_inputs(dir: &Path, rows: (u64, u64), width: u64) {
    let values = |n: u64, from: u64| -> Vec<f32> { (0..n).map(|i| (from + i) as f32).collect() };
    let (a, b) = (rows.0 * width, rows.1 * width);
    for (name, rows, from, n) in [("a.npy", rows.0, 0, a), ("b.npy", rows.1, a, b)] {
        let data = f32_le(&values(n, from));
        write_npy(&dir.join(name), "<f4", &[rows, width], false, &data);
    }
}

/// The bytes of the same join written to a local file.
fn local_join(dir: &Path, args: &[&str]) -> Vec<u8> {
    let out = dir.join("local.npy");
    crate::util::tjoin()
        .current_dir(dir)
        .args(args)
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    std::fs::read(&out).unwrap()
}

/// tjoin's run in `dir`, which must fail: its standard error.
fn fails(command: &mut assert_cmd::Command, dir: &Path, args: &[&str]) -> String {
    let run = command.current_dir(dir).args(args).assert().failure();
    String::from_utf8_lossy(&run.get_output().stderr).into_owned()
}

#[test]
fn a_blob_holds_the_bytes_of_the_same_join_written_locally() {
    let Some(azurite) = Azurite::start() else {
        return;
    };
    azurite.container("out");
    let dir = tempfile::tempdir().unwrap();
    // 40 MB: five blocks of 8 MiB (the last one short), then one block list.
    two_inputs(dir.path(), (9000, 1000), 1024);
    let args = ["-a", "0", "a.npy", "b.npy"];
    azurite
        .tjoin()
        .current_dir(dir.path())
        .args(args)
        .args(["-o", "az://out/joined/ab.npy"])
        .assert()
        .success();
    let local = local_join(dir.path(), &args);
    let remote = azurite.get("out", "joined/ab.npy").expect("the blob");
    assert!(
        local == remote,
        "{}",
        crate::util::describe_difference(&local, &remote)
    );
    let requests = azurite.requests();
    let blocks = requests
        .iter()
        .filter(|r| r.contains("comp=block&"))
        .count();
    let lists = requests
        .iter()
        .filter(|r| r.contains("comp=blocklist"))
        .count();
    assert_eq!((blocks, lists), (5, 1), "{requests:#?}");
    assert_eq!(azurite.blobs("out", true), ["joined/ab.npy"]);

    // A small output is one PUT; --no-clobber keeps an existing blob, sending no byte.
    two_inputs(dir.path(), (2, 3), 4);
    let small = ["-a", "0", "a.npy", "b.npy", "-o", "az://out/small.npy"];
    let puts = |azurite: &Azurite| {
        let requests = azurite.requests();
        requests.iter().filter(|r| r.starts_with("PUT")).count()
    };
    let before = puts(&azurite);
    azurite
        .tjoin()
        .current_dir(dir.path())
        .args(small)
        .assert()
        .success();
    assert_eq!(puts(&azurite), before + 1);
    let local = local_join(dir.path(), &small[..4]);
    assert_eq!(azurite.get("out", "small.npy").unwrap(), local);
    azurite.put("out", "there.npy", b"old");
    let before = puts(&azurite);
    let args = [
        "-n",
        "-a",
        "0",
        "a.npy",
        "b.npy",
        "-o",
        "az://out/there.npy",
    ];
    let stderr = fails(&mut azurite.tjoin(), dir.path(), &args);
    crate::util::assert_mentions(&stderr, &["az://out/there.npy", "exists", "--no-clobber"]);
    assert_eq!(puts(&azurite), before, "a refused run uploaded");
    assert_eq!(azurite.get("out", "there.npy").unwrap(), b"old");
}

#[test]
fn a_sharded_set_under_a_prefix_is_its_shards_then_its_index() {
    let Some(azurite) = Azurite::start() else {
        return;
    };
    azurite.container("models");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/sharded");
    let merged = fixtures.join("expected/model.safetensors");
    let args = [merged.to_str().unwrap(), "--max-shard-size", "600"];
    azurite
        .tjoin()
        .args(args)
        .args(["-o", "az://models/m600/"])
        .assert()
        .success();
    crate::util::assert_set_uploaded(
        &fixtures.join("expected/model_600"),
        azurite.blobs("models", false).len(),
        |name| azurite.get("models", &format!("m600/{name}")),
        azurite.requests(),
    );
}

/// Azure has no multipart upload to abort: a blob's blocks stay uncommitted (and are
/// dropped by the service a week later) until a block list commits them, so an upload cut
/// midway leaves no blob: a listing shows none, a GET finds none.
#[cfg(unix)]
#[test]
fn a_signal_during_the_upload_leaves_no_blob() {
    let Some(azurite) = Azurite::start() else {
        return;
    };
    azurite.container("out");
    let dir = tempfile::tempdir().unwrap();
    // 200 MiB: twenty-five blocks.
    two_inputs(dir.path(), (25 << 10, 25 << 10), 1024);
    let mut command = std::process::Command::new(crate::util::bin());
    command.current_dir(dir.path()).envs(azurite.env());
    command.args(["-a", "0", "a.npy", "b.npy", "-o", "az://out/big.npy"]);
    let mut child = command.spawn().unwrap();
    let start = Instant::now();
    // Until a block is staged: the blob is listed among the uncommitted ones.
    while azurite.blobs("out", true).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no block was sent"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "tjoin ended before its upload"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: a plain kill(2) of the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert_eq!(
        crate::util::killed_by(status),
        Some(libc::SIGTERM),
        "{status:?}"
    );
    let requests = azurite.requests();
    assert!(
        !requests.iter().any(|r| r.contains("comp=blocklist")),
        "a block list was committed: {requests:#?}"
    );
    assert!(azurite.blobs("out", false).is_empty());
    assert!(azurite.get("out", "big.npy").is_none());
    assert_eq!(azurite.blobs("out", true), ["big.npy"], "the staged blocks");
}

#[test]
fn the_account_is_named_by_the_standard_environment_and_never_printed() {
    let Some(azurite) = Azurite::start() else {
        return;
    };
    azurite.container("acct");
    let dir = tempfile::tempdir().unwrap();
    two_inputs(dir.path(), (2, 3), 4);
    let join = ["-a", "0", "a.npy", "b.npy", "-o"];
    // The account's name, key and endpoint instead of the emulator's switch.
    let account = |key: &str| {
        vec![
            ("AZURE_STORAGE_ACCOUNT_NAME", AZURE_ACCOUNT.to_string()),
            ("AZURE_STORAGE_ACCOUNT_KEY", key.to_string()),
            ("AZURE_STORAGE_ENDPOINT", azurite.endpoint()),
            ("AZURE_ALLOW_HTTP", "true".to_string()),
        ]
    };
    Azurite::tjoin_with(account(AZURE_KEY))
        .current_dir(dir.path())
        .args(join)
        .arg("az://acct/ab.npy")
        .assert()
        .success();
    let local = local_join(dir.path(), &join[..4]);
    assert_eq!(azurite.get("acct", "ab.npy").unwrap(), local);

    // A key the account does not have, and a SAS the server does not accept: refused,
    // neither printed.
    let wrong_key = "c2VjcmV0LWFjY291bnQta2V5LXRoYXQtbXVzdC1uZXZlci1zaG93";
    let mut sas = account(AZURE_KEY);
    sas.retain(|(name, _)| *name != "AZURE_STORAGE_ACCOUNT_KEY");
    sas.push((
        "AZURE_STORAGE_SAS_KEY",
        "sv=2021-08-06&ss=b&srt=sco&sp=rwl&se=2099-01-01T00:00:00Z&sig=s4sS1gnatureXYZ".into(),
    ));
    for (env, secret) in [(account(wrong_key), wrong_key), (sas, "s4sS1gnatureXYZ")] {
        // Written, and read.
        for (args, url) in [
            (
                ["-a", "0", "a.npy", "b.npy", "-o", "az://acct/out.npy"],
                "az://acct/out.npy",
            ),
            (
                ["-a", "0", "az://acct/ab.npy", "b.npy", "-o", "out.npy"],
                "az://acct/ab.npy",
            ),
        ] {
            let stderr = fails(&mut Azurite::tjoin_with(env.clone()), dir.path(), &args);
            assert!(!stderr.contains(secret), "{stderr}");
            crate::util::assert_mentions(&stderr, &[url, "did not accept the credentials"]);
        }
    }
    // A container that is not there, read or written.
    for args in [
        ["-a", "0", "az://nothere/x.npy", "b.npy", "-o", "out.npy"],
        ["-a", "0", "a.npy", "b.npy", "-o", "az://nothere/x.npy"],
    ] {
        let stderr = fails(&mut azurite.tjoin(), dir.path(), &args);
        crate::util::assert_mentions(&stderr, &["az://nothere/x.npy", "no such container"]);
    }
    // A SAS in a URL is refused, and redacted wherever the URL is echoed.
    for url in [
        "az://acct/x.npy?sv=2021-08-06&sig=s1gInURL",
        "https://acct.blob.core.windows.net/c/x.npy?sv=2021-08-06&sig=s1gInURL",
    ] {
        let args = ["-a", "0", url, "b.npy", "-o", "out.npy"];
        let stderr = fails(&mut azurite.tjoin(), dir.path(), &args);
        assert!(!stderr.contains("s1gInURL"), "{stderr}");
        crate::util::assert_mentions(&stderr, &["sig=REDACTED"]);
    }
    assert_eq!(
        azurite.blobs("acct", true),
        ["ab.npy"],
        "nothing else written"
    );
}

#[test]
fn an_environment_object_store_would_misread_is_refused_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    two_inputs(dir.path(), (2, 3), 4);
    let join = ["-a", "0", "a.npy", "b.npy", "-o", "az://acct/ab.npy"];
    let endpoint = "http://127.0.0.1:9/devstoreaccount1";
    let plain = vec![
        ("AZURE_STORAGE_ACCOUNT_NAME", AZURE_ACCOUNT.to_string()),
        ("AZURE_STORAGE_ACCOUNT_KEY", AZURE_KEY.to_string()),
        ("AZURE_STORAGE_ENDPOINT", endpoint.to_string()),
    ];
    let stderr = fails(&mut Azurite::tjoin_with(plain), dir.path(), &join);
    crate::util::assert_mentions(
        &stderr,
        &["az://acct/ab.npy", "plain-http", "AZURE_ALLOW_HTTP=true"],
    );
    let ignored = vec![
        ("AZURE_STORAGE_USE_EMULATOR", "true".to_string()),
        ("AZURE_STORAGE_ENDPOINT", endpoint.to_string()),
    ];
    let stderr = fails(&mut Azurite::tjoin_with(ignored), dir.path(), &join);
    crate::util::assert_mentions(
        &stderr,
        &["ignores AZURE_STORAGE_ENDPOINT", "AZURITE_BLOB_STORAGE_URL"],
    );
    let google = [("GOOGLE_BASE_URL", "http://127.0.0.1:9")];
    let mut command = crate::util::tjoin();
    command.env_remove("GOOGLE_ALLOW_HTTP").envs(google);
    let gs = ["-a", "0", "a.npy", "b.npy", "-o", "gs://b/ab.npy"];
    let stderr = fails(&mut command, dir.path(), &gs);
    crate::util::assert_mentions(
        &stderr,
        &["gs://b/ab.npy", "plain-http", "GOOGLE_ALLOW_HTTP=true"],
    );
    assert_eq!(dir.path().read_dir().unwrap().count(), 2, "nothing written");
}
