//! The inputs' order when their names number them: tensor-parallel ranks (`tp3`, `rank_03`,
//! `mp_rank_01/model_optim_rng.pt`) and checkpoint shards (`model-00002-of-00004`). A shell
//! sorts `tp*.safetensors` as text (`tp10` before `tp2`), and a merge of ranks in the wrong
//! order has every shape right: only the names can tell.
//!
//! The rule. Each input's path, as given, is read as text and digit runs. The inputs are
//! *numbered* when
//! - there are at least two, and every path has the same text between the same count of
//!   digit runs, and
//! - the digit runs differ in exactly one place, and
//! - that place is a rank or shard number: right after `tp`, `rank` (so also `mp_rank`,
//!   `tp_rank`), with one `_` or `-` between or none, the word itself not preceded by a
//!   letter (`tp3`, `model_tp_3`, `rank_03`, `mp_rank_01/`, but not `http3` or `step3`); or
//!   right before `-of-` and a number (`model-00002-of-00004`).
//!
//! Numbered inputs must be given with their numbers strictly increasing by one (no number
//! twice, none skipped); with `-of-N` there must be N of them, numbered 1 to N. Anything else
//! is refused before any input is read, with the numeric order as the hint. `--any-order`
//! turns the check off for names whose numbers mean something else.
//!
//! Separately, a whole-file join (a checkpoint merge) refuses the same file given twice,
//! unless `--join-identical` says identical pieces are meant; and the sizes of a merged
//! tensor's pieces along its join axis must be those of a split ([`split_kind`]).

use std::path::{Path, PathBuf};

use crate::error::{Error, Refusal, Result, capped};
use crate::messages;

/// How many inputs a refusal lists before "... and N more".
const SHOWN: usize = 12;

/// One input path split into its text and digit runs: `tp10.npy` is `["tp", ".npy"]` and
/// `["10"]` (text before each run, then the text after the last).
#[derive(Debug, PartialEq, Eq)]
struct Split<'p> {
    texts: Vec<&'p str>,
    numbers: Vec<&'p str>,
}

fn split(path: &str) -> Split<'_> {
    let mut texts = Vec::new();
    let mut numbers = Vec::new();
    let mut start = 0;
    let bytes = path.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at].is_ascii_digit() {
            let end = (at..bytes.len())
                .find(|&i| !bytes[i].is_ascii_digit())
                .unwrap_or(bytes.len());
            texts.push(&path[start..at]);
            numbers.push(&path[at..end]);
            start = end;
            at = end;
        } else {
            at += 1;
        }
    }
    texts.push(&path[start..]);
    Split { texts, numbers }
}

/// What kind of number the one that differs is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A rank: after `tp` or `rank`.
    Rank,
    /// A shard of a set of `total`: before `-of-TOTAL`.
    Shard { total: u64 },
}

/// Whether the text `before` a number ends with a rank word (`tp`, `rank`, then at most one
/// `_` or `-`), the word not preceded by a letter.
fn rank_word_before(before: &str) -> bool {
    let lower = before.to_ascii_lowercase();
    let trimmed = lower
        .strip_suffix('_')
        .or_else(|| lower.strip_suffix('-'))
        .unwrap_or(&lower);
    ["tp", "rank"].iter().any(|word| {
        trimmed.strip_suffix(word).is_some_and(|rest| {
            !rest
                .chars()
                .next_back()
                .is_some_and(|c| c.is_ascii_alphabetic())
        })
    })
}

/// The numbered inputs' numbers, their kind and the position of the number in the paths, or
/// `None` when the inputs are not numbered (see the module's rule).
fn numbered<'p>(splits: &[Split<'p>]) -> Option<(Kind, usize)> {
    let first = splits.first()?;
    if splits.len() < 2
        || splits
            .iter()
            .any(|s| s.texts != first.texts || s.numbers.len() != first.numbers.len())
    {
        return None;
    }
    let differing: Vec<usize> = (0..first.numbers.len())
        .filter(|&at| splits.iter().any(|s| s.numbers[at] != first.numbers[at]))
        .collect();
    let &[at] = differing.as_slice() else {
        // The same path every time is a repeated input (refused by name in a merge), not an
        // order.
        return None;
    };
    if rank_word_before(first.texts[at]) {
        return Some((Kind::Rank, at));
    }
    let after = first.texts[at + 1];
    if after.eq_ignore_ascii_case("-of-")
        && let Some(total) = first.numbers.get(at + 1)
        && let Ok(total) = total.parse()
    {
        return Some((Kind::Shard { total }, at));
    }
    None
}

