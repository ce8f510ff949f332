//! What an opened input is: its tensors, the file each tensor's bytes are in (open, or
//! closed and reopened by its location), and the files it was read from, checked unchanged
//! before the output is committed.

use std::fs::File;
use std::io;
use std::sync::Arc;

use super::source::{self, LocalFiles, Stamp, Version};
use super::sources;
use super::{Watched, sharded};
use crate::error::{Error, InputRef, Result};
use crate::format::Format;
use crate::format::TensorInfo;
use crate::format::npz::StoredCrc;
use crate::location::Location;

/// One input file as given on the command line, and the tensors it holds.
pub struct Input {
    /// How messages name it.
    pub name: InputRef,
    /// The tensors it holds, in the order the file lists them (only the one named after a
    /// colon, `FILE:NAME`, when one is). A boxed slice, a word shorter than a `Vec`: a join
    /// may have 100,000 inputs.
    pub tensors: Box<[Tensor]>,
    /// The file's format.
    pub format: Format,
    /// What only some inputs have; `None` when it would be all empty (boxed: most inputs
    /// are single files without any, and a join may have 100,000 of them).
    pub extras: Option<Box<Extras>>,
    /// The file it was read from (the file itself, a sharded checkpoint's index, a
    /// distributed checkpoint's first file), kept open (or reopened by path) until the
    /// output is committed, and checked unchanged before. Held here, not in a list: a list
    /// of one would cost an allocation per input, and a join may have 100,000 of them.
    pub(super) watched: Watched,
}

/// What only some inputs have.
#[derive(Default)]
pub struct Extras {
    /// The tensor named after a colon on the command line, if one was.
    pub selected: Option<String>,
    /// safetensors' `__metadata__`, in the file's order.
    pub metadata: Option<Vec<(String, String)>>,
    /// What its reader noted for `--dry-run`: a checkpoint's values that are not tensors,
    /// its tensors that share a storage.
    pub notes: Vec<String>,
    /// What its reader left out of the tensors it gives, one short phrase each: said in
    /// every run ([`Input::left_out`]).
    pub left_out: Vec<String>,
    /// For a sharded checkpoint (an index, or a folder), its index and shards.
    pub shards: Option<sharded::ShardSet>,
    /// For a PyTorch distributed checkpoint, where each of the input's tensors (a block of a
    /// larger tensor) starts inside its full tensor, per axis (`src/input/dcp/`).
    pub offsets: Option<Vec<Vec<u64>>>,
    /// For a distributed checkpoint that records them (`.metadata`), each tensor's full
    /// shape, by the name its blocks have.
    pub recorded: Option<std::collections::HashMap<String, Vec<u64>>>,
    /// The files it was read from besides its own (a sharded checkpoint's shards, a
    /// distributed checkpoint's other files), watched as its own is.
    pub(crate) more_watched: Vec<Watched>,
    /// For a `torch.save` of DTensors, each tensor that is a rank's block (by its place in
    /// `tensors`) and the layout its file records (`src/input/dtensor.rs` places them).
    pub distributed: Vec<(usize, crate::format::pickle::dtensor::Distributed)>,
    /// For DTensor rank files, the copies of blocks that several ranks hold (replicated),
    /// each with the place in `tensors` of the copy kept: compared with it before the
    /// output is written, and not written.
    pub replicas: Vec<(usize, Tensor)>,
    /// For a checkpoint consolidated into another model's state dict (DeepSpeed ZeRO), how
    /// its blocks become the output's tensors.
    pub consolidated: Option<Box<Consolidated>>,
}

/// How a checkpoint whose tensors are runs of flat vectors (DeepSpeed ZeRO's partitions)
/// becomes the state dict it was saved from.
pub struct Consolidated {
    /// The shape each flattened tensor is viewed in, by name: its blocks are runs of its
    /// flattened elements, placed by `Extras::offsets` along its one axis.
    pub views: std::collections::HashMap<String, Vec<u64>>,
    /// The element type its floating-point tensors are written in unless `--cast` says
    /// otherwise (what the checkpoint's own converter writes).
    pub dtype: crate::dtype::DType,
    /// What the run must say on standard error (a tensor taken from where the converter
    /// does not take it).
    pub warnings: Vec<String>,
}

impl Extras {
    /// Boxed, or `None` when it holds nothing.
    pub fn boxed(self) -> Option<Box<Extras>> {
        let empty = self.selected.is_none()
            && self.metadata.is_none()
            && self.notes.is_empty()
            && self.left_out.is_empty()
            && self.shards.is_none()
            && self.offsets.is_none()
            && self.recorded.is_none()
            && self.more_watched.is_empty()
            && self.distributed.is_empty()
            && self.replicas.is_empty()
            && self.consolidated.is_none();
        (!empty).then(|| Box::new(self))
    }
}

