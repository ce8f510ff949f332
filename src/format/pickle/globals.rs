//! The globals a checkpoint's pickle may name, and what "calling" each builds. This is the
//! allowlist of torch's `_weights_only_unpickler._get_allowed_globals`, less what only code
//! could use (user-allowed globals, numpy rebuilders), and every entry is data: a name is
//! never imported, a function never run. The globals and the values they build are
//! `super::value`'s types; a call reads its arguments from the arena of nodes it is given.

use super::classes::DataClass;
use super::value::{
    Arena, Global, Id, Items, Node, Object, Rebuild, Step, Storage, TensorRecord, TorchDtype,
    damaged, kind_of, refused,
};

/// Modules whose names are refused with the reason that they run code.
const CODE_MODULES: &[&str] = &[
    "os",
    "posix",
    "nt",
    "sys",
    "subprocess",
    "builtins",
    "__builtin__",
    "runpy",
    "importlib",
    "pickle",
    "shutil",
    "socket",
    "pty",
    "code",
    "ctypes",
    "operator",
    "functools",
    "types",
    "webbrowser",
];

/// The global `module.name`, if it is allowed; a refusal naming it otherwise.
pub fn resolve(module: &str, name: &str) -> Step<Global> {
    // Python 2's module names, as torch maps them.
    let module = match module {
        "__builtin__" => "builtins",
        other => other,
    };
    if let Some(class) = DataClass::resolve(module, name) {
        return Ok(Global::Class(class));
    }
    let global = match (module, name) {
        ("copyreg" | "copy_reg", "_reconstructor") => Some(Global::Reconstructor),
        ("copyreg" | "copy_reg", "__newobj__") => Some(Global::NewObjFn),
        ("copyreg" | "copy_reg", "__newobj_ex__") => Some(Global::NewObjExFn),
        ("builtins", "object") => Some(Global::ObjectClass),
        ("collections", "OrderedDict") => Some(Global::OrderedDict),
        ("collections", "Counter") => Some(Global::Counter),
        ("builtins", "set") => Some(Global::Set),
        ("builtins", "bytearray") => Some(Global::ByteArray),
        ("builtins", "complex") => Some(Global::Complex),
        ("_codecs", "encode") => Some(Global::Encode),
        ("torch", "Size") => Some(Global::Size),
        ("torch", "device") => Some(Global::Device),
        ("torch", "Tensor") | ("torch._tensor", "Tensor") => Some(Global::TensorClass),
        ("torch.nn.parameter", "Parameter") => Some(Global::Parameter),
        ("torch.serialization", "_get_layout") => Some(Global::Layout),
        (
            "torch",
            "per_tensor_affine"
            | "per_tensor_symmetric"
            | "per_channel_affine"
            | "per_channel_symmetric"
            | "per_channel_affine_float_qparams",
        ) => Some(Global::QScheme),
        ("torch", "UntypedStorage") | ("torch.storage", "UntypedStorage") => {
            Some(Global::StorageClass(None))
        }
        ("torch" | "torch.cuda", storage) if storage.ends_with("Storage") => {
            TorchDtype::from_storage_name(storage).map(|d| Global::StorageClass(Some(d)))
        }
        ("torch", dtype) => TorchDtype::from_name(dtype).map(Global::Dtype),
        ("torch._utils", function) => rebuild(function).map(Global::Rebuild),
        ("torch._tensor", "_rebuild_from_type_v2") => Some(Global::Rebuild(Rebuild::FromTypeV2)),
        _ => None,
    };
    if let Some(global) = global {
        return Ok(global);
    }
    let path = format!("{module}.{name}");
    let shown = crate::messages::excerpt(&path);
    if module.starts_with("torch.distributed") {
        return refused(format!(
            "the pickle names {shown}, a class of torch.distributed that tjoin does not read: \
             it reads DTensors (Shard and Replicate placements) and DCP's metadata; save the \
             state dict with full tensors (`tensor.full_tensor()`), or with \
             torch.distributed.checkpoint"
        ));
    }
    if module == "deepspeed" || module.starts_with("deepspeed.") {
        return refused(format!(
            "the pickle names {shown}, a class of DeepSpeed that tjoin does not read: it reads \
             the records of a ZeRO checkpoint (LossScaler, DynamicLossScaler, ZeroStageEnum, \
             fragment_address) and nothing else of DeepSpeed; convert this checkpoint with \
             DeepSpeed's zero_to_fp32.py, or report the class so that it can be read as data"
        ));
    }
    if CODE_MODULES.contains(&module) || module.starts_with("os.") {
        return refused(format!(
            "the pickle calls {shown}, which a checkpoint never needs: tjoin runs no code from \
             a file; do not load this file with torch.load either"
        ));
    }
    refused(format!(
        "the pickle names the global {shown}, which is not one a state dict of tensors needs; \
         tjoin imports nothing and runs no code from a file, so it reads only tensors, dicts, \
         lists and plain values (torch.load(weights_only=True) refuses it too, unless it is \
         allowed with torch.serialization.add_safe_globals)"
    ))
}

