//! The restricted machine on pickles assembled opcode by opcode: what torch.save writes, and
//! what a hostile file might hold instead.

use super::classes::DataClass;
use super::state::{self, MAX_DEPTH};
use super::value::{FaultKind, Global, Node, Object, TorchDtype};
use super::vm::{self, LIMITS, Limits};
use super::*;

/// A pickle assembled by hand.
#[derive(Default)]
struct P(Vec<u8>);

impl P {
    fn proto(mut self, v: u8) -> P {
        self.0.extend([0x80, v]);
        self
    }
    fn op(mut self, op: u8) -> P {
        self.0.push(op);
        self
    }
    fn global(mut self, module: &str, name: &str) -> P {
        self.0.push(b'c');
        self.0
            .extend_from_slice(format!("{module}\n{name}\n").as_bytes());
        self
    }
    fn str(mut self, s: &str) -> P {
        self.0.push(b'X');
        self.0.extend((s.len() as u32).to_le_bytes());
        self.0.extend_from_slice(s.as_bytes());
        self
    }
    fn short_str(mut self, s: &str) -> P {
        self.0.extend([0x8c, s.len() as u8]);
        self.0.extend_from_slice(s.as_bytes());
        self
    }
    fn int(mut self, v: u8) -> P {
        self.0.extend([b'K', v]);
        self
    }
    fn put(mut self, index: u8) -> P {
        self.0.extend([b'q', index]);
        self
    }
    fn get(mut self, index: u8) -> P {
        self.0.extend([b'h', index]);
        self
    }
    fn bytes(mut self, b: &[u8]) -> P {
        self.0.extend_from_slice(b);
        self
    }
    /// `_rebuild_tensor_v2(('storage', torch.FloatStorage, key, 'cpu', numel), offset,
    /// shape, stride, False, OrderedDict())`, as torch.save writes it.
    fn tensor(
        self,
        storage: &str,
        key: &str,
        numel: u8,
        offset: u8,
        shape: &[u8],
        stride: &[u8],
    ) -> P {
        let mut p = self
            .global("torch._utils", "_rebuild_tensor_v2")
            .op(b'(')
            .op(b'(')
            .str("storage")
            .global("torch", storage)
            .str(key)
            .str("cpu")
            .int(numel)
            .op(b't')
            .op(b'Q')
            .int(offset)
            .op(b'(');
        for &d in shape {
            p = p.int(d);
        }
        p = p.op(b't').op(b'(');
        for &s in stride {
            p = p.int(s);
        }
        p.op(b't')
            .op(0x89)
            .global("collections", "OrderedDict")
            .op(b')')
            .op(b'R')
            .op(b't')
            .op(b'R')
    }
    fn stop(mut self) -> Vec<u8> {
        self.0.push(b'.');
        self.0
    }
}

fn run(bytes: &[u8]) -> Result<vm::Pickled, vm::Fault> {
    vm::run(bytes, LIMITS)
}

fn refusal(bytes: &[u8]) -> (u64, String) {
    match run(bytes) {
        Err(fault) => match &fault.kind {
            FaultKind::Refused(_) => (fault.at, fault.describe()),
            other => panic!("not a refusal: {other:?}"),
        },
        Ok(p) => panic!("ran: {:?}", p.node(p.root)),
    }
}

fn damage(bytes: &[u8]) -> String {
    match run(bytes) {
        Err(fault) => {
            assert!(fault.is_damage(), "{fault:?}");
            fault.describe()
        }
        Ok(p) => panic!("ran: {:?}", p.node(p.root)),
    }
}

/// `OrderedDict()` then, between MARK and SETITEMS, what `items` adds.
fn state_dict(items: impl FnOnce(P) -> P) -> Vec<u8> {
    let p = P::default()
        .proto(2)
        .global("collections", "OrderedDict")
        .op(b')')
        .op(b'R')
        .put(0)
        .op(b'(');
    items(p).op(b'u').stop()
}

