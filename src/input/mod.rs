//! Opening the inputs: each file, the tensors its header declares, and the identity that is
//! checked again before the output is committed.
//!
//! Inputs whose data cannot be mapped where it lies (JSON text, standard input) are
//! converted or copied into a temporary file first, so that the copy engine sees every
//! tensor as bytes of a mappable file. Beyond a budget of open files, inputs are closed
//! after their header is read and reopened when the engine gets to them: a join of 100,000
//! files must not run out of file descriptors.

pub mod dcp;
pub mod deepspeed;
pub mod dtensor;
pub mod gguf;
pub mod reference;
pub mod sharded;
pub mod source;
mod stream;
mod watched;

pub use source::Stamp;
pub(crate) use watched::Watched;

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, mpsc};

use crate::error::{Error, InputRef, Result, STDIN};
use crate::format::npz::StoredCrc;
use crate::format::{Format, Opened, TensorInfo};
use crate::location::Location;
use crate::sys;
use crate::sys::spill::Spill;
use source::{LocalFiles, Version};

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
    watched: Watched,
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
    location: Location,
    version: Version,
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

    /// The open file, reopening it if it was closed. Fails if it changed in the meantime.
    pub fn open(&self, name: &InputRef) -> Result<Arc<File>> {
        match self {
            DataFile::Open(file) => Ok(Arc::clone(file)),
            DataFile::Inflated(inflation) => inflation.file(),
            DataFile::Closed(closed) => {
                let source =
                    source::source_of(&closed.location).map_err(|e| name.io_error("reopen", e))?;
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

fn changed(name: &InputRef) -> Error {
    name.io_error("read", source::changed())
}

/// How to open the inputs.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenOptions {
    /// Read every input in this format (`--input-format`) instead of guessing.
    pub format: Option<Format>,
    /// How many files the input may keep open for the whole run (a sharded or distributed
    /// checkpoint is read from many): its share of the open-file budget `join.rs` keeps.
    /// 0: close each once its header is read.
    pub keep_open: usize,
    /// Read files of at most this many bytes whole, with their header, and close them: the
    /// early copy (`early.rs`) takes their data from that read. 0: read headers only.
    pub read_whole_up_to: u64,
}

/// An input read from more files than this keeps none open: each is reopened (and checked to
/// be the same file) when a tensor's data is read, so that one input cannot take more than
/// its share of the open-file budget.
const SET_KEPT_OPEN: usize = 256;

impl OpenOptions {
    /// Whether an input read from `files` files keeps them open for the whole run: all of
    /// them when they fit in its share of the budget, else none.
    pub fn keeps_open(&self, files: usize) -> bool {
        files <= self.keep_open.min(SET_KEPT_OPEN)
    }
}

impl Input {
    /// Opens the files of one input that is several (the rank files of a checkpoint, named
    /// by a folder or one by one) as inputs at its `position`, headers only. They are kept
    /// open only when all of them fit in the input's share of the open-file budget
    /// (`options`); else each is closed once its header is read and reopened for its data.
    pub fn open_members<'p>(
        position: usize,
        files: impl ExactSizeIterator<Item = &'p Path>,
        options: OpenOptions,
        spill: &mut Spill,
    ) -> Result<Vec<Input>> {
        let each = OpenOptions {
            keep_open: usize::from(options.keeps_open(files.len())),
            ..options
        };
        let mut opened = Vec::with_capacity(files.len());
        for path in files {
            let mut head = Vec::new();
            opened.push(Input::open(
                position,
                path.into(),
                each,
                spill,
                &mut head,
                None,
            )?);
        }
        Ok(opened)
    }

    /// Opens the input at `position` (from 1) and reads its header(s). `FILE:NAME` (when no
    /// file has the whole name) names one tensor of a file that holds several. `-` is
    /// standard input, copied into a temporary file first; JSON text is converted into
    /// `spill`. `fetched` is the file already opened and its head read by `Prefetch`, if it
    /// was. `head` is left holding the file's first bytes (all of it when it is small enough
    /// to be read whole).
    pub fn open(
        position: usize,
        path: Arc<Path>,
        options: OpenOptions,
        spill: &mut Spill,
        head: &mut Vec<u8>,
        fetched: Option<Fetched>,
    ) -> Result<Input> {
        let is_stdin = path.as_os_str() == STDIN;
        let (path, selected) = if is_stdin {
            (path, None)
        } else {
            split_selection(path)
        };
        let name = InputRef {
            position,
            location: Arc::clone(&path).into(),
            tensor: None,
        };
        let fetched = (!is_stdin).then(|| {
            fetched.unwrap_or_else(|| {
                Fetched::fetch(&path, options.read_whole_up_to, std::mem::take(head))
            })
        });
        if let Some(fetched) = &fetched
            && dcp::distcp::is_checkpoint(&path, fetched.is_dir())
        {
            // DCP's default form: the folder, or its `.metadata` file.
            return dcp::distcp::open(name, selected, options, fetched.is_dir());
        }
        if let Some(fetched) = &fetched
            && deepspeed::is_checkpoint(&path, fetched.is_dir())
        {
            // A DeepSpeed ZeRO checkpoint: its folder, or a tag's folder in it.
            return deepspeed::open(name, selected, options);
        }
        if path.extension().is_some_and(|e| e == "distcp") {
            return Err(dcp::distcp::rank_file_named(&name));
        }
        if let Some(fetched) = &fetched
            && (fetched.is_dir() || sharded::is_index_path(&path))
        {
            // A folder, or an index: a sharded checkpoint, one input made of several files.
            return sharded::open(name, selected, options, fetched.is_dir(), spill);
        }
        // Standard input, and any other pipe or device (`<(zcat a.npy.gz)`), is copied once
        // into a temporary file: the copy engine maps its inputs.
        let copied = fetched.as_ref().is_none_or(Fetched::is_stream);
        let (file, stamp) = match fetched {
            Some(fetched) if !copied => fetched.into_regular(&name, head)?,
            _ => {
                let file = match fetched {
                    None => stream::copy(&mut io::stdin().lock(), &path, options.format, &name)?,
                    Some(fetched) => fetched.into_temp_file(&path, options.format, &name)?,
                };
                let stamp = Stamp::of(&file).map_err(|e| name.io_error("read", e))?;
                if stamp.len == 0 {
                    let why = if is_stdin {
                        io::Error::other("standard input is empty: nothing was piped in")
                    } else {
                        io::Error::other("it is empty: nothing was read from it")
                    };
                    return Err(name.io_error("read", why));
                }
                read_head(&file, stamp.len, false, head)
                    .map_err(|e| name.io_error("read the header of", e))?;
                (file, stamp)
            }
        };
        let whole = !copied && stamp.len <= options.read_whole_up_to;
        let format = options
            .format
            .unwrap_or_else(|| Format::of_input(&path, head));
        if selected.is_some() && !format.is_container() {
            return Err(Error::refused(
                format!(
                    "{name} is a {} file, which holds one unnamed tensor: it has no tensor {}",
                    format.extension(),
                    selected.as_deref().unwrap_or_default()
                ),
                format!("name the file alone: {}", crate::messages::path(&path)),
            ));
        }
        let file = Arc::new(file);
        // The input itself stays open only when its data is read from it in place.
        let keep = |file: Arc<File>, keep_open: bool| {
            if keep_open || copied {
                DataFile::Open(file)
            } else {
                DataFile::closed(name.location.clone(), stamp.clone())
            }
        };
        let opened = Opened {
            file: &file,
            len: stamp.len,
            name: &name,
            head,
        };
        let contents = format.read(opened, selected.as_deref(), spill)?;
        let format = contents.format.unwrap_or(format);
        let own = keep(
            file,
            format.reads_in_place() && options.keeps_open(1) && !whole,
        );
        let tensors = contents
            .tensors
            .into_iter()
            .map(|found| Tensor {
                name: InputRef {
                    tensor: found.name.map(String::into_boxed_str),
                    ..name.clone()
                },
                info: found.info,
                // An inflated .npz member, or JSON text converted into the spill file, has a
                // file of its own.
                file: found.file.map_or_else(|| own.clone(), DataFile::from),
                stored_crc: found.stored_crc,
            })
            .collect();
        Ok(Input {
            watched: Watched::new(&name.location, &own, stamp),
            name,
            tensors,
            format,
            extras: Extras {
                selected,
                metadata: contents.metadata,
                notes: contents.notes,
                left_out: contents.left_out,
                distributed: contents.distributed,
                ..Extras::default()
            }
            .boxed(),
        })
    }

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
                None => source::source_of(&record.location)
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

/// An input file opened, its metadata taken and its first bytes read: by `Input::open`
/// itself, or ahead of it on another thread (`Prefetch`).
pub struct Fetched {
    /// The file and its metadata, or why it could not be opened.
    opened: io::Result<(File, std::fs::Metadata)>,
    /// Its first bytes (all of it when it is small enough), or why they could not be read;
    /// nothing for anything but a regular file.
    head: io::Result<Vec<u8>>,
}

impl Fetched {
    /// Opens `path` and reads its first bytes into `head` (a buffer to reuse): all of it when
    /// it is a regular file of at most `whole_up_to` bytes.
    pub fn fetch(path: &Path, whole_up_to: u64, mut head: Vec<u8>) -> Fetched {
        // Non-blocking, so that opening a FIFO returns at once and is refused by
        // `into_regular` instead of waiting for a writer (checking the path first would leave
        // a window in which it is replaced by one); for regular files the flag changes
        // nothing. One open and one fstat, where checking the path first cost a stat more
        // per input.
        let mut options = std::fs::OpenOptions::new();
        options.read(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
        // Windows opens a folder (a sharded checkpoint) only with FILE_FLAG_BACKUP_SEMANTICS
        // (0x02000000), and refuses it with "Access denied" otherwise. The share mode stays
        // the standard library's, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
        // so that another program may still rename over or remove an input tjoin reads.
        #[cfg(windows)]
        std::os::windows::fs::OpenOptionsExt::custom_flags(&mut options, 0x0200_0000);
        let opened = options
            .open(path)
            .and_then(|file| Ok((file.metadata()?, file)))
            .map(|(metadata, file)| (file, metadata));
        let head = match &opened {
            Ok((file, metadata)) if metadata.is_file() => {
                let whole = metadata.len() <= whole_up_to;
                read_head(file, metadata.len(), whole, &mut head).map(|()| head)
            }
            _ => Ok(Vec::new()),
        };
        Fetched { opened, head }
    }

    /// Whether it is a pipe or a device that is not a terminal, to be read once into a
    /// temporary file (a terminal, a socket or anything else is refused by `into_regular`).
    fn is_stream(&self) -> bool {
        use std::io::IsTerminal;
        self.opened
            .as_ref()
            .is_ok_and(|(file, metadata)| sys::is_stream(metadata) && !file.is_terminal())
    }

    /// The pipe or device at `path`, read into an unnamed temporary file no further than its
    /// format says it reaches ([`stream::copy`]); a FIFO that nothing was written to is
    /// refused.
    fn into_temp_file(self, path: &Path, forced: Option<Format>, name: &InputRef) -> Result<File> {
        let failed = |e| name.io_error("read", e);
        let (mut file, metadata) = self.opened.map_err(failed)?;
        // Opened without waiting; reading waits for the writer.
        sys::wait_on_reads(&file).map_err(failed)?;
        let copy = stream::copy(&mut file, path, forced, name)?;
        if sys::is_fifo(&metadata) && copy.metadata().map_err(failed)?.len() == 0 {
            return Err(failed(sys::nothing_written()));
        }
        Ok(copy)
    }

    /// Whether it is a folder.
    fn is_dir(&self) -> bool {
        self.opened
            .as_ref()
            .is_ok_and(|(_, metadata)| metadata.is_dir())
    }

    /// The file and its stamp, leaving its first bytes in `head`; anything but a regular file
    /// is refused.
    fn into_regular(self, name: &InputRef, head: &mut Vec<u8>) -> Result<(File, Stamp)> {
        let (file, metadata) = self.opened.map_err(|e| name.io_error("open", e))?;
        if !metadata.is_file() {
            let why = if metadata.is_dir() {
                "it is a directory".to_string()
            } else {
                // What `is_stream` leaves here: a terminal, a socket, a block device.
                let what = match sys::kind_of(&metadata) {
                    "a character device" => "a terminal",
                    other => other,
                };
                format!(
                    "it is not a regular file but {what}: tjoin reads its inputs from files, \
                     pipes and devices; save the data to a file first"
                )
            };
            return Err(name.io_error("open", io::Error::other(why)));
        }
        *head = self
            .head
            .map_err(|e| name.io_error("read the header of", e))?;
        Ok((file, Stamp::from(&metadata)))
    }
}

/// How much of a file one read takes in to find its header: numpy's are 128 bytes for plain
/// types. More would copy a small input's data twice (4 KiB cost 10% on 10,000 small files).
const HEAD: u64 = 1024;

/// Reads into `head` the file's first bytes, as many as nearly every header needs, or all of
/// it when `whole`: one positional read, the only one most inputs cost (over 100,000 inputs,
/// each system call saved is measurable).
pub fn read_head(file: &File, file_len: u64, whole: bool, head: &mut Vec<u8>) -> io::Result<()> {
    let len = if whole { file_len } else { file_len.min(HEAD) };
    head.clear();
    head.resize(len as usize, 0);
    sys::read_exact_at(file, head, 0)?;
    // Windows' positional reads move the cursor; the other readers start from it, at 0.
    #[cfg(windows)]
    {
        use std::io::Seek;
        (&*file).seek(std::io::SeekFrom::Start(0))?;
    }
    Ok(())
}

/// Opens inputs ahead of `Input::open`, on a thread of its own: with two cores, opening and
/// reading the next files overlaps the work on the current one (10,000 files of 4 KiB: 0.054 s
/// instead of 0.085). Files go over in batches of 32, so that the threads seldom wait for
/// each other (batches of 256 measured slower: less overlap), and at most a few batches are
/// open at once: `PREFETCH_FILES` file descriptors and, for small files read whole, 8 MiB.
/// The caller reserves the descriptors first (`sys::reserve_file_descriptors`).
pub struct Prefetch {
    batches: Option<mpsc::Receiver<Vec<Option<Fetched>>>>,
    batch: std::vec::IntoIter<Option<Fetched>>,
    /// Heads that are done with, for the thread to read into again: fresh memory is costly.
    spare: Option<mpsc::Sender<Vec<u8>>>,
}

/// Files opened ahead per batch.
const BATCH: usize = 32;
/// Batches waiting to be taken, at most.
const BATCHES_AHEAD: usize = 2;
/// With fewer inputs, a thread is not worth starting.
const PREFETCH_MIN: usize = 16;
/// The most files open ahead at once: the batches waiting, the one being filled and the one
/// being taken.
pub const PREFETCH_FILES: usize = (BATCHES_AHEAD + 2) * BATCH;

impl Prefetch {
    /// Starts opening `paths` in `scope`; regular files of at most `whole_up_to` bytes (read
    /// when each is opened) are read whole. Standard input and `FILE:NAME` paths are left to
    /// `Input::open`.
    pub fn start<'scope, 'env>(
        scope: &'scope std::thread::Scope<'scope, 'env>,
        paths: &'env [Arc<Path>],
        whole_up_to: &'env AtomicU64,
    ) -> Prefetch {
        if paths.len() < PREFETCH_MIN {
            return Prefetch {
                batches: None,
                batch: Vec::new().into_iter(),
                spare: None,
            };
        }
        let (send_batch, batches) = mpsc::sync_channel(BATCHES_AHEAD);
        let (spare, spares) = mpsc::channel::<Vec<u8>>();
        scope.spawn(move || {
            for chunk in paths.chunks(BATCH) {
                let batch = chunk
                    .iter()
                    .map(|path| {
                        let plain = path.as_os_str() != STDIN
                            && !path.to_str().is_some_and(|p| p.contains(':'));
                        plain.then(|| {
                            let head = spares.try_recv().unwrap_or_default();
                            Fetched::fetch(path, whole_up_to.load(Ordering::Relaxed), head)
                        })
                    })
                    .collect();
                // The inputs' owner stopped (at an error): open no more.
                if send_batch.send(batch).is_err() {
                    return;
                }
            }
        });
        Prefetch {
            batches: Some(batches),
            batch: Vec::new().into_iter(),
            spare: Some(spare),
        }
    }

    /// The next input, if it was opened ahead (to be called once per path, in order).
    pub fn take_next(&mut self) -> Option<Fetched> {
        if self.batch.len() == 0 {
            self.batch = self.batches.as_ref()?.recv().ok()?.into_iter();
        }
        self.batch.next().flatten()
    }

    /// Hands a head that is done with back to the thread; without one, leaves it to be
    /// reused here.
    pub fn recycle(&self, head: &mut Vec<u8>) {
        if let Some(spare) = &self.spare {
            // The thread may have finished: the buffer is then simply dropped.
            let _ = spare.send(std::mem::take(head));
        }
    }
}

/// Splits `FILE:NAME` into the file and the tensor's name, unless a file has the whole name.
/// The name follows the first colon after which the part before names an existing file, so
/// tensor names may hold colons too.
fn split_selection(path: Arc<Path>) -> (Arc<Path>, Option<String>) {
    let Some(text) = path.to_str() else {
        return (path, None);
    };
    // Most paths have no colon: no need to ask the source (a stat per input adds up over
    // 100,000 of them).
    if !text.contains(':') || source::head(&Location::from(Arc::clone(&path))).is_ok() {
        return (path, None);
    }
    for (at, _) in text.match_indices(':') {
        let file = Location::new(Path::new(&text[..at]));
        if at > 0 && source::head(&file).is_ok_and(|head| head.kind == source::Kind::Object) {
            return (
                Arc::clone(file.shared_path()),
                Some(text[at + 1..].to_string()),
            );
        }
    }
    (path, None)
}

#[cfg(test)]
mod tests {
    use std::mem::size_of;

    use super::*;
    use crate::dtype::{DType, Swaps};
    use crate::plan::InputPlan;

    /// What a join keeps of each input until the commit, part by part (the integration test
    /// `the_memory_kept_per_input_stays_under_720_bytes` measures the whole): a join may have
    /// 100,000 inputs. A block of n bytes costs malloc n + 8 rounded up to 16: a
    /// `FileRecord` of 56 bytes behind an `Arc` takes 80, a `Tensor` of 136 takes 144.
    #[test]
    fn what_a_join_keeps_of_each_input_stays_small() {
        assert_eq!(size_of::<DType>(), 16);
        assert_eq!(size_of::<Swaps>(), 16);
        assert!(size_of::<Tensor>() <= 136, "{}", size_of::<Tensor>());
        assert!(size_of::<Input>() <= 88, "{}", size_of::<Input>());
        assert!(size_of::<InputPlan>() <= 64, "{}", size_of::<InputPlan>());
        assert!(size_of::<FileRecord>() <= 56, "{}", size_of::<FileRecord>());
        assert_eq!(size_of::<Watched>(), 16);
    }
}
