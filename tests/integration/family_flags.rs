//! Flags that contradict a known family are refused (issue 41, item 6): `-a 0` never joins
//! a row-parallel tensor of a family tjoin knows (o_proj, down_proj, Mixtral's w2, GPT-2's
//! Conv1D c_attn and c_fc, GPT-NeoX's dense) on axis 0, nor a replicated one; nor does
//! another family's rules file. The refusal gives the family's rule, and says "no flags
//! needed" once the merge by the family's rules alone has passed every check. A tensor the
//! user names (`--axis-for`, `--keep`) is the user's. The ranks are fixtures/families/.

use std::fs;

use crate::builtin_families::ranks_beside_config;
use crate::families::FAMILIES;
use crate::util::{assert_mentions, refused, succeeds};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The family of fixtures/families/ named `name`.
fn family(name: &str) -> &'static crate::families::Family {
    FAMILIES.iter().find(|f| f.name == name).unwrap()
}

/// `flags`, then `ranks`, then `-o model.safetensors`.
pub(crate) fn with_ranks<'a>(flags: &[&'a str], ranks: &'a [String]) -> Vec<&'a str> {
    let mut args = flags.to_vec();
    args.extend(ranks.iter().map(String::as_str));
    args.extend(["-o", "model.safetensors"]);
    args
}

/// `-a 0` on every family, split into 2 and 4: refused, the hint says no flags are needed,
/// and the command without `-a` (the hint followed) writes the original byte for byte.
#[test]
fn a_on_a_known_family_is_refused_and_the_hint_says_no_flags_are_needed() {
    for family in FAMILIES {
        for n in [2, 4] {
            let (dir, ranks) = ranks_beside_config(family, n, true);
            let args = with_ranks(&["-a", "0"], &ranks);
            let stderr = refused(dir.path(), &args, 2);
            let what = format!("{} tp{n}", family.name);
            assert!(
                stderr.starts_with("tjoin: error: the flags contradict the "),
                "{what}: {stderr}"
            );
            assert_mentions(&stderr, &["family's rules for ", ": by -a 0, but the "]);
            assert!(stderr.contains("hint: no flags needed"), "{what}: {stderr}");
            // The hint followed: the flags dropped.
            succeeds(dir.path(), &args[2..]);
            let written = fs::read(dir.path().join("model.safetensors")).unwrap();
            let expected = fs::read(family.expected()).unwrap();
            assert!(written == expected, "{what}: not the original");
        }
    }
}

/// The row-parallel tensor of each family, as the refusal of `-a 0` names it with the
/// family's rule; without config.json, the hint says what the merge without flags does:
/// "no flags needed" when it writes the original, else its refusal.
#[test]
fn the_refusal_names_each_familys_row_parallel_rule() {
    let cases = [
        ("llama", "*.o_proj.weight = 1"),
        ("mixtral", "*.experts.*.w2.weight = 1"),
        ("gpt2", "*.c_attn.weight = 1 chunks 3"),
        ("gpt-neox", "*.dense_4h_to_h.weight = 1"),
        ("bert", "*.output.dense.weight = 1"),
        ("megatron-gpt", "*.linear_fc2.weight = 1"),
    ];
    for (name, rule) in cases {
        let family = family(name);
        let (dir, ranks) = ranks_beside_config(family, 2, false);
        let args = with_ranks(&["-a", "0"], &ranks);
        let stderr = refused(dir.path(), &args, 2);
        assert_mentions(
            &stderr,
            &[
                &format!("the flags contradict the {name} family's rules"),
                &format!("but the {name} family's rule is built-in {name}.rules:"),
                rule,
            ],
        );
        let flagless = crate::util::tjoin()
            .current_dir(dir.path())
            .args(&args[2..])
            .output()
            .unwrap();
        if flagless.status.success() {
            let written = fs::read(dir.path().join("model.safetensors")).unwrap();
            assert!(written == fs::read(family.expected()).unwrap(), "{name}");
            assert!(stderr.contains("hint: no flags needed"), "{name}: {stderr}");
        } else {
            let theirs = String::from_utf8(flagless.stderr).unwrap();
            let headline = theirs.lines().next().unwrap();
            let headline = headline.strip_prefix("tjoin: error: ").unwrap();
            assert!(!stderr.contains("no flags needed"), "{name}: {stderr}");
            let said = format!("tjoin merges by them, but refuses these inputs: {headline}");
            assert_mentions(&stderr, &[&said]);
        }
    }
}