#[test]
fn a_state_dict_as_torch_writes_it_gives_its_tensor_records() {
    let bytes = state_dict(|p| {
        p.str("w")
            .tensor("FloatStorage", "0", 6, 0, &[2, 3], &[3, 1])
            .str("t")
            .tensor("FloatStorage", "0", 6, 0, &[3, 2], &[1, 3])
            .str("step")
            .int(7)
    });
    let pickled = run(&bytes).unwrap();
    assert_eq!(pickled.len, bytes.len());
    let held = state::holdings(&pickled).unwrap();
    assert_eq!(held.tensors.len(), 2);
    let (name, w) = &held.tensors[0];
    assert_eq!(name.as_deref(), Some("w"));
    assert_eq!(w.shape, [2, 3]);
    assert_eq!(w.stride, [3, 1]);
    assert_eq!(w.dtype, TorchDtype::from_name("float32").unwrap());
    assert_eq!(
        (&*w.storage.key, w.storage.numel, &*w.storage.location),
        ("0", 6, "cpu")
    );
    assert_eq!(held.tensors[1].1.stride, [1, 3]);
    assert_eq!(held.skipped, ["`step`, not a tensor: an int, 7"]);
}

#[test]
fn protocol_4_frames_memoize_and_stack_global_are_read() {
    // What `torch.save(..., pickle_protocol=4)` writes: a frame, short strings, MEMOIZE
    // instead of BINPUT, STACK_GLOBAL instead of GLOBAL.
    let mut body = P::default()
        .short_str("collections")
        .op(0x94)
        .short_str("OrderedDict")
        .op(0x94)
        .op(0x93)
        .op(0x94)
        .op(b')')
        .op(b'R')
        .op(0x94)
        .short_str("bias")
        .op(0x94)
        .tensor("HalfStorage", "1", 4, 1, &[3], &[1])
        .op(0x94)
        .op(b's')
        .0;
    body.push(b'.');
    let mut bytes = vec![0x80, 4, 0x95];
    bytes.extend((body.len() as u64).to_le_bytes());
    bytes.extend(body);
    let pickled = run(&bytes).unwrap();
    let held = state::holdings(&pickled).unwrap();
    let (name, bias) = &held.tensors[0];
    assert_eq!(name.as_deref(), Some("bias"));
    assert_eq!((bias.offset, bias.dtype.name()), (1, "float16"));
}

#[test]
fn a_memoized_dict_filled_later_is_the_same_dict_where_it_is_fetched() {
    // {"a": d, "b": d} with d = {} memoized and then filled: both names see its tensor.
    let bytes = P::default()
        .proto(2)
        .op(b'}')
        .put(0)
        .str("a")
        .op(b'}')
        .put(1)
        .op(b's')
        .get(1)
        .str("x")
        .tensor("FloatStorage", "0", 1, 0, &[1], &[1])
        .op(b's')
        .op(b'0')
        .get(0)
        .str("b")
        .get(1)
        .op(b's')
        .stop();
    let held = state::holdings(&run(&bytes).unwrap()).unwrap();
    let names: Vec<_> = held
        .tensors
        .iter()
        .map(|(n, _)| n.clone().unwrap())
        .collect();
    assert_eq!(names, ["a.x", "b.x"]);
}

#[test]
fn nested_dicts_flatten_with_dots_and_parameters_are_their_data() {
    let bytes = P::default()
        .proto(2)
        .op(b'}')
        .op(b'(')
        .str("model")
        .op(b'}')
        .op(b'(')
        .str("embed.weight")
        .global("torch._utils", "_rebuild_parameter")
        .op(b'(')
        .tensor("BFloat16Storage", "0", 4, 0, &[2, 2], &[2, 1])
        .op(0x88)
        .global("collections", "OrderedDict")
        .op(b')')
        .op(b'R')
        .op(b't')
        .op(b'R')
        .op(b'u')
        .str("optimizer")
        .op(b'}')
        .op(b'(')
        .str("lr")
        .bytes(&[b'G', 0x3f, 0x50, 0x62, 0x4d, 0xd2, 0xf1, 0xa9, 0xfc])
        .op(b'u')
        .str("epoch")
        .int(3)
        .op(b'u')
        .stop();
    let held = state::holdings(&run(&bytes).unwrap()).unwrap();
    assert_eq!(held.tensors.len(), 1);
    assert_eq!(held.tensors[0].0.as_deref(), Some("model.embed.weight"));
    assert_eq!(held.tensors[0].1.dtype.name(), "bfloat16");
    assert_eq!(
        held.skipped,
        [
            "`optimizer`, not a tensor: a dict of 1 values, none a tensor",
            "`epoch`, not a tensor: an int, 3"
        ]
    );
}

