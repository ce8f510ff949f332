//! The safetensors format: an 8-byte little-endian header length, a JSON header naming each
//! tensor's dtype, shape and byte range, then the data. <https://github.com/huggingface/safetensors>
//!
//! The header is checked with the rules of the safetensors crate's `read_metadata` and
//! `Metadata::validate` (a 100 MB cap on its length, UTF-8 JSON, byte ranges that tile the
//! data from 0 without gap or overlap, byte counts that match dtype and shape, data ending
//! exactly at the end of the file), plus one the crate does not make: a tensor named twice
//! (the crate keeps the last, silently). Messages name the tensor and the numbers involved.
//! The tests check that the crate refuses every header refused here.
//!
//! Writing follows the crate's `serialize`: tensors sorted by dtype alignment (largest
//! first), then by name; `__metadata__` first in the header; the header padded with spaces
//! to a multiple of 8 bytes. For the same tensors and metadata the file is byte-identical to
//! what `safetensors.torch.save_file` writes (metadata keys are sorted; the crate writes them
//! in hash order).
//!
//! Why not the safetensors crate itself (0.8): `SafeTensors::read_metadata` needs the whole
//! file as one slice, and its `Metadata` read from the header alone keeps a tensor named twice
//! without a word and reports wrong sizes without numbers; `serialize` needs each tensor's data
//! as one slice, where tjoin streams data the copy engine is still producing, and its
//! `__metadata__` key order changed from run to run when measured (a std `HashMap`).

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io;

use serde::de::{Deserializer, MapAccess, Visitor};

use crate::dtype::{ByteOrder, DType, Swaps};
use crate::error::{Error, InputRef, Refusal, Result};
use crate::format::Sink;
use crate::format::json::scan::Parser;
use crate::format::{Contents, Descriptor, Found, Layout, OutTensor, TensorInfo, Writer, Writing};
use crate::messages::excerpt;
use crate::messages::shape_text;
use crate::sys::Region;

/// Hugging Face's safetensors: named tensors behind a JSON header; read and written.
pub const FORMAT: Descriptor = Descriptor {
    name: "safetensors",
    extensions: &[".safetensors"],
    files: "safetensors files",
    // A header length (a little-endian u64 below 2^56) then `{`: JSON text never starts so.
    magic: Some(|head| {
        head.len() >= 9 && head[8] == b'{' && !crate::format::json::looks_like(head)
    }),
    looks_like: None,
    reader: Some(|opened, _, _| read(opened.file, opened.len, opened.name)),
    archive: None,
    writing: Writing::By(|options| {
        Box::new(SafeTensorsWriter {
            metadata: options.metadata.clone(),
        })
    }),
    holds_names: true,
    c_order_only: true,
    reads_in_place: true,
    cannot_grow: Some(
        "a .safetensors header lists every tensor's byte offsets, and the tensors after a \
         grown one would have to move (so would the data, were the header to grow)",
    ),
};

/// The safetensors crate refuses longer headers (`MAX_HEADER_SIZE`).
pub const MAX_HEADER_LEN: u64 = 100_000_000;
/// Headers longer than this are first read for where their data ends (`data_end`).
const PRESCAN_FROM: u64 = 1 << 20;
/// The key of the free-form string map in the header.
pub const METADATA_KEY: &str = "__metadata__";

/// Reads and checks the header of the safetensors file `file` of `file_len` bytes.
pub fn read(file: &File, file_len: u64, input: &InputRef) -> Result<Contents> {
    read_in(file, 0, file_len, input)
}

/// Why [`parse_header`] returned no header.
#[derive(Debug, PartialEq)]
pub enum Parse {
    /// The bytes given are the file's first; it needs this many in all (counted from the
    /// length field's first byte) before it can say more.
    Need(u64),
    /// Not a safetensors header, or one whose entries are refused; the reason says why.
    Malformed(String),
}

/// A checked header, as [`parse_header`] reads it from bytes.
#[derive(Debug)]
pub struct Header {
    /// Where the data starts, counted from the length field's first byte: 8 + the header's
    /// length.
    pub data_start: u64,
    /// The `__metadata__` map, when there is one.
    pub metadata: Option<Vec<(String, String)>>,
    /// In data order.
    tensors: Vec<Entry>,
    /// Where the last tensor's data ends, counted from the start of the data.
    pub end: u64,
}

