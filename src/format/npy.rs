//! The .npy format: reading a header (versions 1.0, 2.0, 3.0) and writing one exactly as
//! `numpy.save` does. <https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html>

use std::fs::File;
use std::io::{self, Read};

use crate::dtype::{ByteOrder, DType};
use crate::error::{Error, InputRef, Refusal, Result};
use crate::format::Sink;
use crate::format::{
    Contents, Descriptor, Found, Layout, Opened, OutTensor, TensorInfo, Writer, Writing, byte_count,
};
use crate::messages::excerpt;

/// numpy's .npy: one tensor behind its magic and header; read and written.
pub const FORMAT: Descriptor = Descriptor {
    name: "npy",
    extensions: &[".npy"],
    files: ".npy files",
    magic: Some(|head| head.starts_with(b"\x93NUMPY")),
    looks_like: None,
    reader: Some(|opened, _, _| {
        let Opened {
            file,
            len,
            name,
            head,
        } = opened;
        Ok(Contents {
            tensors: vec![Found {
                name: None,
                info: read_header_from(file, len, name, head)?,
                file: None,
                stored_crc: None,
            }],
            metadata: None,
            notes: Vec::new(),
            left_out: Vec::new(),
            format: None,
            distributed: Vec::new(),
        })
    }),
    archive: None,
    writing: Writing::By(|_| Box::new(NpyWriter)),
    holds_names: false,
    c_order_only: false,
    reads_in_place: true,
    cannot_grow: None,
};

const MAGIC: &[u8; 6] = b"\x93NUMPY";
/// numpy aligns the start of the data to this many bytes.
const ALIGN: usize = 64;
/// numpy leaves room for the growth axis to reach this many digits.
const GROWTH_AXIS_MAX_DIGITS: usize = 21;
/// A header longer than this is refused before it is read: numpy's own writer needs more only
/// for records of tens of thousands of fields (and `numpy.load` refuses headers over 10,000
/// bytes unless told to trust the file), and a lying length field must cost neither memory
/// nor the time of parsing megabytes of Python literal.
pub const MAX_HEADER_LEN: u64 = 1 << 20;

/// Reads and checks the header of the .npy file `file` of `file_len` bytes.
pub fn read_header(file: &File, file_len: u64, input: &InputRef) -> Result<TensorInfo> {
    read_header_from(file, file_len, input, &[])
}

/// Reads the header of which `head` holds the file's first bytes; longer headers read on
/// from the file. A file longer than its header says is refused as an append's unfinished
/// work ([`Error::Unfinished`]): the hint says to wait for the append that holds the file's
/// lock, or, when none does, to run `--recover`.
pub fn read_header_from(
    file: &File,
    file_len: u64,
    input: &InputRef,
    head: &[u8],
) -> Result<TensorInfo> {
    let rest = ReadAt {
        file,
        at: head.len() as u64,
    };
    read_header_within(
        &mut head.chain(rest),
        0,
        file_len,
        input,
        PastEnd::Unfinished,
    )
}

/// Reads the header of the .npy file `file` of `file_len` bytes, taking any bytes after the
/// end of the data it declares as not the tensor's: for `--append` and `--recover`, which
/// look at what an append left behind. The data's end is `data_offset + data_len`.
pub fn read_header_past_end(file: &File, file_len: u64, input: &InputRef) -> Result<TensorInfo> {
    let mut reader = ReadAt { file, at: 0 };
    read_header_within(&mut reader, 0, file_len, input, PastEnd::Allowed)
}

/// Reads the header held whole in `header` (an append journal's record of a file's header),
/// as that of a file long enough for any data it declares: what it declares, its data from
/// `data_offset` (which a well-formed record has at `header.len()`) for `data_len` bytes.
pub fn read_header_bytes(header: &[u8], input: &InputRef) -> Result<TensorInfo> {
    read_header_within(&mut &header[..], 0, u64::MAX, input, PastEnd::Allowed)
}

/// How long a .npy file whose first bytes are `head` is ([`crate::format::Extent`]): its
/// preamble, header and the data its header declares.
pub fn extent(head: &[u8], input: &InputRef) -> crate::format::Extent {
    use crate::format::Extent;
    if !head.starts_with(MAGIC) {
        return Extent::Foreign;
    }
    let (preamble, header_len) = match head.get(6..12) {
        Some(&[1, _, a, b, _, _]) => (10, u64::from(u16::from_le_bytes([a, b]))),
        Some(&[_, _, a, b, c, d]) => (12, u64::from(u32::from_le_bytes([a, b, c, d]))),
        _ => return Extent::Head(12),
    };
    let header = preamble + header_len.min(MAX_HEADER_LEN);
    if (head.len() as u64) < header {
        return Extent::Head(header);
    }
    match read_header_bytes(&head[..header as usize], input) {
        Ok(info) => Extent::Declared(info.data_offset.saturating_add(info.data_len)),
        Err(_) => Extent::Unreadable,
    }
}