/// One tensor: what its header declares and the file its bytes are in.
pub struct Tensor {
    /// How messages name it (with the tensor's name for files that hold several).
    pub name: InputRef,
    /// What the header declares; `data_offset` counts from the start of `file`.
    pub info: TensorInfo,
    /// The file holding the data: the input itself, or a temporary copy of data that could
    /// not be mapped where it lies (compressed, JSON text, or read from a pipe).
    pub file: DataFile,
    /// The CRC-32 check its data must pass as the copy engine reads it: a member stored in
    /// an .npz archive. Boxed: most tensors have none, and a join may keep 100,000 tensors.
    pub stored_crc: Option<Box<StoredCrc>>,
}

impl Tensor {
    /// The CRC-32 check to finish over its data, if it is a stored .npz member, with the
    /// name its failure gives.
    pub fn crc_check(&self) -> Option<(InputRef, StoredCrc)> {
        let check = self.stored_crc.as_deref()?.clone();
        Some((self.name.clone(), check))
    }
}

/// A file that holds tensor data: open, or closed to spare file descriptors and reopened
/// (and checked to be the same file) when its data is needed. Cloning it shares the file,
/// or the path and stamp to reopen it by: a join of 100,000 inputs keeps one of each.
#[derive(Clone)]
pub enum DataFile {
    /// Open for the whole run.
    Open(Arc<File>),
    /// Closed after its header was read.
    Closed(Arc<FileRecord>),
    /// A deflated .npz member, inflated the first time it is opened.
    Inflated(Arc<crate::format::npz::Inflation>),
    /// An object of a remote source (`input/remote.rs`), pinned to the version its header
    /// was read from: read by range (`Source::read_at`), or downloaded once into an unnamed
    /// temporary file for a plan that maps it.
    Remote(Arc<RemoteFile>),
}

/// An object whose data is read from its source, not from a local file.
pub struct RemoteFile {
    /// Where it is and the version (ETag) every read is pinned to.
    pub(super) record: Arc<FileRecord>,
    /// Its length in bytes.
    len: u64,
    /// Its copy in an unnamed temporary file, made the first time a plan maps it.
    copy: std::sync::Mutex<Option<Arc<File>>>,
}

impl From<crate::format::OwnData> for DataFile {
    fn from(data: crate::format::OwnData) -> DataFile {
        match data {
            crate::format::OwnData::File(file) => DataFile::Open(file),
            crate::format::OwnData::Inflated(inflation) => DataFile::Inflated(inflation),
        }
    }
}

/// Where a file is, and what it was when its header was read.
pub struct FileRecord {
    pub(super) location: Location,
    pub(super) version: Version,
}

impl DataFile {
    /// A file closed after its header was read, to reopen at `location`; `stamp` is what
    /// it was then.
    pub fn closed(location: Location, stamp: Stamp) -> DataFile {
        DataFile::Closed(Arc::new(FileRecord {
            location,
            version: Version::Local(stamp),
        }))
    }

    /// The object at `location` of a remote source, `len` bytes long, every read of it pinned
    /// to `version`.
    pub fn remote(location: Location, version: Version, len: u64) -> DataFile {
        DataFile::Remote(Arc::new(RemoteFile {
            record: Arc::new(FileRecord { location, version }),
            len,
            copy: std::sync::Mutex::default(),
        }))
    }

    /// The file `file` opened for an input at `location`, as it was then (`version`): kept
    /// open when `keep_open` or when it is a copy of an object (which has no local name to
    /// be reopened by), else closed and reopened by its location when its data is read.
    pub fn of_opened(
        location: &Location,
        file: File,
        version: &Version,
        keep_open: bool,
    ) -> DataFile {
        DataFile::of_shared(location, &Arc::new(file), version, keep_open)
    }

    /// [`DataFile::of_opened`] of a file shared with others.
    pub fn of_shared(
        location: &Location,
        file: &Arc<File>,
        version: &Version,
        keep_open: bool,
    ) -> DataFile {
        match version {
            Version::Local(stamp) if !keep_open => {
                DataFile::closed(location.clone(), stamp.clone())
            }
            _ => DataFile::Open(Arc::clone(file)),
        }
    }

    /// The data of a local file or object that `objects::open_readable` opened, as it was
    /// then (`version`, `len` bytes): a local file as [`DataFile::of_shared`] keeps it, an
    /// object read by range, every read pinned to `version`.
    pub fn of_readable(
        location: &Location,
        readable: &super::objects::Readable,
        (version, len): (&Version, u64),
        keep_open: bool,
    ) -> DataFile {
        match readable.file() {
            Some(file) => DataFile::of_shared(location, file, version, keep_open),
            None => DataFile::remote(location.clone(), version.clone(), len),
        }
    }

