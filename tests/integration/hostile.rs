//! Files made to hurt (issue 21): each gets a clear refusal, quickly and in little memory,
//! with exit 1 for a damaged file or 2 for a rule tjoin does not follow, never a panic, and
//! leaves no output behind. Large cases are sparse files. Timings are loose enough for a
//! loaded 2-core machine and tight enough that work in the square of the input fails them.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::reliability::tjoin_limited;
use crate::util::{assert_mentions, dir_entries, npy_bytes, npy_header, refused, succeeds};

/// What every case must take at most.
const QUICK: Duration = Duration::from_secs(5);

/// A .npy file (version 2.0, so that the header may be long) whose header is `dict` padded
/// as numpy pads, followed by `data`.
fn npy_v2(dict: &str, data: &[u8]) -> Vec<u8> {
    let mut text = dict.as_bytes().to_vec();
    text.resize((12 + text.len() + 1).next_multiple_of(64) - 12 - 1, b' ');
    text.push(b'\n');
    let mut out = b"\x93NUMPY\x02\x00".to_vec();
    out.extend_from_slice(&(text.len() as u32).to_le_bytes());
    out.extend_from_slice(&text);
    out.extend_from_slice(data);
    out
}

/// Runs `tjoin ARGS` in `dir` and checks that it is refused with `code` within [`QUICK`],
/// leaving the folder as it was. Returns stderr.
#[track_caller]
fn refused_quickly(dir: &Path, args: &[&str], code: i32) -> String {
    let start = Instant::now();
    let stderr = refused(dir, args, code);
    assert!(
        start.elapsed() < QUICK,
        "{args:?} took {:?}",
        start.elapsed()
    );
    stderr
}

/// [`refused_quickly`] under a shell's `limits` (`ulimit -v ...`): tjoin must stay within
/// them.
#[track_caller]
fn refused_within(dir: &Path, limits: &str, args: &[&str], code: i32) -> String {
    let before = dir_entries(dir);
    let start = Instant::now();
    let output = tjoin_limited(dir, limits, args);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        start.elapsed() < QUICK,
        "{args:?} took {:?}",
        start.elapsed()
    );
    assert_eq!(output.status.code(), Some(code), "{args:?}: {stderr}");
    assert!(stderr.starts_with("tjoin: error: "), "{args:?}: {stderr}");
    assert_eq!(dir_entries(dir), before, "{args:?} left a file behind");
    stderr
}

// ---- .npy headers ----

#[test]
fn an_element_type_too_large_for_64_bits_is_refused_not_a_panic() {
    // 4 bytes a character times 2^62 characters: 2^64 bytes an element, with no element.
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("u.npy"),
        npy_header("<U4611686018427387904", &[0, 3], false),
    )
    .unwrap();
    for axis in ["0", "1"] {
        let stderr = refused_quickly(
            dir.path(),
            &["-a", axis, "u.npy", "u.npy", "-o", "o.npy"],
            2,
        );
        assert_mentions(
            &stderr,
            &[
                "input 1 (u.npy)",
                "more bytes than 64 bits count",
                "at most",
            ],
        );
    }
    // Past tjoin's limit but within 64 bits: refused the same way.
    fs::write(
        dir.path().join("v.npy"),
        npy_header("<U1000000000", &[0, 3], false),
    )
    .unwrap();
    let stderr = refused_quickly(dir.path(), &["-a", "0", "v.npy", "-o", "o.npy"], 2);
    assert_mentions(&stderr, &["4000000000 bytes each"]);
}

#[test]
fn an_element_type_of_gigabytes_with_no_elements_costs_no_memory() {
    // Within the limit (2 GiB an element) and empty: joined, by the early copy (axis 0) and
    // by the engine (axis 1), without a buffer of the element's size.
    let dir = tempfile::tempdir().unwrap();
    for descr in ["<U536870912", ">U536870912"] {
        fs::write(dir.path().join("u.npy"), npy_header(descr, &[0, 3], false)).unwrap();
        for axis in ["0", "1"] {
            let output = tjoin_limited(
                dir.path(),
                "ulimit -v 262144",
                &["-a", axis, "u.npy", "u.npy", "-o", "o.npy"],
            );
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(output.status.success(), "{descr} axis {axis}: {stderr}");
        }
    }
}

