//! JSON tensors: reading a JSON input into the spill file, and the output forms
//! (`JsonForm`, `JsonWriter`).
//!
//! Reading (`read` over a mapped file, `read_text` over bytes: JSON is data, not a header, so
//! its entry from bytes takes the whole text and converts it): nested arrays of numbers,
//! booleans or strings, or a tensor object
//! `{"dtype": "float32", "shape": [2, 3], "data": [...]}` (data nested or flat), converted
//! element by element into little-endian C-order data in the spill file by a hand-written
//! scanner over the mapped text (`scan`). Nothing is held in memory but a write buffer.
//! Nesting is walked with an explicit stack, so depth costs no recursion; more than
//! `MAX_DEPTH` is refused. This module reads the two forms and the nesting; `infer` turns
//! each value into an element, of the stated type or of the one numpy would infer (an array
//! whose type changes in a way the elements written cannot follow, as a string tensor's
//! width, known only at the end, is read a second time).
//!
//! Text that is not JSON or is cut short is `Malformed` (exit 1, with a hint that the file
//! may be damaged); JSON that holds no tensor (ragged arrays, what numpy would make an
//! object array of, a tensor object at odds with itself) is `Unsupported` (exit 2).
//!
//! Writing (`write`): a `Writer` whose data sink turns whole little-endian elements into text
//! as the copy engine streams them. Floats are printed shortest-round-trip, NaN and
//! infinities as the strings "NaN", "Infinity", "-Infinity", complex numbers as `[re, im]`,
//! so that every value reads back exactly.

mod infer;
pub(super) mod scan;
mod write;

pub use write::JsonWriter;

use std::fs::File;

use crate::dtype::{ByteOrder, DType};
use crate::error::{Error, InputRef, Result};
use crate::format::{Contents, Descriptor, Found, Layout, TensorInfo, Writing, byte_count};
use crate::messages::excerpt;
use crate::sys::Region;
use crate::sys::spill::{Spill, SpillWriter};
use infer::{Finished, Inferred, Leaves, Typed};
use scan::{Fail, Parsed, Parser, quoted};

/// JSON text: nested arrays, or an object with dtype, shape and data; converted into the
/// spill file as it is read, and written.
pub const FORMAT: Descriptor = Descriptor {
    name: "json",
    extensions: &[".json"],
    files: "JSON texts",
    magic: None,
    looks_like: Some(looks_like),
    reader: Some(|opened, _, spill| read(opened.file, opened.len, opened.name, spill)),
    archive: None,
    writing: Writing::By(|options| Box::new(JsonWriter::new(options.json_form))),
    holds_names: false,
    c_order_only: true,
    reads_in_place: false,
    cannot_grow: Some("JSON text closes its brackets at its end"),
};

/// Whether a file's first bytes look like JSON text: a bracket or brace after white space,
/// and no zero byte where a safetensors header length would have one (text has none).
pub fn looks_like(head: &[u8]) -> bool {
    let start = &head[..head.len().min(64)];
    start
        .iter()
        .find(|b| !b" \t\r\n".contains(b))
        .is_some_and(|b| matches!(b, b'[' | b'{'))
        && !start[..start.len().min(9)].contains(&0)
}

/// How a JSON output is shaped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum JsonForm {
    /// `[[1, 2], [3, 4]]`: the data as nested arrays.
    #[default]
    Nested,
    /// `{"dtype": "int64", "shape": [2, 2], "data": [[1, 2], [3, 4]]}`.
    Object,
}

/// The deepest nesting read; deeper text is refused (a tensor of rank 64 is already absurd).
pub const MAX_DEPTH: usize = 64;

/// Reads the JSON tensor in `file` (of `len` bytes) into `spill`: its one tensor, whose data
/// is in the spill file. The text is mapped, its pages released behind the scanner.
pub fn read(file: &File, len: u64, input: &InputRef, spill: &mut Spill) -> Result<Contents> {
    let region = Region::map(file, 0, len).map_err(|e| input.io_error("map", e))?;
    read_parsed(Parser::new(&region), input, spill)
}

