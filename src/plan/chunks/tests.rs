//! The unit tests of `chunks`: rule words, fused names, gated MLPs.

use super::*;

#[test]
fn layouts_and_replicas_are_read_and_written_back() {
    for (words, shown) in [
        ("", ""),
        ("plain", " plain"),
        ("chunks 2", " chunks 2"),
        ("chunks 1:1", " chunks 2"),
        ("chunks 4:1:1", " chunks 4:1:1"),
        ("replicas 2", " replicas 2"),
        ("chunks 3 replicas 4", " chunks 3 replicas 4"),
        ("replicas 4 plain", " plain replicas 4"),
        (
            "chunks 4:2:2 replicas 1:2:2",
            " chunks 4:2:2 replicas 1:2:2",
        ),
        ("replicas 1:2:2 chunks 3", " chunks 3 replicas 1:2:2"),
    ] {
        let words: Vec<&str> = words.split_whitespace().collect();
        assert_eq!(parse(&words).unwrap().to_string(), shown, "{words:?}");
    }
    for (words, says) in [
        ("chunks", "needs a count or proportions"),
        ("chunks 1", "is neither a count of 2 or more"),
        ("chunks 0:1", "is neither"),
        ("chunks 4:x", "is neither"),
        ("chunks 65", "is neither"),
        ("replicas", "needs a count of 2 or more"),
        ("replicas 1", "needs a count of 2 or more"),
        ("replicas 2 replicas 2", "given twice"),
        ("plain chunks 2", "one of `plain` or `chunks`"),
        ("replicas 1:2:2", "needs `chunks` with as many parts (3)"),
        (
            "chunks 2 replicas 1:2:2",
            "needs `chunks` with as many parts (3)",
        ),
        (
            "plain replicas 1:2",
            "needs `chunks` with as many parts (2)",
        ),
        ("chunks 2 replicas 1:1", "is neither a count of 2 or more"),
        ("chunks 2 replicas 0:2", "is neither"),
        ("chunks 2 replicas 2:x", "is neither"),
        (
            "sideways",
            "`sideways` after the axis is not a word of a rule",
        ),
    ] {
        let words: Vec<&str> = words.split_whitespace().collect();
        let error = parse(&words).unwrap_err();
        assert!(error.contains(says), "{words:?}: {error}");
    }
}

#[test]
fn fused_names_are_found_along_their_fused_axis_only() {
    let none = |_: &str| None;
    let unstated_at = |name: &str, shape: &[u64], axis| {
        unstated(name, shape, axis, &Parts::default(), false, &none).map(|u| u.axis)
    };
    assert_eq!(
        unstated_at("m.layers.0.attn.qkv_proj.weight", &[12, 4], 0),
        Some(0)
    );
    assert_eq!(
        unstated_at("m.layers.0.attn.qkv_proj.bias", &[12], 0),
        Some(0)
    );
    assert_eq!(
        unstated_at("m.layers.0.attn.qkv_proj.weight", &[12, 4], 1),
        None
    );
    // Conv1D: the output features are the last axis.
    assert_eq!(
        unstated_at("transformer.h.0.attn.c_attn.weight", &[4, 12], 1),
        Some(1)
    );
    assert_eq!(
        unstated_at("transformer.h.0.attn.c_attn.weight", &[4, 12], 0),
        None
    );
    assert_eq!(
        unstated_at("transformer.h.0.attn.c_attn.bias", &[12], 0),
        Some(0)
    );
    assert_eq!(unstated_at("encoder.in_proj_weight", &[12, 4], 0), Some(0));
    assert_eq!(unstated_at("in_proj_weight", &[12, 4], 0), Some(0));
    assert_eq!(unstated_at("qkv_proj.weight", &[12, 4], 0), Some(0));
    // Not a fused module's weight or bias.
    assert_eq!(
        unstated_at("m.layers.0.attn.q_proj.weight", &[12, 4], 0),
        None
    );
    assert_eq!(
        unstated_at(
            "d.layers.0.self_attention.linear_qkv.layer_norm_weight",
            &[4],
            0
        ),
        None
    );
    assert_eq!(unstated_at("qkv_proj.weight.scale", &[4], 0), None);
    // A stated layout passes.
    let plain = parse(&["plain"]).unwrap();
    assert!(unstated("a.qkv_proj.weight", &[12, 4], 0, &plain, false, &none).is_none());
    let replicas = parse(&["replicas", "2"]).unwrap();
    assert!(unstated("a.qkv_proj.weight", &[12, 4], 0, &replicas, false, &none).is_some());
}

#[test]
fn a_first_mlp_layer_is_fused_when_twice_its_second_layers_input() {
    let ask = |fc2: Option<Vec<u64>>| {
        let sibling = move |name: &str| {
            assert_eq!(name, "decoder.layers.0.mlp.linear_fc2.weight");
            fc2.clone()
        };
        unstated(
            "decoder.layers.0.mlp.linear_fc1.weight",
            &[16, 8],
            0,
            &Parts::default(),
            false,
            &sibling,
        )
        .is_some()
    };
    assert!(ask(Some(vec![8, 8])), "gated: [gate; up]");
    assert!(!ask(Some(vec![8, 16])), "not gated");
    assert!(ask(None), "cannot tell");
}

#[test]
fn a_fused_qkv_s_proportions_are_told_by_its_output_projection() {
    // Each rank: q 8 rows (o_proj's input), k and v 4 each: 2:1:1.
    let sibling = |name: &str| {
        assert_eq!(name, "m.layers.0.self_attn.o_proj.weight");
        Some(vec![32, 8])
    };
    let at = |words: &str| {
        let words: Vec<&str> = words.split_whitespace().collect();
        let parts = parse(&words).unwrap();
        let found = unstated(
            "m.layers.0.self_attn.qkv_proj.weight",
            &[16, 32],
            0,
            &parts,
            false,
            &sibling,
        );
        found.map(|u| (u.told, u.stated))
    };
    let told = Some([2, 1, 1]);
    assert_eq!(at(""), Some((told, None)));
    assert_eq!(at("chunks 2:1:1"), None);
    assert_eq!(at("chunks 4:2:2"), None);
    // `replicas 1:2:2` widens k and v in a rank's piece: 4:1:1 there is 4:2:2, as told.
    assert_eq!(at("chunks 4:1:1 replicas 1:2:2"), None);
    assert_eq!(at("chunks 3"), Some((told, Some("chunks 3".to_string()))));
    assert_eq!(
        at("chunks 4:1:1"),
        Some((told, Some("chunks 4:1:1".to_string())))
    );
    assert_eq!(at("chunks 2"), Some((told, Some("chunks 2".to_string()))));
    assert_eq!(at("plain"), None);
    // No output projection: nothing to tell.
    let none = |_: &str| None;
    let parts = parse(&["chunks", "3"]).unwrap();
    assert!(unstated("m.qkv_proj.weight", &[16, 32], 0, &parts, false, &none).is_none());
    assert_eq!(qkv_shares(16, 8), Some([2, 1, 1]));
    assert_eq!(qkv_shares(16, 16), None);
    assert_eq!(qkv_shares(15, 8), None);
    assert_eq!(qkv_shares(8, 16), None);
}
