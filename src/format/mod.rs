//! Tensor file formats: reading what a file declares about its tensors, and writing an
//! output's headers around the data the copy engine streams. One module per format.

pub(crate) mod index;
pub mod json;
pub mod npy;
pub mod npz;
pub mod pickle;
pub mod safetensors;
pub mod zip;

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::Arc;

use crate::dtype::{ByteOrder, DType, Swaps};
use crate::error::{Error, InputRef, Refusal, Result};
use crate::output::{PassThrough, Sink};
use crate::sys::spill::Spill;

/// The file formats tjoin reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// numpy's .npy: one tensor.
    Npy,
    /// numpy's .npz: a zip archive of .npy files.
    Npz,
    /// Hugging Face's safetensors: named tensors behind a JSON header.
    SafeTensors,
    /// JSON text: nested arrays, or an object with dtype, shape and data.
    Json,
    /// PyTorch's `torch.save` (`.pt`, `.pth`, `.bin`): a pickle read without running it,
    /// its storages beside it (`format/pickle/`). Read, not written.
    PyTorch,
}

/// Every format's name, as `--format` and `--input-format` take it and as extensions spell it.
const NAMES: &[(&str, Format)] = &[
    ("npy", Format::Npy),
    ("json", Format::Json),
    ("npz", Format::Npz),
    ("safetensors", Format::SafeTensors),
    ("pt", Format::PyTorch),
];

/// Other extensions of a format: PyTorch checkpoints' (`model.pth`, `pytorch_model.bin`).
const MORE_EXTENSIONS: &[(&str, Format)] = &[("pth", Format::PyTorch), ("bin", Format::PyTorch)];

/// What the writer of an output needs beyond its tensors.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// Deflate .npz members.
    pub compress: bool,
    /// Nested arrays, or the tensor object with dtype and shape (`--json-form`).
    pub json_form: json::JsonForm,
    /// safetensors `__metadata__` to write, if any.
    pub metadata: Option<BTreeMap<String, String>>,
}

/// What a file holds: its tensors, in the file's order, and its free-form metadata.
pub struct Contents {
    /// The tensors.
    pub tensors: Vec<Found>,
    /// safetensors' `__metadata__` map, in the file's order.
    pub metadata: Option<Vec<(String, String)>>,
    /// What the reader left out or found worth saying, for `--dry-run` (a checkpoint's
    /// values that are not tensors, tensors that share a storage).
    pub notes: Vec<String>,
    /// The format the file turned out to be, when not the one it was read as (a zip archive
    /// that holds a `torch.save` checkpoint rather than .npy members).
    pub format: Option<Format>,
}

/// One tensor a reader found.
pub struct Found {
    /// Its name, for formats that hold several.
    pub name: Option<String>,
    /// What its header says.
    pub info: TensorInfo,
    /// The file its data is in, when not the input itself (an inflated .npz member).
    pub file: Option<Arc<File>>,
    /// The CRC-32 check its data must pass as the copy engine reads it: a member stored in
    /// an .npz archive, read in place. Boxed, as in [`crate::input::Tensor`].
    pub stored_crc: Option<Box<npz::StoredCrc>>,
}

/// An input file as a format's reader gets it: open, its length known, its first bytes read.
#[derive(Clone, Copy)]
pub struct Opened<'a> {
    /// The file, its cursor at the start.
    pub file: &'a File,
    /// Its length in bytes.
    pub len: u64,
    /// How messages name it.
    pub name: &'a InputRef,
    /// Its first bytes, already read (all of it when it is small enough; the .npy reader
    /// needs no more for nearly every file).
    pub head: &'a [u8],
}

