//! A sharded checkpoint as one input: a Hugging Face `*.safetensors.index.json`, or a folder
//! holding exactly one such index (or exactly one `.safetensors` file; without either, one
//! `pytorch_model.bin.index.json`, else one PyTorch checkpoint file). Its tensors are those
//! of the index's `weight_map`, each read from the shard the map names, shard by shard in the
//! order of their numbers and, within a shard, in the order of their data: the order
//! `safetensors.torch.load_file` gives, shard after shard.
//!
//! Every shard's header is read and checked as any safetensors input's, and the index and the
//! shards must agree: every listed file exists, every mapped tensor is in the file named for
//! it, no tensor is listed twice, and no shard holds a tensor the map does not give it. A
//! `metadata.total_size` that differs from the tensors' bytes is only a warning (some
//! writers count it differently). Each shard, and the index, is checked unchanged before the
//! output is committed, like any input file.

use std::collections::{HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};

use crate::error::{Error, InputRef, Refusal, Result};
use crate::format::index::{self, Index, SetName};
use crate::format::{Format, Opened, no_such_tensor, safetensors};
use crate::input::source::Version;
use crate::input::sources;
use crate::input::{DataFile, Input, OpenOptions, Tensor, Watched, dcp, dtensor};
use crate::limits;
use crate::location::Location;
use crate::sys::spill::Spill;

/// The files a sharded input was read from, and what its index says about them.
#[derive(Debug, Clone)]
pub struct ShardSet {
    /// The index file.
    pub index: PathBuf,
    /// The set's name, as the index's name gives it (`model`, a variant).
    pub name: SetName,
    /// The shard files, in the order their tensors are read.
    pub files: Vec<PathBuf>,
    /// `metadata.total_size` in the index, if it says.
    pub total_size: Option<u64>,
    /// The bytes of the tensors the index maps, all shards together.
    pub tensor_bytes: u64,
}

/// What a set's shards were read as, and what their reader found beside the tensors.
pub(crate) struct Read {
    /// The shards' format: safetensors, or PyTorch for a `pytorch_model.bin.index.json`.
    pub format: Format,
    /// The first shard's safetensors `__metadata__`, if it has one.
    pub metadata: Option<Vec<(String, String)>>,
    /// What the shards' reader noted for `--dry-run`, every shard's.
    pub notes: Vec<String>,
    /// What the shards' reader left out, every shard's.
    pub left_out: Vec<String>,
}

/// Whether `path` names a sharded checkpoint's index (`model.safetensors.index.json`,
/// `diffusion_pytorch_model.safetensors.index.fp16.json`, `pytorch_model.bin.index.json`).
pub fn is_index_path(path: &Path) -> bool {
    path.file_name()
        .and_then(|name| name.to_str())
        .is_some_and(|name| index::is_index_name(name) || index::is_pickle_index_name(name))
}

/// Opens the sharded checkpoint `name` names: an index or, when `is_dir`, the folder that
/// holds it. `selected` keeps one tensor (`FILE:NAME`).
pub fn open(
    name: InputRef,
    selected: Option<String>,
    options: OpenOptions,
    is_dir: bool,
    spill: &mut Spill,
) -> Result<Input> {
    let mut input = if is_dir {
        match in_folder(&name)? {
            Found::Index(index) => open_index(
                InputRef {
                    location: index.into(),
                    ..name
                },
                options,
                spill,
            )?,
            Found::File(file) => {
                let mut head = Vec::new();
                Input::open(name.position, file.into(), options, spill, &mut head, None)?
            }
            Found::RankFiles(files) => dtensor::open_folder(&name, &files, options, spill)?,
            Found::Files(files) => match dcp::open_folder(&name, &files, options, spill)? {
                Some(checkpoint) => checkpoint,
                None => return Err(several_files(&name, &files)),
            },
        }
    } else {
        open_index(name, options, spill)?
    };
    if let Some(wanted) = selected {
        let is_wanted = |t: &Tensor| t.name.tensor.as_deref() == Some(wanted.as_str());
        if !input.tensors.iter().any(is_wanted) {
            let names: Vec<String> = input
                .tensors
                .iter()
                .filter_map(|t| Some(t.name.tensor.as_deref()?.to_string()))
                .collect();
            return Err(no_such_tensor(&input.name, &wanted, &names));
        }
        let tensors = std::mem::take(&mut input.tensors).into_vec();
        input.tensors = tensors.into_iter().filter(is_wanted).collect();
        let extras = input.extras.get_or_insert_with(Box::default);
        extras.selected = Some(wanted);
    }
    Ok(input)
}

