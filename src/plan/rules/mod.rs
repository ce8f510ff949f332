//! Which tensors a whole-file join treats how: the tensor rules (`--keep GLOB`,
//! `--axis-for GLOB=AXIS` and the lines of `--rules` files), the shell-style glob matching of
//! tensor names they use, which rule decides each tensor (the first that matches), the rules
//! that match no tensor, and the globs tjoin suggests when it asks for a rule.
//!
//! A model has thousands of tensors and a rules file may have thousands of lines, so rules are
//! not tried in turn: [`Matcher`] files each under a literal piece of its glob, and a tensor
//! is matched against the few rules whose piece its name holds.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Refusal, Result, capped};
use crate::messages;
pub use crate::plan::chunks::Parts;

pub use crate::plan::globs::{glob_match, shell_quote, suggest_globs};

/// `--axis-for GLOB=AXIS`: tensors whose names match `glob` join along `axis`, their pieces
/// laid out as `parts` says (`--axis-for 'GLOB=0 chunks 2'`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AxisRule {
    /// The pattern tensor names are matched against.
    pub glob: String,
    /// The axis, possibly negative.
    pub axis: i64,
    /// What the words after the axis say about each input's piece.
    pub parts: Parts,
}

impl std::str::FromStr for AxisRule {
    type Err = String;

    /// Parses `GLOB=AXIS [WORDS]`, split at the `=`: a glob holds none (`?` matches a `=` in
    /// a name), so `GLOB==1`, a typo, is refused rather than read as a glob ending in `=`.
    fn from_str(text: &str) -> Result<AxisRule, String> {
        const EXAMPLE: &str = "expected GLOB=AXIS, e.g. '*.o_proj.weight=1' or \
                               '*.gate_up_proj.weight=0 chunks 2'";
        let (glob, value) = text.split_once('=').ok_or_else(|| EXAMPLE.to_string())?;
        check_glob(glob.trim(), text)?;
        match parse_value(glob.trim(), value)? {
            (Treatment::Axis(axis), parts) => Ok(AxisRule {
                glob: glob.trim().to_string(),
                axis,
                parts,
            }),
            (Treatment::Keep, _) => Err(format!(
                "`keep` is not an axis: keep tensors with --keep GLOB; {EXAMPLE}"
            )),
        }
    }
}

/// What a rule does with the tensors it decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Treatment {
    /// Join them along this axis (possibly negative).
    Axis(i64),
    /// Copy them once from the first input, after checking them identical in every input.
    Keep,
}

/// Where a rule was given, as messages name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A `--keep GLOB` flag.
    KeepFlag,
    /// An `--axis-for GLOB=AXIS` flag.
    AxisForFlag,
    /// A line of a `--rules` file.
    File {
        /// The file as the user named it.
        path: PathBuf,
        /// The line, counting from 1.
        line: usize,
    },
}

/// One tensor rule: the tensors whose names match `glob` are treated by `treatment`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The pattern tensor names are matched against.
    pub glob: String,
    /// What it does with them.
    pub treatment: Treatment,
    /// For an axis, what the words after it say about each input's piece.
    pub parts: Parts,
    /// Where it was given.
    pub origin: Origin,
    /// Whether matching no tensor of a whole-file join refuses the join rather than warns:
    /// a rules file's lines, unless `--allow-unmatched`; every rule under `--strict`.
    pub required: bool,
    /// A rules file's line marked `optional` (`lm_head.weight = 0 optional`): for a tensor
    /// some models of the file's family lack (tied embeddings), never required.
    pub optional: bool,
}

/// The rules files shipped in the repository's `rules/` folder, for hints (a test keeps the
/// list the folder's).
pub const SHIPPED: &[&str] = &[
    "bert-mlm.rules",
    "bert.rules",
    "deepseek.rules",
    "gemma.rules",
    "gpt-neox.rules",
    "gpt2.rules",
    "llama.rules",
    "megatron-gpt.rules",
    "mixtral.rules",
    "phi3.rules",
    "qwen2.rules",
    "vllm.rules",
];

impl Rule {
    /// Whether the rule matches the tensor `name`.
    pub fn matches(&self, name: &str) -> bool {
        glob_match(&self.glob, name)
    }
}

