//! The classes whose instances a pickle may hold as data: one list, each entry with the file
//! format that needs it. An instance of one (built by `NEWOBJ`, `NEWOBJ_EX`, `REDUCE` of the
//! class, `copyreg._reconstructor` or `copyreg.__newobj__`, then `BUILD` with its state)
//! becomes an inert [`Object`](super::value::Object) node: the class, its arguments and its
//! state, recorded. Nothing is imported and no method runs (no `__init__`, `__setstate__` or
//! `__new__`); the readers that know the class read its fields. A class not listed here is
//! refused by name, as every global is.

/// A class whose instances are data to tjoin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataClass {
    /// `torch.distributed.tensor.DTensor`, the tensor subclass `_rebuild_from_type_v2`
    /// names: its state holds the local tensor and the spec (FSDP2 / DTensor rank files).
    DTensor,
    /// `DTensorSpec(mesh, placements, tensor_meta, ...)`, a dataclass: FSDP2 / DTensor rank
    /// files (`torch.save` of a state dict of DTensors).
    DTensorSpec,
    /// `TensorMeta(shape, stride, dtype)`, a named tuple: the global shape of a DTensor (FSDP2
    /// / DTensor rank files).
    TensorMeta,
    /// `ShardOrderEntry(tensor_dim, mesh_dims)`, a named tuple of a `DTensorSpec` (FSDP2 /
    /// DTensor rank files; not read).
    ShardOrderEntry,
    /// `Shard(dim)`: a placement (FSDP2 / DTensor rank files).
    Shard,
    /// `_StridedShard(dim, split_factor)`: a placement (FSDP2 / DTensor rank files; refused
    /// when read).
    StridedShard,
    /// `Replicate()`: a placement (FSDP2 / DTensor rank files).
    Replicate,
    /// `Partial(reduce_op)`: a placement of values still to be reduced (FSDP2 / DTensor rank
    /// files; refused when read).
    Partial,
    /// `DeviceMesh`: the mesh of a DTensor (FSDP2 / DTensor rank files; read for the rank's
    /// coordinate only).
    DeviceMesh,
    /// `_MeshLayout`: part of a `DeviceMesh` (FSDP2 / DTensor rank files; not read).
    MeshLayout,
    /// `_FlatLayout`: part of a `DeviceMesh` (FSDP2 / DTensor rank files; not read).
    FlatLayout,
    /// `_MEM_FORMAT_ENCODING`, an enum of a DCP `.metadata` file's `TensorProperties`.
    MemFormatEncoding,
    /// `Metadata`, a dataclass: the root of a DCP `.metadata` file.
    Metadata,
    /// `TensorStorageMetadata(properties, size, chunks)`: a tensor of a DCP `.metadata` file.
    TensorStorageMetadata,
    /// `ChunkStorageMetadata(offsets, sizes)`: one saved block of a tensor (DCP `.metadata`).
    ChunkStorageMetadata,
    /// `TensorProperties`, whose `__getstate__` gives a tuple: dtype, layout, requires_grad,
    /// memory format, pin_memory and (since torch 2.6) strides (DCP `.metadata`).
    TensorProperties,
    /// `BytesStorageMetadata()`: an entry that is not a tensor (DCP `.metadata`).
    BytesStorageMetadata,
    /// `MetadataIndex(fqn, offset, index)`: a chunk's key in `storage_data` (DCP `.metadata`).
    MetadataIndex,
    /// `StorageMeta`: the checkpoint's id and modules (DCP `.metadata`; not read).
    StorageMeta,
    /// `filesystem._StorageInfo(relative_path, offset, length, transform_descriptors)`:
    /// where a chunk's bytes are (DCP `.metadata`).
    StorageInfo,
    /// `pathlib.PosixPath(*parts)`: the `checkpoint_id` of a DCP `.metadata` file's
    /// `StorageMeta`, saved on Linux or macOS (not read).
    PosixPath,
    /// `pathlib.WindowsPath(*parts)`: the same, saved on Windows (not read).
    WindowsPath,
    /// `LossScaler`, a DeepSpeed optimizer's static loss scale (DeepSpeed ZeRO optimizer
    /// files; not read).
    LossScaler,
    /// `DynamicLossScaler`, the same for fp16 training (DeepSpeed ZeRO optimizer files; not
    /// read).
    DynamicLossScaler,
    /// `ZeroStageEnum(stage)`, an int enum: the ZeRO stage a DeepSpeed optimizer file was
    /// saved by.
    ZeroStageEnum,
    /// `fragment_address(numel, start)`, a dataclass: where a parameter's slice lies in a
    /// rank's flat partition (DeepSpeed ZeRO 1 and 2 optimizer files; not read, the
    /// parameters' shapes say the same).
    FragmentAddress,
}

