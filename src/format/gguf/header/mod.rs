//! The GGUF header, parsed from bytes: `parse_header(bytes, file_len)` either returns the
//! whole header (its keys, each with its encoded bytes, and its tensor infos) or says how many
//! bytes from the start it needs to go on ([`Parsed::Need`]), so one parser serves a file, a
//! fuzzer or any source that reads more when asked. Every count and length is checked
//! against the bytes the file really has before anything is allocated for it, with checked
//! arithmetic; arrays nest at most [`MAX_NESTING`] deep. The encoding back
//! ([`encode_header`]) writes what gguf-py and ggml write, byte for byte.

use std::ops::Range;

use super::types::{GgmlType, ValueType};

/// `GGUF`, the first four bytes of every file.
pub const MAGIC: &[u8; 4] = b"GGUF";
/// The alignment of the data section and of each tensor when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// The key that sets the alignment.
pub const ALIGNMENT_KEY: &str = "general.alignment";
/// The most dimensions a GGUF tensor has (ggml's `GGML_MAX_DIMS`).
pub const MAX_DIMS: u32 = 4;
/// The longest tensor name, in bytes.
pub const MAX_NAME: u64 = 64;
/// The deepest arrays of arrays go.
pub const MAX_NESTING: u32 = 8;
/// The longest header tjoin reads (keys and tensor infos): a vocabulary of a million tokens
/// fits many times over.
pub const MAX_HEADER: u64 = 1 << 30;

/// What [`parse_header`] makes of the bytes it is given.
#[derive(Debug)]
pub enum Parsed {
    /// The header, whole.
    Header(Header),
    /// The header goes on past the bytes given: this many bytes from the start of the file
    /// are needed (never more than the file's length, nor than [`MAX_HEADER`]).
    Need(u64),
}

/// A GGUF file's header: version, keys in the file's order, tensor infos in the file's order.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    /// 2 or 3 (the same layout, little-endian).
    pub version: u32,
    /// The keys and values.
    pub kvs: Vec<Kv>,
    /// The tensors.
    pub tensors: Vec<TensorInfo>,
    /// `general.alignment`, or [`DEFAULT_ALIGNMENT`].
    pub alignment: u64,
    /// Where the tensor infos end.
    pub infos_end: u64,
    /// Where the data section starts: the end of the tensor infos, rounded up to `alignment`.
    pub data_offset: u64,
}

/// One key and its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Kv {
    /// The key (UTF-8).
    pub key: String,
    /// The value's type.
    pub vtype: ValueType,
    /// What the value is, as far as tjoin looks: numbers and strings, or an array's type
    /// and length.
    pub value: Value,
    /// The entry as the file encodes it, the key's length first.
    pub raw: Box<[u8]>,
}

/// A value, as far as tjoin needs to see it.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// An unsigned integer or a bool.
    Unsigned(u64),
    /// A signed integer.
    Signed(i64),
    /// A float.
    Float(f64),
    /// A string.
    Text(String),
    /// An array: its elements' type and how many there are.
    Array(ValueType, u64),
}

/// One tensor's info.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    /// Its name (UTF-8, at most [`MAX_NAME`] bytes).
    pub name: String,
    /// Its dimensions in ggml's order: the first varies fastest, the reverse of numpy's shape.
    pub dims: Vec<u64>,
    /// Its ggml type.
    pub ggml_type: GgmlType,
    /// Where its data starts, from the start of the data section.
    pub offset: u64,
    /// Its data's length in bytes, from type and dimensions.
    pub bytes: u64,
}

impl TensorInfo {
    /// numpy's shape of the tensor: the dimensions reversed.
    pub fn shape(&self) -> Vec<u64> {
        self.dims.iter().rev().copied().collect()
    }
}

impl Header {
    /// The value of `key`, if the header has it.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.kvs.iter().find(|kv| kv.key == key).map(|kv| &kv.value)
    }
}

/// Reads the header of a GGUF file of `file_len` bytes from its first `bytes` (more than the
/// header is fine). `Err` says what is wrong with the file, as a sentence.
pub fn parse_header(bytes: &[u8], file_len: u64) -> Result<Parsed, String> {
    let mut cursor = Cursor {
        bytes,
        at: 0,
        file_len,
    };
    match parse(&mut cursor) {
        Ok(header) => Ok(Parsed::Header(header)),
        Err(Stop::Need(n)) => Ok(Parsed::Need(n)),
        Err(Stop::Bad(why)) => Err(why),
    }
}

enum Stop {
    Need(u64),
    Bad(String),
}

impl From<String> for Stop {
    fn from(why: String) -> Stop {
        Stop::Bad(why)
    }
}

