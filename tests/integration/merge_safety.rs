//! Model merges that cannot silently build a wrong model (issue 15): replicated tensors are
//! refused unless a rule decides them, rules come from files (`rules/*.rules`) and say which
//! tensor they decided, a rule that matches nothing is noticed, `--like` checks every shape
//! against a reference header, and the merge example everywhere is right. The shards are
//! fixtures/merge/ (a tiny Llama and BERT split by the committed rules files); each refusal
//! has its own test.

use std::fs;
use std::path::Path;

use safetensors::tensor::{SafeTensors, TensorView};

use crate::util::{assert_mentions, refused, succeeds, tjoin};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A folder holding the shards of `model` (`tp0.safetensors`, `tp1.safetensors`), the unsplit
/// model (`expected.safetensors`), its rules file (`MODEL.rules`) and its `config.json`.
fn shards(model: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for file in ["tp0.safetensors", "tp1.safetensors", "expected.safetensors"] {
        let from = Path::new(ROOT)
            .join("fixtures/merge")
            .join(model)
            .join(file);
        fs::copy(&from, dir.path().join(file)).unwrap();
    }
    let rules = Path::new(ROOT).join("rules").join(format!("{model}.rules"));
    fs::copy(rules, dir.path().join(format!("{model}.rules"))).unwrap();
    // The model's config.json (fixtures/make_merge_fixtures.py's sizes) beside the shards,
    // which proves a merge complete (issue 41).
    let config = r#"{"hidden_size": 8, "num_attention_heads": 2, "vocab_size": 32}"#;
    fs::write(dir.path().join("config.json"), config).unwrap();
    dir
}

/// [`shards`] of `model` renamed so that no family of tjoin's table knows it (`self_attn`
/// -> `self.attn`, `attention.self` -> `attention_self`): the checks here guard merges of
/// models the table does not know, where `-a` decides what no rule does.
fn unknown_shards(model: &str) -> tempfile::TempDir {
    let dir = shards(model);
    unknown(dir.path(), model);
    dir
}

/// Renames the shards and the expected model in `dir` as [`unknown_shards`] does.
fn unknown(dir: &Path, model: &str) {
    let (from, to) = match model {
        "llama" => ("self_attn", "self.attn"),
        _ => ("attention.self", "attention_self"),
    };
    for file in ["tp0.safetensors", "tp1.safetensors", "expected.safetensors"] {
        crate::families::unknown_to_the_table(&dir.join(file), from, to);
    }
}

/// The arguments in `words`, split at blanks (the globs here hold none), then the shards.
fn args(words: &str) -> Vec<&str> {
    let shards = ["tp0.safetensors", "tp1.safetensors"];
    words.split_whitespace().chain(shards).collect()
}

/// Runs tjoin in `dir` with [`args`]`(words)`; returns (success, stdout, stderr).
fn run(dir: &Path, words: &str) -> (bool, String, String) {
    let out = tjoin().current_dir(dir).args(args(words)).output().unwrap();
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).unwrap();
    (out.status.success(), text(out.stdout), text(out.stderr))
}

/// Runs tjoin in `dir` with [`args`]`(words)`, which must fail cleanly with `code`; returns
/// stderr.
#[track_caller]
fn refuses(dir: &Path, words: &str, code: i32) -> String {
    refused(dir, &args(words), code)
}

/// Runs tjoin in `dir` with [`args`]`(words)` and `-o model.safetensors`, and fails unless
/// that is `expected.safetensors` byte for byte. Returns stderr.
#[track_caller]
fn rebuilds(dir: &Path, words: &str) -> String {
    let (ok, _, stderr) = run(dir, &format!("{words} -o model.safetensors"));
    assert!(ok, "tjoin {words}: {stderr}");
    rebuilt(dir);
    stderr
}

/// Fails unless `dir/model.safetensors` is `dir/expected.safetensors` byte for byte.
#[track_caller]
fn rebuilt(dir: &Path) {
    let written = fs::read(dir.join("model.safetensors")).unwrap();
    let expected = fs::read(dir.join("expected.safetensors")).unwrap();
    assert!(written == expected, "not the original model, byte for byte");
}

