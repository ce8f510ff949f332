//! Element types: one `DType` for every element type tjoin handles, its byte order, and its
//! names in each format's notation (numpy's `descr`, safetensors' dtype strings).

pub mod cast;

use std::fmt;

/// The byte order of a tensor's elements as stored in its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteOrder {
    /// Least significant byte first (`<` in numpy), what every machine tjoin runs on uses.
    Little,
    /// Most significant byte first (`>` in numpy).
    Big,
    /// Single bytes, byte strings and records have no byte order of their own (`|` in numpy).
    NotApplicable,
}

impl ByteOrder {
    /// numpy's one-character prefix for this byte order.
    pub fn npy_char(self) -> char {
        match self {
            ByteOrder::Little => '<',
            ByteOrder::Big => '>',
            ByteOrder::NotApplicable => '|',
        }
    }
}

/// A datetime64 or timedelta64 unit as the file names it (`ns`, `D`). A boxed `String`, one
/// word where a `Box<str>` is two, so that a [`DType`] is two words: every tensor and every
/// input's plan holds one, and a join may have 100,000 of them.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(clippy::box_collection, reason = "one word where a String is three")]
pub struct TimeUnit(Box<String>);

impl From<&str> for TimeUnit {
    fn from(unit: &str) -> TimeUnit {
        TimeUnit(Box::new(unit.to_string()))
    }
}

impl fmt::Display for TimeUnit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An element type. Multi-byte types carry their byte order beside them, in `ByteOrder`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DType {
    /// One byte, 0 or 1.
    Bool,
    /// Signed integer of 8, 16, 32 or 64 bits.
    Int8,
    #[allow(missing_docs)]
    Int16,
    #[allow(missing_docs)]
    Int32,
    #[allow(missing_docs)]
    Int64,
    /// Unsigned integer of 8, 16, 32 or 64 bits.
    UInt8,
    #[allow(missing_docs)]
    UInt16,
    #[allow(missing_docs)]
    UInt32,
    #[allow(missing_docs)]
    UInt64,
    /// IEEE 754 binary16, binary32, binary64.
    Float16,
    #[allow(missing_docs)]
    Float32,
    #[allow(missing_docs)]
    Float64,
    /// numpy's `longdouble` as stored on x86-64: 80-bit extended precision padded to 16 bytes.
    Float128,
    /// Two float32 (real, imaginary).
    Complex64,
    /// Two float64 (real, imaginary).
    Complex128,
    /// Two float128 (real, imaginary).
    Complex256,
    /// 64-bit count of the given unit since the epoch, e.g. `ns` or `D`.
    DateTime64(TimeUnit),
    /// 64-bit count of the given unit, e.g. `s`.
    TimeDelta64(TimeUnit),
    /// Fixed-width byte string of this many bytes (numpy `S`).
    Bytes(u64),
    /// Fixed-width UCS-4 string of this many characters (numpy `U`).
    Unicode(u64),
    /// Opaque bytes of this many bytes (numpy `V`).
    Void(u64),
    /// A structured (record) type, kept exactly as the file declares it (boxed, with the
    /// units above: every tensor and every input's plan holds a `DType`, and a join may have
    /// 100,000 of them).
    Record(Box<Record>),
    /// bfloat16: the upper half of a float32 (safetensors `BF16`).
    BFloat16,
    /// 8-bit floats of the OCP and AMD (`fnuz`) families, as safetensors names them:
    /// `F8_E4M3` (torch's float8_e4m3fn), `F8_E5M2`, `F8_E8M0` (a power-of-two scale),
    /// `F8_E4M3FNUZ`, `F8_E5M2FNUZ`.
    Float8E4M3,
    #[allow(missing_docs)]
    Float8E5M2,
    #[allow(missing_docs)]
    Float8E8M0,
    #[allow(missing_docs)]
    Float8E4M3Fnuz,
    #[allow(missing_docs)]
    Float8E5M2Fnuz,
    /// 4-bit float (e2m1, safetensors `F4`), two to a byte.
    Float4,
    /// 6-bit floats (safetensors `F6_E2M3`, `F6_E3M2`), four to three bytes.
    Float6E2M3,
    #[allow(missing_docs)]
    Float6E3M2,
}

