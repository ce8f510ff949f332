//! Element type conversions for `--cast`, done by the copy engine on its single pass, and the
//! type numpy would promote a mix of input types to (for the hint when `--cast` is missing).
//!
//! Conversions follow numpy's `astype` where it is lossless or merely rounds: floats narrow
//! to the nearest value (overflow gives infinity), integers widen to floats with rounding,
//! anything non-zero is `true`. Where numpy would silently wrap (an integer out of range of
//! the target, or a float that is not finite or out of range for an integer type), tjoin
//! refuses and says which element.

use half::{bf16, f16};

use crate::dtype::DType;

/// The types `--cast` converts from and to, as messages list them: the names of `NUMERIC`.
pub const CAST_TYPES: &str = "bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, \
                              float16, bfloat16, float32, float64";

/// The types `--cast` converts between.
const NUMERIC: [DType; 13] = [
    DType::Bool,
    DType::Int8,
    DType::Int16,
    DType::Int32,
    DType::Int64,
    DType::UInt8,
    DType::UInt16,
    DType::UInt32,
    DType::UInt64,
    DType::Float16,
    DType::BFloat16,
    DType::Float32,
    DType::Float64,
];

/// Whether `--cast` converts between these types: the numeric types of `CAST_TYPES`.
pub fn castable(from: &DType, to: &DType) -> bool {
    NUMERIC.contains(from) && NUMERIC.contains(to)
}

/// The first element a conversion refused.
#[derive(Debug, Clone, PartialEq)]
pub struct CastError {
    /// Its index among the elements passed to `convert`.
    pub index: usize,
    /// Its value, as text.
    pub value: String,
    /// Why it cannot be converted.
    pub reason: String,
}

/// One element on its way from one type to another; holds every castable value exactly.
#[derive(Clone, Copy)]
enum Value {
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
}

impl Value {
    fn text(self) -> String {
        match self {
            Value::Bool(b) => b.to_string(),
            Value::Int(v) => v.to_string(),
            Value::UInt(v) => v.to_string(),
            Value::Float(v) => format!("{v:?}"),
        }
    }
}

/// Converts the whole little-endian elements of type `from` in `src` to type `to`, appending
/// them to `dst`. Both types must be `castable`. On a refused element, `dst` holds the
/// elements before it.
pub fn convert(from: &DType, to: &DType, src: &[u8], dst: &mut Vec<u8>) -> Result<(), CastError> {
    if widen(from, to, src, dst) {
        return Ok(());
    }
    let size = from.itemsize() as usize;
    dst.reserve(src.len() / size.max(1) * to.itemsize() as usize);
    for (index, element) in src.chunks_exact(size).enumerate() {
        let value = read(from, element);
        write(to, value, dst).map_err(|reason| CastError {
            index,
            value: value.text(),
            reason,
        })?;
    }
    Ok(())
}

/// Casts that can neither fail nor round (a float16 to float32, an int32 to int64, ...), done
/// a block at a time in loops the compiler vectorizes; the general path takes every element
/// through `Value`, several times slower. Returns false for other pairs.
fn widen(from: &DType, to: &DType, src: &[u8], dst: &mut Vec<u8>) -> bool {
    macro_rules! pairs {
        ($(($a:ident, $b:ident, $from:ty, $to:ty)),* $(,)?) => {
            match (from, to) {
                (DType::Float16, DType::Float32) => widen_f16(src, dst),
                $((DType::$a, DType::$b) => widen_as::<$from, $to>(src, dst, |v| v as $to),)*
                _ => return false,
            }
        };
    }
    pairs!(
        (Int8, Int16, i8, i16),
        (Int8, Int32, i8, i32),
        (Int8, Int64, i8, i64),
        (Int16, Int32, i16, i32),
        (Int16, Int64, i16, i64),
        (Int32, Int64, i32, i64),
        (UInt8, UInt16, u8, u16),
        (UInt8, UInt32, u8, u32),
        (UInt8, UInt64, u8, u64),
        (UInt8, Int16, u8, i16),
        (UInt8, Int32, u8, i32),
        (UInt8, Int64, u8, i64),
        (UInt16, UInt32, u16, u32),
        (UInt16, UInt64, u16, u64),
        (UInt16, Int32, u16, i32),
        (UInt16, Int64, u16, i64),
        (UInt32, UInt64, u32, u64),
        (UInt32, Int64, u32, i64),
        (Int8, Float32, i8, f32),
        (Int16, Float32, i16, f32),
        (UInt8, Float32, u8, f32),
        (UInt16, Float32, u16, f32),
        (Int32, Float64, i32, f64),
        (UInt32, Float64, u32, f64),
        (Float32, Float64, f32, f64),
    );
    true
}