/// The `--keep` flags a refusal's hint suggests, unquoted, as words for [`args`].
fn suggested_keeps(stderr: &str) -> String {
    let hint = stderr
        .lines()
        .find(|l| l.starts_with("hint: keep"))
        .unwrap();
    let globs = hint.split("--keep ").skip(1);
    let globs = globs.map(|rest| rest.split(' ').next().unwrap().trim_matches('\''));
    globs.map(|glob| format!(" --keep {glob}")).collect()
}

/// README's old merge example with down_proj's axis named wrong (the example itself left
/// it to `-a 0`, which the Llama family's rules now refuse): `--like` catches it.
const WRONG_DOWN: &str =
    "-a 0 --axis-for *.o_proj.weight=1 --axis-for *.down_proj.weight=0 --keep *norm*";

/// The `rule` of the tensor `name` in a JSON plan.
fn rule_of(plan: &str, name: &str) -> serde_json::Value {
    let plan: serde_json::Value = serde_json::from_str(plan).unwrap();
    let tensors = plan["tensors"].as_array().unwrap();
    let tensor = tensors.iter().find(|t| t["name"] == name).unwrap();
    tensor["rule"].clone()
}

#[test]
fn the_rules_files_rebuild_the_original_models_byte_for_byte() {
    for model in ["llama", "bert"] {
        let dir = shards(model);
        let stderr = rebuilds(dir.path(), &format!("--rules {model}.rules"));
        // Every rule matches a tensor: no warning.
        assert_eq!(stderr, "", "{model}");
    }
}

#[test]
fn a_naive_join_of_replicated_shards_is_refused_and_lists_them() {
    let dir = unknown_shards("llama");
    let stderr = refuses(dir.path(), "-a 0 -o model.safetensors", 2);
    assert_mentions(
        &stderr,
        &[
            "tjoin: error: 5 tensors have the same shape and bytes in every input, and no rule \
             decides them",
            "the same in input 1 (tp0.safetensors) and input 2 (tp1.safetensors):",
            "model.layers.0.input_layernorm.weight  float16  [8] -> [16] joined along axis 0",
            "model.layers.1.post_attention_layernorm.weight  float16  [8]",
            "model.norm.weight  float16  [8]",
        ],
    );
    // A model's replicated norms are never a split: --join-identical, which the hint offered,
    // wrote them twice as long with exit 0 (join_identical_joins_replicated_tensors_on_purpose),
    // and no check could tell (issue 41, item 10).
    assert!(!stderr.contains("--join-identical"), "{stderr}");
    // Grouped by pattern, and exact: with them the merge is the original.
    let keeps = suggested_keeps(&stderr);
    assert_eq!(
        keeps,
        " --keep *.input_layernorm.weight --keep *.post_attention_layernorm.weight \
         --keep model.norm.weight"
    );
    let split = "-a 0 --axis-for *.o_proj.weight=1 --axis-for *.down_proj.weight=1";
    rebuilds(dir.path(), &format!("{split}{keeps}"));
}

#[test]
fn a_long_list_of_replicated_tensors_is_capped_and_its_globs_grouped() {
    let dir = unknown_shards("bert");
    let stderr = refuses(dir.path(), "-a 0 -o m.safetensors", 2);
    let capped = [
        "19 tensors have the same shape and bytes",
        "    ... and 9 more",
    ];
    assert_mentions(&stderr, &capped);
    let keeps = suggested_keeps(&stderr);
    for glob in [
        "*.LayerNorm.weight",
        "*.LayerNorm.bias",
        "*.output.dense.bias",
        "pooler.*",
    ] {
        assert!(
            format!("{keeps} ").contains(&format!(" --keep {glob} ")),
            "{keeps}"
        );
    }
    assert!(keeps.matches("--keep").count() <= 8, "{keeps}");
    // The rule decides the split tensors on axis 1; the suggested globs keep exactly the rest.
    rebuilds(
        dir.path(),
        &format!("-a 0 --axis-for *.output.dense.weight=1{keeps}"),
    );
}