/// One element type without parameters and its name in each vocabulary tjoin speaks: the
/// one table of type names. `None` where a vocabulary has no name for the type.
struct Names {
    dtype: DType,
    /// numpy's name (`float32`), or for the types numpy lacks the name torch and ml_dtypes
    /// give them (`bfloat16`, `float8_e4m3fn`): what `Display` writes and `from_name` reads.
    numpy: &'static str,
    /// numpy's type code in a `descr`, after the byte order (`f4`); `None` where numpy has no
    /// such type, so that .npy and .npz cannot hold it.
    descr: Option<&'static str>,
    /// safetensors' dtype string (`F32`).
    safetensors: Option<&'static str>,
    /// ONNX's name (`tensor(float)` is `float`).
    onnx: Option<&'static str>,
    /// OpenVINO's element type name (`f32`, `boolean`).
    openvino: Option<&'static str>,
    /// DirectML's tensor data type (`FLOAT32`).
    directml: Option<&'static str>,
}

/// A row of [`NAMES`]: the type, then its names for numpy (name, `descr` code), safetensors,
/// ONNX, OpenVINO and DirectML, `-` where there is none.
macro_rules! names {
    ($dtype:ident, $numpy:literal, $descr:tt, $safetensors:tt, $onnx:tt, $openvino:tt,
     $directml:tt) => {
        Names {
            dtype: DType::$dtype,
            numpy: $numpy,
            descr: names!(@ $descr),
            safetensors: names!(@ $safetensors),
            onnx: names!(@ $onnx),
            openvino: names!(@ $openvino),
            directml: names!(@ $directml),
        }
    };
    (@ -) => {
        None
    };
    (@ $name:literal) => {
        Some($name)
    };
}

/// Every element type without parameters (datetime64 and timedelta64 have a unit, strings,
/// void and records a width: `DType`'s methods name those). The types safetensors has come
/// first, in the order of its `Dtype` enum (ascending alignment), which is also the order its
/// writer sorts tensors by (descending): [`DType::safetensors_rank`] counts them.
#[rustfmt::skip]
const NAMES: [Names; 25] = [
    //     type            numpy              descr  safetensors    ONNX          OpenVINO   DirectML
    names!(Bool,           "bool",            "b1",  "BOOL",        "bool",       "boolean", -),
    names!(Float4,         "float4_e2m1fn",   -,     "F4",          -,            -,         -),
    names!(Float6E2M3,     "float6_e2m3fn",   -,     "F6_E2M3",     -,            -,         -),
    names!(Float6E3M2,     "float6_e3m2fn",   -,     "F6_E3M2",     -,            -,         -),
    names!(UInt8,          "uint8",           "u1",  "U8",          "uint8",      "u8",      "UINT8"),
    names!(Int8,           "int8",            "i1",  "I8",          "int8",       "i8",      "INT8"),
    names!(Float8E5M2,     "float8_e5m2",     -,     "F8_E5M2",     -,            "f8e5m2",  -),
    names!(Float8E4M3,     "float8_e4m3fn",   -,     "F8_E4M3",     -,            "f8e4m3",  -),
    names!(Float8E8M0,     "float8_e8m0fnu",  -,     "F8_E8M0",     -,            -,         -),
    names!(Float8E4M3Fnuz, "float8_e4m3fnuz", -,     "F8_E4M3FNUZ", -,            -,         -),
    names!(Float8E5M2Fnuz, "float8_e5m2fnuz", -,     "F8_E5M2FNUZ", -,            -,         -),
    names!(Int16,          "int16",           "i2",  "I16",         "int16",      "i16",     "INT16"),
    names!(UInt16,         "uint16",          "u2",  "U16",         "uint16",     "u16",     "UINT16"),
    names!(Float16,        "float16",         "f2",  "F16",         "float16",    "f16",     "FLOAT16"),
    names!(BFloat16,       "bfloat16",        -,     "BF16",        "bfloat16",   "bf16",    -),
    names!(Int32,          "int32",           "i4",  "I32",         "int32",      "i32",     "INT32"),
    names!(UInt32,         "uint32",          "u4",  "U32",         "uint32",     "u32",     "UINT32"),
    names!(Float32,        "float32",         "f4",  "F32",         "float",      "f32",     "FLOAT32"),
    names!(Complex64,      "complex64",       "c8",  "C64",         "complex64",  -,         -),
    names!(Float64,        "float64",         "f8",  "F64",         "double",     "f64",     "FLOAT64"),
    names!(Int64,          "int64",           "i8",  "I64",         "int64",      "i64",     "INT64"),
    names!(UInt64,         "uint64",          "u8",  "U64",         "uint64",     "u64",     "UINT64"),
    names!(Float128,       "float128",        "f16", -,             -,            -,         -),
    names!(Complex128,     "complex128",      "c16", -,             "complex128", -,         -),
    names!(Complex256,     "complex256",      "c32", -,             -,            -,         -),
];

