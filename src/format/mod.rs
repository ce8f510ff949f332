//! Tensor file formats: reading what a file declares about its tensors, and writing an
//! output's headers around the data the copy engine streams. One module per format.

mod bytes;
pub mod gguf;
pub(crate) mod index;
pub mod json;
pub mod npy;
pub mod npz;
pub mod pickle;
pub mod safetensors;
mod sink;
pub mod walk;
pub mod zip;

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::Arc;

use crate::dtype::{ByteOrder, DType, Swaps};
use crate::error::{Error, InputRef, Refusal, Result};

use crate::sys::spill::Spill;

pub use bytes::FromBytes;
pub use sink::{PassThrough, Sink};

/// A file format: a handle on its [`Descriptor`], which says what tjoin can do with its
/// files. Callers ask the format (`holds_names`, `read`, `writer`) rather than matching on
/// which one it is; the constants below name the formats other stages choose themselves.
#[derive(Clone, Copy)]
pub struct Format(&'static Descriptor);

/// What a format is and what tjoin can do with its files: how they are recognised, read and
/// written. Each format's module declares one (`npy::FORMAT`); [`REGISTERED`] lists them.
pub struct Descriptor {
    /// Its name, as `--format` and `--input-format` take it and `--dry-run` prints it.
    pub name: &'static str,
    /// The extensions of its files, the first naming the format in messages (`.npy`).
    pub extensions: &'static [&'static str],
    /// What messages call its files (`PyTorch checkpoints`).
    pub files: &'static str,
    /// Whether a file's first bytes are this format's signature.
    pub magic: Option<Sign>,
    /// Whether a file's first bytes look like this format, a weaker sign than its extension
    /// (JSON text opens with a bracket or brace).
    pub looks_like: Option<Sign>,
    /// Reads a file of this format that is not a ZIP archive (or any file, for formats that
    /// are never ZIP archives).
    pub reader: Option<FileReader>,
    /// How this format's files are told apart and read when they are ZIP archives.
    pub archive: Option<Archive>,
    /// Whether and how tjoin writes this format.
    pub writing: Writing,
    /// Whether its files hold named tensors, several of them.
    pub holds_names: bool,
    /// Whether it can only hold data in C order, so the join must produce it.
    pub c_order_only: bool,
    /// Whether tensor data is read from the input file itself, where it lies, after its
    /// header (JSON text is converted into the spill file as it is read instead).
    pub reads_in_place: bool,
    /// Why a file of this format cannot grow in place (`--append`), if it cannot.
    pub cannot_grow: Option<&'static str>,
}

/// A test of a file's first bytes.
pub type Sign = fn(&[u8]) -> bool;