#[test]
fn join_identical_joins_replicated_tensors_on_purpose() {
    let dir = shards("llama");
    // A rule decides the norms: kept, --join-identical or not.
    rebuilds(dir.path(), "--join-identical --rules llama.rules");
    // Without a rule for them, --join-identical joins them (in a model the family table
    // does not know: a Llama's norms joined by -a contradict its family).
    unknown(dir.path(), "llama");
    let split = "-a 0 --axis-for *.o_proj.weight=1 --axis-for *.down_proj.weight=1";
    let (ok, _, stderr) = run(
        dir.path(),
        &format!("--join-identical {split} -o j.safetensors"),
    );
    assert!(ok, "{stderr}");
    let written = fs::read(dir.path().join("j.safetensors")).unwrap();
    let joined = SafeTensors::deserialize(&written).unwrap();
    assert_eq!(joined.tensor("model.norm.weight").unwrap().shape(), [16]);
}

#[test]
fn single_tensor_joins_of_identical_tensors_stay_allowed() {
    let dir = shards("llama");
    let name = "model.norm.weight";
    let (a, b) = (
        format!("tp0.safetensors:{name}"),
        format!("tp1.safetensors:{name}"),
    );
    succeeds(dir.path(), &["-a", "0", &a, &b, "-o", "norms.npy"]);
    succeeds(
        dir.path(),
        &["-a", "0", "norms.npy", "norms.npy", "-o", "twice.npy"],
    );
    let twice = fs::metadata(dir.path().join("twice.npy")).unwrap().len();
    let once = fs::metadata(dir.path().join("norms.npy")).unwrap().len();
    assert!(twice > once);
}

#[test]
fn a_rules_file_that_is_not_rules_is_refused_by_file_and_line() {
    let dir = shards("llama");
    let text = "# fine\n*.o_proj.weight = 1\n*.down_proj.weight: 1\n*norm* = kept\n";
    fs::write(dir.path().join("bad.rules"), text).unwrap();
    let stderr = refuses(dir.path(), "--rules bad.rules -o m.safetensors", 2);
    assert_mentions(
        &stderr,
        &[
            "tjoin: error: the rules file bad.rules has 2 lines that are not a rule",
            "bad.rules:3: `*.down_proj.weight: 1` has no `=`",
            "bad.rules:4: `kept` after `*norm* =` is neither an axis",
            "hint: write one rule a line",
        ],
    );
    assert!(!stderr.contains("bad.rules:2"), "{stderr}");
    let stderr = refuses(dir.path(), "--rules none.rules -o m.safetensors", 1);
    assert_mentions(&stderr, &["cannot read the rules file none.rules"]);
}

#[test]
fn a_rule_that_matches_nothing_warns_and_strict_refuses_it() {
    let dir = shards("llama");
    let typo = "--rules llama.rules --keep *nrom*";
    assert_eq!(
        rebuilds(dir.path(), typo),
        "tjoin: warning: --keep '*nrom*' matches no tensor (the closest name is \
         `model.norm.weight`)\n"
    );
    assert_eq!(rebuilds(dir.path(), &format!("{typo} -q")), "");
    fs::remove_file(dir.path().join("model.safetensors")).unwrap();
    let stderr = refuses(dir.path(), &format!("{typo} --strict -o m.safetensors"), 2);
    assert_mentions(
        &stderr,
        &[
            "tjoin: error: 1 rule matches no tensor of the inputs (--strict refuses such rules)",
            "  --keep '*nrom*' matches no tensor",
            "without --strict these are warnings",
        ],
    );
    // A file's rule is named by its line.
    fs::write(
        dir.path().join("more.rules"),
        "# Qwen's biases\n*.q_proj.bias = 0\n",
    )
    .unwrap();
    let more = "--rules llama.rules --rules more.rules --strict -o m.safetensors";
    let stderr = refuses(dir.path(), more, 2);
    assert_mentions(
        &stderr,
        &["  more.rules:2: *.q_proj.bias = 0 matches no tensor"],
    );
}

