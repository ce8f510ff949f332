//! Strided views in PyTorch checkpoints (issue 39, item 6): torch.save writes a view as its
//! whole storage plus an offset, a shape and strides, and torch.load reads any strides that
//! stay inside the storage (expand's 0, narrow, step slices, permutes, the `torch.chunk`
//! pieces Megatron-style scripts save per rank). tjoin gathers them byte for byte as
//! `tensor.contiguous()` holds them (fixtures/strided/, made by torch itself), and refuses a
//! view that reaches past its storage, naming the tensor.

use std::fs;
use std::path::Path;

use crate::util::{assert_mentions, dir_entries, read_npy, refused, succeeds};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/strided");

fn fixture(name: &str) -> String {
    Path::new(FIXTURES)
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// Runs tjoin with `args` (fixtures named by file name: those with a `.pt`) and `-o out`,
/// and returns `out`.
fn written(args: &[&str], out: &str) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let mut all: Vec<String> = args
        .iter()
        .map(|a| match a.contains(".pt") {
            true => fixture(a),
            false => a.to_string(),
        })
        .collect();
    all.extend(["-o".to_string(), out.to_string()]);
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    succeeds(dir.path(), &all);
    fs::read(dir.path().join(out)).unwrap()
}

#[test]
fn strided_views_convert_as_their_contiguous_copies() {
    let want = fs::read(fixture("views.expected.safetensors")).unwrap();
    for file in ["views.pt", "views_legacy.pt"] {
        assert!(
            written(&[file], "out.safetensors") == want,
            "{file}: not what save_file writes of the views made contiguous"
        );
    }
    assert!(
        written(&["views.pt:stepped"], "out.npy")
            == fs::read(fixture("stepped.expected.npy")).unwrap()
    );
    let dir = tempfile::tempdir().unwrap();
    let plan = succeeds(dir.path(), &["--dry-run", &fixture("views.pt")]);
    assert_mentions(
        &String::from_utf8(plan).unwrap(),
        &[
            "`expanded` is a strided view (shape [3, 4], strides [0, 1])",
            "`permuted` is a strided view (shape [4, 2, 3], strides [1, 12, 4])",
            "as tensor.contiguous() holds them",
        ],
    );
    // The first such file of the suite, a view [:, ::2], refused before.
    let out = written(&["../pytorch/refused_strided.pt"], "out.npy");
    let values: Vec<f32> = read_npy_bytes(&out);
    assert_eq!(values, [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
}

fn read_npy_bytes(bytes: &[u8]) -> Vec<f32> {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a.npy"), bytes).unwrap();
    read_npy(&dir.path().join("a.npy"))
        .data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// `torch.chunk(w, 3, dim=1)`, each piece saved by its rank as it is: joined on axis 1 they
/// give `w` back, whichever form each rank's file has.
#[test]
fn chunk_pieces_saved_per_rank_join_back_into_the_weight() {
    let want = fs::read(fixture("chunks.expected.safetensors")).unwrap();
    for middle in ["chunk_1.pt", "chunk_1_legacy.pt"] {
        let args = ["-a", "1", "chunk_0.pt", middle, "chunk_2.pt"];
        assert!(written(&args, "w.safetensors") == want, "{middle}");
    }
}

/// A view whose strides reach past its storage (the legacy chunk with its row stride made 14
/// where the storage holds 48 elements) is refused, naming the tensor; nothing is written.
#[test]
fn a_view_past_its_storage_is_refused_naming_the_tensor() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = fs::read(fixture("chunk_1_legacy.pt")).unwrap();
    let (from, to) = (b"K\x0cK\x01\x86", b"K\x0eK\x01\x86");
    let at = bytes.windows(5).position(|w| w == from).unwrap();
    let mut bytes = bytes;
    bytes[at..at + 5].copy_from_slice(to);
    fs::write(dir.path().join("past.pt"), bytes).unwrap();
    let stderr = refused(dir.path(), &["past.pt", "-o", "out.safetensors"], 1);
    assert_mentions(
        &stderr,
        &[
            "(past.pt:w)",
            "its view (offset 4, shape [4, 4], strides [14, 1]) reaches past the end of its \
             storage",
            "of 192 bytes",
        ],
    );
    assert_eq!(dir_entries(dir.path()), ["past.pt"]);
}

/// `views_legacy.pt` with `find` in its pickle replaced by `put` (the legacy form holds no
/// checksum, and its pickles end where their STOP is, so a pickle may change length).
fn patched(find: &[u8], put: &[u8]) -> Vec<u8> {
    let bytes = fs::read(fixture("views_legacy.pt")).unwrap();
    let at = bytes.windows(find.len()).position(|w| w == find).unwrap();
    [&bytes[..at], put, &bytes[at + find.len()..]].concat()
}

/// Hostile views: a few bytes that declare a 16 TiB `expand` (a copy of that size would fill
/// the disk), and strides past 2^62 and past 64 bits; each refused at once, naming the tensor.
#[test]
fn hostile_strides_are_refused_before_anything_is_copied() {
    let dir = tempfile::tempdir().unwrap();
    // `expanded`'s shape (3, 4), then memo 9: made (2^40, 4) with a LONG1.
    let huge = patched(
        b"K\x03K\x04\x86q\t",
        b"\x8a\x06\x00\x00\x00\x00\x00\x01K\x04\x86q\t",
    );
    // `stepped`'s strides (20, 3), then memo 26: the row stride made 2^62, then 2^64.
    let far = patched(
        b"K\x14K\x03\x86q\x1a",
        b"\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x40K\x03\x86q\x1a",
    );
    let beyond = patched(
        b"K\x14K\x03\x86q\x1a",
        b"\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01K\x03\x86q\x1a",
    );
    let cases: [(&str, Vec<u8>, i32, &[&str]); 3] = [
        (
            "huge.pt",
            huge,
            2,
            &[
                "(huge.pt:expanded)",
                "shape [1099511627776, 4] with strides [0, 1] that repeats 16 bytes",
                "save tensor.contiguous()",
            ],
        ),
        (
            "far.pt",
            far,
            1,
            &[
                "(far.pt:stepped)",
                "strides [4611686018427387904, 3]) reaches past",
            ],
        ),
        (
            "beyond.pt",
            beyond,
            2,
            &["the stride 18446744073709551616, beyond 64 bits"],
        ),
    ];
    for (name, bytes, code, said) in cases {
        fs::write(dir.path().join(name), bytes).unwrap();
        let stderr = refused(dir.path(), &["--dry-run", name, "-o", "out.npy"], code);
        assert_mentions(&stderr, said);
        fs::remove_file(dir.path().join(name)).unwrap();
    }
    assert_eq!(dir_entries(dir.path()), Vec::<String>::new());
}