#[derive(Debug)]
struct Entry {
    name: String,
    dtype: DType,
    shape: Vec<u64>,
    begin: u64,
    end: u64,
}

/// Parses and checks a safetensors header from the first bytes of a file, with no I/O:
/// the header, or how many bytes it needs in all ([`Parse::Need`]), or why it is not one.
/// Checks everything but where the data ends against the file's length ([`check_data_len`]).
/// Its work is bounded by the bytes given: the length field is capped at
/// [`MAX_HEADER_LEN`] before anything more is asked for.
pub fn parse_header(bytes: &[u8]) -> std::result::Result<Header, Parse> {
    let data_start = frame(bytes)?;
    let text = &bytes[8..data_start as usize];
    parse_text(text).map_err(Parse::Malformed)
}

/// Where the data starts in the file whose first bytes are `bytes`: what the 8-byte length
/// field says, once that many bytes are there.
fn frame(bytes: &[u8]) -> std::result::Result<u64, Parse> {
    let Some(&len_field) = bytes.first_chunk::<8>() else {
        return Err(Parse::Need(8));
    };
    let header_len = u64::from_le_bytes(len_field);
    if header_len > MAX_HEADER_LEN {
        return Err(Parse::Malformed(format!(
            "its header length field says {header_len} bytes, more than the {MAX_HEADER_LEN} \
             safetensors allows; the file is damaged or not a safetensors file"
        )));
    }
    let data_start = 8 + header_len;
    if (bytes.len() as u64) < data_start {
        return Err(Parse::Need(data_start));
    }
    Ok(data_start)
}

/// Checks that the header's tensors end where the file's `data_len` bytes of data do (the
/// file's length less the header's).
pub fn check_data_len(header: &Header, data_len: u64) -> std::result::Result<(), String> {
    if header.end == data_len {
        return Ok(());
    }
    Err(ends_where(header.end, data_len))
}

fn ends_where(end: u64, data_len: u64) -> String {
    format!(
        "its tensors' data ends {end} bytes after the header but the file holds {data_len} \
         bytes there; the file is {}",
        if data_len < end {
            "truncated"
        } else {
            "longer than its header says"
        }
    )
}

/// Reads and checks the header of a safetensors file that lies inside `file`, its `file_len`
/// bytes from byte `base` (a `.distcp` file of DCP's SAFETENSORS serialization holds one after
/// the rank's other entries); the tensors' `data_offset` count from the start of `file`.
///
/// The driver of [`parse_header`]'s two steps: the length field read and framed, then the
/// header's text mapped, not copied (its pages belong to the page cache and are released
/// behind the parse), and parsed by the same text parser.
pub fn read_in(file: &File, base: u64, file_len: u64, input: &InputRef) -> Result<Contents> {
    let malformed = |reason: String| Error::Malformed {
        input: input.clone(),
        format: "safetensors",
        reason,
    };
    let mut len_field = [0u8; 8];
    let mut head: &[u8] = &[];
    let data_start = loop {
        match frame(head) {
            Ok(data_start) => break data_start,
            Err(Parse::Malformed(reason)) => return Err(malformed(reason)),
            Err(Parse::Need(needed)) if needed > file_len => {
                return Err(malformed(short(needed, file_len)));
            }
            Err(Parse::Need(8)) => {
                crate::sys::read_exact_at(file, &mut len_field, base)
                    .map_err(|e| input.io_error("read the header of", e))?;
                head = &len_field;
            }
            // The header's text is mapped, not read.
            Err(Parse::Need(data_start)) => break data_start,
        }
    };
    let data_len = file_len - data_start;
    let text = Region::map(file, base + 8, data_start - 8).map_err(|e| input.io_error("map", e))?;
    let header = parse_mapped(&text, data_len).map_err(malformed)?;
    check_data_len(&header, data_len).map_err(malformed)?;
    Ok(contents(header, base + data_start))
}

