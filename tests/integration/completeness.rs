//! Merges that wrote a wrong model with exit 0 (issue 41, items 1 to 3 and 8): a rank
//! missing, the replica groups of tensors `-a` joins, fused tensors whose hint offered the
//! wrong layout. Each test fails on the code before it.

use std::fs;
use std::path::{Path, PathBuf};

use crate::families::{FAMILIES, Family, refuses};
use crate::util::{assert_mentions, dir_entries, refused, succeeds};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The ranks of fixtures/families/FAMILY split into `n`, rank `r` for each of `which`.
fn ranks(family: &str, n: usize, which: &[usize]) -> Vec<String> {
    which
        .iter()
        .map(|r| format!("{ROOT}/fixtures/families/{family}/tp{n}/tp{r}.safetensors"))
        .collect()
}

fn expected(family: &str) -> PathBuf {
    Path::new(ROOT).join(format!("fixtures/families/{family}/expected.safetensors"))
}

fn rules(family: &str) -> String {
    format!("{ROOT}/rules/{family}.rules")
}

/// The tiny Llama's config.json (fixtures/make_family_fixtures.py's LLAMA_LIKE).
const LLAMA_CONFIG: &str = r#"{"model_type": "llama", "architectures": ["LlamaForCausalLM"],
  "hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 4,
  "num_key_value_heads": 2, "vocab_size": 64, "num_hidden_layers": 2,
  "tie_word_embeddings": false}"#;

fn words(list: &[&str]) -> Vec<String> {
    list.iter().map(|w| w.to_string()).collect()
}

/// A Qwen2 with 2 key-value heads on 4 ranks, joined by `-a 0` with the replicas said for
/// the weights only: the equally replicated biases, joined by `-a`, came out twice as long.
#[test]
fn tensors_joined_by_a_get_the_replica_group_check() {
    let mut args = words(&[
        "-a",
        "0",
        "--keep",
        "*norm.weight",
        "--axis-for",
        "*.k_proj.weight=0 replicas 2",
        "--axis-for",
        "*.v_proj.weight=0 replicas 2",
        "--axis-for",
        "*.o_proj.weight=1",
        "--axis-for",
        "*.down_proj.weight=1",
        "--like",
    ]);
    args.push(expected("qwen2").to_str().unwrap().to_string());
    args.extend(ranks("qwen2", 4, &[0, 1, 2, 3]));
    let stderr = refuses(&args);
    assert_mentions(
        &stderr,
        &[
            "4 tensors joined along an axis have the same bytes in groups of consecutive \
             inputs",
            "model.layers.0.self_attn.k_proj.bias  the same in each group of 2 consecutive \
             inputs; joined by -a 0",
            "--axis-for '*.k_proj.bias=0 replicas 2' --axis-for '*.v_proj.bias=0 replicas 2'",
        ],
    );
    // The hint's flags were tried before they were printed, and pass every check.
    assert!(!stderr.contains("not enough"), "{stderr}");
    // The hint's flags merge the original.
    let dir = tempfile::tempdir().unwrap();
    let mut fixed = args.clone();
    fixed.splice(
        0..0,
        words(&[
            "--axis-for",
            "*.k_proj.bias=0 replicas 2",
            "--axis-for",
            "*.v_proj.bias=0 replicas 2",
        ]),
    );
    fixed.extend(words(&["-o", "model.safetensors"]));
    let fixed: Vec<&str> = fixed.iter().map(String::as_str).collect();
    succeeds(dir.path(), &fixed);
    let written = fs::read(dir.path().join("model.safetensors")).unwrap();
    assert!(written == fs::read(expected("qwen2")).unwrap());
}