#[test]
fn untyped_storages_take_their_dtype_from_rebuild_tensor_v3() {
    let bytes = P::default()
        .proto(2)
        .global("torch._utils", "_rebuild_tensor_v3")
        .op(b'(')
        .op(b'(')
        .str("storage")
        .global("torch.storage", "UntypedStorage")
        .str("0")
        .str("cpu")
        .int(6)
        .op(b't')
        .op(b'Q')
        .int(0)
        .int(3)
        .op(0x85)
        .int(1)
        .op(0x85)
        .op(0x89)
        .global("collections", "OrderedDict")
        .op(b')')
        .op(b'R')
        .global("torch", "uint16")
        .op(b't')
        .op(b'R')
        .stop();
    let held = state::holdings(&run(&bytes).unwrap()).unwrap();
    let (name, t) = &held.tensors[0];
    assert_eq!(name, &None);
    assert_eq!(
        (t.dtype.name(), t.storage.dtype, t.storage.numel),
        ("uint16", None, 6)
    );
}

#[test]
fn forbidden_globals_are_refused_by_name_at_their_byte() {
    // The classic: os.system('echo pwned') by REDUCE.
    let bytes = P::default()
        .proto(2)
        .global("os", "system")
        .str("echo pwned")
        .op(0x85)
        .op(b'R')
        .stop();
    let (at, text) = refusal(&bytes);
    assert_eq!(at, 2);
    assert!(text.contains("opcode GLOBAL at byte 2"), "{text}");
    assert!(
        text.contains("the pickle calls os.system, which a checkpoint never needs: tjoin runs no code from a file"),
        "{text}"
    );
    // builtins.eval by STACK_GLOBAL, and posix.system (what os.system pickles as on Linux).
    let bytes = P::default()
        .proto(4)
        .short_str("builtins")
        .short_str("eval")
        .op(0x93)
        .stop();
    let (at, text) = refusal(&bytes);
    assert_eq!(at, 18);
    assert!(
        text.contains("STACK_GLOBAL") && text.contains("builtins.eval"),
        "{text}"
    );
    let (_, text) = refusal(&P::default().proto(2).global("posix", "system").stop());
    assert!(text.contains("posix.system"), "{text}");
    let (_, text) = refusal(
        &P::default()
            .proto(2)
            .global("__builtin__", "getattr")
            .stop(),
    );
    assert!(text.contains("builtins.getattr"), "{text}");
    // Anything else not on the list, even harmless-looking, is refused too.
    let (_, text) = refusal(
        &P::default()
            .proto(2)
            .global("numpy.core.multiarray", "_reconstruct")
            .stop(),
    );
    assert!(
        text.contains("numpy.core.multiarray._reconstruct")
            && text.contains("not one a state dict"),
        "{text}"
    );
    let (_, text) = refusal(
        &P::default()
            .proto(2)
            .global("torch.distributed.tensor", "DTensorShardedSomehow")
            .stop(),
    );
    assert!(
        text.contains("torch.distributed.tensor.DTensorShardedSomehow")
            && text.contains("full_tensor"),
        "{text}"
    );
}

#[test]
fn reduce_tricks_that_call_what_is_not_a_global_are_refused() {
    // A __reduce__ trick: calling a string, a dict, or an allowed class that only names data.
    let (_, text) = refusal(
        &P::default()
            .proto(2)
            .str("os.system")
            .op(b')')
            .op(b'R')
            .stop(),
    );
    assert!(
        text.contains("REDUCE calls a string, which is not a global"),
        "{text}"
    );
    let (_, text) = refusal(
        &P::default()
            .proto(2)
            .global("torch", "FloatStorage")
            .op(b')')
            .op(b'R')
            .stop(),
    );
    assert!(text.contains("torch.FloatStorage"), "{text}");
    let (_, text) = refusal(
        &P::default()
            .proto(2)
            .global("torch", "float32")
            .op(b')')
            .op(0x81)
            .stop(),
    );
    assert!(text.contains("NEWOBJ"), "{text}");
    // BUILD on something that is neither a dict nor a tensor (how __setstate__ runs code).
    let (_, text) = refusal(&P::default().proto(2).op(b']').op(b'}').op(b'b').stop());
    assert!(text.contains("BUILD sets the state of a list"), "{text}");
    // A persistent ID that is not a storage.
    let (_, text) = refusal(&P::default().proto(2).str("storage").op(b'Q').stop());
    assert!(text.contains("persistent ID is a string"), "{text}");
    let (_, text) = refusal(&P::default().proto(2).str("module").op(0x85).op(b'Q').stop());
    assert!(text.contains("something other than a storage"), "{text}");
}

