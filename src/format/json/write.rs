//! The JSON writer: a tensor's framing (nested arrays, or the object form with dtype and
//! shape) and the data sink that turns the elements the copy engine streams into text.

use std::io::{self, Write as _};

use half::{bf16, f16};

use super::{JsonForm, unsupported};
use crate::dtype::DType;
use crate::error::Refusal;
use crate::format::Sink;
use crate::format::{Layout, OutTensor, Writer};

/// Writes a tensor as JSON: nested arrays, or the object form with dtype and shape.
pub struct JsonWriter {
    form: JsonForm,
    current: Option<OutTensor>,
}

impl JsonWriter {
    /// A writer of the given form.
    pub fn new(form: JsonForm) -> JsonWriter {
        JsonWriter {
            form,
            current: None,
        }
    }
}

impl Writer for JsonWriter {
    fn check(&self, tensors: &[OutTensor]) -> std::result::Result<(), Refusal> {
        let problem = match tensors {
            [one] => unsupported(&one.dtype)
                .map(|why| format!("JSON output cannot hold {}: {why}", one.dtype)),
            _ => Some(format!(
                "a JSON output holds one tensor, and this join makes {}",
                tensors.len()
            )),
        };
        crate::format::cannot_hold(problem.into_iter().collect())
    }

    fn start_tensor(&mut self, sink: &mut dyn Sink, tensor: &OutTensor) -> io::Result<()> {
        debug_assert_eq!(tensor.layout, Layout::C, "JSON is written in C order");
        self.current = Some(tensor.clone());
        if self.form == JsonForm::Object {
            let dims: Vec<String> = tensor.shape.iter().map(u64::to_string).collect();
            let head = format!(
                "{{\"dtype\":\"{}\",\"shape\":[{}],\"data\":",
                tensor.dtype,
                dims.join(",")
            );
            sink.write_all(head.as_bytes())?;
        }
        if tensor.shape.contains(&0) {
            let mut text = Vec::new();
            empty_nesting(&tensor.shape, &mut text, sink)?;
            sink.write_all(&text)?;
        }
        Ok(())
    }

    fn data_sink<'a>(&'a mut self, sink: &'a mut dyn Sink) -> Box<dyn Sink + 'a> {
        let tensor = self.current.clone().unwrap_or_else(|| OutTensor {
            name: String::new(),
            dtype: DType::UInt8,
            shape: vec![0],
            layout: Layout::C,
            bytes: 0,
        });
        Box::new(JsonData::new(sink, tensor))
    }

    fn end_tensor(&mut self, sink: &mut dyn Sink, _tensor: &OutTensor) -> io::Result<()> {
        match self.form {
            JsonForm::Object => sink.write_all(b"}\n"),
            JsonForm::Nested => sink.write_all(b"\n"),
        }
    }
}

/// The text of an array of shape `shape` that has no elements: `[[], []]` for `[2, 0]`.
fn empty_nesting(shape: &[u64], text: &mut Vec<u8>, sink: &mut dyn Sink) -> io::Result<()> {
    text.push(b'[');
    if let [first, rest @ ..] = shape
        && *first > 0
        && !rest.is_empty()
    {
        for i in 0..*first {
            if i > 0 {
                text.push(b',');
            }
            empty_nesting(rest, text, sink)?;
            if text.len() >= TEXT_BUFFER {
                sink.write_all(text)?;
                text.clear();
            }
        }
    }
    text.push(b']');
    Ok(())
}

const TEXT_BUFFER: usize = 1 << 20;

/// Formats the elements the copy engine streams as JSON text.
struct JsonData<'a> {
    sink: &'a mut dyn Sink,
    dtype: DType,
    itemsize: usize,
    shape: Vec<u64>,
    /// The index of the next element along each dimension.
    counters: Vec<u64>,
    /// Elements formatted so far, and in all.
    done: u64,
    total: u64,
    /// Bytes of an element split across two writes.
    carry: Vec<u8>,
    text: Vec<u8>,
}

impl<'a> JsonData<'a> {
    fn new(sink: &'a mut dyn Sink, tensor: OutTensor) -> JsonData<'a> {
        let total = tensor.shape.iter().product();
        JsonData {
            sink,
            itemsize: tensor.dtype.itemsize() as usize,
            counters: vec![0; tensor.shape.len()],
            shape: tensor.shape,
            dtype: tensor.dtype,
            done: 0,
            total,
            carry: Vec::new(),
            text: Vec::with_capacity(TEXT_BUFFER + 4096),
        }
    }

    fn element(&mut self, bytes: &[u8]) -> io::Result<()> {
        let rank = self.shape.len();
        if self.done == 0 {
            self.text.extend(std::iter::repeat_n(b'[', rank));
        } else {
            let mut closes = 0;
            let mut dim = rank;
            while dim > 0 {
                dim -= 1;
                self.counters[dim] += 1;
                if self.counters[dim] < self.shape[dim] || dim == 0 {
                    break;
                }
                self.counters[dim] = 0;
                closes += 1;
            }
            self.text.extend(std::iter::repeat_n(b']', closes));
            self.text.push(b',');
            self.text.extend(std::iter::repeat_n(b'[', closes));
        }
        format_element(&self.dtype, bytes, &mut self.text)?;
        self.done += 1;
        if self.done == self.total {
            self.text.extend(std::iter::repeat_n(b']', rank));
        }
        if self.text.len() >= TEXT_BUFFER || self.done == self.total {
            self.sink.write_all(&self.text)?;
            self.text.clear();
        }
        Ok(())
    }
}

impl Sink for JsonData<'_> {
    fn write_all(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        if self.itemsize == 0 {
            return Ok(());
        }
        if !self.carry.is_empty() {
            let take = (self.itemsize - self.carry.len()).min(bytes.len());
            self.carry.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.carry.len() < self.itemsize {
                return Ok(());
            }
            let element = std::mem::take(&mut self.carry);
            self.element(&element)?;
        }
        let mut elements = bytes.chunks_exact(self.itemsize);
        for element in &mut elements {
            self.element(element)?;
        }
        self.carry.extend_from_slice(elements.remainder());
        Ok(())
    }