/// The N of inputs whose names number them `1-of-N` to `N-of-N`, all N of them in order
/// (`model-00001-of-00004`): names that prove a set complete. `None` otherwise.
pub fn complete_by_names(paths: &[impl AsRef<Path>]) -> Option<u64> {
    let texts: Vec<String> = paths
        .iter()
        .map(|p| p.as_ref().to_string_lossy().into_owned())
        .collect();
    let splits: Vec<Split> = texts.iter().map(|t| split(t)).collect();
    let (Kind::Shard { total }, at) = numbered(&splits)? else {
        return None;
    };
    let numbers: Option<Vec<u64>> = splits.iter().map(|s| s.numbers[at].parse().ok()).collect();
    let in_order = numbers?.iter().zip(1..).all(|(&n, want)| n == want);
    (in_order && total == splits.len() as u64).then_some(total)
}

/// Refuses numbered inputs given out of their numbers' order, with a number twice or one
/// missing, or, for `-of-N` shards, not N of them (see the module's rule). Reads no file.
/// The tests' form of [`order_refusal`].
#[cfg(test)]
pub fn check_order(paths: &[impl AsRef<Path>]) -> Result<()> {
    match order_refusal(paths) {
        Some(refusal) => Err(Error::Refused(vec![refusal])),
        None => Ok(()),
    }
}

/// The refusal of numbered inputs given out of their numbers' order, with a number twice or one
/// missing, or, for `-of-N` shards, not N of them (see the module's rule). Reads no file.
pub fn order_refusal(paths: &[impl AsRef<Path>]) -> Option<Refusal> {
    let texts: Option<Vec<&str>> = paths.iter().map(|p| p.as_ref().to_str()).collect();
    let Some(texts) = texts else {
        // A path that is not UTF-8: its numbers cannot be read reliably.
        return None;
    };
    let splits: Vec<Split> = texts.iter().map(|t| split(t)).collect();
    let (kind, at) = numbered(&splits)?;
    let numbers: Option<Vec<u64>> = splits.iter().map(|s| s.numbers[at].parse().ok()).collect();
    let numbers = numbers?;
    let word = match kind {
        Kind::Rank => "rank",
        Kind::Shard { .. } => "shard",
    };
    let given: Vec<usize> = (0..numbers.len()).collect();
    let mut sorted = given.clone();
    sorted.sort_by_key(|&i| numbers[i]);
    let in_order = numbers.windows(2).all(|w| w[0] < w[1]);
    let repeated = sorted
        .windows(2)
        .find(|w| numbers[w[0]] == numbers[w[1]])
        .map(|w| (w[0], w[1]));
    let missing: Vec<u64> = sorted
        .windows(2)
        .flat_map(|w| numbers[w[0]].saturating_add(1)..numbers[w[1]])
        .take(SHOWN + 1)
        .collect();
    let off = "if the numbers in these names are not ranks or shards, add --any-order";
    let sort_hint = sort_form(&splits[0], at);
    let inputs = Numbered {
        texts: &texts,
        numbers: &numbers,
        word,
    };
    if let Some((a, b)) = repeated {
        return Some(inputs.twice(a, b, off));
    }
    if !in_order {
        return Some(inputs.out_of_order(&sorted, &sort_hint, off));
    }
    if !missing.is_empty() {
        let shown: Vec<String> = missing.iter().take(SHOWN).map(u64::to_string).collect();
        return Some(Refusal {
            headline: format!(
                "the inputs' names number them as {word}s {} to {}, but {word}{} {}{} {} not \
                 among them",
                numbers[sorted[0]],
                numbers[sorted[sorted.len() - 1]],
                if missing.len() == 1 { "" } else { "s" },
                shown.join(", "),
                if missing.len() > SHOWN { ", ..." } else { "" },
                if missing.len() == 1 { "is" } else { "are" },
            ),
            details: inputs.listed(),
            hint: Some(format!(
                "give every {word}'s file, in the numbers' order; {off}"
            )),
        });
    }
    if let Kind::Shard { total } = kind {
        let low = numbers[sorted[0]];
        if numbers.len() as u64 != total || low != 1 {
            return Some(Refusal {
                headline: format!(
                    "the inputs' names say there are {total} shards (-of-{}), but {} {} given, \
                     numbered {low} to {}",
                    splits[0].numbers[at + 1],
                    numbers.len(),
                    if numbers.len() == 1 { "is" } else { "are" },
                    numbers[sorted[sorted.len() - 1]],
                ),
                details: inputs.listed(),
                hint: Some(format!(
                    "give all {total} shards, numbered 1 to {total}, in order{sort_hint}; {off}"
                )),
            });
        }
    }
    None
}