impl Format {
    /// Every format's name, as `--input-format` takes them.
    pub fn names() -> Vec<&'static str> {
        NAMES.iter().map(|(name, _)| *name).collect()
    }

    /// The names of the formats tjoin writes, as `--format` takes them.
    pub fn output_names() -> Vec<&'static str> {
        NAMES
            .iter()
            .filter(|(_, format)| *format != Format::PyTorch)
            .map(|(name, _)| *name)
            .collect()
    }

    /// The format's short name, as `--dry-run` prints it.
    pub fn name(self) -> &'static str {
        NAMES
            .iter()
            .find(|(_, format)| *format == self)
            .map_or("?", |(name, _)| name)
    }

    /// The format of the input `file` at `path`: from its first bytes when they say (the
    /// .npy magic, a zip signature, a safetensors header), else from its extension, else
    /// JSON when the text opens with a bracket or brace, else .npy (whose reader then says
    /// what it found instead).
    pub fn of_input(path: &Path, head: &[u8]) -> Format {
        let start = &head[..head.len().min(64)];
        let json_like = start
            .iter()
            .find(|b| !b" \t\r\n".contains(b))
            .is_some_and(|b| matches!(b, b'[' | b'{'))
            // A safetensors header length (a u64 below 2^56) holds a zero byte; text does not.
            && !start[..start.len().min(9)].contains(&0);
        if start.starts_with(b"\x93NUMPY") {
            Format::Npy
        } else if head.starts_with(pickle::LEGACY_MAGIC) || pickle::is_tar(head) {
            // A zip archive is told apart by its members (`Format::read`).
            Format::PyTorch
        } else if start.starts_with(b"PK\x03\x04") || start.starts_with(b"PK\x05\x06") {
            Format::Npz
        } else if start.len() >= 9 && start[8] == b'{' && !json_like {
            // A safetensors header length is a little-endian u64: JSON text never starts one.
            Format::SafeTensors
        } else if let Some(format) = Format::of_extension(path) {
            format
        } else if json_like {
            Format::Json
        } else {
            Format::Npy
        }
    }

    /// The format a file's extension names, if it names one.
    pub fn of_extension(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?;
        NAMES
            .iter()
            .chain(MORE_EXTENSIONS)
            .find(|(n, _)| n.eq_ignore_ascii_case(ext))
            .map(|&(_, format)| format)
    }

    /// The format a `--format` / `--input-format` value names; refuses others, listing the
    /// names there are.
    pub fn from_name(name: &str, flag: &str) -> Result<Format> {
        NAMES
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|&(_, format)| format)
            .ok_or_else(|| {
                Error::refused(
                    format!("{flag} {name}: there is no format of that name"),
                    format!("name one of: {}", format_names()),
                )
            })
    }

    /// The format to write `path` in: `forced` (`--format`) if given, else from its
    /// extension. Standard output (`-`) has no extension, so it needs `--format`.
    pub fn of_output(path: &Path, forced: Option<Format>) -> Result<Format> {
        if forced == Some(Format::PyTorch)
            || (forced.is_none() && Format::of_extension(path) == Some(Format::PyTorch))
        {
            return Err(Error::refused(
                format!(
                    "tjoin reads PyTorch checkpoints but does not write them: {} would be one",
                    crate::messages::path(path)
                ),
                "write safetensors (-o model.safetensors), which torch and transformers load \
                 without running code from the file",
            ));
        }
        if let Some(format) = forced {
            return Ok(format);
        }
        if path.as_os_str() == crate::output::STDOUT {
            return Err(Error::refused(
                "writing to standard output (-o -) needs --format".to_string(),
                format!("add --format with one of: {}", format_names()),
            ));
        }
        Format::of_extension(path).ok_or_else(|| {
            Error::refused(
                format!(
                    "cannot tell which format to write {} in from its extension",
                    crate::messages::path(path)
                ),
                "name the output with the .npy, .npz or .safetensors extension, .json for JSON \
                 text, or add --format; to write a sharded checkpoint into a folder, end its \
                 name with / (-o merged/)"
                    .to_string(),
            )
        })
    }

    /// Whether the format can only hold data in C order, so the join must produce it.
    pub fn needs_c_order(self) -> bool {
        matches!(self, Format::SafeTensors | Format::Json)
    }

    /// The extension that names the format: `.npy`.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Npy => ".npy",
            Format::Npz => ".npz",
            Format::SafeTensors => ".safetensors",
            Format::Json => ".json",
            Format::PyTorch => ".pt",
        }
    }

    /// Whether files of this format hold named tensors, several of them.
    pub fn is_container(self) -> bool {
        matches!(self, Format::Npz | Format::SafeTensors | Format::PyTorch)
    }

    /// Whether tensor data is read from the input file itself, where it lies, after its
    /// header. JSON text is converted into the spill file as it is read, so the input is
    /// done with once `read` returns.
    pub fn reads_in_place(self) -> bool {
        self != Format::Json
    }

    /// Reads the tensors the file `opened` of this format declares; with `select`, only the
    /// tensor of that name (an error lists the names there are when none has it). Formats
    /// whose data cannot be mapped where it lies (JSON text) convert it into `spill`, and
    /// their tensors name the spill file as the one their data is in.
    pub fn read(
        self,
        opened: Opened<'_>,
        select: Option<&str>,
        spill: &mut Spill,
    ) -> Result<Contents> {
        let Opened {
            file,
            len,
            name,
            head,
        } = opened;
        let mut contents = match self {
            Format::Npy => Contents {
                tensors: vec![Found {
                    name: None,
                    info: npy::read_header_from(file, len, name, head)?,
                    file: None,
                    stored_crc: None,
                }],
                metadata: None,
                notes: Vec::new(),
                format: None,
            },
            Format::Npz => return read_archive(self, opened, select),
            Format::PyTorch if head.starts_with(b"PK") => {
                return read_archive(self, opened, select);
            }
            Format::PyTorch if pickle::is_tar(head) => return Err(pickle::tar_refused(name)),
            Format::PyTorch => return pickle::read_legacy(file, len, name, select),
            Format::SafeTensors => safetensors::read(file, len, name)?,
            Format::Json => json::read(file, len, name, spill)?,
        };
        if let Some(wanted) = select {
            let is_wanted = |t: &Found| t.name.as_deref() == Some(wanted);
            if !contents.tensors.iter().any(is_wanted) {
                let names: Vec<String> = contents
                    .tensors
                    .iter()
                    .filter_map(|t| t.name.clone())
                    .collect();
                return Err(no_such_tensor(name, wanted, &names));
            }
            contents.tensors.retain(is_wanted);
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
            Format::Json => Box::new(json::JsonWriter::new(options.json_form)),
            Format::PyTorch => Box::new(Unwritable),
        }
    }
}

