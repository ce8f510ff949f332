//! A DTensor as `torch.save` pickles it, read as data: `_rebuild_from_type_v2` of
//! `_rebuild_wrapper_subclass` with the class `torch.distributed.tensor.DTensor`, whose state
//! holds `_local_tensor` (this rank's block, an ordinary tensor record) and `_spec`, a
//! `DTensorSpec` with `placements` (`Shard(dim)`, `Replicate()`), `tensor_meta`
//! (`TensorMeta(shape, stride, dtype)`: the global shape) and `mesh`.
//!
//! Of the mesh only where this rank sits is read: `_coordinate_on_dim` (its coordinate on
//! each mesh dimension), `_rank` (its global rank) and the size of each mesh dimension (the
//! shapes of `_layout`'s axes; the shape of the `mesh` tensor older torch versions save).
//! Its other fields (process group names, the rank map) stay opaque. Where the blocks go is
//! `src/input/dtensor.rs`'s business: this file only reads what the pickle records.

use super::classes::DataClass;
use super::value::{Node, Object, TensorRecord, kind_of};

/// How a DTensor is laid out along one mesh dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spread {
    /// `Shard(dim)`: cut along the tensor's axis `dim` into as many pieces as the mesh
    /// dimension has ranks, as `torch.chunk` cuts.
    Shard(usize),
    /// `Replicate()`: every rank of the mesh dimension holds the same values.
    Replicate,
}

/// What a rank's file records of one DTensor besides its local tensor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Distributed {
    /// The full tensor's shape (`tensor_meta.shape`).
    pub shape: Vec<u64>,
    /// One placement per mesh dimension.
    pub placements: Vec<Spread>,
    /// The size of each mesh dimension.
    pub mesh: Vec<u64>,
    /// This rank's coordinate on each mesh dimension.
    pub coordinate: Vec<u64>,
    /// This rank's global rank.
    pub rank: u64,
}

/// The largest mesh tjoin reads: dimensions, and ranks in all.
const MAX_MESH_DIMS: usize = 8;
const MAX_MESH_RANKS: u64 = 1 << 24;

/// The local tensor and the layout of the DTensor `object`, or why tjoin cannot read it.
pub fn read(nodes: &[Node], object: &Object) -> Result<(TensorRecord, Distributed), String> {
    let local = match object.field(nodes, "_local_tensor") {
        Some(Node::Tensor(record)) => (**record).clone(),
        Some(Node::Unreadable(why)) => {
            return Err(format!("a DTensor whose local tensor is {why}"));
        }
        other => return Err(missing("the DTensor", "_local_tensor", other)),
    };
    let spec = object_field(
        nodes,
        object,
        "the DTensor",
        "_spec",
        DataClass::DTensorSpec,
    )?;
    let meta = object_field(
        nodes,
        spec,
        "the DTensor's spec",
        "tensor_meta",
        DataClass::TensorMeta,
    )?;
    let shape = ints(nodes, meta.field(nodes, "shape"))
        .ok_or_else(|| missing("its TensorMeta", "shape", meta.field(nodes, "shape")))?;
    if shape.len() > crate::format::MAX_RANK {
        return Err(format!(
            "a DTensor of {} dimensions; tjoin reads at most {}",
            shape.len(),
            crate::format::MAX_RANK
        ));
    }
    if let Some(Node::Global(super::value::Global::Dtype(dtype))) = meta.field(nodes, "dtype")
        && *dtype != local.dtype
    {
        return Err(format!(
            "a DTensor of {} whose local tensor is {}: the file is damaged",
            dtype.name(),
            local.dtype.name()
        ));
    }
    let placements = match spec.field(nodes, "placements") {
        Some(Node::Tuple(items) | Node::List(items)) => items
            .iter()
            .map(|&id| placement(nodes, nodes.get(id as usize)))
            .collect::<Result<Vec<Spread>, String>>()?,
        other => return Err(missing("the DTensor's spec", "placements", other)),
    };
    check_shard_order(nodes, spec)?;
    let mesh = object_field(
        nodes,
        spec,
        "the DTensor's spec",
        "mesh",
        DataClass::DeviceMesh,
    )?;
    let (sizes, coordinate, rank) = mesh_place(nodes, mesh)?;
    if sizes.len() != placements.len() || coordinate.len() != placements.len() {
        return Err(format!(
            "a DTensor with {} placements on a mesh of {} dimensions (its coordinate has {}): \
             the file is damaged",
            placements.len(),
            sizes.len(),
            coordinate.len()
        ));
    }
    if let Some(axis) = placements.iter().find_map(|p| match *p {
        Spread::Shard(axis) if axis >= shape.len() => Some(axis),
        _ => None,
    }) {
        return Err(format!(
            "a DTensor of {} dimensions sharded along dimension {axis}: the file is damaged",
            shape.len()
        ));
    }
    Ok((
        local,
        Distributed {
            shape,
            placements,
            mesh: sizes,
            coordinate,
            rank,
        },
    ))
}