impl Rule {
    /// What follows the `=`: `keep`, or the axis and the words after it (`0 chunks 2`).
    fn value(&self) -> String {
        let optional = if self.optional { " optional" } else { "" };
        match self.treatment {
            Treatment::Axis(axis) => format!("{axis}{}{optional}", self.parts),
            Treatment::Keep => format!("keep{optional}"),
        }
    }

    /// The rule exactly as the user wrote it, for JSON output: `--keep '*norm*'`,
    /// `--axis-for '*.o_proj.weight=1'`, or `llama.rules:8: *.o_proj.weight = 1`.
    pub fn written(&self) -> String {
        let value = self.value();
        match &self.origin {
            Origin::KeepFlag => format!("--keep {}", shell_quote(&self.glob)),
            Origin::AxisForFlag => {
                format!(
                    "--axis-for {}",
                    shell_quote(&format!("{}={value}", self.glob))
                )
            }
            Origin::File { path, line } => {
                format!("{}:{line}: {} = {value}", path.display(), self.glob)
            }
        }
    }
}

impl fmt::Display for Rule {
    /// As a message shows it: as written ([`Rule::written`]), with the glob and the file name
    /// quoted (control characters escaped) and a long glob cut to an excerpt.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let value = self.value();
        let glob = messages::name(&self.glob);
        match &self.origin {
            Origin::KeepFlag => write!(f, "--keep {}", shell_quote(&glob)),
            Origin::AxisForFlag => {
                write!(f, "--axis-for {}", shell_quote(&format!("{glob}={value}")))
            }
            Origin::File { path, line } => {
                write!(f, "{}:{line}: {glob} = {value}", messages::path(path))
            }
        }
    }
}

/// The rules in the order they apply, the first match winning: the `--keep` flags, then the
/// `--axis-for` flags (so a `--keep` wins over an `--axis-for`, whatever their order on the
/// command line), then the lines of the rules files, in order.
pub fn ordered(keep: &[String], axis_for: &[AxisRule], files: Vec<Rule>) -> Vec<Rule> {
    let keep = keep.iter().map(|glob| Rule {
        glob: glob.clone(),
        treatment: Treatment::Keep,
        parts: Parts::default(),
        origin: Origin::KeepFlag,
        required: false,
        optional: false,
    });
    let axis_for = axis_for.iter().map(|rule| Rule {
        glob: rule.glob.clone(),
        treatment: Treatment::Axis(rule.axis),
        parts: rule.parts.clone(),
        origin: Origin::AxisForFlag,
        required: false,
        optional: false,
    });
    keep.chain(axis_for).chain(files).collect()
}

/// The rules indexed for matching many names, deciding exactly as trying them in turn does:
/// a tensor is decided by the first rule (the lowest position in `rules`) whose glob matches
/// its name.
///
/// Each glob is filed under one literal piece of it that every name it matches must hold: a
/// glob without `*` or `?` under the whole name; otherwise its text before the first `*` or
/// `?` (a prefix), after the last (a suffix) or between two (somewhere inside), whichever
/// fewest other globs share (the longest on a tie). A name is then tried against the rules
/// filed under its own prefixes, suffixes and pieces of the lengths that occur, in the order
/// of their positions, rather than against every rule. Globs of `*` and `?` alone only count
/// characters, and are looked up by the count. Matching `t` tensors against `r` rules takes
/// time about linear in `t + r` when the rules' pieces tell them apart, as real rules'
/// (`*.o_proj.weight`, `model.layers.3.*`) do.
#[derive(Debug)]
pub struct Matcher<'r> {
    /// The rules, in the order they apply.
    rules: &'r [Rule],
    /// Globs without `*` or `?`, by their text.
    literal: Pieces<'r>,
    /// Globs filed under the text before their first `*` or `?`.
    prefix: Pieces<'r>,
    /// Globs filed under the text after their last `*` or `?`.
    suffix: Pieces<'r>,
    /// Globs filed under a text between two of their `*` or `?`.
    inside: Pieces<'r>,
    /// Globs of `*` and `?` alone: position, count of `?`, and whether a `*` is there (the
    /// name has at least that many characters) or not (exactly that many).
    counting: Vec<(usize, usize, bool)>,
    /// Of those without `*`, the first position for each count of `?`.
    exactly: HashMap<usize, usize>,
    /// Of those with a `*`, by count of `?` ascending: the count, and the first position of
    /// the globs with at most that count.
    at_least: Vec<(usize, usize)>,
}

