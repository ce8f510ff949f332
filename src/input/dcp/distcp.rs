//! DCP's default form opened as one input: the folder `FileSystemWriter` wrote (what
//! `torch.distributed.checkpoint.save(state_dict, checkpoint_id=folder)` writes, and
//! torchtitan, accelerate's `SHARDED_STATE_DICT`, NeMo and Megatron-Core's `torch_dist`), named
//! as the folder or as its `.metadata` file.
//!
//! `.metadata` ([`super::metadata`]) lists each tensor's dtype, full size and chunks, and where
//! each chunk's bytes are: a file of the folder (`__R_0.distcp`), an offset and a length. With
//! the default serialization, a chunk's bytes are a `torch.save` archive of the chunk, read
//! with the PyTorch reader (`format::pickle`) in place: the tensor's data is mapped where it
//! lies, never copied. With `serialization_format=SAFETENSORS`, a rank's tensors are one
//! safetensors file inside its `.distcp` file, at the offset the chunks give; its header is the
//! authority for where each block's bytes are, and its `DCP_SHARDING_INFO` must give the
//! chunk's offsets.
//!
//! Each chunk becomes one block of the input (its tensor and `Input::offsets`), checked here
//! against `.metadata` (dtype and shape; a missing or cut-short file; an unknown stream
//! transform, refused by name), and the recorded full size of each tensor goes with the input
//! (`Extras::recorded`), so that the grid (`src/plan/grid.rs`) refuses blocks that do not tile
//! it exactly. Entries that are not tensors (`BytesStorageMetadata`) are skipped and noted.
//!
//! Which entries: `FILE:NAME` on the `.metadata` file names a tensor by its dotted key, or a
//! key path (`ck/.metadata:optim`), whose tensors are then named without it. Without one, a
//! checkpoint saved from a state dict with a `model` sub-dict (as `planner_data` records each
//! key's path) gives that sub-dict's tensors, named without `model.` (what
//! `model.load_state_dict` takes of `dcp_to_torch_save`'s output), and notes what it leaves
//! out; any other gives every tensor under its dotted key, as saved: the keys of a plain
//! `model.state_dict()` start with `model.` too, beside `lm_head.weight`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::metadata::{self, Chunk, Metadata, StorageInfo, TensorEntry};
use crate::error::{Error, InputRef, Refusal, Result, capped};
use crate::format::pickle::{self, vm};
use crate::format::zip::ReadRange;
use crate::format::{Contents, Format, Found, index, safetensors, zip};
use crate::input::objects::{self, Readable};
use crate::input::source::Version;
use crate::input::{DataFile, Extras, Input, OpenOptions, Tensor, Watched};
use crate::location::Location;
use crate::messages::excerpt;
use crate::messages::shape_text;

/// The name of the metadata file `FileSystemWriter` writes.
pub const METADATA: &str = ".metadata";

/// The top-level key whose tensors a model export takes by default.
const MODEL: &str = "model";

/// How messages name the form.
const FORM: &str = "PyTorch distributed checkpoint (.metadata)";

/// Whether `path` names a DCP checkpoint of the default form: its `.metadata` file, or
/// (`is_dir`) a folder holding one.
pub fn is_checkpoint(path: &Path, is_dir: bool) -> bool {
    if is_dir {
        // Asked of its source: a prefix's `.metadata` is an object.
        let metadata = Location::new(path.join(METADATA).as_path());
        objects::is_object(&metadata)
    } else {
        path.file_name().is_some_and(|n| n == METADATA)
    }
}