#[test]
fn dry_runs_say_which_rule_decided_each_tensor() {
    let dir = shards("llama");
    // A flag comes before the file: it decides o_proj.
    let words = "--dry-run --axis-for *.o_proj.weight=1 --rules llama.rules";
    let (ok, report, stderr) = run(dir.path(), words);
    assert!(ok, "{stderr}");
    // Each row, its columns one space apart.
    let rows: Vec<String> = report
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    for row in [
        "model.layers.0.self_attn.o_proj.weight axis 1 float16 [8, 8] 128 bytes by --axis-for \
         '*.o_proj.weight=1'",
        "model.layers.0.mlp.down_proj.weight axis 1 float16 [8, 16] 256 bytes by \
         llama.rules:16: *.down_proj.weight = 1",
        "model.norm.weight kept float16 [8] 16 bytes by llama.rules:25: *norm.weight = keep",
    ] {
        assert!(rows.iter().any(|r| r == row), "no {row:?} in\n{report}");
    }
    let (ok, plan, _) = run(dir.path(), &words.replace("--dry-run", "--dry-run=json"));
    assert!(ok);
    let rule = rule_of(&plan, "lm_head.weight");
    assert_eq!(rule, "llama.rules:21: lm_head.weight = 0 optional");
    let rule = rule_of(&plan, "model.layers.1.self_attn.o_proj.weight");
    assert_eq!(rule, "--axis-for '*.o_proj.weight=1'");
    // Without a rule, -a decides: null. (o_proj or down_proj joined along axis 0 by -a would
    // not fit q_proj or up_proj: refused.)
    let words = "--dry-run=json -a 0 --axis-for *.o_proj.weight=1 --axis-for *.down_proj.weight=1 \
         --keep *norm*";
    let (ok, plan, _) = run(dir.path(), words);
    assert!(ok);
    assert!(rule_of(&plan, "model.layers.0.mlp.up_proj.weight").is_null());
    assert_eq!(rule_of(&plan, "model.norm.weight"), "--keep '*norm*'");
}

#[test]
fn like_catches_a_wrong_axis_and_names_the_axis_that_fits() {
    let dir = unknown_shards("llama");
    // The merge example as it was: no rule for down_proj, so it joins along axis 0.
    let old = "-a 0 --axis-for *.o_proj.weight=1 --keep *norm* --like expected.safetensors";
    let stderr = refuses(dir.path(), &format!("{old} -o model.safetensors"), 2);
    assert_mentions(
        &stderr,
        &[
            "tjoin: error: 2 output tensors would not have the shape expected.safetensors gives \
             them",
            "model.layers.0.mlp.down_proj.weight  [16, 8] (joined along axis 0); \
             expected.safetensors has [8, 16]: axis 1 gives it",
            "hint: add --axis-for '*.down_proj.weight=1'",
        ],
    );
    // The hint's rule fixes it.
    rebuilds(
        dir.path(),
        &format!("{old} --axis-for *.down_proj.weight=1"),
    );
}

#[test]
fn like_reads_a_sharded_checkpoints_index_and_its_shards_headers() {
    let dir = shards("llama");
    // The original, re-sharded by tjoin into three shards and an index.
    let reshard = [
        "expected.safetensors",
        "-o",
        "reference/",
        "--max-shard-size",
        "1KB",
    ];
    crate::util::succeeds(dir.path(), &reshard);
    let shards = fs::read_dir(dir.path().join("reference")).unwrap().count();
    assert!(shards > 2, "{shards} files: not a sharded reference");
    let index = "reference/model.safetensors.index.json";
    let right = format!("--rules llama.rules --like {index} -o model.safetensors");
    let (ok, _, stderr) = run(dir.path(), &right);
    assert!(ok, "{stderr}");
    rebuilt(dir.path());
    let old = WRONG_DOWN;
    let wrong = format!("{old} --like {index} -o other.safetensors");
    assert_mentions(
        &refuses(dir.path(), &wrong, 2),
        &["model.layers.0.mlp.down_proj.weight  [16, 8] (joined along axis 0 by --axis-for"],
    );
}