/// Reads the JSON tensor whose whole text is `text` into `spill`: the entry from bytes (a
/// JSON input is data, not a header before data: it is converted whole, and its text is
/// read whole, as [`read`] maps it).
pub fn read_text(text: &[u8], input: &InputRef, spill: &mut Spill) -> Result<Contents> {
    read_parsed(Parser::of_bytes(text), input, spill)
}

/// Reads the one tensor of the text `parser` scans into `spill`.
fn read_parsed(mut parser: Parser, input: &InputRef, spill: &mut Spill) -> Result<Contents> {
    let mut out = spill.writer(input)?;
    let (dtype, shape) = parser.tensor(&mut out).map_err(|fail| match fail {
        Fail::Io(e) => input.io_error("make a temporary copy of", e),
        Fail::Bad(reason) => Error::Malformed {
            input: input.clone(),
            format: "JSON",
            reason,
        },
        // Well-formed JSON that numpy would not make one typed array of either: no hint
        // about damage.
        Fail::Content(reason) | Fail::Value(reason) => Error::Unsupported {
            input: input.clone(),
            reason,
        },
    })?;
    let (data_offset, data_len) = out
        .finish()
        .map_err(|e| input.io_error("make a temporary copy of", e))?;
    debug_assert_eq!(byte_count(&shape, dtype.itemsize()), Some(data_len));
    let info = TensorInfo {
        byte_order: dtype.byte_order_or_na(ByteOrder::Little),
        dtype,
        swaps: Default::default(),
        shape: shape.into(),
        layout: Layout::C,
        data_offset,
        data_len,
    };
    Ok(Contents {
        tensors: vec![Found {
            name: None,
            info,
            file: Some(crate::format::OwnData::File(spill.file(input)?)),
            stored_crc: None,
        }],
        metadata: None,
        notes: Vec::new(),
        left_out: Vec::new(),
        format: None,
        distributed: Vec::new(),
    })
}

/// `$[1][2]`: a JSON path from `prefix` through the open arrays' indexes.
fn path(prefix: &str, stack: &[u64]) -> String {
    let mut path = prefix.to_string();
    for index in stack {
        path.push_str(&format!("[{index}]"));
    }
    path
}