/// Opens the checkpoint `name` names (the folder, or its `.metadata` file); `selected` is the
/// tensor or key path after a colon.
pub fn open(
    name: InputRef,
    selected: Option<String>,
    options: OpenOptions,
    is_dir: bool,
) -> Result<Input> {
    let (folder, metadata_path) = locations(&name, is_dir);
    let metadata_ref = InputRef {
        location: metadata_path.as_path().into(),
        ..name.clone()
    };
    let (metadata, metadata_version) = read_metadata(&metadata_ref)?;
    let choice = Choice::of(&metadata, selected.as_deref(), &metadata_ref)?;
    let mut notes = choice.notes.clone();
    let mut files = Files::new(&folder, name.clone(), options, &metadata);
    let mut tensors = Vec::new();
    let mut offsets = Vec::new();
    let mut recorded = HashMap::new();
    let mut problems = Problems::default();
    let mut left_out = choice.left_out.clone();
    note_skipped(&metadata, &choice, &mut notes, &mut left_out);
    for entry in &metadata.entries {
        let Some(out_name) = choice.name_of(entry) else {
            continue;
        };
        let Some(tensor) = &entry.tensor else {
            continue;
        };
        recorded.insert(out_name.clone(), tensor.size.clone());
        if tensor.chunks.is_empty() {
            problems.push(format!(
                "`{}`: {METADATA} lists no chunk of it, so no file holds its {} elements",
                excerpt(&entry.fqn),
                shape_text(&tensor.size)
            ));
        }
        for chunk in &tensor.chunks {
            match files.block(&entry.fqn, tensor, chunk, &metadata)? {
                Ok(found) => {
                    let (file, data) = files.data_of(found.1)?;
                    tensors.push(Tensor {
                        name: InputRef {
                            position: name.position,
                            location: file.into(),
                            tensor: Some(out_name.as_str().into()),
                        },
                        info: found.0.info,
                        file: data,
                        stored_crc: found.0.stored_crc,
                    });
                    offsets.push(chunk.offsets.clone());
                }
                Err(problem) => problems.push(problem),
            }
        }
    }
    // Every file the checkpoint lists must hold what it lists, the entries left out too: a
    // file cut short or missing is a damaged checkpoint, whichever entries it holds.
    let mut listed: Vec<&StorageInfo> = metadata.storage.values().collect();
    listed.sort_by(|a, b| (&a.relative_path, a.offset).cmp(&(&b.relative_path, b.offset)));
    for info in listed {
        files.check_within(info)?;
    }
    if !problems.is_empty() {
        return Err(disagreement(&name, problems));
    }
    if tensors.is_empty() && recorded.is_empty() {
        return Err(Error::Unsupported {
            input: name,
            reason: format!("its {METADATA} lists no tensor{}", choice.among()),
        });
    }
    notes.extend(files.notes());
    if files.megatron_common() {
        left_out.push("common.pt".to_string());
    }
    let watched = Watched::closed(&metadata_ref.location, metadata_version);
    Ok(Input {
        name,
        tensors: tensors.into(),
        format: Format::SafeTensors,
        watched,
        extras: Extras {
            selected,
            metadata: Some(vec![("format".to_string(), "pt".to_string())]),
            notes,
            left_out,
            offsets: Some(offsets),
            recorded: Some(recorded),
            more_watched: files.into_watched(),
            ..Extras::default()
        }
        .boxed(),
    })
}

/// The checkpoint's folder and its `.metadata` file, from the folder or the file `name`
/// names.
fn locations(name: &InputRef, is_dir: bool) -> (PathBuf, PathBuf) {
    let path = name.location.as_path();
    if is_dir {
        return (path.to_path_buf(), path.join(METADATA));
    }
    let folder = path.parent().map(Path::to_path_buf).unwrap_or_default();
    (folder, path.to_path_buf())
}

/// Says which entries that are not tensors (pickled bytes) are skipped, when that is news.
fn note_skipped(
    metadata: &Metadata,
    choice: &Choice,
    notes: &mut Vec<String>,
    left_out: &mut Vec<String>,
) {
    let skipped: Vec<String> = metadata
        .entries
        .iter()
        .filter(|e| e.tensor.is_none() && (!choice.asked || choice.name_of(e).is_some()))
        .map(|e| format!("`{}`", excerpt(&e.fqn)))
        .collect();
    if !skipped.is_empty() && choice.notes_bytes {
        left_out.push(match skipped.len() {
            1 => "1 entry that is not a tensor".to_string(),
            n => format!("{n} entries that are not tensors"),
        });
        notes.push(format!(
            "skipped {} entr{} that {} not tensors ({}): DCP saved them as pickled bytes \
             (BytesStorageMetadata), which tjoin does not run",
            skipped.len(),
            if skipped.len() == 1 { "y" } else { "ies" },
            if skipped.len() == 1 { "is" } else { "are" },
            capped(skipped, 10).join(", ")
        ));
    }
}

