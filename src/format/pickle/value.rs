//! The values a pickle builds, shared by the machine (`vm.rs`) and the globals it may call
//! (`globals.rs`), which import this file (it imports neither): the arena's nodes and their
//! `Id`s, storages and tensor records, the globals and torch dtypes a node may hold, and the
//! fault a step may end in. Only data and the names of data: nothing here runs a pickle or
//! decides what a global builds.

use std::rc::Rc;

use super::classes::DataClass;
use crate::dtype::DType;

/// An index into the arena of nodes.
pub type Id = u32;

/// The items of a tuple, list or set. Shared, not copied, by what makes one container from
/// another (`set(L)`, `torch.Size(t)`, a data class's arguments): a pickle that calls
/// `builtins.set` on one large list a million times holds the list once. A list changed
/// after it was shared is copied then (`Rc::make_mut`), and the copy is counted.
pub type Items = Rc<Vec<Id>>;

/// The entries of a dict, shared as [`Items`] are (`OrderedDict(d)`, keyword arguments).
pub type Entries = Rc<Vec<(Id, Id)>>;

/// One value the pickle builds.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    /// Python's `None`.
    None,
    /// `True` or `False`.
    Bool(bool),
    /// An integer that fits in 128 bits.
    Int(i128),
    /// An integer too large for 128 bits (its bytes are not kept).
    BigInt,
    /// A float.
    Float(f64),
    /// A complex number (`builtins.complex`).
    Complex(f64, f64),
    /// A text string.
    Str(Rc<str>),
    /// A byte string.
    Bytes(Rc<[u8]>),
    /// A tuple.
    Tuple(Items),
    /// A list.
    List(Items),
    /// A dict (or `collections.OrderedDict`, `collections.Counter`), its entries in the order
    /// they were set; a key set twice keeps both here and the later wins when it is read.
    Dict(Entries),
    /// A set or frozenset.
    Set(Items),
    /// One of the allowed globals, not yet called.
    Global(Global),
    /// A tensor's storage, as a persistent ID names it.
    Storage(Box<Storage>),
    /// A tensor: a view of a storage.
    Tensor(Box<TensorRecord>),
    /// An instance of one of the allowed data classes ([`DataClass`]), recorded, not built.
    Object(Box<Object>),
    /// Something a checkpoint may hold but tjoin cannot read (a quantized or sparse tensor),
    /// and why: refused if it is asked for, noted if it is skipped.
    Unreadable(Box<str>),
}

impl Node {
    /// The bytes this node holds outside its slot in the arena that no other node shares:
    /// what making it costs, counted against [`Limits::bytes`](super::vm::Limits::bytes).
    /// Items and entries shared with another node (an `Rc` held twice) cost nothing more.
    pub fn own_bytes(&self) -> u64 {
        fn items<T>(items: &Rc<Vec<T>>) -> usize {
            if Rc::strong_count(items) > 1 {
                0
            } else {
                items.capacity() * size_of::<T>()
            }
        }
        fn text<T: ?Sized>(text: &Rc<T>, len: usize) -> usize {
            if Rc::strong_count(text) > 1 { 0 } else { len }
        }
        let storage = |s: &Storage| size_of::<Storage>() + s.key.len() + s.location.len();
        let bytes = match self {
            Node::Str(s) => text(s, s.len()),
            Node::Bytes(b) => text(b, b.len()),
            Node::Tuple(i) | Node::List(i) | Node::Set(i) => items(i),
            Node::Dict(e) => items(e),
            Node::Storage(s) => storage(s),
            Node::Tensor(t) => {
                size_of::<TensorRecord>() - size_of::<Storage>()
                    + storage(&t.storage)
                    + (t.shape.capacity() + t.stride.capacity()) * size_of::<u64>()
            }
            Node::Object(o) => size_of::<Object>() + items(&o.args) + items(&o.kwargs),
            Node::Unreadable(why) => why.len(),
            Node::None
            | Node::Bool(_)
            | Node::Int(_)
            | Node::BigInt
            | Node::Float(_)
            | Node::Complex(..)
            | Node::Global(_) => 0,
        };
        bytes as u64
    }
}