impl Parser<'_> {
    fn tensor(&mut self, out: &mut SpillWriter<'_>) -> Parsed<(DType, Vec<u64>)> {
        self.ws();
        let read = match self.peek() {
            Some(b'{') => self.object(out)?,
            Some(b'[') => self.inferred("$", out, None)?,
            Some(_) => {
                return Err(self.bad(
                    "$",
                    "expected an array (nested for each dimension) or a tensor object \
                     {\"dtype\": ..., \"shape\": ..., \"data\": ...}",
                ));
            }
            None => return Err(Fail::Bad("$: the text is empty".to_string())),
        };
        self.ws();
        if self.pos < self.text.len() {
            return Err(self.bad("$", "more text follows the tensor"));
        }
        Ok(read)
    }

    /// The tensor object form. `data` is read once `dtype` and `shape` are known: in place
    /// when they come first, else skipped and read again afterwards.
    fn object(&mut self, out: &mut SpillWriter<'_>) -> Parsed<(DType, Vec<u64>)> {
        self.pos += 1;
        let mut dtype: Option<DType> = None;
        let mut shape: Option<Vec<u64>> = None;
        let mut data: Option<(DType, Vec<u64>)> = None;
        let mut data_at = None;
        let mut seen: Vec<String> = Vec::new();
        self.ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
        } else {
            loop {
                self.ws();
                if self.peek() != Some(b'"') {
                    return Err(self.bad("$", "expected a key in double quotes"));
                }
                let key = self.string().map_err(|m| self.bad("$", &m))?.into_owned();
                let here = format!("$.{}", excerpt(&key));
                if seen.contains(&key) {
                    return Err(self.content(&here, "the key appears twice"));
                }
                seen.push(key.clone());
                self.ws();
                self.expect(b':', &here)?;
                self.ws();
                match key.as_str() {
                    "dtype" => dtype = Some(self.dtype_value()?),
                    "shape" => shape = Some(self.shape_value()?),
                    "data" if dtype.is_some() && shape.is_some() => {
                        let stated = dtype.clone().expect("checked");
                        data = Some(self.data(out, Some(stated), shape.as_deref())?);
                    }
                    "data" => {
                        data_at = Some(self.pos);
                        self.skip_value("$.data")?;
                    }
                    _ => {
                        return Err(self.content(
                            &here,
                            "unknown key: a tensor object has the keys \"dtype\", \"shape\" \
                             and \"data\"",
                        ));
                    }
                }
                self.ws();
                match self.peek() {
                    Some(b',') => self.pos += 1,
                    Some(b'}') => {
                        self.pos += 1;
                        break;
                    }
                    _ => return Err(self.bad("$", "expected ',' or '}' in the tensor object")),
                }
            }
        }
        let (dtype, read_shape) = match (data, data_at) {
            (Some(read), _) => read,
            (None, Some(at)) => {
                let end = self.pos;
                self.pos = at;
                let read = self.data(out, dtype, shape.as_deref())?;
                self.pos = end;
                read
            }
            (None, None) => {
                return Err(Fail::Content(
                    "$: the tensor object has no \"data\" key".to_string(),
                ));
            }
        };
        Ok((dtype, shape.unwrap_or(read_shape)))
    }

    /// The value of `"data"`, nested to `shape` or flat, of type `dtype` or inferred.
    fn data(
        &mut self,
        out: &mut SpillWriter<'_>,
        dtype: Option<DType>,
        shape: Option<&[u64]>,
    ) -> Parsed<(DType, Vec<u64>)> {
        let complex = matches!(dtype, Some(DType::Complex64 | DType::Complex128));
        // Flat data for a shape of rank 2 or more: one array of all the elements.
        let flat = shape.filter(|s| s.len() >= 2).and_then(|s| {
            (self.leading_depth(complex) == 1).then(|| vec![s.iter().product::<u64>()])
        });
        let expected = flat.as_deref().or(shape);
        let read_shape = match dtype {
            Some(dtype) => {
                let mut leaves = Typed {
                    out,
                    dtype,
                    coerce: false,
                };
                let read_shape = self.walk("$.data", &mut leaves, expected, complex)?;
                (leaves.dtype, read_shape)
            }
            None => self.inferred("$.data", out, expected)?,
        };
        Ok(read_shape)
    }

    /// Reads an array whose element type is inferred as numpy infers it, and reads it a
    /// second time when the elements written on the way could not follow the type.
    fn inferred(
        &mut self,
        prefix: &str,
        out: &mut SpillWriter<'_>,
        expected: Option<&[u64]>,
    ) -> Parsed<(DType, Vec<u64>)> {
        let start = self.pos;
        let mut leaves = Inferred::new(out);
        let shape = self.walk(prefix, &mut leaves, expected, false)?;
        match leaves.finish() {
            Finished::Written(dtype) => Ok((dtype, shape)),
            Finished::ReadAgain(dtype) => {
                let end = self.pos;
                self.rewind(start);
                out.restart();
                let mut leaves = Typed {
                    out,
                    dtype,
                    coerce: true,
                };
                self.walk(prefix, &mut leaves, expected, false)?;
                self.pos = end;
                Ok((leaves.dtype, shape))
            }
        }
    }

    /// The rank the data's first element shows: how many arrays open before it.
    fn leading_depth(&self, complex: bool) -> usize {
        let mut depth = 0;
        let mut at = self.pos;
        while let Some(&b) = self.text.get(at) {
            match b {
                b'[' => depth += 1,
                b' ' | b'\t' | b'\n' | b'\r' => {}
                b']' => return depth,
                _ if complex => return depth.saturating_sub(1),
                _ => return depth,
            }
            at += 1;
        }
        depth
    }

    fn dtype_value(&mut self) -> Parsed<DType> {
        if self.peek() != Some(b'"') {
            return Err(self.content("$.dtype", "expected the element type's name as a string"));
        }
        let name = self.string().map_err(|m| self.bad("$.dtype", &m))?;
        let dtype = DType::from_name(&name).ok_or_else(|| {
            Fail::Content(format!(
                "$.dtype: unknown element type {}; JSON tensors hold bool, int8..int64, \
                 uint8..uint64, float16, bfloat16, float32, float64, complex64, complex128, \
                 datetime64[unit], timedelta64[unit], S<n> and U<n>",
                quoted(&name)
            ))
        })?;
        if let Some(why) = unsupported(&dtype) {
            return Err(Fail::Content(format!("$.dtype: {why}")));
        }
        Ok(dtype)
    }

    fn shape_value(&mut self) -> Parsed<Vec<u64>> {
        self.expect(b'[', "$.shape")?;
        let mut shape = Vec::new();
        self.ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(shape);
        }
        loop {
            self.ws();
            let here = format!("$.shape[{}]", shape.len());
            let dim = match self.peek() {
                Some(b'-' | b'0'..=b'9') => self.number().map_err(|m| self.bad(&here, &m))?,
                _ => return Err(self.content(&here, "expected a dimension (a whole number)")),
            };
            match dim.int {
                Some((false, size)) if !dim.fraction => shape.push(size),
                _ => {
                    return Err(Fail::Content(format!(
                        "{here}: {} is not a dimension (a whole number, 0 or more)",
                        excerpt(dim.as_str())
                    )));
                }
            }
            if shape.len() > MAX_DEPTH {
                return Err(self.content("$.shape", "more than 64 dimensions"));
            }
            self.ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(shape);
                }
                _ => return Err(self.bad("$.shape", "expected ',' or ']'")),
            }
        }
    }

    /// Reads the value at `stack` inside the tensor `prefix` names (a `[re, im]` pair when
    /// `complex`), handing it to `leaves`.
    fn leaf(
        &mut self,
        prefix: &str,
        stack: &[u64],
        leaves: &mut dyn Leaves,
        complex: bool,
    ) -> Parsed<()> {
        let locate = |fail: Fail| match fail {
            Fail::Value(message) => Fail::Content(format!("{}: {message}", path(prefix, stack))),
            other => other,
        };
        if complex && self.peek() == Some(b'[') {
            let (re, im) = self
                .pair()
                .map_err(|m| self.content(&path(prefix, stack), &m))?;
            return leaves.pair(re, im).map_err(locate);
        }
        if let Some(why) = self.object_value() {
            return Err(self.content(&path(prefix, stack), why));
        }
        let value = self
            .scalar()
            .map_err(|m| self.bad(&path(prefix, stack), &m))?;
        leaves.value(value).map_err(locate)
    }

    /// Walks an array nested to the tensor's rank (or a lone scalar, for rank 0), handing
    /// each element to `leaves` in C order, and returns the shape. With `expected`, the
    /// nesting must match it; without, it must be rectangular.
    fn walk(
        &mut self,
        prefix: &str,
        leaves: &mut dyn Leaves,
        expected: Option<&[u64]>,
        complex: bool,
    ) -> Parsed<Vec<u64>> {
        let stated = expected.is_some();
        let mut shape: Vec<Option<u64>> = expected
            .map(|e| e.iter().copied().map(Some).collect())
            .unwrap_or_default();
        let mut rank = expected.map(<[u64]>::len);
        let mut stack: Vec<u64> = Vec::new();
        'value: loop {
            self.ws();
            let opens_array = self.peek() == Some(b'[') && !(complex && self.is_pair());
            if opens_array {
                let depth = stack.len() + 1;
                if depth > MAX_DEPTH {
                    return Err(
                        self.content(&path(prefix, &stack), "arrays are nested more than 64 deep")
                    );
                }
                if rank.is_some_and(|r| depth > r) {
                    let why = if stated {
                        "found an array where the shape has an element"
                    } else {
                        "found an array where the earlier rows have a value: the arrays are \
                         ragged"
                    };
                    return Err(self.content(&path(prefix, &stack), why));
                }
                self.pos += 1;
                stack.push(0);
                if shape.len() < depth {
                    shape.push(None);
                }
                self.ws();
                if self.peek() != Some(b']') {
                    continue 'value;
                }
                // An empty array: a dimension of size 0, and the tensor's last dimension.
                self.pos += 1;
                let rank = *rank.get_or_insert(depth);
                stack.pop();
                if depth != rank {
                    let message = "found an empty array where the earlier rows are nested \
                                   deeper: the arrays are ragged";
                    return Err(Fail::Content(format!(
                        "{}: {message}",
                        path(prefix, &stack)
                    )));
                }
                self.close_dim(prefix, &stack, &mut shape, depth - 1, 0, stated)?;
            } else {
                if rank.is_some_and(|r| r != stack.len()) {
                    let why = if stated {
                        "found a value where the shape has another dimension"
                    } else {
                        "found a value where the earlier rows have an array: the arrays are \
                         ragged"
                    };
                    return Err(self.content(&path(prefix, &stack), why));
                }
                rank.get_or_insert(stack.len());
                self.leaf(prefix, &stack, leaves, complex)?;
                if stack.is_empty() {
                    return Ok(Vec::new());
                }
            }
            // After a value: a comma and the next, or the end of one or more arrays.
            loop {
                self.ws();
                let Some(depth) = stack.len().checked_sub(1) else {
                    return Ok(shape.into_iter().map(|d| d.unwrap_or(0)).collect());
                };
                match self.peek() {
                    Some(b',') => {
                        self.pos += 1;
                        stack[depth] += 1;
                        if let Some(size) = shape[depth]
                            && stack[depth] >= size
                        {
                            let why = if stated {
                                format!("one element too many: the shape says {size}")
                            } else {
                                format!(
                                    "one element too many: the earlier arrays at this depth \
                                     have {size}; the arrays are ragged"
                                )
                            };
                            return Err(self.content(&path(prefix, &stack), &why));
                        }
                        self.release_behind();
                        continue 'value;
                    }
                    Some(b']') => {
                        self.pos += 1;
                        let count = stack.pop().unwrap_or(0) + 1;
                        self.close_dim(prefix, &stack, &mut shape, depth, count, stated)?;
                    }
                    Some(_) => {
                        return Err(self.bad(&path(prefix, &stack), "expected ',' or ']'"));
                    }
                    None => return Err(self.bad(&path(prefix, &stack), "")),
                }
            }
        }
    }

    /// Checks that the array just closed at `depth` (now at `stack`'s end) has as many
    /// elements as the others at its depth.
    fn close_dim(
        &self,
        prefix: &str,
        stack: &[u64],
        shape: &mut [Option<u64>],
        depth: usize,
        count: u64,
        stated: bool,
    ) -> Parsed<()> {
        match shape[depth] {
            None => shape[depth] = Some(count),
            Some(size) if size != count => {
                let why = if stated {
                    format!("has {count} elements where the shape says {size}")
                } else {
                    format!(
                        "has {count} elements where the earlier arrays at this depth have \
                         {size}: the arrays are ragged"
                    )
                };
                return Err(Fail::Content(format!("{}: {why}", path(prefix, stack))));
            }
            Some(_) => {}
        }
        Ok(())
    }
}

