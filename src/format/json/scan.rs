//! The scanner: a cursor over the mapped JSON text that reads its tokens (numbers, strings,
//! literals) against JSON's grammar, skips values it need not keep, and says where the text
//! is malformed, by JSON path and byte offset.
//!
//! Hand-written because no well-kept crate serves. Measured on 6.4 million floats (121 MB of
//! text, release builds): serde_json's `Value` took 1.2 s and 331 MiB peak, where tjoin takes
//! 39 MiB (benches/README.md `json_parse`: 1.04 s on 106 MB, against 4.61 s and 416 MiB for
//! Python's json.load + numpy.array). A serde visitor streams without a tree (0.60 s), but it
//! hands integers past u64 over as f64 without a word, parses float32 text as f64 first
//! (rounding twice), reports line:column rather than a JSON path, and gives the visitor no
//! read position, so the pages of mapped text behind it could not be released; the checks
//! that the nesting is rectangular and numpy's type inference would still be ours.

use std::borrow::Cow;
use std::io;

use super::MAX_DEPTH;
use crate::messages::excerpt;
use crate::sys::Region;

/// How far the scanner reads between releases of the text's pages behind it: at most twice
/// this stays resident behind the cursor, so that a parse peaks under the text's size plus
/// 16 MiB (a string's copy grows as its text is released).
const RELEASE_STEP: usize = 1 << 20;

/// Why reading stopped.
pub(super) enum Fail {
    /// Text that is not JSON, or is cut short; the message names the JSON path.
    Bad(String),
    /// JSON that holds no tensor tjoin reads (ragged arrays, values numpy would make an
    /// object array of, a tensor object that disagrees with itself); the message names the
    /// JSON path.
    Content(String),
    /// A value that does not fit; the walker prefixes the path.
    Value(String),
    /// Writing the spill file failed.
    Io(io::Error),
}

impl From<io::Error> for Fail {
    fn from(e: io::Error) -> Fail {
        Fail::Io(e)
    }
}

pub(super) type Parsed<T> = std::result::Result<T, Fail>;

/// A scalar as the text holds it.
pub(super) enum Scalar<'a> {
    Number(Number<'a>),
    Str(Cow<'a, str>),
    Bool(bool),
}

impl Number<'_> {
    pub(super) fn as_str(&self) -> &str {
        std::str::from_utf8(self.text).unwrap_or("?")
    }

    /// 1 for true, 0 for false: a boolean as numpy converts it to a number.
    pub(super) fn digit(b: bool) -> Number<'static> {
        Number {
            text: if b { b"1" } else { b"0" },
            int: Some((false, u64::from(b))),
            fraction: false,
        }
    }
}

impl Scalar<'_> {
    pub(super) fn describe(&self) -> String {
        match self {
            Scalar::Number(n) => excerpt(n.as_str()).into_owned(),
            Scalar::Str(s) => format!("the string {}", quoted(s)),
            Scalar::Bool(b) => b.to_string(),
        }
    }
}

/// A string from the text as a message quotes it: in double quotes, escaped, and cut to an
/// excerpt (a string in the text may be megabytes long).
pub(super) fn quoted(s: &str) -> String {
    excerpt(&format!("{s:?}")).into_owned()
}

/// A number as the text holds it.
pub(super) struct Number<'a> {
    /// Its text: ASCII, checked against JSON's grammar.
    text: &'a [u8],
    /// Sign and magnitude, for integers without fraction or exponent that fit 64 bits.
    pub(super) int: Option<(bool, u64)>,
    /// Whether it has a fraction or an exponent.
    pub(super) fraction: bool,
}

/// Where the scanner is in the text.
pub(in crate::format) struct Parser<'a> {
    /// The whole text.
    pub(in crate::format) text: &'a [u8],
    /// Where the next byte is read.
    pub(in crate::format) pos: usize,
    /// The map the text is, whose pages are released behind the cursor; `None` for text
    /// held in memory.
    region: Option<&'a Region>,
    released: usize,
}