/// A storage as its persistent ID `('storage', TYPE, KEY, LOCATION, NUMEL[, VIEW])` names it.
#[derive(Debug, Clone, PartialEq)]
pub struct Storage {
    /// The element type of the storage class (`torch.FloatStorage`), or `None` for
    /// `torch.UntypedStorage`, whose elements are bytes.
    pub dtype: Option<TorchDtype>,
    /// Its key: the name of its member `data/KEY` (the ZIP form) or its place among the
    /// storages after the pickle (the legacy form).
    pub key: Box<str>,
    /// The device it was saved from (`cpu`, `cuda:0`).
    pub location: Box<str>,
    /// How many elements it holds (bytes, for an untyped storage).
    pub numel: u64,
    /// For a legacy storage view: where it starts in its storage, in elements (else 0).
    pub view_offset: u64,
    /// The elements a tensor may reach from `view_offset` (`numel` but for a legacy view).
    pub view_numel: u64,
}

/// What `torch._utils._rebuild_tensor_v2` and its kin are given: a view of a storage.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorRecord {
    /// The storage its elements are in.
    pub storage: Storage,
    /// Its element type.
    pub dtype: TorchDtype,
    /// Where its first element is in the storage, in elements.
    pub offset: u64,
    /// Its shape.
    pub shape: Vec<u64>,
    /// Its strides, in elements.
    pub stride: Vec<u64>,
}

/// An instance of an allowed data class as the pickle describes it: the class, what it is
/// created with and the state `BUILD` gives it. No method of the class runs: a reader that
/// knows the class reads its fields ([`Object::field`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Object {
    /// Its class.
    pub class: DataClass,
    /// The positional arguments it is created with (an enum's value, a named tuple's fields).
    pub args: Items,
    /// The keyword arguments it is created with (`NEWOBJ_EX`), as a dict's entries.
    pub kwargs: Entries,
    /// What `BUILD` gave it: a dict of attributes, `(dict or None, slots dict)`, or what the
    /// class's `__getstate__` returns (a tuple, a list); `None` before `BUILD`.
    pub state: Option<Id>,
}

impl Object {
    /// The field `name`: from its state (attributes, then slots, then a positional state
    /// by the class's field names), else its keyword arguments, else its positional
    /// arguments by the class's field names. `None` if it has no such field.
    pub fn field<'a, A: Arena + ?Sized>(&self, nodes: &'a A, name: &str) -> Option<&'a Node> {
        let in_dict = |id: Id| -> Option<&'a Node> {
            let Node::Dict(entries) = nodes.node(id) else {
                return None;
            };
            // A key set twice: the later wins, as in Python.
            entries
                .iter()
                .rev()
                .find(|&&(key, _)| matches!(nodes.node(key), Node::Str(k) if &**k == name))
                .map(|&(_, value)| nodes.node(value))
        };
        let position = self.class.fields().iter().position(|f| *f == name);
        if let Some(state) = self.state {
            match nodes.node(state) {
                Node::Dict(_) => {
                    if let Some(value) = in_dict(state) {
                        return Some(value);
                    }
                }
                Node::Tuple(parts) if is_slotted(nodes, parts) => {
                    if let Some(value) = in_dict(parts[1]).or_else(|| in_dict(parts[0])) {
                        return Some(value);
                    }
                }
                Node::Tuple(items) | Node::List(items) => {
                    if let Some(&id) = position.and_then(|i| items.get(i)) {
                        return Some(nodes.node(id));
                    }
                }
                _ => {}
            }
        }
        let keyword = self
            .kwargs
            .iter()
            .rev()
            .find(|&&(key, _)| matches!(nodes.node(key), Node::Str(k) if &**k == name));
        if let Some(&(_, value)) = keyword {
            return Some(nodes.node(value));
        }
        position
            .and_then(|i| self.args.get(i))
            .map(|&id| nodes.node(id))
    }

    /// Its `i`th positional argument: an enum's value is the first.
    pub fn arg<'a, A: Arena + ?Sized>(&self, nodes: &'a A, i: usize) -> Option<&'a Node> {
        self.args.get(i).map(|&id| nodes.node(id))
    }
}

/// Whether a tuple state is `(dict or None, slots dict)`, what `object.__getstate__` gives
/// an instance with `__slots__`.
fn is_slotted<A: Arena + ?Sized>(nodes: &A, parts: &[Id]) -> bool {
    matches!(
        parts,
        [dict, slots] if matches!(nodes.node(*dict), Node::None | Node::Dict(_))
            && matches!(nodes.node(*slots), Node::Dict(_))
    )
}