/// What a folder input holds: its one index, or, without one, its `.safetensors` files
/// (several make a checkpoint when they are the ranks' files of a distributed checkpoint), or
/// its one PyTorch checkpoint file.
enum Found {
    Index(PathBuf),
    File(PathBuf),
    Files(Vec<PathBuf>),
    /// `torch.save` files with a rank in their names (`model_world_size_2_rank_0.pt`), of a
    /// folder without safetensors files or index: DTensor rank files.
    RankFiles(Vec<PathBuf>),
}

/// The extensions of a PyTorch checkpoint file (`torch.save`'s), which a folder may hold alone.
const PICKLE_EXTENSIONS: [&str; 3] = [".bin", ".pt", ".pth"];

/// Finds the checkpoint in the folder `name` names; refuses a folder with several indexes,
/// or with none and other than one `.safetensors` file or one PyTorch checkpoint, listing
/// what it holds.
fn in_folder(name: &InputRef) -> Result<Found> {
    let folder = name.location.as_path();
    let entries = sources::list(&name.location).map_err(|e| name.io_error("list", e))?;
    let (mut indexes, mut files, mut pickle_indexes) = (Vec::new(), Vec::new(), Vec::new());
    let (mut pickles, mut rank_files) = (Vec::new(), Vec::new());
    for entry in entries {
        let file_name = entry.name.to_string_lossy().into_owned();
        if !entry.is_object {
            continue;
        }
        if index::is_index_name(&file_name) {
            indexes.push(file_name);
        } else if index::is_pickle_index_name(&file_name) {
            pickle_indexes.push(file_name);
        } else if file_name.ends_with(".safetensors") {
            files.push(file_name);
        } else if dtensor::is_rank_file_name(&file_name) {
            rank_files.push(file_name);
        } else if PICKLE_EXTENSIONS.iter().any(|e| file_name.ends_with(e)) {
            pickles.push(file_name);
        }
    }
    indexes.sort();
    files.sort();
    pickle_indexes.sort();
    pickles.sort();
    // A folder that holds a safetensors checkpoint is read through it, as transformers'
    // `from_pretrained` reads it, even when a PyTorch set (`pytorch_model.bin.index.json`)
    // or file lies beside it; without one, its one PyTorch set's index, else its one PyTorch
    // checkpoint file.
    if indexes.is_empty() && files.is_empty() {
        indexes = pickle_indexes;
    }
    let at = |file: &String| folder.join(file);
    if indexes.is_empty() && files.is_empty() && !rank_files.is_empty() {
        rank_files.sort();
        return Ok(Found::RankFiles(rank_files.iter().map(at).collect()));
    }
    match (indexes.as_slice(), files.as_slice()) {
        ([index], _) => Ok(Found::Index(at(index))),
        ([], [file]) => Ok(Found::File(at(file))),
        ([], []) => one_pickle(name, &pickles).map(Found::File),
        ([], _) => Ok(Found::Files(files.iter().map(at).collect())),
        _ => Err(Error::Refused(vec![Refusal {
            headline: format!(
                "{name} is a folder with {} indexes of sharded checkpoints: tjoin cannot tell \
                 which one to read",
                indexes.len()
            ),
            details: listing(&indexes),
            hint: Some(format!(
                "name the index to read instead of the folder, e.g. {}",
                crate::messages::path(&at(&indexes[0]))
            )),
        }])),
    }
}