    /// Its data read by position, without a map: the open file (reopened if it was closed,
    /// failing if it changed), or the object, by range. For the readers that read a little
    /// of a tensor (planning's comparisons), where a map would download an object whole.
    pub fn reader(&self, name: &InputRef) -> Result<DataReader<'_>> {
        match self {
            DataFile::Remote(remote) => Ok(DataReader::Remote(remote)),
            _ => self.open(name).map(DataReader::File),
        }
    }

    /// The object, when its data is read from a remote source.
    pub fn remote_object(&self) -> Option<&RemoteFile> {
        match self {
            DataFile::Remote(remote) => Some(remote),
            _ => None,
        }
    }

    /// The open file, reopening it if it was closed. Fails if it changed in the meantime.
    pub fn open(&self, name: &InputRef) -> Result<Arc<File>> {
        match self {
            DataFile::Open(file) => Ok(Arc::clone(file)),
            DataFile::Inflated(inflation) => inflation.file(),
            DataFile::Remote(remote) => remote.copy(name),
            DataFile::Closed(closed) => {
                let source =
                    sources::source_of(&closed.location).map_err(|e| name.io_error("reopen", e))?;
                if !source.is_local() {
                    // The engine maps what it copies; a remote input's bytes are read by
                    // range (`Source::read_at`) into bounded buffers instead.
                    let why = "it is not a local file, and its data is read by range, not mapped";
                    return Err(name.io_error("map", io::Error::other(why)));
                }
                let reopened = LocalFiles::reopen(&closed.location, &closed.version)
                    .map_err(|e| name.io_error("reopen", e))?;
                reopened.map(Arc::new).ok_or_else(|| changed(name))
            }
        }
    }
}

/// Tensor data read by position ([`DataFile::reader`]).
pub enum DataReader<'a> {
    /// A local file.
    File(Arc<File>),
    /// An object, every read pinned to the version its header was read from.
    Remote(&'a RemoteFile),
}

impl DataReader<'_> {
    /// Fills `buf` with the bytes from `offset`; `leave_cache`: a local file's pages are
    /// left out of the page cache when they were not in it (`sys::read_leaving_cache`).
    pub fn read_at(&self, buf: &mut [u8], offset: u64, leave_cache: bool) -> io::Result<()> {
        match self {
            DataReader::File(file) if leave_cache => {
                crate::sys::read_leaving_cache(file, buf, offset)
            }
            DataReader::File(file) => crate::sys::read_exact_at(file, buf, offset),
            DataReader::Remote(remote) => remote.read_at(offset, buf),
        }
    }
}

impl RemoteFile {
    /// Fills `buf` with its bytes at `offset`, pinned to the version its header was read
    /// from: a read of an object replaced since fails, naming the change.
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let FileRecord { location, version } = &*self.record;
        sources::source_of(location)?.read_at(location, version, offset, buf)
    }

    /// Its copy in an unnamed temporary file, downloaded (every read pinned to its version)
    /// the first time it is asked for: for plans that gather it (an input in Fortran order);
    /// the engine reads others by range (`engine/ranged.rs`).
    fn copy(&self, name: &InputRef) -> Result<Arc<File>> {
        let mut copy = self
            .copy
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(file) = copy.as_ref() {
            return Ok(Arc::clone(file));
        }
        let head = source::Head {
            len: self.len,
            version: self.record.version.clone(),
            kind: source::Kind::Object,
        };
        let file = super::objects::download(&self.record.location, &head)
            .map_err(|e| name.io_error("read", e))?;
        let file = Arc::new(file);
        *copy = Some(Arc::clone(&file));
        Ok(file)
    }
}

pub(super) fn changed(name: &InputRef) -> Error {
    name.io_error("read", source::changed())
}

impl Input {
    /// An input read from several files (a sharded checkpoint: `index`, then `shards`' files
    /// in `more_watched`), each of which is checked unchanged before the output is committed.
    pub(crate) fn of_files(
        name: InputRef,
        tensors: Vec<Tensor>,
        read: sharded::Read,
        shards: sharded::ShardSet,
        (index, more_watched): (Watched, Vec<Watched>),
    ) -> Input {
        Input {
            name,
            tensors: tensors.into(),
            format: read.format,
            extras: Extras {
                metadata: read.metadata,
                notes: read.notes,
                left_out: read.left_out,
                shards: Some(shards),
                more_watched,
                ..Extras::default()
            }
            .boxed(),
            watched: index,
        }
    }

    /// The tensor named after a colon on the command line, if one was.
    pub fn selected(&self) -> Option<&str> {
        self.extras.as_ref()?.selected.as_deref()
    }

