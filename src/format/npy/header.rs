//! Reading a .npy header: [`parse_header`] parses bytes alone and says how many more it
//! needs; [`read_header`] is its one driver, reading more from any reader as asked, then
//! checking what the header declares against the file's length.

use std::fs::File;
use std::io::{self, Read};

use super::{MAGIC, MAX_HEADER_LEN};
use crate::dtype::DType;
use crate::error::{Error, InputRef, Result};
use crate::format::{Layout, TensorInfo, byte_count};
use crate::messages::excerpt;

/// How long a .npy file whose first bytes are `head` is ([`crate::format::Extent`]): its
/// preamble, header and the data its header declares.
pub fn extent(head: &[u8]) -> crate::format::Extent {
    use crate::format::Extent;
    if !head.starts_with(MAGIC) {
        return Extent::Foreign;
    }
    match parse_header(head) {
        Ok(header) => {
            Extent::Declared(header.info.data_offset.saturating_add(header.info.data_len))
        }
        Err(Parse::Need(needed)) => Extent::Head(needed),
        // Read on to where the header would end, as the reader then says why not.
        Err(Parse::TooLong { preamble, .. }) if (head.len() as u64) < preamble + MAX_HEADER_LEN => {
            Extent::Head(preamble + MAX_HEADER_LEN)
        }
        Err(_) => Extent::Unreadable,
    }
}

/// What a header reader makes of bytes after the end of the data a header declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PastEnd {
    /// The file is damaged (an .npz member holds exactly one array).
    Malformed,
    /// An append did not finish, or is running (a .npy file).
    Unfinished,
    /// They are not the tensor's; the caller knows why they are there.
    Allowed,
}

/// The refusal of a .npy file with bytes after the end of its data: an append that did not
/// finish, or is running (another process holds the file's lock).
fn unfinished(input: &InputRef, shape: &[u64], end: u64, len: u64) -> Error {
    let path = input.location.to_string();
    let hint = if crate::sys::lock_held_elsewhere(input.location.as_path()) {
        "an append to it is running (another process holds its lock): read it again once the \
         append has finished"
            .to_string()
    } else {
        format!(
            "an append to it was interrupted, or the file was damaged: `tjoin --recover {path}` \
             cuts it back to the shape its header declares (numpy.load ignores the extra bytes)"
        )
    };
    Error::Unfinished {
        what: format!(
            "{input} holds {} bytes after the end of the data its .npy header declares (shape \
             {}: its data ends at byte {end}, and the file is {len} bytes long)",
            len - end,
            crate::messages::shape_text(shape)
        ),
        hint,
    }
}

/// A .npy header, parsed from its bytes alone ([`parse_header`]).
pub struct Header {
    /// What it declares; `data_offset` counts from the header's first byte, `data_len` is
    /// the bytes its shape and type declare.
    pub info: TensorInfo,
}

/// Why [`parse_header`] could not give a header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parse {
    /// It needs this many bytes in all, from the header's first.
    Need(u64),
    /// Its length field declares a header of `header_len` bytes after a preamble of
    /// `preamble` bytes, more than [`MAX_HEADER_LEN`].
    TooLong {
        /// The preamble's length (10 or 12).
        preamble: u64,
        /// The header's length, as its field says.
        header_len: u64,
    },
    /// It is not a valid .npy header: why.
    Malformed(String),
    /// It is a valid header of an element type tjoin cannot join: why.
    Unsupported(String),
}

