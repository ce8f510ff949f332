//! `--like REF`: the references' headers, read without the data, as the config stage asks
//! (once, before any input is opened): a reference is given as an input is (a `.safetensors`
//! file, an index, a folder, a PyTorch checkpoint), and is read here, by the input stage,
//! as one is; several `--like` flags give the union of their tensors. The check that the
//! job's output tensors have their shapes is planning's (`src/plan/reference.rs`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::error::{Error, InputRef, Refusal, Result, capped};
use crate::format::{index, safetensors};
use crate::limits;
use crate::messages;
use crate::messages::shape_text;
use crate::sys::{self, Accept};

/// How many items a refusal lists before "... and N more".
const SHOWN: usize = 10;

/// The tensor shapes of the reference headers, all `--like` flags together.
#[derive(Debug, Clone)]
pub struct Reference {
    /// The files as the user named them, in the order of the flags.
    pub(crate) paths: Vec<PathBuf>,
    /// Each tensor's name, shape and the reference (in `paths`) that gives it: the first
    /// reference's tensors in its order, then each next reference's new ones.
    pub(crate) tensors: Vec<(String, Vec<u64>, usize)>,
}

impl Reference {
    /// Reads every reference `--like` names, headers only, and takes the union of their
    /// tensors: a reference is a `.safetensors` file, a sharded checkpoint's index
    /// (`*.safetensors.index.json`, `pytorch_model.bin.index.json`), a folder holding one
    /// (or one checkpoint file, `.safetensors` or PyTorch's), or a PyTorch checkpoint (`.pt`, `.pth`, `.bin`): whatever an
    /// input may be whose tensors have names. A name two references give different shapes
    /// is refused: the output cannot match both.
    pub fn read(paths: &[PathBuf]) -> Result<Reference> {
        let mut tensors: Vec<(String, Vec<u64>, usize)> = Vec::new();
        let mut at: HashMap<String, usize> = HashMap::new();
        let mut conflicts = Vec::new();
        for (which, path) in paths.iter().enumerate() {
            for (name, shape) in Reference::read_one(path)? {
                match at.get(&name) {
                    Some(&first) => {
                        let (_, known, from) = &tensors[first];
                        if *known != shape {
                            conflicts.push(format!(
                                "{}  {} in {}, {} in {}",
                                messages::name(&name),
                                shape_text(known),
                                messages::path(&paths[*from]),
                                shape_text(&shape),
                                messages::path(path)
                            ));
                        }
                    }
                    None => {
                        at.insert(name.clone(), tensors.len());
                        tensors.push((name, shape, which));
                    }
                }
            }
        }
        if !conflicts.is_empty() {
            return Err(Error::Refused(vec![Refusal {
                headline: format!(
                    "the --like references give {} tensor{} two shapes: the output cannot \
                     match both",
                    conflicts.len(),
                    if conflicts.len() == 1 { "" } else { "s" }
                ),
                details: capped(conflicts, SHOWN),
                hint: Some(
                    "several --like flags name parts of one model (their tensors are joined); \
                     name the references of one model only"
                        .to_string(),
                ),
            }]));
        }
        Ok(Reference {
            paths: paths.to_vec(),
            tensors,
        })
    }

    /// The tensors one reference declares, with their shapes, in its order.
    fn read_one(path: &Path) -> Result<Vec<(String, Vec<u64>)>> {
        let file_name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        // An object's header is read as an input's is: from bytes, by range.
        let local = crate::input::sources::source_of(&path.into()).is_ok_and(|s| s.is_local());
        if !local {
            return Reference::read_as_input(path);
        }
        if index::is_index_name(file_name) {
            return Reference::read_index(path);
        }
        if file_name.ends_with(".safetensors") {
            let contents = read_header(path, None)?;
            return Ok(contents
                .tensors
                .into_iter()
                .map(|t| (t.name.unwrap_or_default(), t.info.shape.into_vec()))
                .collect());
        }
        Reference::read_as_input(path)
    }

