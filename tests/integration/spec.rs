//! `--spec`: one accept and one refuse case per cell of the rules table in `docs/rules.md` and
//! per row of its DirectML feature-level table, and the spec's worked examples under every
//! profile that accepts them.

use std::fs;
use std::path::Path;

use crate::util::{dir_entries, refused, tjoin, write_npy};

/// One case: inputs of one numpy type and the given shapes, joined under a profile.
struct Case {
    spec: &'static str,
    descr: &'static str,
    shapes: &'static [&'static [u64]],
    axis: Option<&'static str>,
    extra: &'static [&'static str],
    /// `None`: accepted. `Some(texts)`: refused with exit 2 and stderr holding every text.
    refusal: Option<&'static [&'static str]>,
}

const fn accept(
    spec: &'static str,
    descr: &'static str,
    shapes: &'static [&'static [u64]],
    axis: &'static str,
) -> Case {
    Case {
        spec,
        descr,
        shapes,
        axis: Some(axis),
        extra: &[],
        refusal: None,
    }
}

const fn refuse(
    spec: &'static str,
    descr: &'static str,
    shapes: &'static [&'static [u64]],
    axis: &'static str,
    texts: &'static [&'static str],
) -> Case {
    Case {
        spec,
        descr,
        shapes,
        axis: Some(axis),
        extra: &[],
        refusal: Some(texts),
    }
}

const R4: &[&[u64]] = &[&[1, 1, 2, 3], &[1, 1, 2, 4]];
const EVERY: &[&str] = &[
    "onnx",
    "onnx-13",
    "onnx-11",
    "onnx-4",
    "onnx-1",
    "openvino",
    "directml",
    "directml:4.1",
    "directml:3.0",
    "directml:2.1",
    "directml:1.0",
];