#[test]
fn a_record_type_of_a_huge_sub_array_is_read_in_time_and_memory() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        // 2^60 elements of nothing, little-endian: nothing to reverse, nothing to loop over.
        ("[('a', '<U0', (1152921504606846976,))]", None),
        // Past the element limit.
        (
            "[('a', '<f4', (1152921504606846976,))]",
            Some((2, "4611686018427387904 bytes each")),
        ),
        // A hundred million big-endian floats to reverse in each element.
        (
            "[('a', '>f4', (100000000,))]",
            Some((2, "big-endian values per element")),
        ),
    ];
    for (descr, refusal) in cases {
        let dict = format!("{{'descr': {descr}, 'fortran_order': False, 'shape': (0,), }}");
        fs::write(dir.path().join("r.npy"), npy_v2(&dict, &[])).unwrap();
        let args = ["-a", "0", "r.npy", "r.npy", "-o", "o.npy"];
        match refusal {
            Some((code, needle)) => {
                let stderr = refused_within(dir.path(), "ulimit -v 262144", &args, code);
                assert_mentions(&stderr, &[needle]);
            }
            None => {
                let start = Instant::now();
                let output = tjoin_limited(dir.path(), "ulimit -v 262144", &args);
                assert!(
                    start.elapsed() < QUICK,
                    "{descr} took {:?}",
                    start.elapsed()
                );
                let stderr = String::from_utf8_lossy(&output.stderr);
                assert!(output.status.success(), "{descr}: {stderr}");
                fs::remove_file(dir.path().join("o.npy")).unwrap();
            }
        }
    }
}

#[test]
fn more_than_64_dimensions_are_refused_as_numpy_refuses_them() {
    let dir = tempfile::tempdir().unwrap();
    let ones = |rank: usize| vec![1u64; rank];
    fs::write(
        dir.path().join("r64.npy"),
        npy_bytes("<f4", &ones(64), false, &[0; 4]),
    )
    .unwrap();
    succeeds(
        dir.path(),
        &["-a", "0", "r64.npy", "r64.npy", "-o", "o.npy"],
    );
    let dict = |rank: usize| {
        let dims = vec!["1"; rank].join(", ");
        format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({dims}), }}")
    };
    // 65 dimensions; then ~330,000, a header just under 1 MiB, which must cost time in
    // proportion to its length (it used to cost the square of the rank: 30,000 took 2 s).
    for rank in [65, 100, 330_000] {
        fs::write(dir.path().join("r.npy"), npy_v2(&dict(rank), &[0; 4])).unwrap();
        let stderr = refused_quickly(dir.path(), &["-a", "0", "r.npy", "r.npy", "-o", "o.npy"], 1);
        assert_mentions(
            &stderr,
            &[&format!("its shape has {rank} dimensions"), "at most 64"],
        );
    }
    // The same in another key order, which takes the general parser.
    let dims = vec!["1"; 10_000].join(", ");
    let other_order = format!("{{'shape': ({dims}), 'fortran_order': False, 'descr': '<f4'}}");
    fs::write(dir.path().join("r.npy"), npy_v2(&other_order, &[0; 4])).unwrap();
    let stderr = refused_quickly(dir.path(), &["-a", "0", "r.npy", "-o", "o.npy"], 1);
    assert_mentions(&stderr, &["its shape has 10000 dimensions"]);
    // A million dimensions (3 MB of header): refused from the length field alone.
    fs::write(dir.path().join("r.npy"), npy_v2(&dict(1_000_000), &[0; 4])).unwrap();
    let stderr = refused_quickly(dir.path(), &["-a", "0", "r.npy", "-o", "o.npy"], 1);
    assert_mentions(
        &stderr,
        &["header length field says", "more than the 1048576"],
    );
}

#[test]
fn a_header_must_hold_exactly_numpys_keys() {
    let dir = tempfile::tempdir().unwrap();
    let refusals = [
        (
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'evil': 1, }",
            "'descr', 'fortran_order', 'shape', 'evil'",
        ),
        (
            "{'evil': ['a', [1, 2]], 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}",
            "'evil', 'descr', 'fortran_order', 'shape'",
        ),
        (
            "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}",
            "'descr', 'descr', 'fortran_order', 'shape'",
        ),
        ("{'descr': '<f4', 'shape': (2,)}", "'descr', 'shape'"),
    ];
    for (dict, keys) in refusals {
        fs::write(dir.path().join("k.npy"), npy_v2(dict, &[0; 8])).unwrap();
        let stderr = refused_quickly(dir.path(), &["-a", "0", "k.npy", "-o", "o.npy"], 1);
        assert_mentions(
            &stderr,
            &[
                &format!("its header's dictionary has the keys {keys}"),
                "numpy requires exactly 'descr', 'fortran_order' and 'shape'",
            ],
        );
    }
    // A dictionary as a value: refused before any key is looked at.
    let nested = "{'evil': {'a': 1}, 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}";
    fs::write(dir.path().join("k.npy"), npy_v2(nested, &[0; 8])).unwrap();
    let stderr = refused_quickly(dir.path(), &["-a", "0", "k.npy", "-o", "o.npy"], 1);
    assert_mentions(&stderr, &["its header holds 2 dictionaries"]);
    // Numpy's keys in any order, with quotes, commas and brackets inside strings: read.
    for dict in [
        "{'shape': (2,), \"fortran_order\": False, 'descr': '<f4'}",
        "{'descr': [('a,b', '<f4'), ('it\\'s: {', '<f4')], 'fortran_order': False, 'shape': (1,)}",
    ] {
        fs::write(dir.path().join("k.npy"), npy_v2(dict, &[0; 8])).unwrap();
        succeeds(dir.path(), &["-a", "0", "k.npy", "k.npy", "-o", "o.npy"]);
    }
}