/// A reader of a whole file: the file, with `select` the one tensor wanted (other tensors
/// may be left out), and the spill file for data that cannot be mapped where it lies.
pub type FileReader = fn(Opened<'_>, Option<&str>, &mut Spill) -> Result<Contents>;

/// A reader of a claimed ZIP archive: its source (read by position), how messages name it,
/// its directory's members, and the one tensor wanted, if one is.
pub type ArchiveReader =
    fn(&dyn zip::ReadRange, &InputRef, Vec<zip::Member>, Option<&str>) -> Result<Contents>;

/// How a format stored as a ZIP archive claims an archive and reads it. Several formats are
/// ZIP archives (an .npz, a `torch.save` file): the first bytes say only that; the members
/// decide which one a file is.
pub struct Archive {
    /// Which archives are this format's.
    pub claims: Claim,
    /// Why an archive this format does not claim is not one of its files.
    pub unclaimed: &'static str,
    /// Reads a claimed archive, its directory `members` already listed; with `select`, the
    /// one tensor wanted, from any source read by position (a local file, a remote object).
    pub read: ArchiveReader,
}

/// Which ZIP archives a format claims.
pub enum Claim {
    /// Those whose members pass this test (a `data.pkl` one folder down).
    Members(fn(&[zip::Member]) -> bool),
    /// Every archive no format of [`Claim::Members`] claims (an .npz, whose reader then says
    /// what is wrong with the members it finds).
    Rest,
}

/// Whether and how tjoin writes a format.
pub enum Writing {
    /// Written by this writer, built from the options of the output.
    By(fn(&WriteOptions) -> Box<dyn Writer>),
    /// Read, never written; the hint says what to write instead.
    ReadOnly {
        /// What to write instead, as a refusal's hint.
        instead: &'static str,
    },
}

/// Every format tjoin knows, in the order `--input-format` and `--format` list them. Adding
/// a format is its module, with its [`Descriptor`], and one line here.
pub const REGISTERED: &[&Descriptor] = &[
    &npy::FORMAT,
    &json::FORMAT,
    &npz::FORMAT,
    &safetensors::FORMAT,
    &pickle::FORMAT,
    &gguf::FORMAT,
];

#[allow(non_upper_case_globals)]
impl Format {
    /// numpy's .npy: one tensor.
    pub const Npy: Format = Format(&npy::FORMAT);
    /// numpy's .npz: a zip archive of .npy files.
    pub const Npz: Format = Format(&npz::FORMAT);
    /// Hugging Face's safetensors: named tensors behind a JSON header.
    pub const SafeTensors: Format = Format(&safetensors::FORMAT);
    /// JSON text: nested arrays, or an object with dtype, shape and data.
    pub const Json: Format = Format(&json::FORMAT);
    /// PyTorch's `torch.save` (`.pt`, `.pth`, `.bin`): a pickle read without running it,
    /// its storages beside it (`format/pickle/`). Read, not written.
    pub const PyTorch: Format = Format(&pickle::FORMAT);
    /// llama.cpp's GGUF: keys, tensor infos, aligned data (`format/gguf/`). Its plain
    /// tensors are read into joins; GGUF is written by the GGUF flow (`flow/gguf.rs`).
    pub const Gguf: Format = Format(&gguf::FORMAT);
}

impl PartialEq for Format {
    fn eq(&self, other: &Format) -> bool {
        self.0.name == other.0.name
    }
}

impl Eq for Format {}

impl std::fmt::Debug for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.name)
    }
}

fn registered() -> impl Iterator<Item = Format> {
    REGISTERED.iter().map(|&descriptor| Format(descriptor))
}

/// How long a file is, as far as its first bytes tell: standard input and pipes are read
/// no further than that, so that an endless one (`/dev/zero`) is refused at once instead of
/// copied until the disk fills.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extent {
    /// Its first this many bytes are needed to tell.
    Head(u64),
    /// Its header declares it this many bytes long.
    Declared(u64),
    /// Its header, in the first bytes, cannot be read: nothing more is needed for the
    /// reader to say why.
    Unreadable,
    /// Text whose end only its end tells (JSON): every byte of it must be text.
    Text,
    /// A format whose length is not taken from its first bytes (a ZIP archive, whose members
    /// torch writes with their sizes after their data; a legacy `torch.save`; GGUF): read to
    /// the stream's end.
    Unbounded,
    /// It does not start as a file of the format does.
    Foreign,
}

impl Format {
    /// How long a file of this format whose first bytes are `head` is ([`Extent`]).
    pub fn extent(self, head: &[u8]) -> Extent {
        if self == Format::Npy {
            npy::extent(head)
        } else if self == Format::SafeTensors {
            safetensors::extent(head)
        } else if self == Format::Json {
            if json::looks_like(head) {
                Extent::Text
            } else {
                Extent::Foreign
            }
        } else if zip::is_signature(head) || self.0.magic.is_some_and(|magic| magic(head)) {
            Extent::Unbounded
        } else {
            Extent::Foreign
        }
    }
}

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
    /// What the reader left out of the tensors it gives, one short phrase each (`2 values
    /// that are not tensors`): said in every run, where `notes` are for `--dry-run`.
    pub left_out: Vec<String>,
    /// The format the file turned out to be, when not the one it was read as (a zip archive
    /// that holds a `torch.save` checkpoint rather than .npy members).
    pub format: Option<Format>,
    /// For each tensor that is one rank's block of a DTensor (by its place in `tensors`),
    /// the layout its file records: a `torch.save` of FSDP2 / DTensor state.
    pub distributed: Vec<(usize, pickle::dtensor::Distributed)>,
}