/// The refusal of a checkpoint `name` whose files do not hold what its `.metadata` lists.
fn disagreement(name: &InputRef, problems: Problems) -> Error {
    Error::Inconsistent(vec![Refusal {
        headline: format!(
            "the PyTorch distributed checkpoint {name} does not agree with its {METADATA} \
             file:"
        ),
        details: problems.details(),
        hint: Some(
            "a .distcp file is damaged, or from another save, or the .metadata was \
             edited: save the checkpoint again"
                .to_string(),
        ),
    }])
}

/// The problems a checkpoint's check finds: the first [`Problems::SHOWN`] kept, the rest
/// counted, so that a `.metadata` listing millions of bad chunks costs no more to refuse.
#[derive(Default)]
struct Problems {
    shown: Vec<String>,
    more: usize,
}

impl Problems {
    /// How many are kept and shown.
    const SHOWN: usize = 20;

    fn push(&mut self, problem: String) {
        if self.shown.len() < Self::SHOWN {
            self.shown.push(problem);
        } else {
            self.more += 1;
        }
    }

    fn is_empty(&self) -> bool {
        self.shown.is_empty()
    }

    /// The lines of a refusal: those kept, then how many more.
    fn details(self) -> Vec<String> {
        let mut lines = self.shown;
        if self.more > 0 {
            lines.push(format!("... and {} more", self.more));
        }
        lines
    }
}

/// Reads and interprets `.metadata`.
fn read_metadata(name: &InputRef) -> Result<(Metadata, Version)> {
    let (bytes, head) = crate::input::objects::read_whole(&name.location, &crate::limits::PICKLE)
        .map_err(|(action, e)| name.io_error(action, e))?;
    let malformed = |reason: String| Error::Malformed {
        input: name.clone(),
        format: FORM,
        reason,
    };
    let pickled = vm::run(&bytes, vm::LIMITS).map_err(|fault| {
        if fault.is_damage() {
            malformed(format!("its pickle, {}", fault.describe()))
        } else {
            Error::Refused(vec![Refusal {
                headline: format!("{name}: its pickle, {}", fault.describe()),
                details: Vec::new(),
                hint: Some(
                    "tjoin runs no code from a file: it reads the Metadata that \
                     torch.distributed.checkpoint's FileSystemWriter writes, and nothing \
                     else"
                        .to_string(),
                ),
            }])
        }
    })?;
    if pickled.len != bytes.len() {
        return Err(malformed(format!(
            "it has {} bytes after its pickle's STOP",
            bytes.len() - pickled.len
        )));
    }
    let metadata = metadata::read(&pickled).map_err(malformed)?;
    Ok((metadata, head.version))
}

/// Which entries the input takes, under which names.
struct Choice {
    /// A key path whose entries are taken, named without it (`model`), or a tensor's key.
    prefix: Option<String>,
    /// Whether it was asked for (`FILE:NAME`) rather than chosen.
    asked: bool,
    /// Whether the entries taken are those of a `model` sub-dict, as `planner_data` records
    /// it ([`sub_dict_key`]), rather than those whose key starts with `prefix`.
    sub_dict: bool,
    /// Whether a skipped entry that is not a tensor is worth a note (not when one tensor is
    /// asked for).
    notes_bytes: bool,
    /// What the choice took and left out, for `--dry-run`.
    notes: Vec<String>,
    /// What the choice left out, one short phrase each, said in every run.
    left_out: Vec<String>,
}

