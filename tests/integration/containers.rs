//! Multi-tensor files: safetensors and .npz shards joined tensor by tensor, one tensor picked
//! with FILE:NAME, every refusal, and damaged safetensors headers built from byte literals.
//! Inputs are written with the safetensors crate (an implementation independent of tjoin's)
//! and outputs read back with it.

use std::collections::HashMap;
use std::fs;

use safetensors::tensor::{Dtype, SafeTensors, TensorView};

use crate::util::{
    assert_mentions, dir_entries, f32_le, read_npy, refused, succeeds, tjoin, write_npy,
};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/containers");

/// A tensor for the crate's writer: name, dtype, shape, data.
type Spec = (&'static str, Dtype, Vec<usize>, Vec<u8>);

/// A safetensors file as the crate writes it.
fn st_bytes(tensors: &[Spec], metadata: Option<&[(&str, &str)]>) -> Vec<u8> {
    let views: Vec<(&str, TensorView)> = tensors
        .iter()
        .map(|(name, dtype, shape, data)| {
            (*name, TensorView::new(*dtype, shape.clone(), data).unwrap())
        })
        .collect();
    let metadata = metadata.map(|pairs| {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<HashMap<String, String>>()
    });
    safetensors::serialize(views, metadata).unwrap()
}

/// A safetensors file from a literal header and data, right or wrong.
fn raw_st(header: &str, data: &[u8]) -> Vec<u8> {
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

/// `n` bytes counting up from `seed`.
fn bytes(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed))
        .collect()
}