/// Every class, for [`DataClass::resolve`].
const ALL: &[DataClass] = &[
    DataClass::DTensor,
    DataClass::DTensorSpec,
    DataClass::TensorMeta,
    DataClass::ShardOrderEntry,
    DataClass::Shard,
    DataClass::StridedShard,
    DataClass::Replicate,
    DataClass::Partial,
    DataClass::DeviceMesh,
    DataClass::MeshLayout,
    DataClass::FlatLayout,
    DataClass::MemFormatEncoding,
    DataClass::Metadata,
    DataClass::TensorStorageMetadata,
    DataClass::ChunkStorageMetadata,
    DataClass::TensorProperties,
    DataClass::BytesStorageMetadata,
    DataClass::MetadataIndex,
    DataClass::StorageMeta,
    DataClass::StorageInfo,
    DataClass::PosixPath,
    DataClass::WindowsPath,
    DataClass::LossScaler,
    DataClass::DynamicLossScaler,
    DataClass::ZeroStageEnum,
    DataClass::FragmentAddress,
];

const DTENSOR_SPEC: &str = "torch.distributed.tensor._dtensor_spec";
const PLACEMENTS: &str = "torch.distributed.tensor.placement_types";
const MESH_LAYOUT: &str = "torch.distributed._mesh_layout";
const DCP_METADATA: &str = "torch.distributed.checkpoint.metadata";
const LOSS_SCALER: &str = "deepspeed.runtime.fp16.loss_scaler";

impl DataClass {
    /// The module and name the pickle spells, and the names of the fields its positional
    /// arguments (a named tuple's) or positional state (a frozen slotted dataclass's, a
    /// `__getstate__` tuple's) give, in order.
    fn spec(self) -> (&'static str, &'static str, &'static [&'static str]) {
        match self {
            DataClass::DTensor => ("torch.distributed.tensor", "DTensor", &[]),
            DataClass::DTensorSpec => (DTENSOR_SPEC, "DTensorSpec", &[]),
            DataClass::TensorMeta => (DTENSOR_SPEC, "TensorMeta", &["shape", "stride", "dtype"]),
            DataClass::ShardOrderEntry => (
                DTENSOR_SPEC,
                "ShardOrderEntry",
                &["tensor_dim", "mesh_dims"],
            ),
            DataClass::Shard => (PLACEMENTS, "Shard", &["dim"]),
            DataClass::StridedShard => (PLACEMENTS, "_StridedShard", &["dim", "split_factor"]),
            DataClass::Replicate => (PLACEMENTS, "Replicate", &[]),
            DataClass::Partial => (PLACEMENTS, "Partial", &["reduce_op"]),
            DataClass::DeviceMesh => ("torch.distributed.device_mesh", "DeviceMesh", &[]),
            DataClass::MeshLayout => (MESH_LAYOUT, "_MeshLayout", &[]),
            DataClass::FlatLayout => (MESH_LAYOUT, "_FlatLayout", &[]),
            DataClass::MemFormatEncoding => (DCP_METADATA, "_MEM_FORMAT_ENCODING", &[]),
            DataClass::Metadata => (DCP_METADATA, "Metadata", &[]),
            DataClass::TensorStorageMetadata => (DCP_METADATA, "TensorStorageMetadata", &[]),
            DataClass::ChunkStorageMetadata => (DCP_METADATA, "ChunkStorageMetadata", &[]),
            DataClass::TensorProperties => (
                DCP_METADATA,
                "TensorProperties",
                &[
                    "dtype",
                    "layout",
                    "requires_grad",
                    "memory_format",
                    "pin_memory",
                    "strides",
                ],
            ),
            DataClass::BytesStorageMetadata => (DCP_METADATA, "BytesStorageMetadata", &[]),
            DataClass::MetadataIndex => (DCP_METADATA, "MetadataIndex", &[]),
            DataClass::StorageMeta => (DCP_METADATA, "StorageMeta", &[]),
            DataClass::StorageInfo => (
                "torch.distributed.checkpoint.filesystem",
                "_StorageInfo",
                &[],
            ),
            DataClass::PosixPath => ("pathlib", "PosixPath", &[]),
            DataClass::WindowsPath => ("pathlib", "WindowsPath", &[]),
            DataClass::LossScaler => (LOSS_SCALER, "LossScaler", &[]),
            DataClass::DynamicLossScaler => (LOSS_SCALER, "DynamicLossScaler", &[]),
            DataClass::ZeroStageEnum => {
                ("deepspeed.runtime.zero.config", "ZeroStageEnum", &["value"])
            }
            DataClass::FragmentAddress => (
                "deepspeed.utils.tensor_fragment",
                "fragment_address",
                &["numel", "start"],
            ),
        }
    }

    /// The class `module.name`, if it is listed.
    pub fn resolve(module: &str, name: &str) -> Option<DataClass> {
        ALL.iter().copied().find(|class| {
            let (m, n, _) = class.spec();
            m == module && n == name
        })
    }

    /// Its full name, as the pickle spells it.
    pub fn path(self) -> String {
        let (module, name, _) = self.spec();
        format!("{module}.{name}")
    }

    /// The names of the fields its positional arguments or positional state give, in order.
    pub fn fields(self) -> &'static [&'static str] {
        self.spec().2
    }
}