/// The arena of nodes, indexed by `Id`: the machine's while it runs, a `Pickled`'s after.
pub trait Arena {
    /// The node at `id`.
    fn node(&self, id: Id) -> &Node;
}

impl Arena for [Node] {
    fn node(&self, id: Id) -> &Node {
        &self[id as usize]
    }
}

/// Damage (the pickle is cut short or inconsistent) or a refusal (it asks for something a
/// checkpoint never needs, or more than the limits allow).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultKind {
    /// The pickle is damaged: what is wrong.
    Damaged(String),
    /// The pickle asks for something tjoin does not do: what, and what would work.
    Refused(String),
    /// The pickle ends before it is complete (damage too, but a reader that gave the
    /// machine only the first part of a file may give it more).
    CutShort(String),
}

pub(super) type Step<T> = Result<T, FaultKind>;

pub(super) fn damaged<T>(what: impl Into<String>) -> Step<T> {
    Err(FaultKind::Damaged(what.into()))
}

pub(super) fn refused<T>(what: impl Into<String>) -> Step<T> {
    Err(FaultKind::Refused(what.into()))
}

/// A global the pickle may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Global {
    /// `collections.OrderedDict`: what `state_dict()` returns.
    OrderedDict,
    /// `collections.Counter`: a dict.
    Counter,
    /// `builtins.set`.
    Set,
    /// `builtins.bytearray`.
    ByteArray,
    /// `builtins.complex`.
    Complex,
    /// `_codecs.encode`: how protocol 2 pickles a `bytes` value (`encode(text, 'latin1')`).
    Encode,
    /// `torch.Size`: a tuple of ints.
    Size,
    /// `torch.device`: a device's name.
    Device,
    /// `torch.Tensor`, the class: named by `_rebuild_from_type_v2`.
    TensorClass,
    /// `torch.nn.parameter.Parameter`, the class.
    Parameter,
    /// A dtype: `torch.float32`.
    Dtype(TorchDtype),
    /// A storage class: `torch.FloatStorage` (`None`: `torch.UntypedStorage`).
    StorageClass(Option<TorchDtype>),
    /// A quantization scheme (`torch.per_tensor_affine`): only quantized tensors use one.
    QScheme,
    /// `torch.serialization._get_layout`: only sparse tensors use one.
    Layout,
    /// One of `torch._utils`' rebuild functions, or `torch._tensor._rebuild_from_type_v2`.
    Rebuild(Rebuild),
    /// One of the allowed data classes: calling it records an [`Object`].
    Class(DataClass),
    /// `builtins.object`: the base `copyreg._reconstructor` names; not called itself.
    ObjectClass,
    /// `copyreg._reconstructor(cls, base, state)`: how protocols 0 and 1 create an instance.
    Reconstructor,
    /// `copyreg.__newobj__(cls, *args)`: `NEWOBJ` spelled as a call.
    NewObjFn,
    /// `copyreg.__newobj_ex__(cls, args, kwargs)`: `NEWOBJ_EX` spelled as a call.
    NewObjExFn,
}

/// The functions that rebuild a tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rebuild {
    /// `_rebuild_tensor(storage, offset, size, stride)`.
    Tensor,
    /// `_rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, metadata])`.
    TensorV2,
    /// `_rebuild_tensor_v3(storage, offset, size, stride, requires_grad, hooks, dtype[, metadata])`.
    TensorV3,
    /// `_rebuild_parameter(data, requires_grad, hooks)`.
    Parameter,
    /// `_rebuild_parameter_with_state(data, requires_grad, hooks, state)`.
    ParameterWithState,
    /// `_rebuild_from_type_v2(func, new_type, args, state)`: a tensor with Python attributes.
    FromTypeV2,
    /// `_rebuild_device_tensor_from_cpu_tensor(data, dtype, device, requires_grad)`.
    DeviceFromCpu,
    /// `_rebuild_qtensor`: a quantized tensor.
    Quantized,
    /// `_rebuild_sparse_tensor`: a sparse tensor.
    Sparse,
    /// `_rebuild_meta_tensor_no_storage`: a tensor without data.
    Meta,
    /// `_rebuild_wrapper_subclass`: a tensor subclass (a nested or a DTensor's local tensor).
    WrapperSubclass,
    /// `_rebuild_device_tensor_from_numpy`: needs numpy's globals, which are refused.
    DeviceFromNumpy,
}