/// GPT-NeoX's `attention.query_key_value` and Megatron-Core's `linear_qkv` hold whole heads
/// or groups per rank: their hint offers `plain` only, never `chunks 3`.
#[test]
fn the_fused_hint_offers_plain_only_for_per_head_layouts() {
    let dir = tempfile::tempdir().unwrap();
    for family in ["gpt-neox", "megatron-gpt"] {
        // The family's rules but the fused line, which `-a 0` decides: a plain join with no
        // layout stated, which the family's `plain` does not contradict.
        let module = match family {
            "gpt-neox" => "query_key_value",
            _ => "linear_qkv",
        };
        let text = fs::read_to_string(rules(family)).unwrap();
        let text: Vec<&str> = text.lines().filter(|l| !l.contains(module)).collect();
        let file = dir.path().join(format!("{family}.rules"));
        fs::write(&file, text.join("\n")).unwrap();
        let mut args = words(&["-a", "0", "--rules", file.to_str().unwrap()]);
        args.extend(ranks(family, 2, &[0, 1]));
        let stderr = refuses(&args);
        let hint = stderr
            .lines()
            .find(|l| l.starts_with("hint: say how each rank holds its piece"))
            .unwrap_or_else(|| panic!("{family}: no fused hint:\n{stderr}"));
        assert!(
            hint.contains(&format!("{module}.weight=0 plain' (laid out head by head")),
            "{family}: {hint}"
        );
        assert!(
            !hint.contains(&format!("{module}.weight=0 chunks")),
            "{family}: {hint}"
        );
    }
}

/// `tjoin split --ranks N` records the rank and N in each rank file; a merge of them missing
/// a rank (the last, the first, one in the middle), with ranks swapped, or one twice, is
/// refused by the records; all of them in order merge the original byte for byte.
#[test]
fn rank_counts_recorded_by_split_prove_a_merge_complete() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let expected = expected("gpt2");
    let rules = rules("gpt2");
    let split = [
        "split",
        "--ranks",
        "4",
        "--heads",
        "4",
        "--rules",
        &rules,
        expected.to_str().unwrap(),
        "-o",
        "tp{rank}.safetensors",
    ];
    succeeds(dir, &split);
    let merge = |which: &[usize], extra: &[&str]| {
        let mut args = vec!["--rules".to_string(), rules.clone()];
        args.extend(extra.iter().map(|w| w.to_string()));
        args.extend(which.iter().map(|r| format!("tp{r}.safetensors")));
        args.extend(words(&["-o", "model.safetensors"]));
        args
    };
    let all = merge(&[0, 1, 2, 3], &[]);
    succeeds(dir, &all.iter().map(String::as_str).collect::<Vec<_>>());
    let written = dir.join("model.safetensors");
    assert!(fs::read(&written).unwrap() == fs::read(&expected).unwrap());
    fs::remove_file(&written).unwrap();
    for (which, extra, says) in [
        (&[0, 1, 2][..], &[][..], "given as rank"),
        (&[1, 2, 3][..], &[][..], "records rank 1 of a split into 4"),
        (
            &[0, 1, 3][..],
            &["--any-order"][..],
            "records rank 3 of a split into 4",
        ),
        (
            &[1, 0, 2, 3][..],
            &["--any-order"][..],
            "records rank 1 of a split into 4",
        ),
    ] {
        let args = merge(which, extra);
        let stderr = refused(dir, &args.iter().map(String::as_str).collect::<Vec<_>>(), 2);
        assert_mentions(
            &stderr,
            &[
                "the inputs' metadata records the ranks of their split",
                says,
                "give all 4 ranks' files, each once, in rank order (rank 0 first)",
            ],
        );
    }
    // A rank twice, under another name.
    fs::copy(dir.join("tp1.safetensors"), dir.join("again.safetensors")).unwrap();
    let args = words(&[
        "--rules",
        &rules,
        "tp0.safetensors",
        "tp1.safetensors",
        "again.safetensors",
        "tp3.safetensors",
        "-o",
        "model.safetensors",
    ]);
    let stderr = refused(dir, &args.iter().map(String::as_str).collect::<Vec<_>>(), 2);
    assert_mentions(
        &stderr,
        &[
            "input 3 (again.safetensors) records rank 1 of a split into 4 (ranks count from 0), but is given as rank 2 of 4",
        ],
    );
}