fn rebuild(function: &str) -> Option<Rebuild> {
    Some(match function {
        "_rebuild_tensor" => Rebuild::Tensor,
        "_rebuild_tensor_v2" => Rebuild::TensorV2,
        "_rebuild_tensor_v3" => Rebuild::TensorV3,
        "_rebuild_parameter" => Rebuild::Parameter,
        "_rebuild_parameter_with_state" => Rebuild::ParameterWithState,
        "_rebuild_device_tensor_from_cpu_tensor" => Rebuild::DeviceFromCpu,
        "_rebuild_qtensor" => Rebuild::Quantized,
        "_rebuild_sparse_tensor" | "_rebuild_sparse_csr_tensor" => Rebuild::Sparse,
        "_rebuild_meta_tensor_no_storage" => Rebuild::Meta,
        "_rebuild_wrapper_subclass" => Rebuild::WrapperSubclass,
        "_rebuild_device_tensor_from_numpy" => Rebuild::DeviceFromNumpy,
        _ => return None,
    })
}

/// How a global is called: `REDUCE` calls a function, `NEWOBJ` creates an instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// `REDUCE`.
    Reduce,
    /// `NEWOBJ`.
    NewObj,
}

impl Call {
    /// The call an opcode's name stands for.
    pub fn from_opcode(op: &str) -> Call {
        if op == "NEWOBJ" {
            Call::NewObj
        } else {
            Call::Reduce
        }
    }
}

/// What calling `global` with `args` builds. What it builds from a container shares the
/// container's items rather than copying them (the machine counts what is not shared).
pub(super) fn call(nodes: &[Node], global: Global, args_rc: Items, how: Call) -> Step<Node> {
    let path = global.path();
    let args: &[Id] = &args_rc;
    let arg = |i: usize| argument(nodes, args, i, &path);
    match global {
        Global::OrderedDict | Global::Counter => match args {
            [] => Ok(Node::Dict(Default::default())),
            [items] => match nodes.node(*items) {
                Node::Dict(entries) => Ok(Node::Dict(entries.clone())),
                Node::List(items) if items.is_empty() => Ok(Node::Dict(Default::default())),
                other => refused(format!(
                    "{path} is called with {}, where tjoin reads only a dict",
                    kind_of(other)
                )),
            },
            _ => damaged(format!("{path} is called with {} arguments", args.len())),
        },
        Global::Set => match args {
            [] => Ok(Node::Set(Items::default())),
            [items] => match nodes.node(*items) {
                Node::List(items) | Node::Tuple(items) | Node::Set(items) => {
                    Ok(Node::Set(items.clone()))
                }
                other => refused(format!("{path} is called with {}", kind_of(other))),
            },
            _ => damaged(format!("{path} is called with {} arguments", args.len())),
        },
        Global::ByteArray => match args {
            [] => Ok(Node::Bytes(Default::default())),
            [bytes] => match nodes.node(*bytes) {
                Node::Bytes(bytes) => Ok(Node::Bytes(bytes.clone())),
                other => refused(format!("{path} is called with {}", kind_of(other))),
            },
            _ => damaged(format!("{path} is called with {} arguments", args.len())),
        },
        Global::Complex => call_complex(nodes, args, &path),
        Global::Encode => call_encode(nodes, args, &path),
        Global::Size => match args {
            [] => Ok(Node::Tuple(Items::default())),
            [dims] => match nodes.node(*dims) {
                Node::Tuple(dims) | Node::List(dims) => Ok(Node::Tuple(dims.clone())),
                other => refused(format!("{path} is called with {}", kind_of(other))),
            },
            _ => damaged(format!("{path} is called with {} arguments", args.len())),
        },
        Global::Device => call_device(nodes, args, &path),
        Global::Parameter if how == Call::NewObj => match arg(0)? {
            tensor @ (Node::Tensor(_) | Node::Unreadable(_)) => Ok(tensor.clone()),
            other => refused(format!(
                "{path} is created from {}, not a tensor",
                kind_of(other)
            )),
        },
        Global::Rebuild(rebuild) => call_rebuild(nodes, rebuild, args, &path),
        Global::Class(class) => Ok(object(class, args_rc, Default::default())),
        Global::NewObjFn => match args.split_first() {
            Some((&class, rest)) => new_object(nodes, class, rest.to_vec().into(), None, &path),
            None => damaged(format!("{path} is called without a class")),
        },
        Global::NewObjExFn => match args {
            [class, args, kwargs] => {
                let Node::Tuple(args) = nodes.node(*args) else {
                    return damaged(format!("{path} is given arguments that are not a tuple"));
                };
                new_object(nodes, *class, args.clone(), Some(*kwargs), &path)
            }
            _ => damaged(format!("{path} is called with {} arguments", args.len())),
        },
        Global::Reconstructor => call_reconstructor(nodes, args, &path),
        // `_get_layout('torch.sparse_coo')`: only a sparse tensor names a layout.
        Global::Layout => Ok(Node::Unreadable(SPARSE.into())),
        Global::TensorClass
        | Global::Parameter
        | Global::Dtype(_)
        | Global::StorageClass(_)
        | Global::ObjectClass
        | Global::QScheme => refused(format!(
            "the pickle calls {path} with {} (by {}), which torch.save never writes",
            match args.len() {
                1 => "1 argument".to_string(),
                n => format!("{n} arguments"),
            },
            match how {
                Call::Reduce => "REDUCE",
                Call::NewObj => "NEWOBJ",
            }
        )),
    }
}