/// A structured dtype. Two records join only when they are identical, byte orders included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The record as npyz parsed it.
    pub layout: npyz::DType,
    /// Bytes per element.
    pub itemsize: u64,
}

impl DType {
    /// Bytes one element occupies. Sub-byte types (see [`DType::bits`]) count as 1: the copy
    /// engine moves them in whole bytes, and the join rules make sure every run of them
    /// starts and ends on a byte boundary.
    pub fn itemsize(&self) -> u64 {
        match self {
            DType::Bool | DType::Int8 | DType::UInt8 => 1,
            DType::Float8E4M3 | DType::Float8E5M2 | DType::Float8E8M0 => 1,
            DType::Float8E4M3Fnuz | DType::Float8E5M2Fnuz => 1,
            DType::Float4 | DType::Float6E2M3 | DType::Float6E3M2 => 1,
            DType::BFloat16 => 2,
            DType::Int16 | DType::UInt16 | DType::Float16 => 2,
            DType::Int32 | DType::UInt32 | DType::Float32 => 4,
            DType::Int64 | DType::UInt64 | DType::Float64 | DType::Complex64 => 8,
            DType::DateTime64(_) | DType::TimeDelta64(_) => 8,
            DType::Float128 | DType::Complex128 => 16,
            DType::Complex256 => 32,
            DType::Bytes(n) | DType::Void(n) => *n,
            DType::Unicode(chars) => chars.saturating_mul(4),
            DType::Record(record) => record.itemsize,
        }
    }

    /// Bits one element occupies: 8 times [`DType::itemsize`], except 4 and 6 for the
    /// sub-byte floats, which are packed without padding.
    pub fn bits(&self) -> u64 {
        match self {
            DType::Float4 => 4,
            DType::Float6E2M3 | DType::Float6E3M2 => 6,
            other => other.itemsize().saturating_mul(8),
        }
    }

    /// The bytes `elements` elements occupy, or `None` when they end inside a byte (sub-byte
    /// types) or the count overflows.
    pub fn bytes_for(&self, elements: u64) -> Option<u64> {
        let bits = elements.checked_mul(self.bits())?;
        (bits % 8 == 0).then_some(bits / 8)
    }