/// The one PyTorch checkpoint file (`.bin`, `.pt`, `.pth`) of a folder that holds no index
/// and no `.safetensors` file. Of several, the one transformers' or diffusers'
/// `from_pretrained` reads (`pytorch_model.bin`, `diffusion_pytorch_model.bin`, with a
/// variant `pytorch_model.fp16.bin`) when exactly one is so named: a Trainer's checkpoint
/// folder holds `optimizer.pt`, `scheduler.pt`, `rng_state.pth` and `training_args.bin`
/// beside the model. Otherwise the folder is refused, listing them.
fn one_pickle(name: &InputRef, pickles: &[String]) -> Result<PathBuf> {
    let at = |file: &String| name.location.as_path().join(file);
    let models: Vec<String> = pickles
        .iter()
        .filter(|f| is_model_weights(f))
        .cloned()
        .collect();
    match (pickles, models.as_slice()) {
        ([file], _) | (_, [file]) => Ok(at(file)),
        ([], _) => {
            let why = "it is a directory, and holds no checkpoint (no *.safetensors.index.json, \
                       no .safetensors file, no pytorch_model.bin.index.json, no .bin, .pt or \
                       .pth file)";
            Err(name.io_error("open", io::Error::other(why)))
        }
        _ => {
            let names: Vec<String> = pickles.iter().map(|f| crate::messages::name(f)).collect();
            Err(Error::Refused(vec![Refusal {
                headline: format!(
                    "{name} is a folder with no index and {} PyTorch checkpoint files \
                     (.bin, .pt, .pth), none of them alone named as a model's weights \
                     (pytorch_model.bin): tjoin cannot tell which one to read",
                    pickles.len()
                ),
                details: listing(&names),
                hint: Some(format!(
                    "name the file to read instead of the folder, e.g. {}",
                    crate::messages::path(&at(&pickles[0]))
                )),
            }]))
        }
    }
}

/// Whether `file_name` is the name transformers or diffusers give a model's weights in one
/// PyTorch file: `pytorch_model.bin`, `diffusion_pytorch_model.bin`, `pytorch_model.fp16.bin`.
fn is_model_weights(file_name: &str) -> bool {
    let Some(stem) = file_name.strip_suffix(".bin") else {
        return false;
    };
    let without_variant = stem
        .rsplit_once('.')
        .filter(|(_, variant)| !variant.is_empty())
        .map_or(stem, |(rest, _)| rest);
    [stem, without_variant]
        .iter()
        .any(|s| *s == "pytorch_model" || *s == "diffusion_pytorch_model")
}

