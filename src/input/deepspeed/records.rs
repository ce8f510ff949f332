//! The records of a DeepSpeed ZeRO checkpoint's files, read from their pickles as data: the
//! model states (`module`, `buffer_names`, `param_shapes`, `frozen_param_shapes`,
//! `frozen_param_fragments`, `shared_params`) and the optimizer states (`zero_stage`,
//! `partition_count`, the flat fp32 partitions and their paddings). Tensors are located (where
//! their bytes lie in the file), never read; the optimizer's moments are not even located.

use crate::dtype::DType;
use crate::format::pickle::Saved;
use crate::format::pickle::classes::DataClass;
use crate::format::pickle::value::{Node, TensorRecord, kind_of};
use crate::messages::{excerpt, shape_text};

/// A tensor of a file, located: C-contiguous elements from `start`.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    /// Its element type.
    pub dtype: DType,
    /// Its shape.
    pub shape: Vec<u64>,
    /// Where its first element lies in the file, in bytes.
    pub start: u64,
}

impl Stored {
    /// How many elements it has.
    pub fn numel(&self) -> u64 {
        self.shape.iter().product()
    }
}

/// What a model-states file (`mp_rank_00_model_states.pt`, or a stage-3 rank's
/// `zero_pp_rank_R_mp_rank_00_model_states.pt`) records.
#[derive(Debug, Default)]
pub struct ModelStates {
    /// `module`: the model's state dict as the rank held it (stage 3: placeholders but for
    /// the buffers), by name in its order.
    pub module: Vec<(String, Stored)>,
    /// Tensors of `module` tjoin cannot locate (not C-contiguous, another element type), and
    /// why: refused only if one is needed.
    pub unlocated: Vec<(String, String)>,
    /// `buffer_names`: the persistent buffers' names.
    pub buffer_names: Vec<String>,
    /// `param_shapes`: each parameter group's trained parameters, in their flat order.
    pub param_shapes: Vec<Vec<(String, Vec<u64>)>>,
    /// `frozen_param_shapes` (stages 2 and 3; `None` when not saved).
    pub frozen_shapes: Option<Vec<(String, Vec<u64>)>>,
    /// `frozen_param_fragments`: stage 2's whole frozen parameters, stage 3's rank's parts.
    pub frozen_fragments: Vec<(String, Stored)>,
    /// `shared_params`: each tied name and the name whose tensor it is.
    pub shared: Vec<(String, String)>,
    /// What the file holds that the output leaves out, for `--dry-run`.
    pub left_out: Vec<String>,
    /// `ds_version`.
    pub version: Option<String>,
}

/// What an optimizer-states file (`zero_pp_rank_R_mp_rank_00_optim_states.pt`) records.
#[derive(Debug)]
pub struct OptimStates {
    /// `zero_stage`: 1, 2 or 3.
    pub stage: u64,
    /// `partition_count`: the data-parallel world size (the largest, when a list).
    pub partition_count: u64,
    /// The rank's flat fp32 partition of each group (`single_partition_of_fp32_groups` at
    /// stages 1 and 2, `fp32_flat_groups` at stage 3).
    pub groups: Vec<Stored>,
    /// `param_alignment_paddings`: per group, the padding after each parameter (newer
    /// DeepSpeed; `None` when not saved).
    pub alignment: Option<Vec<Vec<u64>>>,
    /// `group_paddings` (stages 1 and 2): the padding each group's partition on this rank was
    /// saved without; `None` when not saved.
    pub paddings: Option<Vec<u64>>,
    /// What the file holds that the output leaves out, for `--dry-run`.
    pub left_out: Vec<String>,
}

/// The value of `key` in the dict `node`, the later of two entries winning, as in Python.
fn get<'a>(saved: &'a Saved, node: &'a Node, key: &str) -> Option<&'a Node> {
    let Node::Dict(entries) = node else {
        return None;
    };
    entries
        .iter()
        .rev()
        .find(|&&(k, _)| matches!(saved.pickled.node(k), Node::Str(s) if &**s == key))
        .map(|&(_, v)| saved.pickled.node(v))
}