#[test]
fn a_header_of_nested_dictionaries_is_refused_before_parsing() {
    // The join fuzz target's find (fixtures/fuzz/join-timeout-nested-dictionaries.npy):
    // dictionaries ten deep cost the Python-literal parser 0.25 s, over 5 s instrumented, and
    // each level more multiplies it. numpy's header holds one dictionary.
    let mut bytes = b"\x93NUMPY\x01\x00v\x00{'descr': {{{{{{{{{\x02PK".to_vec();
    bytes.resize(128, b' ');
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("d.npy"), bytes).unwrap();
    let stderr = refused_quickly(dir.path(), &["-a", "0", "d.npy", "d.npy", "-o", "o.npy"], 1);
    assert_mentions(&stderr, &["its header holds 10 dictionaries"]);
}

// ---- .npz archives ----

/// One member of a zip archive as the tests build it.
struct Member<'a> {
    name: &'a str,
    /// The member's bytes, uncompressed.
    bytes: Vec<u8>,
    deflate: bool,
    /// XORed into the recorded CRC-32: nonzero damages it.
    crc_flip: u32,
}

/// A zip archive of `members`, as a reader finds them through the central directory.
fn zip_of(members: &[Member]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut directory = Vec::new();
    for member in members {
        let stored = if member.deflate {
            let mut encoder =
                flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
            encoder.write_all(&member.bytes).unwrap();
            encoder.finish().unwrap()
        } else {
            member.bytes.clone()
        };
        let crc = crc32fast::hash(&member.bytes) ^ member.crc_flip;
        let method: u16 = if member.deflate { 8 } else { 0 };
        let fields = |out: &mut Vec<u8>| {
            out.extend_from_slice(&20u16.to_le_bytes()); // version needed
            out.extend_from_slice(&0u16.to_le_bytes()); // flags
            out.extend_from_slice(&method.to_le_bytes());
            out.extend_from_slice(&[0, 0, 0x21, 0]); // time, date
            out.extend_from_slice(&crc.to_le_bytes());
            out.extend_from_slice(&(stored.len() as u32).to_le_bytes());
            out.extend_from_slice(&(member.bytes.len() as u32).to_le_bytes());
            out.extend_from_slice(&(member.name.len() as u16).to_le_bytes());
            out.extend_from_slice(&0u16.to_le_bytes()); // extra
        };
        let local = out.len() as u32;
        out.extend_from_slice(b"PK\x03\x04");
        fields(&mut out);
        out.extend_from_slice(member.name.as_bytes());
        out.extend_from_slice(&stored);
        directory.extend_from_slice(b"PK\x01\x02");
        directory.extend_from_slice(&20u16.to_le_bytes()); // version made by
        fields(&mut directory);
        directory.extend_from_slice(&[0; 8]); // comment, disk, internal and external attributes
        directory.extend_from_slice(&[0; 2]);
        directory.extend_from_slice(&local.to_le_bytes());
        directory.extend_from_slice(member.name.as_bytes());
    }
    end_record(&mut out, members.len() as u16, &directory);
    out
}