    /// Any other reference (a folder, a PyTorch checkpoint or `.bin` set, an `.npz`) is read
    /// as an input is, headers only: the same forms, the same checks, and messages that name
    /// it as the `--like` reference. Its tensors must have names.
    fn read_as_input(path: &Path) -> Result<Vec<(String, Vec<u64>)>> {
        // Standard input is the inputs' to read, not a reference's.
        if path.as_os_str() == crate::error::STDIN {
            return Err(Error::refused(
                "--like - would read the reference from standard input, which is the inputs'",
                "name the reference's file, index or folder",
            ));
        }
        let options = crate::input::OpenOptions::default();
        let mut spill = crate::sys::spill::Spill::default();
        let mut head = Vec::new();
        let input =
            crate::input::Input::open(0, path.into(), options, &mut spill, &mut head, None)?;
        let mut tensors = Vec::with_capacity(input.tensors.len());
        for tensor in input.tensors.into_vec() {
            let Some(name) = tensor.name.tensor else {
                return Err(Error::refused(
                    format!(
                        "--like {} holds one unnamed tensor, as every {} file does: it gives \
                         no tensor's shape by name",
                        messages::path(path),
                        input.format.extension()
                    ),
                    "name the model the output should match: its .safetensors file, its \
                     index, its folder, or its PyTorch checkpoint (.pt, .pth, .bin)",
                ));
            };
            tensors.push((name.into_string(), tensor.info.shape.into_vec()));
        }
        Ok(tensors)
    }

    /// The reference of a sharded checkpoint: its index's tensors, each shape from the header
    /// of the shard the index names for it (only the shards' headers are read).
    fn read_index(path: &Path) -> Result<Vec<(String, Vec<u64>)>> {
        let text = sys::read_whole(path, &limits::INDEX, Accept::Stream)
            .map_err(|e| Error::io("read the --like reference", path, e))?;
        let parsed = index::parse(&text).map_err(|why| {
            Error::refused(
                format!(
                    "--like {} is not a valid index: {why}",
                    crate::messages::path(path)
                ),
                "name the model.safetensors.index.json of the checkpoint the output should match",
            )
        })?;
        let folder = path.parent().unwrap_or(Path::new(""));
        let mut shapes: HashMap<String, Vec<u64>> = HashMap::new();
        let mut shards: Vec<&str> = parsed.weight_map.iter().map(|(_, f)| f.as_str()).collect();
        shards.sort_unstable();
        shards.dedup();
        // The shards the input index would refuse to read, --like refuses too.
        let outside: Vec<String> = shards
            .iter()
            .filter(|shard| !index::is_inside_folder(shard))
            .map(|shard| messages::name(shard))
            .collect();
        if !outside.is_empty() {
            return Err(Error::Refused(vec![Refusal {
                headline: format!(
                    "--like {} lists {} shard{} that {} not a path inside the index's folder",
                    messages::path(path),
                    outside.len(),
                    if outside.len() == 1 { "" } else { "s" },
                    if outside.len() == 1 { "is" } else { "are" }
                ),
                details: capped(outside, SHOWN),
                hint: Some(
                    "an index lists its shards by name, in its own folder: name the index of \
                     the checkpoint the output should match, or its unsplit .safetensors file"
                        .to_string(),
                ),
            }]));
        }
        for shard in shards {
            for found in read_header(&folder.join(shard), Some(path))?.tensors {
                shapes.insert(found.name.unwrap_or_default(), found.info.shape.into_vec());
            }
        }
        Ok(parsed
            .weight_map
            .into_iter()
            .filter_map(|(name, _)| shapes.remove(&name).map(|shape| (name, shape)))
            .collect())
    }
}

/// The tensors a `--like` safetensors file declares: its header only. `index` is the `--like`
/// index that lists it, if one does, for the messages.
fn read_header(path: &Path, index: Option<&Path>) -> Result<crate::format::Contents> {
    let name = crate::messages::path(path);
    // Opened without waiting: a FIFO (named, or listed by a --like index) is refused, not
    // waited on; the header is read in place, which a pipe cannot give.
    let (file, metadata) = sys::open_regular(path).map_err(|e| {
        let e = match index {
            Some(index) => std::io::Error::new(
                e.kind(),
                format!("{e} (the --like index {} lists it)", messages::path(index)),
            ),
            None => e,
        };
        Error::io("open the --like reference", path, e)
    })?;
    let len = metadata.len();
    let input = InputRef {
        position: 0,
        location: path.into(),
        tensor: None,
    };
    safetensors::read(&file, len, &input).map_err(|e| match e {
        Error::Malformed { reason, .. } => Error::refused(
            format!("--like {name} is not a valid safetensors file: {reason}"),
            "name the .safetensors file of the model the output should match",
        ),
        Error::InputIo { action, source, .. } => {
            Error::io(format!("{action} the --like reference"), path, source)
        }
        other => other,
    })
}
