//! Tensor file formats: what a file declares about its tensor, read from its header.

pub mod npy;

use crate::dtype::{ByteOrder, DType, Swaps};

/// The order in which a tensor's elements are laid out in its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Row-major: the last index varies fastest.
    C,
    /// Column-major: the first index varies fastest.
    Fortran,
}

/// Everything a header says about the tensor stored in a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    /// The element type (records with little-endian fields).
    pub dtype: DType,
    /// The byte order the file stores elements in.
    pub byte_order: ByteOrder,
    /// What to reverse in each element to make it little-endian.
    pub swaps: Swaps,
    /// The logical shape.
    pub shape: Vec<u64>,
    /// How the elements are laid out.
    pub layout: Layout,
    /// Where the element data starts in the file.
    pub data_offset: u64,
    /// How many bytes of element data follow.
    pub data_len: u64,
}

impl TensorInfo {
    /// The shape as messages print it: `[2, 3]`.
    pub fn shape_text(&self) -> String {
        shape_text(&self.shape)
    }
}

/// A shape as messages print it: `[2, 3]`, `[]` for a scalar.
pub fn shape_text(shape: &[u64]) -> String {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    format!("[{}]", dims.join(", "))
}

/// The number of bytes a tensor of this shape and item size holds, if it fits in a u64.
pub fn byte_count(shape: &[u64], itemsize: u64) -> Option<u64> {
    shape
        .iter()
        .try_fold(itemsize, |bytes, &dim| bytes.checked_mul(dim))
}