/// The cells whose accept/refuse cases differ by profile.
#[rustfmt::skip]
const CASES: &[Case] = &[
    // axis required: every profile but onnx-1, whose default is 1.
    Case { spec: "onnx-13", descr: "<f4", shapes: R4, axis: None, extra: &[], refusal: Some(&["ONNX Concat-13 requires one", "onnx-1"]) },
    Case { spec: "onnx-11", descr: "<f4", shapes: R4, axis: None, extra: &[], refusal: Some(&["ONNX Concat-11 requires one"]) },
    Case { spec: "onnx-4", descr: "<f4", shapes: R4, axis: None, extra: &[], refusal: Some(&["ONNX Concat-4 requires one"]) },
    Case { spec: "openvino", descr: "<f4", shapes: R4, axis: None, extra: &[], refusal: Some(&["OpenVINO Concat-1 requires one"]) },
    Case { spec: "directml", descr: "<f4", shapes: R4, axis: None, extra: &[], refusal: Some(&["DirectML Join at feature level 4.1 requires one"]) },
    Case { spec: "onnx-1", descr: "<f4", shapes: &[&[2, 3], &[2, 4]], axis: None, extra: &[], refusal: None },
    Case { spec: "onnx-1", descr: "<f4", shapes: &[&[2, 3], &[3, 3]], axis: None, extra: &[], refusal: Some(&["cannot join along axis 1", "only be joined along axis 0"]) },
    // join-axis size: any for ONNX and OpenVINO, non-zero for DirectML.
    accept("onnx-13", "<f4", &[&[1, 1, 2, 0], &[1, 1, 2, 4]], "3"),
    accept("openvino", "<f4", &[&[1, 1, 2, 0], &[1, 1, 2, 4]], "3"),
    accept("onnx-1", "<f4", &[&[1, 1, 2, 0], &[1, 1, 2, 4]], "3"),
    refuse("directml", "<f4", &[&[1, 1, 2, 0], &[1, 1, 2, 4]], "3", &["needs a non-zero size along the join axis 3", "^ size 0", "passes --spec onnx-13"]),
    refuse("directml:1.0", "<f4", &[&[1, 1, 2, 3], &[1, 1, 2, 0]], "3", &["DirectML Join at feature level 1.0 needs a non-zero size"]),
    // scalars: rank 0 never joins; DirectML 4.1 takes rank 1.
    accept("directml:4.1", "<f4", &[&[3], &[4]], "0"),
    // element types, column by column.
    accept("onnx-13", "|b1", R4, "3"),
    accept("onnx-13", "<c8", R4, "3"),
    accept("onnx-13", "<U3", R4, "3"),
    refuse("onnx-13", "<M8[ns]", R4, "3", &["ONNX Concat-13 does not support datetime64[ns] tensors", "has no such element type"]),
    accept("onnx-11", "<c16", R4, "3"),
    refuse("onnx-11", "<m8[s]", R4, "3", &["ONNX Concat-11 does not support timedelta64[s]"]),
    accept("onnx-4", "|b1", R4, "3"),
    refuse("onnx-4", "|V4", R4, "3", &["ONNX Concat-4 does not support V4"]),
    accept("onnx-1", "<f2", R4, "3"),
    accept("onnx-1", "<f8", R4, "3"),
    refuse("onnx-1", "<i4", R4, "3", &["ONNX Concat-1 does not support int32", "supports double, float, float16", "passes --spec onnx-13"]),
    refuse("onnx-1", "|b1", R4, "3", &["ONNX Concat-1 does not support bool"]),
    accept("openvino", "|i1", R4, "3"),
    accept("openvino", "<u8", R4, "3"),
    refuse("openvino", "|b1", R4, "3", &["OpenVINO Concat-1 does not support bool", "passes --spec onnx-13"]),
    refuse("openvino", "<U3", R4, "3", &["OpenVINO Concat-1 does not support U3"]),
    refuse("openvino", "<c8", R4, "3", &["OpenVINO Concat-1 does not support complex64"]),
    refuse("directml", "|b1", R4, "3", &["DirectML Join at feature level 4.1 does not support bool"]),
    refuse("directml", "<c8", R4, "3", &["does not support complex64"]),
    // DirectML feature levels: ranks.
    accept("directml:4.1", "<f4", &[&[1, 1, 1, 1, 1, 1, 2, 3], &[1, 1, 1, 1, 1, 1, 2, 4]], "7"),
    refuse("directml:4.1", "<f4", &[&[1, 1, 1, 1, 1, 1, 1, 2, 3], &[1, 1, 1, 1, 1, 1, 1, 2, 4]], "8", &["DirectML Join at feature level 4.1 supports 1 to 8 dimensions", "has 9"]),
    accept("directml:3.0", "<f4", R4, "3"),
    accept("directml:3.0", "<f4", &[&[1, 1, 1, 2, 3], &[1, 1, 1, 2, 4]], "4"),
    refuse("directml:3.0", "<f4", &[&[1, 2, 3], &[1, 2, 4]], "2", &["DirectML Join at feature level 3.0 supports 4 to 5 dimensions", "input 2 (b.npy) has 3", "feature level 4.1 supports 1 to 8"]),
    refuse("directml:3.0", "<f4", &[&[1, 1, 1, 1, 2, 3], &[1, 1, 1, 1, 2, 4]], "5", &["supports 4 to 5 dimensions"]),
    accept("directml:2.1", "<f4", R4, "3"),
    refuse("directml:2.1", "<f4", &[&[1, 1, 1, 2, 3], &[1, 1, 1, 2, 4]], "4", &["DirectML Join at feature level 2.1 supports 4 dimensions", "feature level 3.0 supports 4 to 5"]),
    accept("directml:1.0", "<f4", R4, "3"),
    refuse("directml:1.0", "<f4", &[&[2, 3], &[2, 4]], "1", &["DirectML Join at feature level 1.0 supports 4 dimensions"]),
    // DirectML feature levels: element types.
    accept("directml:4.1", "<f8", R4, "3"),
    accept("directml:4.1", "<i8", R4, "3"),
    accept("directml:4.1", "|u1", R4, "3"),
    accept("directml:3.0", "|i1", R4, "3"),
    refuse("directml:3.0", "<f8", R4, "3", &["feature level 3.0 does not support float64", "FLOAT64 is not supported", "--spec directml:4.1"]),
    accept("directml:2.1", "|u1", R4, "3"),
    refuse("directml:2.1", "<u8", R4, "3", &["feature level 2.1 does not support uint64"]),
    accept("directml:1.0", "<u2", R4, "3"),
    refuse("directml:1.0", "|i1", R4, "3", &["feature level 1.0 does not support int8", "supports FLOAT32, FLOAT16, INT32, INT16, UINT32, UINT16", "int8 is supported by --spec directml:4.1, directml:3.0, directml:2.1"]),
    // A feature level without a row of its own takes the rules of the highest below it.
    refuse("directml:2.0", "|i1", R4, "3", &["feature level 2.0 (the rules of 1.0) does not support int8"]),
    accept("directml:5.0", "<f8", &[&[3], &[4]], "0"),
];