/// Element types JSON cannot carry exactly, with the reason.
fn unsupported(dtype: &DType) -> Option<String> {
    match dtype {
        DType::Float128 | DType::Complex256 => Some(format!(
            "{dtype} (x87 extended precision) has no exact decimal form tjoin prints; convert \
             it to float64/complex128 first"
        )),
        DType::Void(_) | DType::Record(_) => Some(format!(
            "{dtype} elements are raw bytes or records, which JSON tensors do not hold"
        )),
        small if small.is_small_float() => Some(format!(
            "{dtype} has no decimal form tjoin reads or writes; keep it in .safetensors"
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    /// numpy's answers, computed by `fixtures/make_json_dtypes.py` and committed.
    const NUMPY: &str = include_str!("../../../fixtures/json/numpy_dtypes.tsv");

    /// Where tjoin departs from numpy on purpose: "NaN", "Infinity" and "-Infinity" are its
    /// JSON form of those floats (so that its JSON output reads back exactly), unless other
    /// strings make a string tensor.
    const SPECIAL_FLOATS: &[(&str, &str, &str)] =
        &[("[1.5, \"NaN\"]", "<f8", "[\"1.5\", \"nan\"]")];

    /// The tensor tjoin reads from `text`: its numpy descr and its elements as numpy's `str`
    /// writes them.
    fn read_text(text: &str) -> Result<(String, Vec<String>)> {
        let mut file = tempfile::tempfile().expect("a temporary file");
        file.write_all(text.as_bytes()).expect("written");
        let input = InputRef {
            position: 1,
            location: std::path::Path::new("t.json").into(),
            tensor: None,
        };
        let mut spill = Spill::default();
        let contents = read(&file, text.len() as u64, &input, &mut spill)?;
        let found = &contents.tensors[0];
        let info = &found.info;
        let mut data = vec![0u8; info.data_len as usize];
        let Some(crate::format::OwnData::File(file)) = found.file.as_ref() else {
            panic!("not a spilled tensor");
        };
        crate::sys::read_exact_at(file, &mut data, info.data_offset).expect("read back");
        let elements = match &info.dtype {
            DType::Bool => data
                .iter()
                .map(|&b| if b == 1 { "True" } else { "False" }.to_string())
                .collect(),
            DType::Unicode(width) => data
                .chunks_exact(*width as usize * 4)
                .map(|element| {
                    let chars = element
                        .chunks_exact(4)
                        .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")));
                    let text: String = chars.filter_map(char::from_u32).collect();
                    text.trim_end_matches('\0').to_string()
                })
                .collect(),
            dtype => data
                .chunks_exact(8)
                .map(|c| {
                    let bits: [u8; 8] = c.try_into().expect("8 bytes");
                    match dtype {
                        DType::Int64 => i64::from_le_bytes(bits).to_string(),
                        DType::UInt64 => u64::from_le_bytes(bits).to_string(),
                        _ => infer::python_repr(f64::from_le_bytes(bits)),
                    }
                })
                .collect(),
        };
        let descr = info.dtype.npy_descr(ByteOrder::Little);
        Ok((descr.trim_matches('\'').to_string(), elements))
    }

    #[test]
    fn inference_follows_numpy_for_every_mix_of_kinds() {
        let mut checked = 0;
        for line in NUMPY.lines().filter(|l| !l.starts_with('#')) {
            let mut fields = line.split('\t');
            let (Some(text), Some(dtype), Some(elements)) =
                (fields.next(), fields.next(), fields.next())
            else {
                panic!("a line of three fields: {line}");
            };
            let (dtype, elements) = match SPECIAL_FLOATS.iter().find(|(t, ..)| *t == text) {
                Some((_, dtype, elements)) => (*dtype, *elements),
                None => (dtype, elements),
            };
            let read = read_text(text);
            match dtype {
                "object" | "raise" => match read {
                    Err(Error::Unsupported { reason, .. }) => {
                        assert!(reason.starts_with("$["), "{text}: {reason}");
                    }
                    Err(other) => panic!("{text}: numpy says {dtype}, tjoin: {other}"),
                    Ok(read) => panic!("{text}: numpy says {dtype}, tjoin reads {read:?}"),
                },
                _ => {
                    let expected: Vec<String> =
                        serde_json::from_str(elements).expect("a list of strings");
                    let read = read.unwrap_or_else(|e| panic!("{text}: {e}"));
                    assert_eq!(read, (dtype.to_string(), expected), "{text}");
                }
            }
            checked += 1;
        }
        assert!(checked > 600, "only {checked} lines");
    }

    #[test]
    fn messages_quote_a_long_token_as_a_short_excerpt() {
        let digits = "7".repeat(1_000_000);
        let letters = "a".repeat(1_000_000);
        let texts = [
            format!("[1, {digits}]"),
            format!("[-1, -{digits}]"),
            format!(r#"{{"dtype": "int8", "shape": [1], "data": [{digits}]}}"#),
            format!(r#"{{"dtype": "int8", "shape": [1], "data": [1e{digits}]}}"#),
            format!(r#"{{"dtype": "float32", "shape": [1], "data": ["{letters}"]}}"#),
            format!(r#"{{"dtype": "S2", "shape": [1], "data": ["{letters}"]}}"#),
            format!(r#"{{"dtype": "S{digits}", "shape": [1], "data": ["a"]}}"#),
            format!(r#"{{"dtype": "{letters}", "shape": [1], "data": [1]}}"#),
            format!(r#"{{"dtype": "int8", "shape": [1.{digits}], "data": [1]}}"#),
            format!(r#"{{"{letters}": 1}}"#),
            format!(r#"{{"{letters}": 1, "{letters}": 2}}"#),
        ];
        for text in &texts {
            let error = read_text(text).expect_err("refused").to_string();
            assert!(
                error.len() < 600 && error.contains("more bytes)"),
                "{} bytes: {}",
                error.len(),
                excerpt(&error)
            );
        }
    }

    #[test]
    fn only_broken_text_gets_the_hint_about_damage() {
        for broken in ["[1, 2", "[1, 2,]", "[01]", "[1] x", "[tru]"] {
            let error = read_text(broken).expect_err(broken);
            assert!(
                matches!(error, Error::Malformed { .. }) && error.to_string().contains("damaged"),
                "{broken}: {error}"
            );
        }
        let unjoinable = [
            "[[1, 2], [3]]",
            "[1, null]",
            "[1, 18446744073709551616]",
            r#"{"dtype": "int8", "shape": [2], "data": [1, 300]}"#,
            r#"{"dtype": "int8", "colour": "red", "data": []}"#,
        ];
        for text in unjoinable {
            let error = read_text(text).expect_err(text);
            assert!(
                matches!(error, Error::Unsupported { .. })
                    && !error.to_string().contains("damaged"),
                "{text}: {error}"
            );
        }
    }

    #[test]
    fn text_from_bytes_reads_as_the_mapped_file_does() {
        let input = InputRef {
            position: 1,
            location: std::path::Path::new("t.json").into(),
            tensor: None,
        };
        for text in [
            "[[1, 2], [3, 4]]",
            "{\"dtype\": \"int8\", \"shape\": [2], \"data\": [1]}",
            "[1,",
        ] {
            let mut file = tempfile::tempfile().expect("a temporary file");
            file.write_all(text.as_bytes()).expect("written");
            let mapped = read(&file, text.len() as u64, &input, &mut Spill::default());
            let bytes = super::read_text(text.as_bytes(), &input, &mut Spill::default());
            match (mapped, bytes) {
                (Ok(mapped), Ok(bytes)) => {
                    let info = |c: &Contents| format!("{:?}", c.tensors[0].info);
                    assert_eq!(info(&mapped), info(&bytes), "{text}");
                }
                (Err(mapped), Err(bytes)) => assert_eq!(mapped.to_string(), bytes.to_string()),
                (mapped, bytes) => {
                    panic!("{text}: {:?} against {:?}", mapped.is_ok(), bytes.is_ok())
                }
            }
        }
    }
}
