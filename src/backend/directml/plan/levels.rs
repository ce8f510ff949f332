//! The device as planning sees it: DirectML's feature levels, the element types Join moves,
//! what a device supports, and its buffer budget.

use std::fmt;

use super::{MAX_BUFFER, SHARED_MEMORY_BUFFER};
use crate::dtype::DType;
use crate::plan::spec::Spec;

/// A DirectML feature level, `major.minor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FeatureLevel {
    /// The major version.
    pub major: u32,
    /// The minor version.
    pub minor: u32,
}

impl FeatureLevel {
    /// 1.0: Windows 10 1903's DirectML; also what tjoin assumes when the query fails.
    pub const V1_0: FeatureLevel = FeatureLevel::new(1, 0);
    /// 2.1: the first level with 8-bit integer tensors.
    pub const V2_1: FeatureLevel = FeatureLevel::new(2, 1);
    /// 3.0: ranks 4 and 5.
    pub const V3_0: FeatureLevel = FeatureLevel::new(3, 0);
    /// 4.1: ranks 1 to 8 and 64-bit types.
    pub const V4_1: FeatureLevel = FeatureLevel::new(4, 1);

    /// The level `major.minor`.
    pub const fn new(major: u32, minor: u32) -> FeatureLevel {
        FeatureLevel { major, minor }
    }

    /// The level a `DML_FEATURE_LEVEL` value names: `0xMm00` is `M.m`.
    pub fn from_code(code: i32) -> FeatureLevel {
        let code = code as u32;
        FeatureLevel::new((code >> 12) & 0xF, (code >> 8) & 0xF)
    }

    /// The `DML_FEATURE_LEVEL` value of this level.
    pub fn code(self) -> i32 {
        ((self.major << 12) | (self.minor << 8)) as i32
    }

    /// `"4.1"` as a level.
    pub fn parse(text: &str) -> Option<FeatureLevel> {
        let (major, minor) = text.split_once('.')?;
        Some(FeatureLevel::new(major.parse().ok()?, minor.parse().ok()?))
    }

    /// The Join row of `docs/rules.md` that applies at this level, as `--spec directml:LEVEL`
    /// has it.
    pub(super) fn join_rules(self) -> Spec {
        Spec::parse(&format!("directml:{self}")).unwrap_or_else(|_| {
            Spec::parse("directml:1.0").expect("PROFILES has a directml:1.0 row")
        })
    }
}

impl fmt::Display for FeatureLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Every feature level DirectML has defined, lowest first: what tjoin asks the device about.
pub const KNOWN_LEVELS: [FeatureLevel; 15] = [
    FeatureLevel::new(1, 0),
    FeatureLevel::new(2, 0),
    FeatureLevel::new(2, 1),
    FeatureLevel::new(3, 0),
    FeatureLevel::new(3, 1),
    FeatureLevel::new(4, 0),
    FeatureLevel::new(4, 1),
    FeatureLevel::new(5, 0),
    FeatureLevel::new(5, 1),
    FeatureLevel::new(5, 2),
    FeatureLevel::new(6, 0),
    FeatureLevel::new(6, 1),
    FeatureLevel::new(6, 2),
    FeatureLevel::new(6, 3),
    FeatureLevel::new(6, 4),
];

/// A `DML_TENSOR_DATA_TYPE` Join can move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataType {
    #[allow(missing_docs)]
    Float32,
    #[allow(missing_docs)]
    Float16,
    #[allow(missing_docs)]
    UInt32,
    #[allow(missing_docs)]
    UInt16,
    #[allow(missing_docs)]
    UInt8,
    #[allow(missing_docs)]
    Int32,
    #[allow(missing_docs)]
    Int16,
    #[allow(missing_docs)]
    Int8,
    #[allow(missing_docs)]
    Float64,
    #[allow(missing_docs)]
    UInt64,
    #[allow(missing_docs)]
    Int64,
}

/// Each type's name (as `docs/rules.md` and `DType::directml_name` spell it), its
/// `DML_TENSOR_DATA_TYPE` value and its size in bytes.
pub(super) const DATA_TYPES: [(DataType, &str, i32, u64); 11] = [
    (DataType::Float32, "FLOAT32", 1, 4),
    (DataType::Float16, "FLOAT16", 2, 2),
    (DataType::UInt32, "UINT32", 3, 4),
    (DataType::UInt16, "UINT16", 4, 2),
    (DataType::UInt8, "UINT8", 5, 1),
    (DataType::Int32, "INT32", 6, 4),
    (DataType::Int16, "INT16", 7, 2),
    (DataType::Int8, "INT8", 8, 1),
    (DataType::Float64, "FLOAT64", 9, 8),
    (DataType::UInt64, "UINT64", 10, 8),
    (DataType::Int64, "INT64", 11, 8),
];

impl DataType {
    fn row(self) -> (DataType, &'static str, i32, u64) {
        *DATA_TYPES
            .iter()
            .find(|row| row.0 == self)
            .expect("every DataType has a row")
    }

