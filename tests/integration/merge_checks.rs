//! Checkpoint merges that cannot write a wrong model, part 2 (issue 29): the rank order the
//! inputs' names give, the same file twice, sizes no split gives, identical pieces under an
//! axis rule, constant tensors (replicated or split, their bytes cannot tell), copies in two
//! byte orders, and hints that lead to the right model. The shards are fixtures/merge/
//! (`fixtures/make_merge_fixtures.py`); each case wrote a wrong model with exit 0 before.

use std::fs;
use std::path::Path;

use crate::util::{assert_mentions, refused, succeeds};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A folder holding the files of `fixtures/merge/MODEL/` and `rules/llama.rules`.
fn fixture(model: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let from = Path::new(ROOT).join("fixtures/merge").join(model);
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
    }
    let rules = Path::new(ROOT).join("rules/llama.rules");
    fs::copy(rules, dir.path().join("llama.rules")).unwrap();
    // The model's config.json (fixtures/make_merge_fixtures.py's sizes), beside the ranks: a
    // merge must be proven complete (issue 41).
    let key_value = if model == "mqa" { 1 } else { 2 };
    let config = format!(
        r#"{{"hidden_size": 8, "num_attention_heads": 2, "num_key_value_heads": {key_value},
           "vocab_size": 32}}"#
    );
    fs::write(dir.path().join("config.json"), config).unwrap();
    dir
}

/// Copies `from` to `to` in `dir`.
fn copy(dir: &Path, from: &str, to: &str) {
    if let Some(parent) = Path::new(to).parent() {
        fs::create_dir_all(dir.join(parent)).unwrap();
    }
    fs::copy(dir.join(from), dir.join(to)).unwrap();
}

/// The words of `line`, split at blanks (the globs here hold none), quotes removed.
fn words(line: &str) -> Vec<String> {
    line.split_whitespace()
        .map(|w| w.trim_matches('\'').to_string())
        .collect()
}

/// Runs tjoin in `dir` with the words of `line`; it must be refused with exit 2. Returns
/// stderr.
#[track_caller]
fn refuses(dir: &Path, line: &str) -> String {
    let words = words(line);
    let args: Vec<&str> = words.iter().map(String::as_str).collect();
    refused(dir, &args, 2)
}

/// Runs tjoin in `dir` with the words of `line`; it must succeed.
#[track_caller]
fn writes(dir: &Path, line: &str) {
    let words = words(line);
    let args: Vec<&str> = words.iter().map(String::as_str).collect();
    succeeds(dir, &args);
}

/// Fails unless `dir/written` is `dir/expected.safetensors` byte for byte.
#[track_caller]
fn is_expected(dir: &Path, written: &str) {
    let written = fs::read(dir.join(written)).unwrap();
    let expected = fs::read(dir.join("expected.safetensors")).unwrap();
    assert!(written == expected, "not the original model, byte for byte");
}

const LLAMA: &str = "--rules llama.rules --config config.json";

