//! Inputs in Azure Blob Storage (`az://`) and Google Cloud Storage (`gs://`), read from real
//! servers of those APIs on 127.0.0.1 (`emulators.rs`: Azurite, fake-gcs-server) through
//! the standard environment README.md gives: the same output as the same join of local
//! copies, for single objects and a sharded set by its prefix and its index; an object
//! replaced while it is read is refused, never read half old, half new.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::emulators::{Azurite, FakeGcs, Store};
use crate::util::{f32_le, write_npy};

fn fixture(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(path)
}

/// Runs tjoin with `args` in `dir` and returns what it wrote to `out`.
fn joined(store: &dyn Store, dir: &Path, args: &[&str], out: &str) -> Vec<u8> {
    store
        .run()
        .current_dir(dir)
        .args(args)
        .args(["-o", out])
        .assert()
        .success();
    std::fs::read(dir.join(out)).unwrap()
}

/// Two objects joined on either axis, and a sharded set by its prefix and its index, give
/// the bytes of the same joins of local copies (moto's too: `remote_inputs.rs`).
pub fn inputs_give_the_output_of_their_local_copies(store: &dyn Store) {
    store.make_bucket("inputs");
    let dir = tempfile::tempdir().unwrap();
    let values =
        |n: usize, from: usize| f32_le(&(from..from + n).map(|v| v as f32).collect::<Vec<_>>());
    // 12 MB: a download of two pieces after its first read.
    write_npy(
        &dir.path().join("a.npy"),
        "<f4",
        &[3000, 1000],
        false,
        &values(3_000_000, 0),
    );
    write_npy(
        &dir.path().join("b.npy"),
        "<f4",
        &[2, 1000],
        false,
        &values(2000, 7),
    );
    for name in ["a.npy", "b.npy"] {
        let bytes = std::fs::read(dir.path().join(name)).unwrap();
        store.put_object("inputs", &format!("npy/{name}"), &bytes);
    }
    let scheme = store.scheme();
    let (a, b) = (
        format!("{scheme}://inputs/npy/a.npy"),
        format!("{scheme}://inputs/npy/b.npy"),
    );
    for (axis, other, remote_other) in [("0", "b.npy", &b), ("-1", "a.npy", &a)] {
        let local = joined(
            store,
            dir.path(),
            &["-a", axis, "a.npy", other],
            "local.npy",
        );
        let remote = joined(
            store,
            dir.path(),
            &["-a", axis, &a, remote_other],
            "remote.npy",
        );
        assert!(
            local == remote,
            "{scheme}, axis {axis}: {}",
            crate::util::describe_difference(&local, &remote)
        );
    }
    assert!(store.gets("inputs", "npy/a.npy") >= 3, "ranged reads of a");

    let folder = fixture("sharded/model");
    for entry in std::fs::read_dir(&folder).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        let bytes = std::fs::read(entry.path()).unwrap();
        store.put_object("inputs", &format!("model/{name}"), &bytes);
    }
    let merged = std::fs::read(fixture("sharded/expected/model.safetensors")).unwrap();
    for input in ["model/", "model", "model/model.safetensors.index.json"] {
        let input = format!("{scheme}://inputs/{input}");
        let got = joined(store, dir.path(), &[&input], "merged.safetensors");
        assert!(
            got == merged,
            "{input} differs from the merge of the local set"
        );
    }
}

/// An object replaced by another of the same length while tjoin reads it: the run is
/// refused by the object's URL, or gives one version whole (the old one, when the
/// replacement landed after the last read); never a mix of the two.
///
/// The replacement lands once the third GET of the object has begun: by then a first read
/// (unpinned: it is what defines the version) has been answered, and the pinned pieces are
/// under way. Earlier, it could race a first read, which Azurite answers non-atomically: a
/// GET that races a Put Block List may carry the new ETag over the old bytes (6 of 717 such
/// reads did, Azurite 3.35.0), which no version check can see and which Azure itself never
/// does (a GET is one version).
fn an_object_replaced_while_it_is_read_is_refused(store: &dyn Store) {
    store.make_bucket("inputs");
    let dir = tempfile::tempdir().unwrap();
    // 80 MB: ten pieces after the first read, four at a time.
    let count = 20_000_000u32;
    let version = |offset: f32| -> Vec<u8> {
        let values: Vec<f32> = (0..count).map(|v| v as f32 + offset).collect();
        crate::util::npy_bytes("<f4", &[u64::from(count)], false, &f32_le(&values))
    };
    let (old, new) = (version(0.0), version(0.5));
    assert_eq!(old.len(), new.len());
    let url = format!("{}://inputs/x.npy", store.scheme());
    let mut refused = 0;
    for _ in 0..3 {
        store.put_object("inputs", "x.npy", &old);
        let replace = store.replacement("inputs", "x.npy", new.clone());
        let before = store.gets("inputs", "x.npy");
        let _ = std::fs::remove_file(dir.path().join("out.npy"));
        let mut command = std::process::Command::new(crate::util::bin());
        command
            .current_dir(dir.path())
            .envs(store.environment())
            .stderr(std::process::Stdio::piped());
        command.args(["-a", "0", &url, "-o", "out.npy"]);
        let child = command.spawn().unwrap();
        let start = Instant::now();
        while store.gets("inputs", "x.npy") < before + 3 {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "tjoin sent no GET of {url}"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        replace();
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        if output.status.success() {
            let got = std::fs::read(dir.path().join("out.npy")).unwrap();
            assert!(
                got == old || got == new,
                "an output that is neither one version nor refused: {}",
                crate::util::describe_difference(&old, &got)
            );
        } else {
            assert_eq!(output.status.code(), Some(1), "{stderr}");
            crate::util::assert_mentions(&stderr, &[&url, "changed"]);
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

#[test]
fn az_inputs_give_the_output_of_their_local_copies() {
    let Some(azurite) = Azurite::start() else {
        return;
    };
    inputs_give_the_output_of_their_local_copies(&azurite);
}

#[test]
fn gs_inputs_give_the_output_of_their_local_copies() {
    let Some(gcs) = FakeGcs::start() else { return };
    inputs_give_the_output_of_their_local_copies(&gcs);
}

#[test]
fn an_az_object_replaced_while_it_is_read_is_refused() {
    let Some(azurite) = Azurite::start() else {
        return;
    };
    an_object_replaced_while_it_is_read_is_refused(&azurite);
}

/// fake-gcs-server ignores `If-Match`: the ETag each answer carries is what tells.
#[test]
fn a_gs_object_replaced_while_it_is_read_is_refused() {
    let Some(gcs) = FakeGcs::start() else { return };
    an_object_replaced_while_it_is_read_is_refused(&gcs);
}