fn args_of(case: &str) -> Vec<String> {
    fs::read_to_string(format!("{FIXTURES}/{case}/args.txt"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn tensor_parallel_shards_join_into_what_save_file_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("model.safetensors");
    let mut args = args_of("tp");
    // The reference proves the merge complete (issue 41: a merge missing a rank splits
    // evenly too).
    args.extend([
        "--like".to_string(),
        format!("{FIXTURES}/tp/expected.safetensors"),
    ]);
    for shard in ["tp0", "tp1"] {
        args.push(format!("{FIXTURES}/tp/{shard}.safetensors"));
    }
    args.extend(["-o".to_string(), out.display().to_string()]);
    tjoin().args(&args).assert().success();
    let written = fs::read(&out).unwrap();
    let expected = fs::read(format!("{FIXTURES}/tp/expected.safetensors")).unwrap();
    let (got, want) = (
        SafeTensors::deserialize(&written).unwrap(),
        SafeTensors::deserialize(&expected).unwrap(),
    );
    for (name, tensor) in want.tensors() {
        let joined = got.tensor(&name).unwrap();
        assert_eq!(joined.dtype(), tensor.dtype(), "{name}");
        assert_eq!(joined.shape(), tensor.shape(), "{name}");
        assert_eq!(joined.data(), tensor.data(), "{name}");
    }
    assert_eq!(got.len(), want.len());
    let (_, metadata) = SafeTensors::read_metadata(&written).unwrap();
    assert_eq!(metadata.metadata().as_ref().unwrap()["format"], "pt");
    assert!(written == expected, "not byte-identical to save_file's");
}

#[test]
fn npz_shards_join_member_by_member_stored_and_deflated() {
    let dir = tempfile::tempdir().unwrap();
    let days: Vec<String> = (0..3)
        .map(|i| format!("{FIXTURES}/npz/day{i}.npz"))
        .collect();
    for (out, extra) in [("all.npz", None), ("packed.npz", Some("--compress"))] {
        let mut args: Vec<&str> = vec!["-a", "0"];
        args.extend(extra);
        args.extend(days.iter().map(String::as_str));
        args.extend(["-o", out]);
        succeeds(dir.path(), &args);
        // tjoin's reader checks each deflated member's CRC-32 and size on the way.
        for name in ["x", "y", "z"] {
            let member = format!("{out}:{name}");
            let npy = format!("{name}.npy");
            succeeds(dir.path(), &["-a", "0", &member, "-o", &npy]);
            let expected = fs::read(format!("{FIXTURES}/npz/expected_{name}.npy")).unwrap();
            assert!(
                fs::read(dir.path().join(&npy)).unwrap() == expected,
                "{member} differs from expected_{name}.npy"
            );
        }
    }
    let stored = fs::metadata(dir.path().join("all.npz")).unwrap().len();
    let packed = fs::metadata(dir.path().join("packed.npz")).unwrap().len();
    assert!(packed < stored, "--compress did not compress");
}

/// Splits C-order `data` of `shape` (elements of `bits` bits) along `axis` into parts of
/// the given sizes there.
fn split(data: &[u8], shape: &[usize], bits: usize, axis: usize, sizes: &[usize]) -> Vec<Vec<u8>> {
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..].iter().product();
    let mut parts = vec![Vec::new(); sizes.len()];
    let mut at = 0;
    for _ in 0..outer {
        for (part, size) in parts.iter_mut().zip(sizes) {
            let len = size * inner * bits / 8;
            part.extend_from_slice(&data[at..at + len]);
            at += len;
        }
    }
    assert_eq!(at, data.len());
    parts
}

/// A tensor of the model to split: name, dtype, bits per element, shape, and the axis to split
/// it along (`None`: replicated in every shard).
type Piece = (&'static str, Dtype, usize, Vec<usize>, Option<usize>);

#[test]
fn split_then_join_gives_back_the_original_bit_for_bit() {
    let model: [Piece; 8] = [
        ("embed", Dtype::F32, 32, vec![6, 4], Some(0)),
        ("attn.o_proj", Dtype::BF16, 16, vec![4, 6], Some(1)),
        ("mlp.up", Dtype::F8_E4M3, 8, vec![3, 6, 2], Some(1)),
        ("mlp.down", Dtype::F16, 16, vec![3, 6], Some(1)),
        ("experts.packed", Dtype::F4, 4, vec![4, 12], Some(1)),
        ("scales", Dtype::F8_E8M0, 8, vec![6], Some(0)),
        ("norm", Dtype::U8, 8, vec![5], None),
        ("step", Dtype::I64, 64, vec![], None),
    ];
    let originals: Vec<Spec> = model
        .iter()
        .enumerate()
        .map(|(i, (name, dtype, bits, shape, _))| {
            let count: usize = shape.iter().product();
            (
                *name,
                *dtype,
                shape.clone(),
                bytes(count * bits / 8, i as u8),
            )
        })
        .collect();
    let metadata = [("format", "pt")];
    let original = st_bytes(&originals, Some(&metadata));
    let shards = 3;
    let mut pieces: Vec<Vec<Spec>> = vec![Vec::new(); shards];
    for ((name, dtype, bits, shape, axis), (_, _, _, data)) in model.iter().zip(&originals) {
        let Some(axis) = axis else {
            for piece in &mut pieces {
                piece.push((*name, *dtype, shape.clone(), data.clone()));
            }
            continue;
        };
        let size = shape[*axis] / shards;
        let sizes = vec![size; shards];
        for (piece, part) in pieces
            .iter_mut()
            .zip(split(data, shape, *bits, *axis, &sizes))
        {
            let mut part_shape = shape.clone();
            part_shape[*axis] = size;
            piece.push((*name, *dtype, part_shape, part));
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let mut args: Vec<String> = [
        "-a",
        "0",
        "--axis-for",
        "*.o_proj=1",
        "--axis-for",
        "mlp.*=1",
    ]
    .map(String::from)
    .to_vec();
    args.extend(
        [
            "--axis-for",
            "experts.*=-1",
            "--keep",
            "norm",
            "--keep",
            "step",
        ]
        .map(String::from),
    );
    for (i, piece) in pieces.iter().enumerate() {
        let name = format!("shard{i}.safetensors");
        let meta = (i == 0).then_some(&metadata[..]);
        fs::write(dir.path().join(&name), st_bytes(piece, meta)).unwrap();
        args.push(name);
    }
    args.extend(["-o", "joined.safetensors"].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    succeeds(dir.path(), &args);
    let written = fs::read(dir.path().join("joined.safetensors")).unwrap();
    assert!(
        written == original,
        "the joined file differs from the original"
    );
}

#[test]
fn one_tensor_is_picked_with_file_colon_name_and_mixes_with_npy() {
    let dir = tempfile::tempdir().unwrap();
    let model = st_bytes(
        &[
            (
                "embed.weight",
                Dtype::F32,
                vec![2, 3],
                f32_le(&[0., 1., 2., 3., 4., 5.]),
            ),
            ("other", Dtype::F32, vec![1], f32_le(&[9.])),
        ],
        None,
    );
    fs::write(dir.path().join("model.safetensors"), model).unwrap();
    write_npy(
        &dir.path().join("extra.npy"),
        "<f4",
        &[1, 3],
        false,
        &f32_le(&[6., 7., 8.]),
    );
    succeeds(
        dir.path(),
        &[
            "-a",
            "0",
            "model.safetensors:embed.weight",
            "extra.npy",
            "-o",
            "emb.npy",
        ],
    );
    let out = read_npy(&dir.path().join("emb.npy"));
    assert_eq!(out.shape, [3, 3]);
    assert_eq!(out.data, f32_le(&[0., 1., 2., 3., 4., 5., 6., 7., 8.]));
    // The joined tensor keeps the first name it has, in a safetensors output too.
    succeeds(
        dir.path(),
        &[
            "-a",
            "0",
            "extra.npy",
            "model.safetensors:embed.weight",
            "-o",
            "emb.safetensors",
        ],
    );
    let written = fs::read(dir.path().join("emb.safetensors")).unwrap();
    let st = SafeTensors::deserialize(&written).unwrap();
    assert_eq!(st.tensor("embed.weight").unwrap().shape(), [3, 3]);
}

#[test]
fn a_file_of_one_tensor_needs_no_name_and_name_renames() {
    let dir = tempfile::tempdir().unwrap();
    let one = st_bytes(&[("w", Dtype::I16, vec![2], bytes(4, 1))], None);
    fs::write(dir.path().join("one.safetensors"), one).unwrap();
    write_npy(
        &dir.path().join("two.npy"),
        "<i2",
        &[1],
        false,
        &bytes(2, 9),
    );
    succeeds(
        dir.path(),
        &[
            "-a",
            "0",
            "one.safetensors",
            "two.npy",
            "--name",
            "v",
            "-o",
            "o.npz",
        ],
    );
    succeeds(dir.path(), &["-a", "0", "o.npz:v", "-o", "v.npy"]);
    let v = read_npy(&dir.path().join("v.npy"));
    assert_eq!(v.shape, [3]);
    assert_eq!(v.descr, "<i2");
    let mut data = bytes(4, 1);
    data.extend(bytes(2, 9));
    assert_eq!(v.data, data);
}

#[test]
fn metadata_is_the_first_inputs_with_flags_added() {
    let dir = tempfile::tempdir().unwrap();
    let a = st_bytes(
        &[("t", Dtype::U8, vec![1], vec![1])],
        Some(&[("format", "pt"), ("a", "1")]),
    );
    let b = st_bytes(&[("t", Dtype::U8, vec![1], vec![2])], Some(&[("b", "2")]));
    fs::write(dir.path().join("a.safetensors"), a).unwrap();
    fs::write(dir.path().join("b.safetensors"), b).unwrap();
    succeeds(
        dir.path(),
        &[
            "-a",
            "0",
            "a.safetensors",
            "b.safetensors",
            "--metadata",
            "a=9",
            "--metadata",
            "new=x=y",
            "-o",
            "o.safetensors",
        ],
    );
    let written = fs::read(dir.path().join("o.safetensors")).unwrap();
    let (_, metadata) = SafeTensors::read_metadata(&written).unwrap();
    let metadata = metadata.metadata().clone().unwrap();
    let expected: HashMap<String, String> = [("format", "pt"), ("a", "9"), ("new", "x=y")]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .into();
    assert_eq!(metadata, expected);
}

#[test]
fn one_input_may_be_rewritten_in_place_in_every_container_format_but_not_joined_into() {
    let dir = tempfile::tempdir().unwrap();
    let a = st_bytes(&[("t", Dtype::U8, vec![2], vec![1, 2])], None);
    let b = st_bytes(&[("t", Dtype::U8, vec![1], vec![3])], None);
    fs::write(dir.path().join("a.safetensors"), &a).unwrap();
    fs::write(dir.path().join("b.safetensors"), b).unwrap();
    let args = [
        "-a",
        "0",
        "a.safetensors",
        "b.safetensors",
        "-o",
        "a.safetensors",
    ];
    refused(dir.path(), &args, 2);
    assert!(fs::read(dir.path().join("a.safetensors")).unwrap() == a);
    succeeds(
        dir.path(),
        &["a.safetensors", "--cast", "uint16", "-o", "a.safetensors"],
    );
    let written = fs::read(dir.path().join("a.safetensors")).unwrap();
    assert_eq!(
        SafeTensors::deserialize(&written)
            .unwrap()
            .tensor("t")
            .unwrap()
            .data(),
        [1, 0, 2, 0]
    );
    succeeds(dir.path(), &["-a", "0", "b.safetensors", "-o", "x.npz"]);
    succeeds(dir.path(), &["x.npz", "--cast", "int16", "-o", "x.npz"]);
    succeeds(dir.path(), &["-a", "0", "x.npz:t", "-o", "t.npy"]);
    assert_eq!(read_npy(&dir.path().join("t.npy")).data, [3, 0]);
    assert_eq!(
        dir_entries(dir.path()),
        ["a.safetensors", "b.safetensors", "t.npy", "x.npz"]
    );
}

// ---- refusals (exit 2 unless the file is damaged) ----

fn shards_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let a = st_bytes(
        &[
            ("w", Dtype::F32, vec![2, 2], f32_le(&[1., 2., 3., 4.])),
            ("norm", Dtype::F32, vec![2], f32_le(&[1., 1.])),
            ("only_a", Dtype::F32, vec![1], f32_le(&[0.])),
        ],
        None,
    );
    let b = st_bytes(
        &[
            (
                "w",
                Dtype::F32,
                vec![2, 3],
                f32_le(&[5., 6., 7., 8., 9., 10.]),
            ),
            ("norm", Dtype::F32, vec![2], f32_le(&[1., 2.])),
        ],
        None,
    );
    fs::write(dir.path().join("a.safetensors"), a).unwrap();
    fs::write(dir.path().join("b.safetensors"), b).unwrap();
    dir
}

#[test]
fn every_problem_of_a_whole_file_join_is_listed_at_once() {
    let dir = shards_dir();
    let stderr = refused(
        dir.path(),
        &[
            "-a",
            "0",
            "--keep",
            "norm",
            "a.safetensors",
            "b.safetensors",
            "-o",
            "o.safetensors",
        ],
        2,
    );
    assert_mentions(
        &stderr,
        &[
            "do not hold the same tensors",
            "input 2 (b.safetensors) lacks 1 of 3: only_a",
            "tensor `w`: cannot join along axis 0: the inputs differ in dimension 1",
            "b.safetensors:w",
            "tensor `norm` matches --keep but is not the same in every input",
            "input 2 (b.safetensors:norm): its data differs from byte 6 (element 1)",
        ],
    );
    assert_eq!(stderr.matches("tjoin: error: ").count(), 3, "{stderr}");
}

#[test]
fn an_unknown_name_lists_the_names_there_are_closest_first() {
    let dir = shards_dir();
    let stderr = refused(
        dir.path(),
        &["-a", "0", "a.safetensors:nrm", "-o", "o.npy"],
        2,
    );
    assert_mentions(
        &stderr,
        &[
            "has no tensor named `nrm`",
            "did you mean a.safetensors:norm?",
        ],
    );
    let norm = stderr.find("\n  norm").unwrap();
    let w = stderr.find("\n  w").unwrap();
    assert!(norm < w, "not closest first:\n{stderr}");
    let stderr = refused(dir.path(), &["-a", "0", "a.safetensors", "-o", "o.npy"], 2);
    assert_mentions(&stderr, &["holds 3 tensors", "a.safetensors:NAME"]);
}

#[test]
fn types_a_format_cannot_hold_are_refused_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let bf = st_bytes(&[("h", Dtype::BF16, vec![2], bytes(4, 0))], None);
    fs::write(dir.path().join("bf.safetensors"), bf).unwrap();
    let stderr = refused(dir.path(), &["-a", "0", "bf.safetensors", "-o", "o.npy"], 2);
    assert_mentions(&stderr, &["numpy has no bfloat16 type", ".safetensors"]);
    let stderr = refused(dir.path(), &["-a", "0", "bf.safetensors", "-o", "o.npz"], 2);
    assert_mentions(&stderr, &["numpy has no bfloat16"]);
    let f8 = st_bytes(&[("q", Dtype::F8_E5M2, vec![2], bytes(2, 0))], None);
    fs::write(dir.path().join("f8.safetensors"), f8).unwrap();
    let stderr = refused(dir.path(), &["-a", "0", "f8.safetensors", "-o", "o.npy"], 2);
    assert_mentions(&stderr, &["float8_e5m2"]);
    write_npy(&dir.path().join("u.npy"), "<U3", &[2], false, &bytes(24, 0));
    let stderr = refused(
        dir.path(),
        &["-a", "0", "u.npy", "--name", "u", "-o", "o.safetensors"],
        2,
    );
    assert_mentions(&stderr, &["U3, a type safetensors has no name for"]);
    write_npy(
        &dir.path().join("c.npy"),
        "<c16",
        &[1],
        false,
        &bytes(16, 0),
    );
    let stderr = refused(
        dir.path(),
        &["-a", "0", "c.npy", "--name", "c", "-o", "o.safetensors"],
        2,
    );
    assert_mentions(&stderr, &["complex128"]);
}

/// A tensor without a name of its own is `arr_0`, as `--name`'s help says, in a .safetensors
/// output as in an .npz.
#[test]
fn an_unnamed_tensor_is_arr_0_in_every_container() {
    let dir = tempfile::tempdir().unwrap();
    write_npy(&dir.path().join("a.npy"), "|u1", &[2], false, &[1, 2]);
    for out in ["o.safetensors", "o.npz"] {
        succeeds(dir.path(), &["-a", "0", "a.npy", "a.npy", "-o", out]);
        let plan = succeeds(
            dir.path(),
            &["--dry-run=json", "-a", "0", "a.npy", "-o", out],
        );
        let plan: serde_json::Value = serde_json::from_slice(&plan).unwrap();
        assert_eq!(plan["tensors"][0]["name"], "arr_0", "{plan}");
    }
    let written = fs::read(dir.path().join("o.safetensors")).unwrap();
    let read = SafeTensors::deserialize(&written).unwrap();
    assert_eq!(read.tensor("arr_0").unwrap().data(), [1, 2, 1, 2]);
}

#[test]
fn sub_byte_runs_must_fall_on_byte_boundaries() {
    let dir = tempfile::tempdir().unwrap();
    // Different data in each: identical tensors would be refused as replicated.
    for (name, seed) in [("a", 0), ("b", 9)] {
        let f4 = st_bytes(&[("p", Dtype::F4, vec![2, 3], bytes(3, seed))], None);
        fs::write(dir.path().join(format!("{name}.safetensors")), f4).unwrap();
    }
    let args = [
        "-a",
        "1",
        "a.safetensors",
        "b.safetensors",
        "-o",
        "o.safetensors",
    ];
    let stderr = refused(dir.path(), &args, 2);
    assert_mentions(
        &stderr,
        &[
            "cannot join float4_e2m1fn tensors along axis 1",
            "3 elements of 4 bits",
            "axis 0",
        ],
    );
    succeeds(
        dir.path(),
        &[
            "-a",
            "0",
            "a.safetensors",
            "b.safetensors",
            "-o",
            "o.safetensors",
        ],
    );
    let written = fs::read(dir.path().join("o.safetensors")).unwrap();
    let st = SafeTensors::deserialize(&written).unwrap();
    let p = st.tensor("p").unwrap();
    assert_eq!((p.dtype(), p.shape()), (Dtype::F4, &[4, 3][..]));
    assert_eq!(p.data(), [bytes(3, 0), bytes(3, 9)].concat());
}

#[test]
fn flags_for_another_format_or_mode_are_refused() {
    let dir = shards_dir();
    let stderr = refused(
        dir.path(),
        &["-a", "0", "a.safetensors:w", "--compress", "-o", "o.npy"],
        2,
    );
    assert_mentions(&stderr, &["--compress applies to .npz outputs only"]);
    let stderr = refused(
        dir.path(),
        &[
            "-a",
            "0",
            "a.safetensors:w",
            "--metadata",
            "k=v",
            "-o",
            "o.npz",
        ],
        2,
    );
    assert_mentions(
        &stderr,
        &["--metadata applies to .safetensors outputs only"],
    );
    let stderr = refused(
        dir.path(),
        &["-a", "0", "a.safetensors", "--name", "x", "-o", "o.npz"],
        2,
    );
    assert_mentions(
        &stderr,
        &["--name names the tensor of a single-tensor join"],
    );
    write_npy(
        &dir.path().join("x.npy"),
        "<f4",
        &[1],
        false,
        &f32_le(&[1.]),
    );
    let stderr = refused(dir.path(), &["-a", "0", "x.npy:t", "-o", "o.npy"], 2);
    assert_mentions(&stderr, &["is a .npy file, which holds one unnamed tensor"]);
    let stderr = refused(dir.path(), &["-a", "0", "a.safetensors", "-o", "o.zip"], 2);
    assert_mentions(&stderr, &[".npy, .npz or .safetensors"]);
}

#[test]
fn a_damaged_npz_member_is_caught_by_its_crc() {
    let dir = tempfile::tempdir().unwrap();
    let day1 = fs::read(format!("{FIXTURES}/npz/day1.npz")).unwrap();
    // Flip one bit in the recorded CRC-32 of the first member's central directory entry.
    let central = day1.windows(4).position(|w| w == b"PK\x01\x02").unwrap();
    let mut damaged = day1.clone();
    damaged[central + 16] ^= 1;
    fs::write(dir.path().join("day1.npz"), &damaged).unwrap();
    let stderr = refused(dir.path(), &["-a", "0", "day1.npz", "-o", "o.npz"], 1);
    assert_mentions(&stderr, &["day1.npz", "is not a valid .npz file", "CRC-32"]);
    fs::write(dir.path().join("day1.npz"), &day1[..day1.len() - 30]).unwrap();
    let stderr = refused(dir.path(), &["-a", "0", "day1.npz", "-o", "o.npz"], 1);
    assert_mentions(&stderr, &["is not a valid .npz file"]);
}

// ---- damaged safetensors headers: one test per kind, each a clean error ----

/// Writes `bytes` as `bad.safetensors`, runs a join of it, and checks the refusal; also
/// checks that the safetensors crate refuses the same bytes (tjoin is never more lenient).
#[track_caller]
fn damaged(bytes: &[u8], needles: &[&str]) {
    assert!(
        SafeTensors::deserialize(bytes).is_err(),
        "the safetensors crate accepts these bytes"
    );
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("bad.safetensors"), bytes).unwrap();
    let stderr = refused(
        dir.path(),
        &["-a", "0", "bad.safetensors", "-o", "o.safetensors"],
        1,
    );
    assert_mentions(
        &stderr,
        &["input 1 (bad.safetensors) is not a valid safetensors file"],
    );
    assert_mentions(&stderr, needles);
}

const F32X2: &str = r#""dtype":"F32","shape":[2]"#;

#[test]
fn damaged_truncated_before_the_length_field() {
    let bytes = b"\x10\x00\x00";
    damaged(bytes, &["3 bytes long", "truncated"]);
}

#[test]
fn damaged_truncated_inside_the_header() {
    let full = raw_st(
        &format!(r#"{{"a":{{{F32X2},"data_offsets":[0,8]}}}}"#),
        &[0; 8],
    );
    let bytes = &full[..20];
    damaged(bytes, &["header length field says", "truncated"]);
}

#[test]
fn damaged_truncated_data() {
    let full = raw_st(
        &format!(r#"{{"a":{{{F32X2},"data_offsets":[0,8]}}}}"#),
        &[0; 8],
    );
    let bytes = &full[..full.len() - 3];
    damaged(
        bytes,
        &["data ends 8 bytes after the header", "holds 5", "truncated"],
    );
}

#[test]
fn damaged_bad_json() {
    let bytes = raw_st(
        r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]"#,
        &[0; 8],
    );
    damaged(&bytes, &["header is not valid JSON"]);
    let bytes = raw_st("[1, 2]", &[]);
    damaged(&bytes, &["header is not valid JSON"]);
}

#[test]
fn damaged_header_not_utf8() {
    let mut bytes = raw_st(
        r#"{"\u00e9":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}"#,
        &[],
    );
    bytes[10] = 0xff;
    damaged(&bytes, &["not UTF-8"]);
}

#[test]
fn damaged_offsets_out_of_range() {
    let bytes = raw_st(
        &format!(r#"{{"a":{{{F32X2},"data_offsets":[0,8000000]}}}}"#),
        &[0; 8],
    );
    damaged(&bytes, &["tensor `a`", "needs 8 bytes", "[0, 8000000]"]);
    let bytes = raw_st(
        &format!(r#"{{"a":{{{F32X2},"data_offsets":[8,0]}}}}"#),
        &[0; 8],
    );
    damaged(&bytes, &["end before they begin"]);
}

#[test]
fn damaged_overlapping_tensors() {
    let header = format!(
        r#"{{"a":{{{F32X2},"data_offsets":[0,8]}},"b":{{{F32X2},"data_offsets":[4,12]}}}}"#
    );
    let bytes = raw_st(&header, &[0; 12]);
    damaged(&bytes, &["tensor `b`", "overlap tensor `a`"]);
}

#[test]
fn damaged_gap_between_tensors() {
    let header = format!(
        r#"{{"a":{{{F32X2},"data_offsets":[0,8]}},"b":{{{F32X2},"data_offsets":[12,20]}}}}"#
    );
    let bytes = raw_st(&header, &[0; 20]);
    damaged(
        &bytes,
        &["tensor `b`", "4 unused bytes", "right after tensor `a`"],
    );
}

#[test]
fn damaged_wrong_byte_count() {
    let bytes = raw_st(
        r#"{"a":{"dtype":"F16","shape":[3],"data_offsets":[0,8]}}"#,
        &[0; 8],
    );
    damaged(
        &bytes,
        &[
            "tensor `a` of shape [3] and dtype F16 needs 6 bytes",
            "hold 8",
        ],
    );
}

#[test]
fn damaged_absurd_header_length() {
    for len in [u64::MAX, 100_000_001] {
        let mut bytes = len.to_le_bytes().to_vec();
        bytes.extend_from_slice(b"{}");
        damaged(&bytes, &["more than the 100000000 safetensors allows"]);
    }
}

#[test]
fn damaged_duplicate_names() {
    let header = format!(
        r#"{{"a":{{{F32X2},"data_offsets":[0,8]}},"a":{{{F32X2},"data_offsets":[8,16]}}}}"#
    );
    // The crate keeps the last `a` and then finds the data incomplete; tjoin names the cause.
    let bytes = raw_st(&header, &[0; 16]);
    damaged(&bytes, &["names tensor `a` twice"]);
}

#[test]
fn damaged_unknown_dtype_and_overflowing_shape() {
    let bytes = raw_st(
        r#"{"a":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}}"#,
        &[0; 16],
    );
    damaged(
        &bytes,
        &["dtype \"F128\", which safetensors does not define"],
    );
    let header = r#"{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}}"#;
    let bytes = raw_st(header, &[0; 8]);
    damaged(&bytes, &["more bytes than any file can"]);
}

#[test]
fn stack_checks_every_tensor_of_container_inputs() {
    // The first tensors agree; the second ones differ: --stack must say so itself, not let
    // the join refuse them along the new axis with a hint that does not apply.
    let dir = tempfile::tempdir().unwrap();
    for (file, width) in [("x.safetensors", 3), ("y.safetensors", 4)] {
        let tensors: Vec<Spec> = vec![
            ("a", Dtype::F32, vec![2], f32_le(&[1.0, 2.0])),
            ("b", Dtype::F32, vec![width], f32_le(&vec![0.5; width])),
        ];
        fs::write(dir.path().join(file), st_bytes(&tensors, None)).unwrap();
    }
    let args = [
        "--stack",
        "-a",
        "0",
        "x.safetensors",
        "y.safetensors",
        "-o",
        "out.safetensors",
    ];
    assert_mentions(
        &refused(dir.path(), &args, 2),
        &[
            "--stack needs inputs of one shape",
            "input 1 (x.safetensors:b) is [3]",
            "input 2 (y.safetensors:b) is [4]",
        ],
    );
}

#[test]
fn an_input_holding_no_tensors_is_refused_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("empty.safetensors"), st_bytes(&[], None)).unwrap();
    write_npy(
        &dir.path().join("a.npy"),
        "<f4",
        &[2],
        false,
        &f32_le(&[1.0, 2.0]),
    );
    for stack in [&["--stack"][..], &[]] {
        let args = [
            stack,
            &["-a", "0", "empty.safetensors", "a.npy", "-o", "out.npy"],
        ]
        .concat();
        assert_mentions(
            &refused(dir.path(), &args, 2),
            &[
                "input 1 (empty.safetensors) holds no tensors",
                "hint: leave it out",
            ],
        );
    }
}