#[test]
fn ranks_given_out_of_their_numbers_order_are_refused_with_the_numeric_order() {
    let dir = fixture("llama");
    let dir = dir.path();
    let stderr = refuses(
        dir,
        &format!("{LLAMA} tp1.safetensors tp0.safetensors -o m.safetensors"),
    );
    assert_mentions(
        &stderr,
        &[
            "tjoin: error: the inputs' names number them as ranks, but they are not given in \
             the numbers' order: input 1 (tp1.safetensors) is rank 1 and input 2 \
             (tp0.safetensors) is rank 0",
            "hint: give them in the numbers' order: tp0.safetensors tp1.safetensors (in a \
             shell, $(ls -v tp*.safetensors) or $(printf '%s\\n' tp*.safetensors | sort -V) \
             lists them so",
            "add --any-order",
        ],
    );
    // A shell's tp*.safetensors: tp10 before tp2.
    copy(dir, "tp0.safetensors", "tp2.safetensors");
    copy(dir, "tp1.safetensors", "tp10.safetensors");
    let stderr = refuses(
        dir,
        &format!("{LLAMA} tp10.safetensors tp2.safetensors -o m.safetensors"),
    );
    assert_mentions(
        &stderr,
        &["give them in the numbers' order: tp2.safetensors tp10.safetensors"],
    );
    // A gap: rank 1 missing.
    copy(dir, "tp0.safetensors", "rank_00.safetensors");
    copy(dir, "tp1.safetensors", "rank_02.safetensors");
    let stderr = refuses(
        dir,
        &format!("{LLAMA} rank_00.safetensors rank_02.safetensors -o m.safetensors"),
    );
    assert_mentions(
        &stderr,
        &["number them as ranks 0 to 2, but rank 1 is not among them"],
    );
    // Megatron's folders, one per rank.
    copy(dir, "tp0.safetensors", "mp_rank_00/model.safetensors");
    copy(dir, "tp1.safetensors", "mp_rank_01/model.safetensors");
    let stderr = refuses(
        dir,
        &format!(
            "{LLAMA} mp_rank_01/model.safetensors mp_rank_00/model.safetensors -o m.safetensors"
        ),
    );
    assert_mentions(
        &stderr,
        &["input 1 (mp_rank_01/model.safetensors) is rank 1"],
    );
    // -of-N: a count that disagrees.
    copy(dir, "tp0.safetensors", "m-00001-of-00003.safetensors");
    copy(dir, "tp1.safetensors", "m-00002-of-00003.safetensors");
    let stderr = refuses(
        dir,
        &format!(
            "{LLAMA} m-00001-of-00003.safetensors m-00002-of-00003.safetensors -o m.safetensors"
        ),
    );
    assert_mentions(
        &stderr,
        &["the inputs' names say there are 3 shards (-of-00003), but 2 are given"],
    );
    // In order, the merge is the original; --any-order takes the order given.
    writes(
        dir,
        &format!(
            "{LLAMA} mp_rank_00/model.safetensors mp_rank_01/model.safetensors -o m.safetensors"
        ),
    );
    is_expected(dir, "m.safetensors");
    writes(
        dir,
        &format!("{LLAMA} --any-order tp1.safetensors tp0.safetensors -o swapped.safetensors"),
    );
}

#[test]
fn the_same_file_given_twice_to_a_merge_is_refused_by_name() {
    let dir = fixture("llama");
    let dir = dir.path();
    let stderr = refuses(
        dir,
        &format!("{LLAMA} tp0.safetensors tp0.safetensors -o m.safetensors"),
    );
    assert_mentions(
        &stderr,
        &[
            "tjoin: error: input 1 (tp0.safetensors) and input 2 (tp0.safetensors) are the \
             same path",
            "hint: give each rank's file once",
        ],
    );
    // Another name for the same file.
    fs::hard_link(dir.join("tp0.safetensors"), dir.join("other.safetensors")).unwrap();
    let stderr = refuses(
        dir,
        &format!("{LLAMA} tp0.safetensors other.safetensors -o m.safetensors"),
    );
    assert_mentions(
        &stderr,
        &["input 2 (other.safetensors) are the same file as tp0.safetensors"],
    );
}

#[test]
fn sizes_that_no_split_gives_are_refused_unless_uneven() {
    let dir = fixture("llama");
    let dir = dir.path();
    // The unsplit model and rank 1 of two: two tensor-parallel degrees mixed.
    let mixed = format!("{LLAMA} expected.safetensors tp1.safetensors");
    let stderr = refuses(dir, &format!("{mixed} -o m.safetensors"));
    assert_mentions(
        &stderr,
        &[
            "tjoin: error: 16 tensors have sizes along the join axis that no split gives",
            "model.layers.0.self_attn.q_proj.weight along axis 0: 8 (input 1, \
             expected.safetensors) + 4 (input 2, tp1.safetensors)",
            // --uneven was tried before the hint was printed (issue 41, item 10): refused,
            // so not offered as the fix, with what it still refuses.
            "--uneven would not do: with it, tjoin still refuses the merge: 8 merged tensors \
             have a size other than config.json gives",
        ],
    );
    assert!(!stderr.contains("add --uneven"), "{stderr}");
    // --uneven lets the sizes through; config.json's head counts then refuse the mix (issue
    // 41): a merge is proven complete and its heads whole.
    let stderr = refuses(dir, &format!("{mixed} --uneven -o m.safetensors"));
    assert_mentions(
        &stderr,
        &[
            "merged tensors have a size other than config.json gives",
            "model.layers.0.self_attn.q_proj.weight  [12, 8]: 12 along axis 0, but \
             config.json gives 8 (2 query heads of 4)",
        ],
    );
    // Without a config.json, nothing proves the merge complete.
    fs::remove_file(dir.join("config.json")).unwrap();
    let stderr = refuses(
        dir,
        "--rules llama.rules expected.safetensors tp1.safetensors --uneven -o m.safetensors",
    );
    assert_mentions(
        &stderr,
        &["cannot tell whether these 2 inputs are every rank"],
    );
    // Without --uneven, the hint says so, and what would let tjoin tell.
    let stderr = refuses(
        dir,
        "--rules llama.rules expected.safetensors tp1.safetensors -o m.safetensors",
    );
    assert_mentions(
        &stderr,
        &[
            "--uneven would not do: with it, tjoin still refuses the merge: cannot tell \
             whether these 2 inputs are every rank",
            "prove it with the model's config.json",
        ],
    );
    assert!(!stderr.contains("add --uneven"), "{stderr}");
    // A dataset's shards (no tensor rules) keep any sizes: 3 + 5 + 2 rows.
    let npz = Path::new(ROOT).join("fixtures/containers/npz");
    for day in ["day0.npz", "day1.npz", "day2.npz"] {
        fs::copy(npz.join(day), dir.join(day)).unwrap();
    }
    writes(dir, "-a 0 day0.npz day1.npz day2.npz -o all.npz");
}