/// Appends `directory` and the end record that points at it.
fn end_record(out: &mut Vec<u8>, count: u16, directory: &[u8]) {
    let start = out.len() as u32;
    out.extend_from_slice(directory);
    out.extend_from_slice(b"PK\x05\x06\0\0\0\0");
    out.extend_from_slice(&count.to_le_bytes());
    out.extend_from_slice(&count.to_le_bytes());
    out.extend_from_slice(&(directory.len() as u32).to_le_bytes());
    out.extend_from_slice(&start.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
}

/// A float32 .npy file of `rows` x 4 (C order, or Fortran), counting up from `first`.
fn f32_npy(rows: u64, fortran: bool, first: f32) -> Vec<u8> {
    let data: Vec<u8> = (0..rows * 4)
        .flat_map(|i| (first + i as f32).to_le_bytes())
        .collect();
    npy_bytes("<f4", &[rows, 4], fortran, &data)
}

#[test]
fn a_stored_member_with_a_wrong_crc_is_refused_however_it_is_copied() {
    let dir = tempfile::tempdir().unwrap();
    // Each way the engine reads a member's data: one read (small), a map in pieces (large),
    // byte-swapped, gathered (Fortran order into C order), and no data at all; and a
    // whole-file join, and --keep comparing the second input's copy.
    let cases: [(&str, Vec<u8>, &[&str]); 6] = [
        ("small", f32_npy(3, false, 1.0), &["-a", "0"]),
        ("large", f32_npy(100_000, false, 1.0), &["-a", "0"]),
        (
            "swapped",
            npy_bytes(">f4", &[3, 4], false, &[0x3f; 48]),
            &["-a", "0"],
        ),
        ("gathered", f32_npy(30_000, true, 1.0), &["-a", "1"]),
        ("empty", f32_npy(0, false, 1.0), &["-a", "0"]),
        ("kept", f32_npy(3, false, 1.0), &["-a", "0", "--keep", "x"]),
    ];
    for (case, npy, args) in cases {
        let archive = |crc_flip| {
            zip_of(&[Member {
                name: "x.npy",
                bytes: npy.clone(),
                deflate: false,
                crc_flip,
            }])
        };
        fs::write(dir.path().join("good.npz"), archive(0)).unwrap();
        fs::write(dir.path().join("bad.npz"), archive(0x8000_0000)).unwrap();
        let inputs: [&[&str]; 2] = [
            &["good.npz:x", "bad.npz:x", "-o", "o.npy"],
            &["good.npz", "bad.npz", "-o", "o.npz"],
        ];
        for files in inputs {
            if case == "kept" && files[0] == "good.npz:x" {
                continue; // --keep is for whole-file joins
            }
            let mut all = args.to_vec();
            // The good and the bad archive hold the same bytes: joined on purpose.
            all.push("--join-identical");
            all.extend_from_slice(files);
            let stderr = refused_quickly(dir.path(), &all, 1);
            assert_mentions(
                &stderr,
                &[
                    "input 2 (bad.npz",
                    "its member x.npy fails its CRC-32 check",
                ],
            );
            let mut good = all.clone();
            for file in &mut good {
                *file = if file.starts_with("bad") {
                    if file.contains(':') {
                        "good.npz:x"
                    } else {
                        "good.npz"
                    }
                } else {
                    file
                };
            }
            succeeds(dir.path(), &good);
            fs::remove_file(dir.path().join(good[good.len() - 1])).unwrap();
        }
    }
}

#[cfg(unix)] // a sparse file written at its end, and ulimit
#[test]
fn a_central_directory_that_lies_costs_what_the_file_holds() {
    let dir = tempfile::tempdir().unwrap();
    // A sparse 1 GiB archive whose end record points at a central directory of 1 GiB - 1
    // from offset 1: what it holds there is zeros.
    let file = fs::File::create(dir.path().join("big.npz")).unwrap();
    let size = 1u64 << 30;
    file.set_len(size).unwrap();
    let mut end = b"PK\x05\x06\0\0\0\0\x01\x00\x01\x00".to_vec();
    end.extend_from_slice(&((size - 23) as u32).to_le_bytes());
    end.extend_from_slice(&1u32.to_le_bytes());
    end.extend_from_slice(&0u16.to_le_bytes());
    std::os::unix::fs::FileExt::write_all_at(&file, &end, size - 22).unwrap();
    drop(file);
    let args = ["-a", "0", "big.npz", "-o", "o.npz"];
    let stderr = refused_within(dir.path(), "ulimit -v 262144", &args, 1);
    assert_mentions(&stderr, &["its central directory is damaged"]);
    // An end record counting more entries than its directory has room for.
    let mut bytes = Vec::new();
    end_record(&mut bytes, 0xFFFE, &[0; 46]);
    fs::write(dir.path().join("count.npz"), bytes).unwrap();
    let stderr = refused_quickly(dir.path(), &["-a", "0", "count.npz", "-o", "o.npz"], 1);
    assert_mentions(&stderr, &["counts 65534 members", "46 bytes"]);
}

#[test]
fn a_deflated_member_is_checked_against_its_header_before_it_is_inflated() {
    let dir = tempfile::tempdir().unwrap();
    // A .npy header of 8 bytes of data, then 256 MiB of zeros: deflated, about 256 KB.
    let mut npy = f32_npy(0, false, 0.0);
    let header_len = npy.len();
    npy = npy_bytes("<f4", &[2], false, &[0; 8]);
    assert_eq!(npy.len(), header_len + 8);
    npy.resize(256 << 20, 0);
    fs::write(
        dir.path().join("bomb.npz"),
        zip_of(&[Member {
            name: "x.npy",
            bytes: npy,
            deflate: true,
            crc_flip: 0,
        }]),
    )
    .unwrap();
    // With files limited to 1 MiB, inflating it to disk would fail another way (or kill
    // tjoin with SIGXFSZ).
    let args = ["-a", "0", "bomb.npz", "-o", "o.npy"];
    let stderr = refused_within(dir.path(), "ulimit -f 1024; ulimit -v 262144", &args, 1);
    assert_mentions(
        &stderr,
        &[
            "input 1 (bomb.npz:x)",
            "(8 bytes of data)",
            "268435328 bytes of data",
        ],
    );
}

// ---- safetensors ----

#[test]
fn a_header_of_many_tensors_short_of_data_is_refused_in_little_memory() {
    // 100,000 tensors of one float each (a 6.5 MB header), the data 4 bytes short: refused
    // from where the data ends, before any tensor is kept (as a serde_json::Value each, they
    // took 130 MB; a million took 1.3 GiB and 3.5 s).
    let count = 100_000;
    let mut header = String::from("{");
    for i in 0..count {
        if i > 0 {
            header.push(',');
        }
        header.push_str(&format!(
            r#""t{i}":{{"dtype":"F32","shape":[1],"data_offsets":[{},{}]}}"#,
            4 * i,
            4 * i + 4
        ));
    }
    header.push('}');
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.resize(bytes.len() + 4 * count - 4, 0);
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("many.safetensors"), bytes).unwrap();
    // The header is mapped, not copied, and nothing is built from it: 128 MiB of address
    // space is plenty.
    let args = ["-a", "0", "many.safetensors", "-o", "o.safetensors"];
    let stderr = refused_within(dir.path(), "ulimit -v 131072", &args, 1);
    assert_mentions(
        &stderr,
        &[
            "data ends 400000 bytes after the header",
            "holds 399996 bytes",
            "truncated",
        ],
    );
}