    /// The row of [`NAMES`] for this type, if it has no parameters.
    fn names(&self) -> Option<&'static Names> {
        NAMES.iter().find(|row| row.dtype == *self)
    }

    /// safetensors' name for the type (`F32`, `BF16`, ...), if the format has one.
    pub fn safetensors_name(&self) -> Option<&'static str> {
        self.names()?.safetensors
    }

    /// The type a safetensors dtype string names.
    pub fn from_safetensors(name: &str) -> Option<DType> {
        NAMES
            .iter()
            .find(|row| row.safetensors == Some(name))
            .map(|row| row.dtype.clone())
    }

    /// The type's rank in safetensors' alignment order (its `Dtype` enum order): the
    /// safetensors writer puts tensors of higher rank first.
    pub fn safetensors_rank(&self) -> Option<usize> {
        NAMES
            .iter()
            .filter(|row| row.safetensors.is_some())
            .position(|row| row.dtype == *self)
    }

    /// Whether numpy has a `descr` for the type, so that .npy and .npz can hold it. numpy
    /// itself has no bfloat16, float8, float6 or float4.
    pub fn in_npy(&self) -> bool {
        self.names().is_none_or(|row| row.descr.is_some())
    }

    /// Whether it is a real floating-point type (the ones `--cast` converts a distributed
    /// checkpoint's tensors from).
    pub fn is_floating(&self) -> bool {
        matches!(
            self,
            DType::Float16 | DType::BFloat16 | DType::Float32 | DType::Float64 | DType::Float128
        ) || self.is_small_float()
    }

    /// The float8, float6 and float4 types of machine-learning checkpoints.
    pub fn is_small_float(&self) -> bool {
        matches!(
            self,
            DType::Float8E4M3
                | DType::Float8E5M2
                | DType::Float8E8M0
                | DType::Float8E4M3Fnuz
                | DType::Float8E5M2Fnuz
                | DType::Float4
                | DType::Float6E2M3
                | DType::Float6E3M2
        )
    }

    /// The width of the units whose bytes are reversed to change this type's byte order:
    /// the element itself for numbers, each half of a complex, each character of a string.
    /// `None` for types whose bytes are the same in either order.
    pub fn swap_width(&self) -> Option<usize> {
        let width = match self {
            DType::Complex64 => 4,
            DType::Complex128 => 8,
            DType::Complex256 => 16,
            DType::Unicode(_) => 4,
            DType::Bytes(_) | DType::Void(_) | DType::Record(_) => return None,
            other => other.itemsize() as usize,
        };
        (width > 1).then_some(width)
    }

    /// The byte order a file of this type must declare: types without one use `|`.
    pub fn byte_order_or_na(&self, order: ByteOrder) -> ByteOrder {
        if self.swap_width().is_some() {
            order
        } else {
            ByteOrder::NotApplicable
        }
    }

    /// The smallest and largest value of an integer type; datetime64 and timedelta64 count
    /// in int64.
    pub fn int_range(&self) -> Option<(i128, i128)> {
        Some(match self {
            DType::Int8 => (i8::MIN.into(), i8::MAX.into()),
            DType::Int16 => (i16::MIN.into(), i16::MAX.into()),
            DType::Int32 => (i32::MIN.into(), i32::MAX.into()),
            DType::Int64 | DType::DateTime64(_) | DType::TimeDelta64(_) => {
                (i64::MIN.into(), i64::MAX.into())
            }
            DType::UInt8 => (0, u8::MAX.into()),
            DType::UInt16 => (0, u16::MAX.into()),
            DType::UInt32 => (0, u32::MAX.into()),
            DType::UInt64 => (0, u64::MAX.into()),
            _ => return None,
        })
    }

    /// The ONNX name of this type (`tensor(float)` is `float`), if ONNX has it. numpy's
    /// fixed-width strings are ONNX strings.
    pub fn onnx_name(&self) -> Option<&'static str> {
        match self {
            DType::Bytes(_) | DType::Unicode(_) => Some("string"),
            _ => self.names()?.onnx,
        }
    }

    /// The OpenVINO element type name of this type (`f32`, `i64`, `boolean`), if it has one.
    /// numpy's fixed-width strings are OpenVINO strings.
    pub fn openvino_name(&self) -> Option<&'static str> {
        match self {
            DType::Bytes(_) | DType::Unicode(_) => Some("string"),
            _ => self.names()?.openvino,
        }
    }

    /// The DirectML tensor data type of this type (`FLOAT32`), if DirectML has it.
    pub fn directml_name(&self) -> Option<&'static str> {
        self.names()?.directml
    }

    /// numpy's type string (`descr`) for this type in the given byte order, e.g. `<f4`, `|S5`,
    /// `<M8[ns]`, or the list of fields of a record exactly as `numpy.save` writes it.
    pub fn npy_descr(&self, order: ByteOrder) -> String {
        let order = self.byte_order_or_na(order).npy_char();
        let code = match self {
            DType::DateTime64(unit) => format!("M8[{unit}]"),
            DType::TimeDelta64(unit) => format!("m8[{unit}]"),
            DType::Bytes(n) => format!("S{n}"),
            DType::Unicode(n) => format!("U{n}"),
            DType::Void(n) => format!("V{n}"),
            DType::Record(record) => return python_descr(&record.layout),
            plain => match plain.names().and_then(|row| row.descr) {
                Some(code) => code.to_string(),
                // No numpy name (`in_npy` is false): writers refuse these before asking.
                None => format!("V{}", self.itemsize()),
            },
        };
        format!("'{order}{code}'")
    }

    /// Converts npyz's reading of a header's `descr` into a tjoin type, the byte order it is
    /// stored in, and the byte ranges to reverse to bring one element to little-endian.
    /// Records come back with every field little-endian, the way numpy's concatenate
    /// returns them. Fails with a reason for elements that are not raw bytes (Python objects).
    pub fn from_npy(dtype: &npyz::DType) -> Result<Stored, String> {
        if dtype.uses_pickled_array() {
            return Err(
                "it holds Python objects (dtype 'O'), which numpy stores pickled, \
                        not as raw tensor data"
                    .to_string(),
            );
        }
        let too_large = |bytes: u64| {
            let bytes = match bytes {
                u64::MAX => "more bytes than 64 bits count".to_string(),
                bytes => format!("{bytes} bytes"),
            };
            Err(format!(
                "its elements are of {bytes} each; tjoin reads elements of at most \
                 {MAX_ITEMSIZE} bytes"
            ))
        };
        match dtype {
            npyz::DType::Plain(type_str) => {
                let (dtype, order) = from_type_str(type_str)?;
                if dtype.itemsize() > MAX_ITEMSIZE {
                    // Saturated for `U` widths whose 4 bytes a character overflow 64 bits.
                    return too_large(dtype.itemsize());
                }
                let swaps = match (order, dtype.swap_width()) {
                    (ByteOrder::Big, Some(width)) => Swaps::Uniform(width),
                    _ => Swaps::default(),
                };
                Ok(Stored {
                    dtype,
                    order,
                    swaps,
                })
            }
            npyz::DType::Record(_) | npyz::DType::Array(..) => {
                let itemsize = dtype
                    .num_bytes()
                    .ok_or("its record type is larger than this machine can address")?;
                if itemsize as u64 > MAX_ITEMSIZE {
                    return too_large(itemsize as u64);
                }
                let mut swaps = Vec::new();
                let layout = little_endian_record(dtype, 0, &mut swaps)?;
                let record = Record {
                    layout,
                    itemsize: itemsize as u64,
                };
                Ok(Stored {
                    dtype: DType::Record(Box::new(record)),
                    order: ByteOrder::NotApplicable,
                    swaps: Swaps::Ranges(Box::new(swaps)),
                })
            }
        }
    }
}