impl Choice {
    fn of(metadata: &Metadata, selected: Option<&str>, name: &InputRef) -> Result<Choice> {
        let under = |prefix: &str, fqn: &str| {
            fqn.strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with('.'))
        };
        if let Some(wanted) = selected {
            if metadata.entries.iter().any(|e| e.fqn == wanted) {
                return Ok(Choice {
                    prefix: Some(wanted.to_string()),
                    asked: true,
                    sub_dict: false,
                    notes_bytes: false,
                    notes: Vec::new(),
                    left_out: Vec::new(),
                });
            }
            if metadata.entries.iter().any(|e| under(wanted, &e.fqn)) {
                return Ok(Choice {
                    prefix: Some(wanted.to_string()),
                    asked: true,
                    sub_dict: false,
                    notes_bytes: true,
                    notes: Vec::new(),
                    left_out: Vec::new(),
                });
            }
            let names: Vec<String> = metadata.entries.iter().map(|e| e.fqn.clone()).collect();
            return Err(crate::format::no_such_tensor(name, wanted, &names));
        }
        // A `model` sub-dict only where DCP's planner_data records one: the keys of a plain
        // `model.state_dict()` start with `model.` too (`lm_head.weight` beside them), and
        // are kept as saved.
        let in_model = |e: &metadata::Entry| sub_dict_key(e).is_some();
        let has_model = metadata
            .entries
            .iter()
            .any(|e| e.tensor.is_some() && in_model(e));
        if !has_model {
            let unknown = metadata.entries.iter().all(|e| e.path.is_none())
                && metadata
                    .entries
                    .iter()
                    .any(|e| e.tensor.is_some() && under(MODEL, &e.fqn));
            let notes = if unknown {
                vec![format!(
                    "kept every tensor under its saved key: {METADATA} records no planner_data, \
                     so whether `{MODEL}.` is a sub-dict cannot be told; name {}:{MODEL} to \
                     take the entries under `{MODEL}`, named without it",
                    name.location.to_string()
                )]
            } else {
                Vec::new()
            };
            return Ok(Choice {
                prefix: None,
                asked: false,
                sub_dict: false,
                notes_bytes: true,
                notes,
                left_out: Vec::new(),
            });
        }
        // What the model's entries leave out, by top-level key.
        let mut left: Vec<(String, usize)> = Vec::new();
        for entry in &metadata.entries {
            if entry.tensor.is_none() || in_model(entry) {
                continue;
            }
            let top = match &entry.path {
                Some(path) => path[0].clone(),
                None => entry.fqn.split('.').next().unwrap_or_default().to_string(),
            };
            match left.iter_mut().find(|(t, _)| *t == top) {
                Some((_, n)) => *n += 1,
                None => left.push((top, 1)),
            }
        }
        let mut notes = vec![format!(
            "took the tensors under `{MODEL}`, the model's entries, named without `{MODEL}.` \
             (as model.load_state_dict takes them)"
        )];
        let mut left_out = Vec::new();
        for (top, count) in left {
            left_out.push(format!(
                "{count} tensor{} under `{}`",
                if count == 1 { "" } else { "s" },
                excerpt(&top)
            ));
            notes.push(format!(
                "left out {count} tensor{} under `{}`: name {}:{} to export {}",
                if count == 1 { "" } else { "s" },
                excerpt(&top),
                name.location,
                excerpt(&top),
                if count == 1 { "it" } else { "them" }
            ));
        }
        Ok(Choice {
            prefix: Some(MODEL.to_string()),
            asked: false,
            sub_dict: true,
            notes_bytes: true,
            notes,
            left_out,
        })
    }

    /// The name the entry takes in the input, if it is taken.
    fn name_of(&self, entry: &metadata::Entry) -> Option<String> {
        if self.sub_dict {
            return sub_dict_key(entry);
        }
        let fqn = entry.fqn.as_str();
        let Some(prefix) = &self.prefix else {
            return Some(fqn.to_string());
        };
        if fqn == prefix {
            return Some(fqn.to_string());
        }
        let rest = fqn.strip_prefix(prefix.as_str())?.strip_prefix('.')?;
        Some(rest.to_string())
    }

    /// ` under `model``, for a message about what the choice holds.
    fn among(&self) -> String {
        match &self.prefix {
            Some(prefix) if self.asked || prefix == MODEL => {
                format!(" under `{}`", excerpt(prefix))
            }
            _ => String::new(),
        }
    }
}

/// The key an entry has inside a `model` sub-dict of the state dict that was saved, by its
/// `planner_data` path (`("model", "layers.0.weight")`); `None` for any other entry.
fn sub_dict_key(entry: &metadata::Entry) -> Option<String> {
    match entry.path.as_deref() {
        Some([top, rest @ ..]) if top == MODEL && !rest.is_empty() => Some(rest.join(".")),
        _ => None,
    }
}

/// The `.distcp` files of the folder, each opened once, with what was read of them.
struct Files<'a> {
    folder: &'a Path,
    name: InputRef,
    keep_open: bool,
    opened: HashMap<String, Opened>,
    /// The files in the order they were first read.
    order: Vec<String>,
}

/// One `.distcp` file, open: a local file, or an object read by range.
struct Opened {
    path: Arc<Path>,
    read: Readable,
    /// Where its blocks' data are read from.
    data: DataFile,
    version: Version,
    len: u64,
    /// The safetensors files read inside it, by offset (SAFETENSORS serialization).
    safetensors: HashMap<u64, Contents>,
}