#[test]
fn each_profile_accepts_and_refuses_what_its_column_says() {
    let mut failures = Vec::new();
    for case in CASES {
        if let Err(why) = run(case) {
            failures.push(format!(
                "--spec {} {} {:?} axis {:?}: {why}",
                case.spec, case.descr, case.shapes, case.axis
            ));
        }
    }
    assert_no_failures(&failures);
}

/// Rules every profile states alike: at least one input, equal rank, no scalars, equal
/// dims but the axis, one element type, an axis in range (negative ones counted from the
/// back, normalized for the profiles whose operator axis is unsigned), the output shape.
#[test]
fn every_profile_applies_the_shared_rules() {
    let mut failures = Vec::new();
    for &spec in EVERY {
        let shared: Vec<Case> = vec![
            accept(spec, "<f4", &[&[1, 1, 2, 3]], "3"),
            accept(spec, "<f4", R4, "-1"),
            refuse(
                spec,
                "<f4",
                R4,
                "-5",
                &["axis -5 is out of range for inputs of rank 4 (valid: -4 to 3)"],
            ),
            refuse(spec, "<f4", R4, "4", &["axis 4 is out of range"]),
            refuse(
                spec,
                "<f4",
                &[&[1, 1, 2, 3], &[1, 2, 3]],
                "0",
                &["different rank", "input 2 (b.npy) has rank 3"],
            ),
            refuse(
                spec,
                "<f4",
                R4,
                "1",
                &[
                    "cannot join along axis 1",
                    "dimension 3",
                    "4 != 3",
                    "only be joined along axis 3 (or -1)",
                ],
            ),
            refuse(spec, "<f4", &[&[], &[]], "0", &["scalar"]),
            Case {
                extra: &["--expect-shape", "1,1,2,7"],
                ..accept(spec, "<f4", R4, "3")
            },
            Case {
                extra: &["--expect-shape", "1,1,2,8"],
                ..refuse(
                    spec,
                    "<f4",
                    R4,
                    "3",
                    &["not the expected [1, 1, 2, 8]", "3 + 4 = 7"],
                )
            },
        ];
        for case in &shared {
            if let Err(why) = run(case) {
                failures.push(format!(
                    "--spec {spec} {:?} axis {:?} {:?}: {why}",
                    case.shapes, case.axis, case.extra
                ));
            }
        }
        if let Err(why) = run_mixed_types(spec) {
            failures.push(format!("--spec {spec} mixed types: {why}"));
        }
        let zero_inputs = tjoin()
            .args(["--spec", spec, "--dry-run", "-a", "0"])
            .output()
            .unwrap();
        if zero_inputs.status.code() != Some(2) {
            failures.push(format!(
                "--spec {spec} with no inputs exited {:?}",
                zero_inputs.status.code()
            ));
        }
    }
    assert_no_failures(&failures);
}