/// Parses the .npy header at the start of `bytes`, a pure function: the header, or how many
/// bytes it needs in all ([`Parse::Need`]), or why it is not one. Checks nothing of the
/// file's length, which the caller knows ([`read_header`]).
pub fn parse_header(bytes: &[u8]) -> std::result::Result<Header, Parse> {
    let Some(preamble) = bytes.get(..10) else {
        return Err(Parse::Need(10));
    };
    if &preamble[..6] != MAGIC {
        let why = "it does not start with the .npy magic bytes \\x93NUMPY";
        return Err(Parse::Malformed(why.to_string()));
    }
    let (preamble, header_len) = match (preamble[6], preamble[7]) {
        (1, 0) => (10, u64::from(u16::from_le_bytes([bytes[8], bytes[9]]))),
        (2, 0) | (3, 0) => match bytes.get(8..12) {
            Some(&[a, b, c, d]) => (12, u64::from(u32::from_le_bytes([a, b, c, d]))),
            _ => return Err(Parse::Need(12)),
        },
        (major, minor) => return Err(Parse::Malformed(version(major, minor))),
    };
    if header_len > MAX_HEADER_LEN {
        return Err(Parse::TooLong {
            preamble,
            header_len,
        });
    }
    let data_offset = preamble + header_len;
    let Some(text) = bytes.get(preamble as usize..data_offset as usize) else {
        return Err(Parse::Need(data_offset));
    };
    let dict = parse_dict(bytes[6], text.to_vec()).map_err(Parse::Malformed)?;
    crate::format::check_rank(&dict.shape).map_err(Parse::Malformed)?;
    let stored = DType::from_npy(&dict.dtype).map_err(Parse::Unsupported)?;
    let shape = dict.shape;
    let declared = byte_count(&shape, stored.dtype.itemsize()).ok_or_else(|| {
        Parse::Malformed(format!(
            "its shape {shape:?} of {} holds more bytes than any file can",
            stored.dtype
        ))
    })?;
    let layout = if dict.fortran {
        Layout::Fortran
    } else {
        Layout::C
    };
    Ok(Header {
        info: TensorInfo {
            dtype: stored.dtype,
            byte_order: stored.order,
            swaps: stored.swaps,
            shape: shape.into(),
            layout,
            data_offset,
            data_len: declared,
        },
    })
}

fn version(major: u8, minor: u8) -> String {
    format!("it declares format version {major}.{minor}; tjoin reads versions 1.0, 2.0 and 3.0")
}

/// Where a .npy header's bytes come from, for [`read_header`]: the first ones already read,
/// then a reader that gives the rest in order, as the parser asks for them.
pub struct HeaderBytes<'a> {
    /// The first bytes, already read (a file's head; a journal's record; none).
    pub head: &'a [u8],
    /// The bytes after `head`, in order (a file read by position, an inflating member).
    pub rest: &'a mut dyn Read,
    /// Where the header starts in the file its data is read from (an .npz member's offset).
    pub start: u64,
    /// How many bytes the .npy file has, from the header's start (`u64::MAX`: as many as
    /// its header declares).
    pub len: u64,
    /// What bytes after the end of its data are.
    pub past_end: PastEnd,
}

/// Reads a file from `at` on with positional reads, leaving its cursor alone.
pub struct ReadAt<'a> {
    /// The file.
    pub file: &'a File,
    /// Where the next read starts.
    pub at: u64,
}

