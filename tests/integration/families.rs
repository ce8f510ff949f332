//! The shipped rules files on real families (issue 29, item 12): tiny models with each
//! architecture's tensor names and shapes (`fixtures/families/`, written by
//! `fixtures/make_family_fixtures.py` with transformers), split into 2 and 4 tensor-parallel
//! ranks the way each family's framework splits them. Every merge with the family's rules file
//! and `--like` rebuilds the original byte for byte; every wrong command (ranks reordered, a
//! rank twice, two degrees mixed, a rule removed) is refused and writes nothing.

use std::fs;
use std::path::{Path, PathBuf};

use crate::util::{assert_rank_file, dir_entries, refused, succeeds};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A family of fixtures/families/: its folder, rules file, and the flags its rules file's
/// header says to add (at 2 ranks; at 4).
pub(crate) struct Family {
    pub(crate) name: &'static str,
    rules: &'static str,
    flags: &'static [&'static str],
    flags_at_4: &'static [&'static str],
}

/// With 4 ranks and 2 key-value heads, vLLM gives each head to 2 consecutive ranks.
const KV_REPLICAS: &[&str] = &[
    "--axis-for",
    "*.k_proj.weight=0 replicas 2",
    "--axis-for",
    "*.v_proj.weight=0 replicas 2",
];

pub(crate) const FAMILIES: &[Family] = &[
    Family {
        name: "llama",
        rules: "llama.rules",
        flags: &[],
        flags_at_4: KV_REPLICAS,
    },
    Family {
        name: "mistral",
        rules: "llama.rules",
        flags: &[],
        flags_at_4: KV_REPLICAS,
    },
    Family {
        name: "qwen2",
        rules: "qwen2.rules",
        flags: &[],
        // The biases too.
        flags_at_4: &[
            "--axis-for",
            "*.k_proj.*=0 replicas 2",
            "--axis-for",
            "*.v_proj.*=0 replicas 2",
        ],
    },
    Family {
        name: "mixtral",
        rules: "mixtral.rules",
        flags: &[],
        flags_at_4: KV_REPLICAS,
    },
    Family {
        name: "gpt2",
        rules: "gpt2.rules",
        flags: &[],
        flags_at_4: &[],
    },
    Family {
        name: "gpt-neox",
        rules: "gpt-neox.rules",
        flags: &[],
        flags_at_4: &[],
    },
    Family {
        name: "bert",
        rules: "bert.rules",
        flags: &[],
        flags_at_4: &[],
    },
    Family {
        name: "bert-mlm",
        rules: "bert-mlm.rules",
        flags: &[],
        flags_at_4: &[],
    },
    Family {
        name: "megatron-gpt",
        rules: "megatron-gpt.rules",
        flags: &[],
        flags_at_4: &[],
    },
    Family {
        name: "phi3",
        rules: "phi3.rules",
        // 8 query and 4 key-value heads: the header's Q:K:K.
        flags: &["--axis-for", "*.qkv_proj.weight=0 chunks 8:4:4"],
        flags_at_4: &["--axis-for", "*.qkv_proj.weight=0 chunks 8:4:4"],
    },
    Family {
        name: "gemma",
        rules: "gemma.rules",
        flags: &[],
        flags_at_4: KV_REPLICAS,
    },
    Family {
        name: "gemma2",
        rules: "gemma.rules",
        flags: &[],
        flags_at_4: KV_REPLICAS,
    },
    Family {
        name: "deepseek-v2",
        rules: "deepseek.rules",
        flags: &[],
        flags_at_4: &[],
    },
    Family {
        name: "deepseek-v3",
        rules: "deepseek.rules",
        flags: &[],
        flags_at_4: &[],
    },
    Family {
        name: "vllm",
        rules: "vllm.rules",
        // 4 query and 2 key-value heads.
        flags: &["--axis-for", "*.qkv_proj.*=0 chunks 4:2:2"],
        // More ranks than key-value heads: each rank holds [q_r; k_(r/2); v_(r/2)].
        flags_at_4: &["--axis-for", "*.qkv_proj.*=0 chunks 4:2:2 replicas 1:2:2"],
    },
];

impl Family {
    fn folder(&self) -> PathBuf {
        Path::new(ROOT).join("fixtures/families").join(self.name)
    }

    pub(crate) fn expected(&self) -> String {
        path(&self.folder().join("expected.safetensors"))
    }