/// config.json's head counts and vocabulary, given with --config or beside the first
/// input, refuse a merge missing a rank; a row-parallel weight joined on axis 0 does not fit
/// its layer's input projection.
#[test]
fn config_json_sizes_and_layer_shapes_refuse_a_missing_rank_and_a_wrong_axis() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.json");
    fs::write(&config, LLAMA_CONFIG).unwrap();
    let config = config.to_str().unwrap().to_string();
    // One rank of two: it splits evenly.
    let mut args = words(&["--rules", &rules("llama"), "--config", &config]);
    args.extend(ranks("llama", 2, &[0]));
    let stderr = refuses(&args);
    assert_mentions(
        &stderr,
        &[
            "merged tensors have a size other than",
            "model.layers.0.self_attn.q_proj.weight  [16, 32]: 16 along axis 0, but",
            "gives 32 (4 query heads of 8)",
            "model.embed_tokens.weight  [32, 32]: 32 along axis 0, but",
        ],
    );
    // o_proj and down_proj named on axis 0 (by --axis-for: the user's, whatever the family
    // says; `-a 0` alone is refused as contradicting it): the layer's shapes refuse them.
    let mut args = words(&["-a", "0", "--keep", "*norm.weight", "--config", &config]);
    args.extend(words(&["--axis-for", "*.o_proj.weight=0"]));
    args.extend(words(&["--axis-for", "*.down_proj.weight=0"]));
    args.extend(ranks("llama", 2, &[0, 1]));
    let stderr = refuses(&args);
    assert_mentions(
        &stderr,
        &[
            "4 merged tensors would not fit their layer's other projection",
            "model.layers.0.self_attn.o_proj.weight  [64, 16] does not fit \
             `model.layers.0.self_attn.q_proj.weight`  [32, 32]",
            "model.layers.0.mlp.down_proj.weight  [64, 32] does not fit \
             `model.layers.0.mlp.up_proj.weight`  [64, 32]",
        ],
    );
    // Beside the inputs: a copy of the ranks next to the config.
    for r in 0..2 {
        fs::copy(
            &ranks("llama", 2, &[r])[0],
            dir.path().join(format!("tp{r}.safetensors")),
        )
        .unwrap();
    }
    let args = [
        "--rules",
        &rules("llama"),
        "tp0.safetensors",
        "-o",
        "m.safetensors",
    ];
    let stderr = refused(dir.path(), &args, 2);
    assert_mentions(&stderr, &["config.json gives 32 (4 query heads of 8)"]);
    let args = [
        "--rules",
        &rules("llama"),
        "tp0.safetensors",
        "tp1.safetensors",
        "-o",
        "m.safetensors",
    ];
    succeeds(dir.path(), &args);
    let written = fs::read(dir.path().join("m.safetensors")).unwrap();
    assert!(written == fs::read(expected("llama")).unwrap());
}

/// A hint's flags are tried before they are printed (item 10): the rules forgotten, `-a 0`
/// is refused for the norms with a `--keep` hint, and with those flags o_proj would join on
/// axis 0; tjoin says the flags are not enough, and what would settle it.
#[test]
fn a_hints_flags_that_would_not_pass_every_check_are_said_to_be_not_enough() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.json");
    fs::write(&config, LLAMA_CONFIG).unwrap();
    let config = config.to_str().unwrap().to_string();
    // A Llama whose names the family table does not know (`self.attn`): for a known
    // family, `-a 0` is refused as contradicting its rules before any hint.
    let mut unknown = Vec::new();
    for (r, rank) in ranks("llama", 2, &[0, 1]).iter().enumerate() {
        let file = dir.path().join(format!("tp{r}.safetensors"));
        fs::copy(rank, &file).unwrap();
        crate::families::unknown_to_the_table(&file, "self_attn", "self.attn");
        unknown.push(file.to_str().unwrap().to_string());
    }
    for with_config in [false, true] {
        let mut args = words(&["-a", "0"]);
        if with_config {
            args.extend(words(&["--config", &config]));
        }
        args.extend(unknown.iter().cloned());
        let stderr = refuses(&args);
        // o_proj and down_proj joined on axis 0 would not fit q_proj and up_proj.
        let why = "4 merged tensors would not fit their layer's other projection";
        assert_mentions(
            &stderr,
            &[
                "hint: keep one copy with --keep '*.input_layernorm.weight'",
                "tjoin: error: the flags these hints give are not enough: with --keep \
                 '*.input_layernorm.weight' --keep '*.post_attention_layernorm.weight' --keep \
                 model.norm.weight added, tjoin still refuses the merge",
                why,
                "hint: give the model family's rules file (--rules rules/FAMILY.rules)",
            ],
        );
        // Followed literally, the flags are refused, never a wrong model.
        let mut followed = args.clone();
        followed.extend(words(&[
            "--keep",
            "*.input_layernorm.weight",
            "--keep",
            "*.post_attention_layernorm.weight",
            "--keep",
            "model.norm.weight",
        ]));
        assert_mentions(&refuses(&followed), &[why]);
    }
}