impl Read for ReadAt<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = crate::sys::read_at(self.file, buf, self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

/// Reads and checks a .npy header: the one driver of [`parse_header`], which reads more of
/// `from` while the parser needs more, then checks what it declares against the file's
/// length. A file longer than its header says is refused as `from.past_end` says (an
/// append's unfinished work, a damaged member, or allowed). The returned `data_offset`
/// counts from the start of the file (`from.start` on).
pub fn read_header(from: HeaderBytes, input: &InputRef) -> Result<TensorInfo> {
    let malformed = |reason: String| Error::Malformed {
        input: input.clone(),
        format: ".npy",
        reason,
    };
    let mut read = Vec::new();
    let header = loop {
        let bytes = if read.is_empty() { from.head } else { &read };
        let needed = match parse_header(bytes) {
            Ok(header) => break header,
            Err(Parse::Need(needed)) => needed,
            Err(Parse::Malformed(reason)) => return Err(malformed(reason)),
            Err(Parse::Unsupported(reason)) => {
                let input = input.clone();
                return Err(Error::Unsupported { input, reason });
            }
            Err(Parse::TooLong {
                preamble,
                header_len,
            }) => return Err(malformed(too_long(preamble, header_len, from.len))),
        };
        if needed > from.len {
            return Err(malformed(short(bytes, needed, from.len)));
        }
        if read.is_empty() {
            read.extend_from_slice(from.head);
        }
        let have = read.len();
        read.resize(needed as usize, 0);
        let filled = from.rest.read_exact(&mut read[have..]);
        filled.map_err(|e| match needed {
            // The preamble, as the parser reads it; then the header's text.
            ..=12 => malformed(format!("reading its header failed: {e}")),
            _ => input.io_error("read the header of", e),
        })?;
    };
    check_length(header.info, &from, input)
}

/// Why a .npy file of `len` bytes is too short for the `needed` bytes its header asks for
/// (of which `bytes` holds the first).
fn short(bytes: &[u8], needed: u64, len: u64) -> String {
    match (needed, bytes.get(6..8)) {
        (..=10, _) => format!("it is {len} bytes long, shorter than any .npy header"),
        (12, Some(&[major, minor])) => version(major, minor),
        _ => {
            let preamble = if bytes[6] == 1 { 10 } else { 12 };
            too_long(preamble, needed - preamble, len)
        }
    }
}

/// Why a header of `header_len` bytes after a preamble of `preamble` bytes is not read, in
/// a file of `len` bytes.
fn too_long(preamble: u64, header_len: u64, len: u64) -> String {
    if preamble + header_len > len {
        return format!(
            "its header claims {header_len} bytes but the file has only {} after the preamble",
            len - preamble
        );
    }
    format!(
        "its header length field says {header_len} bytes, more than the {MAX_HEADER_LEN} \
         tjoin reads (numpy writes that much only for records of tens of thousands of \
         fields); the file is damaged or not a .npy file"
    )
}

/// Checks the data `info` declares against the file's length, as `from.past_end` says.
fn check_length(mut info: TensorInfo, from: &HeaderBytes, input: &InputRef) -> Result<TensorInfo> {
    let (data_offset, declared, past_end) = (info.data_offset, info.data_len, from.past_end);
    let present = from.len - data_offset;
    // Standard input was copied whole into a file of tjoin's: no append happened to it.
    let from_stdin = input.is_stdin();
    if present > declared && past_end == PastEnd::Unfinished && !from_stdin {
        let end = data_offset + declared;
        return Err(unfinished(input, &info.shape, end, from.len));
    }
    if declared != present && !(present > declared && past_end == PastEnd::Allowed) {
        return Err(Error::Malformed {
            input: input.clone(),
            format: ".npy",
            reason: format!(
                "its header declares shape {} of {} ({declared} bytes of data) but the file \
                 holds {present} bytes of data; the file is {}",
                crate::messages::shape_text(&info.shape),
                info.dtype,
                if present < declared {
                    "truncated"
                } else {
                    "longer than its header says"
                }
            ),
        });
    }
    info.data_offset += from.start;
    Ok(info)
}

/// Parses the header text with npyz. Versions 1.0 and 2.0 are latin-1, 3.0 is UTF-8; npyz
/// reads UTF-8 only, so latin-1 text is re-encoded and handed over as version 3.0.
pub(super) fn parse_dict(version: u8, text: Vec<u8>) -> Result<Dict, String> {
    if let Some(header) = std::str::from_utf8(&text).ok().and_then(parse_canonical) {
        return Ok(header);
    }
    let utf8 = match version {
        3 => text,
        _ => text
            .iter()
            .map(|&b| b as char)
            .collect::<String>()
            .into_bytes(),
    };
    let utf8 = match String::from_utf8(utf8) {
        Ok(text) => drop_long_suffixes(&text).into_bytes(),
        Err(e) => e.into_bytes(),
    };
    let (depth, dicts) = nesting_depth(&utf8);
    if dicts > 1 {
        // A dictionary costs the parser more at each level than a list (10 took 0.25 s, 5 s
        // under a fuzzer's instrumentation: its find), and numpy writes no dictionary but one.
        return Err(format!(
            "its header holds {dicts} dictionaries; numpy's holds one, of descr, fortran_order \
             and shape"
        ));
    }
    if depth > MAX_NESTING {
        return Err(format!(
            "its header nests brackets {depth} levels deep; numpy writes at most {MAX_NESTING} \
             (records nested four deep), and deeper ones take the Python-literal parser \
             exponential time"
        ));
    }
    let len = u32::try_from(utf8.len()).map_err(|_| "its header is too long".to_string())?;
    let mut bytes = Vec::with_capacity(12 + utf8.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&[3, 0]);
    bytes.extend_from_slice(&len.to_le_bytes());
    bytes.extend_from_slice(&utf8);
    if let Ok(text) = std::str::from_utf8(&utf8) {
        check_keys(text)?;
    }
    let header = npyz::NpyHeader::from_reader(&bytes[..]).map_err(|e| {
        // The parser's message shows the line it stopped in: the whole header, at worst.
        let message = e.to_string();
        let lines: Vec<_> = message.lines().map(excerpt).collect();
        format!("its header cannot be parsed: {}", lines.join("\n"))
    })?;
    Ok(Dict {
        dtype: header.dtype(),
        fortran: header.order() == npyz::Order::Fortran,
        shape: header.shape().to_vec(),
    })
}

/// The keys of a header's dictionary: numpy refuses a header with any other set ("Header does
/// not contain the correct keys").
const KEYS: [&str; 3] = ["descr", "fortran_order", "shape"];

/// Refuses a header whose dictionary has other keys than [`KEYS`], each once: npyz reads the
/// three it needs and ignores the rest. One pass over the text, outside quoted strings.
fn check_keys(text: &str) -> Result<(), String> {
    let body = text.trim_matches(|c: char| c.is_ascii_whitespace());
    let Some(body) = body.strip_prefix('{').and_then(|b| b.strip_suffix('}')) else {
        // Not a dictionary: the parser says what it is.
        return Ok(());
    };
    let (mut depth, mut quote, mut escaped) = (0usize, None, false);
    let (mut item_start, mut key_end) = (0, None);
    let mut keys = Vec::new();
    let mut item = |item: &str, key: Option<&str>| {
        if !item.trim().is_empty() {
            keys.push(key.unwrap_or(item).trim().to_string());
        }
    };
    for (at, c) in body.char_indices() {
        match (quote, c) {
            (Some(_), _) if escaped => escaped = false,
            (Some(_), '\\') => escaped = true,
            (Some(q), _) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '[' | '(' | '{') => depth += 1,
            (None, ']' | ')' | '}') => depth = depth.saturating_sub(1),
            (None, ':') if depth == 0 && key_end.is_none() => key_end = Some(at),
            (None, ',') if depth == 0 => {
                item(
                    &body[item_start..at],
                    key_end.map(|end| &body[item_start..end]),
                );
                (item_start, key_end) = (at + 1, None);
            }
            _ => {}
        }
    }
    item(
        &body[item_start..],
        key_end.map(|end| &body[item_start..end]),
    );
    let unquoted: Vec<&str> = keys
        .iter()
        .map(|k| {
            k.strip_prefix(['\'', '"'])
                .and_then(|k| k.strip_suffix(['\'', '"']))
                .unwrap_or(k)
        })
        .collect();
    let exact = unquoted.len() == KEYS.len() && KEYS.iter().all(|k| unquoted.contains(k));
    if exact {
        return Ok(());
    }
    let listed: Vec<String> = keys
        .iter()
        .take(10)
        .map(|k| excerpt(k).into_owned())
        .collect();
    Err(format!(
        "its header's dictionary has the keys {}{}; numpy requires exactly 'descr', \
         'fortran_order' and 'shape'",
        listed.join(", "),
        if keys.len() > listed.len() {
            ", ..."
        } else {
            ""
        }
    ))
}

