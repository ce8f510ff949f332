//! Training checkpoints as real training code saves them (fixtures/training/): a plain model
//! state dict saved by DCP keeps every name as saved; the optimizer's step counters stay
//! exact under `--cast`; `--exclude`/`--only` export the model alone from a torchtitan-like
//! checkpoint; and whatever is left out is said in every run.

use std::fs;
use std::path::Path;

use safetensors::{Dtype, SafeTensors};

use crate::util::{assert_mentions, refused, succeeds, tjoin};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/training");

fn fixture(name: &str) -> String {
    format!("{FIXTURES}/{name}")
}

fn expected(file: &str) -> Vec<u8> {
    fs::read(Path::new(FIXTURES).join(file)).unwrap()
}

/// Runs tjoin with `args` into `out.safetensors` in a fresh folder; its bytes.
fn written(args: &[&str]) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let mut args = args.to_vec();
    args.extend(["-o", "out.safetensors"]);
    succeeds(dir.path(), &args);
    fs::read(dir.path().join("out.safetensors")).unwrap()
}

fn dry_run(args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut args = args.to_vec();
    args.extend(["--dry-run", "-o", "out.safetensors"]);
    String::from_utf8(succeeds(dir.path(), &args)).unwrap()
}

#[test]
fn a_plain_model_state_dict_saved_by_dcp_keeps_every_name_as_saved() {
    // dcp.save(model.state_dict()) of a LlamaForCausalLM, in one process and under FSDP2:
    // its keys start with `model.` beside `lm_head.weight`, but no `model` sub-dict was saved
    // (planner_data records each key as a path of one): every tensor, named as saved.
    for case in ["causal_lm", "causal_lm_fsdp2"] {
        let out = written(&[&fixture(case)]);
        assert!(
            out == expected(&format!("{case}.expected.safetensors")),
            "{case} differs from dcp_to_torch_save's tensors"
        );
    }
    // Without planner_data nothing tells a sub-dict from a prefix: names kept, and said.
    let case = fixture("causal_lm_no_planner_data");
    assert!(written(&[&case]) == expected("causal_lm.expected.safetensors"));
    assert_mentions(
        &dry_run(&[&case]),
        &[
            "kept every tensor under its saved key: .metadata records no planner_data",
            "causal_lm_no_planner_data/.metadata:model to take the entries under `model`",
            "lm_head.weight  ",
        ],
    );
    // A path that does not spell its key would rename a tensor on the file's word.
    let dir = tempfile::tempdir().unwrap();
    let stderr = refused(
        dir.path(),
        &[
            &fixture("causal_lm_bad_planner_data"),
            "-o",
            "out.safetensors",
        ],
        1,
    );
    assert_mentions(
        &stderr,
        &[
            "the planner_data of `lm_head.weight` is a path (`model`, `lm_head`, `weight`) \
           that does not join into its key",
        ],
    );
}

/// Each tensor of the safetensors file `bytes`: its dtype and data.
fn tensors_of(bytes: &[u8]) -> Vec<(String, Dtype, Vec<u8>)> {
    let file = SafeTensors::deserialize(bytes).unwrap();
    let mut tensors: Vec<_> = file
        .tensors()
        .into_iter()
        .map(|(name, view)| (name, view.dtype(), view.data().to_vec()))
        .collect();
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    tensors
}

#[test]
fn cast_keeps_optimizer_step_counters_exact_and_says_so() {
    // AdamW's state after 1001 steps, saved by torch.save and (torchtitan's layout, FSDP2) by
    // DCP: each `step` is a float32 0-d tensor holding 1001, which bfloat16 rounds to 1000.
    let cases = [
        (fixture("adamw.pt"), "state.0.step", 12, 4),
        (
            fixture("titan"),
            "optimizer.state.output.weight.step",
            16,
            4,
        ),
    ];
    for (input, first_step, count, steps) in cases {
        let out = written(&[&input, "--cast", "bfloat16"]);
        let tensors = tensors_of(&out);
        assert_eq!(tensors.len(), count, "{input}");
        let counters: Vec<_> = tensors.iter().filter(|t| t.0.ends_with(".step")).collect();
        assert_eq!(counters.len(), steps, "{input}");
        for (name, dtype, data) in &tensors {
            if name.ends_with(".step") {
                assert_eq!(*dtype, Dtype::F32, "{input}: {name}");
                assert_eq!(data[..], 1001f32.to_le_bytes(), "{input}: {name}");
            } else {
                assert_eq!(*dtype, Dtype::BF16, "{input}: {name}");
            }
        }
        let text = dry_run(&[&input, "--cast", "bfloat16"]);
        assert_mentions(
            &text,
            &[
                &format!("kept exact: {steps} step counters left in their own type by --cast ("),
                &format!("`{first_step}`"),
            ],
        );
    }
}

