//! Opening one input: what its location holds (a file, a folder, a checkpoint's files, a
//! pipe), its format, and the tensors its header declares.

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::Arc;

use std::sync::atomic::{AtomicU64, Ordering};

use super::fetch::{Fetched, PREFETCH_FILES, Prefetch, read_head};
use super::source::{self, Stamp};
use super::sources;
use super::{
    DataFile, Extras, Input, Tensor, Watched, dcp, deepspeed, objects, ranks, sharded, stream,
};
use crate::error::{Error, InputRef, Refusal, Result, STDIN};
use crate::format::{Format, FromBytes, Opened};
use crate::location::Location;
use crate::sys;
use crate::sys::spill::Spill;

/// What opening every input of a run needs.
#[derive(Debug, Clone, Copy)]
pub struct OpenAll<'a> {
    /// The inputs in order, as the command line (or `--files-from`) names them.
    pub paths: &'a [Arc<Path>],
    /// Read every input in this format (`--input-format`) instead of guessing.
    pub format: Option<Format>,
    /// The refusal of inputs numbered out of order, unless they turn out to be DTensor rank
    /// files, whose own records place them.
    pub out_of_order: Option<&'a Refusal>,
}

/// What watches the inputs as they are opened, each with its first bytes (the early copy,
/// which writes the data of small inputs while the others are still being opened).
pub trait Observer {
    /// Files of at most this many bytes are read whole for it while it watches (0: none).
    fn whole_up_to(&self) -> u64;

    /// Sees `input`, just opened, and its file's first bytes (all of it when it was read
    /// whole); returns whether it still watches.
    fn opened(&mut self, input: &Input, head: &[u8]) -> bool;
}

/// Opens every input `all` names, in order, and reads their headers; `observer` sees each as
/// it is opened. The rank files of a checkpoint named one by one (DCP's HF form, DTensor rank
/// files) become one input. Inputs beyond a share of the open-file budget are closed once
/// their header is read, and reopened (and checked to be the same file) for their data.
pub fn open_all(all: &OpenAll, mut observer: Option<&mut dyn Observer>) -> Result<Vec<Input>> {
    let paths = all.paths;
    // Inputs numbered out of order are refused, unless they turn out to be DTensor rank
    // files, whose own records place them (a shell lists `rank_10` before `rank_2`): the
    // refusal waits until the inputs are open, and the observer sees none of them.
    let order = match all.out_of_order {
        None => Ok(()),
        Some(refusal) => Err(Error::Refused(vec![refusal.clone()])),
    };
    if order.is_err() {
        observer = None;
    }
    let open_files = sys::raise_open_file_limit();
    // Inputs beyond a share of the open-file limit are closed after their header is read.
    let keep_open = (open_files.min(1 << 20) / 2).saturating_sub(32) as usize;
    // Every descriptor open at once: the inputs kept open, those opened ahead, a few more.
    let open_at_once = paths.len().min(keep_open) + PREFETCH_FILES + 64;
    sys::reserve_file_descriptors((open_at_once as u64).min(open_files));
    // Small inputs are read whole while the observer watches; once it stops, reading them
    // whole is of no use. Shared with the thread that opens inputs ahead.
    let whole_up_to = AtomicU64::new(observer.as_ref().map_or(0, |o| o.whole_up_to()));
    let mut spill = Spill::default();
    let mut head = Vec::new();
    // Files held open so far: a sharded checkpoint holds one per shard.
    let mut held = 0;
    // Collected into room for every input at once: growing by doubling would hold two
    // copies of the list for a moment, which for 100,000 inputs is tens of MiB.
    let mut inputs = Vec::with_capacity(paths.len());
    std::thread::scope(|scope| {
        let mut prefetch = Prefetch::start(scope, paths, &whole_up_to);
        let opened = paths.iter().enumerate().map(|(index, path)| {
            let options = OpenOptions {
                format: all.format,
                keep_open: keep_open.saturating_sub(held),
                read_whole_up_to: whole_up_to.load(Ordering::Relaxed),
            };
            let fetched = prefetch.take_next();
            let position = index + 1;
            let input = Input::open(
                position,
                Arc::clone(path),
                options,
                &mut spill,
                &mut head,
                fetched,
            )?;
            held += input.open_files();
            if let Some(watching) = observer.as_deref_mut()
                && !watching.opened(&input, &head)
            {
                whole_up_to.store(0, Ordering::Relaxed);
                observer = None;
            }
            prefetch.recycle(&mut head);
            Ok(input)
        });
        for input in opened {
            inputs.push(input?);
        }
        Ok::<_, Error>(())
    })?;
    if inputs.is_empty() {
        return Err(Error::refused(
            "nothing to join: the --files-from list names no inputs",
            "list one path per line (or NUL-separated with -0)",
        ));
    }
    let inputs = ranks::gather(inputs)?;
    if !matches!(inputs.as_slice(), [set] if super::dtensor::is_rank_set(set)) {
        order?;
    }
    Ok(inputs)
}