/// The refusal of a folder of several `.safetensors` files and no index, which are not the
/// files of a distributed checkpoint either.
fn several_files(name: &InputRef, files: &[PathBuf]) -> Error {
    let names: Vec<String> = files
        .iter()
        .map(|f| {
            f.file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    Error::Refused(vec![Refusal {
        headline: format!(
            "{name} is a folder with no *.safetensors.index.json and {} .safetensors \
             files that are not a distributed checkpoint's (no {} metadata): tjoin cannot \
             tell which of them make the checkpoint",
            files.len(),
            dcp::SHARDING_INFO
        ),
        details: listing(&names),
        hint: Some(format!(
            "name the files themselves ({} ...), or write an index that lists them",
            crate::messages::path(&files[0])
        )),
    }])
}

/// File names as refusals list them: the first few, then how many more.
fn listing(names: &[String]) -> Vec<String> {
    const SHOWN: usize = 10;
    let mut lines: Vec<String> = names.iter().take(SHOWN).cloned().collect();
    if names.len() > SHOWN {
        lines.push(format!("... and {} more", names.len() - SHOWN));
    }
    lines
}

/// Reads the index `name` names, then every shard it lists, and checks that they agree. The
/// shards of a `pytorch_model.bin.index.json` are PyTorch checkpoints (`format/pickle/`),
/// those of any other index safetensors files.
fn open_index(name: InputRef, options: OpenOptions, spill: &mut Spill) -> Result<Input> {
    let index_path = name.location.as_path();
    let pickle = index_path
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(index::is_pickle_index_name);
    let (index, index_version) = read_index(&name, pickle)?;
    let folder = index_path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let index_text = crate::messages::path(index_path);
    let Mapping {
        file_of,
        listed,
        files,
    } = mapping(&index).map_err(|problems| inconsistent(&index_text, problems))?;
    let mut problems = Vec::new();
    let index_watched = Watched::closed(&name.location, index_version);
    let mut watched = Vec::with_capacity(files.len());
    let mut tensors = Vec::with_capacity(index.weight_map.len());
    let mut metadata = None;
    let mut notes = Vec::new();
    let mut left_out = Vec::new();
    let mut paths = Vec::with_capacity(files.len());
    for file in &files {
        let path = folder.join(file);
        let shard = InputRef {
            position: name.position,
            location: path.as_path().into(),
            tensor: None,
        };
        let mapped = &listed[file];
        let keep_open = options.keeps_open(files.len());
        let (data, version, contents) = read_shard(
            &shard,
            (&index_text, mapped.len()),
            (pickle, keep_open),
            spill,
        )?;
        if !pickle
            && contents
                .metadata
                .as_deref()
                .is_some_and(dcp::hf::has_sharding_info)
        {
            // The index lists a distributed checkpoint's rank files, whose blocks are placed
            // by their offsets: a weight_map naming one file per tensor would cut them short.
            drop(data);
            let listed: Vec<PathBuf> = files.iter().map(|f| folder.join(f)).collect();
            return dcp::hf::open_listed(&name, &index_text, &listed, options, spill);
        }
        let shard_is = Shard {
            file,
            name: &shard,
            data: &data,
        };
        take_held(
            shard_is,
            &file_of,
            mapped,
            contents.tensors,
            &mut tensors,
            &mut problems,
        );
        if metadata.is_none() {
            metadata = contents.metadata;
        }
        notes.extend(contents.notes);
        left_out.extend(
            contents
                .left_out
                .into_iter()
                .map(|l| format!("{l} in {}", crate::messages::quote(file))),
        );
        watched.push(Watched::of(&shard.location, &data, version));
        paths.push(path);
    }
    if !problems.is_empty() {
        return Err(inconsistent(&index_text, problems));
    }
    let shards = shard_set(index_path, &index, paths, &tensors);
    let watched = (index_watched, watched);
    let format = if pickle {
        Format::PyTorch
    } else {
        Format::SafeTensors
    };
    let read = Read {
        format,
        metadata,
        notes,
        left_out,
    };
    Ok(Input::of_files(name, tensors, read, shards, watched))
}

/// The set of shard files at `paths` the index at `index_path` lists, holding `tensors`.
fn shard_set(
    index_path: &Path,
    index: &Index,
    paths: Vec<PathBuf>,
    tensors: &[Tensor],
) -> ShardSet {
    let set_name = index_path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(SetName::of_index)
        .unwrap_or_default();
    ShardSet {
        index: index_path.to_path_buf(),
        name: set_name,
        files: paths,
        total_size: index.total_size,
        tensor_bytes: tensors.iter().map(|t| t.info.data_len).sum(),
    }
}

/// Each tensor's file, and each file's tensors (in the index's order, for messages), as an
/// index maps them.
struct Mapping<'a> {
    file_of: HashMap<&'a str, &'a str>,
    listed: HashMap<&'a str, Vec<&'a str>>,
    /// The files, in shard-number order.
    files: Vec<&'a str>,
}

/// The index's mapping, or every problem with it (a tensor listed twice, a file outside the
/// index's folder).
fn mapping(index: &Index) -> std::result::Result<Mapping<'_>, Vec<String>> {
    let mut problems = Vec::new();
    let mut file_of: HashMap<&str, &str> = HashMap::with_capacity(index.weight_map.len());
    let mut listed: HashMap<&str, Vec<&str>> = HashMap::new();
    for (tensor, file) in &index.weight_map {
        match file_of.insert(tensor, file) {
            Some(first) => problems.push(format!(
                "tensor `{}` is listed twice, in {} and in {}",
                crate::messages::name(tensor),
                crate::messages::name(first),
                crate::messages::name(file)
            )),
            None => listed.entry(file).or_default().push(tensor),
        }
    }
    let mut files: Vec<&str> = listed.keys().copied().collect();
    files.sort_by_key(|file| (index::shard_number(file).unwrap_or(u64::MAX), *file));
    for file in &files {
        if !index::is_inside_folder(file) {
            problems.push(format!(
                "it lists the file {file}, which is not a path inside the index's folder"
            ));
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(Mapping {
        file_of,
        listed,
        files,
    })
}

/// One shard as an index lists it: its name in the index, as an input, and its data.
struct Shard<'a> {
    file: &'a str,
    name: &'a InputRef,
    data: &'a DataFile,
}

/// Takes into `tensors` each tensor `found` in `shard` that the index maps to it, and says in
/// `problems` which it holds that the index maps elsewhere or not at all, and which of the
/// `mapped` ones it lacks.
fn take_held(
    shard: Shard,
    file_of: &HashMap<&str, &str>,
    mapped: &[&str],
    found: Vec<crate::format::Found>,
    tensors: &mut Vec<Tensor>,
    problems: &mut Vec<String>,
) {
    let mut held: HashSet<&str> = HashSet::with_capacity(found.len());
    for found in found {
        let tensor_name = found.name.unwrap_or_default();
        match file_of.get_key_value(tensor_name.as_str()) {
            Some((&key, &mapped_to)) if mapped_to == shard.file => {
                held.insert(key);
                tensors.push(Tensor {
                    name: InputRef {
                        tensor: Some(tensor_name.into()),
                        ..shard.name.clone()
                    },
                    info: found.info,
                    file: found
                        .file
                        .map_or_else(|| shard.data.clone(), DataFile::from),
                    stored_crc: found.stored_crc,
                });
            }
            Some((_, &mapped_to)) => problems.push(format!(
                "{} holds tensor `{}`, which the index maps to {}",
                crate::messages::name(shard.file),
                crate::messages::name(&tensor_name),
                crate::messages::name(mapped_to)
            )),
            None => problems.push(format!(
                "{} holds tensor `{}`, which the index's weight_map does not list",
                crate::messages::name(shard.file),
                crate::messages::name(&tensor_name)
            )),
        }
    }
    let lacking: Vec<&str> = mapped
        .iter()
        .copied()
        .filter(|t| !held.contains(t))
        .collect();
    if !lacking.is_empty() {
        problems.push(format!(
            "the index maps {} tensor{} to {}, which does not hold {}: {}",
            lacking.len(),
            if lacking.len() == 1 { "" } else { "s" },
            shard.file,
            if lacking.len() == 1 { "it" } else { "them" },
            shown(&lacking)
        ));
    }
}

/// The first few names, then how many more.
fn shown(names: &[&str]) -> String {
    const SHOWN: usize = 5;
    let first: Vec<&str> = names.iter().copied().take(SHOWN).collect();
    match names.len().saturating_sub(SHOWN) {
        0 => first.join(", "),
        more => format!("{} and {more} more", first.join(", ")),
    }
}

/// The refusal of an index and shards that disagree: every problem found, and what to do.
fn inconsistent(index: &str, problems: Vec<String>) -> Error {
    const SHOWN: usize = 20;
    let more = problems.len().saturating_sub(SHOWN);
    let mut details: Vec<String> = problems.into_iter().take(SHOWN).collect();
    if more > 0 {
        details.push(format!("... and {more} more"));
    }
    Error::Inconsistent(vec![Refusal {
        headline: format!("the sharded checkpoint {index} does not agree with its shards:"),
        details,
        hint: Some(
            "the index or a shard is out of date or was copied from another checkpoint: \
             download or save the checkpoint again, or correct the index's weight_map"
                .to_string(),
        ),
    }])
}

/// Reads and parses the index file (or object) `name` names, up to [`limits::INDEX`]; a local
/// one opened without waiting, so that a FIFO under an index's name is refused instead of
/// waited on.
fn read_index(name: &InputRef, pickle: bool) -> Result<(Index, Version)> {
    let (text, head) = super::objects::read_whole(&name.location, &limits::INDEX)
        .map_err(|(action, e)| name.io_error(action, e))?;
    let index = index::parse(&text).map_err(|reason| Error::Malformed {
        input: name.clone(),
        format: if pickle {
            "PyTorch index"
        } else {
            "safetensors index"
        },
        reason,
    })?;
    Ok((index, head.version))
}

/// Opens the shard `shard` names and reads its header; the errors say which index lists it
/// (`index`, for `tensors` tensors). The shard's data: a local file kept open when
/// `keep_open`, else reopened by its location; an object read by range (a safetensors
/// shard's header parsed from bytes, a PyTorch shard's read by range).
fn read_shard(
    shard: &InputRef,
    (index, tensors): (&str, usize),
    (pickle, keep_open): (bool, bool),
    spill: &mut Spill,
) -> Result<(DataFile, Version, crate::format::Contents)> {
    let listed = |e: io::Error| {
        let why = format!(
            "{e} (the index {index} lists it for {tensors} tensor{})",
            if tensors == 1 { "" } else { "s" }
        );
        io::Error::new(e.kind(), why)
    };
    let source = sources::source_of(&shard.location).map_err(|e| shard.io_error("open", e))?;
    let read = if !source.is_local() {
        read_object_shard(shard, pickle, &listed)
    } else {
        // Opened without waiting: a FIFO the index lists is refused, not waited on.
        let (file, head) = super::objects::open_regular(&shard.location)
            .map_err(|e| shard.io_error("open", listed(e)))?;
        let contents = if pickle {
            let mut first = Vec::new();
            super::fetch::read_head(&file, head.len, false, &mut first)
                .map_err(|e| shard.io_error("read the header of", listed(e)))?;
            let opened = Opened {
                file: &file,
                len: head.len,
                name: shard,
                head: &first,
            };
            Format::PyTorch.read(opened, None, spill)
        } else {
            safetensors::read(&file, head.len, shard)
        };
        let data = DataFile::of_opened(&shard.location, file, &head.version, keep_open);
        contents.map(|contents| (data, head.version, contents))
    };
    read.map_err(|e| match e {
        Error::Malformed {
            input,
            format,
            reason,
        } => Error::Malformed {
            input,
            format,
            reason: format!("{reason}; it is a shard the index {index} lists"),
        },
        other => other,
    })
}

/// Reads the header of the shard `shard` names in an object store: a safetensors shard's
/// from bytes, a PyTorch shard's (`pickle`) by range (its ZIP directory, its pickle). Its
/// data stays there, read by range.
fn read_object_shard(
    shard: &InputRef,
    pickle: bool,
    listed: &dyn Fn(io::Error) -> io::Error,
) -> Result<(DataFile, Version, crate::format::Contents)> {
    use super::objects::Step;
    let head =
        super::objects::head(&shard.location).map_err(|e| shard.io_error("open", listed(e)))?;
    let mut parse = |bytes: &[u8]| {
        if pickle {
            // The first bytes only: the reader by range reads the rest.
            return Ok(Step::Done(None));
        }
        Ok(match safetensors::read_bytes(bytes, head.len, shard)? {
            Ok(contents) => Step::Done(Some(contents)),
            Err(needed) => Step::Need(needed),
        })
    };
    let (contents, first) = super::objects::read_header(shard, &head, &mut parse)?;
    let contents = match contents {
        Some(contents) => contents,
        None => {
            let object = super::objects::Object::new(&shard.location, &head, &first)
                .map_err(|e| shard.io_error("open", listed(e)))?;
            let read = Format::PyTorch.read_ranged((&object, head.len, &first), shard, None)?;
            read.ok_or_else(|| shard.io_error("read", io::ErrorKind::Unsupported.into()))?
        }
    };
    let data = DataFile::remote(shard.location.clone(), head.version.clone(), head.len);
    Ok((data, head.version, contents))
}

/// An index beside the first file whose weight map lists every one of `files`, if there is
/// one.
pub fn index_listing(files: &[&Path]) -> Option<PathBuf> {
    let folder = crate::sys::folder_of(files[0]);
    let names: Vec<&str> = files
        .iter()
        .map(|f| f.file_name().and_then(|n| n.to_str()))
        .collect::<Option<Vec<&str>>>()?;
    let mut found: Vec<PathBuf> = sources::list(&Location::new(folder))
        .ok()?
        .into_iter()
        .map(|entry| folder.join(entry.name))
        .filter(|path| is_index_path(path))
        .collect();
    found.sort();
    found.into_iter().find(|path| {
        let Ok((text, _)) =
            super::objects::read_whole(&Location::new(path.as_path()), &limits::INDEX)
        else {
            return false;
        };
        let Ok(index) = index::parse(&text) else {
            return false;
        };
        let listed: HashSet<&str> = index.weight_map.iter().map(|(_, f)| f.as_str()).collect();
        names.iter().all(|name| listed.contains(name))
    })
}
