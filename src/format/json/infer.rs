//! Elements: each value the walker finds, turned into little-endian bytes in the spill file,
//! of the element type the tensor object states (`Typed`) or of the one numpy.array would
//! infer from all the values (`Inferred`).

use super::scan::{Fail, Number, Parsed, Scalar};
use crate::cast::{narrow_bf16, narrow_f16};
use crate::dtype::DType;
use crate::spill::SpillWriter;

/// Receives the elements the walker finds, in C order.
pub(super) trait Leaves {
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
pub(super) struct Typed<'w, 's> {
    pub(super) out: &'w mut SpillWriter<'s>,
    pub(super) dtype: DType,
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
pub(super) struct Inferred<'w, 's> {
    out: &'w mut SpillWriter<'s>,
    kind: Kind,
    strings: Vec<String>,
    width: u64,
}

impl<'w, 's> Inferred<'w, 's> {
    pub(super) fn new(out: &'w mut SpillWriter<'s>) -> Self {
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

    pub(super) fn finish(self) -> Parsed<DType> {
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