/// Rules filed under a piece of text, each list in the order of the rules' positions, and
/// the lengths in bytes of the pieces, ascending.
#[derive(Debug, Default)]
struct Pieces<'r> {
    rules: HashMap<&'r [u8], Vec<usize>>,
    lengths: Vec<usize>,
}

impl<'r> Pieces<'r> {
    fn file(&mut self, piece: &'r str, at: usize) {
        self.rules.entry(piece.as_bytes()).or_default().push(at);
    }

    fn seal(&mut self) {
        let lengths: HashSet<usize> = self.rules.keys().map(|piece| piece.len()).collect();
        self.lengths = lengths.into_iter().collect();
        self.lengths.sort_unstable();
    }

    /// The rules filed under `piece`.
    fn get(&self, piece: &[u8]) -> Option<&[usize]> {
        self.rules.get(piece).map(Vec::as_slice)
    }

    /// The lengths of the pieces filed, up to `most`.
    fn lengths_to(&self, most: usize) -> impl Iterator<Item = usize> + '_ {
        self.lengths.iter().copied().take_while(move |&l| l <= most)
    }
}

/// Where a glob is filed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Place {
    Literal,
    Prefix,
    Suffix,
    Inside,
}

/// The literal pieces of `glob` that every name it matches holds: the whole glob when it has
/// no `*` or `?`, else its non-empty prefix, suffix and pieces inside.
fn pieces(glob: &str) -> Vec<(Place, &str)> {
    let parts: Vec<&str> = glob.split(['*', '?']).collect();
    if let [whole] = parts.as_slice() {
        return vec![(Place::Literal, *whole)];
    }
    let last = parts.len() - 1;
    parts
        .iter()
        .enumerate()
        .filter(|(_, part)| !part.is_empty())
        .map(|(at, &part)| match at {
            0 => (Place::Prefix, part),
            _ if at == last => (Place::Suffix, part),
            _ => (Place::Inside, part),
        })
        .collect()
}

impl<'r> Matcher<'r> {
    /// Indexes `rules`, given in the order they apply.
    pub fn new(rules: &'r [Rule]) -> Matcher<'r> {
        let all: Vec<Vec<(Place, &str)>> = rules.iter().map(|rule| pieces(&rule.glob)).collect();
        let mut sharing: HashMap<(Place, &str), usize> = HashMap::new();
        for piece in all.iter().flatten() {
            *sharing.entry(*piece).or_default() += 1;
        }
        let mut matcher = Matcher {
            rules,
            literal: Pieces::default(),
            prefix: Pieces::default(),
            suffix: Pieces::default(),
            inside: Pieces::default(),
            counting: Vec::new(),
            exactly: HashMap::new(),
            at_least: Vec::new(),
        };
        for (at, pieces) in all.iter().enumerate() {
            let best = pieces
                .iter()
                .min_by_key(|piece| (sharing[*piece], std::cmp::Reverse(piece.1.len())));
            match best {
                Some(&(Place::Literal, piece)) => matcher.literal.file(piece, at),
                Some(&(Place::Prefix, piece)) => matcher.prefix.file(piece, at),
                Some(&(Place::Suffix, piece)) => matcher.suffix.file(piece, at),
                Some(&(Place::Inside, piece)) => matcher.inside.file(piece, at),
                None => {
                    let glob = &rules[at].glob;
                    let any = glob.chars().filter(|&c| c == '?').count();
                    matcher.counting.push((at, any, glob.contains('*')));
                }
            }
        }
        for pieces in [
            &mut matcher.literal,
            &mut matcher.prefix,
            &mut matcher.suffix,
            &mut matcher.inside,
        ] {
            pieces.seal();
        }
        let mut at_least: Vec<(usize, usize)> = Vec::new();
        for &(at, any, star) in &matcher.counting {
            if star {
                at_least.push((any, at));
            } else {
                matcher.exactly.entry(any).or_insert(at);
            }
        }
        at_least.sort_unstable();
        let mut first = usize::MAX;
        for (_, at) in &mut at_least {
            first = first.min(*at);
            *at = first;
        }
        matcher.at_least = at_least;
        matcher
    }

    /// The rules, in the order they apply.
    pub fn rules(&self) -> &'r [Rule] {
        self.rules
    }

