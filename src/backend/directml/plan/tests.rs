//! Planning tests: every feature level and element type, the worked examples of
//! `docs/rules.md` in both forms, the splits, and a reference Join that executes every plan's
//! dispatches on bytes and compares them with the CPU engine's order of runs.

use super::*;
use crate::dtype::{ByteOrder, DType};
use crate::format::TensorInfo;
use crate::plan::InputPlan;

const UNLIMITED: u64 = u64::MAX / 4;

fn device(level: FeatureLevel) -> Device {
    Device {
        level,
        float64: true,
        max_buffer: UNLIMITED,
    }
}

fn level(text: &str) -> FeatureLevel {
    FeatureLevel::parse(text).unwrap()
}

fn info(dtype: &DType, shape: &[u64], layout: Layout) -> TensorInfo {
    let elements: u64 = shape.iter().product();
    TensorInfo {
        dtype: dtype.clone(),
        byte_order: ByteOrder::Little,
        swaps: Swaps::None,
        shape: shape.into(),
        layout,
        data_offset: 0,
        data_len: dtype.bytes_for(elements).unwrap(),
    }
}

fn job(dtype: DType, shapes: &[&[u64]], axis: usize) -> JoinPlan {
    let inputs: Vec<(&[u64], Layout)> = shapes.iter().map(|&s| (s, Layout::C)).collect();
    laid_out_job(dtype, &inputs, axis)
}

/// A job over inputs of these shapes, each stored in its own layout.
fn laid_out_job(dtype: DType, inputs: &[(&[u64], Layout)], axis: usize) -> JoinPlan {
    let infos: Vec<TensorInfo> = inputs
        .iter()
        .map(|&(shape, layout)| info(&dtype, shape, layout))
        .collect();
    let refs: Vec<&TensorInfo> = infos.iter().collect();
    crate::plan::plan(&refs, axis, None)
}

fn sizes(dispatch: &Dispatch) -> Vec<Vec<u32>> {
    dispatch
        .inputs
        .iter()
        .map(|b| b.desc.sizes.clone())
        .collect()
}

fn only(plan: &DmlPlan) -> Dispatch {
    assert_eq!(plan.dispatch_count(), 1, "{plan:?}");
    plan.dispatch(0)
}

// --- Descriptions --------------------------------------------------------------------------

#[test]
fn tensor_sizes_follow_dml_calc_buffer_tensor_size() {
    assert_eq!(buffer_tensor_size(DataType::Float32, &[1, 1, 2, 3]), 24);
    // 3 UINT16 are 6 bytes, bound as 2 DWORDs.
    assert_eq!(buffer_tensor_size(DataType::UInt16, &[1, 1, 1, 3]), 8);
    assert_eq!(buffer_tensor_size(DataType::UInt8, &[5]), 8);
    assert_eq!(buffer_tensor_size(DataType::Float64, &[2, 2]), 32);
}