    /// Rank `r`'s file of the split into `ranks`.
    pub(crate) fn rank(&self, ranks: usize, r: usize) -> String {
        let file = match self.name {
            "vllm" => format!("model-rank-{r}-part-0.safetensors"),
            _ => format!("tp{r}.safetensors"),
        };
        path(&self.folder().join(format!("tp{ranks}")).join(file))
    }

    /// The attention heads of its tiny model (`make_family_fixtures.py`), query:key-value, as
    /// `tjoin split --heads` takes them.
    fn heads(&self) -> &'static str {
        match self.name {
            "megatron-gpt" | "phi3" => "8:4",
            "gpt2" | "gpt-neox" | "bert" | "bert-mlm" | "deepseek-v2" | "deepseek-v3" => "4",
            _ => "4:2",
        }
    }

    /// The right command's arguments before the ranks: the rules file, its flags, `--like`.
    pub(crate) fn args(&self, ranks: usize) -> Vec<String> {
        let rules = path(&Path::new(ROOT).join("rules").join(self.rules));
        let flags = if ranks == 4 {
            self.flags_at_4
        } else {
            self.flags
        };
        let mut args = vec!["--rules".to_string(), rules];
        args.extend(flags.iter().map(|f| f.to_string()));
        args.extend(["--like".to_string(), self.expected()]);
        args
    }
}