/// The call's argument `i`.
fn argument<'a>(nodes: &'a [Node], args: &[Id], i: usize, path: &str) -> Step<&'a Node> {
    match args.get(i) {
        Some(&id) => Ok(nodes.node(id)),
        None => damaged(format!(
            "{path} is called with {} arguments, too few",
            args.len()
        )),
    }
}

/// `complex(re, im)`.
fn call_complex(nodes: &[Node], args: &[Id], path: &str) -> Step<Node> {
    let part = |node: &Node| match *node {
        Node::Float(v) => Some(v),
        Node::Int(v) => Some(v as f64),
        _ => None,
    };
    let re = args.first().map_or(Some(0.0), |&a| part(nodes.node(a)));
    let im = args.get(1).map_or(Some(0.0), |&a| part(nodes.node(a)));
    match (re, im) {
        (Some(re), Some(im)) if args.len() <= 2 => Ok(Node::Complex(re, im)),
        _ => refused(format!(
            "{path} is called with arguments other than numbers"
        )),
    }
}

/// `encode(text, encoding)`, as the pickle of a `bytes` object calls it.
fn call_encode(nodes: &[Node], args: &[Id], path: &str) -> Step<Node> {
    // `encode(text, 'latin1')`: each character below 256 is one byte.
    let Node::Str(text) = argument(nodes, args, 0, path)? else {
        return refused(format!("{path} is called on something other than a string"));
    };
    let encoding = match args.get(1).map(|&a| nodes.node(a)) {
        Some(Node::Str(e)) => e.to_ascii_lowercase().replace('-', ""),
        None => "utf8".to_string(),
        Some(_) => {
            return refused(format!("{path} is given an encoding that is not a name"));
        }
    };
    match encoding.as_str() {
        "latin1" | "latin" | "iso88591" => {
            let bytes: Option<Vec<u8>> = text
                .chars()
                .map(|c| u8::try_from(u32::from(c)).ok())
                .collect();
            match bytes {
                Some(bytes) => Ok(Node::Bytes(bytes.into())),
                None => damaged(format!("{path} is given text that latin-1 cannot encode")),
            }
        }
        "utf8" => Ok(Node::Bytes(text.as_bytes().into())),
        _ => refused(format!(
            "{path} is asked for the encoding {}; a pickle of bytes uses latin1",
            crate::messages::excerpt(&encoding)
        )),
    }
}

/// `torch.device(name, index)`: the device's name.
fn call_device(nodes: &[Node], args: &[Id], path: &str) -> Step<Node> {
    let name = match argument(nodes, args, 0, path)? {
        Node::Str(name) => name.to_string(),
        other => return refused(format!("{path} is called with {}", kind_of(other))),
    };
    match args.get(1).map(|&a| nodes.node(a)) {
        None => Ok(Node::Str(name.into())),
        Some(Node::Int(index)) => Ok(Node::Str(format!("{name}:{index}").into())),
        Some(other) => refused(format!("{path} is given {} as an index", kind_of(other))),
    }
}