    /// The name, e.g. `FLOAT32`.
    pub fn name(self) -> &'static str {
        self.row().1
    }

    /// The `DML_TENSOR_DATA_TYPE` value.
    pub fn code(self) -> i32 {
        self.row().2
    }

    /// Bytes per element.
    pub fn size(self) -> u64 {
        self.row().3
    }

    /// DirectML's type for `dtype`, if it has one (no bool, bfloat16, float8 or complex).
    pub fn of(dtype: &DType) -> Option<DataType> {
        let name = dtype.directml_name()?;
        DATA_TYPES.iter().find(|row| row.1 == name).map(|row| row.0)
    }

    /// The unsigned type of `size` bytes, as the reinterpreted form reads the bytes.
    pub(super) fn unsigned(size: u64) -> DataType {
        match size {
            4 => DataType::UInt32,
            2 => DataType::UInt16,
            _ => DataType::UInt8,
        }
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What planning needs to know about the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Device {
    /// The highest feature level it reports (1.0 when it cannot say).
    pub level: FeatureLevel,
    /// Whether it supports FLOAT64 tensors (`DML_FEATURE_TENSOR_DATA_TYPE_SUPPORT`).
    pub float64: bool,
    /// The largest buffer to create on it; see `buffer_budget`.
    pub max_buffer: u64,
}

impl Device {
    /// Join's ranks at this device's level, inclusive.
    pub fn join_ranks(&self) -> (usize, usize) {
        self.level.join_rules().profile.ranks
    }

    /// Whether Join at this device's level takes `data_type`.
    pub fn join_supports(&self, data_type: DataType) -> bool {
        let listed = self
            .level
            .join_rules()
            .profile
            .types
            .contains(&data_type.name());
        listed && (data_type != DataType::Float64 || self.float64)
    }
}

/// The buffer budget for an adapter: a quarter of its video memory, at most `MAX_BUFFER`; on
/// software adapters and adapters without memory of their own the device's buffers are
/// process memory, so `SHARED_MEMORY_BUFFER`.
pub fn buffer_budget(dedicated_video_memory: u64, software: bool) -> u64 {
    if software || dedicated_video_memory < 4 * SHARED_MEMORY_BUFFER {
        SHARED_MEMORY_BUFFER
    } else {
        (dedicated_video_memory / 4).min(MAX_BUFFER)
    }
}

/// The environment variable that lowers the buffer budget to its value in bytes, so that a
/// test can make small joins take several dispatches on a real device, as large ones do.
pub const BUDGET_VARIABLE: &str = "TJOIN_DML_BUFFER_BUDGET";

/// `budget`, or the lower one `cap` (the value of `BUDGET_VARIABLE`, if set) asks for.
pub fn capped_budget(budget: u64, cap: Option<&str>) -> Result<u64, String> {
    match cap {
        None => Ok(budget),
        Some(text) => text
            .trim()
            .parse::<u64>()
            .map(|cap| cap.min(budget))
            .map_err(|_| format!("{BUDGET_VARIABLE}={text} is not a number of bytes")),
    }
}

/// DirectML Split's tensor support by feature level (DML_SPLIT_OPERATOR_DESC's "Tensor
/// support" tables): the lowest level of each row, its ranks (inclusive) and element types.
/// A level without a row of its own takes the row below it. FLOAT64 also needs the device to
/// support it (`Device::float64`). Checked against the page's text (Microsoft's sdk-api docs,
/// `ns-directml-dml_split_operator_desc.md`): the rows equal Join's but for 3.0, where Split
/// takes 1 to 8 dimensions and Join 4 to 5.
#[rustfmt::skip]
pub const SPLIT_LEVELS: [(FeatureLevel, (usize, usize), &[&str]); 4] = [
    (FeatureLevel::V4_1, (1, 8), &["FLOAT64", "FLOAT32", "FLOAT16", "INT64", "INT32", "INT16",
        "INT8", "UINT64", "UINT32", "UINT16", "UINT8"]),
    (FeatureLevel::V3_0, (1, 8), &["FLOAT32", "FLOAT16", "INT32", "INT16", "INT8", "UINT32",
        "UINT16", "UINT8"]),
    (FeatureLevel::V2_1, (4, 4), &["FLOAT32", "FLOAT16", "INT32", "INT16", "INT8", "UINT32",
        "UINT16", "UINT8"]),
    (FeatureLevel::V1_0, (4, 4), &["FLOAT32", "FLOAT16", "INT32", "INT16", "UINT32", "UINT16"]),
];

impl Device {
    /// Split's row at this device's level.
    fn split_row(&self) -> ((usize, usize), &'static [&'static str]) {
        let row = SPLIT_LEVELS
            .iter()
            .find(|(lowest, _, _)| self.level >= *lowest)
            .unwrap_or(&SPLIT_LEVELS[SPLIT_LEVELS.len() - 1]);
        (row.1, row.2)
    }

    /// Split's ranks at this device's level, inclusive.
    pub fn split_ranks(&self) -> (usize, usize) {
        self.split_row().0
    }

    /// Whether Split at this device's level takes `data_type`.
    pub fn split_supports(&self, data_type: DataType) -> bool {
        self.split_row().1.contains(&data_type.name())
            && (data_type != DataType::Float64 || self.float64)
    }
}
