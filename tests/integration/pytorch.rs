//! PyTorch checkpoints (issue 30): files torch.save wrote (fixtures/pytorch/), converted byte
//! for byte as `safetensors.torch.save_file(torch.load(f, weights_only=True), out,
//! metadata={"format": "pt"})` writes them, and hostile files refused without running
//! anything, each with the opcode or member at fault, never a panic or a leftover output.

use std::fs;
use std::path::Path;

use crate::util::{assert_mentions, refused, succeeds};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/pytorch");

fn fixture(name: &str) -> String {
    Path::new(FIXTURES)
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// Runs tjoin on `inputs` into `out.safetensors` in a fresh folder and returns its bytes.
fn converted(inputs: &[&str]) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let mut args: Vec<String> = inputs.iter().map(|i| fixture(i)).collect();
    args.extend(["-o".to_string(), "out.safetensors".to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    succeeds(dir.path(), &args);
    fs::read(dir.path().join("out.safetensors")).unwrap()
}

fn expected(name: &str) -> Vec<u8> {
    fs::read(fixture(name)).unwrap()
}

#[test]
fn every_dtype_converts_as_save_file_writes_it() {
    // ZIP form, protocol 2 (torch.save's default) and 4; the legacy form.
    let want = expected("dtypes.expected.safetensors");
    assert!(converted(&["dtypes.pt"]) == want, "the ZIP form differs");
    assert!(
        converted(&["dtypes_proto4.pt"]) == want,
        "protocol 4 differs"
    );
    assert!(
        converted(&["dtypes_legacy.pt"]) == expected("dtypes_legacy.expected.safetensors"),
        "the legacy form differs"
    );
}

#[test]
fn views_tied_weights_and_parameters_convert_as_contiguous_copies() {
    let want = expected("views.expected.safetensors");
    assert!(converted(&["views.pt"]) == want, "the ZIP form differs");
    assert!(
        converted(&["views_legacy.pt"]) == want,
        "the legacy form differs"
    );
    let dir = tempfile::tempdir().unwrap();
    let plan = succeeds(dir.path(), &["--dry-run", &fixture("views.pt")]);
    let plan = String::from_utf8(plan).unwrap();
    assert!(
        plan.contains("`embed`, `lm_head` share one storage"),
        "{plan}"
    );
}

#[test]
fn nested_dicts_are_flattened_with_dots_and_plain_values_noted() {
    assert!(converted(&["nested.pt"]) == expected("nested.expected.safetensors"));
    assert!(
        converted(&["nested.pt:model.embed.weight"])
            == expected("nested_model.expected.safetensors")
    );
    let dir = tempfile::tempdir().unwrap();
    let plan = succeeds(dir.path(), &["--dry-run", &fixture("nested.pt")]);
    let plan = String::from_utf8(plan).unwrap();
    for line in [
        "skipped `epoch`, not a tensor: an int, 3",
        "skipped `name`, not a tensor: a string, `run-1`",
        "optimizer.state.0.exp_avg",
        "model.head.bias",
    ] {
        assert!(plan.contains(line), "{line:?} missing from\n{plan}");
    }
}

#[test]
fn a_bare_tensor_reads_as_one_unnamed_tensor() {
    let dir = tempfile::tempdir().unwrap();
    succeeds(dir.path(), &[&fixture("bare.pt"), "-o", "out.npy"]);
    let bytes = fs::read(dir.path().join("out.npy")).unwrap();
    assert!(bytes.ends_with(&[0, 0, 1, 0, 2, 0, 3, 0]), "{bytes:?}");
    // Into a format of named tensors it is one tensor, named as a .npy's would be, not a
    // checkpoint that lacks its own unnamed tensor.
    succeeds(dir.path(), &[&fixture("bare.pt"), "-o", "out.safetensors"]);
    let bytes = fs::read(dir.path().join("out.safetensors")).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let names: Vec<String> = file.names().into_iter().map(str::to_string).collect();
    assert_eq!(names.len(), 1, "{names:?}");
    assert_eq!(
        file.tensor(&names[0]).unwrap().data(),
        [0, 0, 1, 0, 2, 0, 3, 0]
    );
}

#[test]
fn what_tjoin_cannot_read_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, i32, &[&str])] = &[
        (
            "refused_quantized.pt",
            2,
            &["refused_quantized.pt:q", "quantized", "dequantize()"],
        ),
        (
            "refused_sparse.pt",
            2,
            &["refused_sparse.pt:s", "sparse", "to_dense()"],
        ),
    ];
    for (file, code, needles) in cases {
        let stderr = refused(
            dir.path(),
            &[&fixture(file), "-o", "out.safetensors"],
            *code,
        );
        assert_mentions(&stderr, needles);
    }
    // The tensors beside a quantized one can still be named.
    succeeds(
        dir.path(),
        &[&fixture("refused_quantized.pt:ok"), "-o", "ok.safetensors"],
    );
    // tjoin writes no checkpoint.
    let stderr = refused(dir.path(), &[&fixture("bare.pt"), "-o", "out.pt"], 2);
    assert_mentions(&stderr, &["does not write them", "safetensors"]);
}