#[test]
fn like_refuses_an_index_listing_shards_outside_its_folder_as_the_input_index_does() {
    let dir = shards("llama");
    let expected = fs::read(dir.path().join("expected.safetensors")).unwrap();
    let model = SafeTensors::deserialize(&expected).unwrap();
    let absolute = dir.path().join("expected.safetensors");
    fs::create_dir(dir.path().join("reference")).unwrap();
    for (shard, shown) in [
        ("../expected.safetensors", "../expected.safetensors"),
        (absolute.to_str().unwrap(), absolute.to_str().unwrap()),
    ] {
        let map: Vec<String> = model
            .names()
            .iter()
            .map(|name| format!("{name:?}: {shard:?}"))
            .collect();
        let text = format!("{{\"weight_map\": {{{}}}}}", map.join(", "));
        let index = "reference/model.safetensors.index.json";
        fs::write(dir.path().join(index), text).unwrap();
        // The input index refuses it...
        let as_input = refused(dir.path(), &[index, "-o", "m.safetensors"], 1);
        assert_mentions(
            &as_input,
            &["which is not a path inside the index's folder"],
        );
        // ... and so does --like, instead of reading the file.
        let words = format!("--rules llama.rules --like {index} -o m.safetensors");
        assert_mentions(
            &refuses(dir.path(), &words, 2),
            &[
                &format!(
                    "tjoin: error: --like {index} lists 1 shard that is not a path inside the \
                     index's folder\n  {shown}\n"
                ),
                "hint: an index lists its shards by name",
            ],
        );
    }
}

#[test]
fn like_names_the_rule_that_set_a_wrong_axis() {
    // A BERT the family table does not know, and bert.rules renamed as it is: a rules
    // file's line that contradicts a known family is refused before --like is read.
    let dir = unknown_shards("bert");
    let bert = fs::read_to_string(dir.path().join("bert.rules")).unwrap();
    let renamed = bert.replace("attention.self", "attention_self");
    fs::write(dir.path().join("bert.rules"), renamed).unwrap();
    fs::write(
        dir.path().join("wrong.rules"),
        "*.attention_self.*.weight = 1\n",
    )
    .unwrap();
    let words = "--rules wrong.rules --rules bert.rules --like expected.safetensors --dry-run";
    let stderr = refuses(dir.path(), words, 2);
    assert_mentions(
        &stderr,
        &[
            "6 output tensors would not have the shape",
            "encoder.layer.0.attention_self.key.weight  [4, 16] (joined along axis 1 by \
             wrong.rules:1: *.attention_self.*.weight = 1); expected.safetensors has [8, 8]: \
             axis 0 gives it",
            "hint: add --axis-for '*.key.weight=0'",
        ],
    );
}

#[test]
fn like_suggests_keeping_what_every_input_already_has_at_full_size() {
    let dir = unknown_shards("llama");
    let split = "-a 0 --axis-for *.o_proj.weight=1 --axis-for *.down_proj.weight=1";
    let words = format!("--join-identical {split} --like expected.safetensors -o m.safetensors");
    let stderr = refuses(dir.path(), &words, 2);
    assert_mentions(
        &stderr,
        &[
            "5 output tensors would not have the shape",
            "model.norm.weight  [16] (joined along axis 0); expected.safetensors has [8]: \
             keeping one copy gives it",
            "--keep '*.input_layernorm.weight'",
        ],
    );
}

