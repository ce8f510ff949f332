//! How one tensor split along an axis runs as DirectML Split dispatches: the mirror of the
//! join's plan (`super`). The tensor is packed in C order; its bytes go to the device as they
//! are and come back as they are, so the parts keep the tensor's byte order.
//!
//! The same two forms as the join's, by Split's own rows of the feature-level tables
//! (`SPLIT_LEVELS`): **native** (the tensor's own type and shape, padded with leading 1s to the
//! lowest rank Split takes) when it runs in one dispatch, else **reinterpreted**: the 4-D split
//! `{1, rounds, len, width}` on axis 2 of its bytes as UINT32, UINT16 or (from feature level
//! 2.1) UINT8 units, the widest that divides every part's run. Dispatches take whole rounds
//! when one round fits the element limit and the buffer budget, else each round is cut into
//! pieces of the input, each split into the parts' byte ranges it covers.

use std::ops::Range;

use super::schedule::{Span, aligned_bytes, bind_packed, greedy_cuts};
use super::sizes::round_up;
use super::{DataType, Device, Form, MAX_ELEMENTS, Schedule, ShapeKey, TensorDesc, braces};
use crate::dtype::{DType, gcd};

/// How one split runs through DirectML.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitPlan {
    /// The form the tensors take.
    pub form: Form,
    /// The element type the operator sees.
    pub data_type: DataType,
    /// Why this form, for `--dry-run`.
    pub why: String,
    /// How the rounds are grouped into dispatches.
    pub schedule: Schedule,
    /// Rounds: the product of the dims before the axis.
    rounds: u64,
    /// Bytes each part takes from each round, in part order (0 for an empty part).
    runs: Vec<u64>,
    /// Elements of `data_type` after the split dimension in the 4-D form.
    width: u64,
    /// Native form: the axis, the input's sizes and each non-empty part's, padded.
    native: Option<(u32, Vec<u32>, Vec<Vec<u32>>)>,
}

/// One output tensor of a dispatch and where it lies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitBound {
    /// Which part it is.
    pub part: usize,
    /// The byte range of that part's data it holds.
    pub bytes: Range<u64>,
    /// Its description.
    pub desc: TensorDesc,
    /// Its binding offset in the dispatch's output buffer, a multiple of `BINDING_ALIGNMENT`.
    pub offset: u64,
}

/// One execution of the Split operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitDispatch {
    /// The split axis (`DML_SPLIT_OPERATOR_DESC::Axis`).
    pub axis: u32,
    /// Its input tensor, at offset 0 of the input buffer.
    pub input: TensorDesc,
    /// The byte range of the tensor's data it reads.
    pub input_bytes: Range<u64>,
    /// Its outputs, in part order, packed into one output buffer.
    pub outputs: Vec<SplitBound>,
    /// Bytes of the output buffer its outputs need.
    pub output_buffer_bytes: u64,
}

impl SplitDispatch {
    /// The key under which its compiled operator can be reused: same types, sizes and axis
    /// (input first, then the outputs).
    pub fn shape_key(&self) -> ShapeKey {
        (
            self.input.data_type.code(),
            self.axis,
            self.outputs.iter().map(|b| b.desc.sizes.clone()).collect(),
            self.input.sizes.clone(),
        )
    }
}