#[test]
fn hostile_checkpoints_are_refused_and_run_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, i32, &[&str])] = &[
        (
            "os_system.pt",
            2,
            &[
                "opcode GLOBAL at byte 2",
                "the pickle calls os.system, which a checkpoint never needs: tjoin runs no \
                 code from a file",
            ],
        ),
        (
            "eval.pt",
            2,
            &["opcode STACK_GLOBAL at byte 18", "builtins.eval"],
        ),
        ("getattr.pt", 2, &["builtins.getattr"]),
        (
            "setitems_list.pt",
            2,
            &[
                "opcode SETITEMS at byte 8",
                "sets items of a list, not of a dict",
            ],
        ),
        ("deep.pt", 2, &["opcode MARK at byte 10002", "marks"]),
        (
            "memo.pt",
            2,
            &["opcode LONG_BINPUT at byte 3", "memo index 4294967295"],
        ),
        (
            "short_storage.pt",
            1,
            &[
                "short_storage/data/0 holds 8 bytes",
                "6 elements of 4 bytes, 24 bytes",
            ],
        ),
        (
            "legacy_short.pt",
            1,
            &[
                "storage 0 of 6 elements",
                "reaches past the end of the file",
            ],
        ),
        (
            "compressed_storage.pt",
            2,
            &["compressed_storage/data/0 is compressed (zip method 8)"],
        ),
        (
            "bomb.pt",
            1,
            &["its member bomb/data.pkl: it is longer than 268,435,456 bytes"],
        ),
        ("old.pt", 2, &["TAR archive"]),
    ];
    for (file, code, needles) in cases {
        let path = fixture(&format!("hostile/{file}"));
        let stderr = refused(dir.path(), &[&path, "-o", "out.safetensors"], *code);
        assert_mentions(&stderr, needles);
        assert!(!dir.path().join("pwned.txt").exists());
    }
}

#[test]
fn a_checkpoint_is_told_from_an_npz_by_its_members() {
    // Named .npz, it is still read as the checkpoint it is; an .npz named .pt is still an .npz.
    let dir = tempfile::tempdir().unwrap();
    fs::copy(fixture("views.pt"), dir.path().join("views.npz")).unwrap();
    succeeds(dir.path(), &["views.npz", "-o", "out.safetensors"]);
    assert!(
        fs::read(dir.path().join("out.safetensors")).unwrap()
            == expected("views.expected.safetensors")
    );
    let npz = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/containers/npz/day2.npz"
    );
    fs::copy(npz, dir.path().join("day2.pt")).unwrap();
    let plan = String::from_utf8(succeeds(dir.path(), &["--dry-run", "day2.pt"])).unwrap();
    assert!(plan.contains("day2.pt  npz"), "{plan}");
}