/// A type as a file stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// The element type, records normalised to little-endian fields.
    pub dtype: DType,
    /// The byte order the file declares (`NotApplicable` for records).
    pub order: ByteOrder,
    /// What to reverse in each element to make it little-endian.
    pub swaps: Swaps,
}

/// The byte ranges of one element to reverse to bring it to little-endian.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Swaps {
    /// Already little-endian, or byte order does not apply.
    #[default]
    None,
    /// Reverse every consecutive group of this many bytes (numbers, complex halves, UCS-4).
    Uniform(usize),
    /// Reverse each `(offset, width)` range of the element (big-endian fields of a record).
    /// A boxed `Vec`, one word, so that `Swaps` is two: every tensor and every input's plan
    /// holds one.
    #[allow(clippy::box_collection, reason = "one word where a boxed slice is two")]
    Ranges(Box<Vec<(usize, usize)>>),
}

impl Swaps {
    /// Whether elements need any byte reversed.
    pub fn is_none(&self) -> bool {
        match self {
            Swaps::None => true,
            Swaps::Uniform(_) => false,
            Swaps::Ranges(ranges) => ranges.is_empty(),
        }
    }
}

/// The largest element tjoin reads, in bytes: far beyond any real record or string, and small
/// enough that every size computed from it fits 64 bits.
pub const MAX_ITEMSIZE: u64 = 1 << 31;

/// The most byte ranges one record element may need reversed (big-endian values): 1 MiB of
/// ranges.
const MAX_SWAPS: usize = 1 << 16;

