//! Tensor file formats: reading what a file declares about its tensors, and writing an
//! output's headers around the data the copy engine streams. One module per format.

pub mod npy;

use std::fs::File;
use std::io;
use std::path::Path;

use crate::dtype::{ByteOrder, DType, Swaps};
use crate::error::{Error, InputRef, Refusal, Result};
use crate::output::{PassThrough, Sink};

/// The file formats tjoin reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// numpy's .npy: one tensor.
    Npy,
}

impl Format {
    /// The format of an input file. Only .npy exists so far, so every input is read as .npy
    /// (a file of another kind is refused by the .npy reader, naming what it found).
    pub fn of_input(_path: &Path) -> Format {
        Format::Npy
    }

    /// The format to write `path` in, from its extension.
    pub fn of_output(path: &Path) -> Result<Format> {
        match path.extension().and_then(|e| e.to_str()) {
            Some(ext) if ext.eq_ignore_ascii_case("npy") => Ok(Format::Npy),
            _ => Err(Error::Refused(vec![Refusal {
                headline: format!(
                    "cannot tell which format to write {} in from its extension",
                    path.display()
                ),
                details: Vec::new(),
                hint: Some("name the output with the .npy extension".to_string()),
            }])),
        }
    }

    /// Reads the tensors a file of this format declares, each with its name for formats
    /// that hold several.
    pub fn read(
        self,
        file: &File,
        file_len: u64,
        input: &InputRef,
    ) -> Result<Vec<(Option<String>, TensorInfo)>> {
        match self {
            Format::Npy => Ok(vec![(None, npy::read_header(file, file_len, input)?)]),
        }
    }

    /// The writer of an output in this format.
    pub fn writer(self) -> Box<dyn Writer> {
        match self {
            Format::Npy => Box::new(npy::NpyWriter),
        }
    }
}

/// One tensor of the output, as a writer describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutTensor {
    /// Its name, for formats that hold several.
    pub name: String,
    /// Its element type (written little-endian).
    pub dtype: DType,
    /// Its logical shape.
    pub shape: Vec<u64>,
    /// The order its data is written in.
    pub layout: Layout,
    /// Bytes of data.
    pub bytes: u64,
}

/// Writes an output format's framing around the data of each tensor, which the copy engine
/// writes between `start_tensor` and `end_tensor`.
pub trait Writer {
    /// Refuses, with the reason, outputs this format cannot hold (several tensors in a
    /// single-tensor format, an element type it has no name for). Called before anything is
    /// written.
    fn check(&self, tensors: &[OutTensor]) -> std::result::Result<(), String>;
    /// Writes what comes before the first tensor.
    fn start(&mut self, _sink: &mut dyn Sink, _tensors: &[OutTensor]) -> io::Result<()> {
        Ok(())
    }
    /// Writes what comes right before one tensor's data.
    fn start_tensor(&mut self, sink: &mut dyn Sink, tensor: &OutTensor) -> io::Result<()>;
    /// The sink the copy engine writes one tensor's data bytes (whole little-endian elements)
    /// through, for formats that must see or transform them (a checksum, a text encoding).
    /// The default passes them to `sink` untouched, kernel copies included.
    fn data_sink<'a>(&'a mut self, sink: &'a mut dyn Sink) -> Box<dyn Sink + 'a> {
        Box::new(PassThrough(sink))
    }
    /// Writes what comes right after one tensor's data.
    fn end_tensor(&mut self, _sink: &mut dyn Sink, _tensor: &OutTensor) -> io::Result<()> {
        Ok(())
    }
    /// Writes what comes after the last tensor.
    fn finish(&mut self, _sink: &mut dyn Sink) -> io::Result<()> {
        Ok(())
    }
}

/// The order in which a tensor's elements are laid out in its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Row-major: the last index varies fastest.
    C,
    /// Column-major: the first index varies fastest.
    Fortran,
}

/// Everything a header says about one tensor stored in a file.
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