impl<'a> Parser<'a> {
    /// A scanner at the start of the mapped text `region`.
    pub(in crate::format) fn new(region: &'a Region) -> Parser<'a> {
        Parser {
            text: region.bytes(),
            pos: 0,
            region: Some(region),
            released: 0,
        }
    }

    /// A scanner at the start of `text`, held in memory.
    pub(in crate::format) fn of_bytes(text: &'a [u8]) -> Parser<'a> {
        Parser {
            text,
            pos: 0,
            region: None,
            released: 0,
        }
    }

    /// Whether the array starting here is a `[re, im]` pair: it opens with a scalar.
    pub(super) fn is_pair(&self) -> bool {
        let rest = self.text.get(self.pos + 1..).unwrap_or_default();
        rest.iter()
            .find(|b| !b" \t\r\n".contains(b))
            .is_some_and(|b| !matches!(b, b'[' | b']'))
    }

    /// A `[re, im]` pair.
    pub(super) fn pair(&mut self) -> std::result::Result<(Scalar<'a>, Scalar<'a>), String> {
        self.pos += 1;
        let re = self.pair_part(b',')?;
        let im = self.pair_part(b']')?;
        Ok((re, im))
    }

    /// One half of a `[re, im]` pair, and the `after` byte that follows it.
    fn pair_part(&mut self, after: u8) -> std::result::Result<Scalar<'a>, String> {
        self.ws();
        let part = self.scalar()?;
        self.ws();
        if self.peek() != Some(after) {
            return Err("a complex value is a pair [re, im]".to_string());
        }
        self.pos += 1;
        Ok(part)
    }

    /// Skips over one value, checking its syntax, without recursion.
    pub(super) fn skip_value(&mut self, here: &str) -> Parsed<()> {
        let mut open: Vec<u8> = Vec::new();
        loop {
            self.ws();
            match self.peek() {
                Some(b'[') | Some(b'{') => {
                    if open.len() >= MAX_DEPTH {
                        return Err(self.content(here, "values are nested more than 64 deep"));
                    }
                    open.push(self.text[self.pos]);
                    self.pos += 1;
                    self.ws();
                    if let Some(b']' | b'}') = self.peek() {
                        // Closed below.
                    } else {
                        if open.last() == Some(&b'{') {
                            self.skip_key(here)?;
                        }
                        continue;
                    }
                }
                Some(b'"') => {
                    self.string().map_err(|m| self.bad(here, &m))?;
                }
                Some(_) => {
                    // A literal or number; `null` is syntax here, refused later if it matters.
                    if self.text[self.pos..].starts_with(b"null") {
                        self.pos += 4;
                    } else {
                        self.scalar().map_err(|m| self.bad(here, &m))?;
                    }
                }
                None => return Err(self.bad(here, "")),
            }
            loop {
                self.ws();
                let Some(&kind) = open.last() else {
                    return Ok(());
                };
                match (kind, self.peek()) {
                    (_, Some(b',')) => {
                        self.pos += 1;
                        if kind == b'{' {
                            self.skip_key(here)?;
                        }
                        break;
                    }
                    (b'[', Some(b']')) | (b'{', Some(b'}')) => {
                        self.pos += 1;
                        open.pop();
                    }
                    (_, None) => return Err(self.bad(here, "")),
                    _ => return Err(self.bad(here, "expected ',' or the end of an array")),
                }
            }
        }
    }

    fn skip_key(&mut self, here: &str) -> Parsed<()> {
        self.ws();
        if self.peek() != Some(b'"') {
            return Err(self.bad(here, "expected a key in double quotes"));
        }
        self.string().map_err(|m| self.bad(here, &m))?;
        self.ws();
        self.expect(b':', here)
    }

    pub(super) fn expect(&mut self, byte: u8, here: &str) -> Parsed<()> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.bad(here, &format!("expected '{}'", byte as char)))
        }
    }

    /// A failure at `here` of JSON that holds no tensor tjoin reads (or, if the text ended
    /// early, of text cut short).
    pub(super) fn content(&self, here: &str, message: &str) -> Fail {
        match self.bad(here, message) {
            Fail::Bad(text) if self.pos < self.text.len() => Fail::Content(text),
            other => other,
        }
    }

    /// What numpy would make an object array of, at a value's place: null, or an object.
    pub(super) fn object_value(&self) -> Option<&'static str> {
        match self.peek() {
            Some(b'n') if self.text[self.pos..].starts_with(b"null") => Some(
                "found null: numpy.array makes an object array of it, which tjoin does not \
                 join (write \"NaN\" for a missing float)",
            ),
            Some(b'{') => Some(
                "found an object where a value belongs: numpy.array makes an object array of \
                 it, which tjoin does not join",
            ),
            _ => None,
        }
    }

    /// A malformed-text failure at `here`; an empty message means the text ended early.
    pub(super) fn bad(&self, here: &str, message: &str) -> Fail {
        if self.pos >= self.text.len() {
            return Fail::Bad(format!(
                "{here}: the text ends after {} bytes, inside the tensor: it is truncated",
                self.text.len()
            ));
        }
        let found = match self.text[self.pos] {
            b if b.is_ascii_graphic() => format!("'{}'", b as char),
            b => format!("byte {b:#04x}"),
        };
        Fail::Bad(format!(
            "{here}: {message} (found {found} at byte {})",
            self.pos
        ))
    }

    #[inline]
    pub(in crate::format) fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.text.get(self.pos) {
            self.pos += 1;
        }
    }

    #[inline]
    pub(in crate::format) fn peek(&self) -> Option<u8> {
        self.text.get(self.pos).copied()
    }

    /// Goes back to `pos`, to read the text from there again.
    pub(super) fn rewind(&mut self, pos: usize) {
        self.pos = pos;
        self.released = self.released.min(pos / RELEASE_STEP * RELEASE_STEP);
    }

    /// Releases the text's pages more than one step behind the cursor.
    pub(in crate::format) fn release_behind(&mut self) {
        while self.pos - self.released >= 2 * RELEASE_STEP {
            if let Some(region) = self.region {
                region.release(self.released, self.released + RELEASE_STEP);
            }
            self.released += RELEASE_STEP;
        }
    }

    /// A number, string or boolean.
    pub(super) fn scalar(&mut self) -> std::result::Result<Scalar<'a>, String> {
        match self.peek() {
            Some(b'-' | b'0'..=b'9') => self.number().map(Scalar::Number),
            Some(b'"') => self.string().map(Scalar::Str),
            Some(b't') if self.text[self.pos..].starts_with(b"true") => {
                self.pos += 4;
                Ok(Scalar::Bool(true))
            }
            Some(b'f') if self.text[self.pos..].starts_with(b"false") => {
                self.pos += 5;
                Ok(Scalar::Bool(false))
            }
            Some(b'n') if self.text[self.pos..].starts_with(b"null") => {
                Err("null is not a tensor value (write \"NaN\" for a missing float)".to_string())
            }
            Some(b'{') => Err("found an object where a value was expected".to_string()),
            Some(b'[') => Err("found an array where a value was expected".to_string()),
            _ => Err("expected a number, string, true or false".to_string()),
        }
    }

    /// A number, checked against JSON's grammar.
    #[inline]
    pub(super) fn number(&mut self) -> std::result::Result<Number<'a>, String> {
        let start = self.pos;
        let text = self.text;
        let negative = text[self.pos] == b'-';
        if negative {
            self.pos += 1;
        }
        let digits = self.digits();
        if digits.is_empty() {
            return Err("a number needs a digit after its sign".to_string());
        }
        if digits.len() > 1 && digits[0] == b'0' {
            return Err("a number has a leading zero".to_string());
        }
        // Up to 19 digits cannot overflow a u64.
        let magnitude = if digits.len() <= 19 {
            Some(
                digits
                    .iter()
                    .fold(0u64, |m, &d| m * 10 + u64::from(d - b'0')),
            )
        } else {
            digits.iter().try_fold(0u64, |m, &d| {
                m.checked_mul(10)?.checked_add(u64::from(d - b'0'))
            })
        };
        let mut fraction = false;
        if text.get(self.pos) == Some(&b'.') {
            self.pos += 1;
            if self.digits().is_empty() {
                return Err("a number needs a digit after its decimal point".to_string());
            }
            fraction = true;
        }
        if let Some(b'e' | b'E') = text.get(self.pos) {
            self.pos += 1;
            if let Some(b'+' | b'-') = text.get(self.pos) {
                self.pos += 1;
            }
            if self.digits().is_empty() {
                return Err("a number needs a digit in its exponent".to_string());
            }
            fraction = true;
        }
        if let Some(b) = text.get(self.pos)
            && (b.is_ascii_alphanumeric() || *b == b'.')
        {
            return Err("a number is followed by stray characters".to_string());
        }
        Ok(Number {
            text: &text[start..self.pos],
            int: magnitude.filter(|_| !fraction).map(|m| (negative, m)),
            fraction,
        })
    }

    /// The digits from here on, skipped.
    #[inline]
    fn digits(&mut self) -> &'a [u8] {
        let text = self.text;
        let start = self.pos;
        let end = text[start..]
            .iter()
            .position(|b| !b.is_ascii_digit())
            .map_or(text.len(), |n| start + n);
        self.pos = end;
        &text[start..end]
    }

    /// A string, unescaped: borrowed from the text when it holds no escape.
    pub(super) fn string(&mut self) -> std::result::Result<Cow<'a, str>, String> {
        let (start, end, decoded) = self.string_end()?;
        if let Some(len) = decoded {
            return self.decode(start, end, len).map(Cow::Owned);
        }
        self.pos = end + 1;
        std::str::from_utf8(&self.text[start..end])
            .map(Cow::Borrowed)
            .map_err(|_| "a string is not valid UTF-8".to_string())
    }

    /// A string, unescaped, as a `String` of its own, copied a step at a time with the text's
    /// pages released behind the copy: the text and its copy are never both resident.
    pub(in crate::format) fn owned_string(&mut self) -> std::result::Result<String, String> {
        let (start, end, decoded) = self.string_end()?;
        if let Some(len) = decoded {
            return self.decode(start, end, len);
        }
        let mut bytes = Vec::with_capacity(end - start);
        self.rewind(start);
        while self.pos < end {
            let step = (end - self.pos).min(RELEASE_STEP);
            bytes.extend_from_slice(&self.text[self.pos..self.pos + step]);
            self.pos += step;
            self.release_behind();
        }
        self.pos = end + 1;
        String::from_utf8(bytes).map_err(|_| "a string is not valid UTF-8".to_string())
    }

    /// Finds the closing quote of the string that starts here, copying nothing (an
    /// unterminated string of 200 MB once cost a copy of 200 MB to refuse) and releasing the
    /// pages behind; returns where its text starts and ends and, when it holds an escape, the
    /// length of its decoded bytes, for the copy to be allocated at its size (address space
    /// too is limited). Escapes are checked when the string is decoded.
    fn string_end(&mut self) -> std::result::Result<(usize, usize, Option<usize>), String> {
        self.pos += 1;
        let start = self.pos;
        let mut decoded = 0usize;
        let mut escaped = false;
        loop {
            let rest = self.text.get(self.pos..).unwrap_or_default();
            let scan = rest.len().min(RELEASE_STEP);
            let Some(at) = rest[..scan]
                .iter()
                .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
            else {
                self.pos += scan;
                decoded += scan;
                if scan == 0 {
                    // The text ends inside the string.
                    return Err(String::new());
                }
                self.release_behind();
                continue;
            };
            self.pos += at;
            decoded += at;
            match rest[at] {
                b'"' => return Ok((start, self.pos, escaped.then_some(decoded))),
                b'\\' => {
                    escaped = true;
                    let (text, bytes) = escape_len(&rest[at..]);
                    self.pos += text;
                    decoded += bytes;
                }
                _ => return Err("a string holds an unescaped control character".into()),
            }
        }
    }

    /// Decodes the escaped string whose text is `[start, end)` into a `String` sized for it
    /// at once, releasing the text's pages behind the cursor as the copy grows.
    fn decode(
        &mut self,
        start: usize,
        end: usize,
        len: usize,
    ) -> std::result::Result<String, String> {
        let mut bytes = Vec::with_capacity(len);
        self.rewind(start);
        while self.pos < end {
            self.release_behind();
            let run = &self.text[self.pos..end.min(self.pos + RELEASE_STEP)];
            let plain = run.iter().position(|&b| b == b'\\').unwrap_or(run.len());
            bytes.extend_from_slice(&run[..plain]);
            self.pos += plain;
            if plain == run.len() {
                continue;
            }
            self.pos += 1;
            let escaped = self.text.get(self.pos).copied().ok_or_else(String::new)?;
            self.pos += 1;
            let c = match escaped {
                b'"' => '"',
                b'\\' => '\\',
                b'/' => '/',
                b'b' => '\u{8}',
                b'f' => '\u{c}',
                b'n' => '\n',
                b'r' => '\r',
                b't' => '\t',
                b'u' => self.unicode_escape()?,
                _ => return Err("a string holds an unknown escape".to_string()),
            };
            let mut utf8 = [0; 4];
            bytes.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
        }
        self.pos = end + 1;
        String::from_utf8(bytes).map_err(|_| "a string is not valid UTF-8".to_string())
    }

    fn unicode_escape(&mut self) -> std::result::Result<char, String> {
        let first = self.hex4()?;
        let code = if (0xd800..0xdc00).contains(&first) {
            if !self.text[self.pos..].starts_with(b"\\u") {
                return Err("a string holds a lone surrogate escape".to_string());
            }
            self.pos += 2;
            let second = self.hex4()?;
            if !(0xdc00..0xe000).contains(&second) {
                return Err("a string holds a lone surrogate escape".to_string());
            }
            0x10000 + ((first - 0xd800) << 10) + (second - 0xdc00)
        } else {
            first
        };
        char::from_u32(code).ok_or_else(|| "a string holds a lone surrogate escape".to_string())
    }

    fn hex4(&mut self) -> std::result::Result<u32, String> {
        if self.text.len() < self.pos + 4 {
            return Err(String::new());
        }
        let value = hex4_at(self.text, self.pos)
            .ok_or_else(|| "a \\u escape needs four hex digits".to_string())?;
        self.pos += 4;
        Ok(value)
    }
}

/// The length in the text of the escape `text` starts with (at its backslash), and of its
/// decoded bytes; an escape that is not valid counts its backslash and next byte, and nothing
/// decoded (decoding refuses it).
fn escape_len(text: &[u8]) -> (usize, usize) {
    let hex = |at: usize| hex4_at(text, at);
    if text.get(1) != Some(&b'u') {
        return (2, 1);
    }
    let Some(code) = hex(2) else {
        return (2, 0);
    };
    if (0xd800..0xdc00).contains(&code) && text[6..].starts_with(b"\\u") && hex(8).is_some() {
        return (12, 4);
    }
    (6, char::from_u32(code).map_or(3, char::len_utf8))
}

/// The four hex digits at `at` in `text` as a number (JSON's `\\uXXXX`), if they are four.
fn hex4_at(text: &[u8], at: usize) -> Option<u32> {
    text.get(at..at.checked_add(4)?)?
        .iter()
        .try_fold(0u32, |n, &b| Some(n << 4 | char::from(b).to_digit(16)?))
}