impl Contents {
    /// The contents of a file that holds tensors and nothing else worth saying.
    pub fn of_tensors(tensors: Vec<Found>) -> Contents {
        Contents {
            tensors,
            metadata: None,
            notes: Vec::new(),
            left_out: Vec::new(),
            format: None,
            distributed: Vec::new(),
        }
    }
}

/// One tensor a reader found.
pub struct Found {
    /// Its name, for formats that hold several.
    pub name: Option<String>,
    /// What its header says.
    pub info: TensorInfo,
    /// The file its data is in, when not the input itself (JSON text converted, a deflated
    /// .npz member).
    pub file: Option<OwnData>,
    /// The CRC-32 check its data must pass as the copy engine reads it: a member stored in
    /// an .npz archive, read in place. Boxed, as in [`crate::input::Tensor`].
    pub stored_crc: Option<Box<npz::StoredCrc>>,
}

/// Where a tensor's data is when not in the input itself.
#[derive(Clone)]
pub enum OwnData {
    /// A file of its own, written when the input was read (JSON's converted data).
    File(Arc<File>),
    /// A deflated .npz member, inflated into a file of its own when its data is first read:
    /// a `--dry-run` reads its .npy header alone.
    Inflated(Arc<npz::Inflation>),
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
    /// What the format is and what tjoin can do with its files.
    pub fn descriptor(self) -> &'static Descriptor {
        self.0
    }

    /// Every format's name, as `--input-format` takes them.
    pub fn names() -> Vec<&'static str> {
        registered().map(Format::name).collect()
    }

    /// The names of the formats tjoin writes, as `--format` takes them.
    pub fn output_names() -> Vec<&'static str> {
        registered()
            .filter(|format| format.is_written())
            .map(Format::name)
            .collect()
    }

    /// The format's short name, as `--dry-run` prints it.
    pub fn name(self) -> &'static str {
        self.0.name
    }

    /// The format of the input `file` at `path`: from its first bytes when they are a
    /// format's signature (the .npy magic, a zip signature, a safetensors header), else from
    /// its extension, else from what the bytes look like (JSON text opens with a bracket or
    /// brace), else .npy (whose reader then says what it found instead). A ZIP archive is
    /// sniffed as the format that claims the archives no other claims (.npz); its members
    /// decide when it is read ([`Format::read`]).
    pub fn of_input(path: &Path, head: &[u8]) -> Format {
        let sign = |test: fn(&Descriptor) -> Option<Sign>| {
            registered().find(|format| test(format.0).is_some_and(|sign| sign(head)))
        };
        sign(|d| d.magic)
            .or_else(|| Format::of_extension(path))
            .or_else(|| sign(|d| d.looks_like))
            .unwrap_or(Format::Npy)
    }

    /// The format a file's extension names, if it names one.
    pub fn of_extension(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?;
        registered().find(|format| {
            format
                .0
                .extensions
                .iter()
                .any(|e| e.trim_start_matches('.').eq_ignore_ascii_case(ext))
        })
    }

    /// The format a `--format` / `--input-format` value names; refuses others, listing the
    /// names there are.
    pub fn from_name(name: &str, flag: &str) -> Result<Format> {
        registered()
            .find(|format| format.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                Error::refused(
                    format!("{flag} {name}: there is no format of that name"),
                    format!("name one of: {}", format_names()),
                )
            })
    }

    /// The format to write `path` in: `forced` (`--format`) if given, else from its
    /// extension. Standard output (`-`) has no extension, so it needs `--format`. A format
    /// tjoin only reads is refused here.
    pub fn of_output(path: &Path, forced: Option<Format>) -> Result<Format> {
        if let Some(format) = forced.or_else(|| Format::of_extension(path)) {
            format.check_written(Some(path))?;
        }
        if let Some(format) = forced {
            return Ok(format);
        }
        if path.as_os_str() == crate::sys::STDOUT {
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

    /// Whether tjoin writes this format.
    pub fn is_written(self) -> bool {
        matches!(self.0.writing, Writing::By(_))
    }

    /// Refuses a format tjoin reads but does not write, naming the output `path` when there
    /// is one: the one place such a write is refused.
    pub fn check_written(self, path: Option<&Path>) -> Result<()> {
        match self.0.writing {
            Writing::By(_) => Ok(()),
            Writing::ReadOnly { instead } => Err(not_written(self, instead, path)),
        }
    }

    /// The format a dry run without an output plans: the first input's, or safetensors when
    /// tjoin does not write that one.
    pub fn planned_output(self) -> Format {
        if self.is_written() {
            self
        } else {
            Format::SafeTensors
        }
    }

    /// Why a file of this format cannot grow in place (`--append`), if it cannot.
    pub fn cannot_grow(self) -> Option<String> {
        if !self.is_written() {
            return Some(format!(
                "tjoin reads {} but does not write them",
                self.0.files
            ));
        }
        self.0.cannot_grow.map(str::to_string)
    }

    /// Whether the format can only hold data in C order, so the join must produce it.
    pub fn needs_c_order(self) -> bool {
        self.0.c_order_only
    }

    /// The extension that names the format: `.npy`.
    pub fn extension(self) -> &'static str {
        self.0.extensions.first().copied().unwrap_or("")
    }

    /// Whether files of this format hold named tensors, several of them.
    pub fn is_container(self) -> bool {
        self.0.holds_names
    }

    /// Whether tensor data is read from the input file itself, where it lies, after its
    /// header. JSON text is converted into the spill file as it is read, so the input is
    /// done with once `read` returns.
    pub fn reads_in_place(self) -> bool {
        self.0.reads_in_place
    }

    /// Reads the tensors the file `opened` of this format declares; with `select`, only the
    /// tensor of that name (an error lists the names there are when none has it). Formats
    /// whose data cannot be mapped where it lies (JSON text) convert it into `spill`, and
    /// their tensors name the spill file as the one their data is in. A ZIP archive is read
    /// as the format its members make it ([`Claim`]), which `Contents::format` then names.
    pub fn read(
        self,
        opened: Opened<'_>,
        select: Option<&str>,
        spill: &mut Spill,
    ) -> Result<Contents> {
        let descriptor = self.0;
        let mut contents = match (self.as_archive(opened.head), descriptor.reader) {
            (Some(archive), _) => {
                let source = (opened.file as &dyn zip::ReadRange, opened.len, opened.head);
                read_archive(self, archive, source, opened.name, select)?
            }
            (None, Some(reader)) => reader(opened, select, spill)?,
            (None, None) => {
                return Err(Error::refused(
                    format!("tjoin writes {} but does not read them", descriptor.files),
                    "name an input in another format, or drop --input-format",
                ));
            }
        };
        keep_selected(&mut contents, select, opened.name)?;
        Ok(contents)
    }

    /// How a file of this format whose first bytes are `head` is read as a ZIP archive, if it
    /// is one: always for a format that is only an archive (.npz), for one with another form
    /// (`torch.save`'s legacy pickles) when its first bytes say so.
    fn as_archive(self, head: &[u8]) -> Option<&'static Archive> {
        let descriptor = self.0;
        let archive = descriptor.archive.as_ref()?;
        (descriptor.reader.is_none() || zip::is_archive(head)).then_some(archive)
    }

    /// The writer of an output in this format; refuses a format tjoin does not write.
    pub fn writer(self, options: &WriteOptions) -> Result<Box<dyn Writer>> {
        match self.0.writing {
            Writing::By(writer) => Ok(writer(options)),
            Writing::ReadOnly { instead } => Err(not_written(self, instead, None)),
        }
    }
}

