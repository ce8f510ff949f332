//! `--append` and `--recover`: files grown in place match numpy's concatenation byte for
//! byte; what cannot grow in place is refused and left untouched; a file longer than its
//! header says is refused until `--recover` cuts it back. Interrupts, crashes and the lock
//! are in `append_crashes.rs`.

use std::fs;
use std::path::{Path, PathBuf};

use crate::util::{
    assert_mentions, dir_entries, f32_le, npy_bytes, parse_npy, read_npy, refused, succeeds,
    succeeds_with_stdin, tjoin, write_npy,
};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/append")
}

/// Copies a fixture case into a fresh folder; returns it, the arguments and the inputs after
/// the target (`in1.npy`, `in2.npy`, ... in order).
fn case(name: &str) -> (tempfile::TempDir, Vec<String>, Vec<String>) {
    let from = fixtures().join(name);
    let dir = tempfile::tempdir().unwrap();
    let mut inputs = Vec::new();
    for entry in fs::read_dir(&from).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        fs::copy(from.join(&name), dir.path().join(&name)).unwrap();
        if name.starts_with("in") {
            inputs.push(name);
        }
    }
    inputs.sort_by_key(|n| n[2..n.len() - 4].parse::<u32>().unwrap());
    let args = fs::read_to_string(from.join("args.txt")).unwrap();
    let args = args.lines().map(str::to_string).collect();
    (dir, args, inputs)
}

fn append_args<'a>(args: &'a [String], inputs: &'a [String]) -> Vec<&'a str> {
    let mut all = vec!["--append"];
    all.extend(args.iter().map(String::as_str));
    all.push("target.npy");
    all.extend(inputs.iter().map(String::as_str));
    all
}

/// Every case numpy wrote an expected file for: the grown target is that file, byte for
/// byte (numpy's concatenation in the target's layout, byte order and header version), and
/// nothing is left beside it.
#[test]
fn appends_give_numpys_concatenation_byte_for_byte() {
    let mut cases = 0;
    for entry in fs::read_dir(fixtures()).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if !fixtures().join(&name).join("expected.npy").exists() {
            continue;
        }
        let (dir, args, inputs) = case(&name);
        let before = dir_entries(dir.path());
        succeeds(dir.path(), &append_args(&args, &inputs));
        let grown = fs::read(dir.path().join("target.npy")).unwrap();
        let expected = fs::read(dir.path().join("expected.npy")).unwrap();
        assert!(
            grown == expected,
            "{name}: {}",
            crate::util::describe_difference(&expected, &grown)
        );
        assert_eq!(dir_entries(dir.path()), before, "{name}: a file was left");
        cases += 1;
    }
    assert!(cases >= 8, "only {cases} cases");
}

/// Appending twice is appending once with both: the header keeps room after a first append.
#[test]
fn a_grown_file_grows_again() {
    let (dir, args, inputs) = case("c_axis0");
    for input in &inputs {
        succeeds(dir.path(), &append_args(&args, std::slice::from_ref(input)));
    }
    let grown = fs::read(dir.path().join("target.npy")).unwrap();
    assert_eq!(grown, fs::read(dir.path().join("expected.npy")).unwrap());
}

#[test]
fn a_dry_run_says_where_the_bytes_would_go_and_writes_nothing() {
    let (dir, args, inputs) = case("c_axis0");
    let before = fs::read(dir.path().join("target.npy")).unwrap();
    let mut dry = append_args(&args, &inputs);
    dry.push("--dry-run");
    let text = String::from_utf8(succeeds(dir.path(), &dry)).unwrap();
    assert_mentions(
        &text,
        &[
            "output: target.npy  npy  float32  [6, 4]  96 bytes",
            "append: in place, 48 bytes written at byte 176 of target.npy",
        ],
    );
    *dry.last_mut().unwrap() = "--dry-run=json";
    let plan: serde_json::Value = serde_json::from_slice(&succeeds(dir.path(), &dry)).unwrap();
    assert_eq!(plan["output"]["path"], "target.npy");
    assert_eq!(plan["output"]["append"]["offset"], 176);
    assert_eq!(plan["output"]["append"]["bytes"], 48);
    assert_eq!(plan["tensors"][0]["shape"], serde_json::json!([6, 4]));
    assert_eq!(fs::read(dir.path().join("target.npy")).unwrap(), before);
}