/// Plans splitting a C-order tensor of `dtype` and `shape` along `axis` into parts of `sizes`
/// along it, on `device`; or says why DirectML cannot run it.
pub fn plan(
    dtype: &DType,
    shape: &[u64],
    axis: usize,
    sizes: &[u64],
    device: &Device,
) -> Result<SplitPlan, String> {
    let Some(&along) = shape.get(axis) else {
        return Err(format!(
            "axis {axis} is not an axis of a tensor of rank {}",
            shape.len()
        ));
    };
    if sizes.is_empty() || sizes.iter().sum::<u64>() != along {
        return Err(format!(
            "the parts' sizes {sizes:?} do not add up to the size {along} of axis {axis}"
        ));
    }
    let rounds: u64 = shape[..axis].iter().product();
    let inner: u64 = shape[axis + 1..].iter().product();
    let inner_bytes = dtype
        .bytes_for(inner)
        .filter(|&b| b > 0 || inner == 0)
        .ok_or_else(|| format!("{dtype} rows of {inner} elements are not whole bytes"))?;
    let runs: Vec<u64> = sizes.iter().map(|&s| s * inner_bytes).collect();
    let native = native_form(dtype, shape, axis, device);
    let (form, data_type, why) = match native {
        Ok(data_type) => (
            Form::Native,
            data_type,
            format!(
                "Split at feature level {} takes {data_type} tensors of rank {}: they run as \
                 they are",
                device.level,
                shape.len()
            ),
        ),
        Err(why) => {
            let unit = unit(&runs, device)?;
            let data_type = DataType::unsigned(unit);
            (
                Form::Reinterpreted,
                data_type,
                format!("{why}: its bytes run as {data_type} in the 4-D form split on axis 2"),
            )
        }
    };
    let unit = data_type.size();
    let width = if inner_bytes > 0 && inner_bytes % unit == 0 {
        inner_bytes / unit
    } else {
        1
    };
    let mut planned = SplitPlan {
        form,
        data_type,
        why,
        schedule: Schedule::Whole,
        rounds,
        runs,
        width,
        native: None,
    };
    planned.schedule = planned.schedule_for(device)?;
    if form == Form::Native {
        if planned.schedule == Schedule::Whole {
            let (lowest, _) = device.split_ranks();
            let pad = lowest.saturating_sub(shape.len());
            let padded = |along: u64| -> Vec<u32> {
                let mut dims = vec![1u32; pad];
                dims.extend(shape.iter().enumerate().map(|(d, &size)| {
                    let size = if d == axis { along } else { size };
                    size as u32
                }));
                dims
            };
            let parts = sizes
                .iter()
                .filter(|&&s| s > 0)
                .map(|&s| padded(s))
                .collect();
            planned.native = Some(((pad + axis) as u32, padded(along), parts));
        } else {
            planned.why = format!(
                "Split at feature level {} takes {data_type} tensors, in the 4-D form split on \
                 axis 2 when cut into several dispatches",
                device.level
            );
        }
    }
    Ok(planned)
}

/// The tensor's own DirectML type, when Split at the device's level takes it and its rank,
/// and every dim fits a UINT; else why not.
fn native_form(
    dtype: &DType,
    shape: &[u64],
    axis: usize,
    device: &Device,
) -> Result<DataType, String> {
    let Some(data_type) = DataType::of(dtype) else {
        return Err(format!("{dtype} has no DirectML type"));
    };
    if !device.split_supports(data_type) {
        return Err(
            if data_type == DataType::Float64 && device.level >= super::FeatureLevel::V4_1 {
                "this device does not support FLOAT64 tensors".to_string()
            } else {
                format!(
                    "Split at feature level {} does not take {data_type} tensors",
                    device.level
                )
            },
        );
    }
    let (lowest, highest) = device.split_ranks();
    let rank = shape.len();
    if rank == 0 || rank > highest {
        return Err(format!(
            "Split at feature level {} takes ranks {lowest} to {highest}, not {rank}",
            device.level
        ));
    }
    if shape[axis] == 0 || shape.iter().any(|&d| d > u64::from(u32::MAX)) {
        return Err("a dimension is empty or past DirectML's 32-bit sizes".to_string());
    }
    Ok(data_type)
}

/// The widest unsigned unit (4, 2, or from feature level 2.1 1 byte) that divides every run.
fn unit(runs: &[u64], device: &Device) -> Result<u64, String> {
    let common = runs.iter().copied().fold(0, gcd);
    if common == 0 {
        return Ok(4);
    }
    let byte_units = device.split_supports(DataType::UInt8);
    [4, 2, 1]
        .into_iter()
        .find(|&u| common % u == 0 && (u > 1 || byte_units))
        .ok_or_else(|| {
            let odd = runs.iter().position(|r| r % 2 == 1).unwrap_or(0);
            format!(
                "Split at feature level {} has no 8-bit type, and part {}'s runs ({} bytes) are \
                 not whole 16-bit units; feature level 2.1 (DirectML 1.1) adds UINT8",
                device.level,
                odd + 1,
                runs[odd]
            )
        })
}