/// Reads and checks the header of a safetensors file of `file_len` bytes from its first
/// `bytes` (an object read by range): the contents, or how many bytes in all it needs first.
pub fn read_bytes(
    bytes: &[u8],
    file_len: u64,
    input: &InputRef,
) -> Result<std::result::Result<Contents, u64>> {
    let malformed = |reason: String| Error::Malformed {
        input: input.clone(),
        format: "safetensors",
        reason,
    };
    match parse_header(bytes) {
        Ok(header) => {
            check_data_len(&header, file_len - header.data_start).map_err(malformed)?;
            let data_start = header.data_start;
            Ok(Ok(contents(header, data_start)))
        }
        Err(Parse::Need(needed)) if needed > file_len => Err(malformed(short(needed, file_len))),
        Err(Parse::Need(needed)) => Ok(Err(needed)),
        Err(Parse::Malformed(reason)) => Err(malformed(reason)),
    }
}

/// Why a file of `len` bytes is too short for the `needed` bytes its header asks for.
fn short(needed: u64, len: u64) -> String {
    if needed == 8 {
        return format!(
            "it is {len} bytes long, shorter than the 8-byte header length every safetensors \
             file starts with; the file is truncated"
        );
    }
    format!(
        "its header length field says {} bytes but only {} follow it; the file is truncated",
        needed - 8,
        len - 8
    )
}

/// Parses the mapped header text `text` of a file with `data_len` bytes of data.
fn parse_mapped(text: &Region, data_len: u64) -> std::result::Result<Header, String> {
    // Over a large header, a first pass that keeps nothing but where the data ends: a header
    // of a million tensors that do not fit the file is refused without building them. (A
    // small one goes straight to the full parse, whose refusals name the tensor at fault.)
    if text.bytes().len() as u64 > PRESCAN_FROM
        && let Some(end) = data_end(text.bytes())
        && end != data_len
    {
        return Err(ends_where(end, data_len));
    }
    check_utf8(text.bytes())?;
    // The passes above touched every page: the parse reads them in again as it goes, and
    // releases them behind it.
    text.release(0, text.bytes().len());
    let header = parse_entries(Parser::new(text));
    text.release(0, text.bytes().len());
    header
}

/// What a checked header describes, its tensors' data from byte `data_start` of the file.
fn contents(header: Header, data_start: u64) -> Contents {
    let tensors = header
        .tensors
        .into_iter()
        .map(|t| Found {
            name: Some(t.name),
            info: TensorInfo {
                swaps: Swaps::None,
                byte_order: t.dtype.byte_order_or_na(ByteOrder::Little),
                dtype: t.dtype,
                shape: t.shape.into(),
                layout: Layout::C,
                data_offset: data_start + t.begin,
                data_len: t.end - t.begin,
            },
            file: None,
            stored_crc: None,
        })
        .collect();
    Contents {
        tensors,
        metadata: header.metadata,
        notes: Vec::new(),
        left_out: Vec::new(),
        format: None,
        distributed: Vec::new(),
    }
}

/// How long a safetensors file whose first bytes are `head` is ([`crate::format::Extent`]):
/// its header length, header and the data its tensors' offsets reach.
pub fn extent(head: &[u8]) -> crate::format::Extent {
    use crate::format::Extent;
    match frame(head) {
        Err(Parse::Need(needed)) => Extent::Head(needed),
        Err(Parse::Malformed(_)) => Extent::Unreadable,
        Ok(header) => match data_end(&head[8..header as usize]) {
            Some(end) => Extent::Declared(header.saturating_add(end)),
            None => Extent::Unreadable,
        },
    }
}

/// Where the data of the header's tensors ends, the furthest `data_offsets` end, read from
/// the header text in one pass that keeps nothing else; `None` when the text is not an object
/// of objects (the full parse says what is wrong with it).
fn data_end(text: &[u8]) -> Option<u64> {
    let mut deserializer = serde_json::Deserializer::from_slice(text);
    let end = deserializer.deserialize_map(DataEndVisitor).ok()?;
    deserializer.end().ok()?;
    Some(end)
}

/// Parses and checks the header text (everything but the check against the file's length).
fn parse_text(text: &[u8]) -> std::result::Result<Header, String> {
    check_utf8(text)?;
    parse_entries(Parser::of_bytes(text))
}