/// Runs `tjoin --recover file` in `dir`, which must succeed; returns what it said.
#[track_caller]
pub fn recovers(dir: &Path, file: &str) -> String {
    let output = tjoin()
        .current_dir(dir)
        .args(["--recover", file])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    stderr
}

/// Writes a .npy file of zeros named `name` in `dir`.
pub fn zeros(dir: &Path, name: &str, descr: &str, shape: &[u64], fortran: bool) {
    let itemsize: u64 = descr[2..].parse().unwrap();
    let len = shape.iter().product::<u64>() * itemsize;
    write_npy(
        &dir.join(name),
        descr,
        shape,
        fortran,
        &vec![0; len as usize],
    );
}

/// Refuses with `code`, and leaves the target as it was.
#[track_caller]
pub fn refused_untouched(dir: &Path, args: &[&str], code: i32, mentions: &[&str]) {
    let before = fs::read(dir.join("target.npy")).unwrap();
    let stderr = refused(dir, args, code);
    assert_mentions(&stderr, mentions);
    assert_eq!(
        fs::read(dir.join("target.npy")).unwrap(),
        before,
        "{args:?}"
    );
}

#[test]
fn appends_along_another_axis_are_refused_with_the_rewrite_as_the_hint() {
    let dir = tempfile::tempdir().unwrap();
    zeros(dir.path(), "target.npy", "<f4", &[2, 3], false);
    zeros(dir.path(), "col.npy", "<f4", &[2, 1], false);
    refused_untouched(
        dir.path(),
        &["--append", "-a", "1", "target.npy", "col.npy"],
        2,
        &[
            "cannot append along axis 1 in place",
            "input 1 (target.npy) is stored in C order, so only axis 0 grows",
            "hint: append along axis 0, or rewrite it with a normal join: tjoin -a 1 target.npy",
        ],
    );
    // Fortran order grows along the last axis only.
    zeros(dir.path(), "target.npy", "<f4", &[2, 3], true);
    zeros(dir.path(), "row.npy", "<f4", &[1, 3], true);
    refused_untouched(
        dir.path(),
        &["--append", "-a", "0", "target.npy", "row.npy"],
        2,
        &["stored in Fortran order, so only axis 1 grows"],
    );
}

#[test]
fn element_types_are_checked_and_cast_only_to_the_files_own() {
    let dir = tempfile::tempdir().unwrap();
    zeros(dir.path(), "target.npy", "<f8", &[2, 2], false);
    zeros(dir.path(), "ints.npy", "<i2", &[1, 2], false);
    refused_untouched(
        dir.path(),
        &["--append", "-a", "0", "target.npy", "ints.npy"],
        2,
        &[
            "cannot append to input 1 (target.npy), which holds float64",
            "hint: add --cast float64",
        ],
    );
    refused_untouched(
        dir.path(),
        &[
            "--append",
            "-a",
            "0",
            "--cast",
            "float32",
            "target.npy",
            "ints.npy",
        ],
        2,
        &[
            "--cast float32: input 1 (target.npy) holds float64",
            "hint: --cast float64 converts the new inputs to the file's own type",
        ],
    );
    succeeds(
        dir.path(),
        &[
            "--append",
            "-a",
            "0",
            "--cast",
            "float64",
            "target.npy",
            "ints.npy",
        ],
    );
}

#[test]
fn a_header_without_room_for_the_new_shape_is_refused() {
    let (dir, args, inputs) = case("no_room");
    refused_untouched(
        dir.path(),
        &append_args(&args, &inputs),
        2,
        &[
            "cannot append to input 1 (target.npy) in place: its 128-byte header has no room",
            "hint: rewrite it once with a normal join",
        ],
    );
    // The rewrite the hint names leaves the room, and the append then works.
    succeeds(dir.path(), &["-a", "0", "target.npy", "-o", "target.npy"]);
    succeeds(dir.path(), &append_args(&args, &inputs));
    let grown = parse_npy(&fs::read(dir.path().join("target.npy")).unwrap()).unwrap();
    assert_eq!(grown.shape[0], 100);
}