impl SplitPlan {
    fn unit(&self) -> u64 {
        self.data_type.size()
    }

    /// Bytes of one round: the tensor's bytes from one index before the axis.
    fn round_bytes(&self) -> u64 {
        self.runs.iter().sum()
    }

    /// Whether dispatches of `rounds` rounds stay within the element limit and the budget.
    fn rounds_fit(&self, rounds: u64, device: &Device) -> bool {
        let input = rounds.saturating_mul(self.round_bytes());
        let outputs = aligned_bytes(self.active().map(|(_, run)| run), rounds);
        input / self.unit() <= MAX_ELEMENTS
            && rounds <= u64::from(u32::MAX)
            && round_up(input, 4) <= device.max_buffer
            && outputs <= device.max_buffer
    }

    fn schedule_for(&self, device: &Device) -> Result<Schedule, String> {
        if self.round_bytes() > 0 && self.rounds > 0 && self.width > u64::from(u32::MAX) {
            return Ok(Schedule::Pieces(self.cuts(device)?));
        }
        Schedule::fewest(
            self.rounds,
            self.round_bytes(),
            |rounds| self.rounds_fit(rounds, device),
            || self.cuts(device),
        )
    }

    /// Where to cut a round too large for one dispatch: greedily, each piece taking as many
    /// bytes of consecutive parts' runs as its output buffer (each binding aligned) and its
    /// input can hold. Every round is cut at the same places.
    fn cuts(&self, device: &Device) -> Result<Vec<u64>, String> {
        let unit = self.unit();
        greedy_cuts(
            self.runs.iter().copied(),
            device.max_buffer,
            unit,
            unit,
            "split",
        )
    }

    /// How many dispatches run.
    pub fn dispatch_count(&self) -> u64 {
        self.schedule
            .dispatch_count(self.rounds, self.round_bytes())
    }

