//! Text on its way to a person, and the one gate it goes through: errors, warnings, summaries
//! and progress lines to standard error, the `--dry-run` plan to standard output. Names taken
//! from files and from the command line are quoted here before they reach a terminal.
//!
//! A closed or broken stream is not a panic (`print!` and `eprintln!` panic on one, exit
//! status 101), as in ripgrep's `crates/core/messages.rs`: a line standard error cannot take
//! is dropped and the run goes on (a join that would succeed still writes its output when its
//! warning has nowhere to go); a plan standard output cannot take ends the run with an I/O
//! error, which `main` ends quietly with status 1 when the reader went away (a broken pipe).
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
//!
//! A URL's secrets never leave through this gate ([`redact_urls`]): a pre-signed URL's query
//! (`X-Amz-Signature=...`, an Azure SAS's `sig=...`) and a URL's userinfo (`user:password@`)
//! are replaced by `REDACTED` in every line, path and JSON text written here, so that an
//! error, a progress line or a `--dry-run` report can be pasted into a bug report as it is.

use std::borrow::Cow;
use std::fmt;
use std::io::{self, Write};
use std::path::Path;

/// What every warning starts with; warnings go to standard error, and `-q` silences them.
pub const WARNING: &str = "tjoin: warning: ";

/// Writes `text` and a newline on standard error, for a person: a warning, a summary, a note.
/// Each of its lines is quoted ([`lines`]). Whatever standard error does with it (closed, a
/// pipe whose reader is gone, a full disk), the run goes on: the line is lost, the work is
/// not.
pub fn eprintln(text: impl fmt::Display) {
    eprintln_styled(&lines(&text.to_string()));
}

/// [`eprintln`] for text already quoted line by line whose escape sequences are tjoin's own:
/// an error that `error::render` coloured.
pub fn eprintln_styled(text: &str) {
    // One write of the whole text, so that the lines of two threads never mix.
    let text = format!("{text}\n");
    let _ = io::stderr().lock().write_all(text.as_bytes());
}

/// Writes a warning on standard error, after `tjoin: warning: `, as [`eprintln`] does.
pub fn warn(text: impl fmt::Display) {
    eprintln(format_args!("{WARNING}{text}"));
}

/// Writes the text `--dry-run` plan on standard output, each line quoted ([`lines`]), as
/// [`print_exact`] writes.
pub fn print(text: &str) -> io::Result<()> {
    print_exact(&lines(text))
}

/// Writes `text` on standard output as it is and flushes it: the `--dry-run=json` plan, a
/// refusal as JSON (exact JSON, which escapes controls itself). The caller turns a failure
/// into an I/O error naming standard output (the plan report); `main` ends a broken
/// pipe (the reader, such as `head`, went away) quietly with status 1 and reports any other.
pub fn print_exact(text: &str) -> io::Result<()> {
    let text = redact_urls(text);
    let mut stdout = io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
}

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

/// `text` with each of its lines quoted: what acts on a terminal is escaped, the newlines
/// between lines kept. The gate does it to everything it writes for a person, so that a name
/// a message forgot to quote still cannot act on the terminal (a newline in it can still start
/// a line, which only quoting the name where the message is built prevents).
pub fn lines(text: &str) -> String {
    let text = redact_urls(text);
    let quoted: Vec<Cow<'_, str>> = text.split('\n').map(quote).collect();
    quoted.join("\n")
}

/// A shape as messages print it: `[2, 3]`, `[]` for a scalar.
pub fn shape_text(shape: &[u64]) -> String {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    format!("[{}]", dims.join(", "))
}

/// A path as a message shows it: lossy where it is not UTF-8 (as `Path::display` is), and
/// quoted.
pub fn path(path: &Path) -> String {
    let text = path.to_string_lossy();
    quote(&redact_urls(&text)).into_owned()
}

/// What a secret in a URL is replaced by.
pub const REDACTED: &str = "REDACTED";

/// `text` with the secrets of every URL in it replaced by [`REDACTED`] (borrowed unchanged
/// when it holds none): the userinfo before a host (`https://user:password@host/`) and the
/// value of every query parameter (`?X-Amz-Signature=REDACTED&X-Amz-Credential=REDACTED`).
/// Every value, not a list of known names: a pre-signed URL's parameters differ from store
/// to store (`X-Goog-Signature`, an Azure SAS's `sig`, a CDN's `token`), and a name this
/// list missed would leak. The names stay, so that the message still says what kind of URL
/// it was. A URL is `SCHEME://` (letters, digits, `+`, `-`, `.`) up to the next white space,
/// quote, backslash or angle bracket, less the closing brackets and punctuation that end it.
pub fn redact_urls(text: &str) -> Cow<'_, str> {
    if !text.contains("://") {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut changed = false;
    while let Some(at) = rest.find("://") {
        let scheme_len = rest[..at]
            .bytes()
            .rev()
            .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
            .count();
        let start = at - scheme_len;
        let end = rest[at..]
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '\\' | '<' | '>'))
            .map_or(rest.len(), |len| at + len);
        // Punctuation that ends a sentence or closes a bracket after the URL is not part of
        // it: `(s3://b/k?sig=x): gone` keeps its `): gone`.
        let end = start
            + rest[start..end]
                .trim_end_matches([')', ']', '}', ':', ',', '.', ';'])
                .len();
        out.push_str(&rest[..start]);
        let url = &rest[start..end];
        let redacted = if scheme_len == 0 {
            Cow::Borrowed(url)
        } else {
            redact_url(url)
        };
        changed |= matches!(redacted, Cow::Owned(_));
        out.push_str(&redacted);
        rest = &rest[end..];
    }
    out.push_str(rest);
    if changed {
        Cow::Owned(out)
    } else {
        Cow::Borrowed(text)
    }
}