    /// safetensors' `__metadata__`, in the file's order.
    pub fn metadata(&self) -> Option<&[(String, String)]> {
        self.extras.as_ref()?.metadata.as_deref()
    }

    /// What its reader noted for `--dry-run`.
    pub fn notes(&self) -> &[String] {
        self.extras.as_ref().map_or(&[], |e| e.notes.as_slice())
    }

    /// Keeps only the tensors `keep` accepts, and what goes with each by its place: a
    /// distributed checkpoint's offsets, a DTensor block's layout and replicas.
    pub fn retain_tensors(&mut self, keep: impl Fn(&Tensor) -> bool) {
        let mask: Vec<bool> = self.tensors.iter().map(&keep).collect();
        if mask.iter().all(|&k| k) {
            return;
        }
        let mut place = Vec::with_capacity(mask.len());
        let mut kept = 0;
        for &k in &mask {
            place.push(k.then_some(kept));
            kept += usize::from(k);
        }
        let tensors = std::mem::take(&mut self.tensors).into_vec();
        self.tensors = tensors
            .into_iter()
            .zip(&mask)
            .filter_map(|(t, &k)| k.then_some(t))
            .collect();
        let Some(extras) = self.extras.as_mut() else {
            return;
        };
        if let Some(offsets) = extras.offsets.take() {
            let offsets = offsets
                .into_iter()
                .zip(&mask)
                .filter_map(|(o, &k)| k.then_some(o));
            extras.offsets = Some(offsets.collect());
        }
        let moved = |at: usize| place.get(at).copied().flatten();
        let distributed = std::mem::take(&mut extras.distributed).into_iter();
        extras.distributed = distributed
            .filter_map(|(at, d)| Some((moved(at)?, d)))
            .collect();
        let replicas = std::mem::take(&mut extras.replicas).into_iter();
        extras.replicas = replicas
            .filter_map(|(at, r)| Some((moved(at)?, r)))
            .collect();
    }

    /// What its reader left out of the tensors it gives (values that are not tensors, an
    /// optimizer's state beside a model), one short phrase each.
    pub fn left_out(&self) -> &[String] {
        self.extras.as_ref().map_or(&[], |e| e.left_out.as_slice())
    }

    /// For a sharded checkpoint, its index and shards.
    pub fn shards(&self) -> Option<&sharded::ShardSet> {
        self.extras.as_ref()?.shards.as_ref()
    }

    /// For a distributed checkpoint, where each tensor starts inside its full tensor.
    pub fn offsets(&self) -> Option<&[Vec<u64>]> {
        self.extras.as_ref()?.offsets.as_deref()
    }

    /// For a consolidated checkpoint (DeepSpeed ZeRO), how its blocks become tensors.
    pub fn consolidated(&self) -> Option<&Consolidated> {
        self.extras.as_ref()?.consolidated.as_deref()
    }

    /// For a distributed checkpoint that records them, each tensor's full shape.
    pub fn recorded(&self) -> Option<&std::collections::HashMap<String, Vec<u64>>> {
        self.extras.as_ref()?.recorded.as_ref()
    }

    /// Every file it was read from: its own, then the others.
    fn watched(&self) -> impl Iterator<Item = &Watched> {
        let more = self.extras.as_ref().map(|e| e.more_watched.as_slice());
        std::iter::once(&self.watched).chain(more.unwrap_or_default())
    }

    /// Every file it was read from, own first, for an input that combines several.
    pub(crate) fn into_watched(self) -> impl Iterator<Item = Watched> {
        let more = self.extras.map(|e| e.more_watched).unwrap_or_default();
        std::iter::once(self.watched).chain(more)
    }

    /// Every file it was read from, own first, and its version when it was opened: what a
    /// job's manifest records of the input (`src/output/job/`).
    pub(crate) fn versions(&self) -> impl Iterator<Item = (&Location, &Version)> {
        self.watched()
            .map(|w| (&w.record.location, &w.record.version))
    }

    /// How many of its files it keeps open.
    pub fn open_files(&self) -> usize {
        self.watched().filter(|w| w.open.is_some()).count()
    }

    /// Fails if a file's identity, length or change time changed since it was opened:
    /// the bytes read may then be a mixture of two versions of it.
    pub fn check_unchanged(&self) -> Result<()> {
        for Watched { record, open } in self.watched() {
            let now = match open {
                Some(file) => Stamp::of(file).map(Version::Local),
                None => sources::source_of(&record.location)
                    .and_then(|source| source.head(&record.location))
                    .map(|head| head.version),
            };
            let name = InputRef {
                position: self.name.position,
                location: record.location.clone(),
                tensor: None,
            };
            let now = now.map_err(|e| name.io_error("re-check", e))?;
            if now != record.version {
                return Err(changed(&name));
            }
        }
        Ok(())
    }
}