/// The deepest bracket nesting a header may have: records nested four deep. npyz's parser
/// takes time exponential in the depth (0.05 s at 12 levels, 15 s at 20: a fuzzer's find).
const MAX_NESTING: usize = 10;

/// How deep `[`, `(` and `{` nest in `text`, outside quoted strings (and their escapes).
/// And how many `{` open a dictionary.
pub(super) fn nesting_depth(text: &[u8]) -> (usize, usize) {
    let (mut depth, mut deepest, mut dicts, mut quote) = (0usize, 0, 0, None);
    let mut escaped = false;
    for &byte in text {
        match (quote, byte) {
            (Some(_), _) if escaped => escaped = false,
            (Some(_), b'\\') => escaped = true,
            (Some(q), _) if byte == q => quote = None,
            (Some(_), _) => {}
            (None, b'\'' | b'"') => quote = Some(byte),
            (None, b'[' | b'(' | b'{') => {
                depth += 1;
                deepest = deepest.max(depth);
                dicts += usize::from(byte == b'{');
            }
            (None, b']' | b')' | b'}') => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    (deepest, dicts)
}

/// Python 2's numpy wrote shapes as `(2L, 3L)`; numpy drops the `L` after a number outside
/// quotes when it reads such a header (`_filter_header`), and so does tjoin.
pub(super) fn drop_long_suffixes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut quote = None;
    let mut previous = ' ';
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => quote = Some(c),
            None if (c == 'L' || c == 'l')
                && previous.is_ascii_digit()
                && !chars
                    .peek()
                    .is_some_and(|n| n.is_alphanumeric() || *n == '_') =>
            {
                previous = c;
                continue;
            }
            None => {}
        }
        out.push(c);
        previous = c;
    }
    out
}