/// Reads a zip archive: an .npz, or a `torch.save` checkpoint, told apart by their members.
fn read_archive(format: Format, opened: Opened<'_>, select: Option<&str>) -> Result<Contents> {
    let Opened {
        file, len, name, ..
    } = opened;
    let members = zip::directory(file, len).map_err(|reason| Error::Malformed {
        input: name.clone(),
        format: format.extension(),
        reason,
    })?;
    match pickle::archive_of(&members) {
        Some(archive) => {
            let mut contents = pickle::read_zip(file, name, &members, &archive, select)?;
            contents.format = Some(Format::PyTorch);
            Ok(contents)
        }
        None if format == Format::Npz => npz::read(members, file, name, select),
        None => Err(Error::Malformed {
            input: name.clone(),
            format: ".pt",
            reason: "it is a zip archive without a data.pkl member, which every torch.save \
                     archive has"
                .to_string(),
        }),
    }
}

fn format_names() -> String {
    Format::names().join(", ")
}

/// The outcome of a writer's check: the problems it found, if any, as one refusal (the
/// caller names the output in front of it).
pub fn cannot_hold(problems: Vec<String>) -> std::result::Result<(), Refusal> {
    if problems.is_empty() {
        return Ok(());
    }
    Err(Refusal {
        headline: problems.join("; "),
        details: Vec::new(),
        hint: None,
    })
}

/// The refusal of `FILE:NAME` when the file has no tensor `wanted`: the names it has, the
/// closest (by edit distance) first.
pub fn no_such_tensor(input: &InputRef, wanted: &str, names: &[String]) -> Error {
    let mut ranked: Vec<&String> = names.iter().collect();
    ranked.sort_by_key(|name| (strsim::levenshtein(wanted, name), name.as_str()));
    const SHOWN: usize = 10;
    let mut details: Vec<String> = ranked
        .iter()
        .take(SHOWN)
        .map(|n| crate::messages::name(n))
        .collect();
    if ranked.len() > SHOWN {
        details.push(format!("... and {} more", ranked.len() - SHOWN));
    }
    let hint = match ranked.first() {
        Some(best) => format!(
            "did you mean {}:{}?",
            crate::messages::path(&input.path),
            crate::messages::name(best)
        ),
        None => "the file holds no tensor at all".to_string(),
    };
    Error::Refused(vec![Refusal {
        headline: format!(
            "input {} ({}) has no tensor named `{}`; it has {} tensor{}, closest first:",
            input.position,
            crate::messages::path(&input.path),
            crate::messages::name(wanted),
            names.len(),
            if names.len() == 1 { "" } else { "s" }
        ),
        details,
        hint: Some(hint),
    }])
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
    /// Refuses outputs this format cannot hold (several tensors in a single-tensor format, an
    /// element type it has no name for), saying why. Called before anything is written.
    fn check(&self, tensors: &[OutTensor]) -> std::result::Result<(), Refusal>;
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

/// The writer of a format tjoin reads but does not write: refuses every output.
struct Unwritable;

impl Writer for Unwritable {
    fn check(&self, _tensors: &[OutTensor]) -> std::result::Result<(), Refusal> {
        cannot_hold(vec![
            "tjoin does not write PyTorch checkpoints; write safetensors instead".to_string(),
        ])
    }

    fn start_tensor(&mut self, _sink: &mut dyn Sink, _tensor: &OutTensor) -> io::Result<()> {
        Err(io::Error::other("tjoin does not write PyTorch checkpoints"))
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
    /// The logical shape (a boxed slice, a word shorter than a `Vec`: a join may keep
    /// 100,000 tensors).
    pub shape: Box<[u64]>,
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

/// The most dimensions a tensor may have: numpy's limit (`NPY_MAXDIMS`), past which numpy
/// can load neither such an input nor the output. It also bounds the work of every check
/// and plan, some of which take time in the square of the rank.
pub const MAX_RANK: usize = 64;

/// Refuses a shape of more than [`MAX_RANK`] dimensions, saying how many it has.
pub fn check_rank(shape: &[u64]) -> std::result::Result<(), String> {
    if shape.len() <= MAX_RANK {
        return Ok(());
    }
    Err(format!(
        "its shape has {} dimensions; numpy arrays have at most {MAX_RANK}",
        shape.len()
    ))
}

/// The number of bytes a tensor of this shape and item size holds, if it fits in a u64.
pub fn byte_count(shape: &[u64], itemsize: u64) -> Option<u64> {
    shape
        .iter()
        .try_fold(itemsize, |bytes, &dim| bytes.checked_mul(dim))
}
