//! A DCP checkpoint's `.metadata` file: the pickle of a `Metadata` dataclass that
//! `FileSystemWriter` writes beside the ranks' `.distcp` files, read with the restricted
//! pickle machine (its classes are inert data records, `format/pickle/classes.rs`).
//!
//! What is read: `state_dict_metadata`, each entry's `TensorStorageMetadata` (its
//! `TensorProperties`' dtype, the full `size`, and `chunks` of `offsets` and `sizes`) or
//! `BytesStorageMetadata` (a value that is not a tensor: a step counter, a list); and
//! `storage_data`, which maps each chunk (`MetadataIndex`: the key and the chunk's offsets) to
//! a `_StorageInfo`: the file under the checkpoint's folder, the offset and the length of its
//! bytes there, and the `transform_descriptors` of a stream extension (compression), if any.
//! And `planner_data`, when the save planner flattened the state dict (DCP's default): each
//! key's path in the nested dict that was saved, which tells a `{"model": {...}}` sub-dict from
//! keys that merely start with `model.` (a plain `model.state_dict()`). Megatron-Core adds
//! `mcore_data`, not needed.

use std::cell::Cell;
use std::collections::HashMap;

use crate::format::pickle::classes::DataClass;
use crate::format::pickle::value::{Arena, Global, Node, Object, TorchDtype, kind_of};
use crate::format::pickle::vm::Pickled;
use crate::messages::excerpt;

/// What `.metadata` says about a checkpoint.
#[derive(Debug)]
pub struct Metadata {
    /// Every entry of the state dict, in the file's order.
    pub entries: Vec<Entry>,
    /// Where each chunk's bytes are: by key and the chunk's offsets (a bytes entry has
    /// none).
    pub storage: HashMap<(String, Vec<u64>), StorageInfo>,
}

/// One entry of the state dict.
#[derive(Debug)]
pub struct Entry {
    /// Its dotted key: `model.layers.0.weight`.
    pub fqn: String,
    /// Its path in the nested state dict that was saved (`planner_data`): `["model",
    /// "layers.0.weight"]` for a key of a `model` sub-dict, `["model.layers.0.weight"]` for a
    /// top-level key; `None` when `.metadata` records no paths.
    pub path: Option<Vec<String>>,
    /// A tensor's description, or `None` for a value that is not a tensor.
    pub tensor: Option<TensorEntry>,
}

/// A tensor as `.metadata` records it.
#[derive(Debug)]
pub struct TensorEntry {
    /// Its element type.
    pub dtype: TorchDtype,
    /// Its full shape.
    pub size: Vec<u64>,
    /// Its chunks, in the file's order.
    pub chunks: Vec<Chunk>,
}

/// One chunk of a tensor: a block saved by one rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// Where it starts in the full tensor.
    pub offsets: Vec<u64>,
    /// Its shape.
    pub sizes: Vec<u64>,
}

/// Where a chunk's bytes are.
#[derive(Debug, Clone)]
pub struct StorageInfo {
    /// The key of the entry it holds (a chunk of it).
    pub fqn: String,
    /// The file, relative to the checkpoint's folder.
    pub relative_path: String,
    /// Where its bytes start in that file.
    pub offset: u64,
    /// How many bytes it has.
    pub length: u64,
    /// The stream extensions its bytes went through (compression), if any.
    pub transforms: Vec<String>,
}

/// The most chunks one tensor may list: a block per rank, for a million ranks.
pub const MAX_CHUNKS_PER_TENSOR: usize = 1 << 20;

/// The most bytes of names (keys, file names) the reading copies out of the pickle: one
/// string shared by every entry (a key of a megabyte, named by 100,000 entries) is copied
/// for each, and this bounds what that costs. 100,000 tensors on 1,000 ranks, with names of
/// 100 bytes, copy about 30 MiB.
pub const TEXT_BYTES: u64 = 256 << 20;