type Step<T> = Result<T, Stop>;

struct Cursor<'b> {
    bytes: &'b [u8],
    at: u64,
    file_len: u64,
}

impl Cursor<'_> {
    /// The bytes the file has after the cursor.
    fn left(&self) -> u64 {
        self.file_len.saturating_sub(self.at)
    }

    /// Takes `n` bytes: refuses them past the file's end or the header's limit, asks for
    /// more when the bytes given end first.
    fn take(&mut self, n: u64, what: &dyn Fn() -> String) -> Step<&[u8]> {
        let end = self.at.checked_add(n).filter(|&end| end <= self.file_len);
        let Some(end) = end else {
            return Err(Stop::Bad(format!(
                "{} needs {n} bytes at byte {}, but the file ends after {} bytes; the file is \
                 truncated",
                what(),
                self.at,
                self.file_len
            )));
        };
        if end > MAX_HEADER {
            return Err(Stop::Bad(format!(
                "{} would make the header longer than {MAX_HEADER} bytes, more than tjoin \
                 reads",
                what()
            )));
        }
        if end > self.bytes.len() as u64 {
            return Err(Stop::Need(end));
        }
        let start = self.at as usize;
        self.at = end;
        Ok(&self.bytes[start..end as usize])
    }

    fn u32(&mut self, what: &dyn Fn() -> String) -> Step<u32> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self, what: &dyn Fn() -> String) -> Step<u64> {
        let b = self.take(8, what)?;
        let mut word = [0u8; 8];
        word.copy_from_slice(b);
        Ok(u64::from_le_bytes(word))
    }

    /// A string: its u64 length, bounded by the file, then its bytes as UTF-8.
    fn text(&mut self, what: &dyn Fn() -> String) -> Step<String> {
        let len = self.u64(what)?;
        let bytes = self.take(len, what)?;
        String::from_utf8(bytes.to_vec())
            .map_err(|_| Stop::Bad(format!("{} is not UTF-8 text", what())))
    }

    /// A value of type `vtype`, nested `depth` arrays deep: decoded when it is a number or
    /// a string, checked and skipped when it is an array.
    fn value(&mut self, vtype: ValueType, depth: u32, what: &dyn Fn() -> String) -> Step<Value> {
        if let Some(size) = vtype.fixed_size() {
            let b = self.take(size, what)?;
            let mut word = [0u8; 8];
            word[..b.len()].copy_from_slice(b);
            let raw = u64::from_le_bytes(word);
            let sign_extended = |bits: u32| ((raw << (64 - bits)) as i64) >> (64 - bits);
            return Ok(match vtype {
                ValueType::Int8 => Value::Signed(sign_extended(8)),
                ValueType::Int16 => Value::Signed(sign_extended(16)),
                ValueType::Int32 => Value::Signed(sign_extended(32)),
                ValueType::Int64 => Value::Signed(raw as i64),
                ValueType::Float32 => Value::Float(f32::from_bits(raw as u32) as f64),
                ValueType::Float64 => Value::Float(f64::from_bits(raw)),
                ValueType::Bool if raw > 1 => {
                    return Err(Stop::Bad(format!("{} is a bool of value {raw}", what())));
                }
                _ => Value::Unsigned(raw),
            });
        }
        match vtype {
            ValueType::String => Ok(Value::Text(self.text(what)?)),
            _ => self.array(depth, what),
        }
    }

    /// An array: its elements' type and count, the count bounded by the bytes left (each
    /// element takes at least its type's least size), then each element.
    fn array(&mut self, depth: u32, what: &dyn Fn() -> String) -> Step<Value> {
        if depth >= MAX_NESTING {
            return Err(Stop::Bad(format!(
                "{} nests arrays more than {MAX_NESTING} deep",
                what()
            )));
        }
        let code = self.u32(what)?;
        let elem = ValueType::from_code(code)
            .ok_or_else(|| format!("{} is an array of unknown value type {code}", what()))?;
        let count = self.u64(what)?;
        let least = count.checked_mul(elem.least_size());
        if least.is_none_or(|least| least > self.left()) {
            return Err(Stop::Bad(format!(
                "{} says it holds {count} elements of {}, more than the {} bytes left in the \
                 file could hold; the file is truncated or damaged",
                what(),
                elem.name(),
                self.left()
            )));
        }
        match elem.fixed_size() {
            Some(size) => {
                if elem == ValueType::Bool {
                    let bytes = self.take(count, what)?;
                    if bytes.iter().any(|&b| b > 1) {
                        return Err(Stop::Bad(format!("{} holds a bool above 1", what())));
                    }
                } else {
                    self.take(count * size, what)?;
                }
            }
            None => {
                for _ in 0..count {
                    self.value(elem, depth + 1, what)?;
                }
            }
        }
        Ok(Value::Array(elem, count))
    }
}