// ---- what messages quote ----

#[test]
fn messages_quote_at_most_a_hundred_characters_of_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let long_name = "n".repeat(1 << 20);
    let long_dtype = "D".repeat(1 << 20);
    let st = |name: &str, dtype: &str| {
        let header =
            format!(r#"{{"{name}":{{"dtype":"{dtype}","shape":[1],"data_offsets":[0,4]}}}}"#);
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(&[0; 4]);
        bytes
    };
    let npz_member = zip_of(&[Member {
        name: &"m".repeat(60_000),
        bytes: vec![0; 10],
        deflate: false,
        crc_flip: 0,
    }]);
    // A record of 5,000 fields: its type is 100 KB of text (a table cell that wide made
    // `format!` panic).
    let fields: Vec<String> = (0..5000).map(|i| format!("('f{i}', '<u1')")).collect();
    let record = format!(
        "{{'descr': [{}], 'fortran_order': False, 'shape': (), }}",
        fields.join(", ")
    );
    let cases: Vec<(&str, Vec<u8>, &str, i32, &str)> = vec![
        // 1 MiB of NULs where the dictionary should be.
        (
            "nuls.npy",
            npy_v2(&"\0".repeat((1 << 20) - 64), &[]),
            "o.npy",
            1,
            "cannot be parsed",
        ),
        // A name too long for a zip.
        (
            "name.safetensors",
            st(&long_name, "F32"),
            "o.npz",
            2,
            "nnnnnnnnnn",
        ),
        (
            "dtype.safetensors",
            st("x", &long_dtype),
            "o.npy",
            1,
            "DDDDDDDDDD",
        ),
        ("member.npz", npz_member, "o.npy", 1, "mmmmmmmmmm"),
        (
            "record.npy",
            npy_v2(&record, &[0; 5000]),
            "o.npy",
            2,
            "('f0', '<u1')",
        ),
    ];
    for (name, bytes, out, code, needle) in cases {
        fs::write(dir.path().join(name), bytes).unwrap();
        // A file joined with itself: every tensor is replicated, and joined on purpose.
        let args = ["-a", "0", "--join-identical", name, name, "-o", out];
        let stderr = refused_quickly(dir.path(), &args, code);
        assert_mentions(&stderr, &[needle, " more bytes)"]);
        assert!(
            stderr.len() < 4000,
            "{name}: {} bytes of stderr",
            stderr.len()
        );
    }
}