/// Reads the `Metadata` object at the root of `pickled`; the reason it cannot otherwise.
///
/// The chunks its tensors list, in all, may not outnumber the entries of `storage_data`:
/// each chunk's bytes have an entry there of their own. One list of chunks shared by every
/// tensor (20,000 entries x 20,000 chunks, 250 KB) is refused before any chunk is read.
pub fn read(pickled: &Pickled) -> Result<Metadata, String> {
    let nodes = pickled.nodes.as_slice();
    let root = object(pickled.node(pickled.root), DataClass::Metadata, "its root")?;
    let Some(Node::Dict(entries)) = root.field(nodes, "state_dict_metadata") else {
        return Err("its Metadata has no state_dict_metadata dict".to_string());
    };
    let Some(Node::Dict(storage)) = root.field(nodes, "storage_data") else {
        return Err(
            "its Metadata has no storage_data dict (tjoin reads the FileSystemWriter's)"
                .to_string(),
        );
    };
    let budget = Cell::new(TEXT_BYTES);
    let mut paths = planner_paths(nodes, root, &budget)?;
    let text = |node: &Node, what: &str| copied(node, what, &budget);
    let mut chunks = 0usize;
    let mut read_entries = Vec::with_capacity(entries.len());
    for &(key, value) in entries.iter() {
        let fqn = text(nodes.node(key), "a key of state_dict_metadata")?;
        let what = format!("the entry of `{}`", excerpt(&fqn));
        let value = nodes.node(value);
        let tensor = match value {
            Node::Object(o) if o.class == DataClass::BytesStorageMetadata => None,
            _ => {
                let tensor = tensor_entry(
                    nodes,
                    value,
                    &what,
                    storage.len() - chunks.min(storage.len()),
                )?;
                chunks += tensor.chunks.len();
                Some(tensor)
            }
        };
        let path = paths.as_mut().and_then(|p| p.remove(&fqn));
        read_entries.push(Entry { fqn, path, tensor });
    }
    let mut read_storage = HashMap::with_capacity(storage.len());
    for &(key, value) in storage.iter() {
        let index = object(
            nodes.node(key),
            DataClass::MetadataIndex,
            "a key of storage_data",
        )?;
        let fqn = text(
            field(nodes, index, "fqn", "a MetadataIndex")?,
            "a MetadataIndex's fqn",
        )?;
        let what = format!("the storage of `{}`", excerpt(&fqn));
        let offsets = match index.field(nodes, "offset") {
            None | Some(Node::None) => Vec::new(),
            Some(offsets) => numbers(nodes, offsets, &what)?,
        };
        let info = object(nodes.node(value), DataClass::StorageInfo, &what)?;
        let relative_path = text(field(nodes, info, "relative_path", &what)?, &what)?;
        // The fqn again, in the info and in the key.
        spend(&budget, 2 * fqn.len())?;
        let offset = number(field(nodes, info, "offset", &what)?, &what)?;
        let length = number(field(nodes, info, "length", &what)?, &what)?;
        let transforms = match info.field(nodes, "transform_descriptors") {
            None | Some(Node::None) => Vec::new(),
            Some(Node::List(items) | Node::Tuple(items)) => items
                .iter()
                .map(|&i| text(nodes.node(i), &what))
                .collect::<Result<_, _>>()?,
            Some(other) => {
                return Err(format!(
                    "{what} has transform_descriptors that are {}, not a list",
                    kind_of(other)
                ));
            }
        };
        let info = StorageInfo {
            fqn: fqn.clone(),
            relative_path,
            offset,
            length,
            transforms,
        };
        if read_storage.insert((fqn.clone(), offsets), info).is_some() {
            return Err(format!("{what} is listed twice for one chunk"));
        }
    }
    Ok(Metadata {
        entries: read_entries,
        storage: read_storage,
    })
}