/// How to open the inputs.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenOptions {
    /// Read every input in this format (`--input-format`) instead of guessing.
    pub format: Option<Format>,
    /// How many files the input may keep open for the whole run (a sharded or distributed
    /// checkpoint is read from many): its share of the open-file budget the join's flow keeps.
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
        if !is_stdin && !sources::source_of(&name.location).is_ok_and(|s| s.is_local()) {
            return open_object(name, selected, options, spill, head);
        }
        let fetched = (!is_stdin).then(|| {
            fetched.unwrap_or_else(|| {
                Fetched::fetch(&path, options.read_whole_up_to, std::mem::take(head))
            })
        });
        let is_dir = fetched.as_ref().map(Fetched::is_dir);
        let selected = match open_composite(&name, selected, is_dir, options, spill)? {
            Composite::Opened(input) => return Ok(input),
            Composite::Not(selected) => selected,
        };
        // Standard input, and any other pipe or device (`<(zcat a.npy.gz)`), is copied once
        // into a temporary file: the copy engine maps its inputs.
        let copied = fetched.as_ref().is_none_or(Fetched::is_stream);
        let (file, stamp) = match fetched {
            Some(fetched) if !copied => fetched.into_regular(&name, head)?,
            _ => copy_stream(&name, fetched, options.format, head)?,
        };
        let whole = !copied && stamp.len <= options.read_whole_up_to;
        let format = options
            .format
            .unwrap_or_else(|| Format::of_input(&path, head));
        check_selectable(&name, format, selected.as_deref())?;
        let file = OwnFile {
            file: Arc::new(file),
            stamp,
            copied,
            may_stay_open: options.keeps_open(1) && !whole,
        };
        read_file(name, file, (format, selected), head, spill)
    }
}

/// Refuses a tensor named after a colon (`FILE:NAME`) in a file of a format that holds one
/// unnamed tensor.
pub(super) fn check_selectable(
    name: &InputRef,
    format: Format,
    selected: Option<&str>,
) -> Result<()> {
    let Some(selected) = selected.filter(|_| !format.is_container()) else {
        return Ok(());
    };
    Err(Error::refused(
        format!(
            "{name} is a {} file, which holds one unnamed tensor: it has no tensor {}",
            format.extension(),
            selected
        ),
        format!("name the file alone: {}", name.location),
    ))
}

/// What [`open_composite`] found.
pub(super) enum Composite {
    /// An input made of several files, opened.
    Opened(Input),
    /// A single file (or a stream), with the tensor named after its colon, to open as one.
    Not(Option<String>),
}