#[test]
fn like_refuses_tensors_the_reference_lacks_and_tensors_the_output_would_lack() {
    let dir = shards("llama");
    // The reference: the model without lm_head.weight, with an extra tensor.
    let expected = fs::read(dir.path().join("expected.safetensors")).unwrap();
    let model = SafeTensors::deserialize(&expected).unwrap();
    let mut views: Vec<(String, TensorView)> = model
        .tensors()
        .into_iter()
        .filter(|(name, _)| name != "lm_head.weight")
        .collect();
    let extra = [0u8; 4];
    let extra = TensorView::new(safetensors::Dtype::F32, vec![1], &extra).unwrap();
    views.push(("rotary.inv_freq".to_string(), extra));
    let reference = safetensors::serialize(views, None).unwrap();
    fs::write(dir.path().join("ref.safetensors"), reference).unwrap();
    let words = "--rules llama.rules --like ref.safetensors -o m.safetensors";
    assert_mentions(
        &refuses(dir.path(), words, 2),
        &[
            "tjoin: error: ref.safetensors has no tensor of the name of 1 output tensor, so its \
             shape cannot be checked\n  lm_head.weight\n",
            "tjoin: error: the output would lack 1 tensor ref.safetensors holds\n  \
             rotary.inv_freq\n",
        ],
    );
}

#[test]
fn like_refuses_what_is_not_a_safetensors_file_or_an_index() {
    let dir = shards("llama");
    fs::write(dir.path().join("model.safetensors.index.json"), "{}").unwrap();
    fs::write(dir.path().join("notes.safetensors"), "not a header").unwrap();
    let like = |reference: &str| format!("--rules llama.rules --like {reference}");
    let refused_with = |reference: &str, code| {
        refuses(
            dir.path(),
            &format!("{} -o m.safetensors", like(reference)),
            code,
        )
    };
    let stderr = refused_with("model.safetensors.index.json", 2);
    assert_mentions(
        &stderr,
        &["--like model.safetensors.index.json is not a valid index"],
    );
    let stderr = refused_with("notes.safetensors", 2);
    assert_mentions(
        &stderr,
        &["--like notes.safetensors is not a valid safetensors file"],
    );
    let stderr = refused_with("absent.safetensors", 1);
    assert_mentions(
        &stderr,
        &["cannot open the --like reference absent.safetensors"],
    );
    // Only its header is read: a reference whose data is all zeros passes.
    let expected = fs::read(dir.path().join("expected.safetensors")).unwrap();
    let header = 8 + u64::from_le_bytes(expected[..8].try_into().unwrap()) as usize;
    let mut zeros = expected[..header].to_vec();
    zeros.resize(expected.len(), 0);
    fs::write(dir.path().join("zeros.safetensors"), zeros).unwrap();
    rebuilds(dir.path(), &like("zeros.safetensors"));
}

/// The lines of the merge example's command in `text`: after the line holding `marker` (and,
/// in Markdown, after the next line that opens a code block), up to the first that does not
/// end in a `\`, without `indent`.
fn command_after(text: &str, marker: &str, markdown: bool, indent: &str) -> String {
    let mut lines = text.lines().skip_while(|l| !l.contains(marker)).skip(1);
    if markdown {
        lines.by_ref().find(|l| l.starts_with("```"));
    }
    let mut command = Vec::new();
    for line in lines.by_ref() {
        command.push(line.strip_prefix(indent).unwrap_or(line).to_string());
        if !line.ends_with('\\') {
            break;
        }
    }
    command.join("\n")
}

#[test]
fn the_merge_example_is_the_same_in_help_and_readme_and_rebuilds_llama() {
    let help = tjoin().arg("--help").output().unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    let in_help = command_after(
        &help,
        "Merge Llama-style tensor-parallel shards",
        false,
        "    ",
    );
    let readme = fs::read_to_string(Path::new(ROOT).join("README.md")).unwrap();
    let in_readme = command_after(&readme, "**A model-shard merge.**", true, "");
    assert!(in_help.starts_with("tjoin -a 0 --axis-for"), "{in_help}");
    assert!(
        in_help.contains(" --like original.safetensors "),
        "{in_help}"
    );
    assert_eq!(
        in_help, in_readme,
        "--help and README.md show different merge examples"
    );
    let page = tjoin().args(["--generate", "man"]).output().unwrap();
    let page = String::from_utf8(page.stdout).unwrap();
    assert!(
        page.contains("\\-\\-axis\\-for \\*(Aq*.down_proj.weight=1\\*(Aq \\\\\n      \\-\\-keep")
    );
    // Run as a shell would: words split at blanks, quotes removed, the line joined.
    let words: Vec<String> = in_help
        .replace("\\\n", " ")
        .split_whitespace()
        .map(|w| w.trim_matches('\'').to_string())
        .collect();
    assert_eq!(words[0], "tjoin");
    let dir = shards("llama");
    fs::copy(
        dir.path().join("expected.safetensors"),
        dir.path().join("original.safetensors"),
    )
    .unwrap();
    let args: Vec<&str> = words[1..].iter().map(String::as_str).collect();
    succeeds(dir.path(), &args);
    rebuilt(dir.path());
}

