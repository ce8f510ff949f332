//! JSON tensors.
//!
//! Reading: nested arrays of numbers, booleans or strings, or a tensor object
//! `{"dtype": "float32", "shape": [2, 3], "data": [...]}` (data nested or flat), converted
//! element by element into little-endian C-order data in the spill file by a hand-written
//! scanner over the mapped text. Nothing is held in memory but a write buffer (and the
//! strings of a string tensor, whose width is known only at the end). Nesting is walked
//! with an explicit stack, so depth costs no recursion; more than `MAX_DEPTH` is refused.
//!
//! Writing: a `Writer` whose data sink turns whole little-endian elements into text as the
//! copy engine streams them. Floats are printed shortest-round-trip, NaN and infinities as
//! the strings "NaN", "Infinity", "-Infinity", complex numbers as `[re, im]`, so that every
//! value reads back exactly.

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, Write as _};

use half::{bf16, f16};

use crate::cast::{narrow_bf16, narrow_f16};
use crate::dtype::{ByteOrder, DType};
use crate::error::{Error, InputRef, Result};
use crate::format::{Contents, Found, Layout, OutTensor, TensorInfo, Writer, byte_count};
use crate::output::Sink;
use crate::source::Region;
use crate::spill::{Spill, SpillWriter};

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
/// How far the scanner reads between releases of the text's pages behind it.
const RELEASE_STEP: usize = 16 << 20;

/// Reads the JSON tensor in `file` (of `len` bytes) into `spill`: its one tensor, whose data
/// is in the spill file.
pub fn read(file: &File, len: u64, input: &InputRef, spill: &mut Spill) -> Result<Contents> {
    let region = Region::map(file, 0, len).map_err(|e| input.io_error("map", e))?;
    let mut out = spill.writer(input)?;
    let mut parser = Parser {
        text: region.bytes(),
        pos: 0,
        region: &region,
        released: 0,
    };
    let (dtype, shape) = parser.tensor(&mut out).map_err(|fail| match fail {
        Fail::Io(e) => input.io_error("make a temporary copy of", e),
        Fail::Bad(reason) | Fail::Value(reason) => Error::Malformed {
            input: input.clone(),
            format: "JSON",
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
        shape,
        layout: Layout::C,
        data_offset,
        data_len,
    };
    Ok(Contents {
        tensors: vec![Found {
            name: None,
            info,
            file: Some(spill.file(input)?),
        }],
        metadata: None,
    })
}

/// Why reading stopped.
enum Fail {
    /// Malformed text; the message names the JSON path.
    Bad(String),
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

type Parsed<T> = std::result::Result<T, Fail>;

/// A scalar as the text holds it.
enum Scalar<'a> {
    Number(Number<'a>),
    Str(Cow<'a, str>),
    Bool(bool),
}

impl Number<'_> {
    fn as_str(&self) -> &str {
        std::str::from_utf8(self.text).unwrap_or("?")
    }
}

impl Scalar<'_> {
    fn describe(&self) -> String {
        match self {
            Scalar::Number(n) => n.as_str().to_string(),
            Scalar::Str(s) => format!("the string {s:?}"),
            Scalar::Bool(b) => b.to_string(),
        }
    }
}

/// A number as the text holds it.
struct Number<'a> {
    /// Its text: ASCII, checked against JSON's grammar.
    text: &'a [u8],
    /// Sign and magnitude, for integers without fraction or exponent that fit 64 bits.
    int: Option<(bool, u64)>,
    /// Whether it has a fraction or an exponent.
    fraction: bool,
}

/// Where the scanner is in the text.
struct Parser<'a> {
    text: &'a [u8],
    pos: usize,
    region: &'a Region,
    released: usize,
}

/// `$[1][2]`: a JSON path from `prefix` through the open arrays' indexes.
fn path(prefix: &str, stack: &[u64]) -> String {
    let mut path = prefix.to_string();
    for index in stack {
        path.push_str(&format!("[{index}]"));
    }
    path
}