fn path(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

/// Runs tjoin with `args` then `-o OUT` in a fresh folder; returns the folder and OUT's path.
fn merged(args: &[String]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("model.safetensors");
    let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
    all.extend(["-o", out.to_str().unwrap()]);
    succeeds(dir.path(), &all);
    (dir, out)
}

/// Runs tjoin with `args` then `-o model.safetensors` in a fresh folder, which must refuse
/// with exit 2 and leave the folder empty: no output, no temporary file. Returns stderr.
#[track_caller]
pub(crate) fn refuses(args: &[String]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
    all.extend(["-o", "model.safetensors"]);
    let stderr = refused(dir.path(), &all, 2);
    assert!(dir_entries(dir.path()).is_empty());
    stderr
}

/// Fails unless `out` is `family`'s original byte for byte.
#[track_caller]
fn is_original(family: &Family, out: &Path, what: &str) {
    let written = fs::read(out).unwrap();
    let expected = fs::read(family.expected()).unwrap();
    assert!(
        written == expected,
        "{} {what}: not the original model, byte for byte",
        family.name
    );
}

/// The ranks of the split into `ranks`, in rank order.
fn ranks(family: &Family, ranks: usize) -> Vec<String> {
    (0..ranks).map(|r| family.rank(ranks, r)).collect()
}

#[test]
fn every_family_and_split_merges_back_to_the_original_byte_for_byte() {
    let mut merges = 0;
    for family in FAMILIES {
        for n in [2, 4] {
            let mut args = family.args(n);
            args.extend(ranks(family, n));
            let (_dir, out) = merged(&args);
            is_original(family, &out, &format!("at {n} ranks"));
            merges += 1;
        }
    }
    assert_eq!(merges, 30);
}

/// The split is the join run backwards: the same rules file and flags cut each family's model
/// into the very rank files its framework writes (which the test above merges back).
#[test]
fn every_family_splits_into_the_rank_files_its_framework_writes() {
    let mut splits = 0;
    for family in FAMILIES {
        for n in [2, 4] {
            let dir = tempfile::tempdir().unwrap();
            let template = Path::new(&family.rank(n, 0))
                .file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .replacen('0', "{rank}", 1);
            let mut args = vec!["split".to_string(), "--ranks".to_string(), n.to_string()];
            args.extend(["--heads".to_string(), family.heads().to_string()]);
            // The join's arguments but `--like` and the reference after it.
            let join = family.args(n);
            args.extend(join[..join.len() - 2].iter().cloned());
            args.extend([family.expected(), "-o".to_string(), template]);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            succeeds(dir.path(), &args);
            for r in 0..n {
                let written = dir
                    .path()
                    .join(Path::new(&family.rank(n, r)).file_name().unwrap());
                // The framework's rank, byte for byte in its tensors, plus the record of
                // the rank and the count.
                assert_rank_file(&written, Path::new(&family.rank(n, r)), r, n);
                assert!(
                    fs::read(&written).unwrap() != fs::read(family.rank(n, r)).unwrap(),
                    "{} split into {n}: rank {r} records no rank",
                    family.name
                );
            }
            splits += 1;
        }
    }
    assert_eq!(splits, 30);
}

#[test]
fn a_fused_qkv_holding_replicated_key_value_heads_needs_its_replicas_and_checks_them() {
    // 4 ranks, 2 key-value heads: rank r holds [q_r; k_(r/2); v_(r/2)].
    let family = FAMILIES.iter().find(|f| f.name == "vllm").unwrap();
    // Without `replicas 1:2:2`, k and v would come out twice their size: o_proj's input tells
    // that each rank's q is a third of its piece, not the half `chunks 4:2:2` cuts.
    let mut args = family.args(2);
    args.extend(ranks(family, 4));
    let stderr = refuses(&args);
    assert!(
        stderr.contains("`chunks 4:2:2`, but its output projection's input says q holds 1 of"),
        "{stderr}"
    );
    // Ranks 1 and 2 swapped (--any-order lets the names pass): the groups' k and v differ.
    let mut args = family.args(4);
    let mut swapped = ranks(family, 4);
    swapped.swap(1, 2);
    args.push("--any-order".to_string());
    args.extend(swapped);
    let stderr = refuses(&args);
    assert!(
        stderr.contains(
            "its rule says `chunks 4:2:2 replicas 1:2:2`, but the inputs of a group do not hold \
             the same part"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("its part 8..16 along axis 0 differs"),
        "{stderr}"
    );
    // A count of inputs that a group does not divide.
    let mut args = family.args(4);
    args.extend(ranks(family, 4).into_iter().take(3));
    args.push("--uneven".to_string());
    let stderr = refuses(&args);
    assert!(
        stderr.contains("there are 3 inputs, not a multiple of 2"),
        "{stderr}"
    );
}

/// The order a rank-order refusal's hint gives: the words after "give them in the numbers'
/// order: " up to " (in a shell".
fn order_in_hint(stderr: &str) -> Vec<String> {
    let hint = stderr.lines().find(|l| l.starts_with("hint: ")).unwrap();
    let (_, rest) = hint.split_once("numbers' order: ").expect(hint);
    let (order, _) = rest.split_once(" (in a shell").unwrap();
    order.split(' ').map(str::to_string).collect()
}

#[test]
fn ranks_given_out_of_order_are_refused_and_the_hint_gives_the_order_that_merges() {
    for family in FAMILIES {
        for n in [2, 4] {
            let mut given = ranks(family, n);
            given.swap(0, 1);
            let mut args = family.args(n);
            args.extend(given);
            let stderr = refuses(&args);
            // Following the hint merges the original.
            let mut args = family.args(n);
            args.extend(order_in_hint(&stderr));
            let (_dir, out) = merged(&args);
            is_original(family, &out, "in the hint's order");
        }
    }
}

#[test]
fn a_rank_given_twice_is_refused() {
    for family in FAMILIES {
        let mut args = family.args(2);
        args.extend([family.rank(2, 0), family.rank(2, 0)]);
        refuses(&args);
    }
}

#[test]
fn ranks_of_two_tensor_parallel_degrees_mixed_are_refused() {
    for family in FAMILIES {
        // Rank 0 of 2 with rank 1 of 4; and the other way round.
        for (first, second) in [((2, 0), (4, 1)), ((4, 0), (2, 1))] {
            let mut args = family.args(2);
            args.extend([
                family.rank(first.0, first.1),
                family.rank(second.0, second.1),
            ]);
            refuses(&args);
        }
        // All 4 ranks of 4 merged with the flags for 2, and 2 ranks with the flags for 4.
        for (flags_of, n) in [(2, 4), (4, 2)] {
            if family.flags == family.flags_at_4 {
                continue;
            }
            let mut args = family.args(flags_of);
            args.extend(ranks(family, n));
            refuses(&args);
        }
    }
}

#[test]
fn a_rule_removed_from_a_family_file_never_writes_a_wrong_model() {
    // Each line of each file taken out in turn; alone, or with -a 0 or -a 1 standing in for it
    // (what "no axis given: name one with -a" invites): refused, or the original.
    let mut refusals = 0;
    for family in FAMILIES {
        let rules = fs::read_to_string(Path::new(ROOT).join("rules").join(family.rules)).unwrap();
        let lines: Vec<&str> = rules.lines().collect();
        for (at, line) in lines.iter().enumerate() {
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let dir = tempfile::tempdir().unwrap();
            let file = dir.path().join("fewer.rules");
            let fewer: Vec<&str> = [&lines[..at], &lines[at + 1..]].concat();
            fs::write(&file, fewer.join("\n")).unwrap();
            for axis in [None, Some("0"), Some("1")] {
                let mut args = family.args(2);
                args[1] = path(&file);
                if let Some(axis) = axis {
                    args.extend(["-a".to_string(), axis.to_string()]);
                }
                args.extend(ranks(family, 2));
                let out = dir.path().join("model.safetensors");
                let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
                all.extend(["-o", out.to_str().unwrap()]);
                let status = crate::util::tjoin()
                    .current_dir(dir.path())
                    .args(&all)
                    .output()
                    .unwrap();
                let what = format!("without `{line}`, -a {axis:?}");
                if status.status.success() {
                    is_original(family, &out, &what);
                    fs::remove_file(&out).unwrap();
                } else {
                    assert_eq!(status.status.code(), Some(2), "{} {what}", family.name);
                    assert!(!out.exists(), "{} {what}: an output was left", family.name);
                    refusals += 1;
                }
            }
        }
    }
    assert!(refusals > 200, "only {refusals} refusals");
}

/// The `--axis-for` flags a refusal's hint suggests, as arguments.
fn axis_flags_in_hint(stderr: &str) -> Vec<String> {
    let hint = stderr.lines().find(|l| l.starts_with("hint: ")).unwrap();
    let mut flags = Vec::new();
    for rest in hint.split("--axis-for '").skip(1) {
        let rule = rest.split('\'').next().unwrap();
        flags.extend(["--axis-for".to_string(), rule.to_string()]);
    }
    flags
}

#[test]
fn more_ranks_than_key_value_heads_without_replicas_is_refused_and_the_hint_merges() {
    // 4 ranks, 2 key-value heads: ranks 0-1 hold head 0, ranks 2-3 head 1. Without
    // `replicas 2` each head would come out twice; the bytes show it, with or without --like.
    let kv_replicated = ["llama", "mistral", "qwen2", "mixtral"];
    for family in FAMILIES.iter().filter(|f| kv_replicated.contains(&f.name)) {
        let rules = path(&Path::new(ROOT).join("rules").join(family.rules));
        for like in [false, true] {
            let mut args = vec!["--rules".to_string(), rules.clone()];
            if like {
                args.extend(["--like".to_string(), family.expected()]);
            }
            args.extend(ranks(family, 4));
            let stderr = refuses(&args);
            assert!(
                stderr.contains("the same in each group of 2 consecutive inputs; joined by"),
                "{}: {stderr}",
                family.name
            );
            // The hint's rules merge the original.
            let mut args = family.args(2);
            args.extend(axis_flags_in_hint(&stderr));
            assert!(
                args.iter().any(|a| a.ends_with("=0 replicas 2")),
                "{stderr}"
            );
            args.extend(ranks(family, 4));
            let (_dir, out) = merged(&args);
            is_original(family, &out, "with the hint's rules");
        }
    }
}

#[test]
fn every_rules_file_is_in_the_readme_table_with_a_command_using_like() {
    let readme = fs::read_to_string(Path::new(ROOT).join("README.md")).unwrap();
    for entry in fs::read_dir(Path::new(ROOT).join("rules")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let row = format!("| `rules/{name}` |");
        assert!(readme.contains(&row), "README's table lacks {name}");
        let text = fs::read_to_string(Path::new(ROOT).join("rules").join(&name)).unwrap();
        let command = text
            .lines()
            .find(|l| l.starts_with("#   tjoin "))
            .unwrap_or_else(|| panic!("{name}: no command in the header"));
        assert!(command.contains(&format!("--rules rules/{name}")), "{name}");
        let whole: String = text.lines().take(8).collect();
        assert!(
            whole.contains(" --like "),
            "{name}: the command has no --like"
        );
    }
}

/// The words between the first pair of backquotes after `marker` in the hint of `stderr`.
fn words_in_hint(stderr: &str, marker: &str) -> String {
    let hint = stderr.lines().find(|l| l.starts_with("hint: ")).unwrap();
    let (_, rest) = hint.split_once(marker).expect(hint);
    rest.split('`').nth(1).unwrap().to_string()
}

#[test]
fn a_fused_qkv_s_proportions_are_checked_against_its_output_projection() {
    // Phi-3 with 8 query and 4 key-value heads: each rank's qkv_proj is q:k:v = 2:1:1, as
    // o_proj's input features tell. Other proportions have the right shape and a wrong model.
    let family = FAMILIES.iter().find(|f| f.name == "phi3").unwrap();
    for n in [2, 4] {
        for wrong in ["chunks 3", "chunks 4:1:1", "chunks 8:4:4 replicas 1:2:2"] {
            let mut args = family.args(n);
            args[3] = format!("*.qkv_proj.weight=0 {wrong}");
            args.extend(ranks(family, n));
            let stderr = refuses(&args);
            assert!(
                stderr.contains(
                    "2 fused q, k, v tensors would be cut into parts of other sizes than their \
                     q, k and v"
                ),
                "{wrong}: {stderr}"
            );
            assert!(
                stderr.contains("q holds 2 of every 4 rows of a rank's piece: `chunks 2:1:1`"),
                "{stderr}"
            );
        }
        // With no layout stated, the hint's chunks are the told ones, and they merge.
        let rules = path(&Path::new(ROOT).join("rules").join(family.rules));
        let mut args = vec!["--rules".to_string(), rules.clone(), "-a".to_string()];
        args.push("0".to_string());
        args.extend(ranks(family, n));
        let stderr = refuses(&args);
        let flags = axis_flags_in_hint(&stderr);
        assert_eq!(flags[1], "*.qkv_proj.weight=0 chunks 2:1:1", "{stderr}");
        let mut args = family.args(n);
        args[3] = flags[1].clone();
        args.extend(ranks(family, n));
        let (_dir, out) = merged(&args);
        is_original(family, &out, "with the hint's chunks");
    }
}

#[test]
fn following_every_hint_on_vllm_ranks_sharing_key_value_heads_ends_at_the_original() {
    let family = FAMILIES.iter().find(|f| f.name == "vllm").unwrap();
    let rules = path(&Path::new(ROOT).join("rules").join(family.rules));
    let like = ["--like".to_string(), family.expected()];
    // No layout stated: the hint tells each rank's proportions, 1:1:1 at 4 ranks.
    let mut args = vec!["--rules".to_string(), rules.clone(), "-a".to_string()];
    args.push("0".to_string());
    args.extend(ranks(family, 4));
    let stderr = refuses(&args);
    let flags = axis_flags_in_hint(&stderr);
    assert_eq!(flags[1], "*.qkv_proj.weight=0 chunks 1:1:1", "{stderr}");
    // Followed: k and v are the same in pairs of ranks, and the hint says so.
    let mut args = vec!["--rules".to_string(), rules.clone()];
    args.extend(flags[..2].iter().cloned());
    args.extend(like.iter().cloned());
    args.extend(ranks(family, 4));
    let stderr = refuses(&args);
    assert!(
        stderr.contains("(part 2 of 3 in groups of 2, part 3 of 3 in groups of 2)"),
        "{stderr}"
    );
    let words = words_in_hint(&stderr, "say so: ");
    assert_eq!(words, "chunks 2:1:1 replicas 1:2:2");
    // Followed: the original.
    let mut args = vec!["--rules".to_string(), rules, "--axis-for".to_string()];
    args.push(format!("*.qkv_proj.weight=0 {words}"));
    args.extend(like.iter().cloned());
    args.extend(ranks(family, 4));
    let (_dir, out) = merged(&args);
    is_original(family, &out, "with every hint followed");
}

/// Rewrites the safetensors file `file` in place with every `from` in its header's tensor
/// names replaced by `to`, of the same length so that no offset moves, and one that keeps the
/// names' order (`self_attn` -> `self.attn`): a model whose names no family of tjoin's table
/// has, merged by flags as a model tjoin does not know is (issue 41, item 6 refuses flags
/// that contradict a known family).
pub(crate) fn unknown_to_the_table(file: &Path, from: &str, to: &str) {
    assert_eq!(from.len(), to.len());
    let mut bytes = fs::read(file).unwrap();
    let size = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header = std::str::from_utf8(&bytes[8..8 + size]).unwrap();
    assert!(header.contains(from), "{}: no {from}", file.display());
    let renamed = header.replace(from, to);
    bytes[8..8 + size].copy_from_slice(renamed.as_bytes());
    fs::write(file, bytes).unwrap();
}
