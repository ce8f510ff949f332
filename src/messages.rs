//! Text on its way to a person: names taken from files and from the command line are quoted
//! here before they reach a terminal.
//!
//! A tensor name, a shard name from an index, a rule's glob or a file name is data that
//! whoever made the file controls. Printed as it is, an ESC sequence in it clears the screen
//! or sets the window title, a newline forges a `hint:` line of tjoin's own, and U+202E
//! reverses what follows it. `ls` and `git` quote such names; tjoin escapes the characters
//! that act on a terminal instead of showing: C0 controls (newline and tab included), DEL,
//! C1 controls, and the invisible formatting characters that reorder or hide text. A name
//! without them is shown as it is, so ordinary messages read as before.
//!
//! JSON output is not text for a terminal: it stays exact JSON, which escapes controls itself.

use std::borrow::Cow;
use std::path::Path;

/// Whether `c` acts on a terminal or on how the text around it is shown, rather than showing
/// as itself.
fn acts(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}'
        // Zero-width and direction marks, bidirectional embeddings, overrides and isolates,
        // the Arabic letter mark, the byte-order mark: invisible, and they reorder or hide
        // the text after them.
        | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        | '\u{061c}' | '\u{feff}'
        // Line and paragraph separators: a terminal may break the line there.
        | '\u{2028}' | '\u{2029}')
}

/// `text` with every character that acts on a terminal escaped (`\x1b`, `\n`, `\u{202e}`),
/// borrowed unchanged when it has none.
pub fn quote(text: &str) -> Cow<'_, str> {
    if !text.chars().any(acts) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !acts(c) {
            out.push(c);
            continue;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    Cow::Owned(out)
}

/// A path as a message shows it: lossy where it is not UTF-8 (as `Path::display` is), and
/// quoted.
pub fn path(path: &Path) -> String {
    quote(&path.to_string_lossy()).into_owned()
}

/// A name taken from a file (a tensor, a shard, a key) as a message shows it: quoted, and cut
/// to an excerpt so that a hostile file cannot turn one message into megabytes.
pub fn name(name: &str) -> String {
    crate::error::excerpt(&quote(name)).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_are_shown_as_they_are() {
        for plain in ["model.layers.0.weight", "é ü 中文 🙂", "a b\\c", ""] {
            assert!(matches!(quote(plain), Cow::Borrowed(_)), "{plain}");
        }
    }

    #[test]
    fn controls_and_reordering_characters_are_escaped() {
        assert_eq!(quote("a\x1b[2Jb"), "a\\x1b[2Jb");
        assert_eq!(quote("x\nhint: run curl"), "x\\nhint: run curl");
        assert_eq!(quote("t\tr\r\0"), "t\\tr\\r\\x00");
        assert_eq!(quote("\u{7f}\u{85}\u{9b}"), "\\x7f\\u{85}\\u{9b}");
        assert_eq!(quote("evil\u{202e}txt.npy"), "evil\\u{202e}txt.npy");
        assert_eq!(
            quote("\u{2066}\u{200b}\u{feff}"),
            "\\u{2066}\\u{200b}\\u{feff}"
        );
    }

    #[test]
    fn a_quoted_name_holds_nothing_that_acts_on_a_terminal() {
        let all: String = (0u32..0x3000).filter_map(char::from_u32).collect();
        assert!(!quote(&all).chars().any(acts));
    }

    #[test]
    fn names_from_files_are_cut_after_quoting() {
        let long = "\x1b".repeat(500);
        let shown = name(&long);
        assert!(shown.starts_with("\\x1b\\x1b"));
        assert!(shown.contains("more bytes"), "{shown}");
        assert!(!shown.contains('\x1b'));
    }
}