#[test]
fn misused_containers_are_refused_never_a_panic() {
    // SETITEMS on a list (CVE-2026-24747's shape), SETITEM on a tuple, APPEND on a dict.
    let (at, text) = refusal(
        &P::default()
            .proto(2)
            .op(b']')
            .op(b'(')
            .int(1)
            .int(2)
            .op(b'u')
            .stop(),
    );
    assert_eq!(at, 8);
    assert!(
        text.contains("opcode SETITEMS at byte 8: SETITEMS sets items of a list, not of a dict"),
        "{text}"
    );
    let (_, text) = refusal(&P::default().proto(2).op(b')').int(1).int(2).op(b's').stop());
    assert!(text.contains("SETITEM sets items of a tuple"), "{text}");
    let (_, text) = refusal(&P::default().proto(2).op(b'}').int(1).op(b'a').stop());
    assert!(text.contains("APPEND appends to a dict"), "{text}");
    let (_, text) = refusal(&P::default().proto(2).op(b'}').op(b'(').op(0x90).stop());
    assert!(text.contains("ADDITEMS adds to a dict"), "{text}");
    // Odd items for a dict, a stack emptied, a mark missing, a memo entry never stored.
    assert!(
        damage(
            &P::default()
                .proto(2)
                .op(b'}')
                .op(b'(')
                .int(1)
                .op(b'u')
                .stop()
        )
        .contains("in pairs")
    );
    assert!(damage(&P::default().proto(2).op(b'a').stop()).contains("empty stack"));
    assert!(damage(&P::default().proto(2).op(b't').stop()).contains("needs a MARK"));
    assert!(
        damage(&P::default().proto(2).get(9).stop()).contains("memo index 9, which holds nothing")
    );
    // Values below a mark are out of reach until it closes.
    assert!(damage(&P::default().proto(2).int(1).op(b'(').op(b'.').0).contains("empty stack"));
}

#[test]
fn limits_are_refusals_that_say_which() {
    // A huge memo index.
    let mut bytes = P::default().proto(2).op(b'N').op(b'r').0;
    bytes.extend(u32::MAX.to_le_bytes());
    bytes.push(b'.');
    let (at, text) = refusal(&bytes);
    assert_eq!(at, 3);
    assert!(
        text.contains("LONG_BINPUT") && text.contains("memo index 4294967295"),
        "{text}"
    );
    // Marks nested past the limit.
    let mut bytes = vec![0x80, 2];
    bytes.extend(std::iter::repeat_n(b'(', LIMITS.marks + 1));
    let (at, text) = refusal(&bytes);
    assert_eq!(at, 2 + LIMITS.marks as u64);
    assert!(text.contains("marks"), "{text}");
    // A string of 2^60 bytes: refused before anything is allocated.
    let mut bytes = vec![0x80, 4, 0x8d];
    bytes.extend((1u64 << 60).to_le_bytes());
    let (_, text) = refusal(&bytes);
    assert!(
        text.contains("string of 1152921504606846976 bytes"),
        "{text}"
    );
    // Opcodes and nodes, with small limits.
    let small = Limits {
        opcodes: 10,
        nodes: 3,
        ..LIMITS
    };
    let many = P::default().proto(2).bytes(&[b'N'; 20]).stop();
    let fault = vm::run(
        &many,
        Limits {
            nodes: 100,
            ..small
        },
    )
    .unwrap_err();
    assert!(
        fault.describe().contains("more than 10 opcodes"),
        "{}",
        fault.describe()
    );
    let fault = vm::run(
        &many,
        Limits {
            opcodes: 100,
            ..small
        },
    )
    .unwrap_err();
    assert!(
        fault.describe().contains("more than 3 values"),
        "{}",
        fault.describe()
    );
}