/// Runs tjoin with `args` into `out.safetensors` in a fresh folder; its standard error.
fn stderr_of(args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let output = tjoin()
        .current_dir(dir.path())
        .args(args)
        .args(["-o", "out.safetensors"])
        .output()
        .unwrap();
    assert!(output.status.success(), "tjoin {args:?} failed");
    assert!(dir.path().join("out.safetensors").is_file());
    String::from_utf8(output.stderr).unwrap()
}

#[test]
fn what_a_real_run_leaves_out_is_said_in_one_line_unless_quiet() {
    let ranks2 = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/dcp_default/ranks2");
    let cases = [
        (
            fixture("adamw.pt"),
            "adamw.pt): 1 value that is not a tensor (--dry-run names each)",
        ),
        (
            fixture("titan"),
            "titan): 45 entries that are not tensors (--dry-run names each)",
        ),
        (
            ranks2.to_string(),
            "ranks2): 1 tensor under `optim`, 2 entries that are not tensors",
        ),
    ];
    for (input, said) in cases {
        let stderr = stderr_of(&[&input]);
        assert_mentions(
            &stderr,
            &["tjoin: warning: left out of the output: input 1 ", said],
        );
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert_eq!(stderr_of(&[&input, "-q"]), "");
    }
    // Nothing left out: nothing said.
    assert_eq!(stderr_of(&[&fixture("causal_lm")]), "");
}

#[test]
fn exclude_and_only_choose_tensors_before_any_check_and_refuse_a_filter_that_removes_nothing() {
    // torchtitan's layout: the model's keys at the top level beside `optimizer`.
    let titan = fixture("titan");
    let out = written(&[&titan, "--exclude", "optimizer.*"]);
    assert!(out == expected("titan.model.expected.safetensors"));
    assert_mentions(
        &dry_run(&[&titan, "--exclude", "optimizer.*"]),
        &[
            "--exclude 'optimizer.*' removed 12 tensors: `optimizer.state.",
            "tok_embeddings.weight         blocks 2 on axis 0",
        ],
    );
    // --only with --exclude: the optimizer's moments without its counters.
    let text = dry_run(&[&titan, "--only", "optimizer.*", "--exclude", "*.step"]);
    assert_mentions(
        &text,
        &[
            "--exclude '*.step' removed 4 tensors",
            "--only 'optimizer.*' removed 4 tensors: `tok_embeddings.weight`",
            "optimizer.state.norm.weight.exp_avg_sq ",
        ],
    );
    assert!(!text.contains("weight.step "), "{text}");
    // Applied before the checks: a whole-file join of two copies refuses the identical
    // 0-d counters unless they are left out.
    let adamw = fixture("adamw.pt");
    let dir = tempfile::tempdir().unwrap();
    let two = ["-a", "0", "--join-identical", &adamw, &adamw];
    refused(
        dir.path(),
        &[&two[..], &["-o", "out.safetensors"]].concat(),
        2,
    );
    written(&[&two[..], &["--exclude", "*.step"]].concat());
    // A filter that removes nothing is refused, like a rule that matches no tensor.
    let cases: [(&[&str], &str); 4] = [
        (
            &["--exclude", "optim.*"],
            "--exclude 'optim.*' matches no tensor of the inputs, so it removes nothing",
        ),
        (
            &["--only", "*"],
            "--only '*' matches every tensor of the inputs, so it removes nothing",
        ),
        (&["--exclude", "*"], "the filters leave input 1 ("),
        (
            &["--only", "tok_*", "--only", "x*"],
            "--only 'x*' matches no tensor",
        ),
    ];
    for (flags, said) in cases {
        let args = [&[titan.as_str()][..], flags, &["-o", "out.safetensors"]].concat();
        assert_mentions(&refused(dir.path(), &args, 2), &[said]);
    }
}