/// Inputs numbered by their names: each one's path and number, and what the numbers count
/// (`rank`, `shard`).
struct Numbered<'n> {
    texts: &'n [&'n str],
    numbers: &'n [u64],
    word: &'static str,
}

impl Numbered<'_> {
    /// Every input, its path and number, in the order given; the list is bounded.
    fn listed(&self) -> Vec<String> {
        let word = self.word;
        let lines = (0..self.numbers.len())
            .map(|i| {
                format!(
                    "input {} ({})  {word} {}",
                    i + 1,
                    messages::path(Path::new(self.texts[i])),
                    self.numbers[i]
                )
            })
            .collect();
        capped(lines, SHOWN)
    }

    /// The refusal of the inputs `a` and `b`, which have one number. `off` is the hint's end.
    fn twice(&self, a: usize, b: usize, off: &str) -> Refusal {
        let (texts, numbers, word) = (self.texts, self.numbers, self.word);
        Refusal {
            headline: format!(
                "{word} {} is given twice: input {} ({}) and input {} ({})",
                numbers[a],
                a + 1,
                messages::path(Path::new(texts[a])),
                b + 1,
                messages::path(Path::new(texts[b])),
            ),
            details: Vec::new(),
            hint: Some(format!(
                "give each {word}'s file once; {off}{}",
                if a == b || texts[a] == texts[b] {
                    ""
                } else {
                    " (and check that the two files are different ranks)"
                }
            )),
        }
    }

    /// The refusal of inputs not given in their numbers' order (`sorted`, by number), with the
    /// shell's sorted form (`sort_hint`). `off` is the hint's end.
    fn out_of_order(&self, sorted: &[usize], sort_hint: &str, off: &str) -> Refusal {
        let (texts, numbers, word) = (self.texts, self.numbers, self.word);
        let first_wrong = numbers.windows(2).position(|w| w[0] > w[1]).unwrap_or(0);
        let (a, b) = (first_wrong, first_wrong + 1);
        let ordered: Vec<String> = sorted
            .iter()
            .map(|&i| messages::path(Path::new(texts[i])))
            .collect();
        let ordered = capped(ordered, SHOWN).join(" ");
        Refusal {
            headline: format!(
                "the inputs' names number them as {word}s, but they are not given in the \
                 numbers' order: input {} ({}) is {word} {} and input {} ({}) is {word} {}",
                a + 1,
                messages::path(Path::new(texts[a])),
                numbers[a],
                b + 1,
                messages::path(Path::new(texts[b])),
                numbers[b],
            ),
            details: self.listed(),
            hint: Some(format!(
                "give them in the numbers' order: {ordered}{sort_hint}; {off}"
            )),
        }
    }
}

/// `` (in a shell: `$(ls -v tp*.safetensors)`, or `sort -V`) `` for the inputs' pattern: the
/// path with its number replaced by `*`, when the path is plain enough to be written unquoted.
fn sort_form(split: &Split, at: usize) -> String {
    let mut glob = String::new();
    for (i, text) in split.texts.iter().enumerate() {
        glob.push_str(text);
        if let Some(number) = split.numbers.get(i) {
            glob.push_str(if i == at { "*" } else { number });
        }
    }
    let plain = glob
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "._-/*".contains(c));
    if !plain {
        return String::new();
    }
    format!(
        " (in a shell, $(ls -v {glob}) or $(printf '%s\\n' {glob} | sort -V) lists them so; \
         {glob} alone sorts them as text)"
    )
}

/// What tells one file from another: its device and inode where there are such (two names of
/// one file, hard links included, are one), else its canonical path (the path as given when
/// there is none, as for standard input).
#[derive(Debug, PartialEq, Eq)]
enum FileKey {
    #[cfg(unix)]
    Inode(u64, u64),
    Path(PathBuf),
}