/// Little-endian bytes of a number type.
trait Le: Sized + Copy {
    const SIZE: usize;
    fn read(bytes: &[u8]) -> Self;
    fn write(self, out: &mut [u8]);
}

macro_rules! le {
    ($($t:ty),*) => {$(
        impl Le for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn read(bytes: &[u8]) -> Self {
                <$t>::from_le_bytes(bytes.try_into().expect("whole elements"))
            }
            fn write(self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}
le!(i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);

fn widen_as<F: Le, T: Le>(src: &[u8], dst: &mut Vec<u8>, cast: impl Fn(F) -> T) {
    let start = dst.len();
    dst.resize(start + src.len() / F::SIZE * T::SIZE, 0);
    for (out, element) in dst[start..]
        .chunks_exact_mut(T::SIZE)
        .zip(src.chunks_exact(F::SIZE))
    {
        cast(F::read(element)).write(out);
    }
}

/// float16 to float32 through `half`'s slice conversion, which uses the processor's F16C
/// instructions when it has them.
fn widen_f16(src: &[u8], dst: &mut Vec<u8>) {
    use half::slice::HalfFloatSliceExt;
    const BLOCK: usize = 1024;
    let (mut halves, mut floats) = ([f16::ZERO; BLOCK], [0f32; BLOCK]);
    for block in src.chunks(2 * BLOCK) {
        let n = block.len() / 2;
        for (half, bytes) in halves.iter_mut().zip(block.chunks_exact(2)) {
            *half = f16::from_le_bytes([bytes[0], bytes[1]]);
        }
        halves[..n].convert_to_f32_slice(&mut floats[..n]);
        let start = dst.len();
        dst.resize(start + 4 * n, 0);
        for (out, float) in dst[start..].chunks_exact_mut(4).zip(&floats[..n]) {
            out.copy_from_slice(&float.to_le_bytes());
        }
    }
}

fn read(dtype: &DType, b: &[u8]) -> Value {
    let le2 = || [b[0], b[1]];
    let le4 = || [b[0], b[1], b[2], b[3]];
    let le8 = || [b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]];
    match dtype {
        DType::Bool => Value::Bool(b[0] != 0),
        DType::Int8 => Value::Int(i64::from(b[0] as i8)),
        DType::Int16 => Value::Int(i64::from(i16::from_le_bytes(le2()))),
        DType::Int32 => Value::Int(i64::from(i32::from_le_bytes(le4()))),
        DType::Int64 => Value::Int(i64::from_le_bytes(le8())),
        DType::UInt8 => Value::UInt(u64::from(b[0])),
        DType::UInt16 => Value::UInt(u64::from(u16::from_le_bytes(le2()))),
        DType::UInt32 => Value::UInt(u64::from(u32::from_le_bytes(le4()))),
        DType::UInt64 => Value::UInt(u64::from_le_bytes(le8())),
        DType::Float16 => Value::Float(f16::from_le_bytes(le2()).to_f64()),
        DType::BFloat16 => Value::Float(bf16::from_le_bytes(le2()).to_f64()),
        DType::Float32 => Value::Float(f64::from(f32::from_le_bytes(le4()))),
        _ => Value::Float(f64::from_le_bytes(le8())),
    }
}

fn write(dtype: &DType, value: Value, dst: &mut Vec<u8>) -> Result<(), String> {
    let (min, max): (i128, i128) = match dtype {
        DType::Bool => {
            let truth = match value {
                Value::Bool(b) => b,
                Value::Int(v) => v != 0,
                Value::UInt(v) => v != 0,
                Value::Float(v) => v != 0.0,
            };
            dst.push(u8::from(truth));
            return Ok(());
        }
        DType::Float16 => {
            dst.extend_from_slice(&narrow_f16(as_f64(value)).to_le_bytes());
            return Ok(());
        }
        DType::BFloat16 => {
            dst.extend_from_slice(&narrow_bf16(as_f64(value)).to_le_bytes());
            return Ok(());
        }
        DType::Float32 => {
            // Each `as` rounds once, to nearest, from the exact value.
            let v = match value {
                Value::Bool(b) => f32::from(u8::from(b)),
                Value::Int(v) => v as f32,
                Value::UInt(v) => v as f32,
                Value::Float(v) => v as f32,
            };
            dst.extend_from_slice(&v.to_le_bytes());
            return Ok(());
        }
        DType::Float64 => {
            dst.extend_from_slice(&as_f64(value).to_le_bytes());
            return Ok(());
        }
        // `castable` leaves only the integer types.
        int_type => int_type
            .int_range()
            .ok_or_else(|| format!("--cast does not write {dtype}"))?,
    };
    let integer: i128 = match value {
        Value::Bool(b) => i128::from(b),
        Value::Int(v) => i128::from(v),
        Value::UInt(v) => i128::from(v),
        Value::Float(v) if !v.is_finite() => {
            return Err(format!("not finite, which {dtype} cannot hold"));
        }
        // Every integer type's bounds and every truncated float of this size are exact in
        // f64, so the comparison is exact; numpy's astype truncates toward zero too.
        Value::Float(v) if v.trunc() < min as f64 || v.trunc() > max as f64 => i128::MAX,
        Value::Float(v) => v.trunc() as i128,
    };
    if integer < min || integer > max {
        return Err(format!("out of the range of {dtype} ({min} to {max})"));
    }
    let bytes = integer.to_le_bytes();
    dst.extend_from_slice(&bytes[..dtype.itemsize() as usize]);
    Ok(())
}

fn as_f64(value: Value) -> f64 {
    match value {
        Value::Bool(b) => f64::from(u8::from(b)),
        Value::Int(v) => v as f64,
        Value::UInt(v) => v as f64,
        Value::Float(v) => v,
    }
}

/// `v` rounded to the nearest float16 (ties to even, overflow to infinity).
pub fn narrow_f16(v: f64) -> f16 {
    f16::from_bits(narrow(v, 5, 10))
}

/// `v` rounded to the nearest bfloat16 (ties to even, overflow to infinity).
pub fn narrow_bf16(v: f64) -> bf16 {
    bf16::from_bits(narrow(v, 8, 7))
}

/// The bits of the binary float with `exp_bits` exponent and `man_bits` mantissa bits
/// nearest to `v`, rounding once from the exact value. (`half`'s own f64 conversions drop
/// the low 32 bits first, which rounds some ties the wrong way.)
fn narrow(v: f64, exp_bits: u32, man_bits: u32) -> u16 {
    let sign = ((v.to_bits() >> 63) as u16) << (exp_bits + man_bits);
    let all_ones = (1u16 << exp_bits) - 1;
    if v.is_nan() {
        return sign | (all_ones << man_bits) | (1 << (man_bits - 1));
    }
    let bits = v.to_bits();
    let field = ((bits >> 52) & 0x7ff) as i64;
    if field == 0x7ff {
        return sign | (all_ones << man_bits);
    }
    if field == 0 {
        // Zero, or an f64 subnormal: far below half the smallest subnormal of either target.
        return sign;
    }
    let bias = i64::from(all_ones >> 1);
    let mantissa = (1u64 << 52) | (bits & ((1 << 52) - 1));
    let exponent = field - 1023;
    let min_exponent = 1 - bias;
    let shift = 52 - i64::from(man_bits) + (min_exponent - exponent).max(0);
    if shift >= 54 {
        return sign;
    }
    let shift = shift as u32;
    let mut q = mantissa >> shift;
    let rest = mantissa & ((1u64 << shift) - 1);
    let half = 1u64 << (shift - 1);
    if rest > half || (rest == half && q & 1 == 1) {
        q += 1;
    }
    if exponent < min_exponent {
        // Subnormal; a carry into bit `man_bits` makes it the smallest normal, as it should.
        return sign | q as u16;
    }
    let mut biased = exponent + bias;
    if q >> (man_bits + 1) != 0 {
        q >>= 1;
        biased += 1;
    }
    if biased >= i64::from(all_ones) {
        return sign | (all_ones << man_bits);
    }
    sign | ((biased as u16) << man_bits) | (q as u16 & ((1 << man_bits) - 1))
}

/// The type `numpy.result_type` gives for a mix of these types, for the numeric ones.
pub fn promote_all<'a>(dtypes: impl IntoIterator<Item = &'a DType>) -> Option<DType> {
    let mut dtypes = dtypes.into_iter();
    let first = dtypes.next()?.clone();
    dtypes.try_fold(first, |a, b| promote(&a, b))
}

/// numpy's promotion of two numeric types (bfloat16 as ml_dtypes promotes it).
fn promote(a: &DType, b: &DType) -> Option<DType> {
    use Kind::*;
    if a == b {
        return Some(a.clone());
    }
    let (ka, kb) = (kind(a)?, kind(b)?);
    let (sa, sb) = (a.itemsize(), b.itemsize());
    Some(match (ka, kb) {
        (Bool, _) => b.clone(),
        (_, Bool) => a.clone(),
        (Signed, Signed) | (Unsigned, Unsigned) => (if sa >= sb { a } else { b }).clone(),
        (Signed, Unsigned) | (Unsigned, Signed) => {
            let (signed, unsigned) = if ka == Signed { (sa, sb) } else { (sb, sa) };
            if signed > unsigned {
                int_of(signed)
            } else if unsigned < 8 {
                int_of(unsigned * 2)
            } else {
                DType::Float64
            }
        }
        (Signed | Unsigned, Float) => float_max(&float_for_int(sa), b),
        (Float, Signed | Unsigned) => float_max(a, &float_for_int(sb)),
        (Float, Float) => float_max(a, b),
        (Complex, _) | (_, Complex) => {
            let part = |d: &DType, k: Kind| match k {
                Complex if d.itemsize() == 8 => DType::Float32,
                Complex => DType::Float64,
                Signed | Unsigned => float_for_int(d.itemsize()),
                _ => d.clone(),
            };
            match float_max(&part(a, ka), &part(b, kb)) {
                DType::Float64 => DType::Complex128,
                _ => DType::Complex64,
            }
        }
    })
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Bool,
    Signed,
    Unsigned,
    Float,
    Complex,
}

fn kind(dtype: &DType) -> Option<Kind> {
    Some(match dtype {
        DType::Bool => Kind::Bool,
        DType::Int8 | DType::Int16 | DType::Int32 | DType::Int64 => Kind::Signed,
        DType::UInt8 | DType::UInt16 | DType::UInt32 | DType::UInt64 => Kind::Unsigned,
        DType::Float16 | DType::BFloat16 | DType::Float32 | DType::Float64 => Kind::Float,
        DType::Complex64 | DType::Complex128 => Kind::Complex,
        _ => return None,
    })
}

fn int_of(size: u64) -> DType {
    match size {
        1 => DType::Int8,
        2 => DType::Int16,
        4 => DType::Int32,
        _ => DType::Int64,
    }
}

/// The smallest float numpy promotes an integer of this size to.
fn float_for_int(size: u64) -> DType {
    match size {
        1 => DType::Float16,
        2 => DType::Float32,
        _ => DType::Float64,
    }
}

/// The wider of two floats; float16 and bfloat16 meet in float32.
fn float_max(a: &DType, b: &DType) -> DType {
    match (a, b) {
        (DType::Float16, DType::BFloat16) | (DType::BFloat16, DType::Float16) => DType::Float32,
        _ if a.itemsize() >= b.itemsize() => a.clone(),
        _ => b.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cast(from: &DType, to: &DType, src: &[u8]) -> Result<Vec<u8>, CastError> {
        let mut out = Vec::new();
        convert(from, to, src, &mut out).map(|()| out)
    }

    #[test]
    fn cast_types_lists_every_castable_type() {
        let names: Vec<String> = NUMERIC.iter().map(DType::to_string).collect();
        assert_eq!(CAST_TYPES, names.join(", "));
    }

    #[test]
    fn widening_fast_paths_agree_with_the_general_path() {
        let types = NUMERIC;
        // Every byte pattern of the first bytes, then a pseudo-random tail (NaN payloads,
        // subnormals and infinities of float16 included).
        let mut bytes: Vec<u8> = (0..=255u8).flat_map(|b| [b, b.wrapping_mul(31)]).collect();
        let mut x = 0x9E37_79B9u32;
        bytes.extend((0..4096).map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        }));
        let mut checked = 0;
        for from in &types {
            for to in &types {
                let size = from.itemsize() as usize;
                let src = &bytes[..bytes.len() / size * size];
                let mut fast = Vec::new();
                if !widen(from, to, src, &mut fast) {
                    continue;
                }
                let mut general = Vec::new();
                for element in src.chunks_exact(size) {
                    write(to, read(from, element), &mut general).unwrap();
                }
                assert_eq!(fast, general, "{from} -> {to}");
                checked += 1;
            }
        }
        assert_eq!(checked, 26);
    }

    #[test]
    fn narrowing_matches_half_on_every_float32_pattern_sampled() {
        // half's f32 conversions round correctly; ours must agree with them.
        let mut x: u32 = 0x1234_5678;
        for _ in 0..200_000 {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let v = f32::from_bits(x);
            if v.is_nan() {
                continue;
            }
            assert_eq!(narrow_f16(f64::from(v)), f16::from_f32(v), "{v:e}");
            assert_eq!(narrow_bf16(f64::from(v)), bf16::from_f32(v), "{v:e}");
        }
    }

    #[test]
    fn narrowing_rounds_ties_to_even_and_sticky_bits_up() {
        // 1 + 2^-11 is a tie between 1 and 1 + 2^-10: even wins.
        assert_eq!(narrow_f16(1.0 + 2f64.powi(-11)).to_f64(), 1.0);
        // A hair above the tie, far below f32 precision: rounds up.
        let above = 1.0 + 2f64.powi(-11) + 2f64.powi(-50);
        assert_eq!(narrow_f16(above).to_f64(), 1.0 + 2f64.powi(-10));
        assert_eq!(narrow_f16(65520.0), f16::INFINITY);
        assert_eq!(narrow_f16(65519.0).to_f64(), 65504.0);
        assert_eq!(narrow_f16(-1e-9).to_bits(), 0x8000);
        assert_eq!(narrow_bf16(1e39), bf16::INFINITY);
        assert!(narrow_bf16(f64::NAN).is_nan());
    }

    #[test]
    fn integers_narrow_only_within_range() {
        let src: Vec<u8> = [1i32, -128, 127]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(
            cast(&DType::Int32, &DType::Int8, &src).unwrap(),
            [1u8, 0x80, 0x7f]
        );
        let src: Vec<u8> = [5i16, 300].iter().flat_map(|v| v.to_le_bytes()).collect();
        let error = cast(&DType::Int16, &DType::Int8, &src).unwrap_err();
        assert_eq!((error.index, error.value.as_str()), (1, "300"));
        assert!(error.reason.contains("-128 to 127"), "{}", error.reason);
        let error = cast(&DType::Int8, &DType::UInt8, &[0xff]).unwrap_err();
        assert_eq!(error.value, "-1");
    }

    #[test]
    fn floats_truncate_to_integers_and_refuse_the_rest() {
        let src: Vec<u8> = [2.9f64, -2.9, 255.5]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(
            cast(&DType::Float64, &DType::Int16, &src).unwrap(),
            [2, 0, 0xfe, 0xff, 255, 0]
        );
        for bad in [f64::NAN, f64::INFINITY, 256.0, 9.3e18] {
            let error = cast(&DType::Float64, &DType::UInt8, &bad.to_le_bytes()).unwrap_err();
            assert_eq!(error.index, 0, "{bad}");
        }
        let big = 9_223_372_036_854_775_808f64.to_le_bytes();
        assert!(cast(&DType::Float64, &DType::Int64, &big).is_err());
        assert_eq!(
            cast(&DType::Float64, &DType::UInt64, &big).unwrap(),
            (1u64 << 63).to_le_bytes()
        );
    }

    #[test]
    fn bool_is_nonzero_and_widens_to_one() {
        let src: Vec<u8> = [0.0f32, -0.0, 0.5, f32::NAN]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(
            cast(&DType::Float32, &DType::Bool, &src).unwrap(),
            [0, 0, 1, 1]
        );
        assert_eq!(
            cast(&DType::Bool, &DType::Float32, &[1, 0]).unwrap(),
            [0, 0, 0x80, 0x3f, 0, 0, 0, 0]
        );
    }

    #[test]
    fn promotion_follows_numpy_result_type() {
        let p = |a: DType, b: DType| promote_all([&a, &b]).unwrap();
        assert_eq!(p(DType::Float16, DType::Float32), DType::Float32);
        assert_eq!(p(DType::Int8, DType::UInt8), DType::Int16);
        assert_eq!(p(DType::Int64, DType::UInt64), DType::Float64);
        assert_eq!(p(DType::Int16, DType::Float16), DType::Float32);
        assert_eq!(p(DType::UInt8, DType::Float16), DType::Float16);
        assert_eq!(p(DType::Int32, DType::Float32), DType::Float64);
        assert_eq!(p(DType::Bool, DType::Int8), DType::Int8);
        assert_eq!(p(DType::Complex64, DType::Float64), DType::Complex128);
        assert_eq!(p(DType::Float16, DType::BFloat16), DType::Float32);
        assert_eq!(promote_all([&DType::Int8, &DType::Unicode(3)]), None);
    }
}