#[test]
fn feature_levels_round_trip_through_dml_feature_level_values() {
    // DML_FEATURE_LEVEL_1_0 = 0x1000, _2_1 = 0x2100, _4_1 = 0x4100, _6_4 = 0x6400.
    for (code, text) in [
        (0x1000, "1.0"),
        (0x2100, "2.1"),
        (0x4100, "4.1"),
        (0x6400, "6.4"),
    ] {
        let parsed = level(text);
        assert_eq!(FeatureLevel::from_code(code), parsed);
        assert_eq!(parsed.code(), code);
        assert_eq!(parsed.to_string(), text);
    }
    assert!(KNOWN_LEVELS.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(KNOWN_LEVELS[0], FeatureLevel::V1_0);
}

#[test]
fn data_types_have_directml_values_and_sizes() {
    let expected = [
        ("FLOAT32", 1, 4),
        ("FLOAT16", 2, 2),
        ("UINT32", 3, 4),
        ("UINT16", 4, 2),
        ("UINT8", 5, 1),
        ("INT32", 6, 4),
        ("INT16", 7, 2),
        ("INT8", 8, 1),
        ("FLOAT64", 9, 8),
        ("UINT64", 10, 8),
        ("INT64", 11, 8),
    ];
    for (row, (name, code, size)) in DATA_TYPES.iter().zip(expected) {
        assert_eq!(
            (row.0.name(), row.0.code(), row.0.size()),
            (name, code, size)
        );
    }
    assert_eq!(DataType::of(&DType::Float32), Some(DataType::Float32));
    assert_eq!(DataType::of(&DType::UInt8), Some(DataType::UInt8));
    for none in [
        DType::Bool,
        DType::BFloat16,
        DType::Complex64,
        DType::Float4,
    ] {
        assert_eq!(DataType::of(&none), None, "{none}");
    }
}

#[test]
fn join_rules_per_feature_level_match_spec_md() {
    let at = |text| device(level(text));
    assert_eq!(at("1.0").join_ranks(), (4, 4));
    assert_eq!(at("2.0").join_ranks(), (4, 4));
    assert_eq!(at("2.1").join_ranks(), (4, 4));
    assert_eq!(at("3.0").join_ranks(), (4, 5));
    assert_eq!(at("3.1").join_ranks(), (4, 5));
    assert_eq!(at("4.1").join_ranks(), (1, 8));
    assert_eq!(at("6.4").join_ranks(), (1, 8));
    assert!(!at("2.0").join_supports(DataType::Int8));
    assert!(!at("1.0").join_supports(DataType::UInt8));
    assert!(at("2.1").join_supports(DataType::UInt8));
    assert!(!at("3.0").join_supports(DataType::Int64));
    assert!(at("4.1").join_supports(DataType::UInt64));
    assert!(at("1.0").join_supports(DataType::Float16));
    let no_doubles = Device {
        float64: false,
        ..at("5.0")
    };
    assert!(!no_doubles.join_supports(DataType::Float64));
    assert!(no_doubles.join_supports(DataType::Int64));
}

#[test]
fn buffer_budgets_keep_shared_memory_adapters_small() {
    assert_eq!(buffer_budget(8 << 30, false), 2 << 30);
    assert_eq!(buffer_budget(4 << 30, false), 1 << 30);
    assert_eq!(buffer_budget(8 << 30, true), SHARED_MEMORY_BUFFER);
    assert_eq!(buffer_budget(0, false), SHARED_MEMORY_BUFFER);
    assert_eq!(buffer_budget(64 << 20, false), SHARED_MEMORY_BUFFER);
    assert_eq!(capped_budget(1 << 30, None), Ok(1 << 30));
    assert_eq!(capped_budget(1 << 30, Some("4096")), Ok(4096));
    assert_eq!(
        capped_budget(4096, Some("8192")),
        Ok(4096),
        "only ever lowered"
    );
    assert!(
        capped_budget(4096, Some("4k"))
            .unwrap_err()
            .contains(BUDGET_VARIABLE)
    );
}

// --- The worked examples of docs/rules.md, as they are ------------------------------------------

#[test]
fn directml_example_1_runs_as_it_is_at_every_level() {
    let job = job(DType::Float32, &[&[1, 1, 2, 3], &[1, 1, 2, 4]], 3);
    for text in ["1.0", "2.1", "3.0", "4.1", "5.0"] {
        let plan = plan(&job, &device(level(text))).unwrap();
        assert_eq!(plan.form, Form::Native, "{text}");
        assert_eq!(plan.data_type, DataType::Float32);
        let d = only(&plan);
        assert_eq!(d.axis, 3);
        assert_eq!(sizes(&d), [vec![1, 1, 2, 3], vec![1, 1, 2, 4]]);
        assert_eq!(d.output.sizes, [1, 1, 2, 7]);
        assert_eq!(d.inputs[0].desc.total_bytes, 24);
        assert_eq!(d.inputs[1].desc.total_bytes, 32);
        assert_eq!(d.output.total_bytes, 56);
        assert_eq!((d.inputs[0].offset, d.inputs[1].offset), (0, 256));
        assert_eq!(d.input_buffer_bytes, 256 + 32);
        assert_eq!(
            (d.inputs[0].source.clone(), d.inputs[1].source.clone()),
            (0..24, 0..32)
        );
        assert_eq!(d.output_bytes, 0..56);
    }
}

#[test]
fn directml_example_2_joins_on_each_axis() {
    let three: [&[u64]; 3] = [&[1, 1, 2, 2]; 3];
    for (axis, out) in [(1, [1, 3, 2, 2]), (2, [1, 1, 6, 2]), (3, [1, 1, 2, 6])] {
        let plan = plan(
            &job(DType::Float32, &three, axis),
            &device(FeatureLevel::V1_0),
        )
        .unwrap();
        let d = only(&plan);
        assert_eq!(d.axis, axis as u32);
        assert_eq!(d.output.sizes, out);
        assert_eq!(sizes(&d), vec![vec![1, 1, 2, 2]; 3]);
        assert_eq!(
            d.inputs.iter().map(|b| b.offset).collect::<Vec<_>>(),
            [0, 256, 512]
        );
    }
}

#[test]
fn openvino_example_runs_as_it_is() {
    let job = job(
        DType::Float32,
        &[&[1, 8, 50, 50], &[1, 16, 50, 50], &[1, 32, 50, 50]],
        1,
    );
    let d = only(&plan(&job, &device(FeatureLevel::V1_0)).unwrap());
    assert_eq!(d.output.sizes, [1, 56, 50, 50]);
    assert_eq!(d.output.total_bytes, 56 * 2500 * 4);
    let offsets: Vec<u64> = d.inputs.iter().map(|b| b.offset).collect();
    // 80,000 bytes, then 160,000: each offset rounded up to 256.
    assert_eq!(offsets, [0, 80_128, 240_128]);
}

#[test]
fn lower_ranks_are_padded_to_four_dimensions_below_level_4_1() {
    let job = job(DType::Float32, &[&[2, 3], &[2, 4]], 1);
    let d = only(&plan(&job, &device(FeatureLevel::V1_0)).unwrap());
    assert_eq!((d.axis, d.output.sizes.clone()), (3, vec![1, 1, 2, 7]));
    let d = only(&plan(&job, &device(FeatureLevel::V4_1)).unwrap());
    assert_eq!((d.axis, d.output.sizes.clone()), (1, vec![2, 7]));
    assert_eq!(sizes(&d), [vec![2, 3], vec![2, 4]]);
}

#[test]
fn fortran_inputs_run_in_storage_order() {
    let job = laid_out_job(
        DType::Int32,
        &[(&[2, 3], Layout::Fortran), (&[4, 3], Layout::Fortran)],
        0,
    );
    assert_eq!(job.layout, Layout::Fortran);
    let d = only(&plan(&job, &device(FeatureLevel::V4_1)).unwrap());
    // Storage shapes are the reversed shapes [3, 2] and [3, 4], joined on their last axis.
    assert_eq!((d.axis, d.output.sizes.clone()), (1, vec![3, 6]));
    assert_eq!(sizes(&d), [vec![3, 2], vec![3, 4]]);
}

// --- The reinterpreted form ------------------------------------------------------------------

#[test]
fn example_1_as_float64_below_4_1_is_uint32_pairs() {
    let job = job(DType::Float64, &[&[1, 1, 2, 3], &[1, 1, 2, 4]], 3);
    let plan = plan(&job, &device(FeatureLevel::V3_0)).unwrap();
    assert_eq!(plan.form, Form::Reinterpreted);
    assert_eq!(plan.data_type, DataType::UInt32);
    assert!(plan.why.contains("does not take FLOAT64"), "{}", plan.why);
    let d = only(&plan);
    // {1, outer, axis_len, inner * 8 / 4} joined on axis 2.
    assert_eq!(d.axis, 2);
    assert_eq!(sizes(&d), [vec![1, 2, 3, 2], vec![1, 2, 4, 2]]);
    assert_eq!(d.output.sizes, [1, 2, 7, 2]);
    assert_eq!(d.output.total_bytes, 112);
}

#[test]
fn float64_at_4_1_depends_on_the_device() {
    let job = job(DType::Float64, &[&[1, 1, 2, 3], &[1, 1, 2, 4]], 3);
    let full = plan(&job, &device(FeatureLevel::V4_1)).unwrap();
    assert_eq!(
        (full.form, full.data_type),
        (Form::Native, DataType::Float64)
    );
    let without = Device {
        float64: false,
        ..device(FeatureLevel::V4_1)
    };
    let plan = plan(&job, &without).unwrap();
    assert_eq!(plan.form, Form::Reinterpreted);
    assert!(
        plan.why.contains("does not support FLOAT64"),
        "{}",
        plan.why
    );
}

#[test]
fn example_2_as_int64_at_3_0_is_uint32() {
    let three: [&[u64]; 3] = [&[1, 1, 2, 2]; 3];
    let plan = plan(&job(DType::Int64, &three, 3), &device(FeatureLevel::V3_0)).unwrap();
    assert_eq!(plan.data_type, DataType::UInt32);
    let d = only(&plan);
    assert_eq!(sizes(&d), vec![vec![1, 2, 2, 2]; 3]);
    assert_eq!(d.output.sizes, [1, 2, 6, 2]);
}

#[test]
fn openvino_example_as_bfloat16_is_uint32_over_the_inner_block() {
    let job = job(
        DType::BFloat16,
        &[&[1, 8, 50, 50], &[1, 16, 50, 50], &[1, 32, 50, 50]],
        1,
    );
    let plan = plan(&job, &device(FeatureLevel::V1_0)).unwrap();
    assert!(
        plan.why.starts_with("bfloat16 has no DirectML type"),
        "{}",
        plan.why
    );
    let d = only(&plan);
    // inner = 2500 elements of 2 bytes = 1250 UINT32.
    assert_eq!(
        sizes(&d),
        [
            vec![1, 1, 8, 1250],
            vec![1, 1, 16, 1250],
            vec![1, 1, 32, 1250]
        ]
    );
    assert_eq!(d.output.sizes, [1, 1, 56, 1250]);
}

#[test]
fn int8_takes_uint16_pairs_at_1_0_when_runs_are_even() {
    // Runs of 4 and 6 bytes: UINT16, one row of units per run (inner is 1 byte).
    let job = job(DType::Int8, &[&[2, 4], &[2, 6]], 1);
    let plan = plan(&job, &device(FeatureLevel::V1_0)).unwrap();
    assert_eq!(
        (plan.form, plan.data_type),
        (Form::Reinterpreted, DataType::UInt16)
    );
    let d = only(&plan);
    assert_eq!(sizes(&d), [vec![1, 2, 2, 1], vec![1, 2, 3, 1]]);
    assert_eq!(d.output.sizes, [1, 2, 5, 1]);
    // At 2.1 INT8 is in the table, and rank 2 pads to 4.
    let plan = super::plan(&job, &device(FeatureLevel::V2_1)).unwrap();
    assert_eq!((plan.form, plan.data_type), (Form::Native, DataType::Int8));
}

#[test]
fn odd_byte_runs_need_level_2_1() {
    let odd = job(DType::Bool, &[&[1, 1, 2, 3], &[1, 1, 2, 4]], 3);
    let why = plan(&odd, &device(level("2.0"))).unwrap_err();
    assert!(
        why.contains("no 8-bit type") && why.contains("input 1") && why.contains("2.1"),
        "{why}"
    );
    let plan = plan(&odd, &device(FeatureLevel::V2_1)).unwrap();
    assert_eq!(plan.data_type, DataType::UInt8);
    let d = only(&plan);
    assert_eq!(sizes(&d), [vec![1, 2, 3, 1], vec![1, 2, 4, 1]]);
}

#[test]
fn sub_byte_floats_move_as_bytes() {
    // float4: runs of 4 and 6 elements are 2 and 3 bytes.
    let job = job(DType::Float4, &[&[2, 4], &[2, 6]], 1);
    assert!(plan(&job, &device(FeatureLevel::V1_0)).is_err());
    let d = only(&plan(&job, &device(FeatureLevel::V2_1)).unwrap());
    assert_eq!(sizes(&d), [vec![1, 2, 2, 1], vec![1, 2, 3, 1]]);
}

#[test]
fn ranks_outside_the_row_are_reinterpreted() {
    let six: &[u64] = &[1, 1, 1, 1, 2, 3];
    let job = job(DType::Float32, &[six, six], 5);
    let plan = plan(&job, &device(FeatureLevel::V3_0)).unwrap();
    assert_eq!(plan.form, Form::Reinterpreted);
    assert!(plan.why.contains("ranks 4 to 5, not 6"), "{}", plan.why);
    assert_eq!(only(&plan).output.sizes, [1, 2, 6, 1]);
    let native = super::plan(&job, &device(FeatureLevel::V4_1)).unwrap();
    assert_eq!(only(&native).output.sizes, [1, 1, 1, 1, 2, 6]);
}

#[test]
fn mixed_layouts_are_declined() {
    let job = laid_out_job(
        DType::Float32,
        &[(&[2, 3], Layout::C), (&[2, 3], Layout::Fortran)],
        1,
    );
    let why = plan(&job, &device(FeatureLevel::V4_1)).unwrap_err();
    assert!(why.contains("input 2 is stored in Fortran order"), "{why}");
}

#[test]
fn empty_inputs_are_left_out_and_empty_jobs_dispatch_nothing() {
    let one_empty = job(DType::Float32, &[&[1, 1, 2, 0], &[1, 1, 2, 4]], 3);
    let d = only(&plan(&one_empty, &device(FeatureLevel::V1_0)).unwrap());
    assert_eq!(d.inputs.len(), 1);
    assert_eq!(d.inputs[0].input, 1);
    let empty = job(DType::Float32, &[&[0, 3], &[0, 3]], 0);
    let plan = plan(&empty, &device(FeatureLevel::V1_0)).unwrap();
    assert_eq!(plan.dispatch_count(), 0);
    assert!(plan.describe().contains("nothing to move"));
}

// --- Splitting --------------------------------------------------------------------------------

/// A job planned without files: `outer` rounds of these runs, in bytes.
fn synthetic(dtype: DType, outer: u64, runs: &[u64]) -> JoinPlan {
    let itemsize = dtype.itemsize();
    let total: u64 = runs.iter().sum();
    JoinPlan {
        axis: 1,
        dtype: dtype.clone(),
        shape: vec![outer, total / itemsize],
        layout: Layout::C,
        outer,
        inputs: runs
            .iter()
            .map(|&run| InputPlan {
                data_offset: 0,
                data_len: run * outer,
                run_bytes: run,
                dtype: dtype.clone(),
                swaps: Swaps::None,
                runs: None,
            })
            .collect(),
        bytes: total * outer,
    }
}

#[test]
fn jobs_over_the_element_limit_split_along_the_rounds() {
    // 2^21 rounds of 2 x 1024 float32: 2^32 elements, one more than a tensor may hold.
    let job = synthetic(DType::Float32, 1 << 21, &[4096, 4096]);
    let plan = plan(&job, &device(FeatureLevel::V4_1)).unwrap();
    assert_eq!(plan.schedule, Schedule::Rounds((1 << 21) - 1));
    assert_eq!(plan.dispatch_count(), 2);
    let first = plan.dispatch(0);
    assert_eq!(first.output.sizes, [1, (1 << 21) - 1, 2048, 1]);
    assert!(first.output.elements() <= MAX_ELEMENTS);
    let last = plan.dispatch(1);
    assert_eq!(last.output.sizes, [1, 1, 2048, 1]);
    assert_eq!(
        last.inputs[1].source,
        ((1 << 21) - 1) * 4096..(1 << 21) * 4096
    );
    assert_eq!(last.output_bytes.end, job.bytes);
    assert_eq!(first.output_bytes.end, last.output_bytes.start);
}

#[test]
fn the_buffer_budget_splits_rounds_and_cuts_large_rounds_into_pieces() {
    let small = Device {
        max_buffer: 4096,
        ..device(FeatureLevel::V1_0)
    };
    let job = synthetic(DType::Float32, 100, &[400, 800]);
    let plan = plan(&job, &small).unwrap();
    // 3 rounds need 3 * 400 bytes, then 3 * 800 at offset 1280: 3680 bytes, and 3600 of
    // output; 4 rounds would need 1792 + 3200 of input.
    assert_eq!(plan.schedule, Schedule::Rounds(3));
    assert_eq!(plan.dispatch_count(), 34);
    assert_eq!(plan.dispatch(33).output.sizes, [1, 1, 300, 1]);
    // One round of 10,000 bytes, cut greedily: input 1's 3000 bytes and the first 1024 of
    // input 2's (at offset 3072, filling the 4096 bytes); the next 3976 of input 2's; then
    // input 3's 2000.
    let job = synthetic(DType::Float32, 1, &[3000, 5000, 2000]);
    let plan = super::plan(&job, &small).unwrap();
    assert_eq!(plan.schedule, Schedule::Pieces(vec![0, 4024, 8000, 10_000]));
    assert_eq!(plan.dispatch_count(), 3);
    let first = plan.dispatch(0);
    assert_eq!(
        (first.inputs[1].offset, first.inputs[1].source.clone()),
        (3072, 0..1024)
    );
    assert_eq!(first.input_buffer_bytes, 4096);
    let second = plan.dispatch(1);
    assert_eq!(second.inputs.len(), 1);
    assert_eq!(
        (second.inputs[0].input, second.inputs[0].source.clone()),
        (1, 1024..5000)
    );
    assert_eq!(second.output.sizes, [1, 1, 994, 1]);
    assert_eq!(plan.dispatch(2).output_bytes, 8000..10_000);
}

#[test]
fn a_split_native_plan_says_it_takes_the_4d_form() {
    let shapes: &[&[u64]] = &[&[4, 2, 3], &[4, 2, 4]];
    let whole = plan(&job(DType::Float32, shapes, 2), &device(level("6.4"))).unwrap();
    assert_eq!(
        (whole.form, &whole.schedule),
        (Form::Native, &Schedule::Whole)
    );
    assert!(whole.describe().ends_with("they run as they are"));
    let small = Device {
        max_buffer: 64,
        ..device(level("6.4"))
    };
    let split = plan(&job(DType::Float32, shapes, 2), &small).unwrap();
    assert_eq!(split.form, Form::Native);
    assert_ne!(split.schedule, Schedule::Whole);
    assert_eq!(split.dispatch(0).output.sizes.len(), 4);
    assert!(
        split
            .describe()
            .ends_with("in the 4-D form joined on axis 2 when split"),
        "{}",
        split.describe()
    );
}

#[test]
fn slabs_are_bounded_and_keep_swapped_elements_whole() {
    let mut job = synthetic(DType::Complex128, 1, &[48 << 20]);
    job.inputs[0].swaps = Swaps::Uniform(8);
    let plan = plan(&job, &device(FeatureLevel::V1_0)).unwrap();
    let slabs: Vec<Range<u64>> = plan.slabs(8..(40 << 20) + 8).collect();
    assert_eq!(slabs.len(), 3);
    assert!(
        slabs
            .iter()
            .all(|s| s.end - s.start <= SLAB && (s.end - s.start) % 8 == 0)
    );
    let mut record = synthetic(DType::Void(12), 3, &[24]);
    record.inputs[0].swaps = Swaps::Ranges(Box::new(vec![(0, 4)]));
    let plan = super::plan(&record, &device(FeatureLevel::V1_0)).unwrap();
    let step = plan.slabs(0..SLAB * 2).next().unwrap();
    assert_eq!(step.end % 12, 0);
}

// --- A reference Join over every plan -------------------------------------------------------

/// DirectML Join on packed tensors of `unit`-byte elements, as its spec's pseudocode has it.
fn reference_join(dispatch: &Dispatch, tensors: &[Vec<u8>], unit: usize) -> Vec<u8> {
    let axis = dispatch.axis as usize;
    let out = &dispatch.output.sizes;
    let outer: usize = out[..axis].iter().map(|&s| s as usize).product();
    let inner: usize = out[axis + 1..].iter().map(|&s| s as usize).product();
    let mut joined = Vec::new();
    for o in 0..outer {
        for (bound, data) in dispatch.inputs.iter().zip(tensors) {
            let run = bound.desc.sizes[axis] as usize * inner * unit;
            joined.extend_from_slice(&data[o * run..(o + 1) * run]);
        }
    }
    joined
}

/// Checks every dispatch's descriptions against DirectML's rules, runs them through the
/// reference Join, and compares the result with the runs in the CPU engine's order.
fn check_by_execution(job: &JoinPlan, device: &Device) -> Result<DmlPlan, String> {
    let plan = plan(job, device)?;
    let data: Vec<Vec<u8>> = job
        .inputs
        .iter()
        .enumerate()
        .map(|(i, p)| {
            (0..p.data_len)
                .map(|b| (b * 7 + i as u64 * 31) as u8)
                .collect()
        })
        .collect();
    let mut expected = Vec::new();
    for round in 0..job.outer {
        for (p, d) in job.inputs.iter().zip(&data) {
            let run = p.run_bytes as usize;
            expected.extend_from_slice(&d[round as usize * run..(round as usize + 1) * run]);
        }
    }
    let (lowest, highest) = device.join_ranks();
    let unit = plan.data_type.size() as usize;
    let mut written = Vec::new();
    for d in plan.dispatches() {
        let rank = d.output.sizes.len();
        assert!(
            (lowest..=highest).contains(&rank),
            "rank {rank} at {}",
            device.level
        );
        assert!(device.join_supports(d.output.data_type));
        assert!((d.axis as usize) < rank);
        let mut end = 0;
        for b in &d.inputs {
            assert_eq!(b.desc.sizes.len(), rank);
            assert!(b.desc.sizes.iter().all(|&s| s > 0), "{:?}", b.desc.sizes);
            for (dim, (&s, &o)) in b.desc.sizes.iter().zip(&d.output.sizes).enumerate() {
                assert!(dim == d.axis as usize || s == o);
            }
            assert!(b.desc.elements() <= MAX_ELEMENTS);
            assert_eq!(b.desc.total_bytes % 4, 0);
            assert_eq!(b.desc.total_bytes, round_up(b.desc.data_bytes(), 4));
            assert_eq!(b.desc.data_bytes(), b.source.end - b.source.start);
            assert_eq!(b.offset % BINDING_ALIGNMENT, 0);
            assert!(b.offset >= end, "bindings overlap");
            end = b.offset + b.desc.total_bytes;
        }
        assert_eq!(d.input_buffer_bytes, end);
        assert!(d.input_buffer_bytes <= device.max_buffer);
        assert!(d.output.total_bytes <= device.max_buffer);
        let joined: u32 = d.inputs.iter().map(|b| b.desc.sizes[d.axis as usize]).sum();
        assert_eq!(joined, d.output.sizes[d.axis as usize]);
        assert_eq!(
            d.output_bytes.start,
            written.len() as u64,
            "output written in order"
        );
        let tensors: Vec<Vec<u8>> = d
            .inputs
            .iter()
            .map(|b| data[b.input][b.source.start as usize..b.source.end as usize].to_vec())
            .collect();
        let out = reference_join(&d, &tensors, unit);
        assert_eq!(out.len() as u64, d.output_bytes.end - d.output_bytes.start);
        written.extend(out);
    }
    assert!(
        written == expected,
        "the dispatches do not reproduce the join"
    );
    Ok(plan)
}

#[test]
fn every_level_and_type_reproduces_the_cpu_order() {
    let types = [
        DType::Float32,
        DType::Float16,
        DType::Float64,
        DType::Int8,
        DType::UInt8,
        DType::Int16,
        DType::UInt16,
        DType::Int32,
        DType::UInt32,
        DType::Int64,
        DType::UInt64,
        DType::Bool,
        DType::BFloat16,
        DType::Complex64,
        DType::Float8E4M3,
        DType::Bytes(3),
    ];
    let shapes: [(&[&[u64]], usize); 6] = [
        (&[&[1, 1, 2, 3], &[1, 1, 2, 4]], 3),
        (&[&[1, 1, 2, 2], &[1, 1, 2, 2], &[1, 1, 2, 2]], 1),
        (&[&[1, 1, 2, 2], &[1, 1, 2, 2], &[1, 1, 2, 2]], 2),
        (&[&[3, 2], &[5, 2]], 0),
        (&[&[2, 3, 4], &[2, 1, 4]], 1),
        (&[&[7], &[9], &[2]], 0),
    ];
    let budgets = [UNLIMITED, 600, 64];
    let mut declined = 0;
    for text in ["1.0", "2.0", "2.1", "3.0", "4.1", "5.0", "6.4"] {
        for dtype in &types {
            for (shapes, axis) in shapes {
                for max_buffer in budgets {
                    let job = job(dtype.clone(), shapes, axis);
                    let device = Device {
                        max_buffer,
                        ..device(level(text))
                    };
                    match check_by_execution(&job, &device) {
                        Ok(_) => {}
                        Err(why) => {
                            // Only odd byte runs below 2.1, or budgets too small for a piece.
                            assert!(
                                why.contains("no 8-bit type") || why.contains("budget"),
                                "{why}"
                            );
                            declined += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(declined > 0);
}

#[test]
fn casts_are_left_to_the_cpu_engine() {
    let mut job = synthetic(DType::Float32, 2, &[12, 20]);
    job.inputs[1].dtype = DType::Float16;
    let declined = plan(&job, &device(FeatureLevel::V4_1)).unwrap_err();
    assert!(
        declined.contains("input 2 is cast from float16 to float32"),
        "{declined}"
    );
}

#[test]
fn kept_tensors_and_scalars_run_as_one_input() {
    let kept = JoinPlan {
        axis: 0,
        dtype: DType::Float32,
        shape: vec![],
        layout: Layout::C,
        outer: 1,
        inputs: vec![InputPlan {
            data_offset: 0,
            data_len: 4,
            run_bytes: 4,
            dtype: DType::Float32,
            swaps: Swaps::None,
            runs: None,
        }],
        bytes: 4,
    };
    let plan = check_by_execution(&kept, &device(FeatureLevel::V4_1)).unwrap();
    assert_eq!(plan.form, Form::Reinterpreted);
    assert_eq!(only(&plan).output.sizes, [1, 1, 1, 1]);
}

proptest::proptest! {
    #[test]
    fn any_split_reproduces_the_join(
        outer in 1u64..6,
        runs in proptest::collection::vec(0u64..40, 1..5),
        itemsize in proptest::sample::select(vec![1u64, 2, 4, 8]),
        max_buffer in 300u64..2000,
        level_index in 0usize..KNOWN_LEVELS.len(),
    ) {
        let dtype = match itemsize {
            1 => DType::UInt8,
            2 => DType::Float16,
            4 => DType::Int32,
            _ => DType::Float64,
        };
        let runs: Vec<u64> = runs.iter().map(|r| r * itemsize).collect();
        let job = synthetic(dtype, outer, &runs);
        let device = Device { max_buffer, ..device(KNOWN_LEVELS[level_index]) };
        if let Err(why) = check_by_execution(&job, &device) {
            proptest::prop_assert!(why.contains("no 8-bit type"), "{}", why);
        }
    }
}