/// The placement `node` records.
fn placement(nodes: &[Node], node: Option<&Node>) -> Result<Spread, String> {
    let Some(Node::Object(object)) = node else {
        return Err(format!(
            "a DTensor whose placement is {}, not Shard or Replicate",
            node.map_or("missing".to_string(), kind_of)
        ));
    };
    match object.class {
        DataClass::Replicate => Ok(Spread::Replicate),
        DataClass::Shard => match object.field(nodes, "dim") {
            Some(Node::Int(dim)) => usize::try_from(*dim).map(Spread::Shard).map_err(|_| {
                format!("a DTensor sharded along dimension {dim}: the file is damaged")
            }),
            other => Err(missing("Shard placement", "dim", other)),
        },
        DataClass::Partial => Err(
            "a DTensor with a Partial placement: its ranks hold values still to be summed \
             (reduced), not pieces of the tensor; call `.full_tensor()` (or redistribute it \
             to Replicate) before saving"
                .to_string(),
        ),
        DataClass::StridedShard => Err(
            "a DTensor with a _StridedShard placement (FSDP2 over tensor parallelism), whose \
             blocks interleave; tjoin reads Shard and Replicate: save it with \
             torch.distributed.checkpoint, or call `.full_tensor()` before saving"
                .to_string(),
        ),
        other => Err(format!(
            "a DTensor whose placement is an object of class {}",
            other.path()
        )),
    }
}

/// Refuses a shard order other than the mesh's: a tensor axis cut by several mesh
/// dimensions is cut by them in increasing order unless `shard_order` says otherwise.
fn check_shard_order(nodes: &[Node], spec: &Object) -> Result<(), String> {
    let Some(Node::Tuple(entries) | Node::List(entries)) = spec.field(nodes, "shard_order") else {
        return Ok(());
    };
    for &entry in entries.iter() {
        let Some(Node::Object(entry)) = nodes.get(entry as usize) else {
            continue;
        };
        let mesh_dims = ints(nodes, entry.field(nodes, "mesh_dims")).unwrap_or_default();
        if mesh_dims.windows(2).any(|w| w[0] >= w[1]) {
            return Err(format!(
                "a DTensor whose shard order cuts one axis by the mesh dimensions {mesh_dims:?} \
                 in that order; tjoin reads the default order (increasing): call \
                 `.full_tensor()` before saving"
            ));
        }
    }
    Ok(())
}

/// The mesh's size on each dimension, this rank's coordinate on it, and its global rank.
fn mesh_place(nodes: &[Node], mesh: &Object) -> Result<(Vec<u64>, Vec<u64>, u64), String> {
    let coordinate = match mesh.field(nodes, "_coordinate_on_dim") {
        Some(Node::None) => {
            return Err(
                "a DTensor saved by a rank outside its mesh (its coordinate is None)".to_string(),
            );
        }
        other => ints(nodes, other)
            .ok_or_else(|| missing("its DeviceMesh", "_coordinate_on_dim", other))?,
    };
    let rank = match mesh.field(nodes, "_rank") {
        Some(Node::Int(rank)) => u64::try_from(*rank).ok(),
        _ => None,
    }
    .ok_or_else(|| missing("its DeviceMesh", "_rank", mesh.field(nodes, "_rank")))?;
    let sizes = match mesh.field(nodes, "_layout") {
        Some(Node::Object(layout)) if layout.class == DataClass::MeshLayout => {
            let axes = match layout.field(nodes, "axes") {
                Some(Node::Tuple(axes) | Node::List(axes)) => axes.clone(),
                other => return Err(missing("its mesh layout", "axes", other)),
            };
            let mut sizes = Vec::with_capacity(axes.len());
            for &axis in axes.iter() {
                let size = match nodes.get(axis as usize) {
                    Some(Node::Object(flat)) if flat.class == DataClass::FlatLayout => {
                        product(nodes, flat.field(nodes, "shape"), 0)
                    }
                    _ => None,
                };
                sizes.push(size.ok_or_else(|| {
                    "a DTensor whose mesh layout has an axis tjoin cannot read".to_string()
                })?);
            }
            sizes
        }
        // Before torch 2.9 the mesh was a tensor of ranks, of the mesh's shape.
        None => match mesh.field(nodes, "mesh") {
            Some(Node::Tensor(ranks)) => ranks.shape.clone(),
            other => return Err(missing("its DeviceMesh", "_layout", other)),
        },
        other => return Err(missing("its DeviceMesh", "_layout", other)),
    };
    if sizes.len() > MAX_MESH_DIMS
        || sizes
            .iter()
            .try_fold(1u64, |n, &s| n.checked_mul(s))
            .is_none_or(|n| n > MAX_MESH_RANKS)
    {
        return Err(format!(
            "a DTensor on a mesh of shape {sizes:?}, larger than tjoin reads ({MAX_MESH_DIMS} \
             dimensions, {MAX_MESH_RANKS} ranks)"
        ));
    }
    if let Some(at) = (0..sizes.len().min(coordinate.len())).find(|&d| coordinate[d] >= sizes[d]) {
        return Err(format!(
            "a DTensor whose rank sits at {} on mesh dimension {at} of size {}: the file is \
             damaged",
            coordinate[at], sizes[at]
        ));
    }
    Ok((sizes, coordinate, rank))
}