fn check_utf8(text: &[u8]) -> std::result::Result<(), String> {
    std::str::from_utf8(text)
        .map(|_| ())
        .map_err(|e| format!("its header is not UTF-8: {e}"))
}

/// Parses and checks the UTF-8 header text `p` scans, one entry at a time, releasing the
/// text's pages behind it: a header's text and the strings decoded from it are never both
/// held whole (a 99 MB header with escapes peaked at 148 MiB when parsed by serde_json over
/// the whole map: issue 39, item 8).
fn parse_entries(mut p: Parser) -> std::result::Result<Header, String> {
    let mut metadata = None;
    let mut tensors = Vec::new();
    let mut names = std::collections::HashSet::new();
    p.ws();
    expect(&mut p, b'{', "'{' (a header is a JSON object)")?;
    p.ws();
    if p.peek() == Some(b'}') {
        p.pos += 1;
    } else {
        loop {
            let name = key(&mut p)?;
            if name == METADATA_KEY {
                if metadata.is_some() {
                    return Err(format!("its header names {METADATA_KEY} twice"));
                }
                metadata = Some(parse_metadata(&mut p)?);
            } else if names.contains(name.as_str()) {
                return Err(format!(
                    "its header names tensor `{}` twice",
                    excerpt(&name)
                ));
            } else {
                let (entry, len) = parse_entry(name, &p.text[p.pos..])?;
                p.pos += len;
                names.insert(entry.name.clone());
                tensors.push(entry);
            }
            if !more(&mut p)? {
                break;
            }
        }
    }
    p.ws();
    if p.pos < p.text.len() {
        return Err(syntax(&p, "nothing after the header's object"));
    }
    let end = check_tiling(&mut tensors)?;
    Ok(Header {
        data_start: 8 + p.text.len() as u64,
        metadata,
        tensors,
        end,
    })
}

/// Sorts the entries by their data offsets and checks that they tile the data, as the
/// safetensors crate requires, and that each holds the bytes its shape and type need;
/// returns where the data ends.
fn check_tiling(tensors: &mut [Entry]) -> std::result::Result<u64, String> {
    // The crate sorts by data offsets and then requires them to tile the data.
    tensors.sort_by_key(|t| (t.begin, t.end));
    let mut end = 0u64;
    let mut previous: Option<&Entry> = None;
    for tensor in tensors.iter() {
        let after = || match previous {
            Some(p) => format!("right after tensor `{}`", excerpt(&p.name)),
            None => "at the start of the data".to_string(),
        };
        if tensor.end < tensor.begin {
            return Err(format!(
                "tensor `{}` has data offsets [{}, {}], which end before they begin",
                excerpt(&tensor.name),
                tensor.begin,
                tensor.end
            ));
        }
        if tensor.begin < end {
            return Err(format!(
                "tensor `{}` has data offsets [{}, {}], which overlap tensor `{}` (it ends at \
                 {end})",
                excerpt(&tensor.name),
                tensor.begin,
                tensor.end,
                excerpt(previous.map_or("?", |p| p.name.as_str()))
            ));
        }
        if tensor.begin > end {
            return Err(format!(
                "tensor `{}` has data offsets [{}, {}], leaving {} unused bytes before it; \
                 its data must start at {end}, {}",
                excerpt(&tensor.name),
                tensor.begin,
                tensor.end,
                tensor.begin - end,
                after()
            ));
        }
        let elements = tensor
            .shape
            .iter()
            .try_fold(1u64, |n, &d| n.checked_mul(d))
            .filter(|n| n.checked_mul(tensor.dtype.bits()).is_some())
            .ok_or_else(|| {
                format!(
                    "tensor `{}` has shape {}, which holds more bytes than any file can",
                    excerpt(&tensor.name),
                    shape_text(&tensor.shape)
                )
            })?;
        let Some(bytes) = tensor.dtype.bytes_for(elements) else {
            return Err(format!(
                "tensor `{}` has {elements} elements of {} ({} bits each), which do not fill \
                 a whole number of bytes",
                excerpt(&tensor.name),
                tensor.dtype,
                tensor.dtype.bits()
            ));
        };
        if tensor.end - tensor.begin != bytes {
            return Err(format!(
                "tensor `{}` of shape {} and dtype {} needs {bytes} bytes, but its data \
                 offsets [{}, {}] hold {}",
                excerpt(&tensor.name),
                shape_text(&tensor.shape),
                tensor.dtype.safetensors_name().unwrap_or("?"),
                tensor.begin,
                tensor.end,
                tensor.end - tensor.begin
            ));
        }
        end = tensor.end;
        previous = Some(tensor);
    }
    Ok(end)
}