fn too_many_swaps() -> String {
    format!(
        "its record type has more than {MAX_SWAPS} big-endian values per element for tjoin to \
         reverse; write it little-endian"
    )
}

/// Rebuilds a record with every field little-endian, noting in `swaps` the byte ranges (from
/// `offset`) that were big-endian.
fn little_endian_record(
    dtype: &npyz::DType,
    offset: usize,
    swaps: &mut Vec<(usize, usize)>,
) -> Result<npyz::DType, String> {
    Ok(match dtype {
        npyz::DType::Plain(type_str) => {
            let (plain, order) = from_type_str(type_str)?;
            match (order, plain.swap_width()) {
                (ByteOrder::Big, Some(width)) => {
                    let size = plain.itemsize() as usize;
                    if swaps.len().saturating_add(size / width) > MAX_SWAPS {
                        return Err(too_many_swaps());
                    }
                    swaps.extend((0..size / width).map(|unit| (offset + unit * width, width)));
                    let little = format!("<{}", &type_str.to_string()[1..]);
                    npyz::DType::Plain(little.parse().map_err(|e| format!("{e}"))?)
                }
                _ => dtype.clone(),
            }
        }
        npyz::DType::Array(len, inner) => {
            // The element once; its swaps repeated at each of the `len` offsets, so that the
            // work is that of the swaps, not of `len` (a hostile 2^60).
            let size = inner.num_bytes().ok_or("its record type is too large")?;
            let mut once = Vec::new();
            let normalized = little_endian_record(inner, 0, &mut once)?;
            if !once.is_empty() {
                let total = once.len().saturating_mul(*len as usize);
                if swaps.len().saturating_add(total) > MAX_SWAPS {
                    return Err(too_many_swaps());
                }
                for index in 0..*len as usize {
                    let at = offset + index * size;
                    swaps.extend(once.iter().map(|&(o, width)| (at + o, width)));
                }
            }
            npyz::DType::Array(*len, Box::new(normalized))
        }
        npyz::DType::Record(fields) => {
            let mut field_offset = offset;
            let mut normalized = Vec::with_capacity(fields.len());
            for field in fields {
                let dtype = little_endian_record(&field.dtype, field_offset, swaps)?;
                field_offset += field
                    .dtype
                    .num_bytes()
                    .ok_or("its record type is too large")?;
                normalized.push(npyz::Field {
                    name: field.name.clone(),
                    dtype,
                });
            }
            npyz::DType::Record(normalized)
        }
    })
}

fn from_type_str(type_str: &npyz::TypeStr) -> Result<(DType, ByteOrder), String> {
    use npyz::TypeChar as C;
    let size = type_str.size_field();
    let order = match type_str.endianness() {
        npyz::Endianness::Little => ByteOrder::Little,
        npyz::Endianness::Big => ByteOrder::Big,
        npyz::Endianness::Irrelevant => ByteOrder::NotApplicable,
    };
    let unit = || type_str.time_units().map(|unit| unit.to_str().into());
    let letter = match type_str.type_char() {
        C::Bool => "b",
        C::Int => "i",
        C::Uint => "u",
        C::Float => "f",
        C::Complex => "c",
        _ => "",
    };
    let code = format!("{letter}{size}");
    let dtype = match (type_str.type_char(), size) {
        (C::DateTime, 8) => DType::DateTime64(unit().ok_or("datetime64 without a unit")?),
        (C::TimeDelta, 8) => DType::TimeDelta64(unit().ok_or("timedelta64 without a unit")?),
        (C::ByteStr, n) => DType::Bytes(n),
        (C::UnicodeStr, n) => DType::Unicode(n),
        (C::RawData, n) => DType::Void(n),
        _ => match NAMES
            .iter()
            .find(|row| !letter.is_empty() && row.descr == Some(code.as_str()))
        {
            Some(row) => row.dtype.clone(),
            None => {
                return Err(format!(
                    "its element type '{type_str}' is not one numpy writes"
                ));
            }
        },
    };
    Ok((dtype, order))
}