/// What a header reader makes of bytes after the end of the data a header declares.
#[derive(Clone, Copy, PartialEq)]
enum PastEnd {
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

/// Reads a file from `at` on with positional reads, leaving its cursor alone.
struct ReadAt<'a> {
    file: &'a File,
    at: u64,
}

impl Read for ReadAt<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = crate::sys::read_at(self.file, buf, self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

/// Reads and checks the header of a .npy file of `file_len` bytes that starts at offset
/// `start` of the file `reader` reads (a member of an .npz archive); `reader` is positioned
/// there. The returned `data_offset` counts from the start of that file.
pub fn read_header_at(
    reader: &mut impl Read,
    start: u64,
    file_len: u64,
    input: &InputRef,
) -> Result<TensorInfo> {
    read_header_within(reader, start, file_len, input, PastEnd::Malformed)
}

/// [`read_header_at`], with `past_end` saying what bytes after the declared data are.
fn read_header_within(
    reader: &mut impl Read,
    start: u64,
    file_len: u64,
    input: &InputRef,
    past_end: PastEnd,
) -> Result<TensorInfo> {
    let malformed = |reason: String| Error::Malformed {
        input: input.clone(),
        format: ".npy",
        reason,
    };
    let mut preamble = [0u8; 12];
    let preamble_len = preamble_len(reader, &mut preamble, file_len).map_err(malformed)?;
    let header_len = match preamble[6] {
        1 => u64::from(u16::from_le_bytes([preamble[8], preamble[9]])),
        _ => u64::from(u32::from_le_bytes([
            preamble[8],
            preamble[9],
            preamble[10],
            preamble[11],
        ])),
    };
    let data_offset = preamble_len + header_len;
    if data_offset > file_len {
        return Err(malformed(format!(
            "its header claims {header_len} bytes but the file has only {} after the preamble",
            file_len - preamble_len
        )));
    }
    if header_len > MAX_HEADER_LEN {
        return Err(malformed(format!(
            "its header length field says {header_len} bytes, more than the {MAX_HEADER_LEN} \
             tjoin reads (numpy writes that much only for records of tens of thousands of \
             fields); the file is damaged or not a .npy file"
        )));
    }
    let mut text = vec![0; header_len as usize];
    reader
        .read_exact(&mut text)
        .map_err(|e| input.io_error("read the header of", e))?;
    let header = parse_header(preamble[6], text).map_err(malformed)?;
    crate::format::check_rank(&header.shape).map_err(malformed)?;
    let stored = DType::from_npy(&header.dtype).map_err(|reason| Error::Unsupported {
        input: input.clone(),
        reason,
    })?;
    let shape = header.shape;
    let declared = byte_count(&shape, stored.dtype.itemsize()).ok_or_else(|| {
        malformed(format!(
            "its shape {shape:?} of {} holds more bytes than any file can",
            stored.dtype
        ))
    })?;
    let present = file_len - data_offset;
    // Standard input was copied whole into a file of tjoin's: no append happened to it.
    let from_stdin = input.is_stdin();
    if present > declared && past_end == PastEnd::Unfinished && !from_stdin {
        return Err(unfinished(input, &shape, data_offset + declared, file_len));
    }
    if declared != present && !(present > declared && past_end == PastEnd::Allowed) {
        return Err(malformed(format!(
            "its header declares shape {} of {} ({declared} bytes of data) but the file holds \
             {present} bytes of data; the file is {}",
            crate::messages::shape_text(&shape),
            stored.dtype,
            if present < declared {
                "truncated"
            } else {
                "longer than its header says"
            }
        )));
    }
    let layout = if header.fortran {
        Layout::Fortran
    } else {
        Layout::C
    };
    Ok(TensorInfo {
        dtype: stored.dtype,
        byte_order: stored.order,
        swaps: stored.swaps,
        shape: shape.into(),
        layout,
        data_offset: start + data_offset,
        data_len: declared,
    })
}

/// Reads the magic and version, leaving `preamble` filled up to the header-length field, and
/// returns the preamble's length (10 for version 1.0, 12 for 2.0 and 3.0).
fn preamble_len(
    reader: &mut impl Read,
    preamble: &mut [u8; 12],
    file_len: u64,
) -> Result<u64, String> {
    if file_len < 10 {
        return Err(format!(
            "it is {file_len} bytes long, shorter than any .npy header"
        ));
    }
    read_or_explain(reader, &mut preamble[..10])?;
    if &preamble[..6] != MAGIC {
        return Err("it does not start with the .npy magic bytes \\x93NUMPY".to_string());
    }
    match (preamble[6], preamble[7]) {
        (1, 0) => Ok(10),
        (2, 0) | (3, 0) if file_len >= 12 => {
            read_or_explain(reader, &mut preamble[10..12])?;
            Ok(12)
        }
        (major, minor) => Err(format!(
            "it declares format version {major}.{minor}; tjoin reads versions 1.0, 2.0 and 3.0"
        )),
    }
}

fn read_or_explain(reader: &mut impl Read, buf: &mut [u8]) -> Result<(), String> {
    reader
        .read_exact(buf)
        .map_err(|e| format!("reading its header failed: {e}"))
}

/// Parses the header text with npyz. Versions 1.0 and 2.0 are latin-1, 3.0 is UTF-8; npyz
/// reads UTF-8 only, so latin-1 text is re-encoded and handed over as version 3.0.
fn parse_header(version: u8, text: Vec<u8>) -> Result<Header, String> {
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
    Ok(Header {
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
fn nesting_depth(text: &[u8]) -> (usize, usize) {
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
fn drop_long_suffixes(text: &str) -> String {
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
struct Header {
    dtype: npyz::DType,
    fortran: bool,
    shape: Vec<u64>,
}

/// Reads the one header form `numpy.save` writes for plain types,
/// `{'descr': '<f4', 'fortran_order': False, 'shape': (16, 64), }` followed by spaces, in
/// a few hundred instructions. Anything else (records, other spacing, Python 2's `2L`) gets
/// `None` and goes to npyz's general Python-literal parser, which costs some 200,000
/// instructions a header: most of the time of a join of many small files.
fn parse_canonical(text: &str) -> Option<Header> {
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
    Some(Header {
        dtype,
        fortran,
        shape,
    })
}

/// Writes one tensor as numpy.save would.
pub struct NpyWriter;

impl Writer for NpyWriter {
    fn check(&self, tensors: &[OutTensor]) -> std::result::Result<(), Refusal> {
        let problem = match tensors {
            [one] => check_dtype(one).err(),
            _ => Some(format!(
                "a .npy file holds one tensor, and this join makes {}",
                tensors.len()
            )),
        };
        super::cannot_hold(problem.into_iter().collect())
    }

    fn start_tensor(&mut self, sink: &mut dyn Sink, tensor: &OutTensor) -> io::Result<()> {
        sink.write_all(&header(&tensor.dtype, &tensor.shape, tensor.layout)?)
    }
}

/// Refuses element types numpy has no `descr` for.
pub fn check_dtype(tensor: &OutTensor) -> std::result::Result<(), String> {
    if tensor.dtype.in_npy() {
        Ok(())
    } else {
        let to = &tensor.dtype;
        let cast = if crate::dtype::cast::castable(to, to) {
            ", or convert it with --cast float32"
        } else {
            ""
        };
        Err(format!(
            "numpy has no {to} type, so .npy and .npz cannot hold it; write .safetensors \
             instead{cast}"
        ))
    }
}

/// The complete header `numpy.save` writes for an array of this type, shape and layout:
/// version 1.0 when it fits, 2.0 when it is too long, 3.0 when it needs UTF-8.
pub fn header(dtype: &DType, shape: &[u64], layout: Layout) -> io::Result<Vec<u8>> {
    let fortran = layout == Layout::Fortran;
    let mut text = format!(
        "{{'descr': {}, 'fortran_order': {}, 'shape': {}, }}",
        dtype.npy_descr(ByteOrder::Little),
        if fortran { "True" } else { "False" },
        crate::dtype::python_tuple(shape),
    );
    let growth_dim = if fortran { shape.last() } else { shape.first() };
    if let Some(dim) = growth_dim {
        let digits = dim.to_string().len();
        text.extend(std::iter::repeat_n(
            ' ',
            GROWTH_AXIS_MAX_DIGITS.saturating_sub(digits),
        ));
    }
    let latin1: Option<Vec<u8>> = text.chars().map(|c| u8::try_from(c as u32).ok()).collect();
    let (major, encoded) = match latin1 {
        Some(bytes) if wrapped_len(10, bytes.len()) <= usize::from(u16::MAX) + 10 => (1, bytes),
        Some(bytes) => (2, bytes),
        None => (3, text.into_bytes()),
    };
    let preamble = if major == 1 { 10 } else { 12 };
    let total = wrapped_len(preamble, encoded.len());
    let header_len = total - preamble;
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[major, 0]);
    if major == 1 {
        out.extend_from_slice(&(header_len as u16).to_le_bytes());
    } else {
        let len = u32::try_from(header_len)
            .map_err(|_| io::Error::other("the .npy header would exceed 4 GiB"))?;
        out.extend_from_slice(&len.to_le_bytes());
    }
    out.extend_from_slice(&encoded);
    out.resize(total - 1, b' ');
    out.push(b'\n');
    Ok(out)
}

/// The header `old` (a whole .npy header: preamble, text, padding and newline) with its
/// shape replaced by `shape` and its padding shortened to keep its length: the header an
/// in-place append writes over the old one, whose data stays where it is. Everything else is
/// kept byte for byte (the type's byte order, the key order, the version). For a header
/// numpy or tjoin wrote, which leaves room for the growth axis to reach 21 digits, it is the
/// header `numpy.save` writes for the new shape. `None` when the new shape does not fit, or
/// the header has no shape tuple where numpy puts it.
pub fn reshaped_header(old: &[u8], shape: &[u64]) -> Option<Vec<u8>> {
    let preamble = match (old.get(..6)?, old.get(6)?) {
        (magic, 1) if magic == MAGIC => 10,
        (magic, 2 | 3) if magic == MAGIC => 12,
        _ => return None,
    };
    let text = old.get(preamble..)?;
    let (start, end) = shape_span(text)?;
    let dict_end = text.iter().rposition(|&b| b == b'}')? + 1;
    let mut new = old[..preamble + start].to_vec();
    new.extend_from_slice(crate::dtype::python_tuple(shape).as_bytes());
    new.extend_from_slice(&text[end..dict_end]);
    if new.len() >= old.len() {
        return None;
    }
    new.resize(old.len() - 1, b' ');
    new.push(b'\n');
    Some(new)
}

/// Where the shape's tuple is in a header's text: the bytes from `(` to `)` of the value of
/// the key `'shape'` in the outer dictionary. Quoted text is skipped (a record's field may be
/// called `shape`); the text is latin-1 or UTF-8, in which no byte of another character is
/// a quote or a bracket.
fn shape_span(text: &[u8]) -> Option<(usize, usize)> {
    let mut depth = 0usize;
    let mut at = 0;
    while at < text.len() {
        match text[at] {
            quote @ (b'\'' | b'"') => {
                let close = at + 1 + text[at + 1..].iter().position(|&b| b == quote)?;
                if depth == 1 && &text[at + 1..close] == b"shape" {
                    let after = |from: usize| {
                        from + text[from..]
                            .iter()
                            .take_while(|b| b.is_ascii_whitespace())
                            .count()
                    };
                    let colon = after(close + 1);
                    let open = after(colon + 1);
                    if text.get(colon) != Some(&b':') || text.get(open) != Some(&b'(') {
                        return None;
                    }
                    let end = open + text[open..].iter().position(|&b| b == b')')? + 1;
                    return Some((open, end));
                }
                at = close;
            }
            b'{' | b'[' | b'(' => depth += 1,
            b'}' | b']' | b')' => depth = depth.saturating_sub(1),
            _ => {}
        }
        at += 1;
    }
    None
}

/// The length of preamble, text, padding and newline, padded as numpy pads: a whole number
/// of `ALIGN` blocks, always with at least one space of padding before the newline.
fn wrapped_len(preamble: usize, text_len: usize) -> usize {
    let unpadded = preamble + text_len + 1;
    unpadded + (ALIGN - unpadded % ALIGN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_matches_numpy_save_byte_for_byte() {
        // np.save(f, np.zeros((1, 1, 2, 7), np.float32)) with numpy 2.4
        let expected = b"\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, \
'shape': (1, 1, 2, 7), }                                                    \
                                       \n";
        let written = header(&DType::Float32, &[1, 1, 2, 7], Layout::C).unwrap();
        assert_eq!(written.len() % ALIGN, 0);
        assert_eq!(
            String::from_utf8_lossy(&written),
            String::from_utf8_lossy(expected)
        );
    }

    #[test]
    fn the_canonical_fast_path_agrees_with_npyz() {
        let general = |text: &str| {
            let mut bytes = b"\x93NUMPY\x03\x00".to_vec();
            bytes.extend_from_slice(&(text.len() as u32).to_le_bytes());
            bytes.extend_from_slice(text.as_bytes());
            let header = npyz::NpyHeader::from_reader(&bytes[..]).unwrap();
            Header {
                dtype: header.dtype(),
                fortran: header.order() == npyz::Order::Fortran,
                shape: header.shape().to_vec(),
            }
        };
        for (dtype, shape, layout) in [
            (DType::Float32, &[16u64, 64][..], Layout::C),
            (DType::Int64, &[5], Layout::Fortran),
            (DType::Bool, &[], Layout::C),
            (
                DType::Unicode(3),
                &[0, 2, 18446744073709551615],
                Layout::Fortran,
            ),
            (
                DType::DateTime64("ns".into()),
                &[1, 2, 3, 4, 5, 6],
                Layout::C,
            ),
        ] {
            let written = header(&dtype, shape, layout).unwrap();
            let text = std::str::from_utf8(&written[10..]).unwrap();
            let fast = parse_canonical(text).expect("numpy's own form takes the fast path");
            assert_eq!(fast, general(text), "{text}");
        }
        for other in [
            "{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (2,), }",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2L,), }",
            "{'fortran_order': False, 'descr': '<f4', 'shape': (2,), }",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2), }",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}",
        ] {
            assert_eq!(parse_canonical(other), None, "{other}");
        }
    }

    #[test]
    fn the_fast_path_reads_what_numpy_writes_and_passes_on_the_rest() {
        // From the pipelines branch, written against its own fast path; main's
        // `parse_canonical` replaced that one and must meet the same expectations.
        let written = header(&DType::Float32, &[1, 1, 2, 7], Layout::C).unwrap();
        let parsed = parse_canonical(std::str::from_utf8(&written[10..]).unwrap()).unwrap();
        assert_eq!(parsed.dtype.descr(), "'<f4'");
        assert_eq!((parsed.shape, parsed.fortran), (vec![1, 1, 2, 7], false));
        let f = "{'descr': '>u2', 'fortran_order': True, 'shape': (5,), }   \n";
        let f = parse_canonical(f).unwrap();
        assert_eq!((f.shape, f.fortran), (vec![5], true));
        let scalar = "{'descr': '|b1', 'fortran_order': False, 'shape': (), } \n";
        assert_eq!(parse_canonical(scalar).unwrap().shape, Vec::<u64>::new());
        // Other key orders, records and odd spacing go to npyz.
        assert!(
            parse_canonical("{'fortran_order': False, 'descr': '<f4', 'shape': (2,), }").is_none()
        );
        assert!(
            parse_canonical("{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (2,), }")
                .is_none()
        );
        assert!(
            parse_canonical("{'descr': '<f4', 'fortran_order': False, 'shape': (5), }").is_none()
        );
    }

    #[test]
    fn python_2_long_suffixes_are_dropped_outside_strings_only() {
        assert_eq!(
            drop_long_suffixes("{'descr': '<i8', 'shape': (2L, 3L), }"),
            "{'descr': '<i8', 'shape': (2, 3), }"
        );
        assert_eq!(
            drop_long_suffixes("[('a1L', '<i4'), (\"b2l\", '<f8')]"),
            "[('a1L', '<i4'), (\"b2l\", '<f8')]"
        );
        assert_eq!(drop_long_suffixes("(12Lx,)"), "(12Lx,)");
    }

    #[test]
    fn deeply_nested_headers_are_refused_before_parsing() {
        // A record whose one field is a record, `levels` deep: a list and a tuple each.
        let nested = |levels: usize| {
            let mut descr = "'<f4'".to_string();
            for _ in 0..levels {
                descr = format!("[('f', {descr})]");
            }
            format!("{{'descr': {descr}, 'fortran_order': False, 'shape': (1,), }}")
        };
        assert_eq!(nesting_depth(nested(4).as_bytes()), (9, 1));
        assert!(parse_header(1, nested(4).into_bytes()).is_ok());
        let refused = parse_header(1, nested(50).into_bytes()).unwrap_err();
        assert!(refused.contains("101 levels deep"), "{refused}");
        assert_eq!(nesting_depth(b"{'a[[[[': '(((('}"), (1, 1));
        assert_eq!(nesting_depth(br#"{'it\'s: {': "a\"{"}"#), (1, 1));
        let dicts = parse_header(1, b"{'descr': {{{{{{{{{".to_vec()).unwrap_err();
        assert!(dicts.contains("holds 10 dictionaries"), "{dicts}");
    }

    #[test]
    fn tjoins_headers_leave_room_for_the_growth_axis_to_reach_21_digits() {
        for (dtype, shape, layout) in [
            (DType::Float32, vec![3u64, 4], Layout::C),
            (DType::Int64, vec![7], Layout::C),
            (DType::Unicode(3), vec![2, 3, 5], Layout::Fortran),
            (DType::Bool, vec![0, 9], Layout::C),
        ] {
            let written = header(&dtype, &shape, layout).unwrap();
            let mut grown = shape.clone();
            let growth = if layout == Layout::C {
                0
            } else {
                shape.len() - 1
            };
            for size in [10, 123_456, u64::MAX] {
                grown[growth] = size;
                // numpy.save's header for the grown shape has the same length...
                let expected = header(&dtype, &grown, layout).unwrap();
                assert_eq!(expected.len(), written.len(), "{dtype} {grown:?}");
                // ...and rewriting the shape in place gives it byte for byte.
                assert_eq!(reshaped_header(&written, &grown), Some(expected));
            }
        }
    }

    #[test]
    fn a_reshaped_header_keeps_everything_but_the_shape() {
        let wrap = |text: &str, pad: usize| {
            let mut out = b"\x93NUMPY\x01\x00".to_vec();
            out.extend_from_slice(&((text.len() + pad + 1) as u16).to_le_bytes());
            out.extend_from_slice(text.as_bytes());
            out.extend(std::iter::repeat_n(b' ', pad));
            out.push(b'\n');
            out
        };
        // Big-endian, another key order, a record field named `shape`, Python 2's `L`.
        let old = "{'shape': (2L, 3L), 'fortran_order': False, 'descr': [('shape', '>i4')]}";
        let new = "{'shape': (12, 3), 'fortran_order': False, 'descr': [('shape', '>i4')]}";
        assert_eq!(reshaped_header(&wrap(old, 6), &[12, 3]), Some(wrap(new, 7)));
        // One space of padding takes one more digit, not two.
        let old = "{'descr': '<f4', 'fortran_order': False, 'shape': (9,), }";
        let fits = "{'descr': '<f4', 'fortran_order': False, 'shape': (10,), }";
        assert_eq!(reshaped_header(&wrap(old, 1), &[10]), Some(wrap(fits, 0)));
        assert_eq!(reshaped_header(&wrap(old, 1), &[100]), None);
        // Not a header, or no shape where numpy puts it.
        assert_eq!(reshaped_header(b"\x93NUMPY\x09\x00", &[1]), None);
        let shapeless = "{'descr': '<f4', 'fortran_order': False, 'dims': (9,), }";
        assert_eq!(reshaped_header(&wrap(shapeless, 9), &[10]), None);
    }

    #[test]
    fn bytes_after_the_data_are_an_unfinished_append_in_a_file_and_damage_in_a_member() {
        let input = InputRef {
            position: 1,
            location: std::path::Path::new("x.npy").into(),
            tensor: None,
        };
        let mut file = header(&DType::UInt8, &[2], Layout::C).unwrap();
        file.extend_from_slice(&[1, 2, 3]);
        let len = file.len() as u64;
        let member = read_header_at(&mut &file[..], 0, len, &input).unwrap_err();
        assert!(matches!(member, Error::Malformed { .. }), "{member}");
        let mut reader = &file[..];
        let whole = read_header_within(&mut reader, 0, len, &input, PastEnd::Unfinished);
        let whole = whole.unwrap_err().to_string();
        assert!(whole.contains("holds 1 bytes after the end"), "{whole}");
        assert!(whole.contains("tjoin --recover x.npy"), "{whole}");
        let mut reader = &file[..];
        let allowed = read_header_within(&mut reader, 0, len, &input, PastEnd::Allowed).unwrap();
        assert_eq!((allowed.data_offset, allowed.data_len), (len - 3, 2));
    }

    #[test]
    fn header_round_trips_through_npyz() {
        let written = header(&DType::Unicode(3), &[5], Layout::Fortran).unwrap();
        let parsed = npyz::NpyHeader::from_reader(&written[..]).unwrap();
        assert_eq!(parsed.shape(), &[5]);
        assert_eq!(parsed.order(), npyz::Order::Fortran);
    }
}