/// Keeps only the tensor `select` names, when one is named; refuses a name the file does not
/// hold, listing those it does.
pub(crate) fn keep_selected(
    contents: &mut Contents,
    select: Option<&str>,
    name: &InputRef,
) -> Result<()> {
    let Some(wanted) = select else {
        return Ok(());
    };
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
    Ok(())
}

/// Reads the ZIP archive `file` (any source read by position) of `len` bytes, its first bytes
/// `head`, that `format` was asked to read, as the format its members make it: a
/// format that claims archives by their members reads only those it claims; the format of
/// the other archives (.npz) reads those no format claims by its members.
pub(crate) fn read_archive(
    format: Format,
    archive: &Archive,
    (file, len, head): (&dyn zip::ReadRange, u64, &[u8]),
    name: &InputRef,
    select: Option<&str>,
) -> Result<Contents> {
    let claimed = claimed_by(format, name.location.as_path(), head);
    let malformed = |reason: String| Error::Malformed {
        input: name.clone(),
        format: claimed.extension(),
        reason,
    };
    let members = zip::directory(file, len).map_err(malformed)?;
    let claims = |format: &Format| match format.0.archive.as_ref().map(|a| &a.claims) {
        Some(Claim::Members(claims)) => claims(&members),
        _ => false,
    };
    let claimant = match archive.claims {
        Claim::Members(_) if claims(&format) => format,
        Claim::Members(_) => return Err(malformed(archive.unclaimed.to_string())),
        Claim::Rest => registered().find(claims).unwrap_or(format),
    };
    let read = claimant.0.archive.as_ref().map_or(archive.read, |a| a.read);
    let mut contents = read(file, name, members, select)?;
    contents.format = Some(claimant);
    Ok(contents)
}

