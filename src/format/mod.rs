//! Tensor file formats: reading what a file declares about its tensors, and writing an
//! output's headers around the data the copy engine streams. One module per format.

pub mod npy;
pub mod npz;
pub mod safetensors;
pub mod zip;

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read, Seek};
use std::path::Path;
use std::sync::Arc;

use crate::dtype::{ByteOrder, DType, Swaps};
use crate::error::{Error, InputRef, Refusal, Result};
use crate::output::{PassThrough, Sink};

/// The file formats tjoin reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// numpy's .npy: one tensor.
    Npy,
    /// numpy's .npz: a zip archive of .npy files.
    Npz,
    /// Hugging Face's safetensors: named tensors behind a JSON header.
    SafeTensors,
}

/// What the writer of an output needs beyond its tensors.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// Deflate .npz members.
    pub compress: bool,
    /// safetensors `__metadata__` to write, if any.
    pub metadata: Option<BTreeMap<String, String>>,
}

/// What a file holds: its tensors, in the file's order, and its free-form metadata.
pub struct Contents {
    /// The tensors.
    pub tensors: Vec<Found>,
    /// safetensors' `__metadata__` map, in the file's order.
    pub metadata: Option<Vec<(String, String)>>,
}

/// One tensor a reader found.
pub struct Found {
    /// Its name, for formats that hold several.
    pub name: Option<String>,
    /// What its header says.
    pub info: TensorInfo,
    /// The file its data is in, when not the input itself (an inflated .npz member).
    pub file: Option<Arc<File>>,
}

impl Format {
    /// The format's short name, as `--dry-run` prints it.
    pub fn name(self) -> &'static str {
        match self {
            Format::Npy => "npy",
            Format::Npz => "npz",
            Format::SafeTensors => "safetensors",
        }
    }

    /// The format of the input `file` at `path`: from its first bytes when they say (the
    /// .npy magic, a zip signature, a safetensors JSON header), else from its extension, else
    /// .npy (whose reader then says what it found instead).
    pub fn of_input(path: &Path, file: &File) -> Format {
        let mut start = [0u8; 9];
        let mut reader = file;
        let read = reader.read(&mut start).unwrap_or(0);
        // The readers read from the start; a failed rewind fails them with a message.
        let _ = reader.seek(io::SeekFrom::Start(0));
        let start = &start[..read];
        if start.starts_with(b"\x93NUMPY") {
            Format::Npy
        } else if start.starts_with(b"PK\x03\x04") || start.starts_with(b"PK\x05\x06") {
            Format::Npz
        } else if start.len() == 9 && start[8] == b'{' {
            Format::SafeTensors
        } else {
            Format::of_extension(path).unwrap_or(Format::Npy)
        }
    }

    fn of_extension(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "npy" => Some(Format::Npy),
            "npz" => Some(Format::Npz),
            "safetensors" => Some(Format::SafeTensors),
            _ => None,
        }
    }

    /// The format to write `path` in, from its extension.
    pub fn of_output(path: &Path) -> Result<Format> {
        Format::of_extension(path).ok_or_else(|| {
            Error::Refused(vec![Refusal {
                headline: format!(
                    "cannot tell which format to write {} in from its extension",
                    path.display()
                ),
                details: Vec::new(),
                hint: Some(
                    "name the output with the .npy, .npz or .safetensors extension".to_string(),
                ),
            }])
        })
    }

    /// Whether files of this format hold named tensors, several of them.
    pub fn is_container(self) -> bool {
        self != Format::Npy
    }

    /// Reads the tensors a file of this format declares; with `select`, only the tensor of
    /// that name (an error lists the names there are when none has it).
    pub fn read(
        self,
        file: &File,
        file_len: u64,
        input: &InputRef,
        select: Option<&str>,
    ) -> Result<Contents> {
        let mut contents = match self {
            Format::Npy => Contents {
                tensors: vec![Found {
                    name: None,
                    info: npy::read_header(file, file_len, input)?,
                    file: None,
                }],
                metadata: None,
            },
            Format::Npz => return npz::read(file, file_len, input, select),
            Format::SafeTensors => safetensors::read(file, file_len, input)?,
        };
        if let Some(wanted) = select {
            let names: Vec<String> = contents
                .tensors
                .iter()
                .filter_map(|t| t.name.clone())
                .collect();
            if !names.iter().any(|n| n == wanted) {
                return Err(crate::input::no_such_tensor(input, wanted, &names));
            }
            contents
                .tensors
                .retain(|t| t.name.as_deref() == Some(wanted));
        }
        Ok(contents)
    }

    /// The writer of an output in this format.
    pub fn writer(self, options: &WriteOptions) -> Box<dyn Writer> {
        match self {
            Format::Npy => Box::new(npy::NpyWriter),
            Format::Npz => Box::new(npz::NpzWriter::new(options.compress)),
            Format::SafeTensors => Box::new(safetensors::SafeTensorsWriter {
                metadata: options.metadata.clone(),
            }),
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
    /// The order to write `tensors` in, as indexes into it: formats with a canonical order
    /// (safetensors) sort; the default keeps the job's order.
    fn order(&self, tensors: &[OutTensor]) -> Vec<usize> {
        (0..tensors.len()).collect()
    }
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