#[test]
fn a_pickle_cut_short_says_so() {
    let whole = state_dict(|p| p.str("w").tensor("FloatStorage", "0", 6, 0, &[6], &[1]));
    for cut in 0..whole.len() {
        let fault = run(&whole[..cut]).unwrap_err();
        assert!(
            matches!(fault.kind, FaultKind::CutShort(_)),
            "cut at {cut}: {fault:?}"
        );
    }
}

#[test]
fn text_protocol_opcodes_and_buffers_are_refused() {
    for op in [b'I', b'S', b'P', b'i', b'o', 0x82, 0x97] {
        let (_, text) = refusal(&[0x80, 2, op, b'.']);
        assert!(text.contains("at byte 2"), "{text}");
    }
    let (_, text) = refusal(&[0x80, 9, b'.']);
    assert!(text.contains("protocol 9"), "{text}");
    assert!(damage(&[0x80, 2, 0xff]).contains("not a pickle opcode"));
}

#[test]
fn the_legacy_magic_number_is_an_int_of_80_bits() {
    let pickled = run(&[LEGACY_MAGIC, b"."].concat()).unwrap();
    assert_eq!(
        pickled.node(pickled.root),
        &Node::Int(0x1950a86a20f9469cfc6c)
    );
}

#[test]
fn a_dict_that_holds_itself_stops_at_the_depth_limit() {
    let bytes = P::default()
        .proto(2)
        .op(b'}')
        .put(0)
        .str("a")
        .get(0)
        .op(b's')
        .str("w")
        .tensor("FloatStorage", "0", 1, 0, &[1], &[1])
        .op(b's')
        .stop();
    let why = state::holdings(&run(&bytes).unwrap()).unwrap_err();
    assert!(
        why.contains(&format!("more than {MAX_DEPTH} deep")),
        "{why}"
    );
}

#[test]
fn quantized_and_sparse_tensors_are_unreadable_nodes() {
    let bytes = state_dict(|p| {
        p.str("q")
            .global("torch._utils", "_rebuild_qtensor")
            .op(b')')
            .op(b'R')
    });
    let held = state::holdings(&run(&bytes).unwrap()).unwrap();
    assert_eq!(held.unreadable.len(), 1);
    assert!(held.unreadable[0].1.contains("quantized"));
}

#[test]
fn layouts_are_told_from_strides() {
    assert_eq!(layout_of(&[2, 3], &[3, 1]), Some(Layout::C));
    assert_eq!(layout_of(&[3, 2], &[1, 3]), Some(Layout::Fortran));
    // Dimensions of one element may have any stride.
    assert_eq!(layout_of(&[1, 3, 1], &[99, 1, 7]), Some(Layout::C));
    assert_eq!(layout_of(&[2, 2], &[4, 1]), None);
    assert_eq!(layout_of(&[2, 3], &[0, 1]), None);
    assert_eq!(layout_of(&[2, 0], &[5, 9]), Some(Layout::C));
}

proptest::proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400)) {
        if let Ok(pickled) = vm::run(&bytes, LIMITS) {
            let _ = state::holdings(&pickled);
        }
    }

    #[test]
    fn damaged_state_dicts_never_panic(at in 0usize..200, byte in proptest::prelude::any::<u8>()) {
        let mut bytes = state_dict(|p| {
            p.str("w").tensor("FloatStorage", "0", 6, 0, &[2, 3], &[3, 1])
        });
        let at = at % bytes.len();
        bytes[at] = byte;
        if let Ok(pickled) = vm::run(&bytes, LIMITS) {
            let _ = state::holdings(&pickled);
        }
    }
}

/// The object at the root of a pickle that ran.
fn root_object(pickled: &vm::Pickled) -> &Object {
    match pickled.node(pickled.root) {
        Node::Object(object) => object,
        other => panic!("not an object: {other:?}"),
    }
}

const PLACEMENTS: &str = "torch.distributed.tensor.placement_types";