impl<'a> Parser<'a> {
    fn tensor(&mut self, out: &mut SpillWriter<'_>) -> Parsed<(DType, Vec<u64>)> {
        self.ws();
        let read = match self.peek() {
            Some(b'{') => self.object(out)?,
            Some(b'[') => {
                let mut leaves = Inferred::new(out);
                let shape = self.walk("$", &mut leaves, None, false)?;
                (leaves.finish()?, shape)
            }
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
                let here = format!("$.{key}");
                if seen.contains(&key) {
                    return Err(self.bad(&here, "the key appears twice"));
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
                        return Err(self.bad(
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
                return Err(Fail::Bad(
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
                let mut leaves = Typed { out, dtype };
                let read_shape = self.walk("$.data", &mut leaves, expected, complex)?;
                (leaves.dtype, read_shape)
            }
            None => {
                let mut leaves = Inferred::new(out);
                let read_shape = self.walk("$.data", &mut leaves, expected, false)?;
                (leaves.finish()?, read_shape)
            }
        };
        Ok(read_shape)
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
            return Err(self.bad("$.dtype", "expected the element type's name as a string"));
        }
        let name = self.string().map_err(|m| self.bad("$.dtype", &m))?;
        let dtype = DType::from_name(&name).ok_or_else(|| {
            Fail::Bad(format!(
                "$.dtype: unknown element type {name:?}; JSON tensors hold bool, int8..int64, \
                 uint8..uint64, float16, bfloat16, float32, float64, complex64, complex128, \
                 datetime64[unit], timedelta64[unit], S<n> and U<n>"
            ))
        })?;
        if let Some(why) = unsupported(&dtype) {
            return Err(Fail::Bad(format!("$.dtype: {why}")));
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
                _ => return Err(self.bad(&here, "expected a dimension (a whole number)")),
            };
            match dim.int {
                Some((false, size)) if !dim.fraction => shape.push(size),
                _ => {
                    return Err(Fail::Bad(format!(
                        "{here}: {} is not a dimension (a whole number, 0 or more)",
                        dim.as_str()
                    )));
                }
            }
            if shape.len() > MAX_DEPTH {
                return Err(self.bad("$.shape", "more than 64 dimensions"));
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
        let locate = |stack: &[u64], fail: Fail| match fail {
            Fail::Value(message) => Fail::Bad(format!("{}: {message}", path(prefix, stack))),
            other => other,
        };
        'value: loop {
            self.ws();
            let opens_array = self.peek() == Some(b'[') && !(complex && self.is_pair());
            if opens_array {
                let depth = stack.len() + 1;
                if depth > MAX_DEPTH {
                    return Err(
                        self.bad(&path(prefix, &stack), "arrays are nested more than 64 deep")
                    );
                }
                if rank.is_some_and(|r| depth > r) {
                    let why = if stated {
                        "found an array where the shape has an element"
                    } else {
                        "found an array where the earlier rows have a value: the arrays are \
                         ragged"
                    };
                    return Err(self.bad(&path(prefix, &stack), why));
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
                    return Err(Fail::Bad(format!("{}: {message}", path(prefix, &stack))));
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
                    return Err(self.bad(&path(prefix, &stack), why));
                }
                rank.get_or_insert(stack.len());
                if complex && self.peek() == Some(b'[') {
                    let (re, im) = self
                        .pair()
                        .map_err(|m| self.bad(&path(prefix, &stack), &m))?;
                    leaves.pair(re, im).map_err(|f| locate(&stack, f))?;
                } else {
                    let value = self
                        .scalar()
                        .map_err(|m| self.bad(&path(prefix, &stack), &m))?;
                    leaves.value(value).map_err(|f| locate(&stack, f))?;
                }
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
                            return Err(self.bad(&path(prefix, &stack), &why));
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
                return Err(Fail::Bad(format!("{}: {why}", path(prefix, stack))));
            }
            Some(_) => {}
        }
        Ok(())
    }

    /// Whether the array starting here is a `[re, im]` pair: it opens with a scalar.
    fn is_pair(&self) -> bool {
        let rest = self.text.get(self.pos + 1..).unwrap_or_default();
        rest.iter()
            .find(|b| !b" \t\r\n".contains(b))
            .is_some_and(|b| !matches!(b, b'[' | b']'))
    }

    /// A `[re, im]` pair.
    fn pair(&mut self) -> std::result::Result<(Scalar<'a>, Scalar<'a>), String> {
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
    fn skip_value(&mut self, here: &str) -> Parsed<()> {
        let mut open: Vec<u8> = Vec::new();
        loop {
            self.ws();
            match self.peek() {
                Some(b'[') | Some(b'{') => {
                    if open.len() >= MAX_DEPTH {
                        return Err(self.bad(here, "values are nested more than 64 deep"));
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

    fn expect(&mut self, byte: u8, here: &str) -> Parsed<()> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.bad(here, &format!("expected '{}'", byte as char)))
        }
    }

    /// A malformed-text failure at `here`; an empty message means the text ended early.
    fn bad(&self, here: &str, message: &str) -> Fail {
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
    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.text.get(self.pos) {
            self.pos += 1;
        }
    }

    #[inline]
    fn peek(&self) -> Option<u8> {
        self.text.get(self.pos).copied()
    }

    fn release_behind(&mut self) {
        if self.pos - self.released >= 2 * RELEASE_STEP {
            self.region
                .release(self.released, self.released + RELEASE_STEP);
            self.released += RELEASE_STEP;
        }
    }

    /// A number, string or boolean.
    fn scalar(&mut self) -> std::result::Result<Scalar<'a>, String> {
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
    fn number(&mut self) -> std::result::Result<Number<'a>, String> {
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

    /// A string, unescaped.
    fn string(&mut self) -> std::result::Result<Cow<'a, str>, String> {
        self.pos += 1;
        let start = self.pos;
        let text = self.text;
        while let Some(&b) = text.get(self.pos) {
            match b {
                b'"' => {
                    let s = std::str::from_utf8(&text[start..self.pos])
                        .map_err(|_| "a string is not valid UTF-8".to_string())?;
                    self.pos += 1;
                    return Ok(Cow::Borrowed(s));
                }
                b'\\' => break,
                0..0x20 => return Err("a string holds an unescaped control character".into()),
                _ => self.pos += 1,
            }
        }
        let mut bytes = text[start..self.pos].to_vec();
        loop {
            let Some(&b) = text.get(self.pos) else {
                return Err(String::new());
            };
            self.pos += 1;
            match b {
                b'"' => break,
                b'\\' => {
                    let escaped = text.get(self.pos).copied().ok_or_else(String::new)?;
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
                0..0x20 => return Err("a string holds an unescaped control character".into()),
                _ => bytes.push(b),
            }
        }
        String::from_utf8(bytes)
            .map(Cow::Owned)
            .map_err(|_| "a string is not valid UTF-8".to_string())
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
        let digits = self
            .text
            .get(self.pos..self.pos + 4)
            .ok_or_else(String::new)?;
        let digits = std::str::from_utf8(digits).map_err(|e| e.to_string())?;
        let value = u32::from_str_radix(digits, 16)
            .map_err(|_| "a \\u escape needs four hex digits".to_string())?;
        self.pos += 4;
        Ok(value)
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

/// Receives the elements the walker finds, in C order.
trait Leaves {
    fn value(&mut self, value: Scalar<'_>) -> Parsed<()>;
    fn pair(&mut self, re: Scalar<'_>, im: Scalar<'_>) -> Parsed<()>;
}

/// A float given as a string: "NaN", "Infinity", "-Infinity" (any case, "inf" too).
fn special_float(s: &str) -> Option<f64> {
    let (negative, word) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let value = if word.eq_ignore_ascii_case("nan") {
        f64::NAN
    } else if word.eq_ignore_ascii_case("inf") || word.eq_ignore_ascii_case("infinity") {
        f64::INFINITY
    } else {
        return None;
    };
    Some(if negative { -value } else { value })
}

/// Elements of a stated type.
struct Typed<'w, 's> {
    out: &'w mut SpillWriter<'s>,
    dtype: DType,
}

/// The value of a float element of type `dtype` (or of one half of a complex).
fn float(value: &Scalar<'_>, dtype: &DType) -> Parsed<f64> {
    let parsed = match value {
        Scalar::Number(n) if dtype == &DType::Float32 => n.as_str().parse::<f32>().map(f64::from),
        Scalar::Number(n) => n.as_str().parse::<f64>(),
        Scalar::Str(s) => {
            return special_float(s).ok_or_else(|| {
                Fail::Value(format!(
                    "expected a number for {dtype}, found {} (floats take the strings \
                     \"NaN\", \"Infinity\" and \"-Infinity\")",
                    value.describe()
                ))
            });
        }
        Scalar::Bool(_) => {
            return Err(Fail::Value(format!(
                "expected a number for {dtype}, found {}",
                value.describe()
            )));
        }
    };
    let v = parsed.map_err(|e| Fail::Value(e.to_string()))?;
    let finite = match dtype {
        DType::Float16 => narrow_f16(v).is_finite(),
        DType::BFloat16 => narrow_bf16(v).is_finite(),
        _ => v.is_finite(),
    };
    if !finite {
        return Err(Fail::Value(format!(
            "{} is out of the range of {dtype}",
            value.describe()
        )));
    }
    Ok(v)
}

fn write_float(out: &mut SpillWriter<'_>, v: f64, dtype: &DType) -> Parsed<()> {
    match dtype {
        DType::Float16 => out.write(&narrow_f16(v).to_le_bytes())?,
        DType::BFloat16 => out.write(&narrow_bf16(v).to_le_bytes())?,
        // `float` parsed a float32's text as f32, so this narrowing is exact.
        DType::Float32 => out.write(&(v as f32).to_le_bytes())?,
        _ => out.write(&v.to_le_bytes())?,
    }
    Ok(())
}

impl Leaves for Typed<'_, '_> {
    fn value(&mut self, value: Scalar<'_>) -> Parsed<()> {
        let Typed { out, dtype } = self;
        let dtype: &DType = dtype;
        let (min, max): (i128, i128) = match dtype {
            DType::Bool => {
                let Scalar::Bool(b) = value else {
                    return Err(Fail::Value(format!(
                        "expected true or false for bool, found {}",
                        value.describe()
                    )));
                };
                out.write(&[u8::from(b)])?;
                return Ok(());
            }
            DType::Float16 | DType::BFloat16 | DType::Float32 | DType::Float64 => {
                let v = float(&value, dtype)?;
                return write_float(out, v, dtype);
            }
            DType::Bytes(width) | DType::Unicode(width) => {
                let Scalar::Str(s) = value else {
                    return Err(Fail::Value(format!(
                        "expected a string for {dtype}, found {}",
                        value.describe()
                    )));
                };
                return write_string(out, &s, dtype, *width);
            }
            DType::Complex64 | DType::Complex128 => {
                return Err(Fail::Value(format!(
                    "expected a [re, im] pair for {dtype}, found {}",
                    value.describe()
                )));
            }
            // `unsupported` refused the other types when the dtype was read.
            int_type => int_type
                .int_range()
                .ok_or_else(|| Fail::Value(format!("JSON tensors do not hold {dtype}")))?,
        };
        let integer = match &value {
            Scalar::Number(Number {
                int: Some((negative, magnitude)),
                ..
            }) => {
                let m = i128::from(*magnitude);
                if *negative { -m } else { m }
            }
            Scalar::Number(n) if !n.fraction => i128::MAX,
            _ => {
                return Err(Fail::Value(format!(
                    "expected an integer for {dtype}, found {}",
                    value.describe()
                )));
            }
        };
        if integer < min || integer > max {
            return Err(Fail::Value(format!(
                "{} is out of the range of {dtype} ({min} to {max})",
                value.describe()
            )));
        }
        out.write(&integer.to_le_bytes()[..dtype.itemsize() as usize])?;
        Ok(())
    }

    fn pair(&mut self, re: Scalar<'_>, im: Scalar<'_>) -> Parsed<()> {
        let part = match self.dtype {
            DType::Complex64 => DType::Float32,
            _ => DType::Float64,
        };
        let (re, im) = (float(&re, &part)?, float(&im, &part)?);
        write_float(self.out, re, &part)?;
        write_float(self.out, im, &part)
    }
}

/// Writes one string element, NUL-padded to `width` characters (UCS-4) or bytes (latin-1).
fn write_string(out: &mut SpillWriter<'_>, s: &str, dtype: &DType, width: u64) -> Parsed<()> {
    let count = s.chars().count() as u64;
    if count > width {
        return Err(Fail::Value(format!(
            "the string {s:?} has {count} characters, more than {dtype} holds"
        )));
    }
    match dtype {
        DType::Bytes(_) => {
            for c in s.chars() {
                let byte = u8::try_from(u32::from(c)).map_err(|_| {
                    Fail::Value(format!(
                        "the string {s:?} holds {c:?}, which is not a single byte (write \
                         bytes as the characters U+0000 to U+00FF)"
                    ))
                })?;
                out.write(&[byte])?;
            }
            for _ in count..width {
                out.write(&[0])?;
            }
        }
        _ => {
            for c in s.chars() {
                out.write(&u32::from(c).to_le_bytes())?;
            }
            for _ in count..width {
                out.write(&[0; 4])?;
            }
        }
    }
    Ok(())
}

/// What the values seen so far say the element type is.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Empty,
    Bool,
    /// Written as 8-byte integers: int64, or uint64 once a value needs it.
    Int {
        unsigned: bool,
        negative: bool,
    },
    Float,
    Str,
}

impl Kind {
    fn plural(self) -> &'static str {
        match self {
            Kind::Empty => "absent",
            Kind::Bool => "booleans",
            Kind::Int { .. } | Kind::Float => "numbers",
            Kind::Str => "strings",
        }
    }
}

/// Elements whose type is inferred as numpy.array would: bool if all booleans, int64 if all
/// integers (uint64 when a value needs it), float64 if any number has a fraction or
/// exponent, fixed-width unicode for strings.
struct Inferred<'w, 's> {
    out: &'w mut SpillWriter<'s>,
    kind: Kind,
    strings: Vec<String>,
    width: u64,
}

impl<'w, 's> Inferred<'w, 's> {
    fn new(out: &'w mut SpillWriter<'s>) -> Self {
        Inferred {
            out,
            kind: Kind::Empty,
            strings: Vec::new(),
            width: 0,
        }
    }

    fn mixed(&self, value: &Scalar<'_>) -> Fail {
        let found = match value {
            Scalar::Number(_) => "a number",
            Scalar::Str(_) => "a string",
            Scalar::Bool(_) => "a boolean",
        };
        Fail::Value(format!(
            "found {found} ({}) where the earlier values are {}: a tensor holds one kind of \
             value",
            value.describe(),
            self.kind.plural()
        ))
    }

    /// Switches to float64, rewriting the integers written so far.
    fn become_float(&mut self) -> Parsed<()> {
        if let Kind::Int { unsigned, .. } = self.kind {
            self.out.rewrite(8, |element| {
                let bits: [u8; 8] = element.try_into().unwrap_or_default();
                let v = if unsigned {
                    u64::from_le_bytes(bits) as f64
                } else {
                    i64::from_le_bytes(bits) as f64
                };
                element.copy_from_slice(&v.to_le_bytes());
            })?;
        }
        self.kind = Kind::Float;
        Ok(())
    }

    fn finish(self) -> Parsed<DType> {
        Ok(match self.kind {
            Kind::Empty | Kind::Float => DType::Float64,
            Kind::Bool => DType::Bool,
            Kind::Int { unsigned: true, .. } => DType::UInt64,
            Kind::Int { .. } => DType::Int64,
            Kind::Str => {
                let dtype = DType::Unicode(self.width.max(1));
                for s in &self.strings {
                    write_string(self.out, s, &dtype, self.width.max(1))?;
                }
                dtype
            }
        })
    }
}

impl Leaves for Inferred<'_, '_> {
    fn value(&mut self, value: Scalar<'_>) -> Parsed<()> {
        match (&value, self.kind) {
            (Scalar::Bool(b), Kind::Empty | Kind::Bool) => {
                self.kind = Kind::Bool;
                self.out.write(&[u8::from(*b)])?;
            }
            (Scalar::Number(n), Kind::Empty | Kind::Int { .. }) if !n.fraction => {
                let Kind::Int {
                    mut unsigned,
                    mut negative,
                } = self.kind
                else {
                    self.kind = Kind::Int {
                        unsigned: false,
                        negative: false,
                    };
                    return self.value(value);
                };
                let Some((minus, magnitude)) = n.int else {
                    return Err(Fail::Value(format!(
                        "the integer {} is out of the range of int64 and uint64; write it \
                         with an exponent (e.g. 1e20) to make a float tensor",
                        n.as_str()
                    )));
                };
                let clash = || {
                    Fail::Value(format!(
                        "the integer {} needs {} but the earlier values need {}: no integer \
                         type holds both (write one of them with a fraction for float64)",
                        n.as_str(),
                        if minus { "int64" } else { "uint64" },
                        if minus { "uint64" } else { "int64" },
                    ))
                };
                if minus {
                    if unsigned {
                        return Err(clash());
                    }
                    let v = i64::try_from(-i128::from(magnitude)).map_err(|_| {
                        Fail::Value(format!(
                            "the integer {} is below the range of int64",
                            n.as_str()
                        ))
                    })?;
                    negative = true;
                    self.out.write(&v.to_le_bytes())?;
                } else {
                    if magnitude > i64::MAX as u64 {
                        if negative {
                            return Err(clash());
                        }
                        unsigned = true;
                    }
                    self.out.write(&magnitude.to_le_bytes())?;
                }
                self.kind = Kind::Int { unsigned, negative };
            }
            (Scalar::Number(n), Kind::Empty | Kind::Int { .. } | Kind::Float) => {
                if self.kind != Kind::Float {
                    self.become_float()?;
                }
                let v: f64 = n
                    .as_str()
                    .parse()
                    .map_err(|e| Fail::Value(format!("{e}")))?;
                self.out.write(&v.to_le_bytes())?;
            }
            (Scalar::Str(s), kind) if kind != Kind::Str && special_float(s).is_some() => {
                if matches!(kind, Kind::Bool) {
                    return Err(self.mixed(&value));
                }
                if kind != Kind::Float {
                    self.become_float()?;
                }
                let v = special_float(s).unwrap_or(f64::NAN);
                self.out.write(&v.to_le_bytes())?;
            }
            (Scalar::Str(s), Kind::Empty | Kind::Str) => {
                self.kind = Kind::Str;
                self.width = self.width.max(s.chars().count() as u64);
                self.strings.push(s.to_string());
            }
            _ => return Err(self.mixed(&value)),
        }
        Ok(())
    }

    fn pair(&mut self, _: Scalar<'_>, _: Scalar<'_>) -> Parsed<()> {
        Err(Fail::Value(
            "complex values need a stated complex dtype".to_string(),
        ))
    }
}

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
    fn check(&self, tensors: &[OutTensor]) -> std::result::Result<(), String> {
        match tensors {
            [one] => match unsupported(&one.dtype) {
                Some(why) => Err(format!("JSON output cannot hold {}: {why}", one.dtype)),
                None => Ok(()),
            },
            _ => Err(format!(
                "a JSON output holds one tensor, and this join makes {}",
                tensors.len()
            )),
        }
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