#[test]
fn only_npy_files_grow_in_place_and_only_without_an_output() {
    let dir = tempfile::tempdir().unwrap();
    let containers = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/containers");
    fs::copy(containers.join("npz/day0.npz"), dir.path().join("day.npz")).unwrap();
    fs::copy(
        containers.join("tp/tp0.safetensors"),
        dir.path().join("tp.safetensors"),
    )
    .unwrap();
    zeros(dir.path(), "target.npy", "<f4", &[2, 2], false);
    for (target, why) in [
        (
            "day.npz",
            "an .npz archive lists its members in a directory",
        ),
        (
            "tp.safetensors",
            "a .safetensors header lists every tensor's byte offsets",
        ),
    ] {
        let before = fs::read(dir.path().join(target)).unwrap();
        let stderr = refused(dir.path(), &["--append", "-a", "0", target, target], 2);
        assert_mentions(&stderr, &["only .npy files grow in place", why, "-o"]);
        assert_eq!(fs::read(dir.path().join(target)).unwrap(), before);
    }
    refused_untouched(
        dir.path(),
        &[
            "--append",
            "-a",
            "0",
            "target.npy",
            "target.npy",
            "-o",
            "x.npy",
        ],
        2,
        &["--append grows its first input in place and writes no other file"],
    );
    refused_untouched(
        dir.path(),
        &["--append", "-a", "0", "target.npy"],
        2,
        &["--append has nothing to append"],
    );
    refused_untouched(
        dir.path(),
        &["--append", "-a", "0", "target.npy", "target.npy"],
        2,
        &["input 2 (target.npy) is the file being appended to"],
    );
}

/// The numpy file of `fixtures/bad/` with 8 bytes after its data: what a crashed append
/// leaves. tjoin's readers refuse it with a hint to `--recover`, which cuts the 8 bytes off
/// and says so; a second `--recover` finds nothing to do.
#[test]
fn a_file_longer_than_its_header_says_is_refused_until_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let bad = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/bad/extra_bytes.npy");
    fs::copy(&bad, dir.path().join("x.npy")).unwrap();
    let stderr = refused(dir.path(), &["-a", "0", "x.npy", "--dry-run"], 1);
    assert_mentions(
        &stderr,
        &[
            "input 1 (x.npy) holds 8 bytes after the end of the data its .npy header declares",
            "shape [2, 2]",
            "hint: an append to it was interrupted",
            "`tjoin --recover x.npy`",
        ],
    );
    assert_mentions(
        &recovers(dir.path(), "x.npy"),
        &["recovered x.npy: removed 8 bytes", "float32 [2, 2]"],
    );
    let original = fs::read(&bad).unwrap();
    let recovered = fs::read(dir.path().join("x.npy")).unwrap();
    assert_eq!(recovered, original[..original.len() - 8]);
    succeeds(dir.path(), &["-a", "0", "x.npy", "--dry-run"]);
    assert_mentions(
        &recovers(dir.path(), "x.npy"),
        &["x.npy needs no recovery: it ends where its header says"],
    );
    assert_eq!(fs::read(dir.path().join("x.npy")).unwrap(), recovered);
}