fn file_key(path: &Path) -> FileKey {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let Ok(meta) = std::fs::metadata(path) {
            return FileKey::Inode(meta.dev(), meta.ino());
        }
    }
    FileKey::Path(std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()))
}

/// The advice to add `--join-identical`, after a refusal's hint, in a join of data
/// (`merge` false); nothing in a model's merge (`merge`: files of several tensors with rules
/// or `--like`), where identical pieces are a rank given twice or a replicated tensor, never
/// a split, and no check can tell the wrong model it gives (issue 41, item 10: a hint's
/// flags must give a plan that passes every check, and this one passes them all wrongly).
pub fn join_identical_advice(merge: bool, what: &str) -> String {
    if merge {
        String::new()
    } else {
        format!("; if {what} meant to be joined, add --join-identical")
    }
}

/// Refuses a whole-file join given the same file twice (the same path, or two paths of one
/// file): each of a merge's inputs is a different rank's piece. In a model's merge
/// (`merge`), the hint does not offer `--join-identical` ([`join_identical_advice`]).
pub fn check_repeated(paths: &[impl AsRef<Path>], merge: bool) -> Result<()> {
    let resolved: Vec<FileKey> = paths.iter().map(|p| file_key(p.as_ref())).collect();
    for (b, path) in resolved.iter().enumerate() {
        let Some(a) = resolved[..b].iter().position(|earlier| earlier == path) else {
            continue;
        };
        let (first, second) = (paths[a].as_ref(), paths[b].as_ref());
        let same = if first == second {
            "the same path".to_string()
        } else {
            format!("the same file as {}", messages::path(first))
        };
        return Err(Error::Refused(vec![Refusal {
            headline: format!(
                "input {} ({}) and input {} ({}) are {same}: a merge joins each tensor \
                 with its namesakes, and a file given twice puts its piece in twice",
                a + 1,
                messages::path(first),
                b + 1,
                messages::path(second),
            ),
            details: Vec::new(),
            hint: Some(format!(
                "give each rank's file once{}",
                join_identical_advice(merge, "a file's pieces are")
            )),
        }]));
    }
    Ok(())
}