#[test]
fn a_dataclass_is_an_inert_record_of_its_class_and_state() {
    // `Shard(dim=1)` as torch.save writes it: NEWOBJ of the class with no arguments, then
    // BUILD with its attributes.
    let bytes = P::default()
        .proto(2)
        .global(PLACEMENTS, "Shard")
        .op(b')')
        .op(0x81)
        .op(b'}')
        .str("dim")
        .int(1)
        .op(b's')
        .op(b'b')
        .stop();
    let pickled = run(&bytes).unwrap();
    let shard = root_object(&pickled);
    assert_eq!(shard.class, DataClass::Shard);
    assert_eq!(shard.field(&*pickled.nodes, "dim"), Some(&Node::Int(1)));
    assert_eq!(shard.field(&*pickled.nodes, "split_factor"), None);
    // Its state is data: a walk of it as a state dict notes it and finds no tensor.
    let held = state::holdings(
        &run(&state_dict(|p| {
            p.str("s").bytes(&bytes[2..bytes.len() - 1])
        }))
        .unwrap(),
    )
    .unwrap();
    assert!(held.tensors.is_empty());
    assert_eq!(
        held.skipped,
        [format!(
            "`s`, not a tensor: an object of class {PLACEMENTS}.Shard"
        )]
    );
}

#[test]
fn a_slotted_dataclass_reads_its_fields_from_the_slots_state() {
    // `object.__getstate__` of a class with `__slots__`: `(None, {slot: value})`; with a
    // `__dict__` as well, `({attr: value}, {slot: value})`.
    let bytes = P::default()
        .proto(2)
        .global(PLACEMENTS, "_StridedShard")
        .op(b')')
        .op(0x81)
        .op(b'N')
        .op(b'(')
        .str("dim")
        .int(2)
        .str("split_factor")
        .int(4)
        .op(b'd')
        .op(0x86)
        .op(b'b')
        .stop();
    let pickled = run(&bytes).unwrap();
    let strided = root_object(&pickled);
    assert_eq!(strided.class, DataClass::StridedShard);
    assert_eq!(strided.field(&*pickled.nodes, "dim"), Some(&Node::Int(2)));
    assert_eq!(
        strided.field(&*pickled.nodes, "split_factor"),
        Some(&Node::Int(4))
    );
    // A frozen slotted dataclass's `__getstate__` is its fields' values, in order.
    let bytes = P::default()
        .proto(2)
        .global(PLACEMENTS, "_StridedShard")
        .op(b')')
        .op(0x81)
        .op(b']')
        .op(b'(')
        .int(0)
        .int(3)
        .op(b'e')
        .op(b'b')
        .stop();
    let pickled = run(&bytes).unwrap();
    let strided = root_object(&pickled);
    assert_eq!(strided.field(&*pickled.nodes, "dim"), Some(&Node::Int(0)));
    assert_eq!(
        strided.field(&*pickled.nodes, "split_factor"),
        Some(&Node::Int(3))
    );
}

#[test]
fn a_named_tuple_reads_its_fields_from_its_arguments() {
    // `TensorMeta(torch.Size([4, 6]), (6, 1), torch.float32)`, as NEWOBJ.
    let bytes = P::default()
        .proto(2)
        .global("torch.distributed.tensor._dtensor_spec", "TensorMeta")
        .global("torch", "Size")
        .int(4)
        .int(6)
        .op(0x86)
        .op(0x85)
        .op(b'R')
        .int(6)
        .int(1)
        .op(0x86)
        .global("torch", "float32")
        .op(0x87)
        .op(0x81)
        .stop();
    let pickled = run(&bytes).unwrap();
    let meta = root_object(&pickled);
    assert_eq!(meta.class, DataClass::TensorMeta);
    let Some(Node::Tuple(shape)) = meta.field(&*pickled.nodes, "shape") else {
        panic!("{meta:?}");
    };
    assert_eq!(shape.len(), 2);
    assert!(matches!(
        meta.field(&*pickled.nodes, "dtype"),
        Some(Node::Global(Global::Dtype(d))) if d.name() == "float32"
    ));
}