/// `__metadata__`'s value, scanned by `p`: `null`, or a map of strings to strings, each
/// string copied with its text released behind it. In key order, the last of a key named
/// twice kept, as serde_json's map kept them.
fn parse_metadata(p: &mut Parser) -> std::result::Result<Vec<(String, String)>, String> {
    let wrong = || format!("its {METADATA_KEY} is not a map of strings to strings");
    if p.text[p.pos..].starts_with(b"null") {
        p.pos += 4;
        return Ok(Vec::new());
    }
    if p.peek() != Some(b'{') {
        return Err(wrong());
    }
    p.pos += 1;
    let mut map = BTreeMap::new();
    p.ws();
    if p.peek() == Some(b'}') {
        p.pos += 1;
        return Ok(Vec::new());
    }
    loop {
        let key = key(p)?;
        if p.peek() != Some(b'"') {
            return Err(wrong());
        }
        let value = p.owned_string().map_err(|m| string_error(p, &m))?;
        map.insert(key, value);
        if !more(p)? {
            return Ok(map.into_iter().collect());
        }
    }
}

/// After an object's entry: releases the text behind, and steps over the `,` before another
/// entry (true) or the `}` that ends the object (false).
fn more(p: &mut Parser) -> std::result::Result<bool, String> {
    p.release_behind();
    p.ws();
    let more = p.peek() == Some(b',');
    expect(p, if more { b',' } else { b'}' }, "',' or '}'")?;
    Ok(more)
}

/// An object's key, and the `:` after it.
fn key(p: &mut Parser) -> std::result::Result<String, String> {
    p.ws();
    if p.peek() != Some(b'"') {
        return Err(syntax(p, "a key in double quotes"));
    }
    let key = p.owned_string().map_err(|m| string_error(p, &m))?;
    p.ws();
    expect(p, b':', "':'")?;
    p.ws();
    Ok(key)
}

/// Steps over `byte`, or says what was found instead of `what`.
fn expect(p: &mut Parser, byte: u8, what: &str) -> std::result::Result<(), String> {
    if p.peek() != Some(byte) {
        return Err(syntax(p, what));
    }
    p.pos += 1;
    Ok(())
}

fn not_json(why: &str) -> String {
    format!("its header is not valid JSON: {why}")
}

/// The header's syntax fails where `p` is: `what` was expected there.
fn syntax(p: &Parser, what: &str) -> String {
    match p.peek() {
        None => not_json(&format!(
            "it ends after {} bytes, where {what} belongs",
            p.text.len()
        )),
        Some(b) => {
            let found = match b {
                b if b.is_ascii_graphic() => format!("'{}'", b as char),
                b => format!("byte {b:#04x}"),
            };
            not_json(&format!("expected {what} at byte {}, found {found}", p.pos))
        }
    }
}

/// A string of the header that cannot be read: `message` says why, or is empty when the text
/// ends inside it.
fn string_error(p: &Parser, message: &str) -> String {
    if message.is_empty() {
        not_json(&format!(
            "it ends after {} bytes, inside a string",
            p.text.len()
        ))
    } else {
        not_json(&format!("{message} (at byte {})", p.pos))
    }
}

/// The fields of a tensor's entry that tjoin reads; any other is skipped without being kept.
#[derive(serde::Deserialize)]
struct Fields {
    dtype: Option<serde_json::Value>,
    shape: Option<serde_json::Value>,
    data_offsets: Option<serde_json::Value>,
}