/// README's Llama flags on another family: llama.rules and `-a 0` on a Mixtral (w2), a GPT-2
/// (Conv1D) and a GPT-NeoX, and GPT-NeoX's rules file with `chunks 3` on its per-head
/// `query_key_value`: each refused, the contradicting rule named.
#[test]
fn another_familys_rules_or_readme_flags_are_refused() {
    let llama = format!("{ROOT}/rules/llama.rules");
    for (name, named) in [
        ("mixtral", "experts.1.w2.weight: by -a 0"),
        ("gpt2", "c_attn.weight: by -a 0"),
        ("gpt-neox", "dense_4h_to_h.weight: by -a 0"),
    ] {
        let (dir, ranks) = ranks_beside_config(family(name), 2, true);
        let flags = ["--allow-unmatched", "--rules", &llama, "-a", "0"];
        let stderr = refused(dir.path(), &with_ranks(&flags, &ranks), 2);
        assert_mentions(
            &stderr,
            &[
                &format!("the flags contradict the {name} family's rules"),
                named,
                "hint: no flags needed",
            ],
        );
    }
    let (dir, ranks) = ranks_beside_config(family("gpt-neox"), 2, true);
    let text = fs::read_to_string(format!("{ROOT}/rules/gpt-neox.rules")).unwrap();
    let chunked = text.replace(
        "*.query_key_value.* = 0 plain",
        "*.query_key_value.* = 0 chunks 3",
    );
    assert_ne!(chunked, text);
    fs::write(dir.path().join("chunked.rules"), chunked).unwrap();
    let args = with_ranks(&["--rules", "chunked.rules"], &ranks);
    let stderr = refused(dir.path(), &args, 2);
    assert_mentions(
        &stderr,
        &[
            "gpt_neox.layers.0.attention.query_key_value.weight",
            "by chunked.rules:",
            "*.query_key_value.* = 0 chunks 3, but the gpt-neox family's rule is built-in \
             gpt-neox.rules:",
        ],
    );
}

/// A tensor named on the command line is the user's: `-a 0` with every tensor it would
/// contradict named by `--axis-for` or `--keep` as the family splits them writes the
/// original.
#[test]
fn tensors_named_by_flags_are_the_users() {
    let family = family("llama");
    let (dir, ranks) = ranks_beside_config(family, 2, true);
    let flags = [
        "-a",
        "0",
        "--axis-for",
        "*.o_proj.weight=1",
        "--axis-for",
        "*.down_proj.weight=1",
        "--keep",
        "*norm.weight",
    ];
    succeeds(dir.path(), &with_ranks(&flags, &ranks));
    let written = fs::read(dir.path().join("model.safetensors")).unwrap();
    assert!(written == fs::read(family.expected()).unwrap());
}

/// Flags that agree with the family but leave a refusal of another kind (a fused tensor's
/// layout left to `-a`): when the family's built-in rules alone merge the ranks, a last
/// hint says that no flags are needed (tried before it is printed, issue 41, item 10), and
/// following it gives the original; without config.json, where they would not, it is not
/// said.
#[test]
fn a_refusal_under_flags_says_no_flags_are_needed_when_that_was_tried() {
    for with_config in [true, false] {
        let family = family("megatron-gpt");
        let (dir, ranks) = ranks_beside_config(family, 2, with_config);
        let text = fs::read_to_string(format!("{ROOT}/rules/megatron-gpt.rules")).unwrap();
        let text: Vec<&str> = text.lines().filter(|l| !l.contains("linear_qkv")).collect();
        fs::write(dir.path().join("fused.rules"), text.join("\n")).unwrap();
        let args = with_ranks(&["-a", "0", "--rules", "fused.rules"], &ranks);
        let stderr = refused(dir.path(), &args, 2);
        assert_mentions(&stderr, &["hint: say how each rank holds its piece"]);
        let said = "hint: no flags needed: the tensor names are a megatron-gpt model's";
        assert_eq!(stderr.contains(said), with_config, "{stderr}");
        if with_config {
            succeeds(dir.path(), &args[4..]);
            let written = fs::read(dir.path().join("model.safetensors")).unwrap();
            assert!(written == fs::read(family.expected()).unwrap());
        }
    }
}