/// The entries of a dict whose keys are strings.
fn entries<'a>(
    saved: &'a Saved,
    node: &'a Node,
    what: &str,
) -> Result<Vec<(String, &'a Node)>, String> {
    let Node::Dict(entries) = node else {
        return Err(format!("{what} is {}, not a dict", kind_of(node)));
    };
    entries
        .iter()
        .map(|&(k, v)| match saved.pickled.node(k) {
            Node::Str(key) => Ok((key.to_string(), saved.pickled.node(v))),
            other => Err(format!("{what} has a key that is {}", kind_of(other))),
        })
        .collect()
}

fn items<'a>(saved: &'a Saved, node: &'a Node, what: &str) -> Result<Vec<&'a Node>, String> {
    match node {
        Node::List(items) | Node::Tuple(items) => {
            Ok(items.iter().map(|&i| saved.pickled.node(i)).collect())
        }
        other => Err(format!("{what} is {}, not a list", kind_of(other))),
    }
}

fn number(saved: &Saved, node: &Node, what: &str) -> Result<u64, String> {
    match node {
        Node::Int(n) => u64::try_from(*n).map_err(|_| format!("{what} is {n}")),
        Node::Object(o) if o.class == DataClass::ZeroStageEnum => {
            match o.field(&saved.pickled.nodes[..], "value") {
                Some(value) => number(saved, value, what),
                None => Err(format!("{what} is a ZeroStageEnum without a value")),
            }
        }
        other => Err(format!("{what} is {}, not a number", kind_of(other))),
    }
}

fn numbers(saved: &Saved, node: &Node, what: &str) -> Result<Vec<u64>, String> {
    items(saved, node, what)?
        .into_iter()
        .map(|n| number(saved, n, what))
        .collect()
}

fn text(node: &Node, what: &str) -> Result<String, String> {
    match node {
        Node::Str(s) => Ok(s.to_string()),
        other => Err(format!("{what} is {}, not a string", kind_of(other))),
    }
}

/// The most elements a recorded shape may have: 2^56 (256 PiB of float32), far beyond any
/// model, and small enough that sums of a few thousand such sizes cannot overflow.
const MAX_NUMEL: u64 = 1 << 56;

/// `name -> shape` entries (`param_shapes[g]`, `frozen_param_shapes`), each of at most
/// [`crate::format::MAX_RANK`] dimensions and [`MAX_NUMEL`] elements.
fn shapes(saved: &Saved, node: &Node, what: &str) -> Result<Vec<(String, Vec<u64>)>, String> {
    entries(saved, node, what)?
        .into_iter()
        .map(|(name, shape)| {
            let of = format!("the shape of `{}` in {what}", excerpt(&name));
            let shape = numbers(saved, shape, &of)?;
            let numel = shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d));
            if shape.len() > crate::format::MAX_RANK || numel.is_none_or(|n| n > MAX_NUMEL) {
                return Err(format!(
                    "{of} is {}: {} dimensions, more elements than tjoin reads ({MAX_NUMEL})",
                    crate::messages::excerpt(&shape_text(&shape)),
                    shape.len()
                ));
            }
            Ok((name, shape))
        })
        .collect()
}

/// Locates the tensor `node` (`what` names it in messages): C-contiguous, little-endian, its
/// bytes within its storage's member.
pub fn locate(saved: &Saved, node: &Node, what: &str) -> Result<Stored, String> {
    let Node::Tensor(record) = node else {
        return Err(format!("{what} is {}, not a tensor", kind_of(node)));
    };
    locate_record(saved, record, what)
}