/// `copyreg._reconstructor(cls, object, None)`: `object.__new__(cls)`.
fn call_reconstructor(nodes: &[Node], args: &[Id], path: &str) -> Step<Node> {
    match args {
        // `_reconstructor(cls, object, None)`: `object.__new__(cls)`.
        [class, base, state] => {
            if nodes.node(*base) != &Node::Global(Global::ObjectClass) {
                return refused(format!(
                    "{path} creates an instance from {}, where tjoin reads only \
                     builtins.object",
                    kind_of(nodes.node(*base))
                ));
            }
            if nodes.node(*state) != &Node::None {
                return refused(format!(
                    "{path} is given {} to create an instance from, where tjoin reads \
                     only None",
                    kind_of(nodes.node(*state))
                ));
            }
            new_object(nodes, *class, Items::default(), None, path)
        }
        _ => damaged(format!("{path} is called with {} arguments", args.len())),
    }
}

/// A record of an instance of `class`, sharing its arguments' items.
fn object(class: DataClass, args: Items, kwargs: super::value::Entries) -> Node {
    Node::Object(Box::new(Object {
        class,
        args,
        kwargs,
        state: None,
    }))
}

/// What `NEWOBJ_EX` (and `copyreg.__newobj__`, `__newobj_ex__`) create: an instance of an
/// allowed class, `kwargs` a dict if given.
pub(super) fn new_object(
    nodes: &[Node],
    class: Id,
    args: Items,
    kwargs: Option<Id>,
    path: &str,
) -> Step<Node> {
    let Node::Global(Global::Class(class)) = *nodes.node(class) else {
        return refused(format!(
            "{path} creates an instance of {}, which is not one of the data classes tjoin reads",
            kind_of(nodes.node(class))
        ));
    };
    let kwargs = match kwargs.map(|id| nodes.node(id)) {
        None => Default::default(),
        Some(Node::Dict(entries)) => entries.clone(),
        Some(other) => {
            return damaged(format!(
                "{path} is given {} as keyword arguments, not a dict",
                kind_of(other)
            ));
        }
    };
    Ok(object(class, args, kwargs))
}

fn call_rebuild(nodes: &[Node], rebuild: Rebuild, args: &[Id], path: &str) -> Step<Node> {
    let unreadable = |what: &str| Ok(Node::Unreadable(what.into()));
    match rebuild {
        Rebuild::Tensor | Rebuild::TensorV2 => tensor(nodes, args, None, path),
        Rebuild::TensorV3 => {
            let dtype = match args.get(6).map(|&a| nodes.node(a)) {
                Some(Node::Global(Global::Dtype(dtype))) => *dtype,
                Some(other) => {
                    return refused(format!(
                        "{path} is given {} where its dtype belongs",
                        kind_of(other)
                    ));
                }
                None => return damaged(format!("{path} is called without a dtype")),
            };
            tensor(nodes, args, Some(dtype), path)
        }
        Rebuild::Parameter | Rebuild::ParameterWithState | Rebuild::DeviceFromCpu => {
            match args.first().map(|&a| nodes.node(a)) {
                Some(node @ (Node::Tensor(_) | Node::Unreadable(_))) => {
                    let node = node.clone();
                    if rebuild == Rebuild::DeviceFromCpu
                        && let (Node::Tensor(t), Some(Node::Global(Global::Dtype(d)))) =
                            (&node, args.get(1).map(|&a| nodes.node(a)))
                        && t.dtype != *d
                    {
                        return refused(format!(
                            "{path} converts a {} tensor to {}, which tjoin does not do on \
                             reading",
                            t.dtype.name(),
                            d.name()
                        ));
                    }
                    Ok(node)
                }
                Some(other) => refused(format!(
                    "{path} is given {} where a tensor belongs",
                    kind_of(other)
                )),
                None => damaged(format!("{path} is called without arguments")),
            }
        }
        Rebuild::FromTypeV2 => from_type_v2(nodes, args, path),
        Rebuild::Quantized => unreadable(
            "a quantized tensor, which safetensors and numpy have no type for; dequantize it \
             (tensor.dequantize()) and save it again",
        ),
        Rebuild::Sparse => {
            unreadable("a sparse tensor; save it dense (tensor.to_dense()) to read it with tjoin")
        }
        Rebuild::Meta => unreadable("a tensor on the meta device, which holds no data"),
        Rebuild::WrapperSubclass => unreadable(
            "a tensor subclass (torch._utils._rebuild_wrapper_subclass), whose data is not a \
             plain storage",
        ),
        Rebuild::DeviceFromNumpy => {
            unreadable("a tensor stored as a numpy array, which needs numpy's code to rebuild")
        }
    }
}