/// One URL (`SCHEME://...`, nothing after it) with its userinfo and query values redacted.
fn redact_url(url: &str) -> Cow<'_, str> {
    let Some(after) = url.find("://").map(|at| at + 3) else {
        return Cow::Borrowed(url);
    };
    let authority_end = url[after..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |len| after + len);
    let userinfo = url[after..authority_end].rfind('@').map(|len| after + len);
    let query = url[authority_end..]
        .find('?')
        .map(|len| authority_end + len);
    if userinfo.is_none() && query.is_none() {
        return Cow::Borrowed(url);
    }
    let mut out = String::with_capacity(url.len());
    out.push_str(&url[..after]);
    match userinfo {
        Some(at) => {
            out.push_str(REDACTED);
            out.push_str(&url[at..query.unwrap_or(url.len())]);
        }
        None => out.push_str(&url[after..query.unwrap_or(url.len())]),
    }
    if let Some(query) = query {
        let (query, fragment) = match url[query..].find('#') {
            Some(len) => (&url[query + 1..query + len], &url[query + len..]),
            None => (&url[query + 1..], ""),
        };
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((name, _)) => format!("{name}={REDACTED}"),
                None if pair.is_empty() => String::new(),
                // A bare word may be the secret itself (`?AbCdEf123`).
                None => REDACTED.to_string(),
            })
            .collect();
        out.push('?');
        out.push_str(&pairs.join("&"));
        out.push_str(fragment);
    }
    Cow::Owned(out)
}

/// A name taken from a file (a tensor, a shard, a key) as a message shows it: quoted, and cut
/// to an excerpt so that a hostile file cannot turn one message into megabytes.
pub fn name(name: &str) -> String {
    excerpt(name).into_owned()
}

/// How many characters of a file's own text a message quotes at most.
pub const EXCERPT_CHARS: usize = 100;

/// `text`, a piece of an input quoted in a message (a header, a name, a number), with what
/// would act on a terminal escaped ([`quote`]) and cut to [`EXCERPT_CHARS`]
/// characters with a note of how much was left out: a hostile file must not turn one error
/// into megabytes of output.
pub fn excerpt(text: &str) -> std::borrow::Cow<'_, str> {
    let text = quote(text);
    match text.char_indices().nth(EXCERPT_CHARS) {
        None => text,
        Some((cut, _)) => std::borrow::Cow::Owned(format!(
            "{}... ({} more bytes)",
            &text[..cut],
            text.len() - cut
        )),
    }
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
    fn the_gate_keeps_the_lines_of_a_message_and_escapes_the_rest() {
        assert_eq!(
            lines("tjoin: error: a\x1b[2J\nhint: b\u{202e}\r"),
            "tjoin: error: a\\x1b[2J\nhint: b\\u{202e}\\r"
        );
        assert_eq!(lines("plain\n  text\n"), "plain\n  text\n");
    }

    #[test]
    fn names_from_files_are_cut_after_quoting() {
        let long = "\x1b".repeat(500);
        let shown = name(&long);
        assert!(shown.starts_with("\\x1b\\x1b"));
        assert!(shown.contains("more bytes"), "{shown}");
        assert!(!shown.contains('\x1b'));
    }

    #[test]
    fn a_presigned_urls_query_values_and_userinfo_are_redacted() {
        let url = "s3://b/k.npy?X-Amz-Credential=AKIA%2F1&X-Amz-Signature=abc123&X-Amz-Security-Token=tok";
        let text = format!("cannot read input 1 ({url}): gone");
        let shown = lines(&text);
        for secret in ["AKIA", "abc123", "tok"] {
            assert!(!shown.contains(secret), "{shown}");
        }
        assert!(shown.contains("s3://b/k.npy?X-Amz-Credential=REDACTED&X-Amz-Signature=REDACTED"));
        assert!(
            shown.ends_with("&X-Amz-Security-Token=REDACTED): gone"),
            "{shown}"
        );
        let shown = path(Path::new("https://user:pa55@host:8080/a/b?sig=zz#frag"));
        assert_eq!(shown, "https://REDACTED@host:8080/a/b?sig=REDACTED#frag");
        assert_eq!(redact_urls("https://h/x?S3CR3T"), "https://h/x?REDACTED");
        let json = r#"{"path":"https://h/a?sig=zz","n":1}"#;
        assert_eq!(
            redact_urls(json),
            r#"{"path":"https://h/a?sig=REDACTED","n":1}"#
        );
    }

    #[test]
    fn text_without_secrets_is_borrowed_unchanged() {
        for text in [
            "a.npy",
            "s3://bucket/key.npy",
            "see https://host/path: gone",
            "a://",
        ] {
            assert!(
                matches!(redact_urls(text), Cow::Borrowed(t) if t == text),
                "{text}"
            );
        }
        // An `@` in the path is not userinfo.
        assert_eq!(redact_urls("s3://b/user@x.npy"), "s3://b/user@x.npy");
    }
}