/// The tensor `name`'s entry, whose JSON text starts `text`, and how many bytes of it the
/// entry takes: read in one pass by serde_json, which stops where the value ends.
fn parse_entry(name: String, text: &[u8]) -> std::result::Result<(Entry, usize), String> {
    let wrong = |what: &str| format!("tensor `{}` in its header {what}", excerpt(&name));
    let not_a_map = || wrong("is not a map of dtype, shape and data_offsets");
    if text.first() != Some(&b'{') {
        return Err(not_a_map());
    }
    let mut entries = serde_json::Deserializer::from_slice(text).into_iter::<Fields>();
    let fields = match entries.next() {
        Some(Ok(fields)) => fields,
        Some(Err(e)) if e.is_data() => {
            return Err(wrong(&format!(
                "cannot be read: {}",
                excerpt(&e.to_string())
            )));
        }
        Some(Err(e)) => return Err(not_json(&excerpt(&e.to_string()))),
        None => return Err(not_json("it ends inside an entry")),
    };
    let len = entries.byte_offset();
    let dtype = match &fields.dtype {
        Some(serde_json::Value::String(dtype)) => {
            DType::from_safetensors(dtype).ok_or_else(|| {
                wrong(&format!(
                    "has dtype \"{}\", which safetensors does not define",
                    excerpt(dtype)
                ))
            })?
        }
        _ => return Err(wrong("has no dtype string")),
    };
    let numbers = |key: &str| -> std::result::Result<Vec<u64>, String> {
        let value = match key {
            "shape" => &fields.shape,
            _ => &fields.data_offsets,
        };
        match value {
            Some(serde_json::Value::Array(items)) => items
                .iter()
                .map(|v| v.as_u64().filter(|&n| usize::try_from(n).is_ok()))
                .collect::<Option<Vec<u64>>>()
                .ok_or_else(|| {
                    wrong(&format!(
                        "has a {key} that is not a list of byte counts or sizes"
                    ))
                }),
            _ => Err(wrong(&format!("has no {key} list"))),
        }
    };
    let shape = numbers("shape")?;
    super::check_rank(&shape).map_err(|why| wrong(&why.replacen("its", "has a", 1)))?;
    let (begin, end) = match numbers("data_offsets")?.as_slice() {
        &[begin, end] => (begin, end),
        _ => return Err(wrong("has data_offsets that are not two numbers")),
    };
    let entry = Entry {
        name,
        dtype,
        shape,
        begin,
        end,
    };
    Ok((entry, len))
}

/// The furthest `data_offsets` end of a header's tensors, keeping nothing else; entries that
/// are not tensors or have no such offsets are passed over (the full parse refuses them).
struct DataEndVisitor;

impl<'de> Visitor<'de> for DataEndVisitor {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<u64, A::Error> {
        let mut end = 0;
        while map.next_key::<serde::de::IgnoredAny>()?.is_some() {
            end = end.max(map.next_value::<DataOffsetsEnd>()?.0);
        }
        Ok(end)
    }
}

/// The end of one entry's `data_offsets`, or 0. An entry that is not a map fails the pass.
struct DataOffsetsEnd(u64);

impl<'de> serde::Deserialize<'de> for DataOffsetsEnd {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        deserializer.deserialize_map(DataOffsetsEndVisitor)
    }
}

struct DataOffsetsEndVisitor;

impl<'de> Visitor<'de> for DataOffsetsEndVisitor {
    type Value = DataOffsetsEnd;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a map")
    }

    fn visit_map<A: MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        let mut end = 0;
        while let Some(key) = map.next_key::<KeyIs>()? {
            if key.0 {
                end = map.next_value::<SecondNumber>()?.0;
            } else {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        Ok(DataOffsetsEnd(end))
    }
}

/// The second element of a list when it is a number, else 0; nothing else is kept. A value
/// that is not a list fails the pass.
struct SecondNumber(u64);

impl<'de> serde::Deserialize<'de> for SecondNumber {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        deserializer.deserialize_seq(SecondNumberVisitor)
    }
}

struct SecondNumberVisitor;

impl<'de> Visitor<'de> for SecondNumberVisitor {
    type Value = SecondNumber;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        let first = seq.next_element::<serde::de::IgnoredAny>()?;
        let second = match first {
            Some(_) => seq.next_element::<serde_json::Value>()?,
            None => None,
        };
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(SecondNumber(second.and_then(|v| v.as_u64()).unwrap_or(0)))
    }
}

/// Whether a key is `data_offsets`, read without keeping it.
struct KeyIs(bool);