    /// The lists of rules that may match `name`: every rule that matches it is in one, but
    /// not the globs of `*` and `?` alone.
    fn candidates(&self, name: &str) -> Vec<&[usize]> {
        let name = name.as_bytes();
        let mut lists: Vec<&[usize]> = self.literal.get(name).into_iter().collect();
        for length in self.prefix.lengths_to(name.len()) {
            lists.extend(self.prefix.get(&name[..length]));
        }
        for length in self.suffix.lengths_to(name.len()) {
            lists.extend(self.suffix.get(&name[name.len() - length..]));
        }
        for length in self.inside.lengths_to(name.len()) {
            lists.extend(
                name.windows(length)
                    .filter_map(|piece| self.inside.get(piece)),
            );
        }
        lists
    }

    /// The position of the rule that decides the tensor `name`: the first that matches it.
    pub fn decide(&self, name: &str) -> Option<usize> {
        let mut first: Option<usize> = None;
        for list in self.candidates(name) {
            // Each list is in the order of positions: its first match is its best.
            let mut earlier = list.iter().take_while(|&&at| first.is_none_or(|f| at < f));
            if let Some(&at) = earlier.find(|&&at| self.rules[at].matches(name)) {
                first = Some(at);
            }
        }
        if self.counting.is_empty() {
            return first;
        }
        let chars = name.chars().count();
        let exactly = self.exactly.get(&chars).copied();
        let fewer = self.at_least.partition_point(|&(any, _)| any <= chars);
        let at_least = fewer.checked_sub(1).map(|last| self.at_least[last].1);
        [first, exactly, at_least].into_iter().flatten().min()
    }

    /// The rules that match none of `names` (the tensors of the inputs): a typo in a glob.
    pub fn unmatched(&self, names: &[&str]) -> Vec<&'r Rule> {
        let mut matched = vec![false; self.rules.len()];
        for name in names {
            for list in self.candidates(name) {
                for &at in list {
                    if !matched[at] && self.rules[at].matches(name) {
                        matched[at] = true;
                    }
                }
            }
        }
        if !self.counting.is_empty() {
            let chars: HashSet<usize> = names.iter().map(|name| name.chars().count()).collect();
            let most = chars.iter().copied().max();
            for &(at, any, star) in &self.counting {
                matched[at] = if star {
                    most.is_some_and(|most| most >= any)
                } else {
                    chars.contains(&any)
                };
            }
        }
        self.rules
            .iter()
            .zip(matched)
            .filter(|(_, matched)| !matched)
            .map(|(rule, _)| rule)
            .collect()
    }
}

/// Reads the rules file `path` (`--rules`).
pub fn read_file(path: &Path) -> Result<Vec<Rule>> {
    let text = crate::sys::read_text(path, &crate::limits::RULES, crate::sys::Accept::Stream)
        .map_err(|e| Error::io("read the rules file", path, e))?;
    parse_file(path, &text)
}