fn parse(c: &mut Cursor<'_>) -> Step<Header> {
    let start = || "the file's first bytes".to_string();
    let magic = c.take(4, &start)?;
    if magic != MAGIC {
        return Err(Stop::Bad(format!(
            "it does not start with `GGUF` but with {:02x?}",
            magic
        )));
    }
    let version = c.u32(&|| "the version".to_string())?;
    match version {
        2 | 3 => {}
        1 => {
            return Err(Stop::Bad(
                "it is GGUF version 1, whose counts are 32-bit; tjoin reads versions 2 and 3 \
                 (convert it with a current llama.cpp)"
                    .to_string(),
            ));
        }
        v if v.swap_bytes() <= 3 => {
            return Err(Stop::Bad(format!(
                "it is a big-endian GGUF file (version {}); tjoin reads little-endian ones",
                v.swap_bytes()
            )));
        }
        v => {
            return Err(Stop::Bad(format!(
                "it is GGUF version {v}; tjoin reads 2 and 3"
            )));
        }
    }
    let n_tensors = c.u64(&|| "the tensor count".to_string())?;
    let n_kv = c.u64(&|| "the key count".to_string())?;
    // A key takes at least 12 bytes (length and type) and a value 1; a tensor info at
    // least 8 + 4 + 4 + 8.
    bounded(n_kv, 13, c.left(), "keys")?;
    bounded(n_tensors, 24, c.left(), "tensors")?;
    let mut kvs: Vec<Kv> = Vec::new();
    for index in 0..n_kv {
        let kv = key_value(c, index)?;
        if kvs.iter().any(|k| k.key == kv.key) {
            return Err(Stop::Bad(format!("it has the key `{}` twice", kv.key)));
        }
        kvs.push(kv);
    }
    let alignment = alignment(&kvs)?;
    let mut tensors: Vec<TensorInfo> = Vec::new();
    let mut names = std::collections::HashSet::new();
    for index in 0..n_tensors {
        let info = tensor_info(c, index, alignment)?;
        if !names.insert(info.name.clone()) {
            return Err(Stop::Bad(format!(
                "it has the tensor `{}` twice",
                info.name
            )));
        }
        tensors.push(info);
    }
    let data_offset =
        c.at.checked_next_multiple_of(alignment)
            .ok_or_else(|| "its data section starts past 2^64".to_string())?;
    Ok(Header {
        version,
        kvs,
        tensors,
        alignment,
        infos_end: c.at,
        data_offset,
    })
}

/// Refuses a count of items that each take at least `least` bytes when `left` bytes cannot
/// hold them.
fn bounded(count: u64, least: u64, left: u64, what: &str) -> Step<()> {
    if count.checked_mul(least).is_none_or(|n| n > left) {
        return Err(Stop::Bad(format!(
            "its header says it has {count} {what}, more than its {left} remaining bytes \
             could hold; the file is truncated or damaged"
        )));
    }
    Ok(())
}

fn key_value(c: &mut Cursor<'_>, index: u64) -> Step<Kv> {
    let start = c.at;
    let key = c.text(&|| format!("key {index}'s name"))?;
    let what = || format!("the value of key `{key}`");
    let code = c.u32(&what)?;
    let vtype = ValueType::from_code(code)
        .ok_or_else(|| format!("key `{key}` has a value of unknown type {code}"))?;
    let value = c.value(vtype, 0, &what)?;
    let raw = c.bytes[start as usize..c.at as usize].into();
    Ok(Kv {
        key,
        vtype,
        value,
        raw,
    })
}

/// `general.alignment`: a u32, a power of two; [`DEFAULT_ALIGNMENT`] when absent.
fn alignment(kvs: &[Kv]) -> Step<u64> {
    let Some(kv) = kvs.iter().find(|kv| kv.key == ALIGNMENT_KEY) else {
        return Ok(DEFAULT_ALIGNMENT);
    };
    match kv.value {
        Value::Unsigned(n) if kv.vtype == ValueType::UInt32 && n.is_power_of_two() => Ok(n),
        _ => Err(Stop::Bad(format!(
            "its `{ALIGNMENT_KEY}` is {:?} of type {}, not a power of two of type uint32",
            kv.value,
            kv.vtype.name()
        ))),
    }
}