impl<'de> serde::Deserialize<'de> for KeyIs {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct IsDataOffsets;
        impl<'de> Visitor<'de> for IsDataOffsets {
            type Value = KeyIs;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E>(self, key: &str) -> std::result::Result<KeyIs, E> {
                Ok(KeyIs(key == "data_offsets"))
            }
        }
        deserializer.deserialize_str(IsDataOffsets)
    }
}

/// Writes tensors as the safetensors crate's `serialize` does.
pub struct SafeTensorsWriter {
    /// The `__metadata__` map to write, if any.
    pub metadata: Option<BTreeMap<String, String>>,
}

impl Writer for SafeTensorsWriter {
    fn check(&self, tensors: &[OutTensor]) -> std::result::Result<(), Refusal> {
        let mut problems = Vec::new();
        let mut names = std::collections::HashSet::new();
        for tensor in tensors {
            if tensor.dtype.safetensors_name().is_none() {
                problems.push(format!(
                    "tensor `{}` is {}, a type safetensors has no name for (it holds bool, \
                     integers, floats and complex64 only); write .npy or .npz instead",
                    excerpt(&tensor.name),
                    tensor.dtype
                ));
            }
            if tensor.layout != Layout::C {
                problems.push(format!(
                    "tensor `{}` would be in Fortran order; safetensors holds C order only",
                    excerpt(&tensor.name)
                ));
            }
            if tensor.name == METADATA_KEY {
                problems.push(format!(
                    "a tensor cannot be named {METADATA_KEY}: safetensors reserves it"
                ));
            }
            if !names.insert(&tensor.name) {
                problems.push(format!("two tensors are named `{}`", excerpt(&tensor.name)));
            }
        }
        super::cannot_hold(problems)
    }

    fn order(&self, tensors: &[OutTensor]) -> Vec<usize> {
        let mut order: Vec<usize> = (0..tensors.len()).collect();
        order.sort_by(|&a, &b| {
            let (a, b) = (&tensors[a], &tensors[b]);
            b.dtype
                .safetensors_rank()
                .cmp(&a.dtype.safetensors_rank())
                .then_with(|| a.name.cmp(&b.name))
        });
        order
    }

    fn start(&mut self, sink: &mut dyn Sink, tensors: &[OutTensor]) -> io::Result<()> {
        let header = header(self.metadata.as_ref(), tensors)?;
        sink.write_all(&(header.len() as u64).to_le_bytes())?;
        sink.write_all(&header)
    }

    fn start_tensor(&mut self, _sink: &mut dyn Sink, _tensor: &OutTensor) -> io::Result<()> {
        Ok(())
    }
}

/// The header JSON for `tensors` in this order, padded with spaces to a multiple of 8 bytes.
pub fn header(
    metadata: Option<&BTreeMap<String, String>>,
    tensors: &[OutTensor],
) -> io::Result<Vec<u8>> {
    let json = |s: &str| serde_json::to_string(s).map_err(io::Error::other);
    let mut entries = Vec::with_capacity(tensors.len() + 1);
    if let Some(metadata) = metadata {
        let pairs = metadata
            .iter()
            .map(|(k, v)| Ok(format!("{}:{}", json(k)?, json(v)?)))
            .collect::<io::Result<Vec<String>>>()?;
        entries.push(format!("{}:{{{}}}", json(METADATA_KEY)?, pairs.join(",")));
    }
    let mut offset = 0u64;
    for tensor in tensors {
        let dtype = tensor
            .dtype
            .safetensors_name()
            .ok_or_else(|| io::Error::other(format!("safetensors cannot hold {}", tensor.dtype)))?;
        let shape: Vec<String> = tensor.shape.iter().map(u64::to_string).collect();
        let end = offset + tensor.bytes;
        entries.push(format!(
            "{}:{{\"dtype\":\"{dtype}\",\"shape\":[{}],\"data_offsets\":[{offset},{end}]}}",
            json(&tensor.name)?,
            shape.join(",")
        ));
        offset = end;
    }
    let mut text = format!("{{{}}}", entries.join(",")).into_bytes();
    text.resize(text.len().next_multiple_of(8), b' ');
    Ok(text)
}

#[cfg(test)]
mod tests;