#[test]
fn identical_pieces_under_an_axis_rule_are_refused_and_the_hint_keeps_them() {
    // One key/value head, held whole by every rank; llama.rules joins k_proj along axis 0.
    let dir = fixture("mqa");
    let dir = dir.path();
    // config.json's one key-value head on 2 ranks: the Llama family holds k_proj and v_proj
    // in groups of 2 ranks, which llama.rules contradicts (issue 41, item 6).
    let stderr = refuses(
        dir,
        &format!("{LLAMA} tp0.safetensors tp1.safetensors -o m.safetensors"),
    );
    assert_mentions(
        &stderr,
        &[
            "tjoin: error: the flags contradict the llama family's rules for 4 tensors",
            "model.layers.0.self_attn.k_proj.weight, model.layers.1.self_attn.k_proj.weight: \
             by llama.rules:9: *.k_proj.weight = 0, but the llama family's rule is \
             config.json's heads:1: *.k_proj.* = 0 replicas 2",
            "hint: no flags needed",
        ],
    );
    writes(
        dir,
        "--config config.json tp0.safetensors tp1.safetensors -o f.safetensors",
    );
    is_expected(dir, "f.safetensors");
    // Named on the command line, the rule is the user's: the identical pieces refuse it.
    let named = format!("{LLAMA} --axis-for *.k_proj.weight=0 --axis-for *.v_proj.weight=0");
    let stderr = refuses(
        dir,
        &format!("{named} tp0.safetensors tp1.safetensors -o m.safetensors"),
    );
    assert_mentions(
        &stderr,
        &[
            "tjoin: error: 4 tensors have the same bytes in every input, yet a rule joins them \
             along an axis: the output would hold 2 copies of one piece",
            "model.layers.0.self_attn.k_proj.weight  float16  [4, 8]  joined by --axis-for \
             '*.k_proj.weight=0'",
            // The family's rules alone merge it: said too (issue 41, item 10).
            "hint: no flags needed: the tensor names are a llama model's",
            "keep one copy with --keep '*.k_proj.weight' --keep '*.v_proj.weight'",
        ],
    );
    // A model's identical pieces are never a split, and no check could tell their join from
    // the model: the hint does not offer --join-identical (issue 41, item 10).
    assert!(!stderr.contains("add --join-identical"), "{stderr}");
    // The hint's flags act (--keep decides before every rule): the original.
    writes(
        dir,
        &format!(
            "{named} --keep *.k_proj.weight --keep *.v_proj.weight tp0.safetensors \
             tp1.safetensors -o m.safetensors"
        ),
    );
    is_expected(dir, "m.safetensors");
    // --join-identical joins them, as asked, into [8, 8]: config.json's one key-value head
    // refuses that (issue 41); the unsplit model's header would too.
    let stderr = refuses(
        dir,
        &format!("{named} --join-identical tp0.safetensors tp1.safetensors -o j.safetensors"),
    );
    assert_mentions(
        &stderr,
        &[
            "model.layers.0.self_attn.k_proj.weight  [8, 8]: 8 along axis 0, but config.json \
           gives 4 (1 key-value heads of 4)",
        ],
    );
}