fn locate_record(saved: &Saved, record: &TensorRecord, what: &str) -> Result<Stored, String> {
    let Some(dtype) = record.dtype.dtype() else {
        return Err(format!(
            "{what} is a {} tensor, which tjoin does not read",
            record.dtype.name()
        ));
    };
    if saved.big_endian {
        return Err(format!(
            "{what} is stored big-endian, which DeepSpeed never writes"
        ));
    }
    let numel = record
        .shape
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d))
        .ok_or_else(|| format!("{what} has a shape whose size overflows"))?;
    let mut expected = 1u64;
    for (&dim, &stride) in record.shape.iter().zip(&record.stride).rev() {
        if dim > 1 && stride != expected {
            return Err(format!(
                "{what} is a view of shape {} with strides {}, not a contiguous tensor",
                shape_text(&record.shape),
                shape_text(&record.stride)
            ));
        }
        expected = expected.saturating_mul(dim);
    }
    let key = &*record.storage.key;
    let Some((start, size)) = saved.storage(key) else {
        return Err(format!(
            "{what} lies in the storage {}, which the file does not hold",
            excerpt(key)
        ));
    };
    if saved.is_compressed(key) {
        return Err(format!(
            "{what} lies in a compressed member, which cannot be read in place"
        ));
    }
    let item = dtype.itemsize();
    let end = record
        .offset
        .checked_add(numel)
        .and_then(|e| e.checked_mul(item));
    if end.is_none_or(|e| e > size) || record.storage.numel.checked_mul(item) != Some(size) {
        return Err(format!(
            "{what} claims elements {} to {} of a storage of {size} bytes; the file is damaged",
            record.offset,
            record.offset.saturating_add(numel)
        ));
    }
    Ok(Stored {
        dtype,
        shape: record.shape.clone(),
        start: start + record.offset * item,
    })
}

/// The keys of a model-states file that the output is made from; the others are left out.
const MODEL_KEYS: &[&str] = &[
    "module",
    "buffer_names",
    "param_shapes",
    "frozen_param_shapes",
    "frozen_param_fragments",
    "shared_params",
    "ds_version",
];

/// Reads a model-states file's records.
pub fn model_states(saved: &Saved) -> Result<ModelStates, String> {
    let root = saved.pickled.node(saved.pickled.root);
    let top = entries(saved, root, "the file's pickle")?;
    let mut states = ModelStates::default();
    let Some(module) = get(saved, root, "module") else {
        return Err("it has no `module` entry: it is not a DeepSpeed model-states file".into());
    };
    for (name, value) in entries(saved, module, "its `module`")? {
        let what = format!("`module` tensor `{}`", excerpt(&name));
        match locate(saved, value, &what) {
            Ok(stored) => states.module.push((name, stored)),
            Err(why) => states.unlocated.push((name, why)),
        }
    }
    states.buffer_names = match get(saved, root, "buffer_names") {
        Some(names) => items(saved, names, "its `buffer_names`")?
            .into_iter()
            .map(|n| text(n, "a name of `buffer_names`"))
            .collect::<Result<_, _>>()?,
        None => {
            return Err("it has no `buffer_names`: it is not a DeepSpeed model-states file".into());
        }
    };
    states.param_shapes = match get(saved, root, "param_shapes") {
        Some(Node::None) | None => {
            return Err(
                "its `param_shapes` is None: the model was saved without a ZeRO \
                        optimizer, so it holds no partitioned fp32 weights"
                    .into(),
            );
        }
        Some(groups) => items(saved, groups, "its `param_shapes`")?
            .into_iter()
            .enumerate()
            .map(|(g, group)| shapes(saved, group, &format!("`param_shapes[{g}]`")))
            .collect::<Result<_, _>>()?,
    };
    states.frozen_shapes = match get(saved, root, "frozen_param_shapes") {
        Some(Node::None) | None => None,
        Some(node) => Some(shapes(saved, node, "`frozen_param_shapes`")?),
    };
    if let Some(node) = get(saved, root, "frozen_param_fragments")
        && *node != Node::None
    {
        for (name, value) in entries(saved, node, "`frozen_param_fragments`")? {
            let what = format!("`frozen_param_fragments` tensor `{}`", excerpt(&name));
            states
                .frozen_fragments
                .push((name, locate(saved, value, &what)?));
        }
    }
    if let Some(node) = get(saved, root, "shared_params")
        && *node != Node::None
    {
        for (name, source) in entries(saved, node, "`shared_params`")? {
            let source = text(source, "a value of `shared_params`")?;
            states.shared.push((name, source));
        }
    }
    states.version = get(saved, root, "ds_version").and_then(|v| text(v, "").ok());
    for (key, value) in top {
        if !MODEL_KEYS.contains(&key.as_str()) && *value != Node::None {
            states.left_out.push(key);
        }
    }
    Ok(states)
}