/// How `sizes` (the pieces' sizes along the join axis, in input order) were split, when a
/// split gives them: all equal (`"an even split"`), the first ones one larger than the rest
/// (`"numpy's array_split"`, also `torch.tensor_split`), or pieces of `ceil(total / n)` but a
/// smaller, non-empty last one (`"torch.chunk"`). `None` for any other pattern: ranks of two
/// tensor-parallel degrees mixed, a missing rank's worth, `[128]` + `[64]`.
pub fn split_kind(sizes: &[u64]) -> Option<&'static str> {
    let (&first, rest) = sizes.split_first()?;
    if rest.iter().all(|&s| s == first) {
        return Some("an even split");
    }
    // The first ones one larger, the rest all equal: exactly one step down, of one.
    let larger = sizes.iter().take_while(|&&s| s == first).count();
    if sizes[larger..].iter().all(|&s| s + 1 == first) {
        return Some("numpy's array_split");
    }
    // torch.chunk(t, n) makes pieces of ceil(T / n), the last one what remains.
    let total = sizes.iter().try_fold(0u64, |sum, &s| sum.checked_add(s))?;
    let chunk = total.div_ceil(sizes.len() as u64);
    let (&last, init) = sizes.split_last()?;
    if init.iter().all(|&s| s == chunk) && last > 0 {
        return Some("torch.chunk");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(paths: &[&str]) -> String {
        match check_order(paths) {
            Err(Error::Refused(r)) => r[0].to_string(),
            Err(other) => panic!("{other}"),
            Ok(()) => String::new(),
        }
    }

    #[test]
    fn rank_words_are_told_from_other_words() {
        for before in [
            "tp",
            "TP",
            "tp_",
            "model-tp-",
            "rank",
            "rank_",
            "mp_rank_",
            "x/tp_rank",
        ] {
            assert!(rank_word_before(before), "{before}");
        }
        for before in ["http", "step", "", "shard_", "tp__", "crank", "tpx"] {
            assert!(!rank_word_before(before), "{before}");
        }
    }

    #[test]
    fn numbered_inputs_in_order_pass() {
        for paths in [
            &["tp0.safetensors", "tp1.safetensors", "tp2.safetensors"][..],
            &[
                "mp_rank_00/model_optim_rng.pt",
                "mp_rank_01/model_optim_rng.pt",
            ],
            &[
                "model-00001-of-00002.safetensors",
                "model-00002-of-00002.safetensors",
            ],
            // Ranks 2 and 3 of four: a merge to a smaller degree.
            &["tp2.npy", "tp3.npy"],
            // Two numbers differ: not one rank number.
            &["mp_rank_01_000.pt", "mp_rank_00_001.pt"],
            // Not rank words: data shards, steps.
            &["data_10.npy", "data_2.npy"],
            &["step3.npy", "step1.npy"],
            &["a.npy", "b.npy"],
        ] {
            assert_eq!(refusal(paths), "", "{paths:?}");
        }
    }

    #[test]
    fn ranks_out_of_order_are_refused_with_the_numeric_order() {
        let paths = [
            "tp0.safetensors",
            "tp1.safetensors",
            "tp10.safetensors",
            "tp2.safetensors",
        ];
        let text = refusal(&paths);
        assert!(
            text.contains(
                "input 3 (tp10.safetensors) is rank 10 and input 4 (tp2.safetensors) is rank 2"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "give them in the numbers' order: tp0.safetensors tp1.safetensors \
                 tp2.safetensors tp10.safetensors (in a shell, $(ls -v tp*.safetensors)"
            ),
            "{text}"
        );
        assert!(text.contains("--any-order"), "{text}");
        assert!(refusal(&["rank_1.npz", "rank_0.npz"]).contains("not given in the numbers' order"));
    }

    #[test]
    fn gaps_repeats_and_wrong_counts_are_refused() {
        let gap = refusal(&["tp0.npy", "tp1.npy", "tp3.npy"]);
        assert!(
            gap.contains("ranks 0 to 3, but rank 2 is not among them"),
            "{gap}"
        );
        let twice = refusal(&["tp0.npy", "tp0.npy"]);
        assert_eq!(twice, "", "the same path twice is check_repeated's");
        let twice = refusal(&["tp1.npy", "tp01.npy"]);
        assert!(twice.contains("rank 1 is given twice"), "{twice}");
        let count = refusal(&["m-00001-of-00004.st", "m-00002-of-00004.st"]);
        assert!(
            count.contains("there are 4 shards (-of-00004), but 2 are given"),
            "{count}"
        );
    }

    #[test]
    fn splits_are_told_from_other_sizes() {
        assert_eq!(split_kind(&[4, 4, 4]), Some("an even split"));
        assert_eq!(split_kind(&[4]), Some("an even split"));
        // numpy.array_split(np.arange(10), 3): 4, 3, 3; of 3 in 4: 1, 1, 1, 0.
        assert_eq!(split_kind(&[4, 3, 3]), Some("numpy's array_split"));
        assert_eq!(split_kind(&[1, 1, 1, 0]), Some("numpy's array_split"));
        // torch.chunk(torch.arange(10), 3): 4, 4, 2.
        assert_eq!(split_kind(&[4, 4, 2]), Some("torch.chunk"));
        for odd in [
            &[128, 64][..],
            &[64, 128],
            &[192, 128, 128],
            &[3, 4],
            &[4, 2, 4],
            &[4, 0],
            &[4, 4, 1],
        ] {
            assert_eq!(split_kind(odd), None, "{odd:?}");
        }
    }

    #[test]
    fn the_same_file_twice_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.safetensors");
        std::fs::write(&a, b"x").unwrap();
        let text = match check_repeated(&[a.clone(), a.clone()], false) {
            Err(Error::Refused(r)) => r[0].to_string(),
            _ => panic!("not refused"),
        };
        assert!(text.contains("are the same path"), "{text}");
        assert!(text.contains("add --join-identical"), "{text}");
        // A model's merge: no check could tell a rank given twice, and no hint offers it.
        let merge = match check_repeated(&[a.clone(), a.clone()], true) {
            Err(Error::Refused(r)) => r[0].to_string(),
            _ => panic!("not refused"),
        };
        assert!(!merge.contains("--join-identical"), "{merge}");
        let b = dir.path().join("b.safetensors");
        std::fs::write(&b, b"x").unwrap();
        assert!(check_repeated(&[a, b], false).is_ok());
    }
}