impl Global {
    /// Its full name, as the pickle spells it.
    pub fn path(self) -> String {
        match self {
            Global::OrderedDict => "collections.OrderedDict".to_string(),
            Global::Counter => "collections.Counter".to_string(),
            Global::Set => "builtins.set".to_string(),
            Global::ByteArray => "builtins.bytearray".to_string(),
            Global::Complex => "builtins.complex".to_string(),
            Global::Encode => "_codecs.encode".to_string(),
            Global::Size => "torch.Size".to_string(),
            Global::Device => "torch.device".to_string(),
            Global::TensorClass => "torch.Tensor".to_string(),
            Global::Parameter => "torch.nn.parameter.Parameter".to_string(),
            Global::Dtype(dtype) => format!("torch.{}", dtype.name()),
            Global::StorageClass(Some(dtype)) => format!("torch.{}", dtype.storage_name()),
            Global::StorageClass(None) => "torch.UntypedStorage".to_string(),
            Global::QScheme => "a torch quantization scheme".to_string(),
            Global::Layout => "torch.serialization._get_layout".to_string(),
            Global::Class(class) => class.path(),
            Global::ObjectClass => "builtins.object".to_string(),
            Global::Reconstructor => "copyreg._reconstructor".to_string(),
            Global::NewObjFn => "copyreg.__newobj__".to_string(),
            Global::NewObjExFn => "copyreg.__newobj_ex__".to_string(),
            Global::Rebuild(rebuild) => {
                let name = match rebuild {
                    Rebuild::Tensor => "_rebuild_tensor",
                    Rebuild::TensorV2 => "_rebuild_tensor_v2",
                    Rebuild::TensorV3 => "_rebuild_tensor_v3",
                    Rebuild::Parameter => "_rebuild_parameter",
                    Rebuild::ParameterWithState => "_rebuild_parameter_with_state",
                    Rebuild::FromTypeV2 => return "torch._tensor._rebuild_from_type_v2".into(),
                    Rebuild::DeviceFromCpu => "_rebuild_device_tensor_from_cpu_tensor",
                    Rebuild::Quantized => "_rebuild_qtensor",
                    Rebuild::Sparse => "_rebuild_sparse_tensor",
                    Rebuild::Meta => "_rebuild_meta_tensor_no_storage",
                    Rebuild::WrapperSubclass => "_rebuild_wrapper_subclass",
                    Rebuild::DeviceFromNumpy => "_rebuild_device_tensor_from_numpy",
                };
                format!("torch._utils.{name}")
            }
        }
    }
}

/// Every element type torch has a name for, as `str(dtype)` spells it without `torch.`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TorchDtype(u8);

