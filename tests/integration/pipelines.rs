//! tjoin in shell pipelines: JSON in and out, standard input and output, file lists, casts.

use std::fs;
use std::io::Read;
use std::process::{Command, Stdio};

use tempfile::TempDir;

use crate::util::{
    f32_le, npy_bytes, read_npy, refused, refused_with_stdin, succeeds, succeeds_with_stdin,
    write_npy,
};

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap()
}

#[test]
fn json_from_stdin_joins_a_json_file_to_json_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("b.json"), "[[5, 6]]\n").unwrap();
    let args = ["-a", "0", "-", "b.json", "-o", "-", "--format", "json"];
    let out = succeeds_with_stdin(dir.path(), &args, b"[[1,2],[3,4]]");
    assert_eq!(text(out), "[[1,2],[3,4],[5,6]]\n");
}

#[test]
fn npy_from_stdin_joins_a_file_to_npy_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    write_npy(
        &dir.path().join("local.npy"),
        "<f4",
        &[2, 1],
        false,
        &f32_le(&[9.0, 8.0]),
    );
    let remote = npy_bytes("<f4", &[2, 2], false, &f32_le(&[1.0, 2.0, 3.0, 4.0]));
    let args = ["-a", "1", "-", "local.npy", "-o", "-", "--format", "npy"];
    let out = succeeds_with_stdin(dir.path(), &args, &remote);
    let expected = npy_bytes(
        "<f4",
        &[2, 3],
        false,
        &f32_le(&[1.0, 2.0, 9.0, 3.0, 4.0, 8.0]),
    );
    assert_eq!(out, expected);
}

#[test]
fn containers_on_stdin_are_sniffed_by_their_first_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let data = f32_le(&[1.0, 2.0, 3.0, 4.0]);
    write_npy(&dir.path().join("a.npy"), "<f4", &[2, 2], false, &data);
    let twice = succeeds(
        dir.path(),
        &["-a", "0", "a.npy", "a.npy", "-o", "-", "--format", "npy"],
    );
    for container in ["a.safetensors", "a.npz"] {
        let args = ["-a", "0", "a.npy", "--name", "x", "-o", container];
        succeeds(dir.path(), &args);
        let bytes = fs::read(dir.path().join(container)).unwrap();
        let args = ["-a", "0", "-", "a.npy", "-o", "-", "--format", "npy"];
        assert_eq!(
            succeeds_with_stdin(dir.path(), &args, &bytes),
            twice,
            "{container} on stdin"
        );
    }
}

#[test]
fn mixed_formats_join_into_one_file() {
    let dir = tempfile::tempdir().unwrap();
    write_npy(
        &dir.path().join("a.npy"),
        "<f4",
        &[1, 2],
        false,
        &f32_le(&[1.0, 2.0]),
    );
    let object = r#"{"shape": [2, 2], "dtype": "float32", "data": [0.5, -0.0, "Infinity", 3]}"#;
    fs::write(dir.path().join("b.json"), object).unwrap();
    succeeds(dir.path(), &["-a", "0", "a.npy", "b.json", "-o", "c.npy"]);
    let c = read_npy(&dir.path().join("c.npy"));
    assert_eq!(
        (c.descr.as_str(), c.shape.as_slice()),
        ("<f4", &[3u64, 2][..])
    );
    assert_eq!(c.data, f32_le(&[1.0, 2.0, 0.5, -0.0, f32::INFINITY, 3.0]));
}

#[test]
fn stdout_needs_a_format_and_formats_are_named() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a.json"), "[1]").unwrap();
    let stderr = refused(dir.path(), &["-a", "0", "a.json", "-o", "-"], 2);
    assert!(stderr.contains("--format"), "{stderr}");
    let args = ["-a", "0", "a.json", "-o", "-", "--format", "csv"];
    let stderr = refused(dir.path(), &args, 2);
    assert!(stderr.contains("npy, json"), "{stderr}");
}

#[test]
fn the_format_follows_the_extension_unless_told_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    // JSON text under a name that says .npy, and under no known extension.
    fs::write(dir.path().join("a.npy"), "[[1, 2]]").unwrap();
    fs::write(dir.path().join("b.txt"), "[[3, 4]]").unwrap();
    let stderr = refused(dir.path(), &["-a", "0", "a.npy", "-o", "o.json"], 1);
    assert!(stderr.contains("input 1 (a.npy)"), "{stderr}");
    let args = [
        "-a",
        "0",
        "a.npy",
        "b.txt",
        "-o",
        "o.json",
        "--input-format",
        "json",
    ];
    succeeds(dir.path(), &args);
    assert_eq!(
        fs::read_to_string(dir.path().join("o.json")).unwrap(),
        "[[1,2],[3,4]]\n"
    );
    // b.txt alone is sniffed; --format overrides the output's extension.
    let args = ["-a", "0", "b.txt", "-o", "o.data", "--format", "npy"];
    succeeds(dir.path(), &args);
    let o = read_npy(&dir.path().join("o.data"));
    assert_eq!(o.descr, "<i8");
}