#[test]
fn dry_run_shows_the_operators_axis_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    write_inputs(dir.path(), "<f4", R4);
    let out = tjoin()
        .current_dir(dir.path())
        .args([
            "--spec",
            "directml:3.0",
            "--dry-run",
            "-a",
            "-1",
            "a.npy",
            "b.npy",
            "-o",
            "out.npy",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let report = String::from_utf8(out.stdout).unwrap();
    assert!(
        report.contains("passes DirectML Join at feature level 3.0"),
        "{report}"
    );
    assert!(report.contains("axis: 3 (given as -1)"), "{report}");
    assert!(report.contains("[1, 1, 2, 7]"), "{report}");
    assert_eq!(dir_entries(dir.path()), ["a.npy", "b.npy"]);
}

#[test]
fn unknown_profiles_are_usage_errors_listing_the_known_ones() {
    tjoin()
        .args(["--spec", "tensorrt", "-a", "0", "a.npy", "-o", "b.npy"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("known: onnx, directml, onnx-13"));
}

/// The worked examples of `docs/rules.md`, run for real under every profile (all accept them:
/// they are rank-4 float32/float16 joins with non-zero sizes), compared with numpy's output.
#[test]
fn worked_examples_pass_every_profile() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/npy");
    let cases = [
        "dml_ex1_axis3",
        "dml_ex1_axis_neg1",
        "dml_ex2_axis1",
        "dml_ex2_axis2",
        "dml_ex2_axis3",
        "openvino_axis1",
        "openvino_axis_neg3",
    ];
    let mut failures = Vec::new();
    for case in cases {
        let dir = fixtures.join(case);
        let args = fs::read_to_string(dir.join("args.txt")).unwrap();
        let mut inputs: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("in"))
            .collect();
        inputs.sort();
        let expected = fs::read(dir.join("expected.npy")).unwrap();
        for spec in EVERY {
            let out_dir = tempfile::tempdir().unwrap();
            let out = out_dir.path().join("out.npy");
            let status = tjoin()
                .args(["--spec", spec])
                .args(args.split_whitespace())
                .args(&inputs)
                .arg("-o")
                .arg(&out)
                .output()
                .unwrap();
            if !status.status.success() || fs::read(&out).ok().as_deref() != Some(&expected[..]) {
                failures.push(format!(
                    "{case} under {spec}: {}",
                    String::from_utf8_lossy(&status.stderr)
                ));
            }
        }
    }
    assert_no_failures(&failures);
}

fn run(case: &Case) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let names = write_inputs(dir.path(), case.descr, case.shapes);
    let mut command = tjoin();
    command
        .current_dir(dir.path())
        .args(["--spec", case.spec, "--dry-run"]);
    if let Some(axis) = case.axis {
        command.args(["-a", axis]);
    }
    let out = command.args(case.extra).args(&names).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    match case.refusal {
        None if out.status.code() != Some(0) => Err(format!("refused: {stderr}")),
        None if !stdout.starts_with("dry run: nothing written; the join passes ") => Err(format!(
            "accepted, but the report does not say it passes:\n{stdout}"
        )),
        None => Ok(()),
        Some(_) if out.status.code() != Some(2) => {
            Err(format!("exit {:?}, stderr: {stderr}", out.status.code()))
        }
        Some(_) if !stdout.is_empty() || !stderr.starts_with("tjoin: error: ") => Err(format!(
            "refused, but not as an error on stderr only:\nstdout: {stdout}\nstderr: {stderr}"
        )),
        Some(texts) => match texts.iter().find(|t| !stderr.contains(*t)) {
            Some(missing) => Err(format!("stderr lacks {missing:?}:\n{stderr}")),
            None => Ok(()),
        },
    }
}