    /// The dispatches, in order: each part's bytes come out front to back.
    pub fn dispatches(&self) -> impl Iterator<Item = SplitDispatch> + '_ {
        (0..self.dispatch_count()).map(move |index| self.dispatch(index))
    }

    /// Dispatch `index` (below `dispatch_count`).
    pub fn dispatch(&self, index: u64) -> SplitDispatch {
        match self.schedule.span(index, self.rounds) {
            Span::Whole => match &self.native {
                Some((axis, input, parts)) => {
                    let outputs = self
                        .active()
                        .zip(parts)
                        .map(|((part, run), sizes)| (part, 0..run * self.rounds, sizes.clone()))
                        .collect();
                    self.assemble(*axis, input.clone(), 0, outputs)
                }
                None => self.rounds_dispatch(0, self.rounds),
            },
            Span::Rounds { first, count } => self.rounds_dispatch(first, count),
            Span::Piece { round, range } => self.piece_dispatch(round, range),
        }
    }

    /// The non-empty parts and their runs.
    fn active(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.runs
            .iter()
            .copied()
            .enumerate()
            .filter(|&(_, run)| run > 0)
    }

    fn rounds_dispatch(&self, first: u64, count: u64) -> SplitDispatch {
        let unit = self.unit();
        let sizes = |run: u64| {
            vec![
                1,
                count as u32,
                (run / unit / self.width) as u32,
                self.width as u32,
            ]
        };
        let outputs = self
            .active()
            .map(|(part, run)| (part, first * run..(first + count) * run, sizes(run)))
            .collect();
        let round = self.round_bytes();
        self.assemble(2, sizes(round), first * round, outputs)
    }

    fn piece_dispatch(&self, round: u64, range: Range<u64>) -> SplitDispatch {
        let unit = self.unit();
        let sizes = |bytes: u64| vec![1, 1, (bytes / unit) as u32, 1];
        let mut outputs = Vec::new();
        let mut at = 0;
        for (part, run) in self.runs.iter().copied().enumerate() {
            let (start, end) = (range.start.max(at), range.end.min(at + run));
            if start < end {
                let base = round * run;
                outputs.push((
                    part,
                    base + (start - at)..base + (end - at),
                    sizes(end - start),
                ));
            }
            at += run;
        }
        let input = sizes(range.end - range.start);
        self.assemble(2, input, round * self.round_bytes() + range.start, outputs)
    }

    fn assemble(
        &self,
        axis: u32,
        input: Vec<u32>,
        input_start: u64,
        parts: Vec<(usize, Range<u64>, Vec<u32>)>,
    ) -> SplitDispatch {
        let sizes = parts.iter().map(|(_, _, sizes)| sizes.clone());
        let (packed, output_buffer_bytes) = bind_packed(self.data_type, sizes);
        let outputs = parts
            .into_iter()
            .zip(packed)
            .map(|((part, bytes, _), (desc, offset))| SplitBound {
                part,
                bytes,
                desc,
                offset,
            })
            .collect();
        let input = TensorDesc::packed(self.data_type, input);
        let input_bytes = input_start..input_start + input.data_bytes();
        SplitDispatch {
            axis,
            input,
            input_bytes,
            outputs,
            output_buffer_bytes,
        }
    }

    /// One line for `--dry-run`: the form, the first dispatch's shapes, and the schedule.
    pub fn describe(&self) -> String {
        let count = self.dispatch_count();
        if count == 0 {
            return "nothing to move: no DirectML dispatch".to_string();
        }
        let first = self.dispatch(0);
        let shapes: Vec<String> = first
            .outputs
            .iter()
            .map(|b| braces(&b.desc.sizes))
            .collect();
        format!(
            "{} {} -> {} on axis {}, {count} dispatch{}; {}",
            self.data_type,
            braces(&first.input.sizes),
            shapes.join(" + "),
            first.axis,
            if count == 1 { "" } else { "es" },
            self.why
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::directml::plan::{BINDING_ALIGNMENT, FeatureLevel};

    fn device(level: &str, max_buffer: u64) -> Device {
        Device {
            level: FeatureLevel::parse(level).unwrap(),
            float64: true,
            max_buffer,
        }
    }

    /// The backend's rows are the ones `--spec directml` checks a split against.
    #[test]
    fn the_backend_and_the_spec_check_read_the_same_split_table() {
        use crate::backend::directml::plan::SPLIT_LEVELS;
        use crate::plan::spec::directml_split::SPLIT_ROWS;
        assert_eq!(SPLIT_LEVELS.len(), SPLIT_ROWS.len());
        for (backend, spec) in SPLIT_LEVELS.iter().zip(&SPLIT_ROWS) {
            assert_eq!((backend.0.major, backend.0.minor), spec.0);
            assert_eq!(backend.1, spec.1);
            assert_eq!(backend.2, spec.2);
        }
    }

    /// DirectML's Split on packed bytes, as its docs define it: for each index before the
    /// axis, each output's slab along it in turn.
    fn reference_split(input: &[u8], d: &SplitDispatch, itemsize: u64) -> Vec<Vec<u8>> {
        let axis = d.axis as usize;
        let sizes = &d.input.sizes;
        let outer: u64 = sizes[..axis].iter().map(|&s| u64::from(s)).product();
        let inner: u64 = sizes[axis + 1..].iter().map(|&s| u64::from(s)).product();
        let mut outs: Vec<Vec<u8>> = d.outputs.iter().map(|_| Vec::new()).collect();
        let mut at = 0usize;
        for _ in 0..outer {
            for (out, bound) in outs.iter_mut().zip(&d.outputs) {
                assert_eq!(bound.desc.sizes.len(), sizes.len());
                for (dim, (&o, &i)) in bound.desc.sizes.iter().zip(sizes).enumerate() {
                    assert!(dim == axis || o == i, "sizes differ off the axis");
                }
                let run = (u64::from(bound.desc.sizes[axis]) * inner * itemsize) as usize;
                out.extend_from_slice(&input[at..at + run]);
                at += run;
            }
        }
        assert_eq!(at, input.len(), "the outputs' sizes add up to the input's");
        outs
    }

    /// A plan, the parts its dispatches made, and the parts a plain split makes.
    type Outcome = (SplitPlan, Vec<Vec<u8>>, Vec<Vec<u8>>);

    /// Plans the split and runs its dispatches through `reference_split`, checking every
    /// limit; returns each part's bytes, or why DirectML declined.
    fn run(
        dtype: &str,
        shape: &[u64],
        axis: usize,
        sizes: &[u64],
        device: &Device,
    ) -> Result<Outcome, String> {
        let dtype = DType::from_name(dtype).unwrap();
        let elements: u64 = shape.iter().product();
        let data: Vec<u8> = (0..elements * dtype.itemsize())
            .map(|i| (i * 7 + i / 251) as u8)
            .collect();
        let inner: u64 = shape[axis + 1..].iter().product();
        let rounds: u64 = shape[..axis].iter().product();
        let mut want: Vec<Vec<u8>> = sizes.iter().map(|_| Vec::new()).collect();
        let mut at = 0usize;
        for _ in 0..rounds {
            for (part, size) in want.iter_mut().zip(sizes) {
                let run = (size * inner * dtype.itemsize()) as usize;
                part.extend_from_slice(&data[at..at + run]);
                at += run;
            }
        }
        let plan = plan(&dtype, shape, axis, sizes, device)?;
        let mut got: Vec<Vec<u8>> = sizes.iter().map(|_| Vec::new()).collect();
        let mut read = 0;
        for d in plan.dispatches() {
            assert_eq!(d.input_bytes.start, read, "the input is read front to back");
            read = d.input_bytes.end;
            assert!(d.input.total_bytes <= device.max_buffer);
            assert!(d.output_buffer_bytes <= device.max_buffer);
            assert!(d.input.elements() <= MAX_ELEMENTS);
            let input = &data[d.input_bytes.start as usize..d.input_bytes.end as usize];
            let outs = reference_split(input, &d, plan.data_type.size());
            for (bound, bytes) in d.outputs.iter().zip(outs) {
                assert_eq!(bound.offset % BINDING_ALIGNMENT, 0);
                let part = &mut got[bound.part];
                assert_eq!(bound.bytes.start, part.len() as u64, "each part in order");
                assert_eq!(bound.bytes.end - bound.bytes.start, bytes.len() as u64);
                part.extend_from_slice(&bytes);
            }
        }
        assert_eq!(read, data.len() as u64, "every byte of the input is read");
        Ok((plan, got, want))
    }

    #[test]
    fn a_float32_tensor_runs_as_it_is_where_split_takes_it() {
        let (plan, got, want) = run(
            "float32",
            &[2, 6, 3],
            1,
            &[2, 1, 3],
            &device("4.1", 1 << 30),
        )
        .unwrap();
        assert_eq!(plan.form, Form::Native);
        assert_eq!(plan.dispatch(0).input.sizes, vec![2, 6, 3]);
        assert_eq!(plan.dispatch(0).outputs[1].desc.sizes, vec![2, 1, 3]);
        assert_eq!(got, want);
        // Feature level 1.0 takes rank 4 only: padded with a leading 1.
        let (plan, got, want) = run(
            "float32",
            &[2, 6, 3],
            1,
            &[2, 1, 3],
            &device("1.0", 1 << 30),
        )
        .unwrap();
        assert_eq!(plan.dispatch(0).input.sizes, vec![1, 2, 6, 3]);
        assert_eq!(plan.dispatch(0).axis, 2);
        assert_eq!(got, want);
    }

    #[test]
    fn types_and_ranks_split_lacks_run_as_bytes_or_are_declined() {
        let (plan, got, want) =
            run("bfloat16", &[3, 5], 1, &[2, 3], &device("1.0", 1 << 30)).unwrap();
        assert_eq!(plan.form, Form::Reinterpreted);
        assert_eq!(plan.data_type, DataType::UInt16);
        assert_eq!(got, want);
        let (plan, _, _) = run("int8", &[4], 0, &[1, 3], &device("4.1", 1 << 30)).unwrap();
        assert_eq!(plan.form, Form::Native);
        // Split at 3.0 takes 1 to 8 dimensions (Join 4 to 5): rank 6 and rank 2 run as
        // they are, unpadded; rank 9 is past every level's ranks.
        let (plan, got, want) = run(
            "int8",
            &[2, 2, 2, 2, 2, 2],
            0,
            &[1, 1],
            &device("3.0", 1 << 30),
        )
        .unwrap();
        assert_eq!((plan.form, plan.data_type), (Form::Native, DataType::Int8));
        assert_eq!(plan.dispatch(0).input.sizes, vec![2; 6]);
        assert_eq!(got, want);
        let (plan, _, _) = run("int16", &[3, 5], 1, &[2, 3], &device("3.0", 1 << 30)).unwrap();
        assert_eq!(plan.dispatch(0).input.sizes, vec![3, 5]);
        let (plan, _, _) = run(
            "int8",
            &[1, 1, 1, 1, 1, 1, 1, 2, 2],
            0,
            &[1],
            &device("3.0", 1 << 30),
        )
        .unwrap();
        assert_eq!(
            (plan.form, plan.data_type),
            (Form::Reinterpreted, DataType::UInt32)
        );
        assert!(plan.why.contains("ranks 1 to 8, not 9"), "{}", plan.why);
        // No 8-bit type at 1.0: odd runs are declined, naming the level that adds UINT8.
        let why = run("uint8", &[3, 3], 1, &[1, 2], &device("1.0", 1 << 30)).unwrap_err();
        assert!(why.contains("feature level 2.1"), "{why}");
    }

    #[test]
    fn small_budgets_split_the_rounds_then_cut_each_round_into_pieces() {
        let (plan, got, want) =
            run("float32", &[64, 10], 1, &[3, 7], &device("4.1", 1024)).unwrap();
        assert!(
            matches!(plan.schedule, Schedule::Rounds(_)),
            "{:?}",
            plan.schedule
        );
        assert_eq!(got, want);
        let (plan, got, want) = run(
            "uint8",
            &[5000],
            0,
            &[1, 2999, 0, 2000],
            &device("4.1", 1024),
        )
        .unwrap();
        assert!(
            matches!(plan.schedule, Schedule::Pieces(_)),
            "{:?}",
            plan.schedule
        );
        assert!(plan.dispatch_count() > 5);
        assert_eq!(got, want);
    }

    proptest::proptest! {
        #[test]
        fn every_plan_gives_the_cpu_split(
            shape in proptest::collection::vec(1u64..6, 1..6),
            axis_pick in 0usize..8,
            cuts in proptest::collection::vec(0u64..12, 0..4),
            dtype in proptest::sample::select(vec!["float32", "int8", "float16", "int64",
                "bool", "complex64", "float64", "uint16"]),
            level in proptest::sample::select(vec!["1.0", "2.1", "3.0", "4.1", "6.4"]),
            budget in proptest::sample::select(vec![256u64, 1000, 4096, 1 << 30]),
        ) {
            let axis = axis_pick % shape.len();
            let mut shape = shape;
            shape[axis] += cuts.iter().sum::<u64>() % 7;
            let along = shape[axis];
            let mut points: Vec<u64> = cuts.iter().map(|c| c % (along + 1)).collect();
            points.sort_unstable();
            let mut sizes = Vec::new();
            let mut last = 0;
            for p in points.into_iter().chain([along]) {
                sizes.push(p - last);
                last = p;
            }
            match run(dtype, &shape, axis, &sizes, &device(level, budget)) {
                Ok((_, got, want)) => proptest::prop_assert_eq!(got, want),
                Err(why) => proptest::prop_assert!(
                    why.contains("no 8-bit type") || why.contains("cannot hold a piece"),
                    "{}", why
                ),
            }
        }
    }
}