/// The `--keep` and `--axis-for` flags after `marker` in the hint of `stderr`, as words.
fn flags_after(stderr: &str, marker: &str) -> Vec<String> {
    let hint = stderr.lines().find(|l| l.starts_with("hint: ")).unwrap();
    let Some((_, rest)) = hint.split_once(marker) else {
        return Vec::new();
    };
    let rest = rest.split(", then").next().unwrap();
    let mut flags = Vec::new();
    let mut words = rest.split(' ');
    while let Some(word) = words.next() {
        if word == "--keep" || word == "--axis-for" {
            let value = words.next().unwrap().trim_end_matches([',', ';', ')']);
            flags.push(format!("{word} {}", value.trim_matches('\'')));
        }
    }
    flags
}

#[test]
fn constant_tensors_are_not_called_replicated_and_like_tells_their_axis() {
    // Zero biases, split along axis 0: every rank holds the same bytes for them.
    let dir = fixture("zero_bias");
    let dir = dir.path();
    let shards = "tp0.safetensors tp1.safetensors -o m.safetensors";
    let stderr = refuses(dir, &format!("{LLAMA} -a 0 {shards}"));
    assert_mentions(
        &stderr,
        &[
            "tjoin: error: 6 tensors hold one value throughout and the same bytes in every \
             input, and no rule decides them: the bytes cannot tell a tensor each input holds \
             whole (replicated) from one split across them",
            "model.layers.0.self_attn.q_proj.bias  float16  [4]  all zeros",
            "hint: name the unsplit model's header with --like REFERENCE",
        ],
    );
    assert!(!stderr.contains("keep one copy"), "{stderr}");
    // With --like, tjoin can tell: the hint is the rule that gives the original.
    let like = format!("{LLAMA} -a 0 --like expected.safetensors");
    let stderr = refuses(dir, &format!("{like} {shards}"));
    assert_mentions(
        &stderr,
        &[
            "model.layers.0.self_attn.q_proj.bias  float16  [4]  all zeros; --like: split \
             along axis 0",
            "hint: the --like reference says the inputs hold slices: add --axis-for '*.bias=0'",
        ],
    );
    let fix = flags_after(&stderr, "add ").join(" ");
    writes(dir, &format!("{like} {fix} {shards}"));
    is_expected(dir, "m.safetensors");
}

#[test]
fn hints_never_suggest_a_flag_that_one_given_overrides_and_following_them_rebuilds() {
    let dir = fixture("zero_bias");
    let dir = dir.path();
    // The old hint's --keep '*.bias' on the line: an --axis-for added after it cannot act.
    let mut line = format!("{LLAMA} -a 0 --keep *.bias --like expected.safetensors");
    let shards = "tp0.safetensors tp1.safetensors -o m.safetensors";
    let stderr = refuses(dir, &format!("{line} {shards}"));
    assert_mentions(
        &stderr,
        &[
            "model.layers.0.self_attn.q_proj.bias  [4] (kept by --keep '*.bias'); \
             expected.safetensors has [8]: axis 0 gives it",
            "hint: --keep flags decide before --axis-for flags, and earlier flags before later \
             ones: drop --keep '*.bias', then add --axis-for '*.bias=0'",
        ],
    );
    // Following every hint ends at the original model.
    for _ in 0..4 {
        let words = words(&format!("{line} {shards}"));
        let args: Vec<&str> = words.iter().map(String::as_str).collect();
        let out = crate::util::tjoin()
            .current_dir(dir)
            .args(&args)
            .output()
            .unwrap();
        if out.status.success() {
            is_expected(dir, "m.safetensors");
            return;
        }
        let stderr = String::from_utf8(out.stderr).unwrap();
        for flag in flags_after(&stderr, "drop ") {
            line = line.replace(&format!(" {flag}"), "");
        }
        let add = flags_after(&stderr, "add ");
        assert!(!add.is_empty(), "a hint that leads nowhere:\n{stderr}");
        line = format!("{line} {}", add.join(" "));
    }
    panic!("the hints did not lead to a merge: {line}");
}

#[test]
fn copies_in_two_byte_orders_are_the_same_tensor() {
    // `norm` little-endian in tp0.npz, big-endian in tp1.npz, the same values.
    let dir = fixture("endian");
    let dir = dir.path();
    let stderr = refuses(dir, "-a 0 tp0.npz tp1.npz -o m.npz");
    assert_mentions(
        &stderr,
        &[
            "1 tensor has the same shape and bytes in every input",
            "--keep norm",
        ],
    );
    writes(dir, "-a 0 --keep norm tp0.npz tp1.npz -o m.npz");
    // Each member as numpy wrote the merge, little-endian.
    for member in ["w", "norm"] {
        let (got, want) = (format!("{member}.npy"), format!("expected_{member}.npy"));
        writes(dir, &format!("m.npz:{member} -o {got}"));
        writes(dir, &format!("expected.npz:{member} -o {want}"));
        let got = fs::read(dir.join(got)).unwrap();
        assert!(got == fs::read(dir.join(want)).unwrap(), "{member} differs");
    }
}