/// An npy of `descr` and `shape` holding `data`, through JSON (object form) and back:
/// the data must come back byte for byte.
fn round_trip(descr: &str, shape: &[u64], data: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    write_npy(&dir.path().join("a.npy"), descr, shape, false, data);
    let args = ["-a", "0", "a.npy", "-o", "a.json", "--json-form", "object"];
    succeeds(dir.path(), &args);
    succeeds(dir.path(), &["-a", "0", "a.json", "-o", "b.npy"]);
    let back = read_npy(&dir.path().join("b.npy"));
    assert_eq!(
        back.descr, descr,
        "dtype of {descr} after a JSON round trip"
    );
    assert_eq!(back.shape, shape);
    assert_eq!(back.data, data, "{descr} data after a JSON round trip");
    fs::read_to_string(dir.path().join("a.json")).unwrap()
}

fn le<const N: usize, T: Copy>(values: &[T], bytes: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    values.iter().flat_map(|&v| bytes(v)).collect()
}

#[test]
fn every_integer_type_round_trips_through_json_to_its_limits() {
    round_trip("|b1", &[3], &[1, 0, 1]);
    round_trip("|i1", &[3], &le(&[i8::MIN, -1, i8::MAX], i8::to_le_bytes));
    round_trip("<i2", &[2], &le(&[i16::MIN, i16::MAX], i16::to_le_bytes));
    round_trip("<i4", &[2], &le(&[i32::MIN, i32::MAX], i32::to_le_bytes));
    round_trip("<i8", &[2], &le(&[i64::MIN, i64::MAX], i64::to_le_bytes));
    round_trip("|u1", &[2], &[0, u8::MAX]);
    round_trip("<u2", &[2], &le(&[0, u16::MAX], u16::to_le_bytes));
    round_trip("<u4", &[2], &le(&[0, u32::MAX], u32::to_le_bytes));
    let json = round_trip("<u8", &[2], &le(&[0, u64::MAX], u64::to_le_bytes));
    assert!(json.contains("18446744073709551615"), "{json}");
    round_trip(
        "<M8[ns]",
        &[2],
        &le(&[i64::MIN, 1_700_000_000], i64::to_le_bytes),
    );
}