/// `planner_data`'s path of each key, checked to join into the key (as DCP's
/// `flatten_state_dict` makes them); `None` when it is absent (a planner that does not flatten).
fn planner_paths(
    nodes: &[Node],
    root: &Object,
    budget: &Cell<u64>,
) -> Result<Option<HashMap<String, Vec<String>>>, String> {
    let entries = match root.field(nodes, "planner_data") {
        None | Some(Node::None) => return Ok(None),
        Some(Node::Dict(entries)) => entries,
        Some(other) => {
            return Err(format!(
                "its Metadata has planner_data that is {}, not a dict",
                kind_of(other)
            ));
        }
    };
    let mut paths = HashMap::with_capacity(entries.len());
    for &(key, value) in entries.iter() {
        let fqn = copied(nodes.node(key), "a key of planner_data", budget)?;
        let what = format!("the planner_data of `{}`", excerpt(&fqn));
        let (Node::Tuple(items) | Node::List(items)) = nodes.node(value) else {
            return Err(format!("{what} is not a tuple of keys"));
        };
        let path = items
            .iter()
            .map(|&i| match nodes.node(i) {
                Node::Str(s) => spend(budget, s.len()).map(|()| s.to_string()),
                Node::Int(n) => Ok(n.to_string()),
                other => Err(format!("{what} holds {}, not a key", kind_of(other))),
            })
            .collect::<Result<Vec<String>, String>>()?;
        // A path that does not spell its key would rename the tensor on the file's word.
        if path.is_empty() || path.join(".") != fqn {
            return Err(format!(
                "{what} is a path ({}) that does not join into its key",
                path.iter()
                    .map(|p| format!("`{}`", excerpt(p)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        paths.insert(fqn, path);
    }
    Ok(Some(paths))
}

/// A tensor's entry, which may list at most `room` chunks (those `storage_data` has left).
fn tensor_entry(
    nodes: &[Node],
    value: &Node,
    what: &str,
    room: usize,
) -> Result<TensorEntry, String> {
    let entry = object(value, DataClass::TensorStorageMetadata, what)?;
    let properties = object(
        field(nodes, entry, "properties", what)?,
        DataClass::TensorProperties,
        what,
    )?;
    let dtype = match properties.field(nodes, "dtype") {
        Some(Node::Global(Global::Dtype(dtype))) => *dtype,
        other => {
            return Err(format!(
                "{what} has a dtype that is {}, not a torch dtype",
                other.map_or("missing".to_string(), kind_of)
            ));
        }
    };
    let size = numbers(nodes, field(nodes, entry, "size", what)?, what)?;
    let Node::List(chunks) = field(nodes, entry, "chunks", what)? else {
        return Err(format!("{what} has chunks that are not a list"));
    };
    if chunks.len() > MAX_CHUNKS_PER_TENSOR {
        return Err(format!(
            "{what} lists {} chunks, more than tjoin's limit of {MAX_CHUNKS_PER_TENSOR} for one \
             tensor",
            chunks.len()
        ));
    }
    if chunks.len() > room {
        return Err(format!(
            "{what} lists {} chunks, but its storage_data has room for {room} more (each \
             chunk's bytes have an entry there of their own): it lists chunks that no file \
             holds",
            chunks.len()
        ));
    }
    let chunks = chunks
        .iter()
        .map(|&c| {
            let chunk = object(nodes.node(c), DataClass::ChunkStorageMetadata, what)?;
            let offsets = numbers(nodes, field(nodes, chunk, "offsets", what)?, what)?;
            let sizes = numbers(nodes, field(nodes, chunk, "sizes", what)?, what)?;
            if offsets.len() != size.len() || sizes.len() != size.len() {
                return Err(format!(
                    "{what} has a chunk at {} of size {} in a tensor of rank {}",
                    crate::messages::shape_text(&offsets),
                    crate::messages::shape_text(&sizes),
                    size.len()
                ));
            }
            Ok(Chunk { offsets, sizes })
        })
        .collect::<Result<_, String>>()?;
    Ok(TensorEntry {
        dtype,
        size,
        chunks,
    })
}

/// `node` as an object of `class`.
fn object<'a>(node: &'a Node, class: DataClass, what: &str) -> Result<&'a Object, String> {
    match node {
        Node::Object(o) if o.class == class => Ok(o),
        other => Err(format!(
            "{what} is {}, where DCP writes a {}",
            kind_of(other),
            class.path()
        )),
    }
}

fn field<'a>(
    nodes: &'a [Node],
    object: &Object,
    name: &str,
    what: &str,
) -> Result<&'a Node, String> {
    object
        .field(nodes, name)
        .ok_or_else(|| format!("{what} has no {name}"))
}

/// A string node's text, copied, its bytes spent from `budget`.
fn copied(node: &Node, what: &str, budget: &Cell<u64>) -> Result<String, String> {
    if let Node::Str(s) = node {
        spend(budget, s.len())?;
    }
    text(node, what)
}

/// Spends `bytes` of the budget of copied names, refusing past [`TEXT_BYTES`].
fn spend(budget: &Cell<u64>, bytes: usize) -> Result<(), String> {
    let left = budget.get().checked_sub(bytes as u64).ok_or_else(|| {
        format!(
            "its names take more than {TEXT_BYTES} bytes once read, tjoin's limit: one name \
             is shared by more entries than any checkpoint has"
        )
    })?;
    budget.set(left);
    Ok(())
}

fn text(node: &Node, what: &str) -> Result<String, String> {
    match node {
        Node::Str(s) => Ok(s.to_string()),
        other => Err(format!("{what} is {}, not a string", kind_of(other))),
    }
}

fn number(node: &Node, what: &str) -> Result<u64, String> {
    match node {
        Node::Int(n) => u64::try_from(*n).map_err(|_| format!("{what} has the number {n}")),
        other => Err(format!(
            "{what} has {} where a number belongs",
            kind_of(other)
        )),
    }
}

/// A `torch.Size` (a tuple of ints) or a list of them.
fn numbers(nodes: &[Node], node: &Node, what: &str) -> Result<Vec<u64>, String> {
    match node {
        Node::Tuple(items) | Node::List(items) if items.len() > crate::format::MAX_RANK => {
            Err(format!(
                "{what} has a size of {} dimensions; tjoin reads at most {}",
                items.len(),
                crate::format::MAX_RANK
            ))
        }
        Node::Tuple(items) | Node::List(items) => {
            items.iter().map(|&i| number(nodes.node(i), what)).collect()
        }
        other => Err(format!(
            "{what} has {} where a size belongs",
            kind_of(other)
        )),
    }
}
