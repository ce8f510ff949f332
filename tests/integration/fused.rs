//! Fused tensors, replicated pieces and malformed rules (issue 29, items 1, 2, 3 and 8). Each
//! test builds a tiny model, splits it into rank files the way Megatron-LM or vLLM splits it
//! (a fused tensor part by part: each rank holds a slice of every part), merges the ranks
//! with tjoin and checks that every tensor is the original's, byte for byte; the plain merge
//! of a fused tensor, which writes a wrong model of the right shape, is refused.

use std::fs;
use std::path::Path;

use safetensors::tensor::{Dtype, SafeTensors, TensorView};

use crate::util::{assert_mentions, refused, succeeds, tjoin};

/// A float32 tensor: its name, shape and values (distinct, so any misplaced element shows).
#[derive(Clone)]
struct T {
    name: String,
    shape: Vec<usize>,
    values: Vec<f32>,
}

/// A tensor of `shape` whose values count up from `seed`.
fn tensor(name: &str, shape: &[usize], seed: f32) -> T {
    let count: usize = shape.iter().product();
    T {
        name: name.to_string(),
        shape: shape.to_vec(),
        values: (0..count).map(|i| seed + i as f32).collect(),
    }
}

impl T {
    /// (elements before the axis, size along it, elements after it).
    fn around(&self, axis: usize) -> (usize, usize, usize) {
        let outer = self.shape[..axis].iter().product();
        let inner = self.shape[axis + 1..].iter().product();
        (outer, self.shape[axis], inner)
    }

    /// Its elements `range` along `axis`, as numpy's `t[..., a:b, ...]`.
    fn slice(&self, axis: usize, range: std::ops::Range<usize>) -> T {
        let (outer, len, inner) = self.around(axis);
        let mut values = Vec::new();
        for o in 0..outer {
            let round = &self.values[o * len * inner..(o + 1) * len * inner];
            values.extend_from_slice(&round[range.start * inner..range.end * inner]);
        }
        let mut shape = self.shape.clone();
        shape[axis] = range.len();
        T {
            name: self.name.clone(),
            shape,
            values,
        }
    }

    /// The pieces joined along `axis`, as `numpy.concatenate`.
    fn concat(pieces: &[T], axis: usize) -> T {
        let (outer, _, _) = pieces[0].around(axis);
        let mut values = Vec::new();
        for o in 0..outer {
            for piece in pieces {
                let (_, len, inner) = piece.around(axis);
                values.extend_from_slice(&piece.values[o * len * inner..(o + 1) * len * inner]);
            }
        }
        let mut shape = pieces[0].shape.clone();
        shape[axis] = pieces.iter().map(|p| p.shape[axis]).sum();
        T {
            name: pieces[0].name.clone(),
            shape,
            values,
        }
    }

    /// `ranks` equal pieces along `axis`: a column- or row-parallel split.
    fn split(&self, axis: usize, ranks: usize) -> Vec<T> {
        let step = self.shape[axis] / ranks;
        (0..ranks)
            .map(|r| self.slice(axis, r * step..(r + 1) * step))
            .collect()
    }

    /// Megatron's and vLLM's split of a fused tensor: its parts along `axis` in the
    /// proportions `shares`, each split into `ranks` pieces; rank r holds piece r of every
    /// part, side by side.
    fn split_fused(&self, axis: usize, shares: &[usize], ranks: usize) -> Vec<T> {
        let unit = self.shape[axis] / shares.iter().sum::<usize>();
        let mut start = 0;
        let parts: Vec<Vec<T>> = shares
            .iter()
            .map(|share| {
                let part = self.slice(axis, start..start + share * unit);
                start += share * unit;
                part.split(axis, ranks)
            })
            .collect();
        (0..ranks)
            .map(|r| {
                let pieces: Vec<T> = parts.iter().map(|p| p[r].clone()).collect();
                T::concat(&pieces, axis)
            })
            .collect()
    }

    fn bytes(&self) -> Vec<u8> {
        self.values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }
}