/// `torch._tensor._rebuild_from_type_v2(func, new_type, args, state)`: a tensor of class
/// `new_type` (a plain tensor, a parameter, a DTensor) that `func` rebuilds from `args`.
fn from_type_v2(nodes: &[Node], args: &[Id], path: &str) -> Step<Node> {
    // (func, new_type, args, state): a tensor of class new_type with attributes.
    let (Some(&func), Some(&new_type), Some(&inner)) = (args.first(), args.get(1), args.get(2))
    else {
        return damaged(format!("{path} is called with {} arguments", args.len()));
    };
    match nodes.node(new_type) {
        Node::Global(Global::TensorClass | Global::Parameter) => {}
        // A DTensor: `_rebuild_wrapper_subclass`'s arguments, and the local tensor and
        // spec in its state, recorded for `super::dtensor` to read.
        Node::Global(Global::Class(DataClass::DTensor)) => {
            let Node::Tuple(inner_args) = nodes.node(inner) else {
                return damaged(format!("{path} is given arguments that are not a tuple"));
            };
            let Some(&state) = args.get(3) else {
                return damaged(format!("{path} makes a DTensor without its state"));
            };
            return Ok(Node::Object(Box::new(Object {
                class: DataClass::DTensor,
                args: inner_args.clone(),
                kwargs: Default::default(),
                state: Some(state),
            })));
        }
        other => {
            return refused(format!(
                "{path} makes a tensor of class {}, where tjoin reads torch.Tensor and \
                 torch.nn.Parameter",
                kind_of(other)
            ));
        }
    }
    let Node::Global(Global::Rebuild(inner_rebuild)) = *nodes.node(func) else {
        return refused(format!(
            "{path} rebuilds its tensor with {}, not one of torch's rebuild functions",
            kind_of(nodes.node(func))
        ));
    };
    let Node::Tuple(inner_args) = nodes.node(inner).clone() else {
        return damaged(format!("{path} is given arguments that are not a tuple"));
    };
    if inner_rebuild == Rebuild::FromTypeV2 {
        return refused(format!("{path} calls itself"));
    }
    call_rebuild(nodes, inner_rebuild, &inner_args, path)
}

/// A tensor record from `(storage, offset, size, stride, ...)`; `dtype` given by
/// `_rebuild_tensor_v3`, else the storage class's.
fn tensor(nodes: &[Node], args: &[Id], dtype: Option<TorchDtype>, path: &str) -> Step<Node> {
    if args.len() < 4 {
        return damaged(format!(
            "{path} is called with {} arguments, too few",
            args.len()
        ));
    }
    let storage = match nodes.node(args[0]) {
        Node::Storage(storage) => (**storage).clone(),
        other => {
            return refused(format!(
                "{path} is given {} where a storage belongs",
                kind_of(other)
            ));
        }
    };
    let offset = match nodes.node(args[1]) {
        Node::Int(v) => u64::try_from(*v)
            .or_else(|_| damaged(format!("{path} is given the storage offset {v}")))?,
        other => {
            return damaged(format!(
                "{path} is given {} as a storage offset",
                kind_of(other)
            ));
        }
    };
    let shape = dims(nodes, args[2], path, "size")?;
    let stride = dims(nodes, args[3], path, "stride")?;
    if shape.len() != stride.len() {
        return damaged(format!(
            "{path} is given {} sizes and {} strides",
            shape.len(),
            stride.len()
        ));
    }
    let dtype = match (dtype, storage.dtype) {
        (Some(dtype), _) | (None, Some(dtype)) => dtype,
        (None, None) => {
            return refused(format!(
                "{path} rebuilds a tensor from an untyped storage without saying its dtype"
            ));
        }
    };
    if let (Some(given), Some(stored)) = (Some(dtype), storage.dtype)
        && given != stored
    {
        return refused(format!(
            "{path} reads a storage of {} as {}, which torch.save never writes",
            stored.name(),
            given.name()
        ));
    }
    Ok(Node::Tensor(Box::new(TensorRecord {
        storage,
        dtype,
        offset,
        shape,
        stride,
    })))
}