/// Opens the input `name` names when it is made of several files: a DCP checkpoint in its
/// default form, a DeepSpeed ZeRO checkpoint, a sharded checkpoint (a folder, or an index).
/// Refuses a rank file of DCP's default form named alone. `is_dir` is whether it is a folder
/// (a prefix), `None` for standard input.
pub(super) fn open_composite(
    name: &InputRef,
    selected: Option<String>,
    is_dir: Option<bool>,
    options: OpenOptions,
    spill: &mut Spill,
) -> Result<Composite> {
    let path = name.location.as_path();
    // Standard input is one file.
    let Some(is_dir) = is_dir else {
        return Ok(Composite::Not(selected));
    };
    if dcp::distcp::is_checkpoint(path, is_dir) {
        // DCP's default form: the folder, or its `.metadata` file.
        let name = name.clone();
        return dcp::distcp::open(name, selected, options, is_dir).map(Composite::Opened);
    }
    if deepspeed::is_checkpoint(path, is_dir) {
        // A DeepSpeed ZeRO checkpoint: its folder, or a tag's folder in it.
        return deepspeed::open(name.clone(), selected, options).map(Composite::Opened);
    }
    if path.extension().is_some_and(|e| e == "distcp") {
        return Err(dcp::distcp::rank_file_named(name));
    }
    if is_dir || sharded::is_index_path(path) {
        // A folder, or an index: a sharded checkpoint, one input made of several files.
        let opened = sharded::open(name.clone(), selected, options, is_dir, spill)?;
        return Ok(Composite::Opened(opened));
    }
    Ok(Composite::Not(selected))
}

/// Copies standard input (when `fetched` is none) or the pipe or device `fetched` opened
/// into an unnamed temporary file, and reads its first bytes into `head`; nothing at all is
/// refused.
fn copy_stream(
    name: &InputRef,
    fetched: Option<Fetched>,
    format: Option<Format>,
    head: &mut Vec<u8>,
) -> Result<(File, Stamp)> {
    let path = name.location.as_path();
    let file = match fetched {
        None => stream::copy(&mut io::stdin().lock(), path, format, name)?,
        Some(fetched) => fetched.into_temp_file(path, format, name)?,
    };
    let stamp = Stamp::of(&file).map_err(|e| name.io_error("read", e))?;
    if stamp.len == 0 {
        let why = if name.is_stdin() {
            io::Error::other("standard input is empty: nothing was piped in")
        } else {
            io::Error::other("it is empty: nothing was read from it")
        };
        return Err(name.io_error("read", why));
    }
    read_head(&file, stamp.len, false, head).map_err(|e| name.io_error("read the header of", e))?;
    Ok((file, stamp))
}

/// An input's own file, open.
struct OwnFile {
    file: Arc<File>,
    stamp: Stamp,
    /// Whether it is a temporary copy (of standard input, a pipe, a device): it stays open,
    /// having no name to be reopened by.
    copied: bool,
    /// Whether it stays open for the run when its data is read from it in place (else it is
    /// closed, and reopened by its location).
    may_stay_open: bool,
}

/// Reads the tensors of the single file `file` in `format` (only the one `selected` names,
/// when one does): the input `name` names.
fn read_file(
    name: InputRef,
    own: OwnFile,
    (format, selected): (Format, Option<String>),
    head: &[u8],
    spill: &mut Spill,
) -> Result<Input> {
    let OwnFile {
        file,
        stamp,
        copied,
        may_stay_open,
    } = own;
    let opened = Opened {
        file: &file,
        len: stamp.len,
        name: &name,
        head,
    };
    let contents = format.read(opened, selected.as_deref(), spill)?;
    let format = contents.format.unwrap_or(format);
    // The input itself stays open only when its data is read from it in place.
    let own = if copied || (format.reads_in_place() && may_stay_open) {
        DataFile::Open(file)
    } else {
        DataFile::closed(name.location.clone(), stamp.clone())
    };
    let watched = Watched::new(&name.location, &own, stamp);
    Ok(input_of(name, contents, format, (own, watched), selected))
}

/// Reads the tensors of `file`, a copy of the input `name` names (an object downloaded
/// whole) whose first bytes are `head`, in `format` (only the one `selected` names, when one
/// does). The input is watched as its copy; the caller watches the object instead.
pub(super) fn read_copy(
    name: InputRef,
    file: File,
    (format, selected): (Format, Option<String>),
    head: &[u8],
    spill: &mut Spill,
) -> Result<Input> {
    let stamp = Stamp::of(&file).map_err(|e| name.io_error("read", e))?;
    let own = OwnFile {
        file: Arc::new(file),
        stamp,
        copied: true,
        may_stay_open: true,
    };
    read_file(name, own, (format, selected), head, spill)
}