/// Runs tjoin in `dir` with `args` and `-o out.safetensors`, following the flags of every
/// hint literally (`completeness::hinted_flags`) for a few rounds: each run writes
/// `expected.safetensors` byte for byte, or is refused (exit 2, nothing written) with hints
/// that repeat no flag already given, a fix that failed (issue 41, item 10). The verdict.
#[track_caller]
fn follow_hints(dir: &Path, mut args: Vec<String>) -> String {
    for _ in 0..4 {
        let _ = fs::remove_file(dir.join("out.safetensors"));
        let output = crate::util::tjoin()
            .current_dir(dir)
            .args(&args)
            .args(["-o", "out.safetensors"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        if output.status.success() {
            let written = fs::read(dir.join("out.safetensors")).unwrap();
            let expected = fs::read(dir.join("expected.safetensors")).unwrap();
            assert!(
                written == expected,
                "{args:?} wrote a wrong model, exit 0\n{stderr}"
            );
            return "the original".to_string();
        }
        assert_eq!(output.status.code(), Some(2), "{args:?}:\n{stderr}");
        assert!(
            !dir.join("out.safetensors").exists(),
            "{args:?} left a file"
        );
        let flags = crate::completeness::hinted_flags(&stderr);
        let given = |flag: &[String]| args.windows(flag.len()).any(|w| w == flag);
        let repeated: Vec<&Vec<String>> = flags.iter().filter(|f| given(f)).collect();
        assert!(
            repeated.is_empty(),
            "{args:?}: the hint repeats {repeated:?}\n{stderr}"
        );
        if flags.is_empty() {
            let error = stderr.lines().find(|l| l.starts_with("tjoin: error: "));
            return error.unwrap_or_default().to_string();
        }
        let mut new: Vec<Vec<String>> = Vec::new();
        for flag in flags {
            if !new.contains(&flag) {
                new.push(flag);
            }
        }
        args.splice(0..0, new.into_iter().flatten());
    }
    panic!("the hints did not end in a merge or a refusal without flags: {args:?}");
}

/// Every refusal class whose hint offers flags, on the fixtures/merge/ ranks (config.json
/// beside them), its hints followed literally: the original model, or a refusal that offers
/// no flag already given; never a wrong model with exit 0. The rank given twice, the
/// replicated norms joined by `-a 0` and the mixed splits wrote a wrong model with exit 0
/// (the first two) or were refused for the hint's own `--uneven` (the last) before.
#[test]
fn every_hint_with_flags_followed_literally_gives_the_original_or_a_new_refusal() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "llama",
            "a rank twice",
            "--rules llama.rules tp0.safetensors tp0.safetensors",
        ),
        (
            "llama",
            "a rank twice, no flags",
            "tp0.safetensors tp0.safetensors",
        ),
        (
            "llama",
            "rules forgotten",
            "-a 0 tp0.safetensors tp1.safetensors",
        ),
        (
            "llama",
            "two splits mixed",
            "--rules llama.rules expected.safetensors tp1.safetensors",
        ),
        (
            "mqa",
            "one key-value head joined",
            "--rules llama.rules --axis-for *.k_proj.weight=0 --axis-for *.v_proj.weight=0 \
             tp0.safetensors tp1.safetensors",
        ),
        (
            "zero_bias",
            "constant tensors, --like",
            "--rules llama.rules -a 0 --like expected.safetensors tp0.safetensors \
             tp1.safetensors",
        ),
        (
            "bert",
            "rules forgotten",
            "-a 0 tp0.safetensors tp1.safetensors",
        ),
    ];
    let mut table = Vec::new();
    for &(model, what, line) in cases {
        let dir = fixture(model);
        let verdict = follow_hints(dir.path(), words(line));
        table.push(format!("{model}  {what}: {verdict}"));
        // Without config.json, what proves a merge decides; still never a wrong model.
        fs::remove_file(dir.path().join("config.json")).unwrap();
        let verdict = follow_hints(dir.path(), words(line));
        table.push(format!("{model}  {what}, no config.json: {verdict}"));
    }
    println!("{}", table.join("\n"));
}
