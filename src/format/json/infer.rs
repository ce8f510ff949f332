//! Elements: each value the walker finds, turned into little-endian bytes in the spill file,
//! of the element type the tensor object states (`Typed`) or of the one numpy.array would
//! infer from all the values (`Inferred`). `fixtures/json/numpy_dtypes.tsv` holds numpy's
//! answers for every mix of bool, int, big int, float and string, and the tests hold the
//! inference to them.

use super::scan::{Fail, Number, Parsed, Scalar, quoted};
use crate::dtype::DType;
use crate::dtype::cast::{narrow_bf16, narrow_f16};
use crate::messages::excerpt;
use crate::sys::spill::SpillWriter;

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
    /// Whether values of other kinds convert as numpy converts them to the type inferred
    /// from all of them (true to 1, a number to its text in a string tensor); a stated type
    /// takes only its own kind.
    pub(super) coerce: bool,
}

/// The value of a float element of type `dtype` (or of one half of a complex). A number past
/// the type's range is refused, or with `overflow` becomes an infinity, as Python's
/// `json.loads` reads `1e400`.
fn float(value: &Scalar<'_>, dtype: &DType, overflow: bool) -> Parsed<f64> {
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
    if !finite && !overflow {
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
        Typed::write(self.out, value, &self.dtype, self.coerce)
    }

    fn pair(&mut self, re: Scalar<'_>, im: Scalar<'_>) -> Parsed<()> {
        let part = match self.dtype {
            DType::Complex64 => DType::Float32,
            _ => DType::Float64,
        };
        let (re, im) = (float(&re, &part, false)?, float(&im, &part, false)?);
        write_float(self.out, re, &part)?;
        write_float(self.out, im, &part)
    }
}