/// torch's dtypes: the name, the legacy storage class (if any), the element's bytes (0 for
/// sub-byte types), and tjoin's type (if it has one).
const DTYPES: &[(&str, Option<&str>, u64, Option<DType>)] = &[
    ("float32", Some("FloatStorage"), 4, Some(DType::Float32)),
    ("float64", Some("DoubleStorage"), 8, Some(DType::Float64)),
    ("float16", Some("HalfStorage"), 2, Some(DType::Float16)),
    (
        "bfloat16",
        Some("BFloat16Storage"),
        2,
        Some(DType::BFloat16),
    ),
    ("int64", Some("LongStorage"), 8, Some(DType::Int64)),
    ("int32", Some("IntStorage"), 4, Some(DType::Int32)),
    ("int16", Some("ShortStorage"), 2, Some(DType::Int16)),
    ("int8", Some("CharStorage"), 1, Some(DType::Int8)),
    ("uint8", Some("ByteStorage"), 1, Some(DType::UInt8)),
    ("bool", Some("BoolStorage"), 1, Some(DType::Bool)),
    (
        "complex64",
        Some("ComplexFloatStorage"),
        8,
        Some(DType::Complex64),
    ),
    (
        "complex128",
        Some("ComplexDoubleStorage"),
        16,
        Some(DType::Complex128),
    ),
    ("uint16", None, 2, Some(DType::UInt16)),
    ("uint32", None, 4, Some(DType::UInt32)),
    ("uint64", None, 8, Some(DType::UInt64)),
    ("float8_e4m3fn", None, 1, Some(DType::Float8E4M3)),
    ("float8_e5m2", None, 1, Some(DType::Float8E5M2)),
    ("float8_e4m3fnuz", None, 1, Some(DType::Float8E4M3Fnuz)),
    ("float8_e5m2fnuz", None, 1, Some(DType::Float8E5M2Fnuz)),
    ("float8_e8m0fnu", None, 1, Some(DType::Float8E8M0)),
    ("complex32", None, 4, None),
    ("float4_e2m1fn_x2", None, 1, None),
    ("qint8", Some("QInt8Storage"), 1, None),
    ("quint8", Some("QUInt8Storage"), 1, None),
    ("qint32", Some("QInt32Storage"), 4, None),
    ("quint4x2", Some("QUInt4x2Storage"), 1, None),
    ("quint2x4", Some("QUInt2x4Storage"), 1, None),
    ("bits1x8", None, 1, None),
    ("bits2x4", None, 1, None),
    ("bits4x2", None, 1, None),
    ("bits8", None, 1, None),
    ("bits16", None, 2, None),
    ("uint1", None, 0, None),
    ("uint2", None, 0, None),
    ("uint3", None, 0, None),
    ("uint4", None, 0, None),
    ("uint5", None, 0, None),
    ("uint6", None, 0, None),
    ("uint7", None, 0, None),
    ("int1", None, 0, None),
    ("int2", None, 0, None),
    ("int3", None, 0, None),
    ("int4", None, 0, None),
    ("int5", None, 0, None),
    ("int6", None, 0, None),
    ("int7", None, 0, None),
];

impl TorchDtype {
    fn entry(self) -> &'static (&'static str, Option<&'static str>, u64, Option<DType>) {
        &DTYPES[usize::from(self.0)]
    }

    /// torch's name for it: `float32`.
    pub fn name(self) -> &'static str {
        self.entry().0
    }

    /// Its legacy storage class: `FloatStorage`.
    pub fn storage_name(self) -> &'static str {
        self.entry().1.unwrap_or("UntypedStorage")
    }

    /// Bytes per element (0 for types of fewer bits than a byte).
    pub fn itemsize(self) -> u64 {
        self.entry().2
    }

    /// tjoin's type for it, if it has one (quantized and sub-byte types have none).
    pub fn dtype(self) -> Option<DType> {
        self.entry().3.clone()
    }

    /// The dtype of this name (`float32`, or an alias such as `float`).
    pub fn from_name(name: &str) -> Option<TorchDtype> {
        let canonical = match name {
            "float" => "float32",
            "double" => "float64",
            "half" => "float16",
            "long" => "int64",
            "int" => "int32",
            "short" => "int16",
            "cfloat" => "complex64",
            "cdouble" => "complex128",
            "chalf" => "complex32",
            other => other,
        };
        DTYPES
            .iter()
            .position(|(n, ..)| *n == canonical)
            .map(|i| TorchDtype(i as u8))
    }

    /// The dtype whose legacy storage class is `name` (`FloatStorage`).
    pub fn from_storage_name(name: &str) -> Option<TorchDtype> {
        DTYPES
            .iter()
            .position(|(_, storage, ..)| *storage == Some(name))
            .map(|i| TorchDtype(i as u8))
    }
}

/// What a node is, for messages: `a list`, `the global torch.Size`.
pub fn kind_of(node: &Node) -> String {
    match node {
        Node::None => "None".to_string(),
        Node::Bool(_) => "a bool".to_string(),
        Node::Int(_) | Node::BigInt => "an int".to_string(),
        Node::Float(_) => "a float".to_string(),
        Node::Complex(..) => "a complex number".to_string(),
        Node::Str(_) => "a string".to_string(),
        Node::Bytes(_) => "bytes".to_string(),
        Node::Tuple(_) => "a tuple".to_string(),
        Node::List(_) => "a list".to_string(),
        Node::Dict(_) => "a dict".to_string(),
        Node::Set(_) => "a set".to_string(),
        Node::Global(global) => format!("the global {}", global.path()),
        Node::Storage(_) => "a storage".to_string(),
        Node::Tensor(_) => "a tensor".to_string(),
        Node::Object(object) => format!("an object of class {}", object.class.path()),
        Node::Unreadable(what) => what.to_string(),
    }
}