/// How a model's tensor is split into ranks.
enum Split {
    /// Equal pieces along the axis.
    Plain(usize),
    /// A fused tensor's parts, each split along the axis.
    Fused(usize, &'static [usize]),
    /// Every rank holds all of it.
    Replicated,
    /// Equal pieces along the axis, each held by this many consecutive ranks.
    Replicas(usize, usize),
}

/// Writes `tensors` as a safetensors file.
fn write(path: &Path, tensors: &[T]) {
    let bytes: Vec<Vec<u8>> = tensors.iter().map(T::bytes).collect();
    let views: Vec<(String, TensorView)> = tensors
        .iter()
        .zip(&bytes)
        .map(|(t, b)| {
            let view = TensorView::new(Dtype::F32, t.shape.clone(), b).unwrap();
            (t.name.clone(), view)
        })
        .collect();
    let data = safetensors::serialize(views, None).unwrap();
    fs::write(path, data).unwrap();
}

/// The unsplit model's header, which proves a merge complete (issue 41: a merge missing a
/// rank splits evenly too): `split_model` writes it.
const LIKE: [&str; 2] = ["--like", "whole.safetensors"];

/// Splits `model` into `ranks` files `a.safetensors`, `b.safetensors`, ... in `dir` (names
/// without rank numbers: the order they are given in is the test's), and writes the model
/// whole as `whole.safetensors` ([`LIKE`]); returns the ranks' names.
fn split_model(dir: &Path, model: &[(T, Split)], ranks: usize) -> Vec<String> {
    let whole: Vec<T> = model.iter().map(|(t, _)| t.clone()).collect();
    write(&dir.join("whole.safetensors"), &whole);
    let mut held: Vec<Vec<T>> = vec![Vec::new(); ranks];
    for (t, split) in model {
        let pieces = match *split {
            Split::Plain(axis) => t.split(axis, ranks),
            Split::Fused(axis, shares) => t.split_fused(axis, shares, ranks),
            Split::Replicated => vec![t.clone(); ranks],
            Split::Replicas(axis, k) => {
                let pieces = t.split(axis, ranks / k);
                (0..ranks).map(|r| pieces[r / k].clone()).collect()
            }
        };
        for (r, piece) in pieces.into_iter().enumerate() {
            held[r].push(piece);
        }
    }
    (0..ranks)
        .map(|r| {
            let name = format!("{}.safetensors", (b'a' + r as u8) as char);
            write(&dir.join(&name), &held[r]);
            name
        })
        .collect()
}

/// Fails unless `path` holds exactly the tensors of `model`, each byte for byte.
#[track_caller]
fn assert_rebuilt(path: &Path, model: &[(T, Split)]) {
    let bytes = fs::read(path).unwrap();
    let merged = SafeTensors::deserialize(&bytes).unwrap();
    assert_eq!(merged.len(), model.len(), "{:?}", merged.names());
    for (t, _) in model {
        let got = merged.tensor(&t.name).unwrap();
        assert_eq!(got.shape(), t.shape.as_slice(), "{}", t.name);
        assert!(
            got.data() == t.bytes(),
            "{}: not the original's values",
            t.name
        );
    }
}

/// Merges `ranks` in `dir` with the words `rules` (split at blanks) into `model.safetensors`,
/// which must be `model`; removes it afterwards.
#[track_caller]
fn merges(dir: &Path, rules: &[&str], ranks: &[String], model: &[(T, Split)]) {
    let mut args: Vec<&str> = rules.to_vec();
    args.extend(ranks.iter().map(String::as_str));
    args.extend(LIKE);
    args.extend(["-o", "model.safetensors"]);
    succeeds(dir, &args);
    assert_rebuilt(&dir.join("model.safetensors"), model);
    fs::remove_file(dir.join("model.safetensors")).unwrap();
}

/// Runs tjoin in `dir` with `words` then `ranks`, which must be refused (exit 2, nothing
/// written); returns stderr.
#[track_caller]
fn refuses(dir: &Path, words: &[&str], ranks: &[String]) -> String {
    let mut args: Vec<&str> = words.to_vec();
    args.extend(ranks.iter().map(String::as_str));
    args.extend(["-o", "model.safetensors"]);
    refused(dir, &args, 2)
}

/// GPT-2's attention: `c_attn` is a Conv1D `[in, 3 * out]` holding q | k | v along its last
/// axis, `c_proj` a Conv1D `[out, in]` split along its input features (axis 0).
fn gpt2() -> Vec<(T, Split)> {
    vec![
        (
            tensor("transformer.h.0.attn.c_attn.weight", &[4, 24], 0.0),
            Split::Fused(1, &[1, 1, 1]),
        ),
        (
            tensor("transformer.h.0.attn.c_attn.bias", &[24], 1000.0),
            Split::Fused(0, &[1, 1, 1]),
        ),
        (
            tensor("transformer.h.0.attn.c_proj.weight", &[8, 4], 2000.0),
            Split::Plain(0),
        ),
        (
            tensor("transformer.h.0.ln_1.weight", &[4], 3000.0),
            Split::Replicated,
        ),
    ]
}

#[test]
fn gpt2_c_attn_split_per_q_k_v_block_merges_chunk_wise_over_2_and_4_ranks() {
    let model = gpt2();
    let rules = [
        "--axis-for",
        "*.c_attn.weight=1 chunks 3",
        "--axis-for",
        "*.c_attn.bias=0 chunks 3",
        "--axis-for",
        "*.c_proj.weight=0",
        "--keep",
        "*.ln_1.*",
    ];
    for ranks in [2, 4] {
        let dir = tempfile::tempdir().unwrap();
        let files = split_model(dir.path(), &model, ranks);
        merges(dir.path(), &rules, &files, &model);
        // The same rules from a file; -1 counts from the end.
        fs::write(
            dir.path().join("gpt2.rules"),
            "*.c_attn.weight = -1 chunks 3   # Conv1D: [in, 3 * out]\n\
             *.c_attn.bias = 0 chunks 1:1:1\n*.c_proj.weight = 0\n*.ln_1.* = keep\n",
        )
        .unwrap();
        merges(dir.path(), &["--rules", "gpt2.rules"], &files, &model);
    }
}

#[test]
fn a_fused_tensor_joined_plainly_is_refused_with_both_layouts_named() {
    let model = gpt2();
    let dir = tempfile::tempdir().unwrap();
    let files = split_model(dir.path(), &model, 2);
    // Today's merge: the right shape, the wrong model ([q0 k0 v0 q1 k1 v1]). Each fused
    // tensor named with its axis (`-a 0` on the bias contradicts GPT-2's `chunks 3`, and is
    // refused before the layout is asked for).
    let plain = [
        "--axis-for",
        "*.c_attn.weight=1",
        "--axis-for",
        "*.c_attn.bias=0",
        "-a",
        "0",
        "--keep",
        "*.ln_1.*",
    ];
    let stderr = refuses(dir.path(), &plain, &files);
    assert_mentions(
        &stderr,
        &[
            "tjoin: error: 2 fused tensors (several projections side by side: q, k and v, or \
             gate and up) would be joined along their fused axis with no layout stated",
            "transformer.h.0.attn.c_attn.weight  along axis 1",
            "transformer.h.0.attn.c_attn.bias  along axis 0",
            "`chunks` when each rank holds a slice of each part",
            "`plain` when each rank holds whole heads or groups",
            "--axis-for 'transformer.h.0.attn.c_attn.weight=1 chunks 3' or --axis-for \
             'transformer.h.0.attn.c_attn.weight=1 plain'",
            "--axis-for 'transformer.h.0.attn.c_attn.bias=0 chunks 3'",
        ],
    );
    // `plain` states the layout: joined as each rank's whole heads.
    let stated = [
        "--axis-for",
        "*.c_attn.*=-1 plain",
        "-a",
        "0",
        "--keep",
        "*.ln_1.*",
    ];
    let mut args: Vec<&str> = stated.to_vec();
    args.extend(files.iter().map(String::as_str));
    args.extend(LIKE);
    args.extend(["-o", "plain.safetensors"]);
    succeeds(dir.path(), &args);
    // A single tensor of each file, named FILE:NAME, is checked too.
    let pick: Vec<String> = files
        .iter()
        .map(|f| format!("{f}:transformer.h.0.attn.c_attn.weight"))
        .collect();
    let mut args = vec!["-a", "1"];
    args.extend(pick.iter().map(String::as_str));
    args.extend(["-o", "c_attn.npy"]);
    let stderr = refused(dir.path(), &args, 2);
    assert_mentions(&stderr, &["1 fused tensor (several projections"]);
}

/// A vLLM Llama with GQA: `qkv_proj` holds 16 query heads and 4 key-value heads of size 1
/// ([q; k; v] = 4:1:1), `gate_up_proj` [gate; up], `o_proj` and `down_proj` row-parallel.
fn vllm() -> Vec<(T, Split)> {
    vec![
        (
            tensor("model.layers.0.self_attn.qkv_proj.weight", &[24, 4], 0.0),
            Split::Fused(0, &[4, 1, 1]),
        ),
        (
            tensor("model.layers.0.self_attn.o_proj.weight", &[4, 16], 1000.0),
            Split::Plain(1),
        ),
        (
            tensor("model.layers.0.mlp.gate_up_proj.weight", &[16, 4], 2000.0),
            Split::Fused(0, &[1, 1]),
        ),
        (
            tensor("model.layers.0.mlp.down_proj.weight", &[4, 8], 3000.0),
            Split::Plain(1),
        ),
        (tensor("model.norm.weight", &[4], 4000.0), Split::Replicated),
    ]
}

#[test]
fn vllm_qkv_proj_in_unequal_parts_and_gate_up_proj_merge_chunk_wise() {
    let model = vllm();
    let rules = "*.qkv_proj.weight = 0 chunks 4:1:1\n*.gate_up_proj.weight = 0 chunks 2\n\
                 *.o_proj.weight = 1\n*.down_proj.weight = 1\n*norm.weight = keep\n";
    for ranks in [2, 4] {
        let dir = tempfile::tempdir().unwrap();
        let files = split_model(dir.path(), &model, ranks);
        fs::write(dir.path().join("vllm.rules"), rules).unwrap();
        merges(dir.path(), &["--rules", "vllm.rules"], &files, &model);
        // Proportions that a rank's rows (8 at TP2, 4 at TP4) do not divide into.
        let odd = [
            "--axis-for",
            "*.gate_up_proj.weight=0 chunks 4:3",
            "--rules",
            "vllm.rules",
        ];
        let stderr = refuses(dir.path(), &odd, &files);
        assert_mentions(
            &stderr,
            &[
                "tensor `model.layers.0.mlp.gate_up_proj.weight`: its rule says `chunks 4:3`, \
                 but a piece's size along axis 0 does not divide into parts in those \
                 proportions (their sum is 7)",
                "input 1 (a.safetensors:model.layers.0.mlp.gate_up_proj.weight) is [",
            ],
        );
        // Proportions that do not cut q where o_proj's input says it ends: refused with those
        // that do, although 4:3 would not divide either.
        let odd = [
            "--axis-for",
            "*.qkv_proj.weight=0 chunks 4:3",
            "--rules",
            "vllm.rules",
        ];
        let stderr = refuses(dir.path(), &odd, &files);
        assert_mentions(
            &stderr,
            &[
                "model.layers.0.self_attn.qkv_proj.weight  `chunks 4:3`, but its output \
                 projection's input says q holds 4 of every 6 rows of a rank's piece: \
                 `chunks 4:1:1`",
            ],
        );
    }
}

/// Megatron-Core's SwiGLU MLP: `linear_fc1` is [gate; up] (twice `linear_fc2`'s input).
#[test]
fn a_swiglu_linear_fc1_merges_chunk_wise_and_its_plain_join_is_refused() {
    let model = vec![
        (
            tensor("decoder.layers.0.mlp.linear_fc1.weight", &[16, 4], 0.0),
            Split::Fused(0, &[1, 1]),
        ),
        (
            tensor("decoder.layers.0.mlp.linear_fc2.weight", &[4, 8], 1000.0),
            Split::Plain(1),
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    let files = split_model(dir.path(), &model, 2);
    let chunked = [
        "--axis-for",
        "*.linear_fc1.weight=0 chunks 2",
        "--axis-for",
        "*.linear_fc2.weight=1",
    ];
    merges(dir.path(), &chunked, &files, &model);
    let plain = ["--axis-for", "*.linear_fc2.weight=1", "-a", "0"];
    let stderr = refuses(dir.path(), &plain, &files);
    assert_mentions(
        &stderr,
        &[
            "decoder.layers.0.mlp.linear_fc1.weight  along axis 0",
            "--axis-for 'decoder.layers.0.mlp.linear_fc1.weight=0 chunks 2'",
        ],
    );
    // A first layer the size of the second's input is not gated: joined as it is.
    let model = vec![
        (
            tensor("decoder.layers.0.mlp.linear_fc1.weight", &[8, 4], 0.0),
            Split::Plain(0),
        ),
        (
            tensor("decoder.layers.0.mlp.linear_fc2.weight", &[4, 8], 1000.0),
            Split::Plain(1),
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    let files = split_model(dir.path(), &model, 2);
    merges(dir.path(), &plain, &files, &model);
}

/// Llama at TP4 with 2 key-value heads: vLLM gives each to 2 ranks.
fn replicated_kv() -> Vec<(T, Split)> {
    vec![
        (
            tensor("model.layers.0.self_attn.q_proj.weight", &[8, 4], 0.0),
            Split::Plain(0),
        ),
        (
            tensor("model.layers.0.self_attn.k_proj.weight", &[4, 4], 1000.0),
            Split::Replicas(0, 2),
        ),
        (
            tensor("model.layers.0.self_attn.v_proj.weight", &[4, 4], 2000.0),
            Split::Replicas(0, 2),
        ),
    ]
}

#[test]
fn replicated_key_value_heads_are_joined_once_per_group() {
    let model = replicated_kv();
    let dir = tempfile::tempdir().unwrap();
    let files = split_model(dir.path(), &model, 4);
    fs::write(
        dir.path().join("kv.rules"),
        "*.q_proj.weight = 0\n*.k_proj.weight = 0 replicas 2\n*.v_proj.weight = 0 replicas 2\n",
    )
    .unwrap();
    merges(dir.path(), &["--rules", "kv.rules"], &files, &model);
    // The dry run says so, in text and in JSON.
    let mut args = vec!["--rules", "kv.rules", "--dry-run"];
    args.extend(files.iter().map(String::as_str));
    args.extend(LIKE);
    let report = String::from_utf8(succeeds(dir.path(), &args)).unwrap();
    let row = report
        .lines()
        .find(|l| l.contains("k_proj"))
        .unwrap()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        row.starts_with("model.layers.0.self_attn.k_proj.weight axis 0 replicas 2 float32 [4, 4]"),
        "{row}"
    );
    args[2] = "--dry-run=json";
    let json: serde_json::Value = serde_json::from_slice(&succeeds(dir.path(), &args)).unwrap();
    let k = named(&json, "model.layers.0.self_attn.k_proj.weight");
    assert_eq!(k["replicas"], 2);
    assert_eq!(k["inputs"], serde_json::json!([1, 3]));
    // Ranks out of order: a group's members differ, and where is said.
    let shuffled = [&files[0], &files[2], &files[1], &files[3]].map(|f| f.to_string());
    let stderr = refuses(dir.path(), &["--rules", "kv.rules"], &shuffled);
    assert_mentions(
        &stderr,
        &[
            "tensor `model.layers.0.self_attn.k_proj.weight`: its rule says `replicas 2`, but \
             the inputs of a group do not hold the same piece",
            "input 2 (c.safetensors:model.layers.0.self_attn.k_proj.weight) differs from \
             input 1 (a.safetensors:model.layers.0.self_attn.k_proj.weight): its data \
             differs from byte 2 (element 0)",
        ],
    );
    // A count of inputs that is not a multiple of the group.
    let stderr = refuses(dir.path(), &["--rules", "kv.rules"], &files[..3]);
    assert_mentions(
        &stderr,
        &[
            "its rule says `replicas 2` (groups of 2 consecutive inputs hold the same piece), \
           but there are 3 inputs, not a multiple of 2",
        ],
    );
}

#[test]
fn chunks_show_in_the_dry_run_in_text_and_json() {
    let model = gpt2();
    let dir = tempfile::tempdir().unwrap();
    let files = split_model(dir.path(), &model, 2);
    let mut args = vec![
        "--axis-for",
        "*.c_attn.*=-1 chunks 3",
        "-a",
        "0",
        "--keep",
        "*.ln_1.*",
        "--dry-run",
    ];
    args.extend(files.iter().map(String::as_str));
    args.extend(LIKE);
    let report = String::from_utf8(succeeds(dir.path(), &args)).unwrap();
    let rows: Vec<String> = report
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    let row = "transformer.h.0.attn.c_attn.weight axis 1 chunks 3 float32 [4, 24] 384 bytes by \
               --axis-for '*.c_attn.*=-1 chunks 3'";
    assert!(rows.iter().any(|r| r == row), "{report}");
    args[6] = "--dry-run=json";
    let json: serde_json::Value = serde_json::from_slice(&succeeds(dir.path(), &args)).unwrap();
    let c_attn = named(&json, "transformer.h.0.attn.c_attn.weight");
    assert_eq!(c_attn["chunks"], serde_json::json!([1, 1, 1]));
    assert_eq!(c_attn["inputs"], serde_json::json!([1, 2, 1, 2, 1, 2]));
    assert_eq!(c_attn["rule"], "--axis-for '*.c_attn.*=-1 chunks 3'");
}

/// The tensor `name` of a `--dry-run=json` report.
fn named<'j>(json: &'j serde_json::Value, name: &str) -> &'j serde_json::Value {
    let tensors = json["tensors"].as_array().unwrap();
    tensors.iter().find(|t| t["name"] == name).unwrap()
}

/// A Llama attention split column-parallel, nothing fused or replicated.
fn attention() -> Vec<(T, Split)> {
    ["q_proj", "k_proj", "v_proj"]
        .iter()
        .enumerate()
        .map(|(at, p)| {
            let name = format!("model.layers.0.self_attn.{p}.weight");
            (tensor(&name, &[4, 4], 1000.0 * at as f32), Split::Plain(0))
        })
        .collect()
}

#[test]
fn a_rules_line_with_two_equals_signs_is_refused_by_file_and_line() {
    let model = attention();
    let dir = tempfile::tempdir().unwrap();
    let files = split_model(dir.path(), &model, 2);
    fs::write(
        dir.path().join("typo.rules"),
        "*.q_proj.weight = 0\n*.k_proj.weight == 0\n = 0\n*.v_proj.weight = 0 chunk 2\n",
    )
    .unwrap();
    let stderr = refuses(dir.path(), &["--rules", "typo.rules"], &files);
    assert_mentions(
        &stderr,
        &[
            "tjoin: error: the rules file typo.rules has 3 lines that are not a rule",
            "typo.rules:2: `*.k_proj.weight == 0` has more than one `=`",
            "typo.rules:3: `= 0` has no glob before the `=`",
            "typo.rules:4: `chunk` after the axis is not a word of a rule",
        ],
    );
    // The flag's form of the same typo.
    let out = tjoin()
        .current_dir(dir.path())
        .args(["--axis-for", "*.k_proj.weight==0"])
        .args(&files)
        .args(["-o", "model.safetensors"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("has more than one `=`"), "{stderr}");
    assert!(!dir.path().join("model.safetensors").exists());
}

#[test]
fn a_rules_file_line_that_matches_nothing_is_refused_unless_allowed() {
    let model = attention();
    let dir = tempfile::tempdir().unwrap();
    let files = split_model(dir.path(), &model, 2);
    fs::write(
        dir.path().join("more.rules"),
        "*.q_proj.weight = 0\n*.k_proj.weight = 0\n*.v_proj.weight = 0\n*.o_prj.weight = 1\n",
    )
    .unwrap();
    let stderr = refuses(dir.path(), &["--rules", "more.rules"], &files);
    assert_mentions(
        &stderr,
        &[
            "tjoin: error: 1 rule matches no tensor of the inputs (a rules file's lines must \
             each match one)",
            "more.rules:4: *.o_prj.weight = 1 matches no tensor",
            "with --allow-unmatched these are warnings",
        ],
    );
    let mut args = vec!["--rules", "more.rules", "--allow-unmatched"];
    args.extend(files.iter().map(String::as_str));
    args.extend(LIKE);
    args.extend(["-o", "model.safetensors"]);
    let out = tjoin()
        .current_dir(dir.path())
        .args(&args)
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.starts_with("tjoin: warning: more.rules:4: *.o_prj.weight = 1 matches no tensor"),
        "{stderr}"
    );
    // A flag's rule still only warns, unless --strict.
    fs::remove_file(dir.path().join("model.safetensors")).unwrap();
    fs::write(dir.path().join("more.rules"), "*_proj.weight = 0\n").unwrap();
    let mut args = vec!["--rules", "more.rules", "--keep", "*nrom*"];
    args.extend(files.iter().map(String::as_str));
    args.extend(LIKE);
    args.extend(["-o", "model.safetensors"]);
    succeeds(dir.path(), &args);
}