/// What a header's dictionary says.
#[derive(Debug, PartialEq)]
/// What a header's dictionary says.
pub(super) struct Dict {
    pub(super) dtype: npyz::DType,
    pub(super) fortran: bool,
    pub(super) shape: Vec<u64>,
}

/// Reads the one header form `numpy.save` writes for plain types,
/// `{'descr': '<f4', 'fortran_order': False, 'shape': (16, 64), }` followed by spaces, in
/// a few hundred instructions. Anything else (records, other spacing, Python 2's `2L`) gets
/// `None` and goes to npyz's general Python-literal parser, which costs some 200,000
/// instructions a header: most of the time of a join of many small files.
pub(super) fn parse_canonical(text: &str) -> Option<Dict> {
    let rest = text.strip_prefix("{'descr': '")?;
    let (descr, rest) = rest.split_once('\'')?;
    let rest = rest.strip_prefix(", 'fortran_order': ")?;
    let (fortran, rest) = if let Some(rest) = rest.strip_prefix("False") {
        (false, rest)
    } else {
        (true, rest.strip_prefix("True")?)
    };
    let rest = rest.strip_prefix(", 'shape': (")?;
    let (dims, rest) = rest.split_once(')')?;
    if rest.trim_end_matches([' ', '\n']) != ", }" {
        return None;
    }
    let shape = match dims.strip_suffix(',') {
        Some(single) => vec![single.parse().ok()?],
        None if dims.is_empty() => Vec::new(),
        None => dims
            .split(", ")
            .map(|dim| dim.parse().ok())
            .collect::<Option<Vec<u64>>>()?,
    };
    if shape.len() == 1 && !dims.ends_with(',') {
        return None;
    }
    let dtype = npyz::DType::Plain(descr.parse().ok()?);
    Some(Dict {
        dtype,
        fortran,
        shape,
    })
}