/// The input `name` names, of `format`, holding the tensors of `contents` whose data are in
/// `own` (unless a tensor has a file of its own), watched as `watched` says.
pub(super) fn input_of(
    name: InputRef,
    contents: crate::format::Contents,
    format: Format,
    (own, watched): (DataFile, Watched),
    selected: Option<String>,
) -> Input {
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
    Input {
        watched,
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
    if !text.contains(':') || super::objects::head(&Location::from(Arc::clone(&path))).is_ok() {
        return (path, None);
    }
    for (at, _) in text.match_indices(':') {
        let file = Location::new(Path::new(&text[..at]));
        if at > 0 && super::objects::head(&file).is_ok_and(|head| head.kind == source::Kind::Object)
        {
            return (
                Arc::clone(file.shared_path()),
                Some(text[at + 1..].to_string()),
            );
        }
    }
    (path, None)
}

/// Opens the input `name` names at a remote source: a prefix (a sharded set, a DCP or
/// DeepSpeed checkpoint's folder), an index, or one object. `whole` is left holding the
/// object's bytes when its header read them all (a small .npy file: the early copy takes its
/// data from them).
pub(super) fn open_object(
    name: InputRef,
    selected: Option<String>,
    options: OpenOptions,
    spill: &mut Spill,
    whole: &mut Vec<u8>,
) -> Result<Input> {
    whole.clear();
    let at = objects::head(&name.location).map_err(|e| name.io_error("read", e))?;
    let is_dir = at.kind == source::Kind::Folder;
    let selected = match open_composite(&name, selected, Some(is_dir), options, spill)? {
        Composite::Opened(input) => return Ok(input),
        Composite::Not(selected) => selected,
    };
    if at.len == 0 {
        let why = io::Error::other("it is empty: nothing was read from it");
        return Err(name.io_error("read", why));
    }
    let first_len = at.len.min(objects::FIRST);
    let mut format = options.format;
    let mut parse = |bytes: &[u8]| {
        // Told by the first bytes (and the name), as a local file's is.
        let told = *format.get_or_insert_with(|| Format::of_input(name.location.as_path(), bytes));
        check_selectable(&name, told, selected.as_deref())?;
        Ok(
            match told.read_bytes(bytes, at.len, &name, selected.as_deref())? {
                FromBytes::Read(contents) => objects::Step::Done(Some(contents)),
                FromBytes::Need(needed) => objects::Step::Need(needed),
                FromBytes::NoParser => objects::Step::Done(None),
            },
        )
    };
    let (contents, bytes) = objects::read_header(&name, &at, &mut parse)?;
    let mut format = format.unwrap_or(Format::Npy);
    let contents = match contents {
        Some(contents) => Some(contents),
        None => {
            let object = objects::Object::new(&name.location, &at, &bytes)
                .map_err(|e| name.io_error("read", e))?;
            let read = format.read_ranged((&object, at.len, &bytes), &name, selected.as_deref())?;
            read.inspect(|contents| format = contents.format.unwrap_or(format))
        }
    };
    let Some(contents) = contents else {
        // No parser from bytes: the object downloaded whole, and read as a local file.
        let file = objects::download(&name.location, &at).map_err(|e| name.io_error("read", e))?;
        let mut input = read_copy(name.clone(), file, (format, selected), &bytes, spill)?;
        input.watched = Watched::closed(&name.location, at.version);
        return Ok(input);
    };
    if bytes.len() as u64 == at.len && first_len == at.len {
        *whole = bytes;
    }
    let own = DataFile::remote(name.location.clone(), at.version.clone(), at.len);
    let watched = Watched::of(&name.location, &own, at.version);
    Ok(input_of(name, contents, format, (own, watched), selected))
}