    fn name(&self) -> &std::path::Path {
        self.sink.name()
    }
}

/// Appends one little-endian element of `dtype` as JSON text.
fn format_element(dtype: &DType, b: &[u8], text: &mut Vec<u8>) -> io::Result<()> {
    let le2 = || [b[0], b[1]];
    let le4 = || [b[0], b[1], b[2], b[3]];
    let le8 = || [b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]];
    match dtype {
        DType::Bool => text.extend_from_slice(if b[0] != 0 { b"true" } else { b"false" }),
        DType::Int8 => write!(text, "{}", b[0] as i8)?,
        DType::Int16 => write!(text, "{}", i16::from_le_bytes(le2()))?,
        DType::Int32 => write!(text, "{}", i32::from_le_bytes(le4()))?,
        DType::Int64 | DType::DateTime64(_) | DType::TimeDelta64(_) => {
            write!(text, "{}", i64::from_le_bytes(le8()))?
        }
        DType::UInt8 => write!(text, "{}", b[0])?,
        DType::UInt16 => write!(text, "{}", u16::from_le_bytes(le2()))?,
        DType::UInt32 => write!(text, "{}", u32::from_le_bytes(le4()))?,
        DType::UInt64 => write!(text, "{}", u64::from_le_bytes(le8()))?,
        // A float16/bfloat16 is exactly a float32, whose shortest text reads back to it.
        DType::Float16 => float32(f16::from_le_bytes(le2()).to_f32(), text)?,
        DType::BFloat16 => float32(bf16::from_le_bytes(le2()).to_f32(), text)?,
        DType::Float32 => float32(f32::from_le_bytes(le4()), text)?,
        DType::Float64 => float64(f64::from_le_bytes(le8()), text)?,
        DType::Complex64 => {
            text.push(b'[');
            float32(f32::from_le_bytes(le4()), text)?;
            text.push(b',');
            float32(f32::from_le_bytes([b[4], b[5], b[6], b[7]]), text)?;
            text.push(b']');
        }
        DType::Complex128 => {
            text.push(b'[');
            float64(f64::from_le_bytes(le8()), text)?;
            text.push(b',');
            let im: [u8; 8] = b[8..16].try_into().unwrap_or_default();
            float64(f64::from_le_bytes(im), text)?;
            text.push(b']');
        }
        // Strings lose their NUL padding; no allocation per element.
        DType::Bytes(_) => {
            let end = b.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1);
            json_string(b[..end].iter().map(|&c| char::from(c)), text);
        }
        DType::Unicode(_) => {
            let units = b
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
            let end = units.clone().rposition(|c| c != 0).map_or(0, |i| i + 1);
            if let Some(unit) = units
                .clone()
                .take(end)
                .find(|&u| char::from_u32(u).is_none())
            {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("a string element holds {unit:#x}, which is not a character"),
                ));
            }
            let chars = units.take(end).filter_map(char::from_u32);
            json_string(chars, text);
        }
        other => {
            return Err(io::Error::other(format!("JSON output cannot hold {other}")));
        }
    }
    Ok(())
}

fn float32(v: f32, text: &mut Vec<u8>) -> io::Result<()> {
    if v.is_finite() {
        write!(text, "{v:?}")
    } else {
        special(f64::from(v), text)
    }
}

fn float64(v: f64, text: &mut Vec<u8>) -> io::Result<()> {
    if v.is_finite() {
        write!(text, "{v:?}")
    } else {
        special(v, text)
    }
}

fn special(v: f64, text: &mut Vec<u8>) -> io::Result<()> {
    text.extend_from_slice(if v.is_nan() {
        b"\"NaN\""
    } else if v > 0.0 {
        b"\"Infinity\""
    } else {
        b"\"-Infinity\""
    });
    Ok(())
}

/// Appends the characters `s` as a JSON string literal.
fn json_string(s: impl Iterator<Item = char>, text: &mut Vec<u8>) {
    text.push(b'"');
    for c in s {
        match c {
            '"' => text.extend_from_slice(b"\\\""),
            '\\' => text.extend_from_slice(b"\\\\"),
            '\n' => text.extend_from_slice(b"\\n"),
            '\t' => text.extend_from_slice(b"\\t"),
            '\r' => text.extend_from_slice(b"\\r"),
            c if (c as u32) < 0x20 => {
                text.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes())
            }
            c => {
                let mut utf8 = [0; 4];
                text.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
            }
        }
    }
    text.push(b'"');
}
