//! Messages that scale: one bad shard among 2,000 is named on the first line of the refusal,
//! the list of inputs stays about ten rows long, and the hint is about the odd one out. For
//! element type, rank and shape mismatches, for the tensor names and shapes of a
//! whole-file join, and for an output shape that is not the one `--expect-shape` names.

use std::fs;
use std::path::Path;

use safetensors::tensor::{Dtype, TensorView};

use crate::util::{assert_mentions, refused, write_npy};

const SHARDS: usize = 2000;
/// The bad shard: input 1237.
const BAD: usize = 1236;

/// `SHARDS` .npy files `shard-00000.npy`, ... in a temp folder, each `good(i)` but shard
/// `BAD`, which is `bad`; and the list of their names for `--files-from`.
fn shards(
    good: impl Fn(usize) -> (&'static str, Vec<u64>),
    bad: (&str, &[u64]),
) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut list = String::new();
    for i in 0..SHARDS {
        let (descr, shape) = if i == BAD {
            (bad.0, bad.1.to_vec())
        } else {
            good(i)
        };
        let name = format!("shard-{i:05}.npy");
        let bytes = shape.iter().product::<u64>() as usize * descr[2..].parse::<usize>().unwrap();
        write_npy(
            &dir.path().join(&name),
            descr,
            &shape,
            false,
            &vec![0; bytes],
        );
        list.push_str(&name);
        list.push('\n');
    }
    fs::write(dir.path().join("list.txt"), list).unwrap();
    dir
}

/// Refuses the join of the shards along axis 0 and checks the message's shape: its first
/// line is `first_line`, it lists at most about ten inputs, the bad one first, then input 1
/// and a count of the rest, and a hint says to remove or fix the bad input.
#[track_caller]
fn one_bad_shard(dir: &Path, first_line: &str) -> String {
    let args = ["-a", "0", "--files-from", "list.txt", "-o", "out.npy"];
    let stderr = refused(dir, &args, 2);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines[0], format!("tjoin: error: {first_line}"), "{stderr}");
    let rows: Vec<&&str> = lines.iter().filter(|l| l.starts_with("  input ")).collect();
    assert_eq!(rows.len(), 2, "the bad input and a reference:\n{stderr}");
    assert!(
        rows[0].starts_with("  input 1237  shard-01236.npy"),
        "{stderr}"
    );
    assert!(
        rows[1].starts_with("  input 1     shard-00000.npy"),
        "{stderr}"
    );
    assert!(lines.len() <= 12, "{} lines:\n{stderr}", lines.len());
    assert_mentions(
        &stderr,
        &[
            "  ... and 1,998 more like input 1\n",
            "hint: remove or fix input 1237 (shard-01236.npy)",
        ],
    );
    assert!(!stderr.contains("no axis can join"), "{stderr}");
    stderr
}

#[test]
fn one_shard_of_another_shape_among_2000_is_named_first() {
    // Shards of 1 to 5 rows, as the last shard of each writer often is (the sizes differ in
    // dimension 0 too, and only the odd one out is worth a word), or all of 5 rows (and then
    // axis 1 would join them all).
    let varied = |i: usize| ("<f4", vec![1 + i as u64 % 5, 128]);
    let even = |_| ("<f4", vec![5, 128]);
    let other_axis = "hint: or, if axis 0 is not the one meant: these inputs can only be joined \
                      along axis 1 (or -1)";
    for (good, hints_at_axis_1) in [(&varied as &dyn Fn(usize) -> _, false), (&even, true)] {
        let dir = shards(good, ("<f4", &[5, 127]));
        let stderr = one_bad_shard(
            dir.path(),
            "cannot join along axis 0: input 1237 (shard-01236.npy) has shape [5, 127]; the \
             other 1,999 inputs have [*, 128]",
        );
        assert_mentions(
            &stderr,
            &[
                "  input 1237  shard-01236.npy  float32  [5, 127]\n\
                 \x20                                           ^ 127 != 128\n",
                "the other 1,999 inputs join along axis 0 as they are",
            ],
        );
        assert_eq!(stderr.contains(other_axis), hints_at_axis_1, "{stderr}");
    }
}

#[test]
fn one_shard_of_another_type_among_2000_is_named_first() {
    let dir = shards(|_| ("<f4", vec![2, 3]), ("<f8", &[2, 3]));
    let stderr = one_bad_shard(
        dir.path(),
        "cannot join inputs of different element types: input 1237 (shard-01236.npy) is \
         float64; the other 1,999 inputs are float32",
    );
    assert_mentions(&stderr, &["^ float64 != float32", "--cast float32"]);
}

#[test]
fn one_shard_of_another_rank_among_2000_is_named_first() {
    let dir = shards(|_| ("<f4", vec![2, 3]), ("<f4", &[2, 3, 1]));
    let stderr = one_bad_shard(
        dir.path(),
        "cannot join inputs of different rank: input 1237 (shard-01236.npy) has rank 3; the \
         other 1,999 inputs have rank 2",
    );
    assert_mentions(&stderr, &["^ rank 3 != 2", "reshape it to rank 2"]);
}