/// The product of the whole numbers of a shape, nested tuples included (a flattened mesh
/// axis), up to a small depth.
fn product(nodes: &[Node], node: Option<&Node>, depth: usize) -> Option<u64> {
    match node? {
        Node::Int(v) => u64::try_from(*v).ok(),
        Node::Tuple(items) | Node::List(items) if depth < 4 => {
            items.iter().try_fold(1u64, |n, &id| {
                n.checked_mul(product(nodes, nodes.get(id as usize), depth + 1)?)
            })
        }
        _ => None,
    }
}

/// A tuple (or `torch.Size`, or list) of whole numbers.
fn ints(nodes: &[Node], node: Option<&Node>) -> Option<Vec<u64>> {
    let (Node::Tuple(items) | Node::List(items)) = node? else {
        return None;
    };
    items
        .iter()
        .map(|&id| match nodes.get(id as usize)? {
            Node::Int(v) => u64::try_from(*v).ok(),
            _ => None,
        })
        .collect()
}

/// The field `name` of `object`, itself an object of `class`.
fn object_field<'a>(
    nodes: &'a [Node],
    object: &Object,
    owner: &str,
    name: &str,
    class: DataClass,
) -> Result<&'a Object, String> {
    match object.field(nodes, name) {
        Some(Node::Object(inner)) if inner.class == class => Ok(inner),
        other => Err(missing(owner, name, other)),
    }
}

fn missing(owner: &str, field: &str, found: Option<&Node>) -> String {
    match found {
        None => format!("a DTensor whose {owner} has no {field}: the file is damaged"),
        Some(node) => format!(
            "a DTensor whose {owner} has {} as its {field}: the file is damaged",
            kind_of(node)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::super::state;
    use super::super::vm::{self, LIMITS};
    use super::*;

    /// The pickle of a rank file of fixtures/dtensor/ (stored uncompressed, as torch.save
    /// stores every member).
    fn data_pkl(case: &str, file: &str) -> Vec<u8> {
        let path = format!(
            "{}/fixtures/dtensor/{case}/{file}",
            env!("CARGO_MANIFEST_DIR")
        );
        let bytes = std::fs::read(&path).unwrap();
        let handle = std::fs::File::open(&path).unwrap();
        let members = crate::format::zip::directory(&handle, bytes.len() as u64).unwrap();
        let pkl = members
            .iter()
            .find(|m| m.name.ends_with("/data.pkl"))
            .unwrap();
        let start = pkl.data_start as usize;
        bytes[start..start + pkl.size as usize].to_vec()
    }

    #[test]
    fn a_rank_files_dtensors_give_their_blocks_placements_and_mesh_place() {
        let bytes = data_pkl("mesh2x2", "model_world_size_4_rank_3.pt");
        let pickled = vm::run(&bytes, LIMITS).unwrap();
        let held = state::holdings(&pickled).unwrap();
        let names: Vec<&str> = held
            .tensors
            .iter()
            .map(|(n, _)| n.as_deref().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "grid",
                "cols",
                "nested",
                "bf16",
                "everywhere",
                "zero_d",
                "plain"
            ]
        );
        // Every value but the plain tensor is a DTensor; the mesh's own rank map (a tensor
        // inside the DeviceMesh) is not a tensor of the state dict.
        assert_eq!(held.distributed.len(), 6);
        let (at, grid) = &held.distributed[0];
        assert_eq!(*at, 0);
        assert_eq!(
            *grid,
            Distributed {
                shape: vec![5, 3],
                placements: vec![Spread::Shard(0), Spread::Shard(1)],
                mesh: vec![2, 2],
                coordinate: vec![1, 1],
                rank: 3,
            }
        );
        assert_eq!(held.tensors[0].1.shape, [2, 1]);
        let (_, zero_d) = &held.distributed[5];
        assert_eq!(zero_d.shape, Vec::<u64>::new());
        assert_eq!(zero_d.placements, [Spread::Replicate, Spread::Replicate]);
    }

    #[test]
    fn a_partial_placement_is_an_unreadable_tensor_naming_it() {
        let bytes = data_pkl("bad_partial", "model_world_size_2_rank_1.pt");
        let held = state::holdings(&vm::run(&bytes, LIMITS).unwrap()).unwrap();
        let (name, why) = &held.unreadable[0];
        assert_eq!(name, "sum");
        assert!(why.contains("Partial placement"), "{why}");
        assert_eq!(held.tensors.len(), 4);
    }

    #[test]
    fn damaged_dtensor_pickles_never_panic() {
        // Every byte of the pickle changed in turn, to a few values: a fault, a refusal, an
        // unreadable tensor or a different value, never a panic.
        let bytes = data_pkl("fsdp2_ws2", "model_world_size_2_rank_0.pt");
        for at in 0..bytes.len() {
            for value in [0u8, 0xff] {
                let mut damaged = bytes.clone();
                damaged[at] = value;
                if let Ok(pickled) = vm::run(&damaged, LIMITS) {
                    let _ = state::holdings(&pickled);
                }
            }
        }
    }
}