/// The rules of a rules file: one `GLOB = AXIS [WORDS]` or `GLOB = keep` a line (WORDS:
/// `plain`, `chunks N`, `chunks P:Q:R`, `replicas K`, see `plan::chunks`); blank lines and
/// comments (from a `#` at the start of a line or after a space) are skipped. Every line that
/// is not a rule is refused at once, each named by its line number: one without `=`, with
/// two (`*.o_proj.weight == 1`), with no glob, or with a word after the axis that is not one
/// of a rule's. Each rule is [`Rule::required`] to match a tensor.
pub fn parse_file(path: &Path, text: &str) -> Result<Vec<Rule>> {
    let mut rules: Vec<Rule> = Vec::new();
    // Each glob's first line, to refuse a second rule of it.
    let mut first_lines: HashMap<&str, usize> = HashMap::new();
    let mut problems = Vec::new();
    let shown = messages::path(path);
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let content = strip_comment(raw).trim();
        if content.is_empty() {
            continue;
        }
        match parse_line(content) {
            Ok((glob, treatment, parts, optional)) => {
                if let Some(first) = first_lines.get(glob) {
                    problems.push(format!(
                        "{shown}:{line}: `{}` already has a rule on line {first}, which wins \
                         (the first match does); remove one of them",
                        messages::name(glob)
                    ));
                    continue;
                }
                first_lines.insert(glob, line);
                rules.push(Rule {
                    glob: glob.to_string(),
                    treatment,
                    parts,
                    origin: Origin::File {
                        path: path.to_path_buf(),
                        line,
                    },
                    required: !optional,
                    optional,
                });
            }
            Err(problem) => problems.push(format!("{shown}:{line}: {problem}")),
        }
    }
    if problems.is_empty() {
        return Ok(rules);
    }
    let count = problems.len();
    Err(Error::Refused(vec![Refusal {
        headline: format!(
            "the rules file {shown} has {} line{} that {} not a rule",
            crate::outliers::thousands(count),
            plural(count),
            if count == 1 { "is" } else { "are" }
        ),
        details: capped(problems, SHOWN),
        hint: Some(
            "write one rule a line, `GLOB = AXIS` (e.g. `*.o_proj.weight = 1`), `GLOB = \
             AXIS chunks N` or `plain` or `replicas K` (e.g. `*.gate_up_proj.weight = 0 \
             chunks 2`), or `GLOB = keep` (e.g. `*norm* = keep`), each with `optional` last \
             when it may match no tensor; `#` starts a comment"
                .to_string(),
        ),
    }]))
}

/// The line without its comment: from a `#` at its start or after whitespace.
fn strip_comment(line: &str) -> &str {
    let mut previous = ' ';
    for (at, c) in line.char_indices() {
        if c == '#' && previous.is_whitespace() {
            return &line[..at];
        }
        previous = c;
    }
    line
}

/// One rule line without its comment: the glob, what it does, what its words say, and
/// whether its last word is `optional` (the line may match no tensor). Messages quote the
/// line's text ([`messages::name`]): cut to an excerpt, control characters escaped.
fn parse_line(content: &str) -> std::result::Result<(&str, Treatment, Parts, bool), String> {
    let Some((glob, value)) = content.split_once('=') else {
        return Err(format!(
            "`{}` has no `=`; expected GLOB = AXIS or GLOB = keep",
            messages::name(content)
        ));
    };
    let glob = glob.trim();
    check_glob(glob, content)?;
    let trimmed = value.trim_end();
    let (value, optional) = match trimmed.strip_suffix("optional") {
        Some(rest) if rest.ends_with(char::is_whitespace) => (rest, true),
        _ => (value, false),
    };
    let (treatment, parts) = parse_value(glob, value)?;
    Ok((glob, treatment, parts, optional))
}

/// Refuses the glob of the rule `text` when it is empty or holds the rule's `=` again.
fn check_glob(glob: &str, text: &str) -> std::result::Result<(), String> {
    if glob.is_empty() {
        return Err(format!(
            "`{}` has no glob before the `=`",
            messages::name(text.trim())
        ));
    }
    if text.matches('=').count() > 1 {
        return Err(format!(
            "`{}` has more than one `=`: a rule is GLOB = AXIS, with one (write `?` for a `=` \
             in a tensor's name)",
            messages::name(text.trim())
        ));
    }
    Ok(())
}