/// Reads an optimizer-states file's records.
pub fn optim_states(saved: &Saved) -> Result<OptimStates, String> {
    let root = saved.pickled.node(saved.pickled.root);
    let Some(state) = get(saved, root, "optimizer_state_dict") else {
        return Err(
            "it has no `optimizer_state_dict`: it is not a DeepSpeed ZeRO optimizer file".into(),
        );
    };
    let stage = match get(saved, state, "zero_stage") {
        Some(node) => number(saved, node, "its `zero_stage`")?,
        None => {
            return Err(
                "its optimizer state has no `zero_stage`: it is not a ZeRO checkpoint".into(),
            );
        }
    };
    let partition_count = match get(saved, state, "partition_count") {
        Some(node @ (Node::List(_) | Node::Tuple(_))) => {
            numbers(saved, node, "its `partition_count`")?
                .into_iter()
                .max()
                .unwrap_or(0)
        }
        Some(node) => number(saved, node, "its `partition_count`")?,
        None => return Err("its optimizer state has no `partition_count`".into()),
    };
    let key = match stage {
        1 | 2 => "single_partition_of_fp32_groups",
        3 => "fp32_flat_groups",
        other => return Err(format!("its `zero_stage` is {other}, not 1, 2 or 3")),
    };
    let Some(groups) = get(saved, state, key) else {
        return Err(format!("its optimizer state has no `{key}`"));
    };
    let groups = items(saved, groups, &format!("its `{key}`"))?
        .into_iter()
        .enumerate()
        .map(|(g, node)| locate(saved, node, &format!("`{key}[{g}]`")))
        .collect::<Result<Vec<_>, _>>()?;
    for (g, group) in groups.iter().enumerate() {
        if group.dtype != DType::Float32 || group.shape.len() != 1 {
            return Err(format!(
                "`{key}[{g}]` is {} {}, where DeepSpeed saves a flat float32 vector",
                group.dtype,
                shape_text(&group.shape)
            ));
        }
    }
    let alignment = match get(saved, state, "param_alignment_paddings") {
        None | Some(Node::None) => None,
        Some(node) => Some(
            items(saved, node, "its `param_alignment_paddings`")?
                .into_iter()
                .map(|g| numbers(saved, g, "`param_alignment_paddings`"))
                .collect::<Result<_, _>>()?,
        ),
    };
    let paddings = match get(saved, state, "group_paddings") {
        None | Some(Node::None) => None,
        Some(node) => Some(numbers(saved, node, "its `group_paddings`")?),
    };
    let mut left_out = Vec::new();
    for moments in ["base_optimizer_state", "optimizer_state_dict"] {
        if get(saved, state, moments).is_some() {
            left_out.push(format!("optimizer_state_dict.{moments}"));
        }
    }
    Ok(OptimStates {
        stage,
        partition_count,
        groups,
        alignment,
        paddings,
        left_out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::pickle::vm;

    /// `{"module": {}, "buffer_names": [], "param_shapes": [{"a": SHAPE}]}`, as protocol 2
    /// pickles it, with SHAPE's pickled items.
    fn model_pickle(shape: &[u8]) -> Vec<u8> {
        let mut bytes = b"\x80\x02}(X\x06\x00\x00\x00module}X\x0c\x00\x00\x00buffer_names]\
            X\x0c\x00\x00\x00param_shapes](}X\x01\x00\x00\x00a("
            .to_vec();
        bytes.extend_from_slice(shape);
        bytes.extend_from_slice(b"tseu.");
        bytes
    }

    fn read(shape: &[u8]) -> Result<ModelStates, String> {
        let bytes = model_pickle(shape);
        let pickled = vm::run(&bytes, vm::LIMITS).unwrap_or_else(|f| panic!("{}", f.describe()));
        model_states(&Saved::records_only(pickled))
    }

    #[test]
    fn a_shape_whose_size_overflows_is_refused_not_wrapped() {
        // (7, 5) is read.
        let states = read(b"K\x07K\x05").unwrap();
        assert_eq!(states.param_shapes, [[("a".to_string(), vec![7, 5])]]);
        // (2**40, 2**40) has 2**80 elements, which a u64 product would wrap to 0.
        let huge = b"\x8a\x06\x00\x00\x00\x00\x00\x01\x8a\x06\x00\x00\x00\x00\x00\x01";
        let why = read(huge).unwrap_err();
        assert!(
            why.contains("the shape of `a` in `param_shapes[0]`")
                && why.contains("more elements than tjoin reads"),
            "{why}"
        );
    }
}