impl Typed<'_, '_> {
    /// Writes one element of type `dtype`; with `coerce`, of a value of another kind too.
    fn write(
        out: &mut SpillWriter<'_>,
        value: Scalar<'_>,
        dtype: &DType,
        coerce: bool,
    ) -> Parsed<()> {
        let value = match value {
            Scalar::Bool(b) if coerce && dtype != &DType::Bool => match dtype {
                DType::Unicode(_) => Scalar::Str(if b { "True" } else { "False" }.into()),
                _ => return Typed::write(out, Scalar::Number(Number::digit(b)), dtype, coerce),
            },
            Scalar::Number(n) if coerce && matches!(dtype, DType::Unicode(_)) => {
                Scalar::Str(number_text(&n).into())
            }
            value => value,
        };
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
                let v = float(&value, dtype, coerce)?;
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
}

/// A number as numpy writes it into a string tensor: an integer's digits (`-0` is 0), a
/// float's Python repr.
fn number_text(n: &Number<'_>) -> String {
    match n.int {
        Some((true, magnitude)) if magnitude > 0 && !n.fraction => format!("-{magnitude}"),
        Some((_, magnitude)) if !n.fraction => magnitude.to_string(),
        _ => python_repr(n.as_str().parse().unwrap_or(f64::NAN)),
    }
}

/// Writes one string element, NUL-padded to `width` characters (UCS-4) or bytes (latin-1).
fn write_string(out: &mut SpillWriter<'_>, s: &str, dtype: &DType, width: u64) -> Parsed<()> {
    let count = s.chars().count() as u64;
    if count > width {
        return Err(Fail::Value(format!(
            "the string {} has {count} characters, more than {dtype} holds",
            quoted(s)
        )));
    }
    match dtype {
        DType::Bytes(_) => {
            for c in s.chars() {
                let byte = u8::try_from(u32::from(c)).map_err(|_| {
                    Fail::Value(format!(
                        "the string {} holds {c:?}, which is not a single byte (write \
                         bytes as the characters U+0000 to U+00FF)",
                        quoted(s)
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

/// One value's element type as `numpy.array` discovers it: a Python bool, an int as int64
/// when it fits and uint64 when only that fits, a float as float64, a str of n characters as
/// U<n>. (An int that fits neither, null, or an object gives numpy an object array, which
/// tjoin refuses.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bool,
    Int,
    UInt,
    Float,
    /// A string of this many characters.
    Str(u64),
}

impl Kind {
    /// `numpy.promote_types` of the two, which `numpy.array` folds over the values in
    /// element order (so `[1, 18446744073709551615, "a"]` is U32, as int64 and uint64
    /// promote to float64 first, while `[1, "a", 18446744073709551615]` is U21).
    fn promote(self, other: Kind) -> Kind {
        match (self, other) {
            (Kind::Str(a), b) | (b, Kind::Str(a)) => Kind::Str(a.max(b.width())),
            (Kind::Bool, b) | (b, Kind::Bool) => b,
            (Kind::Int, Kind::Int) => Kind::Int,
            (Kind::UInt, Kind::UInt) => Kind::UInt,
            _ => Kind::Float,
        }
    }

    /// The characters numpy gives the type as a string: str(False), int64's
    /// -9223372036854775808 and the 21 numpy allows, uint64's 20 digits, a float's 32.
    fn width(self) -> u64 {
        match self {
            Kind::Bool => 5,
            Kind::Int => 21,
            Kind::UInt => 20,
            Kind::Float => 32,
            Kind::Str(n) => n,
        }
    }

    fn dtype(self) -> DType {
        match self {
            Kind::Bool => DType::Bool,
            Kind::Int => DType::Int64,
            Kind::UInt => DType::UInt64,
            Kind::Float => DType::Float64,
            Kind::Str(width) => DType::Unicode(width.max(1)),
        }
    }
}

/// The kind of a JSON number, or why numpy would make an object array of it.
fn number_kind(n: &Number<'_>) -> Parsed<Kind> {
    match n.int {
        _ if n.fraction => Ok(Kind::Float),
        Some((true, magnitude)) if magnitude <= 1 << 63 => Ok(Kind::Int),
        Some((false, magnitude)) if magnitude <= i64::MAX as u64 => Ok(Kind::Int),
        Some((false, _)) => Ok(Kind::UInt),
        _ => {
            let beyond = if n.as_str().starts_with('-') {
                "below the range of int64"
            } else {
                "beyond the range of uint64"
            };
            let digits = excerpt(n.as_str());
            // A number cut short cannot show its rewriting.
            let rewritten = match digits {
                std::borrow::Cow::Borrowed(whole) => format!("{whole}.0"),
                std::borrow::Cow::Owned(_) => "a trailing .0".to_string(),
            };
            Err(Fail::Value(format!(
                "the integer {digits} is {beyond}: numpy.array makes an object array of it, \
                 which tjoin does not join\nhint: write it with a fraction or an exponent \
                 ({rewritten}) to make a float64 tensor"
            )))
        }
    }
}

/// What happens to the elements once the type is known.
pub(super) enum Finished {
    /// They are written, as this type.
    Written(DType),
    /// They must be read again and written as this type: the type changed in a way the
    /// elements already written cannot follow (booleans, 1 byte each, joined by numbers;
    /// anything joined by strings, whose elements are text).
    ReadAgain(DType),
}

/// Elements whose type is inferred as `numpy.array` infers it from the values `json.load`
/// gives, with one exception: the strings "NaN", "Infinity" and "-Infinity" (tjoin's JSON
/// form of those floats) are floats unless other strings make a string tensor. Elements are
/// written as they come while the type allows (int64 becoming float64 is rewritten in
/// place); otherwise the text is read a second time once the type is known.
pub(super) struct Inferred<'w, 's> {
    out: &'w mut SpillWriter<'s>,
    /// numpy's fold, the special strings counted as strings.
    numpy: Option<Kind>,
    /// The same fold, the special strings counted as floats: the type unless an ordinary
    /// string comes.
    with_specials: Option<Kind>,
    /// Whether an ordinary string came.
    strings: bool,
    /// The type of the elements written so far, if they are being written.
    written: Option<Kind>,
    read_again: bool,
}

impl<'w, 's> Inferred<'w, 's> {
    pub(super) fn new(out: &'w mut SpillWriter<'s>) -> Self {
        Inferred {
            out,
            numpy: None,
            with_specials: None,
            strings: false,
            written: None,
            read_again: false,
        }
    }

    /// Makes the elements written so far `to`, when they can follow in place.
    fn follow(&mut self, to: Kind) -> Parsed<bool> {
        match (self.written, to) {
            (None, _) => {}
            (Some(from), to) if from == to => {}
            (Some(from @ (Kind::Int | Kind::UInt)), Kind::Float) => {
                self.out.rewrite(8, |element| {
                    let bits: [u8; 8] = element.try_into().unwrap_or_default();
                    let v = if from == Kind::UInt {
                        u64::from_le_bytes(bits) as f64
                    } else {
                        i64::from_le_bytes(bits) as f64
                    };
                    element.copy_from_slice(&v.to_le_bytes());
                })?;
            }
            _ => return Ok(false),
        }
        self.written = Some(to);
        Ok(true)
    }

    pub(super) fn finish(self) -> Finished {
        let kind = if self.strings {
            self.numpy
        } else {
            self.with_specials
        };
        // An empty array is float64, as numpy makes it.
        let dtype = kind.map_or(DType::Float64, Kind::dtype);
        if self.read_again {
            Finished::ReadAgain(dtype)
        } else {
            Finished::Written(dtype)
        }
    }
}

impl Leaves for Inferred<'_, '_> {
    fn value(&mut self, value: Scalar<'_>) -> Parsed<()> {
        let (kind, special) = match &value {
            Scalar::Bool(_) => (Kind::Bool, None),
            Scalar::Number(n) => (number_kind(n)?, None),
            Scalar::Str(s) => (Kind::Str(s.chars().count() as u64), special_float(s)),
        };
        let fold = |acc: Option<Kind>, kind: Kind| Some(acc.map_or(kind, |a| a.promote(kind)));
        self.numpy = fold(self.numpy, kind);
        let as_float = if special.is_some() { Kind::Float } else { kind };
        self.with_specials = fold(self.with_specials, as_float);
        self.strings |= matches!(kind, Kind::Str(_)) && special.is_none();
        if self.read_again {
            return Ok(());
        }
        let to = match self.with_specials {
            Some(to) if !self.strings && !matches!(to, Kind::Str(_)) => to,
            _ => {
                self.read_again = true;
                return Ok(());
            }
        };
        if !self.follow(to)? {
            self.read_again = true;
            return Ok(());
        }
        Typed::write(self.out, value, &to.dtype(), true)
    }

    fn pair(&mut self, _: Scalar<'_>, _: Scalar<'_>) -> Parsed<()> {
        Err(Fail::Value(
            "complex values need a stated complex dtype".to_string(),
        ))
    }
}

/// A float as Python's repr writes it, and so numpy's conversion to a string: the shortest
/// digits that read back, positional from 1e-4 to below 1e16 (with at least one digit after
/// the point), scientific outside (`1e+16`, `1e-05`), and `inf`, `-inf`, `nan`.
pub(super) fn python_repr(v: f64) -> String {
    if v.is_nan() {
        return "nan".to_string();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    let scientific = format!("{v:e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if !(-4..16).contains(&exponent) {
        let (first, rest) = digits.split_at(1);
        let point = if rest.is_empty() { "" } else { "." };
        let exp_sign = if exponent < 0 { '-' } else { '+' };
        return format!("{sign}{first}{point}{rest}e{exp_sign}{:02}", exponent.abs());
    }
    if exponent < 0 {
        let zeros = "0".repeat((-exponent - 1) as usize);
        return format!("{sign}0.{zeros}{digits}");
    }
    let whole = exponent as usize + 1;
    if digits.len() <= whole {
        format!("{sign}{digits}{}.0", "0".repeat(whole - digits.len()))
    } else {
        format!("{sign}{}.{}", &digits[..whole], &digits[whole..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_as_python_repr_does() {
        let cases: &[(f64, &str)] = &[
            (1.5, "1.5"),
            (1.0, "1.0"),
            (-0.0, "-0.0"),
            (0.0, "0.0"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (0.00012345, "0.00012345"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (0.1, "0.1"),
            (1.0 / 3.0, "0.3333333333333333"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
            (-2.5e-7, "-2.5e-07"),
            (18446744073709551615.0, "1.8446744073709552e+19"),
        ];
        for &(v, text) in cases {
            assert_eq!(python_repr(v), text, "{v:?}");
        }
    }

    #[test]
    fn promotion_follows_numpy() {
        use Kind::*;
        assert_eq!(Bool.promote(Int), Int);
        assert_eq!(Int.promote(UInt), Float);
        assert_eq!(UInt.promote(Bool), UInt);
        assert_eq!(Int.promote(Str(1)), Str(21));
        assert_eq!(Str(1).promote(UInt), Str(20));
        assert_eq!(Float.promote(Str(40)), Str(40));
        assert_eq!(Bool.promote(Str(1)), Str(5));
    }
}
