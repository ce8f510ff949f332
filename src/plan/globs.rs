//! Tensor names and globs, for the rules and the other planning files that use them:
//! matching a tensor name against a glob, suggesting globs for a set of names, and quoting
//! text for a shell. They import nothing of the rules (`rules`) or of `chunks`, which both
//! use them.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

/// The most targets x names that [`suggest_globs`] searches for shared globs (4 Mi: 2,048
/// tensors all undecided, in well under a second).
const GLOB_WORK: usize = 1 << 22;

/// Globs that together match exactly the tensors `targets` among `names` (every tensor of
/// the inputs), so that a rule made of each decides no other tensor, and few of them: names
/// that share a pattern share a glob. The patterns tried are a name's last dotted parts
/// (`*.LayerNorm.weight`), its first ones (`pooler.*`), its numbered parts as `*`
/// (`layers.*.mlp.weight`) and the name itself; the one that covers most targets not yet
/// covered goes first (the greedy set cover), and a glob that stands for one tensor is its
/// name. Each glob comes with the targets it matches, in the order of `targets`.
///
/// The search costs targets x names glob matches and more; past [`GLOB_WORK`] of them (a
/// checkpoint of thousands of tensors, every one undecided) each target stands alone, by its
/// name: two copies of a 10,000-tensor file took two minutes to refuse before.
pub fn suggest_globs(targets: &[&str], names: &[&str]) -> Vec<(String, Vec<String>)> {
    if targets.len().saturating_mul(names.len()) > GLOB_WORK {
        return targets
            .iter()
            .map(|&target| (target.to_string(), vec![target.to_string()]))
            .collect();
    }
    let wanted: HashSet<&str> = targets.iter().copied().collect();
    // Every pattern that matches no other tensor, most general first, and the targets it
    // matches.
    let mut seen = HashSet::new();
    let mut covers: Vec<(String, Vec<usize>)> = Vec::new();
    for &target in targets {
        for glob in candidates(target) {
            if !seen.insert(glob.clone()) {
                continue;
            }
            let exact = names
                .iter()
                .all(|name| wanted.contains(name) || !glob_match(&glob, name));
            if exact {
                let matched = (0..targets.len())
                    .filter(|&t| glob_match(&glob, targets[t]))
                    .collect();
                covers.push((glob, matched));
            }
        }
    }
    let mut group_of: Vec<Option<usize>> = vec![None; targets.len()];
    let mut globs: Vec<String> = Vec::new();
    loop {
        let fresh = |matched: &[usize]| matched.iter().filter(|&&t| group_of[t].is_none()).count();
        // The first of the patterns that cover most: `max_by_key` would take the last.
        let best = covers
            .iter()
            .enumerate()
            .map(|(at, (_, matched))| (fresh(matched), at))
            .filter(|&(count, _)| count > 0)
            .min_by_key(|&(count, at)| (std::cmp::Reverse(count), at));
        let Some((_, at)) = best else { break };
        for &t in &covers[at].1 {
            group_of[t].get_or_insert(globs.len());
        }
        globs.push(covers[at].0.clone());
    }
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    let mut slot: HashMap<usize, usize> = HashMap::new();
    for (t, &target) in targets.iter().enumerate() {
        // A target no pattern covers (its name holds `*` that matches another) stands alone.
        let glob = group_of[t].map_or_else(|| target.to_string(), |g| globs[g].clone());
        let key = group_of[t].unwrap_or(usize::MAX - t);
        let at = *slot.entry(key).or_insert_with(|| {
            groups.push((glob, Vec::new()));
            groups.len() - 1
        });
        groups[at].1.push(target.to_string());
    }
    // A pattern that stands for one tensor says less than its name.
    for (glob, members) in &mut groups {
        if let [only] = members.as_slice()
            && !only.contains(['*', '?'])
        {
            *glob = only.clone();
        }
    }
    groups
}