/// Fails listing every case in `failures`, when there is one.
#[track_caller]
fn assert_no_failures(failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// float32 + float64 under `spec`: refused for having two element types.
fn run_mixed_types(spec: &str) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    write_inputs(dir.path(), "<f4", &[&[1, 1, 2, 3]]);
    write_npy(
        &dir.path().join("b.npy"),
        "<f8",
        &[1, 1, 2, 3],
        false,
        &[0; 48],
    );
    let out = tjoin()
        .current_dir(dir.path())
        .args(["--spec", spec, "--dry-run", "-a", "3", "a.npy", "b.npy"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(2) && stderr.contains("different element types") {
        Ok(())
    } else {
        Err(format!("exit {:?}: {stderr}", out.status.code()))
    }
}

/// Writes inputs `a.npy`, `b.npy`, ... of zeros and returns their names.
fn write_inputs(dir: &Path, descr: &str, shapes: &[&[u64]]) -> Vec<String> {
    let itemsize: u64 = descr
        .trim_start_matches(['<', '>', '|'])
        .chars()
        .skip(1)
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap();
    let itemsize = if descr.contains('U') {
        itemsize * 4
    } else {
        itemsize
    };
    shapes
        .iter()
        .enumerate()
        .map(|(i, shape)| {
            let name = format!("{}.npy", char::from(b'a' + i as u8));
            let bytes = shape.iter().product::<u64>() * itemsize;
            write_npy(
                &dir.join(&name),
                descr,
                shape,
                false,
                &vec![0; bytes as usize],
            );
            name
        })
        .collect()
}

/// Writes a one-tensor .safetensors file named `name.safetensors` of zeros.
fn write_safetensors(dir: &Path, name: &str, tensors: &[(&str, &str, &[u64])]) -> String {
    let itemsize = |dtype: &str| match dtype {
        "BF16" | "F16" => 2,
        "I8" | "U8" => 1,
        _ => 4,
    };
    let mut header = String::from("{");
    let mut offset = 0;
    for (i, (tensor, dtype, shape)) in tensors.iter().enumerate() {
        let bytes = shape.iter().product::<u64>() * itemsize(dtype);
        let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
        header.push_str(&format!(
            "{}\"{tensor}\":{{\"dtype\":\"{dtype}\",\"shape\":[{}],\"data_offsets\":[{offset},{}]}}",
            if i > 0 { "," } else { "" },
            dims.join(","),
            offset + bytes
        ));
        offset += bytes;
    }
    header.push('}');
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(header.as_bytes());
    file.resize(file.len() + offset as usize, 0);
    let file_name = format!("{name}.safetensors");
    fs::write(dir.join(&file_name), file).unwrap();
    file_name
}

#[test]
fn bfloat16_is_onnx_13_and_openvino_only() {
    let dir = tempfile::tempdir().unwrap();
    let a = write_safetensors(dir.path(), "a", &[("x", "BF16", &[1, 1, 2, 3])]);
    let b = write_safetensors(dir.path(), "b", &[("x", "BF16", &[1, 1, 2, 4])]);
    for (spec, refusal) in [
        ("onnx-13", None),
        ("openvino", None),
        ("onnx-11", Some("ONNX Concat-11 does not support bfloat16")),
        ("onnx-4", Some("ONNX Concat-4 does not support bfloat16")),
        ("onnx-1", Some("ONNX Concat-1 does not support bfloat16")),
        (
            "directml",
            Some("DirectML Join at feature level 4.1 does not support bfloat16"),
        ),
    ] {
        let out = tjoin()
            .current_dir(dir.path())
            .args(["--spec", spec, "--dry-run", "-a", "3", &a, &b])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        match refusal {
            None => assert!(out.status.success(), "{spec}: {stderr}"),
            Some(text) => {
                assert_eq!(out.status.code(), Some(2), "{spec}");
                assert!(stderr.contains(text), "{spec}: {stderr}");
            }
        }
    }
}

#[test]
fn spec_applies_to_each_tensor_of_a_container_join() {
    let dir = tempfile::tempdir().unwrap();
    let tensors: &[(&str, &str, &[u64])] =
        &[("w", "F16", &[1, 1, 2, 2]), ("q", "I8", &[1, 1, 2, 2])];
    let a = write_safetensors(dir.path(), "a", tensors);
    let b = write_safetensors(dir.path(), "b", tensors);
    // Files of zeros: identical tensors, joined on purpose.
    let args = |spec| {
        let join = [
            "--join-identical",
            "-a",
            "3",
            &a,
            &b,
            "-o",
            "out.safetensors",
        ];
        [&["--spec", spec][..], &join].concat()
    };
    let stderr = refused(dir.path(), &args("directml:1.0"), 2);
    assert!(
        stderr.contains("tensor `q`: DirectML Join at feature level 1.0 does not support int8"),
        "{stderr}"
    );
    assert!(!stderr.contains("tensor `w`"), "{stderr}");
    tjoin()
        .current_dir(dir.path())
        .args(args("directml:2.1"))
        .assert()
        .success();
    let written = fs::read(dir.path().join("out.safetensors")).unwrap();
    let joined = safetensors::SafeTensors::deserialize(&written).unwrap();
    for (name, dtype) in [
        ("w", safetensors::Dtype::F16),
        ("q", safetensors::Dtype::I8),
    ] {
        let tensor = joined.tensor(name).unwrap();
        assert_eq!(tensor.dtype(), dtype, "{name}");
        assert_eq!(tensor.shape(), [1, 1, 2, 4], "{name}");
    }
}