/// The format an archive claims to be, for messages about an archive whose directory cannot be
/// read: its extension's, if that format reads archives (`model.pt`); else the format that
/// claims its first member, which its first local header names (`torch.save` writes
/// `ARCHIVE/data.pkl` first); else `format`.
fn claimed_by(format: Format, path: &Path, head: &[u8]) -> Format {
    if let Some(named) = Format::of_extension(path).filter(|f| f.0.archive.is_some()) {
        return named;
    }
    let first = head.get(26..28).and_then(|len| {
        let len = usize::from(u16::from_le_bytes([len[0], len[1]]));
        head.get(30..30 + len)
    });
    let Some(first) = first.filter(|_| head.starts_with(b"PK\x03\x04")) else {
        return format;
    };
    let member = [zip::Member {
        name: String::from_utf8_lossy(first).into_owned(),
        method: zip::STORED,
        crc: 0,
        compressed: 0,
        size: 0,
        data_start: 0,
    }];
    registered()
        .find(|f| matches!(f.0.archive.as_ref().map(|a| &a.claims), Some(Claim::Members(claims)) if claims(&member)))
        .unwrap_or(format)
}

/// The refusal of a write in a format tjoin reads but does not write.
fn not_written(format: Format, instead: &str, path: Option<&Path>) -> Error {
    let files = format.0.files;
    let headline = match path {
        Some(path) => format!(
            "tjoin reads {files} but does not write them: {} would be one",
            crate::messages::path(path)
        ),
        None => format!("tjoin reads {files} but does not write them"),
    };
    Error::refused(headline, instead)
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
            input.location,
            crate::messages::name(best)
        ),
        None => "the file holds no tensor at all".to_string(),
    };
    Error::Refused(vec![Refusal {
        headline: format!(
            "input {} ({}) has no tensor named `{}`; it has {} tensor{}, closest first:",
            input.position,
            input.location,
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
        crate::messages::shape_text(&self.shape)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A format tjoin would only read, declared as a new format's module would.
    const TOY: Descriptor = Descriptor {
        name: "toy",
        extensions: &[".toy"],
        files: "toy files",
        magic: Some(|head| head.starts_with(b"TOY!")),
        looks_like: None,
        reader: Some(|_, _, _| {
            Ok(Contents {
                tensors: Vec::new(),
                metadata: None,
                notes: Vec::new(),
                left_out: Vec::new(),
                format: None,
                distributed: Vec::new(),
            })
        }),
        archive: None,
        writing: Writing::ReadOnly {
            instead: "write safetensors",
        },
        holds_names: true,
        c_order_only: false,
        reads_in_place: true,
        cannot_grow: None,
    };

    fn headline(error: Error) -> String {
        match error {
            Error::Refused(refusals) => refusals[0].headline.clone(),
            other => panic!("not a refusal: {other}"),
        }
    }

    #[test]
    fn a_read_only_format_is_refused_as_an_output_from_its_descriptor_alone() {
        let toy = Format(&TOY);
        let path = Path::new("out.toy");
        let refused = Format::of_output(path, Some(toy)).unwrap_err();
        assert!(
            headline(refused).starts_with("tjoin reads toy files but does not write them: "),
            "the output is refused, named"
        );
        assert!(toy.writer(&WriteOptions::default()).is_err());
        assert_eq!(toy.planned_output(), Format::SafeTensors);
        assert_eq!(
            toy.cannot_grow().as_deref(),
            Some("tjoin reads toy files but does not write them")
        );
        assert!(toy.is_container());
    }

    #[test]
    fn pytorch_outputs_are_refused_by_extension_and_by_name() {
        for (path, forced) in [
            ("model.pt", None),
            ("model.pth", None),
            ("x.npy", Some(Format::PyTorch)),
        ] {
            let refused = Format::of_output(Path::new(path), forced).unwrap_err();
            assert!(headline(refused).starts_with("tjoin reads PyTorch checkpoints"));
        }
        assert!(Format::PyTorch.writer(&WriteOptions::default()).is_err());
        assert!(!Format::output_names().contains(&"pt"));
        assert_eq!(Format::PyTorch.planned_output(), Format::SafeTensors);
    }

    #[test]
    fn every_registered_format_has_one_name_its_own_extensions_and_a_reader() {
        let mut names = Vec::new();
        let mut extensions: Vec<&str> = Vec::new();
        for descriptor in REGISTERED {
            assert!(
                descriptor.reader.is_some() || descriptor.archive.is_some(),
                "{} is read",
                descriptor.name
            );
            assert!(descriptor.extensions.iter().all(|e| e.starts_with('.')));
            assert!(!descriptor.extensions.is_empty());
            names.push(descriptor.name);
            extensions.extend(descriptor.extensions);
        }
        let (all_names, all_extensions) = (names.len(), extensions.len());
        names.sort_unstable();
        names.dedup();
        extensions.sort_unstable();
        extensions.dedup();
        assert_eq!(names.len(), all_names, "names are unique");
        assert_eq!(extensions.len(), all_extensions, "extensions are unique");
        let rest = REGISTERED
            .iter()
            .filter(|d| {
                matches!(
                    d.archive,
                    Some(Archive {
                        claims: Claim::Rest,
                        ..
                    })
                )
            })
            .count();
        assert!(
            rest <= 1,
            "at most one format takes the archives no other claims"
        );
        assert_eq!(
            Format::names(),
            ["npy", "json", "npz", "safetensors", "pt", "gguf"]
        );
    }

    #[test]
    fn zip_archives_are_sniffed_as_archives_and_their_members_decide() {
        let zip = b"PK\x03\x04\x14\x00\x00\x00\x00\x00";
        assert_eq!(Format::of_input(Path::new("model.pt"), zip), Format::Npz);
        let pt = |name: &str| zip::Member {
            name: name.to_string(),
            method: zip::STORED,
            crc: 0,
            compressed: 0,
            size: 0,
            data_start: 0,
        };
        let claims = |format: Format, members: &[zip::Member]| match &format.0.archive {
            Some(Archive {
                claims: Claim::Members(claims),
                ..
            }) => claims(members),
            _ => false,
        };
        assert!(claims(
            Format::PyTorch,
            &[pt("archive/data.pkl"), pt("archive/data/0")]
        ));
        assert!(!claims(
            Format::PyTorch,
            &[pt("archive/data.pkl"), pt("x.npy")]
        ));
        assert!(
            !claims(Format::Npz, &[pt("x.npy")]),
            "an .npz claims only the rest"
        );
    }
}