#[test]
fn every_float_type_round_trips_through_json_exactly() {
    let specials = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, 0.1];
    let f64s = [
        &specials[..],
        &[f64::MAX, f64::MIN_POSITIVE, 5e-324, 1.0 / 3.0],
    ]
    .concat();
    let json = round_trip("<f8", &[9], &le(&f64s, f64::to_le_bytes));
    assert!(
        json.contains(r#""NaN","Infinity","-Infinity",-0.0,0.1"#),
        "{json}"
    );
    let f32s: Vec<f32> = f64s.iter().map(|&v| v as f32).collect();
    let f32s = [&f32s[..], &[f32::MAX, 1e-45, 16_777_217.0]].concat();
    let json = round_trip("<f4", &[12], &le(&f32s, f32::to_le_bytes));
    assert!(json.contains("0.1,"), "float32 0.1 prints shortest: {json}");
    let f16s: Vec<u16> = vec![
        0x7e00, 0x7c00, 0xfc00, 0x8000, 0x3c01, 0x7bff, 0x0001, 0x2e66,
    ];
    round_trip("<f2", &[8], &le(&f16s, u16::to_le_bytes));
    let c64 = le(&[1.5f32, f32::NAN, -0.0, f32::MAX], f32::to_le_bytes);
    let json = round_trip("<c8", &[2], &c64);
    assert!(json.contains(r#"[1.5,"NaN"]"#), "{json}");
    round_trip("<c16", &[1], &le(&[0.1f64, -1e300], f64::to_le_bytes));
}

#[test]
fn bfloat16_round_trips_through_json() {
    let dir = tempfile::tempdir().unwrap();
    let object =
        r#"{"dtype":"bfloat16","shape":[5],"data":[1.0,-0.0,"NaN",3.3895314e38,9.1835e-41]}"#;
    fs::write(dir.path().join("a.json"), object).unwrap();
    let args = ["-a", "0", "a.json", "-o", "-", "--format", "json"];
    let once = succeeds(
        dir.path(),
        &[&args[..], &["--json-form", "object"]].concat(),
    );
    let twice = succeeds_with_stdin(
        dir.path(),
        &[
            "-a",
            "0",
            "-",
            "-o",
            "-",
            "--format",
            "json",
            "--json-form",
            "object",
        ],
        &once,
    );
    assert_eq!(once, twice);
    assert_eq!(
        text(once),
        "{\"dtype\":\"bfloat16\",\"shape\":[5],\"data\":[1.0,-0.0,\"NaN\",3.3895314e38,9.1835e-41]}\n"
    );
    // .npy has no bfloat16.
    let stderr = refused(dir.path(), &["-a", "0", "a.json", "-o", "b.npy"], 2);
    assert!(stderr.contains("--cast float32"), "{stderr}");
}

#[test]
fn strings_round_trip_through_json() {
    let ucs4: Vec<u8> = "héé\"\n"
        .chars()
        .chain(['x', '\0', '\0', '\0', '\0'])
        .flat_map(|c| (c as u32).to_le_bytes())
        .collect();
    let json = round_trip("<U5", &[2], &ucs4);
    assert!(json.contains(r#"["héé\"\n","x"]"#), "{json}");
    round_trip("|S3", &[2], b"ab\0\xffyz");
}

#[test]
fn nested_json_infers_the_type_numpy_would() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &str, &str); 10] = [
        ("[[1, 2], [3, 4]]", "<i8", "[[1,2],[3,4]]"),
        (
            "[1, 18446744073709551615]",
            "<f8",
            "[1.0,1.8446744073709552e19]",
        ),
        (
            "[true, 18446744073709551615]",
            "<u8",
            "[1,18446744073709551615]",
        ),
        ("[[1, 2], [3, true]]", "<i8", "[[1,2],[3,1]]"),
        ("[1, \"a\"]", "<U21", "[\"1\",\"a\"]"),
        (
            "[1, 2.5, \"NaN\", \"-Infinity\"]",
            "<f8",
            "[1.0,2.5,\"NaN\",\"-Infinity\"]",
        ),
        ("[1, 1e3]", "<f8", "[1.0,1000.0]"),
        ("[true, false]", "|b1", "[true,false]"),
        ("[\"a\", \"bcd\"]", "<U3", "[\"a\",\"bcd\"]"),
        ("[[], []]", "<f8", "[[],[]]"),
    ];
    for (json, descr, back) in cases {
        fs::write(dir.path().join("a.json"), json).unwrap();
        succeeds(dir.path(), &["-a", "0", "a.json", "-o", "a.npy"]);
        assert_eq!(read_npy(&dir.path().join("a.npy")).descr, descr, "{json}");
        let out = succeeds(
            dir.path(),
            &["-a", "0", "a.npy", "-o", "-", "--format", "json"],
        );
        assert_eq!(text(out), format!("{back}\n"), "{json}");
    }
}

#[test]
fn fortran_inputs_are_written_to_json_in_logical_order() {
    let dir = tempfile::tempdir().unwrap();
    // [[1, 2, 3], [4, 5, 6]] stored column by column.
    let data = f32_le(&[1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    write_npy(&dir.path().join("f.npy"), "<f4", &[2, 3], true, &data);
    let args = ["-a", "0", "f.npy", "f.npy", "-o", "-", "--format", "json"];
    let out = succeeds(dir.path(), &args);
    assert_eq!(
        text(out),
        "[[1.0,2.0,3.0],[4.0,5.0,6.0],[1.0,2.0,3.0],[4.0,5.0,6.0]]\n"
    );
}

/// Feeds `json` on stdin and returns the refusal of text that is not JSON or is cut short
/// (exit 1, and a hint that the file may be damaged), which must name `path`.
fn malformed(json: &[u8], path: &str) -> String {
    refused_json(
        json,
        1,
        &format!("is not a valid JSON file: {path}: "),
        true,
    )
}

/// Feeds `json` on stdin and returns the refusal of JSON that holds no tensor (ragged
/// arrays, what numpy makes an object array of, a tensor object at odds with itself): exit 2
/// as for an object array, naming `path`, and no word of damage.
fn unjoinable(json: &[u8], path: &str) -> String {
    refused_json(json, 2, &format!("cannot be joined: {path}: "), false)
}

/// Feeds `json` on stdin: refused with `code`, saying `input 1 (-) ` then `what`, with or
/// without the hint that the file may be damaged.
fn refused_json(json: &[u8], code: i32, what: &str, damaged: bool) -> String {
    let dir = tempfile::tempdir().unwrap();
    let args = ["-a", "0", "-", "-o", "-", "--format", "json"];
    let stderr = refused_with_stdin(dir.path(), &args, json, code);
    assert!(
        stderr.contains(&format!("input 1 (-) {what}")),
        "expected {what:?}:\n{stderr}"
    );
    assert_eq!(stderr.contains("damaged"), damaged, "{stderr}");
    stderr
}

#[test]
fn malformed_json_is_refused_naming_the_path() {
    let e = unjoinable(b"[[1, 2], [3]]", "$[1]");
    assert!(
        e.contains("has 1 elements where") && e.contains("ragged"),
        "{e}"
    );
    unjoinable(b"[[1, 2], [3, 4, 5]]", "$[1][2]");
    unjoinable(b"[[1, 2], 3]", "$[1]");
    unjoinable(b"[[1, 2], [3, [4]]]", "$[1][1]");
    let e = unjoinable(b"[1, null]", "$[1]");
    assert!(e.contains("object array"), "{e}");
    let e = unjoinable(b"[1, 100000000000000000000]", "$[1]");
    assert!(e.contains("beyond the range of uint64"), "{e}");
    let e = malformed(b"[[1, 2], [3, 4", "$[1][1]");
    assert!(e.contains("truncated"), "{e}");
    malformed(b"[1, 2] x", "$");
    malformed(b"[1, 2,]", "$[2]");
    malformed(b"[01]", "$[0]");
    let dir = tempfile::tempdir().unwrap();
    let args = ["-a", "0", "-", "-o", "x.npy", "--input-format", "json"];
    let e = refused_with_stdin(dir.path(), &args, b" \n", 1);
    assert!(e.contains("$: the text is empty"), "{e}");
    let e = refused(dir.path(), &["-a", "0", "-", "-o", "x.npy"], 1);
    assert!(e.contains("standard input is empty"), "{e}");
}

#[test]
fn tensor_objects_are_checked_against_their_dtype_and_shape() {
    // (JSON, the path the refusal names, a phrase it also holds)
    let cases: &[(&str, &str, &str)] = &[
        (
            r#"{"dtype": "int8", "shape": [2, 2], "data": [1, 2, 3, 300]}"#,
            "$.data[3]",
            "out of the range of int8 (-128 to 127)",
        ),
        (
            r#"{"dtype": "uint8", "shape": [2], "data": [1, -1]}"#,
            "$.data[1]",
            "-1 is out of the range of uint8 (0 to 255)",
        ),
        (
            r#"{"dtype": "int32", "shape": [2], "data": [1, 2.5]}"#,
            "$.data[1]",
            "expected an integer for int32, found 2.5",
        ),
        (
            r#"{"dtype": "float16", "shape": [1], "data": [70000]}"#,
            "$.data[0]",
            "out of the range of float16",
        ),
        (
            r#"{"dtype": "float32", "shape": [1], "data": [1e39]}"#,
            "$.data[0]",
            "1e39 is out of the range of float32",
        ),
        (
            r#"{"dtype": "bool", "shape": [1], "data": [1]}"#,
            "$.data[0]",
            "expected true or false for bool, found 1",
        ),
        (
            r#"{"dtype": "U2", "shape": [1], "data": ["abc"]}"#,
            "$.data[0]",
            "the string \"abc\" has 3 characters, more than U2 holds",
        ),
        // Shape and data disagree: nested, flat, too few, too many, and data first.
        (
            r#"{"dtype": "int8", "shape": [2, 2], "data": [[1, 2], [3, 4], [5, 6]]}"#,
            "$.data[2]",
            "the shape says 2",
        ),
        (
            r#"{"dtype": "int8", "shape": [2, 3], "data": [[1, 2], [3, 4]]}"#,
            "$.data[0]",
            "has 2 elements where the shape says 3",
        ),
        (
            r#"{"dtype": "int8", "shape": [2, 2], "data": [1, 2, 3]}"#,
            "$.data",
            "has 3 elements where the shape says 4",
        ),
        (
            r#"{"dtype": "int8", "shape": [2, 2], "data": [1, 2, 3, 4, 5]}"#,
            "$.data[4]",
            "one element too many: the shape says 4",
        ),
        (
            r#"{"data": [1, 2, 3], "shape": [2], "dtype": "int8"}"#,
            "$.data[2]",
            "one element too many: the shape says 2",
        ),
        (
            r#"{"dtype": "float32", "shape": [1]}"#,
            "$",
            "the tensor object has no \"data\" key",
        ),
        (
            r#"{"dtype": "float99", "shape": [1], "data": [1]}"#,
            "$.dtype",
            "unknown element type \"float99\"",
        ),
        (
            r#"{"dtype": "int8", "shape": [-1], "data": []}"#,
            "$.shape[0]",
            "-1 is not a dimension",
        ),
        (
            r#"{"dtype": "int8", "colour": "red", "data": []}"#,
            "$.colour",
            "unknown key: a tensor object has the keys",
        ),
        (
            r#"{"dtype": "complex64", "shape": [1], "data": [[1, 2, 3]]}"#,
            "$.data[0]",
            "a complex value is a pair [re, im]",
        ),
    ];
    for (json, path, phrase) in cases {
        let e = unjoinable(json.as_bytes(), path);
        assert!(e.contains(phrase), "{json}: {e}");
    }
}

#[test]
fn deep_nesting_is_refused_without_recursion() {
    let at = format!("${}", "[0]".repeat(64));
    let e = unjoinable(
        format!("{}1{}", "[".repeat(65), "]".repeat(65)).as_bytes(),
        &at,
    );
    assert!(e.contains("nested more than 64 deep"), "{e}");
    // A million brackets: no stack overflow, in either form.
    unjoinable("[".repeat(1_000_000).as_bytes(), &at);
    let object = format!("{{\"data\": {}", "[".repeat(1_000_000));
    unjoinable(object.as_bytes(), "$.data");
    // 64 is allowed.
    let dir = tempfile::tempdir().unwrap();
    let deep = format!("{}7{}", "[".repeat(64), "]".repeat(64));
    let out = succeeds_with_stdin(
        dir.path(),
        &["-a", "0", "-", "-o", "-", "--format", "json"],
        deep.as_bytes(),
    );
    assert_eq!(text(out), format!("{deep}\n"));
}

/// A temp folder with `count` tiny .npy files of shape [1, 2] holding [i, -i], and their
/// names in order.
fn many_inputs(count: usize) -> (TempDir, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<String> = (0..count).map(|i| format!("s{i:05}.npy")).collect();
    for (i, name) in names.iter().enumerate() {
        let data = le(&[i as i32, -(i as i32)], i32::to_le_bytes);
        fs::write(
            dir.path().join(name),
            npy_bytes("<i4", &[1, 2], false, &data),
        )
        .unwrap();
    }
    (dir, names)
}

#[test]
fn ten_thousand_inputs_from_a_list_join_on_either_axis() {
    let (dir, names) = many_inputs(10_000);
    fs::write(dir.path().join("list.txt"), names.join("\n") + "\n").unwrap();
    let count = names.len() as i32;

    succeeds(
        dir.path(),
        &["-a", "0", "--files-from", "list.txt", "-o", "rows.npy"],
    );
    let rows = read_npy(&dir.path().join("rows.npy"));
    assert_eq!(rows.shape, [10_000, 2]);
    let expected: Vec<i32> = (0..count).flat_map(|i| [i, -i]).collect();
    assert_eq!(rows.data, le(&expected, i32::to_le_bytes));

    // The same inputs from a NUL-separated list on stdin. (Axis 1 of [1, 2] inputs is still
    // one round; `more_inputs_than_a_group_join_in_several_rounds` covers the grouping.)
    let null_list = names.join("\0") + "\0";
    let args = ["-a", "1", "--files-from", "-", "-0", "-o", "cols.npy"];
    succeeds_with_stdin(dir.path(), &args, null_list.as_bytes());
    let cols = read_npy(&dir.path().join("cols.npy"));
    assert_eq!(cols.shape, [1, 20_000]);
    assert_eq!(cols.data, rows.data);
}

#[test]
fn standard_input_and_named_tensors_mix_with_many_listed_inputs() {
    // Past 16 inputs, files are opened ahead on a thread of their own; `-` and FILE:NAME are
    // left to the main one, in their place.
    let (dir, names) = many_inputs(40);
    let mut header = r#"{"t":{"dtype":"I32","shape":[1,2],"data_offsets":[0,8]}}"#.to_string();
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut shard = (header.len() as u64).to_le_bytes().to_vec();
    shard.extend_from_slice(header.as_bytes());
    shard.extend(le(&[1000, -1000], i32::to_le_bytes));
    fs::write(dir.path().join("w.safetensors"), shard).unwrap();
    let piped = npy_bytes("<i4", &[1, 2], false, &le(&[2000, -2000], i32::to_le_bytes));
    let mut args = vec!["-a", "0"];
    args.extend(names[..20].iter().map(String::as_str));
    args.push("-");
    args.extend(names[20..30].iter().map(String::as_str));
    args.push("w.safetensors:t");
    args.extend(names[30..].iter().map(String::as_str));
    args.extend(["-o", "out.npy"]);
    succeeds_with_stdin(dir.path(), &args, &piped);
    let mut expected: Vec<i32> = (0..20).flat_map(|i| [i, -i]).collect();
    expected.extend([2000, -2000]);
    expected.extend((20..30).flat_map(|i| [i, -i]));
    expected.extend([1000, -1000]);
    expected.extend((30..40).flat_map(|i| [i, -i]));
    let out = read_npy(&dir.path().join("out.npy"));
    assert_eq!(out.shape, [42, 2]);
    assert_eq!(out.data, le(&expected, i32::to_le_bytes));
}

#[test]
fn more_inputs_than_a_group_join_in_several_rounds() {
    // 5,000 columns of shape [2, 1] joined on axis 1: two rounds, more inputs than the
    // engine maps at once (4,096), so groups are joined through temporary files first.
    let dir = tempfile::tempdir().unwrap();
    let count: usize = 5_000;
    let names: Vec<String> = (0..count).map(|i| format!("c{i:05}.npy")).collect();
    for (i, name) in names.iter().enumerate() {
        let data = le(&[i as i32, -(i as i32)], i32::to_le_bytes);
        fs::write(
            dir.path().join(name),
            npy_bytes("<i4", &[2, 1], false, &data),
        )
        .unwrap();
    }
    fs::write(dir.path().join("list.txt"), names.join("\n")).unwrap();
    let rows: Vec<i32> = (0..count as i32)
        .chain((0..count as i32).map(|i| -i))
        .collect();
    succeeds(
        dir.path(),
        &["-a", "1", "--files-from", "list.txt", "-o", "wide.npy"],
    );
    let wide = read_npy(&dir.path().join("wide.npy"));
    assert_eq!(wide.shape, [2, count as u64]);
    assert_eq!(wide.data, le(&rows, i32::to_le_bytes));
    // With a cast, converted inside the groups.
    let args = [
        "-a",
        "1",
        "--files-from",
        "list.txt",
        "--cast",
        "int64",
        "-o",
        "w64.npy",
    ];
    succeeds(dir.path(), &args);
    let w64 = read_npy(&dir.path().join("w64.npy"));
    assert_eq!(w64.descr, "<i8");
    let rows: Vec<i64> = rows.iter().map(|&v| i64::from(v)).collect();
    assert_eq!(w64.data, le(&rows, i64::to_le_bytes));
}

#[test]
fn listed_inputs_follow_the_named_ones() {
    let (dir, names) = many_inputs(3);
    fs::write(
        dir.path().join("list"),
        format!("{}\n\n{}\n", names[2], names[0]),
    )
    .unwrap();
    let args = [
        "-a",
        "0",
        &names[1],
        "--files-from",
        "list",
        "-o",
        "-",
        "--format",
        "json",
    ];
    let out = succeeds(dir.path(), &args);
    assert_eq!(text(out), "[[1,-1],[2,-2],[0,0]]\n");
    let stderr = refused(
        dir.path(),
        &["-a", "0", "-", "--files-from", "-", "-o", "x.npy"],
        2,
    );
    assert!(stderr.contains("read only once"), "{stderr}");
    let stderr = refused(
        dir.path(),
        &["-a", "0", "--files-from", "nope", "-o", "x.npy"],
        1,
    );
    assert!(stderr.contains("nope"), "{stderr}");
}

/// Writes `inputs` (descr, values as little-endian bytes) as 1-D `in0.npy`, `in1.npy`, ...
/// into a fresh folder; returns it and the arguments that join them along axis 0 with
/// `--cast to` into `out.npy`.
fn cast_job(to: &str, inputs: &[(&str, Vec<u8>)]) -> (TempDir, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["-a".to_string(), "0".to_string()];
    for (i, (descr, data)) in inputs.iter().enumerate() {
        let itemsize: usize = descr[2..].parse().unwrap();
        let name = format!("in{i}.npy");
        write_npy(
            &dir.path().join(&name),
            descr,
            &[(data.len() / itemsize) as u64],
            false,
            data,
        );
        args.push(name);
    }
    args.extend(["--cast", to, "-o", "out.npy"].map(String::from));
    (dir, args)
}

/// Joins `inputs` (see [`cast_job`]) with `--cast to`; returns the output's descr and data.
fn cast(to: &str, inputs: &[(&str, Vec<u8>)]) -> (String, Vec<u8>) {
    let (dir, args) = cast_job(to, inputs);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    succeeds(dir.path(), &args);
    let out = read_npy(&dir.path().join("out.npy"));
    (out.descr, out.data)
}

/// Joins `inputs` (see [`cast_job`]) with `--cast to`, expecting a refusal with exit 2 and
/// nothing written; returns stderr.
fn cast_refused(to: &str, inputs: &[(&str, Vec<u8>)]) -> String {
    let (dir, args) = cast_job(to, inputs);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    refused(dir.path(), &args, 2)
}

#[test]
fn casts_convert_in_the_single_pass() {
    // float16 1.5, 65504 and float32 0.1 to float32: exact, exact, as is.
    let f16 = le(&[0x3e00u16, 0x7bff], u16::to_le_bytes);
    let f32 = f32_le(&[0.1]);
    let (descr, data) = cast("float32", &[("<f2", f16), ("<f4", f32)]);
    assert_eq!(
        (descr.as_str(), data),
        ("<f4", f32_le(&[1.5, 65504.0, 0.1]))
    );
    // float32 to float16: 0.1 rounds to nearest (0x2e66); 1e6 overflows to infinity.
    let big = f32_le(&[0.1, 1e6, -1e6]);
    let (_, data) = cast("float16", &[("<f4", big)]);
    assert_eq!(data, le(&[0x2e66u16, 0x7c00, 0xfc00], u16::to_le_bytes));
    // float64 to bfloat16 (to JSON: .npy has no bfloat16): 1 + 2^-8 is a tie, to even;
    // a hair above it rounds up, though the hair is lost in a float32 on the way.
    let dir = tempfile::tempdir().unwrap();
    let ties = [1.0 + 2f64.powi(-8), 1.0 + 2f64.powi(-8) + 2f64.powi(-40)];
    write_npy(
        &dir.path().join("a.npy"),
        "<f8",
        &[2],
        false,
        &le(&ties, f64::to_le_bytes),
    );
    let args = [
        "-a", "0", "a.npy", "--cast", "bfloat16", "-o", "-", "--format", "json",
    ];
    assert_eq!(text(succeeds(dir.path(), &args)), "[1.0,1.0078125]\n");
    let e = cast_refused("bfloat16", &[("<f8", le(&ties, f64::to_le_bytes))]);
    assert!(e.contains("no bfloat16"), "{e}");
    // Integers widen and narrow within range; floats truncate toward zero.
    let ints = le(&[-128i32, 127], i32::to_le_bytes);
    let floats = le(&[2.9f64, -2.9], f64::to_le_bytes);
    let (descr, data) = cast("int8", &[("<i4", ints), ("<f8", floats)]);
    assert_eq!((descr.as_str(), data), ("|i1", vec![0x80, 0x7f, 2, 0xfe]));
    let (_, data) = cast("bool", &[("<f4", f32_le(&[0.0, -0.0, 0.5]))]);
    assert_eq!(data, [0, 0, 1]);
    let (_, data) = cast(
        "uint64",
        &[
            ("|u1", vec![255]),
            ("<i8", le(&[i64::MAX], i64::to_le_bytes)),
        ],
    );
    assert_eq!(data, le(&[255u64, i64::MAX as u64], u64::to_le_bytes));
}

#[test]
fn casts_refuse_what_would_wrap_naming_the_element() {
    let ints = le(&[1i32, 2, 300], i32::to_le_bytes);
    let e = cast_refused("int8", &[("<i4", ints)]);
    assert!(
        e.contains("input 1 (in0.npy)") && e.contains("element [2]"),
        "{e}"
    );
    assert!(
        e.contains("300 is out of the range of int8 (-128 to 127)"),
        "{e}"
    );
    let e = cast_refused("uint16", &[("|i1", vec![0]), ("|i1", vec![5, 0xff])]);
    assert!(
        e.contains("input 2 (in1.npy)") && e.contains("element [1]") && e.contains("-1"),
        "{e}"
    );
    let e = cast_refused("int32", &[("<f4", f32_le(&[1.0, f32::NAN]))]);
    assert!(e.contains("element [1]") && e.contains("not finite"), "{e}");
    let e = cast_refused("int64", &[("<f8", le(&[9.3e18f64], f64::to_le_bytes))]);
    assert!(e.contains("out of the range of int64"), "{e}");
    let e = cast_refused("uint8", &[("<f4", f32_le(&[f32::INFINITY]))]);
    assert!(e.contains("not finite"), "{e}");
    // Types the cast does not convert, and names it does not know.
    let e = cast_refused("float32", &[("<c8", f32_le(&[1.0, 2.0]))]);
    assert!(e.contains("cannot cast every input to float32"), "{e}");
    let e = cast_refused("float8", &[("<f4", f32_le(&[1.0]))]);
    assert!(e.contains("--cast float8") && e.contains("bfloat16"), "{e}");
}

#[test]
fn a_fortran_input_is_gathered_swapped_and_cast_into_a_c_order_output() {
    // a: big-endian int32 (2, 3) [[1, 2, 3], [4, 5, 6]] stored column by column; b: C-order
    // int16 (2, 3). Joined along axis 0 as int64: in C order (numpy's choice for mixed
    // layouts), every element of a gathered into its logical place.
    let dir = tempfile::tempdir().unwrap();
    let columns = le(&[1i32, 4, 2, 5, 3, 6], i32::to_be_bytes);
    write_npy(&dir.path().join("a.npy"), ">i4", &[2, 3], true, &columns);
    let rows = le(&[7i16, 8, 9, 10, 11, 12], i16::to_le_bytes);
    write_npy(&dir.path().join("b.npy"), "<i2", &[2, 3], false, &rows);
    let args = [
        "-a", "0", "a.npy", "b.npy", "--cast", "int64", "-o", "out.npy",
    ];
    succeeds(dir.path(), &args);
    let out = read_npy(&dir.path().join("out.npy"));
    assert_eq!(
        (out.descr.as_str(), out.shape.as_slice()),
        ("<i8", &[4u64, 3][..])
    );
    let expected: Vec<i64> = (1..=12).collect();
    assert_eq!(out.data, le(&expected, i64::to_le_bytes));
    // A value the cast refuses, in a gathered input: named by its place in the array.
    let floats = le(&[1f32, 4.0, 2.0, 5.0, 3.0, f32::NAN], f32::to_be_bytes);
    write_npy(&dir.path().join("a.npy"), ">f4", &[2, 3], true, &floats);
    fs::remove_file(dir.path().join("out.npy")).unwrap();
    let e = refused(dir.path(), &args, 2);
    assert!(
        e.contains("input 1 (a.npy)") && e.contains("element [1, 2]"),
        "{e}"
    );
    assert!(!dir.path().join("out.npy").exists());
}

#[test]
fn without_a_cast_mixed_types_are_refused_naming_the_promotion() {
    let dir = tempfile::tempdir().unwrap();
    write_npy(&dir.path().join("a.npy"), "<f2", &[1], false, &[0, 0x3c]);
    write_npy(
        &dir.path().join("b.npy"),
        "<f4",
        &[1],
        false,
        &f32_le(&[1.0]),
    );
    write_npy(&dir.path().join("c.npy"), "|u1", &[1], false, &[1]);
    write_npy(&dir.path().join("d.npy"), "|i1", &[1], false, &[1]);
    let stderr = refused(dir.path(), &["-a", "0", "a.npy", "b.npy", "-o", "x.npy"], 2);
    assert!(stderr.contains("add --cast float32"), "{stderr}");
    let stderr = refused(dir.path(), &["-a", "0", "c.npy", "d.npy", "-o", "x.npy"], 2);
    assert!(stderr.contains("add --cast int16"), "{stderr}");
}

#[test]
fn a_reader_that_leaves_early_ends_tjoin_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let values: Vec<f64> = (0..1_000_000).map(|i| f64::from(i) / 7.0).collect();
    write_npy(
        &dir.path().join("big.npy"),
        "<f8",
        &[1_000_000],
        false,
        &le(&values, f64::to_le_bytes),
    );
    for format in ["json", "npy"] {
        let mut child = Command::new(crate::util::bin())
            .current_dir(dir.path())
            .args([
                "-a", "0", "big.npy", "big.npy", "-o", "-", "--format", format,
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = [0u8; 10];
        child.stdout.take().unwrap().read_exact(&mut first).unwrap();
        // Dropping the read end closes the pipe, as `head -c 10` does when it exits.
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{format}: {stderr}");
        assert!(
            stderr.is_empty(),
            "{format}: stderr should be empty: {stderr}"
        );
    }
}

#[test]
fn empty_tensors_are_written_as_empty_nesting() {
    let dir = tempfile::tempdir().unwrap();
    write_npy(&dir.path().join("e.npy"), "<f4", &[2, 0], false, &[]);
    let args = [
        "-a",
        "1",
        "e.npy",
        "e.npy",
        "-o",
        "-",
        "--format",
        "json",
        "--json-form",
        "object",
    ];
    let out = succeeds(dir.path(), &args);
    assert_eq!(
        text(out),
        "{\"dtype\":\"float32\",\"shape\":[2,0],\"data\":[[],[]]}\n"
    );
}