/// What one command did: `Ok` when it wrote the family's original byte for byte, `Err` with
/// its stderr when it was refused (exit 2, nothing written). Anything else fails the test.
#[track_caller]
fn original_or_refused(family: &Family, args: &[String]) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("model.safetensors");
    let output = crate::util::tjoin()
        .current_dir(dir.path())
        .args(args)
        .args(["-o", out.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    if output.status.success() {
        let written = fs::read(&out).unwrap();
        assert!(
            written == fs::read(family.expected()).unwrap(),
            "{}: {args:?} wrote a model that is not the original, exit 0\n{stderr}",
            family.name
        );
        return Ok(());
    }
    assert_eq!(output.status.code(), Some(2), "{args:?}:\n{stderr}");
    assert!(dir_entries(dir.path()).is_empty(), "{args:?} left a file");
    Err(stderr)
}

/// The first error line of `stderr` (warnings may come before it).
fn first_error(stderr: &str) -> String {
    let error = stderr.lines().find(|l| l.starts_with("tjoin: error: "));
    error.unwrap_or_default().to_string()
}

/// The flags the hints of `stderr` give, each as its words: `--keep GLOB` and `--axis-for
/// 'RULE'`, and the flags that take no value where a hint says to add them (`add --uneven`,
/// `add --join-identical`); of two rules offered as alternatives (`A or B`), the first, as a
/// reader follows them.
pub(crate) fn hinted_flags(stderr: &str) -> Vec<Vec<String>> {
    let mut flags = Vec::new();
    for hint in stderr.lines().filter_map(|l| l.strip_prefix("hint: ")) {
        let mut rest = hint;
        while let Some(at) = rest.find("--") {
            let after = &rest[at..];
            if let Some(bare) = ["--uneven", "--join-identical"]
                .into_iter()
                .find(|f| after.starts_with(f))
            {
                if rest[..at].ends_with("add ") {
                    flags.push(vec![bare.to_string()]);
                }
                rest = &after[bare.len()..];
                continue;
            }
            let flag = ["--keep ", "--axis-for "]
                .into_iter()
                .find(|f| after.starts_with(f));
            let Some(flag) = flag else {
                rest = &after[2..];
                continue;
            };
            let value = &after[flag.len()..];
            let (word, used) = match value.strip_prefix('\'') {
                Some(quoted) => match quoted.find('\'') {
                    Some(end) => (&quoted[..end], end + 2),
                    None => break,
                },
                None => {
                    let end = value.find([' ', ',', ')', ';']).unwrap_or(value.len());
                    (&value[..end], end)
                }
            };
            let alternative = rest[..at].ends_with(" or ");
            if !alternative && !word.is_empty() && !word.contains("GLOB") && !word.contains("AXIS")
            {
                flags.push(vec![flag.trim().to_string(), word.to_string()]);
            }
            rest = &value[used..];
        }
    }
    flags
}

/// Follows the hints of every refusal literally, adding their flags to `args`, for a few
/// rounds: each command is refused or writes the original (never a wrong model); a refusal
/// whose hints give no flag not yet given ends it.
#[track_caller]
pub(crate) fn follow_hints(family: &Family, mut args: Vec<String>) -> String {
    let mut verdict = String::new();
    for _ in 0..4 {
        match original_or_refused(family, &args) {
            Ok(()) => return "the original".to_string(),
            Err(stderr) => {
                verdict = first_error(&stderr);
                let given = |flag: &[String]| args.windows(flag.len()).any(|w| w == flag);
                let mut new: Vec<Vec<String>> = Vec::new();
                for flag in hinted_flags(&stderr) {
                    if !given(&flag) && !new.contains(&flag) {
                        new.push(flag);
                    }
                }
                if new.is_empty() {
                    break;
                }
                args.splice(0..0, new.into_iter().flatten());
            }
        }
    }
    verdict
}

/// Every mistake class of issue 41, for every family of fixtures/families/ and both splits:
/// each is refused, or writes the original model; none writes another with exit 0. Prints
/// the table of verdicts.
#[test]
fn every_mistake_on_every_family_is_refused_or_gives_the_original() {
    let mut table = Vec::new();
    let configs = tempfile::tempdir().unwrap();
    for family in FAMILIES {
        let config = configs.path().join(format!("{}.json", family.name));
        fs::write(&config, crate::builtin_families::config(family.name)).unwrap();
        let config = config.to_str().unwrap().to_string();
        for n in [2, 4] {
            let all: Vec<String> = (0..n).map(|r| family.rank(n, r)).collect();
            let right = family.args(n);
            // The right rules without --like: what proves the merge complete decides.
            let rules_only = right[..right.len() - 2].to_vec();
            let mut cases: Vec<(&str, Vec<String>)> = Vec::new();
            let mut with = |what: &'static str, before: &[String], ranks: Vec<String>| {
                let mut args = before.to_vec();
                args.extend(ranks);
                cases.push((what, args));
            };
            with("right rules, no --like", &rules_only, all.clone());
            with("last rank missing", &rules_only, all[..n - 1].to_vec());
            with("first rank missing", &rules_only, all[1..].to_vec());
            if n == 4 {
                let middle = vec![all[0].clone(), all[1].clone(), all[3].clone()];
                with("a middle rank missing", &rules_only, middle);
            }
            let mut swapped = all.clone();
            swapped.swap(0, 1);
            with("ranks swapped", &rules_only, swapped);
            let mut twice = all.clone();
            twice[1] = all[0].clone();
            with("a rank twice", &rules_only, twice);
            let other = if n == 2 { 4 } else { 2 };
            let mixed = vec![all[0].clone(), family.rank(other, 1)];
            with("two degrees mixed", &rules_only, mixed);
            // Each case again with no flags but config.json (--config), its hints followed
            // literally: the flagless merge by the family's built-in rules.
            let flagless: Vec<(String, Vec<String>)> = cases
                .iter()
                .map(|(what, args)| {
                    let ranks = args.iter().filter(|a| a.ends_with(".safetensors"));
                    let ranks = ranks.filter(|a| !a.ends_with("expected.safetensors"));
                    let mut args = words(&["--config", &config]);
                    args.extend(ranks.cloned());
                    (format!("{what}, no flags"), args)
                })
                .collect();
            for (what, args) in cases {
                let verdict = match original_or_refused(family, &args) {
                    Ok(()) => "the original".to_string(),
                    Err(stderr) => first_error(&stderr),
                };
                table.push(format!("{} tp{n}  {what}: {verdict}", family.name));
                let verdict = follow_hints(family, args);
                table.push(format!(
                    "{} tp{n}  {what}, hints followed: {verdict}",
                    family.name
                ));
            }
            for (what, args) in flagless {
                let verdict = follow_hints(family, args);
                table.push(format!(
                    "{} tp{n}  {what}, hints followed: {verdict}",
                    family.name
                ));
            }
            // Rules forgotten, and another family's rules or README's Llama flags, each with
            // the hints followed literally.
            let mut forgotten = vec!["-a".to_string(), "0".to_string()];
            forgotten.extend(all.clone());
            let verdict = follow_hints(family, forgotten);
            table.push(format!(
                "{} tp{n}  rules forgotten, hints followed: {verdict}",
                family.name
            ));
            let other = if family.name == "llama" {
                "gpt2"
            } else {
                "llama"
            };
            let mut foreign = words(&["--allow-unmatched", "-a", "0", "--rules"]);
            foreign.push(rules(other));
            foreign.extend(all.clone());
            let verdict = follow_hints(family, foreign);
            table.push(format!(
                "{} tp{n}  {other}'s rules, hints followed: {verdict}",
                family.name
            ));
        }
    }
    println!("{}", table.join("\n"));
}