#[test]
fn like_takes_a_folder_holding_an_index_or_one_safetensors_file() {
    let dir = shards("llama");
    let reshard = [
        "expected.safetensors",
        "-o",
        "sharded/",
        "--max-shard-size",
        "1KB",
    ];
    crate::util::succeeds(dir.path(), &reshard);
    fs::create_dir(dir.path().join("single")).unwrap();
    fs::copy(
        dir.path().join("expected.safetensors"),
        dir.path().join("single/model.safetensors"),
    )
    .unwrap();
    for folder in ["sharded", "sharded/", "single"] {
        rebuilds(dir.path(), &format!("--rules llama.rules --like {folder}"));
        let old = WRONG_DOWN;
        let wrong = format!("{old} --like {folder} -o other.safetensors");
        assert_mentions(
            &refuses(dir.path(), &wrong, 2),
            &["model.layers.0.mlp.down_proj.weight  [16, 8] (joined along axis 0 by --axis-for"],
        );
        assert!(!dir.path().join("other.safetensors").exists());
    }
}

#[test]
fn like_takes_a_pytorch_checkpoint() {
    let dir = shards("llama");
    let pt = Path::new(ROOT).join("fixtures/pytorch_set/llama.pt");
    fs::copy(pt, dir.path().join("llama.pt")).unwrap();
    rebuilds(dir.path(), "--rules llama.rules --like llama.pt");
    let old = format!("{WRONG_DOWN} --like llama.pt");
    assert_mentions(
        &refuses(dir.path(), &format!("{old} -o other.safetensors"), 2),
        &[
            "tjoin: error: 2 output tensors would not have the shape llama.pt gives them",
            "model.layers.0.mlp.down_proj.weight  [16, 8] (joined along axis 0 by --axis-for \
             '*.down_proj.weight=0'); llama.pt has [8, 16]: axis 1 gives it",
        ],
    );
}

/// Writes the tensors of `dir/expected.safetensors` that `keep` selects into `dir/file`,
/// each with the shape `reshape` gives it.
fn part_of_expected(
    dir: &Path,
    file: &str,
    keep: impl Fn(&str) -> bool,
    reshape: impl Fn(&str, &[usize]) -> Vec<usize>,
) {
    let expected = fs::read(dir.join("expected.safetensors")).unwrap();
    let model = SafeTensors::deserialize(&expected).unwrap();
    let views: Vec<(String, TensorView)> = model
        .tensors()
        .into_iter()
        .filter(|(name, _)| keep(name))
        .map(|(name, view)| {
            let shape = reshape(&name, view.shape());
            let view = TensorView::new(view.dtype(), shape, view.data()).unwrap();
            (name, view)
        })
        .collect();
    fs::write(dir.join(file), safetensors::serialize(views, None).unwrap()).unwrap();
}