/// A block found: the tensor, and the file it is in.
type FoundIn = (Found, String);

impl<'a> Files<'a> {
    fn new(folder: &'a Path, name: InputRef, options: OpenOptions, md: &Metadata) -> Self {
        let mut paths: Vec<&str> = md
            .storage
            .values()
            .map(|s| s.relative_path.as_str())
            .collect();
        paths.sort_unstable();
        paths.dedup();
        Files {
            folder,
            name,
            keep_open: options.keeps_open(paths.len()),
            opened: HashMap::new(),
            order: Vec::new(),
        }
    }

    /// The block of chunk `chunk` of tensor `fqn`: `Err(problem)` for a disagreement with
    /// `.metadata` (gathered), an error for a file that cannot be read.
    fn block(
        &mut self,
        fqn: &str,
        tensor: &TensorEntry,
        chunk: &Chunk,
        md: &Metadata,
    ) -> Result<std::result::Result<FoundIn, String>> {
        let chunk_text = format!(
            "`{}` chunk {} at {}",
            excerpt(fqn),
            shape_text(&chunk.sizes),
            shape_text(&chunk.offsets)
        );
        let Some(info) = md.storage.get(&(fqn.to_string(), chunk.offsets.clone())) else {
            return Ok(Err(format!(
                "{chunk_text}: its storage_data has no entry for it"
            )));
        };
        if !info.transforms.is_empty() {
            return Err(Error::Unsupported {
                input: self.name.clone(),
                reason: format!(
                    "its {METADATA} says the bytes of {chunk_text} in {} went through the \
                     stream transform{} {}, which tjoin does not read; save the checkpoint \
                     without the extension (FileSystemWriter's _extensions)",
                    excerpt(&info.relative_path),
                    if info.transforms.len() == 1 { "" } else { "s" },
                    info.transforms
                        .iter()
                        .map(|t| format!("`{}`", excerpt(t)))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        }
        let base = self.name.clone();
        self.check_within(info)?;
        let opened = self.open(info)?;
        let chunk_ref = InputRef {
            location: Arc::clone(&opened.path).into(),
            tensor: Some(fqn.into()),
            ..base
        };
        let mut head = [0u8; 4];
        opened
            .read
            .reader()
            .read_range(info.offset, &mut head)
            .map_err(|e| chunk_ref.io_error("read", e))?;
        let found = if zip::is_signature(&head) {
            let members = zip::directory_in(opened.read.reader(), info.offset, info.length)
                .map_err(|reason| Error::Malformed {
                    input: chunk_ref.clone(),
                    format: FORM,
                    reason: format!(
                        "the torch.save archive of {chunk_text} at byte {} cannot be read: \
                         {reason}",
                        info.offset
                    ),
                })?;
            let Some(archive) = pickle::archive_of(&members) else {
                return Ok(Err(format!(
                    "{chunk_text}: the archive at byte {} of {} is not a torch.save archive",
                    info.offset,
                    excerpt(&info.relative_path)
                )));
            };
            let contents =
                pickle::read_zip(opened.read.reader(), &chunk_ref, &members, &archive, None)?;
            match <[Found; 1]>::try_from(contents.tensors) {
                Ok([found]) if found.name.is_none() => found,
                _ => {
                    return Ok(Err(format!(
                        "{chunk_text}: the archive at byte {} of {} is not one tensor",
                        info.offset,
                        excerpt(&info.relative_path)
                    )));
                }
            }
        } else {
            match safetensors_block(opened, info, fqn, chunk, &chunk_ref)? {
                Ok(found) => found,
                Err(problem) => return Ok(Err(format!("{chunk_text}: {problem}"))),
            }
        };
        let torch_dtype = tensor.dtype.dtype();
        if torch_dtype.as_ref() != Some(&found.info.dtype) || *found.info.shape != *chunk.sizes {
            return Ok(Err(format!(
                "{chunk_text}: {METADATA} says torch.{} {}, but {} holds {} {} there \
                 (elements {} of the tensor)",
                tensor.dtype.name(),
                shape_text(&chunk.sizes),
                excerpt(&info.relative_path),
                found.info.dtype,
                found.info.shape_text(),
                region(chunk)
            )));
        }
        Ok(Ok((found, info.relative_path.clone())))
    }

    /// Fails unless the bytes `info` gives lie within its file.
    fn check_within(&mut self, info: &StorageInfo) -> Result<()> {
        let base = self.name.clone();
        let opened = self.open(info)?;
        let end = info.offset.checked_add(info.length);
        if end.is_some_and(|end| end <= opened.len) {
            return Ok(());
        }
        Err(Error::Malformed {
            input: InputRef {
                location: Arc::clone(&opened.path).into(),
                ..base
            },
            format: FORM,
            reason: format!(
                "it is {} bytes long, but {METADATA} puts the bytes of `{}` at {}..{}: the \
                 file is cut short",
                opened.len,
                excerpt(&info.fqn),
                info.offset,
                end.map_or("past 2^64".to_string(), |e| e.to_string())
            ),
        })
    }

    /// The file `info` names, opened once.
    fn open(&mut self, info: &StorageInfo) -> Result<&mut Opened> {
        let relative = &info.relative_path;
        if !self.opened.contains_key(relative) {
            if !index::is_inside_folder(relative) {
                return Err(Error::Malformed {
                    input: self.name.clone(),
                    format: FORM,
                    reason: format!(
                        "its {METADATA} names the file {}, which is not a path inside the \
                         checkpoint's folder",
                        excerpt(relative)
                    ),
                });
            }
            let path: Arc<Path> = self.folder.join(relative).as_path().into();
            let file_ref = InputRef {
                location: Arc::clone(&path).into(),
                ..self.name.clone()
            };
            let at = Location::from(Arc::clone(&path));
            let (read, head) = objects::open_readable(&at).map_err(|e| {
                let why = format!("{e} (the checkpoint's {METADATA} lists it)");
                file_ref.io_error("open", std::io::Error::new(e.kind(), why))
            })?;
            let data = DataFile::of_readable(&at, &read, (&head.version, head.len), self.keep_open);
            self.opened.insert(
                relative.clone(),
                Opened {
                    path,
                    read,
                    data,
                    len: head.len,
                    version: head.version,
                    safetensors: HashMap::new(),
                },
            );
            self.order.push(relative.clone());
        }
        Ok(self.opened.get_mut(relative).expect("opened above"))
    }

    /// The path and data file of a block in `relative`.
    fn data_of(&self, relative: String) -> Result<(Arc<Path>, DataFile)> {
        let opened = &self.opened[&relative];
        Ok((Arc::clone(&opened.path), opened.data.clone()))
    }

    /// Whether the folder holds Megatron-Core's `common.pt`, which is not read: asked of its
    /// source, as a prefix's `common.pt` is an object.
    fn megatron_common(&self) -> bool {
        let common = Location::new(self.folder.join("common.pt").as_path());
        objects::is_object(&common)
    }

    /// Notes about the folder: the files of Megatron-Core's `torch_dist` form beside DCP's.
    fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.megatron_common() {
            notes.push(
                "skipped common.pt (Megatron-Core's state that is not sharded: its arguments, \
                 versions and iteration, a pickle of Python objects that tjoin does not run)"
                    .to_string(),
            );
        }
        notes
    }

    /// The files read, each watched until the output is committed.
    fn into_watched(self) -> Vec<Watched> {
        let Files {
            mut opened, order, ..
        } = self;
        order
            .into_iter()
            .filter_map(|relative| opened.remove(&relative))
            .map(|o| Watched::of(&Location::from(Arc::clone(&o.path)), &o.data, o.version))
            .collect()
    }
}

/// The block of `fqn` in the safetensors file at `info.offset` of `opened` (SAFETENSORS
/// serialization): found by name in the header, its `DCP_SHARDING_INFO` offsets checked.
fn safetensors_block(
    opened: &mut Opened,
    info: &StorageInfo,
    fqn: &str,
    chunk: &Chunk,
    chunk_ref: &InputRef,
) -> Result<std::result::Result<Found, String>> {
    if !opened.safetensors.contains_key(&info.offset) {
        let file_ref = InputRef {
            tensor: None,
            ..chunk_ref.clone()
        };
        let (base, len) = (info.offset, opened.len - info.offset);
        let contents = match opened.read.file() {
            Some(file) => safetensors::read_in(file, base, len, &file_ref),
            None => safetensors_in(opened.read.reader(), (base, len), &file_ref),
        }
        .map_err(|e| match e {
            Error::Malformed { input, reason, .. } => Error::Malformed {
                input,
                format: FORM,
                reason: format!(
                    "at byte {}, where {METADATA} puts a chunk, it holds neither a torch.save \
                     archive nor a safetensors file: {reason}",
                    info.offset
                ),
            },
            other => other,
        })?;
        opened.safetensors.insert(info.offset, contents);
    }
    let contents = &opened.safetensors[&info.offset];
    let sharding = contents
        .metadata
        .as_deref()
        .and_then(|m| m.iter().find(|(k, _)| k == super::hf::SHARDING_INFO))
        .map(|(_, text)| super::hf::parse_sharding_info(text));
    let saved = match sharding {
        Some(Ok(mut entries)) => entries.remove(fqn),
        Some(Err(why)) => {
            return Ok(Err(format!(
                "its {} cannot be read: {why}",
                super::hf::SHARDING_INFO
            )));
        }
        None => {
            return Ok(Err(format!(
                "its safetensors file has no {}",
                super::hf::SHARDING_INFO
            )));
        }
    };
    let Some(found) = contents
        .tensors
        .iter()
        .find(|t| t.name.as_deref() == Some(fqn))
    else {
        return Ok(Err(
            "its rank's safetensors file does not hold it".to_string()
        ));
    };
    if saved.as_deref() != Some(chunk.offsets.as_slice()) {
        return Ok(Err(format!(
            "its rank's safetensors file places its block at {}",
            saved.map_or("no offsets".to_string(), |s| shape_text(&s))
        )));
    }
    Ok(Ok(Found {
        name: None,
        info: found.info.clone(),
        file: None,
        stored_crc: None,
    }))
}

/// Reads and checks the header of the safetensors file that lies at byte `base` of `source`,
/// `len` bytes long, by range (an object's): its length field, then its header as the
/// length field asks, never more than safetensors allows; the tensors' `data_offset` count
/// from the start of `source`, as [`safetensors::read_in`]'s do.
fn safetensors_in(
    source: &dyn ReadRange,
    (base, len): (u64, u64),
    input: &InputRef,
) -> Result<Contents> {
    let mut bytes = vec![0; len.min(8) as usize];
    let mut have = 0;
    loop {
        source
            .read_range(base + have as u64, &mut bytes[have..])
            .map_err(|e| input.io_error("read the header of", e))?;
        match safetensors::read_bytes(&bytes, len, input)? {
            Ok(mut contents) => {
                for found in &mut contents.tensors {
                    // Within `len`, checked by the header's parse: no overflow.
                    found.info.data_offset += base;
                }
                return Ok(contents);
            }
            Err(needed) if needed > bytes.len() as u64 => {
                have = bytes.len();
                bytes.resize(needed as usize, 0);
            }
            Err(needed) => {
                let why = format!("its header asks for {needed} bytes, and all {len} are read");
                return Err(input.io_error("read the header of", std::io::Error::other(why)));
            }
        }
    }
}

/// `[3:5, 0:4]`: the elements of the full tensor a chunk holds.
fn region(chunk: &Chunk) -> String {
    let parts: Vec<String> = chunk
        .offsets
        .iter()
        .zip(&chunk.sizes)
        .map(|(&o, &s)| format!("{o}:{}", o.saturating_add(s)))
        .collect();
    format!("[{}]", parts.join(", "))
}

/// The refusal of a `.distcp` file named by itself: one rank's part of a checkpoint.
pub fn rank_file_named(name: &InputRef) -> Error {
    let folder = name.location.as_path().parent().unwrap_or(Path::new("."));
    let hint = if folder.join(METADATA).is_file() {
        format!(
            "name the checkpoint's folder, {}, which holds its {METADATA}",
            crate::messages::path(folder)
        )
    } else {
        format!(
            "name the checkpoint's folder, which holds the {METADATA} file beside the .distcp \
             files (there is none beside this one: copy it from where the checkpoint was \
             saved)"
        )
    };
    Error::Refused(vec![Refusal {
        headline: format!(
            "{name} is one rank's file of a PyTorch distributed checkpoint (.distcp): its \
             chunks are placed only by the checkpoint's {METADATA} file"
        ),
        details: Vec::new(),
        hint: Some(hint),
    }])
}