fn tensor_info(c: &mut Cursor<'_>, index: u64, alignment: u64) -> Step<TensorInfo> {
    let len_at = c.at;
    let name = c.text(&|| format!("tensor {index}'s name"))?;
    if c.at - len_at - 8 > MAX_NAME {
        return Err(Stop::Bad(format!(
            "tensor {index}'s name is {} bytes long; GGUF names are at most {MAX_NAME}",
            c.at - len_at - 8
        )));
    }
    let what = || format!("tensor `{name}`'s info");
    let n_dims = c.u32(&what)?;
    if n_dims > MAX_DIMS {
        return Err(Stop::Bad(format!(
            "tensor `{name}` has {n_dims} dimensions; GGUF tensors have at most {MAX_DIMS}"
        )));
    }
    let mut dims = Vec::with_capacity(n_dims as usize);
    for _ in 0..n_dims {
        dims.push(c.u64(&what)?);
    }
    let code = c.u32(&what)?;
    let ggml_type = GgmlType::from_code(code)
        .ok_or_else(|| format!("tensor `{name}` has unknown ggml type {code}"))?;
    let offset = c.u64(&what)?;
    if offset % alignment != 0 {
        return Err(Stop::Bad(format!(
            "tensor `{name}`'s data offset {offset} is not a multiple of the alignment \
             {alignment}"
        )));
    }
    let bytes = ggml_type
        .bytes(&dims)
        .map_err(|why| format!("tensor `{name}` ({} {dims:?}): {why}", ggml_type.name()))?;
    Ok(TensorInfo {
        name,
        dims,
        ggml_type,
        offset,
        bytes,
    })
}

/// Encodes a string as GGUF does: its u64 length, then its bytes.
pub fn encode_text(out: &mut Vec<u8>, text: &str) {
    out.extend_from_slice(&(text.len() as u64).to_le_bytes());
    out.extend_from_slice(text.as_bytes());
}

/// Encodes a key with an integer value of type `vtype` (uint16 or int32: the `split.*` keys).
pub fn encode_int_kv(key: &str, vtype: ValueType, value: i64) -> Box<[u8]> {
    let mut out = Vec::new();
    encode_text(&mut out, key);
    out.extend_from_slice(&vtype.code().to_le_bytes());
    let size = vtype.fixed_size().unwrap_or(8) as usize;
    out.extend_from_slice(&value.to_le_bytes()[..size]);
    out.into_boxed_slice()
}

/// A tensor as an output places it: its info, and its data's offset in the data section.
pub struct Placed<'t> {
    /// The tensor.
    pub info: &'t TensorInfo,
    /// Its offset in the output's data section.
    pub offset: u64,
}

/// The header of an output: magic, `version`, counts, the encoded keys `kvs` in order, the
/// tensor infos at their offsets. The zeros up to the data section's alignment are the
/// caller's to write.
pub fn encode_header(version: u32, kvs: &[&[u8]], tensors: &[Placed<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
    out.extend_from_slice(&(kvs.len() as u64).to_le_bytes());
    for kv in kvs {
        out.extend_from_slice(kv);
    }
    for placed in tensors {
        let info = placed.info;
        encode_text(&mut out, &info.name);
        out.extend_from_slice(&(info.dims.len() as u32).to_le_bytes());
        for dim in &info.dims {
            out.extend_from_slice(&dim.to_le_bytes());
        }
        out.extend_from_slice(&info.ggml_type.code().to_le_bytes());
        out.extend_from_slice(&placed.offset.to_le_bytes());
    }
    out
}

/// Where each of `infos` lies in a data section that holds them in order, each padded to
/// `alignment`, and the section's length.
pub fn packed_offsets(infos: &[&TensorInfo], alignment: u64) -> Option<(Vec<u64>, u64)> {
    let mut offsets = Vec::with_capacity(infos.len());
    let mut at = 0u64;
    for info in infos {
        offsets.push(at);
        at = at
            .checked_add(info.bytes)?
            .checked_next_multiple_of(alignment)?;
    }
    Some((offsets, at))
}

/// The byte range of a tensor's data in its file, checked against the file's length.
pub fn data_range(header: &Header, info: &TensorInfo, file_len: u64) -> Result<Range<u64>, String> {
    let start = header.data_offset.checked_add(info.offset);
    let end = start.and_then(|s| s.checked_add(info.bytes));
    match (start, end) {
        (Some(start), Some(end)) if end <= file_len => Ok(start..end),
        _ => Err(format!(
            "tensor `{}`'s {} bytes of data, at offset {} of the data section (which starts at \
             byte {}), run past the end of the file, {file_len} bytes; the file is truncated or \
             damaged",
            info.name, info.bytes, info.offset, header.data_offset
        )),
    }
}

#[cfg(test)]
mod tests;
