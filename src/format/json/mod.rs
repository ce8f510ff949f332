//! JSON tensors: reading a JSON input into the spill file, and the output forms
//! (`JsonForm`, `JsonWriter`).
//!
//! Reading: nested arrays of numbers, booleans or strings, or a tensor object
//! `{"dtype": "float32", "shape": [2, 3], "data": [...]}` (data nested or flat), converted
//! element by element into little-endian C-order data in the spill file by a hand-written
//! scanner over the mapped text (`scan`). Nothing is held in memory but a write buffer (and
//! the strings of a string tensor, whose width is known only at the end). Nesting is walked
//! with an explicit stack, so depth costs no recursion; more than `MAX_DEPTH` is refused.
//! This module reads the two forms and the nesting; `infer` turns each value into an element,
//! of the stated type or of the one numpy would infer.
//!
//! Writing (`write`): a `Writer` whose data sink turns whole little-endian elements into text
//! as the copy engine streams them. Floats are printed shortest-round-trip, NaN and
//! infinities as the strings "NaN", "Infinity", "-Infinity", complex numbers as `[re, im]`,
//! so that every value reads back exactly.

mod infer;
mod scan;
mod write;

pub use write::JsonWriter;

use std::fs::File;

use crate::dtype::{ByteOrder, DType};
use crate::error::{Error, InputRef, Result};
use crate::format::{Contents, Found, Layout, TensorInfo, byte_count};
use crate::source::Region;
use crate::spill::{Spill, SpillWriter};
use infer::{Inferred, Leaves, Typed};
use scan::{Fail, Parsed, Parser};

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
/// is in the spill file.
pub fn read(file: &File, len: u64, input: &InputRef, spill: &mut Spill) -> Result<Contents> {
    let region = Region::map(file, 0, len).map_err(|e| input.io_error("map", e))?;
    let mut out = spill.writer(input)?;
    let mut parser = Parser::new(&region);
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