#[test]
fn an_expected_shape_refusal_lists_the_odd_shard_a_reference_and_a_count() {
    // 1,999 shards [1, 128] and one [5, 128] join into [2004, 128], not the expected [2000,
    // 128]: the odd shard is the likely cause, so it is listed first.
    let dir = shards(|_| ("<f4", vec![1, 128]), ("<f4", &[5, 128]));
    let args = [
        "-a",
        "0",
        "--files-from",
        "list.txt",
        "--expect-shape",
        "2000,128",
        "-o",
        "out.npy",
    ];
    let stderr = refused(dir.path(), &args, 2);
    assert_eq!(
        stderr,
        "tjoin: error: the output would have shape [2004, 128], not the expected [2000, 128]\n\
         \x20 dimension 0: 2004 != 2000\n\
         \x20 along the join axis 0: the sizes of 2,000 inputs add up to 2004\n\
         \x20 input 1237 (shard-01236.npy) is [5, 128]\n\
         \x20 input 1 (shard-00000.npy) is [1, 128]\n\
         \x20 ... and 1,998 more like input 1\n\
         hint: remove or fix input 1237 (shard-01236.npy), check the axis (-a), or correct \
         --expect-shape\n"
    );
}

#[test]
fn many_odd_shards_are_counted_not_listed() {
    let dir = tempfile::tempdir().unwrap();
    let mut list = String::new();
    for i in 0..SHARDS {
        let name = format!("s{i}.npy");
        let width = if i % 100 == 99 { 7 } else { 8 };
        write_npy(
            &dir.path().join(&name),
            "|u1",
            &[1, width],
            false,
            &vec![0; width as usize],
        );
        list.push_str(&name);
        list.push('\n');
    }
    fs::write(dir.path().join("list.txt"), list).unwrap();
    let args = ["-a", "0", "--files-from", "list.txt", "-o", "out.npy"];
    let stderr = refused(dir.path(), &args, 2);
    let first = stderr.lines().next().unwrap();
    assert_eq!(
        first,
        "tjoin: error: cannot join along axis 0: input 100 (s99.npy) has shape [1, 7], and 19 \
         more inputs differ; the other 1,980 inputs have [*, 8]"
    );
    assert!(stderr.lines().count() <= 22, "{stderr}");
    assert_mentions(
        &stderr,
        &[
            "  ... and 12 more that differ\n",
            "  ... and 1,979 more like input 1\n",
            "hint: remove or fix the 20 inputs that differ (the first is input 100 (s99.npy))",
        ],
    );
}

/// A safetensors file of float32 zeros of these shapes.
fn st_file(path: &Path, tensors: &[(&str, &[usize])]) {
    let data: Vec<Vec<u8>> = tensors
        .iter()
        .map(|(_, shape)| vec![0; shape.iter().product::<usize>() * 4])
        .collect();
    let views: Vec<(&str, TensorView)> = tensors
        .iter()
        .zip(&data)
        .map(|((name, shape), data)| {
            (
                *name,
                TensorView::new(Dtype::F32, shape.to_vec(), data).unwrap(),
            )
        })
        .collect();
    fs::write(path, safetensors::serialize(views, None).unwrap()).unwrap();
}

#[test]
fn in_a_whole_file_join_the_odd_shard_is_named_for_names_and_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let mut list = String::new();
    for i in 0..SHARDS {
        let name = format!("s-{i:05}.safetensors");
        let mut tensors: Vec<(&str, &[usize])> = vec![("a.weight", &[2, 4]), ("b.weight", &[2, 3])];
        if i == BAD {
            tensors.push(("extra", &[1]));
        }
        if i == 40 {
            tensors[0].1 = &[2, 5];
        }
        st_file(&dir.path().join(&name), &tensors);
        list.push_str(&name);
        list.push('\n');
    }
    fs::write(dir.path().join("list.txt"), list).unwrap();
    let args = [
        "-a",
        "0",
        "--files-from",
        "list.txt",
        "-o",
        "out.safetensors",
    ];
    let stderr = refused(dir.path(), &args, 2);
    assert!(
        stderr.starts_with(
            "tjoin: error: the inputs do not hold the same tensors: input 1237 \
             (s-01236.safetensors) also holds extra; the other 1,999 inputs hold the same 2 \
             tensors\n"
        ),
        "{stderr}"
    );
    assert_mentions(
        &stderr,
        &[
            "  input 1 (s-00000.safetensors) holds 2 tensors\n  ... and 1,998 more like input 1\n",
            "hint: remove or fix input 1237 (s-01236.safetensors), or join the tensors they share",
            "tjoin: error: tensor `a.weight`: cannot join along axis 0: input 41 \
             (s-00040.safetensors:a.weight) has shape [2, 5]; the other 1,999 inputs have [*, 4]\n",
        ],
    );
    assert!(stderr.lines().count() <= 20, "{stderr}");
}

#[test]
fn past_five_refusals_the_rest_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<String> = (0..8).map(|t| format!("t{t}")).collect();
    for (file, width) in [("a.safetensors", 2), ("b.safetensors", 3)] {
        let shape = [1, width];
        let tensors: Vec<(&str, &[usize])> =
            names.iter().map(|n| (n.as_str(), &shape[..])).collect();
        st_file(&dir.path().join(file), &tensors);
    }
    let args = "-a 0 a.safetensors b.safetensors -o out.safetensors";
    let args: Vec<&str> = args.split(' ').collect();
    let stderr = refused(dir.path(), &args, 2);
    assert_eq!(stderr.matches("tjoin: error: ").count(), 6, "{stderr}");
    let last = "tjoin: error: ... and 3 more refusals (--dry-run=json lists every one)\n";
    assert!(stderr.ends_with(last), "{stderr}");
    let json = refused_json(dir.path(), &[&args[..], &["--dry-run=json"]].concat());
    assert_eq!(json["error"]["refusals"].as_array().unwrap().len(), 8);
}

/// The JSON error of a refused `--dry-run=json`, printed on standard output.
fn refused_json(dir: &Path, args: &[&str]) -> serde_json::Value {
    let output = crate::util::tjoin()
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    serde_json::from_slice(&output.stdout).unwrap()
}