/// The globs tried for a name, most general first: `*.` and its last dotted parts (one, two,
/// ... up to a numbered part), its first parts and `.*` (likewise), its numbered parts as
/// `*`, then the name.
fn candidates(name: &str) -> Vec<String> {
    let parts: Vec<&str> = name.split('.').collect();
    let numbered = |part: &&str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    let mut globs: Vec<String> = (1..parts.len())
        .map(|k| &parts[parts.len() - k..])
        .take_while(|suffix| !numbered(&suffix[0]))
        .map(|suffix| format!("*.{}", suffix.join(".")))
        .collect();
    globs.extend(
        (1..parts.len())
            .map(|k| &parts[..k])
            .take_while(|prefix| !numbered(&prefix[prefix.len() - 1]))
            .map(|prefix| format!("{}.*", prefix.join("."))),
    );
    if parts.iter().any(numbered) {
        let general: Vec<&str> = parts
            .iter()
            .map(|part| if numbered(part) { "*" } else { part })
            .collect();
        globs.push(general.join("."));
    }
    globs.push(name.to_string());
    globs
}

/// `text` quoted for a POSIX shell: in single quotes, unless it needs none; in `$'...'` with
/// escapes when it holds characters that act on a terminal.
pub fn shell_quote(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-/=:,+@%".contains(c));
    if plain {
        text.to_string()
    } else if matches!(crate::messages::quote(text), Cow::Borrowed(_)) {
        format!("'{}'", text.replace('\'', r"'\''"))
    } else {
        // Characters that act on a terminal, in bash's and zsh's `$'...'`, which escapes them
        // as `ls` does: shown inert, and still the same text when pasted into a shell.
        let mut quoted = String::from("$'");
        for c in text.chars() {
            match c {
                '\\' | '\'' => {
                    quoted.push('\\');
                    quoted.push(c);
                }
                '\n' => quoted.push_str("\\n"),
                '\r' => quoted.push_str("\\r"),
                '\t' => quoted.push_str("\\t"),
                c if matches!(
                    crate::messages::quote(c.encode_utf8(&mut [0; 4])),
                    Cow::Owned(_)
                ) =>
                {
                    match u32::from(c) {
                        code @ 0..0x80 => quoted.push_str(&format!("\\x{code:02x}")),
                        code => quoted.push_str(&format!("\\u{code:04x}")),
                    }
                }
                c => quoted.push(c),
            }
        }
        quoted.push('\'');
        quoted
    }
}

/// Shell-style matching of a tensor name: `*` matches any text (dots included), `?` one
/// character, anything else itself.
pub fn glob_match(glob: &str, name: &str) -> bool {
    // Bytes are characters in ASCII, the common case: no allocation. Suggesting globs
    // matches every candidate against every tensor of a model.
    if glob.is_ascii() && name.is_ascii() {
        return match_items(glob.as_bytes(), name.as_bytes(), b'*', b'?');
    }
    let (glob, name): (Vec<char>, Vec<char>) = (glob.chars().collect(), name.chars().collect());
    match_items(&glob, &name, '*', '?')
}

/// Glob matching over items: `star` matches any run of them, `any` one.
fn match_items<T: Copy + PartialEq>(glob: &[T], name: &[T], star_item: T, any: T) -> bool {
    // Iterative matching with backtracking to the last star: linear in practice.
    let (mut g, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match glob.get(g) {
            Some(&c) if c == star_item => {
                star = Some((g, n));
                g += 1;
            }
            Some(&c) if c == any || c == name[n] => {
                g += 1;
                n += 1;
            }
            _ => match star {
                Some((sg, sn)) => {
                    g = sg + 1;
                    n = sn + 1;
                    star = Some((sg, sn + 1));
                }
                None => return false,
            },
        }
    }
    glob[g..].iter().all(|&c| c == star_item)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_of_undecided_tensors_stand_alone_by_their_names() {
        let owned: Vec<String> = (0..3000).map(|i| format!("layers.{i}.w")).collect();
        let names: Vec<&str> = owned.iter().map(String::as_str).collect();
        let groups = suggest_globs(&names, &names);
        assert_eq!(groups.len(), 3000);
        assert_eq!(
            groups[7],
            ("layers.7.w".to_owned(), vec!["layers.7.w".to_owned()])
        );
        // Under the bound, names that share a pattern share a glob.
        let few = &names[..100];
        let groups = suggest_globs(few, few);
        assert_eq!(groups.len(), 1, "{groups:?}");
        assert_eq!(groups[0].0, "*.w");
    }
}