/// The join's other rules hold for an append too, checked on the grown file: `--spec` and
/// `--expect-shape`.
#[test]
fn spec_profiles_and_expected_shapes_apply_to_the_grown_file() {
    let dir = tempfile::tempdir().unwrap();
    zeros(dir.path(), "target.npy", "<f4", &[2, 3], false);
    zeros(dir.path(), "new.npy", "<f4", &[1, 3], false);
    let append = ["--append", "-a", "0", "target.npy", "new.npy"];
    let with = |extra: &[&'static str]| [&append[..], extra].concat();
    refused_untouched(
        dir.path(),
        &with(&["--spec", "directml:3.0"]),
        2,
        &["DirectML Join at feature level 3.0 supports 4 to 5 dimensions"],
    );
    refused_untouched(
        dir.path(),
        &with(&["--expect-shape", "4,3"]),
        2,
        &["the output would have shape [3, 3], not the expected [4, 3]"],
    );
    succeeds(
        dir.path(),
        &with(&["--spec", "onnx", "--expect-shape", "3,3"]),
    );
    let grown = parse_npy(&fs::read(dir.path().join("target.npy")).unwrap()).unwrap();
    assert_eq!(grown.shape, [3, 3]);
}

/// What is appended may come in any form a join reads: standard input, JSON text.
#[test]
fn any_input_a_join_reads_can_be_appended() {
    let dir = tempfile::tempdir().unwrap();
    write_npy(
        &dir.path().join("target.npy"),
        "<i8",
        &[1, 2],
        false,
        &[1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0],
    );
    fs::write(dir.path().join("rows.json"), "[[5, 6], [7, 8]]").unwrap();
    let piped = npy_bytes(
        "<i8",
        &[1, 2],
        false,
        &[3, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0],
    );
    let args = ["--append", "-a", "0", "target.npy", "-", "rows.json"];
    succeeds_with_stdin(dir.path(), &args, &piped);
    let grown = parse_npy(&fs::read(dir.path().join("target.npy")).unwrap()).unwrap();
    assert_eq!(grown.shape, [4, 2]);
    let values: Vec<i64> = grown
        .data
        .chunks(8)
        .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(values, [1, 2, 3, 4, 5, 6, 7, 8]);
}

/// An append killed right after it created its journal leaves it empty, or cut short part
/// way through a line: the next append refuses and points at `--recover`, which removes it
/// (saying so) when the file ends where its header says, and leaves both alone otherwise.
#[test]
fn a_journal_cut_short_before_the_file_changed_is_removed_by_recover() {
    const JOURNAL: &str = ".target.npy.tjoin-journal";
    for left in [
        "",
        "tjoin append jour",
        "tjoin append journal 1\ndevice: 20",
        "tjoin append journal 1\ndevice: 2049\ninode: 1\nold length: 1152\nnew length: 1168\nold header: 934e",
    ] {
        let dir = tempfile::tempdir().unwrap();
        zeros(dir.path(), "target.npy", "<f4", &[2, 2], false);
        zeros(dir.path(), "new.npy", "<f4", &[1, 2], false);
        fs::write(dir.path().join(JOURNAL), left).unwrap();
        refused_untouched(
            dir.path(),
            &["--append", "-a", "0", "target.npy", "new.npy"],
            1,
            &["its journal", "run `tjoin --recover target.npy` first"],
        );
        let before = fs::read(dir.path().join("target.npy")).unwrap();
        assert_mentions(
            &recovers(dir.path(), "target.npy"),
            &[
                "recovered target.npy: removed the journal ./.target.npy.tjoin-journal, cut short",
                "float32 [2, 2]",
            ],
        );
        assert_eq!(fs::read(dir.path().join("target.npy")).unwrap(), before);
        assert_eq!(
            dir_entries(dir.path()),
            ["new.npy", "target.npy"],
            "{left:?}"
        );
        succeeds(
            dir.path(),
            &["--append", "-a", "0", "target.npy", "new.npy"],
        );
    }
    // The file no longer ends where its header says: not what a kill before any write leaves.
    let dir = tempfile::tempdir().unwrap();
    zeros(dir.path(), "target.npy", "<f4", &[2, 2], false);
    let mut longer = fs::read(dir.path().join("target.npy")).unwrap();
    longer.extend_from_slice(&[9; 8]);
    fs::write(dir.path().join("target.npy"), &longer).unwrap();
    fs::write(dir.path().join(JOURNAL), "").unwrap();
    refused_untouched(
        dir.path(),
        &["--recover", "target.npy"],
        1,
        &[
            "it was cut short while it was written",
            "that file is 152 bytes long, where its header declares 144",
            "nothing was changed",
        ],
    );
    assert!(dir.path().join(JOURNAL).exists());
}

/// The dtype refusal of an append gives the one fix the append accepts: `--cast` to the
/// file's own type (the join's refusal suggested the promoted type, which the append then
/// refused with a second message).
#[test]
fn an_append_of_another_type_is_refused_with_the_cast_the_append_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_npy(&d.join("t.npy"), "<f4", &[2, 3], false, &f32_le(&[0.0; 6]));
    let ones: Vec<u8> = [1.0f64; 3].iter().flat_map(|v| v.to_le_bytes()).collect();
    write_npy(&d.join("n.npy"), "<f8", &[1, 3], false, &ones);
    let before = fs::read(d.join("t.npy")).unwrap();
    let stderr = refused(d, &["--append", "-a", "0", "t.npy", "n.npy"], 2);
    assert_mentions(
        &stderr,
        &[
            "cannot append to input 1 (t.npy), which holds float32",
            "input 2 (n.npy)  float64",
            "hint: add --cast float32",
        ],
    );
    assert!(!stderr.contains("--cast float64"), "{stderr}");
    assert_eq!(fs::read(d.join("t.npy")).unwrap(), before);
    // The fix the hint gives is accepted.
    succeeds(
        d,
        &["--append", "-a", "0", "t.npy", "n.npy", "--cast", "float32"],
    );
    let grown = read_npy(&d.join("t.npy"));
    assert_eq!(grown.shape, [3, 3]);
    assert!(grown.data[24..] == f32_le(&[1.0; 3]));
}