#[cfg(test)]
mod tests {
    use super::super::value::Node;
    use super::super::vm;
    use super::*;

    /// The object at the root of `bytes`, a pickle that must run.
    fn object(bytes: &[u8]) -> (vm::Pickled, super::super::value::Object) {
        let pickled = vm::run(bytes, vm::LIMITS).unwrap_or_else(|f| panic!("{}", f.describe()));
        match pickled.node(pickled.root).clone() {
            Node::Object(object) => (pickled, *object),
            other => panic!("not an object: {other:?}"),
        }
    }

    #[test]
    fn deepspeeds_records_are_inert_and_its_other_classes_refused_by_name() {
        // `ZeroStageEnum(3)` as torch.save writes it: REDUCE of the class with its value.
        let (pickled, stage) =
            object(b"\x80\x02cdeepspeed.runtime.zero.config\nZeroStageEnum\nK\x03\x85R.");
        assert_eq!(stage.class, DataClass::ZeroStageEnum);
        assert_eq!(stage.field(&*pickled.nodes, "value"), Some(&Node::Int(3)));
        // `fragment_address(numel=30, start=0)`: NEWOBJ, then BUILD with its attributes.
        let (pickled, fragment) = object(
            b"\x80\x02cdeepspeed.utils.tensor_fragment\nfragment_address\n)\x81}(\
              X\x05\x00\x00\x00numelK\x1eX\x05\x00\x00\x00startK\x00ub.",
        );
        assert_eq!(fragment.class, DataClass::FragmentAddress);
        assert_eq!(
            fragment.field(&*pickled.nodes, "numel"),
            Some(&Node::Int(30))
        );
        for scaler in ["LossScaler", "DynamicLossScaler"] {
            let bytes =
                format!("\u{80}\u{2}cdeepspeed.runtime.fp16.loss_scaler\n{scaler}\n)\u{81}.");
            let bytes: Vec<u8> = bytes.chars().map(|c| c as u8).collect();
            assert_eq!(
                object(&bytes).1.class.path().rsplit('.').next(),
                Some(scaler)
            );
        }
        // Any other class of DeepSpeed is refused, saying which ones tjoin reads.
        let fault = vm::run(
            b"\x80\x02cdeepspeed.runtime.zero.offload_config\nOffloadDeviceEnum\n.",
            vm::LIMITS,
        )
        .unwrap_err();
        let text = fault.describe();
        assert!(
            text.contains("deepspeed.runtime.zero.offload_config.OffloadDeviceEnum")
                && text.contains("a class of DeepSpeed that tjoin does not read"),
            "{text}"
        );
    }

    #[test]
    fn every_class_is_listed_once_and_resolves_to_itself() {
        for (i, &class) in ALL.iter().enumerate() {
            let (module, name, _) = class.spec();
            assert_eq!(DataClass::resolve(module, name), Some(class));
            assert!(
                ALL[..i].iter().all(|c| c.path() != class.path()),
                "{class:?}"
            );
        }
    }
}