/// A size or stride: a tuple (or `torch.Size`) of whole numbers.
fn dims(nodes: &[Node], id: Id, path: &str, what: &str) -> Step<Vec<u64>> {
    let Node::Tuple(items) = nodes.node(id) else {
        return damaged(format!(
            "{path} is given {} as its {what}",
            kind_of(nodes.node(id))
        ));
    };
    if items.len() > crate::format::MAX_RANK {
        return refused(format!(
            "{path} is given a {what} of {} dimensions; tjoin reads at most {}",
            items.len(),
            crate::format::MAX_RANK
        ));
    }
    items
        .iter()
        .map(|&item| match nodes.node(item) {
            Node::Int(v) => u64::try_from(*v).or_else(|_| {
                let why = if *v < 0 {
                    "below zero"
                } else {
                    "beyond 64 bits"
                };
                refused(format!("{path} is given the {what} {v}, {why}"))
            }),
            other => damaged(format!("{path} is given {} in its {what}", kind_of(other))),
        })
        .collect()
}

const SPARSE: &str = "a sparse tensor; save it dense (tensor.to_dense()) to read it with tjoin";

/// What `BINPERSID` loads: `('storage', TYPE, KEY, LOCATION, NUMEL[, VIEW])`.
pub(super) fn persistent_load(nodes: &[Node], pid: Id) -> Step<Storage> {
    let Node::Tuple(fields) = nodes.node(pid) else {
        return refused(format!(
            "the persistent ID is {}, where torch.save writes a tuple naming a storage",
            kind_of(nodes.node(pid))
        ));
    };
    let field = |i: usize| fields.get(i).map(|&id| nodes.node(id));
    let is_storage = match field(0) {
        Some(Node::Str(s)) => &**s == "storage",
        Some(Node::Bytes(b)) => &**b == b"storage",
        _ => false,
    };
    if !is_storage {
        return refused("the persistent ID names something other than a storage");
    }
    if fields.len() != 5 && fields.len() != 6 {
        return damaged(format!(
            "the persistent ID of a storage has {} fields, not 5 (or 6, legacy)",
            fields.len()
        ));
    }
    let dtype = match field(1) {
        Some(Node::Global(Global::StorageClass(dtype))) => *dtype,
        Some(other) => {
            return refused(format!(
                "the persistent ID gives {} as its storage class",
                kind_of(other)
            ));
        }
        None => None,
    };
    let text = |node: Option<&Node>, what: &str| -> Step<Box<str>> {
        match node {
            Some(Node::Str(s)) => Ok(s.as_ref().into()),
            Some(Node::Int(i)) => Ok(i.to_string().into()),
            Some(Node::Bytes(b)) => Ok(String::from_utf8_lossy(b).into()),
            other => damaged(format!(
                "the persistent ID's {what} is {}",
                other.map_or("missing".to_string(), kind_of)
            )),
        }
    };
    let key = text(field(2), "key")?;
    let location = text(field(3), "location")?;
    let numel = match field(4) {
        Some(Node::Int(n)) => u64::try_from(*n)
            .or_else(|_| damaged(format!("the storage {key} holds {n} elements")))?,
        other => {
            return damaged(format!(
                "the persistent ID's element count is {}",
                other.map_or("missing".to_string(), kind_of)
            ));
        }
    };
    // The legacy form's view of a storage: (view_key, offset, size) or None.
    let (mut view_offset, mut view_numel) = (0, numel);
    match field(5) {
        None | Some(Node::None) => {}
        Some(Node::Tuple(view)) => {
            let ints: Vec<Option<u64>> = view
                .iter()
                .map(|&v| match nodes.node(v) {
                    Node::Int(i) => u64::try_from(*i).ok(),
                    _ => None,
                })
                .collect();
            match ints.as_slice() {
                [_, Some(offset), Some(size)] => {
                    if offset.checked_add(*size).is_none_or(|end| end > numel) {
                        return damaged(format!(
                            "a view of storage {key} reaches past its {numel} elements"
                        ));
                    }
                    (view_offset, view_numel) = (*offset, *size);
                }
                _ => return damaged("a storage view is not (key, offset, size)"),
            }
        }
        Some(other) => {
            return damaged(format!(
                "the persistent ID's view is {}, not a tuple",
                kind_of(other)
            ));
        }
    }
    Ok(Storage {
        dtype,
        key,
        location,
        numel,
        view_offset,
        view_numel,
    })
}
