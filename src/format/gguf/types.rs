//! GGUF's value types (of its keys) and ggml's tensor types, with their sizes: a quantized
//! type is blocks of elements, carried as opaque bytes whose length follows from the type and
//! the first dimension. The table is ggml's (`ggml.c`'s `type_traits`), as gguf-py 0.19 lists
//! it in `GGML_QUANT_SIZES`.

use crate::dtype::DType;

/// The type of a key's value, or of an array's elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum ValueType {
    UInt8,
    Int8,
    UInt16,
    Int16,
    UInt32,
    Int32,
    Float32,
    Bool,
    String,
    Array,
    UInt64,
    Int64,
    Float64,
}

const VALUE_TYPES: [(ValueType, &str, Option<u64>); 13] = [
    (ValueType::UInt8, "uint8", Some(1)),
    (ValueType::Int8, "int8", Some(1)),
    (ValueType::UInt16, "uint16", Some(2)),
    (ValueType::Int16, "int16", Some(2)),
    (ValueType::UInt32, "uint32", Some(4)),
    (ValueType::Int32, "int32", Some(4)),
    (ValueType::Float32, "float32", Some(4)),
    (ValueType::Bool, "bool", Some(1)),
    (ValueType::String, "string", None),
    (ValueType::Array, "array", None),
    (ValueType::UInt64, "uint64", Some(8)),
    (ValueType::Int64, "int64", Some(8)),
    (ValueType::Float64, "float64", Some(8)),
];

impl ValueType {
    /// The type of code `code` (0 to 12), if there is one.
    pub fn from_code(code: u32) -> Option<ValueType> {
        VALUE_TYPES.get(code as usize).map(|entry| entry.0)
    }

    /// Its code in a file.
    pub fn code(self) -> u32 {
        VALUE_TYPES
            .iter()
            .position(|entry| entry.0 == self)
            .unwrap_or(0) as u32
    }

    /// Its name, as gguf-py spells it in lower case.
    pub fn name(self) -> &'static str {
        VALUE_TYPES[self.code() as usize].1
    }

    /// The bytes a value takes, for numbers and bools.
    pub fn fixed_size(self) -> Option<u64> {
        VALUE_TYPES[self.code() as usize].2
    }

    /// The fewest bytes a value can take: a string's length, an array's type and count.
    pub fn least_size(self) -> u64 {
        match self {
            ValueType::String => 8,
            ValueType::Array => 12,
            other => other.fixed_size().unwrap_or(1),
        }
    }
}

/// A ggml tensor type: its code in a file, its name, and its blocks (elements per block,
/// bytes per block; 1 element for the plain types).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GgmlType {
    code: u32,
    name: &'static str,
    block: u64,
    block_bytes: u64,
}

const fn t(code: u32, name: &'static str, block: u64, block_bytes: u64) -> GgmlType {
    GgmlType {
        code,
        name,
        block,
        block_bytes,
    }
}

/// Every type ggml defines that files hold (the removed Q4_2, Q4_3 and the ones never stored
/// are absent, so a file that names them is refused).
const GGML_TYPES: &[GgmlType] = &[
    t(0, "F32", 1, 4),
    t(1, "F16", 1, 2),
    t(2, "Q4_0", 32, 18),
    t(3, "Q4_1", 32, 20),
    t(6, "Q5_0", 32, 22),
    t(7, "Q5_1", 32, 24),
    t(8, "Q8_0", 32, 34),
    t(9, "Q8_1", 32, 40),
    t(10, "Q2_K", 256, 84),
    t(11, "Q3_K", 256, 110),
    t(12, "Q4_K", 256, 144),
    t(13, "Q5_K", 256, 176),
    t(14, "Q6_K", 256, 210),
    t(15, "Q8_K", 256, 292),
    t(16, "IQ2_XXS", 256, 66),
    t(17, "IQ2_XS", 256, 74),
    t(18, "IQ3_XXS", 256, 98),
    t(19, "IQ1_S", 256, 50),
    t(20, "IQ4_NL", 32, 18),
    t(21, "IQ3_S", 256, 110),
    t(22, "IQ2_S", 256, 82),
    t(23, "IQ4_XS", 256, 136),
    t(24, "I8", 1, 1),
    t(25, "I16", 1, 2),
    t(26, "I32", 1, 4),
    t(27, "I64", 1, 8),
    t(28, "F64", 1, 8),
    t(29, "IQ1_M", 256, 56),
    t(30, "BF16", 1, 2),
    t(34, "TQ1_0", 256, 54),
    t(35, "TQ2_0", 256, 66),
    t(39, "MXFP4", 32, 17),
    t(40, "NVFP4", 64, 36),
    t(41, "Q1_0", 128, 18),
];

impl GgmlType {
    /// The type of code `code`, if ggml has one that files hold.
    pub fn from_code(code: u32) -> Option<GgmlType> {
        GGML_TYPES.iter().copied().find(|t| t.code == code)
    }

    /// Its code in a file.
    pub fn code(self) -> u32 {
        self.code
    }

    /// Its name, as ggml and gguf-py spell it (`Q4_K`).
    pub fn name(self) -> &'static str {
        self.name
    }

    /// Whether its elements come in blocks (a quantized type).
    pub fn is_quantized(self) -> bool {
        self.block > 1
    }

    /// The element type numpy and safetensors hold it as, for the plain types.
    pub fn dtype(self) -> Option<DType> {
        Some(match self.name {
            "F32" => DType::Float32,
            "F16" => DType::Float16,
            "BF16" => DType::BFloat16,
            "F64" => DType::Float64,
            "I8" => DType::Int8,
            "I16" => DType::Int16,
            "I32" => DType::Int32,
            "I64" => DType::Int64,
            _ => return None,
        })
    }

    /// The bytes of a tensor of dimensions `dims` (ggml's order): the first dimension must
    /// be whole blocks.
    pub fn bytes(self, dims: &[u64]) -> Result<u64, String> {
        let first = dims.first().copied().unwrap_or(1);
        if first % self.block != 0 {
            return Err(format!(
                "its first dimension, {first}, is not a multiple of the type's block of {} \
                 elements",
                self.block
            ));
        }
        let rows = dims[1.min(dims.len())..]
            .iter()
            .try_fold(1u64, |n, &d| n.checked_mul(d));
        rows.and_then(|rows| rows.checked_mul(first / self.block))
            .and_then(|blocks| blocks.checked_mul(self.block_bytes))
            // ggml counts elements and bytes in int64.
            .filter(|&bytes| bytes <= i64::MAX as u64)
            .ok_or_else(|| "its size overflows 2^63 bytes".to_string())
    }
}