#[test]
fn like_given_twice_checks_against_the_union_and_refuses_a_name_given_two_shapes() {
    let dir = shards("llama");
    let same = |_: &str, shape: &[usize]| shape.to_vec();
    let first = |name: &str| name.starts_with("model.layers.0.");
    part_of_expected(dir.path(), "layer0.safetensors", first, same);
    part_of_expected(dir.path(), "rest.safetensors", |name| !first(name), same);
    // Together they are the model: the merge is checked against both.
    let both = "--like layer0.safetensors --like rest.safetensors";
    rebuilds(dir.path(), &format!("--rules llama.rules {both}"));
    let old = WRONG_DOWN;
    assert_mentions(
        &refuses(dir.path(), &format!("{old} {both} -o other.safetensors"), 2),
        &[
            "output tensors would not have the shape the --like references give them",
            "model.layers.0.mlp.down_proj.weight  [16, 8] (joined along axis 0 by --axis-for \
             '*.down_proj.weight=0'); layer0.safetensors has [8, 16]: axis 1 gives it",
            "model.layers.1.mlp.down_proj.weight  [16, 8] (joined along axis 0 by --axis-for \
             '*.down_proj.weight=0'); rest.safetensors has [8, 16]: axis 1 gives it",
        ],
    );
    // A name the two give different shapes: the output cannot match both.
    let flat = |name: &str, shape: &[usize]| {
        if name == "model.layers.0.mlp.down_proj.weight" {
            vec![shape.iter().product()]
        } else {
            shape.to_vec()
        }
    };
    part_of_expected(dir.path(), "flat.safetensors", |_| true, flat);
    let words = "--rules llama.rules --like layer0.safetensors --like flat.safetensors";
    assert_mentions(
        &refuses(dir.path(), &format!("{words} -o other.safetensors"), 2),
        &[
            "tjoin: error: the --like references give 1 tensor two shapes: the output cannot \
             match both\n  model.layers.0.mlp.down_proj.weight  [8, 16] in layer0.safetensors, \
             [128] in flat.safetensors\n",
            "hint: several --like flags name parts of one model",
        ],
    );
    assert!(!dir.path().join("other.safetensors").exists());
}

#[test]
fn like_refuses_a_reference_whose_tensor_has_no_name() {
    let dir = shards("llama");
    crate::util::write_npy(&dir.path().join("one.npy"), "<f4", &[2], false, &[0u8; 8]);
    let words = "--rules llama.rules --like one.npy -o m.safetensors";
    assert_mentions(
        &refuses(dir.path(), words, 2),
        &[
            "tjoin: error: --like one.npy holds one unnamed tensor, as every .npy file does",
            "hint: name the model the output should match",
        ],
    );
}

/// Every `tjoin` command in `text` (after `indent`, or `$ ` for a shown prompt), its `\`
/// continuation lines joined.
fn commands(text: &str, indent: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let line = line.strip_prefix(indent).unwrap_or(line);
        let line = line.strip_prefix("$ ").unwrap_or(line).trim_start();
        if !line.starts_with("tjoin ") {
            continue;
        }
        let mut command = line.to_string();
        while command.ends_with('\\') {
            command.pop();
            match lines.next() {
                Some(next) => command.push_str(next.trim_start()),
                None => break,
            }
        }
        found.push(command);
    }
    found
}

#[test]
fn every_tensor_parallel_example_checks_its_shapes_with_like() {
    let help = tjoin().arg("--help").output().unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    let readme = fs::read_to_string(Path::new(ROOT).join("README.md")).unwrap();
    // The man page shows every example; its roff escapes undone, its bold marks dropped.
    let page = tjoin().args(["--generate", "man"]).output().unwrap();
    let page = String::from_utf8(page.stdout).unwrap();
    let page = page
        .replace("\\fB", "")
        .replace("\\fR", "")
        .replace("\\-", "-")
        .replace("\\*(Aq", "'")
        .replace("\\\\", "\\");
    let mut merges = 0;
    for command in commands(&help, "    ")
        .into_iter()
        .chain(commands(&readme, ""))
        .chain(commands(&page, ""))
    {
        let ranks = ["tp0.safetensors", "tp*.safetensors", "rank0/"];
        if ranks.iter().any(|rank| command.contains(rank)) {
            merges += 1;
            assert!(command.contains(" --like "), "no --like: {command}");
        }
    }
    assert!(merges >= 8, "only {merges} tensor-parallel examples found");
}

#[test]
fn like_refuses_standard_input_which_is_the_inputs() {
    let dir = shards("llama");
    assert_mentions(
        &refuses(
            dir.path(),
            "--rules llama.rules --like - -o m.safetensors",
            2,
        ),
        &["tjoin: error: --like - would read the reference from standard input"],
    );
}