/// A record's `descr` as numpy writes it: `[('a', '<i4'), ('b', '<f8', (2,))]`.
fn python_descr(dtype: &npyz::DType) -> String {
    match dtype {
        npyz::DType::Plain(type_str) => format!("'{type_str}'"),
        npyz::DType::Array(..) => {
            let mut shape = Vec::new();
            let mut element = dtype;
            while let npyz::DType::Array(len, inner) = element {
                shape.push(*len);
                element = inner;
            }
            format!("{}, {}", python_descr(element), python_tuple(&shape))
        }
        npyz::DType::Record(fields) => {
            let fields: Vec<String> = fields
                .iter()
                .map(|field| {
                    format!(
                        "({}, {})",
                        python_str(&field.name),
                        python_descr(&field.dtype)
                    )
                })
                .collect();
            format!("[{}]", fields.join(", "))
        }
    }
}

/// A shape as Python writes a tuple: `()`, `(5,)`, `(2, 3)`.
pub fn python_tuple(dims: &[u64]) -> String {
    match dims {
        [] => "()".to_string(),
        [only] => format!("({only},)"),
        _ => {
            let dims: Vec<String> = dims.iter().map(u64::to_string).collect();
            format!("({})", dims.join(", "))
        }
    }
}

/// A string as Python's `repr` writes it (single quotes unless the text holds one).
fn python_str(text: &str) -> String {
    let quote = if text.contains('\'') && !text.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(text.len() + 2);
    out.push(quote);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

impl DType {
    /// The type a name as `Display` writes it stands for (`float32`, `bfloat16`,
    /// `float8_e4m3fn`, `U5`, `datetime64[ns]`); numpy's `<U5`/`|S3` spellings of strings are
    /// accepted too.
    pub fn from_name(name: &str) -> Option<DType> {
        if let Some(row) = NAMES.iter().find(|row| row.numpy == name) {
            return Some(row.dtype.clone());
        }
        let unit = |prefix: &str| {
            let unit = name.strip_prefix(prefix)?.strip_suffix(']')?;
            let known = !unit.is_empty() && unit.chars().all(|c| c.is_ascii_alphabetic());
            known.then(|| unit.into())
        };
        if let Some(unit) = unit("datetime64[") {
            return Some(DType::DateTime64(unit));
        }
        if let Some(unit) = unit("timedelta64[") {
            return Some(DType::TimeDelta64(unit));
        }
        let text = name.trim_start_matches(['<', '>', '|', '=']);
        let width = |rest: &str| rest.parse::<u64>().ok();
        match text.split_at_checked(1)? {
            ("U", n) => width(n).map(DType::Unicode),
            ("S", n) => width(n).map(DType::Bytes),
            _ => None,
        }
    }
}

impl fmt::Display for DType {
    /// numpy's name for the type: `float32`, `datetime64[ns]`, `S5`, or a record's fields.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DType::DateTime64(unit) => write!(f, "datetime64[{unit}]"),
            DType::TimeDelta64(unit) => write!(f, "timedelta64[{unit}]"),
            DType::Bytes(n) => write!(f, "S{n}"),
            DType::Unicode(n) => write!(f, "U{n}"),
            DType::Void(n) => write!(f, "V{n}"),
            DType::Record(record) => f.write_str(&python_descr(&record.layout)),
            plain => f.write_str(plain.names().map_or("?", |row| row.numpy)),
        }
    }
}

/// Reverses the byte ranges `swaps` names in every element of `bytes` (whole elements of
/// `itemsize` bytes).
pub fn swap_in_place(bytes: &mut [u8], itemsize: usize, swaps: &Swaps) {
    match swaps {
        Swaps::None => {}
        Swaps::Uniform(width) => bytes.chunks_exact_mut(*width).for_each(<[u8]>::reverse),
        Swaps::Ranges(ranges) => {
            for element in bytes.chunks_exact_mut(itemsize) {
                for &(offset, width) in ranges.iter() {
                    element[offset..offset + width].reverse();
                }
            }
        }
    }
}

/// The greatest common divisor of `a` and `b`: how sub-byte elements pack into bytes, and
/// how a GPU's buffer granules meet.
pub fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

#[cfg(test)]
mod tests;
