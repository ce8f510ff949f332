//! What the machine shares rather than copies, what it counts, and the walk's bound on a
//! shared graph (issue 40).

use super::*;

/// `global(L)` called `times` times on one memoized list of `items` ints, each result popped.
fn calls_on_one_list(module: &str, name: &str, items: usize, times: usize) -> Vec<u8> {
    let mut p = P::default()
        .proto(2)
        .global(module, name)
        .put(0)
        .op(b']')
        .put(1)
        .op(b'(');
    for _ in 0..items {
        p = p.int(7);
    }
    p = p.op(b'e').op(b'0').op(b'}');
    for _ in 0..times {
        p = p.get(0).get(1).op(0x85).op(b'R').op(b'0');
    }
    p.stop()
}

#[test]
fn calls_that_make_a_container_from_another_share_its_items() {
    // 1,000 calls on a list of 10,000 items: 40 MB if copied, nothing more if shared.
    let tight = Limits {
        bytes: 4 << 20,
        ..LIMITS
    };
    for (module, name) in [("builtins", "set"), ("torch", "Size")] {
        let bytes = calls_on_one_list(module, name, 10_000, 1_000);
        assert!(vm::run(&bytes, tight).is_ok(), "{module}.{name}");
    }
    // A data class's arguments, and NEWOBJ_EX's keyword arguments, are shared too.
    let mut p = P::default()
        .proto(2)
        .global(
            "torch.distributed.checkpoint.metadata",
            "ChunkStorageMetadata",
        )
        .put(0)
        .op(b'(');
    for _ in 0..10_000 {
        p = p.int(1);
    }
    p = p.op(b't').put(1).op(b'0').op(b'}').put(2).op(b'(');
    for _ in 0..5_000 {
        p = p.int(1).int(2);
    }
    p = p.op(b'u').op(b'0').op(b'}');
    for _ in 0..1_000 {
        p = p.get(0).get(1).op(b'R').op(b'0');
        p = p.get(0).get(1).get(2).op(0x92).op(b'0');
    }
    assert!(vm::run(&p.stop(), tight).is_ok());
}

#[test]
fn a_shared_container_changed_later_is_copied_and_the_copy_counted() {
    // s = set(L); L.append(9): s keeps what L held, as in Python.
    let bytes = P::default()
        .proto(2)
        .op(b']')
        .put(0)
        .int(1)
        .op(b'a')
        .global("builtins", "set")
        .get(0)
        .op(0x85)
        .op(b'R')
        .put(1)
        .op(b'0')
        .int(9)
        .op(b'a')
        .get(1)
        .op(0x86)
        .stop();
    let pickled = run(&bytes).unwrap();
    let Node::Tuple(pair) = pickled.node(pickled.root) else {
        panic!("{:?}", pickled.node(pickled.root));
    };
    let len = |id| match pickled.node(id) {
        Node::List(items) | Node::Set(items) => items.len(),
        other => panic!("{other:?}"),
    };
    assert_eq!((len(pair[0]), len(pair[1])), (2, 1));
    // Copied on each change: each copy is counted, so sharing cannot be turned into copying
    // without bound. set(L); L.append(x), a thousand times over a list of 10,000 items.
    let mut p = P::default().proto(2).op(b']').put(0).op(b'(');
    for _ in 0..10_000 {
        p = p.int(7);
    }
    p = p.op(b'e').global("builtins", "set").put(1).op(b'0');
    for _ in 0..1_000 {
        p = p.get(1).get(0).op(0x85).op(b'R').op(b'0').int(7).op(b'a');
    }
    let fault = vm::run(
        &p.op(b'0').op(b'N').stop(),
        Limits {
            bytes: 4 << 20,
            ..LIMITS
        },
    )
    .unwrap_err();
    assert!(
        fault
            .describe()
            .contains("more than 4194304 bytes of values"),
        "{}",
        fault.describe()
    );
}

#[test]
fn the_walk_of_a_shared_graph_is_bounded_by_the_values_it_has() {
    // node = [tensor]; node = [node, node], 28 times: 2^28 names from about 50 values.
    let mut p = P::default()
        .proto(2)
        .op(b']')
        .tensor("FloatStorage", "0", 1, 0, &[1], &[1])
        .op(b'a')
        .put(0);
    for _ in 0..28 {
        p = p.op(b'0').op(b']').get(0).op(b'a').get(0).op(b'a').put(0);
    }
    let bytes = p.stop();
    let why = state::holdings(&run(&bytes).unwrap()).unwrap_err();
    assert!(why.contains("put in itself or in another"), "{why}");
    // The same dict under two names is read under both, as torch loads it.
    let bytes = P::default()
        .proto(2)
        .op(b'}')
        .put(0)
        .str("w")
        .tensor("FloatStorage", "0", 1, 0, &[1], &[1])
        .op(b's')
        .op(b'0')
        .op(b'}')
        .op(b'(')
        .str("model")
        .get(0)
        .str("ema")
        .get(0)
        .op(b'u')
        .stop();
    let held = state::holdings(&run(&bytes).unwrap()).unwrap();
    let names: Vec<_> = held
        .tensors
        .iter()
        .map(|(n, _)| n.clone().unwrap())
        .collect();
    assert_eq!(names, ["model.w", "ema.w"]);
}