#[test]
fn an_enum_is_its_class_and_its_value() {
    // `_MEM_FORMAT_ENCODING.TORCH_CONTIGUOUS_FORMAT`: REDUCE of the class with its value.
    let bytes = P::default()
        .proto(2)
        .global(
            "torch.distributed.checkpoint.metadata",
            "_MEM_FORMAT_ENCODING",
        )
        .int(0)
        .op(0x85)
        .op(b'R')
        .stop();
    let pickled = run(&bytes).unwrap();
    let value = root_object(&pickled);
    assert_eq!(value.class, DataClass::MemFormatEncoding);
    assert_eq!(value.arg(&*pickled.nodes, 0), Some(&Node::Int(0)));
    assert_eq!(value.state, None);
}

#[test]
fn copyreg_and_newobj_ex_create_the_same_records() {
    // Protocol 1's `copyreg._reconstructor(cls, object, None)`, then BUILD.
    let reconstructed = P::default()
        .proto(2)
        .global("copy_reg", "_reconstructor")
        .global(PLACEMENTS, "Shard")
        .global("__builtin__", "object")
        .op(b'N')
        .op(0x87)
        .op(b'R')
        .op(b'}')
        .str("dim")
        .int(3)
        .op(b's')
        .op(b'b')
        .stop();
    // `copyreg.__newobj__(cls)` spelled as a call.
    let newobj = P::default()
        .proto(2)
        .global("copyreg", "__newobj__")
        .global(PLACEMENTS, "Shard")
        .op(0x85)
        .op(b'R')
        .op(b'}')
        .str("dim")
        .int(3)
        .op(b's')
        .op(b'b')
        .stop();
    // NEWOBJ_EX with keyword arguments.
    let newobj_ex = P::default()
        .proto(4)
        .global(PLACEMENTS, "Shard")
        .op(b')')
        .op(b'}')
        .str("dim")
        .int(3)
        .op(b's')
        .op(0x92)
        .stop();
    for bytes in [reconstructed, newobj, newobj_ex] {
        let pickled = run(&bytes).unwrap();
        let shard = root_object(&pickled);
        assert_eq!(shard.class, DataClass::Shard);
        assert_eq!(shard.field(&*pickled.nodes, "dim"), Some(&Node::Int(3)));
    }
}

#[test]
fn classes_outside_the_list_are_refused_by_name_and_records_stay_inert() {
    let (at, why) = refusal(
        &P::default()
            .proto(2)
            .global("mymodule", "TrainingConfig")
            .op(b')')
            .op(0x81)
            .stop(),
    );
    assert_eq!(at, 2);
    assert!(why.contains("mymodule.TrainingConfig"), "{why}");
    // NEWOBJ_EX, copyreg's spellings and _reconstructor create only listed classes.
    let (_, why) = refusal(
        &P::default()
            .proto(4)
            .global("collections", "OrderedDict")
            .op(b')')
            .op(b'}')
            .op(0x92)
            .stop(),
    );
    assert!(
        why.contains("NEWOBJ_EX") && why.contains("collections.OrderedDict"),
        "{why}"
    );
    let (_, why) = refusal(
        &P::default()
            .proto(2)
            .global("copyreg", "__newobj__")
            .global("torch", "Size")
            .op(0x85)
            .op(b'R')
            .stop(),
    );
    assert!(why.contains("torch.Size"), "{why}");
    let (_, why) = refusal(
        &P::default()
            .proto(2)
            .global("copyreg", "_reconstructor")
            .global(PLACEMENTS, "Shard")
            .global("builtins", "object")
            .int(1)
            .op(0x87)
            .op(b'R')
            .stop(),
    );
    assert!(why.contains("an int"), "{why}");
    // `object` itself is never called, and a record's state is set once.
    let (_, why) = refusal(
        &P::default()
            .proto(2)
            .global("builtins", "object")
            .op(b')')
            .op(b'R')
            .stop(),
    );
    assert!(why.contains("builtins.object"), "{why}");
    let (_, why) = refusal(
        &P::default()
            .proto(2)
            .global(PLACEMENTS, "Replicate")
            .op(b')')
            .op(0x81)
            .op(b'}')
            .op(b'b')
            .op(b'}')
            .op(b'b')
            .stop(),
    );
    assert!(why.contains("twice"), "{why}");
}

mod in_memory;
mod sharing;