/// What follows a rule's `=`: `keep`, or an axis and the words after it (`0 chunks 2`).
fn parse_value(glob: &str, value: &str) -> std::result::Result<(Treatment, Parts), String> {
    let words: Vec<&str> = value.split_whitespace().collect();
    let Some((&first, rest)) = words.split_first() else {
        return Err(format!(
            "`{} =` has no axis after the `=`: expected an axis (an integer such as 0, 1 or \
             -1) or `keep`",
            messages::name(glob)
        ));
    };
    if first == "keep" {
        return match rest {
            [] => Ok((Treatment::Keep, Parts::default())),
            [word, ..] => Err(format!(
                "`{}` after `keep`: a kept tensor is copied once, with no axis or layout",
                messages::name(word)
            )),
        };
    }
    match first.parse() {
        Ok(axis) => {
            let parts = crate::plan::chunks::parse(rest)?;
            Ok((Treatment::Axis(axis), parts))
        }
        Err(_) if first.eq_ignore_ascii_case("keep") => Err(format!(
            "`{}` is written `keep`, in lower case",
            messages::name(first)
        )),
        Err(_) => Err(format!(
            "`{}` after `{} =` is neither an axis (an integer such as 0, 1 or -1) nor `keep`",
            messages::name(value.trim()),
            messages::name(glob)
        )),
    }
}

/// How many items a message lists before "... and N more".
const SHOWN: usize = 10;

fn plural(count: usize) -> &'static str {
    if count == 1 { "" } else { "s" }
}

/// One line per rule that matches no tensor, with the tensor name closest to its glob, for
/// a warning or a refusal: the first [`SHOWN`] rules, then a line that counts the others (a
/// rules file for another model may match nothing here, line after line).
pub fn describe_unmatched(rules: &[&Rule], names: &[&str]) -> Vec<String> {
    let mut lines: Vec<String> = rules
        .iter()
        .take(SHOWN)
        .map(|rule| {
            // The glob's text, as much of it as a name is compared with: a megabyte-long
            // glob is no closer to a name for all its length.
            let literal: Vec<char> = rule
                .glob
                .chars()
                .filter(|&c| c != '*')
                .take(crate::messages::EXCERPT_CHARS)
                .collect();
            let closest = names.iter().min_by_key(|name| {
                let distance = distance_within(&literal, name);
                (distance, name.len(), **name)
            });
            match closest {
                Some(name) => format!(
                    "{rule} matches no tensor (the closest name is `{}`)",
                    messages::name(name)
                ),
                None => format!("{rule} matches no tensor: the inputs hold none"),
            }
        })
        .collect();
    if rules.len() > SHOWN {
        let more = rules.len() - SHOWN;
        lines.push(format!(
            "... and {} more rule{} that match{} no tensor",
            crate::outliers::thousands(more),
            plural(more),
            if more == 1 { "es" } else { "" }
        ));
    }
    lines
}

/// The fewest edits that make `literal` a part of `name` (Sellers' approximate substring
/// match): how far a glob's text is from matching somewhere in the name.
fn distance_within(literal: &[char], name: &str) -> usize {
    // row[j]: the fewest edits matching the literal so far to a part of `name` ending at j.
    let name: Vec<char> = name.chars().collect();
    let mut row = vec![0; name.len() + 1];
    for (i, &c) in literal.iter().enumerate() {
        let mut next = vec![i + 1; name.len() + 1];
        for j in 1..=name.len() {
            let substitute = row[j - 1] + usize::from(name[j - 1] != c);
            next[j] = substitute.min(row[j] + 1).min(next[j - 1] + 1);
        }
        row = next;
    }
    row.into_iter().min().unwrap_or(0)
}

/// The refusal of rules that match no tensor: under `--strict` (`strict`), or a rules file's
/// lines ([`Rule::required`]).
pub fn unmatched_refusal(rules: &[&Rule], names: &[&str], strict: bool) -> Refusal {
    let (why, after) = if strict {
        ("--strict refuses such rules", "without --strict")
    } else {
        (
            "a rules file's lines must each match one",
            "with --allow-unmatched",
        )
    };
    Refusal {
        headline: format!(
            "{} rule{} match{} no tensor of the inputs ({why})",
            crate::outliers::thousands(rules.len()),
            plural(rules.len()),
            if rules.len() == 1 { "es" } else { "" }
        ),
        details: describe_unmatched(rules, names),
        hint: Some(format!(
            "correct each glob (`*` matches any text, dots included; `?` one character), or \
             remove the rule (a rules file for another model is the wrong file); {after} \
             these are warnings"
        )),
    }
}

#[cfg(test)]
mod tests;
