//! How a `JoinPlan` runs as DirectML Join dispatches: buffer tensor descriptions, binding
//! offsets, the split into dispatches and the slabs the data moves in. No I/O and no FFI, so
//! it builds and is tested on every platform, with or without the `directml` feature.
//!
//! Two forms, chosen by the device's feature level (`docs/rules.md`, "DirectML Join by feature
//! level"):
//! - **native**: the tensors as they are, with their own element type and shape (padded with
//!   leading 1s to the rank the level requires), when Join at that level takes both;
//! - **reinterpreted**: Join only moves bytes, so any job is the 4-D join
//!   `{1, rounds, len_i, width}` on axis 2 of its bytes read as UINT32, UINT16 or (from
//!   feature level 2.1) UINT8 units, whichever is the widest that divides every input's run.
//!   Feature level 1.0 has no 8-bit type: a job whose runs are an odd number of bytes has no
//!   unit there and is declined (widening every byte to 16 bits on the CPU would double the
//!   traffic both ways for a result the CPU engine writes directly).
//!
//! Either form is split along the rounds (the outer dimension) into several dispatches when a
//! tensor would pass DirectML's 2^32-1 element limit or the device's buffer budget, and a
//! single round that is too large on its own is cut into pieces of the output, each the join
//! of consecutive inputs' byte ranges. Every dispatch writes one contiguous range of the
//! output, in order, so the output is still written front to back. Data moves between the
//! files and the device through staging buffers of `SLAB` bytes.

pub use levels::*;
use schedule::Span;
use sizes::{lcm, round_down, round_up};
use std::ops::Range;

use crate::dtype::{Swaps, gcd};
use crate::format::Layout;
use crate::plan::JoinPlan;

/// Elements one buffer tensor may hold: DirectML counts them in a UINT.
pub const MAX_ELEMENTS: u64 = u32::MAX as u64;
/// `DML_MINIMUM_BUFFER_TENSOR_ALIGNMENT`: every buffer binding's offset is a multiple of it.
pub const MIN_BINDING_ALIGNMENT: u64 = 16;
/// The alignment tjoin gives binding offsets: a multiple of the minimum that DirectML's docs
/// call faster, and the one temporary and persistent resources need (tjoin binds those at
/// offset 0).
pub const BINDING_ALIGNMENT: u64 = 256;
const _: () = assert!(BINDING_ALIGNMENT % MIN_BINDING_ALIGNMENT == 0);
/// Bytes of each host-visible staging buffer (one for uploads, one for readbacks): with the
/// device's own buffers in video memory, this is what a DirectML join adds to tjoin's memory.
pub const SLAB: u64 = 16 << 20;
/// The largest buffer tjoin creates: DirectML addresses buffers with 32-bit offsets, and
/// halving that keeps clear of drivers that index them with signed integers.
pub const MAX_BUFFER: u64 = 1 << 31;
/// The buffer budget on adapters whose "video" memory is system memory (WARP, integrated
/// GPUs), so that a join there stays within tens of MiB like the CPU engine.
pub const SHARED_MEMORY_BUFFER: u64 = 32 << 20;

/// A `DML_BUFFER_TENSOR_DESC`: packed (null strides), as tjoin always lays tensors out.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TensorDesc {
    /// Its element type.
    pub data_type: DataType,
    /// Its sizes, slowest dimension first.
    pub sizes: Vec<u32>,
    /// `TotalTensorSizeInBytes`: what `DMLCalcBufferTensorSize` gives.
    pub total_bytes: u64,
}

impl TensorDesc {
    /// A packed tensor of these sizes.
    pub fn packed(data_type: DataType, sizes: Vec<u32>) -> TensorDesc {
        let total_bytes = buffer_tensor_size(data_type, &sizes);
        TensorDesc {
            data_type,
            sizes,
            total_bytes,
        }
    }

    /// Its elements.
    pub fn elements(&self) -> u64 {
        self.sizes.iter().map(|&s| u64::from(s)).product()
    }

    /// The bytes its elements occupy, without the padding `total_bytes` adds.
    pub fn data_bytes(&self) -> u64 {
        self.elements() * self.data_type.size()
    }
}

/// `DMLCalcBufferTensorSize` (DirectMLX.h) for a packed tensor: the bytes of its elements,
/// rounded up to 4 because DirectML binds whole DWORDs (and may write the padding of an
/// output).
pub fn buffer_tensor_size(data_type: DataType, sizes: &[u32]) -> u64 {
    let elements: u64 = sizes.iter().map(|&s| u64::from(s)).product();
    round_up(elements * data_type.size(), 4)
}

/// How the tensors are presented to the operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// Their own element type and shape.
    Native,
    /// Their bytes as unsigned integers, in the 4-D form joined on axis 2.
    Reinterpreted,
}

/// How the rounds are grouped into dispatches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Schedule {
    /// One dispatch for the whole tensor.
    Whole,
    /// Dispatches of this many rounds (the last may have fewer).
    Rounds(u64),
    /// Each round cut into pieces at these byte offsets (the first 0, the last the round's
    /// bytes), for rounds too large for one dispatch.
    Pieces(Vec<u64>),
}

/// One input that contributes bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Active {
    /// Its index among the plan's inputs.
    input: usize,
    /// Bytes per round.
    run: u64,
    /// Its size along the join dimension in the 4-D form, in units of `width` elements.
    len: u64,
    /// Its shape in storage order, in the native form's single dispatch.
    dims: Vec<u64>,
}

/// How one tensor of the job runs through DirectML.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DmlPlan {
    /// The form the tensors take.
    pub form: Form,
    /// The element type the operator sees.
    pub data_type: DataType,
    /// Why this form, for `--dry-run`.
    pub why: String,
    /// How the rounds are grouped into dispatches.
    pub schedule: Schedule,
    /// Rounds of the job.
    rounds: u64,
    /// The inputs with bytes to move, in join order.
    active: Vec<Active>,
    /// Elements of `data_type` after the join dimension in the 4-D form.
    width: u64,
    /// Native single dispatch: the join axis, and the output's dims, both padded.
    native_axis: usize,
    native_out: Vec<u64>,
    /// Staging chunks and pieces start and end on multiples of this many bytes, so that
    /// byte swaps on the CPU always see whole elements.
    granule: u64,
}

/// One input tensor of a dispatch and where it lies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bound {
    /// Which input of the `JoinPlan` it comes from.
    pub input: usize,
    /// The byte range of that input's data it holds.
    pub source: Range<u64>,
    /// Its description.
    pub desc: TensorDesc,
    /// Its binding offset in the dispatch's input buffer, a multiple of `BINDING_ALIGNMENT`.
    pub offset: u64,
}

/// What makes two dispatches' operators the same: data type, axis, input and output sizes.
pub type ShapeKey = (i32, u32, Vec<Vec<u32>>, Vec<u32>);

/// One execution of the Join operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dispatch {
    /// The join axis (`DML_JOIN_OPERATOR_DESC::Axis`).
    pub axis: u32,
    /// Its input tensors, in join order, packed into one input buffer.
    pub inputs: Vec<Bound>,
    /// Its output tensor, at offset 0 of the output buffer.
    pub output: TensorDesc,
    /// The byte range of the joined tensor's data it produces.
    pub output_bytes: Range<u64>,
    /// Bytes of the input buffer its inputs need.
    pub input_buffer_bytes: u64,
}

impl Dispatch {
    /// The key under which its compiled operator can be reused: same types, sizes and axis.
    pub fn shape_key(&self) -> ShapeKey {
        (
            self.output.data_type.code(),
            self.axis,
            self.inputs.iter().map(|b| b.desc.sizes.clone()).collect(),
            self.output.sizes.clone(),
        )
    }
}

/// Plans `job` on `device`, or says why DirectML cannot run it.
pub fn plan(job: &JoinPlan, device: &Device) -> Result<DmlPlan, String> {
    check_joinable(job)?;
    let dims = storage_dims(job);
    let native = native_type(job, device, &dims);
    let (form, data_type, why) = match native {
        Ok(data_type) => (
            Form::Native,
            data_type,
            format!(
                "Join at feature level {} takes {data_type} tensors of rank {}: they run as they are",
                device.level,
                job.shape.len()
            ),
        ),
        Err(why) => {
            let unit = reinterpreted_unit(job, device)?;
            let data_type = DataType::unsigned(unit);
            (
                Form::Reinterpreted,
                data_type,
                format!("{why}: its bytes run as {data_type} in the 4-D form joined on axis 2"),
            )
        }
    };
    let unit = data_type.size();
    let inner_dims = dims.get(storage_axis(job) + 1..).unwrap_or(&[]);
    let inner: u64 = inner_dims.iter().product();
    let inner_bytes = job
        .dtype
        .bytes_for(inner)
        .filter(|&b| b > 0 && b % unit == 0);
    let runs: Vec<(usize, u64)> = job
        .inputs
        .iter()
        .enumerate()
        .filter(|(_, p)| p.run_bytes > 0 && job.outer > 0)
        .map(|(input, p)| (input, p.run_bytes))
        .collect();
    // The elements after the join dimension, when every run is a whole number of them;
    // else each run is one row of units.
    let width = match inner_bytes {
        Some(b) if runs.iter().all(|(_, run)| run % b == 0) => b / unit,
        _ => 1,
    };
    let active: Vec<Active> = runs
        .into_iter()
        .map(|(input, run)| Active {
            input,
            run,
            len: run / unit / width,
            dims: Vec::new(),
        })
        .collect();
    let granule = lcm(unit, swap_granule(job));
    let mut planned = DmlPlan {
        form,
        data_type,
        why,
        schedule: Schedule::Whole,
        rounds: job.outer,
        active,
        width,
        native_axis: 0,
        native_out: Vec::new(),
        granule,
    };
    if form == Form::Native {
        planned.set_native_dims(job, device, &dims);
    }
    planned.schedule = planned.schedule_for(device)?;
    if form == Form::Native && planned.schedule != Schedule::Whole {
        // Only a single dispatch keeps the tensors' own shapes: a split runs them in the 4-D
        // form, with their own element type.
        planned.why = format!(
            "Join at feature level {} takes {data_type} tensors, in the 4-D form joined on \
             axis 2 when split",
            device.level
        );
    }
    Ok(planned)
}

/// Says why DirectML's Join cannot run `job` as it is, whatever the device: an input cast,
/// sliced, or laid out in the other order than the output (only the CPU engine does those).
fn check_joinable(job: &JoinPlan) -> Result<(), String> {
    if let Some((index, p)) = job
        .inputs
        .iter()
        .enumerate()
        .find(|(_, p)| p.dtype != job.dtype)
    {
        return Err(format!(
            "input {} is cast from {} to {}; DirectML's Join moves elements without converting \
             them, so only the CPU engine casts",
            index + 1,
            p.dtype,
            job.dtype
        ));
    }
    if let Some(index) = job.inputs.iter().position(|p| p.sliced()) {
        return Err(format!(
            "input {} is a slice of its tensor; DirectML's Join takes whole tensors, so only \
             the CPU engine reads slices",
            index + 1
        ));
    }
    if let Some((index, _)) = job
        .inputs
        .iter()
        .enumerate()
        .find(|(_, p)| p.gather().is_some())
    {
        let (theirs, ours) = match job.layout {
            Layout::C => ("Fortran", "C"),
            Layout::Fortran => ("C", "Fortran"),
        };
        return Err(format!(
            "input {} is stored in {theirs} order and the output in {ours} order; only the CPU \
             engine re-lays data out",
            index + 1
        ));
    }
    Ok(())
}

/// The output's dims in storage order (C order: as is; Fortran: reversed).
fn storage_dims(job: &JoinPlan) -> Vec<u64> {
    let mut dims = job.shape.clone();
    if job.layout == Layout::Fortran {
        dims.reverse();
    }
    dims
}

fn storage_axis(job: &JoinPlan) -> usize {
    match job.layout {
        Layout::C => job.axis,
        Layout::Fortran => job.shape.len().saturating_sub(1 + job.axis),
    }
}

/// The tensors' own DirectML type, when Join at the device's level takes it and their rank,
/// and their shapes describe the plan's runs; else why not.
fn native_type(job: &JoinPlan, device: &Device, dims: &[u64]) -> Result<DataType, String> {
    let Some(data_type) = DataType::of(&job.dtype) else {
        return Err(format!("{} has no DirectML type", job.dtype));
    };
    if !device.join_supports(data_type) {
        return Err(
            if data_type == DataType::Float64 && device.level >= FeatureLevel::V4_1 {
                "this device does not support FLOAT64 tensors".to_string()
            } else {
                format!(
                    "Join at feature level {} does not take {data_type} tensors",
                    device.level
                )
            },
        );
    }
    let (lowest, highest) = device.join_ranks();
    let rank = dims.len();
    if rank == 0 || rank > highest {
        return Err(format!(
            "Join at feature level {} takes ranks {lowest} to {highest}, not {rank}",
            device.level
        ));
    }
    // A kept tensor (one input, one round) in Fortran order is planned as one run whatever
    // its axis: its shape does not describe that, the 4-D form does.
    let axis = storage_axis(job);
    let outer: u64 = dims[..axis].iter().product();
    let inner: u64 = dims[axis + 1..].iter().product();
    let described = (job.outer == outer || job.bytes == 0)
        && job.inputs.iter().all(|p| {
            p.run_bytes == 0
                || job
                    .dtype
                    .bytes_for(inner)
                    .is_some_and(|b| b > 0 && p.run_bytes % b == 0)
        });
    if !described {
        return Err("the tensor's shape does not describe its runs".to_string());
    }
    Ok(data_type)
}

/// The widest unsigned unit (4, 2, or from feature level 2.1 1 byte) that divides every run.
fn reinterpreted_unit(job: &JoinPlan, device: &Device) -> Result<u64, String> {
    let runs = job.inputs.iter().map(|p| p.run_bytes).filter(|&r| r > 0);
    let common = runs.fold(0, gcd);
    if common == 0 {
        return Ok(4);
    }
    let byte_units = device.join_supports(DataType::UInt8);
    let unit = [4, 2, 1]
        .into_iter()
        .find(|&u| common % u == 0 && (u > 1 || byte_units));
    unit.ok_or_else(|| {
        let odd = job
            .inputs
            .iter()
            .position(|p| p.run_bytes % 2 == 1)
            .map_or(1, |i| i + 1);
        format!(
            "Join at feature level {} has no 8-bit type, and input {odd}'s runs ({} bytes) are \
             not whole 16-bit units; feature level 2.1 (DirectML 1.1) adds UINT8",
            device.level,
            job.inputs[odd - 1].run_bytes
        )
    })
}

/// Bytes that byte swapping on the CPU treats as one: chunks must not split them.
fn swap_granule(job: &JoinPlan) -> u64 {
    job.inputs
        .iter()
        .map(|p| match &p.swaps {
            Swaps::None => 1,
            Swaps::Uniform(width) => *width as u64,
            Swaps::Ranges(_) => job.dtype.itemsize().max(1),
        })
        .fold(1, lcm)
}

impl DmlPlan {
    /// Native form: each input's storage dims, padded with leading 1s to the lowest rank
    /// Join takes at the device's level.
    fn set_native_dims(&mut self, job: &JoinPlan, device: &Device, dims: &[u64]) {
        let (lowest, _) = device.join_ranks();
        let pad = lowest.saturating_sub(dims.len());
        let axis = storage_axis(job);
        let padded = |axis_size: u64| -> Vec<u64> {
            let mut padded = vec![1; pad];
            padded.extend(
                dims.iter()
                    .enumerate()
                    .map(|(d, &size)| if d == axis { axis_size } else { size }),
            );
            padded
        };
        let inner: u64 = dims[axis + 1..].iter().product();
        let itemsize = self.data_type.size();
        for active in &mut self.active {
            active.dims = padded(active.run / itemsize / inner.max(1));
        }
        self.native_axis = pad + axis;
        self.native_out = padded(dims[axis]);
    }

    /// Bytes of one round: the sum of the active inputs' runs.
    fn round_bytes(&self) -> u64 {
        self.active.iter().map(|a| a.run).sum()
    }

    fn unit(&self) -> u64 {
        self.data_type.size()
    }

    /// Whether dispatches of `rounds` rounds stay within the element limit and the budget.
    fn rounds_fit(&self, rounds: u64, device: &Device) -> bool {
        let unit = self.unit();
        let out = rounds.saturating_mul(self.round_bytes());
        let input_buffer = schedule::aligned_bytes(self.active.iter().map(|a| a.run), rounds);
        out / unit <= MAX_ELEMENTS
            && round_up(out, 4) <= device.max_buffer
            && input_buffer <= device.max_buffer
    }

    /// The fewest dispatches that fit: whole rounds when one does, else pieces of rounds.
    fn schedule_for(&self, device: &Device) -> Result<Schedule, String> {
        Schedule::fewest(
            self.rounds,
            self.round_bytes(),
            |rounds| self.rounds_fit(rounds, device),
            || self.cuts(device),
        )
    }

    /// Where to cut a round that fits no dispatch whole: greedily, each piece taking as many
    /// bytes of consecutive runs as its input buffer (with each binding aligned) and its
    /// output can hold, never cutting a byte-swap unit. Every round is cut at the same places.
    fn cuts(&self, device: &Device) -> Result<Vec<u64>, String> {
        let runs = self.active.iter().map(|a| a.run);
        schedule::greedy_cuts(runs, device.max_buffer, self.unit(), self.granule, "join")
    }

    /// How many dispatches run.
    pub fn dispatch_count(&self) -> u64 {
        self.schedule
            .dispatch_count(self.rounds, self.round_bytes())
    }

    /// The dispatches, in output order.
    pub fn dispatches(&self) -> impl Iterator<Item = Dispatch> + '_ {
        (0..self.dispatch_count()).map(move |index| self.dispatch(index))
    }

    /// Dispatch `index` (below `dispatch_count`).
    pub fn dispatch(&self, index: u64) -> Dispatch {
        match self.schedule.span(index, self.rounds) {
            Span::Whole if self.form == Form::Native => self.native_dispatch(),
            Span::Whole => self.rounds_dispatch(0, self.rounds),
            Span::Rounds { first, count } => self.rounds_dispatch(first, count),
            Span::Piece { round, range } => self.piece_dispatch(round, range),
        }
    }

    fn native_dispatch(&self) -> Dispatch {
        let sizes = |dims: &[u64]| dims.iter().map(|&d| d as u32).collect::<Vec<u32>>();
        let parts = self
            .active
            .iter()
            .map(|a| (a.input, 0..a.run * self.rounds, sizes(&a.dims)))
            .collect();
        self.assemble(self.native_axis as u32, parts, sizes(&self.native_out), 0)
    }

    /// Rounds `first .. first + count`: every input's runs there, one contiguous range each.
    fn rounds_dispatch(&self, first: u64, count: u64) -> Dispatch {
        let sizes = |len: u64| vec![1, count as u32, len as u32, self.width as u32];
        let parts = self
            .active
            .iter()
            .map(|a| {
                (
                    a.input,
                    first * a.run..(first + count) * a.run,
                    sizes(a.len),
                )
            })
            .collect();
        let total: u64 = self.active.iter().map(|a| a.len).sum();
        self.assemble(2, parts, sizes(total), first * self.round_bytes())
    }

    /// Bytes `range` of round `round`: the parts of consecutive inputs' runs it covers.
    fn piece_dispatch(&self, round: u64, range: Range<u64>) -> Dispatch {
        let unit = self.unit();
        let sizes = |bytes: u64| vec![1, 1, (bytes / unit) as u32, 1];
        let mut parts = Vec::new();
        let mut at = 0;
        for a in &self.active {
            let (start, end) = (range.start.max(at), range.end.min(at + a.run));
            if start < end {
                let base = round * a.run;
                let source = base + (start - at)..base + (end - at);
                parts.push((a.input, source, sizes(end - start)));
            }
            at += a.run;
        }
        let output = sizes(range.end - range.start);
        self.assemble(2, parts, output, round * self.round_bytes() + range.start)
    }

    fn assemble(
        &self,
        axis: u32,
        parts: Vec<(usize, Range<u64>, Vec<u32>)>,
        output: Vec<u32>,
        output_start: u64,
    ) -> Dispatch {
        let sizes = parts.iter().map(|(_, _, sizes)| sizes.clone());
        let (packed, input_buffer_bytes) = schedule::bind_packed(self.data_type, sizes);
        let inputs = parts
            .into_iter()
            .zip(packed)
            .map(|((input, source, _), (desc, offset))| Bound {
                input,
                source,
                desc,
                offset,
            })
            .collect();
        let output = TensorDesc::packed(self.data_type, output);
        let output_bytes = output_start..output_start + output.data_bytes();
        Dispatch {
            axis,
            inputs,
            output,
            output_bytes,
            input_buffer_bytes,
        }
    }

    /// Splits `range` into the slabs it is staged in: at most `SLAB` bytes each, ending on
    /// whole byte-swap units.
    pub fn slabs(&self, range: Range<u64>) -> impl Iterator<Item = Range<u64>> + use<> {
        let step = round_down(SLAB, self.granule).max(self.granule);
        let end = range.end;
        (range.start..end)
            .step_by(step as usize)
            .map(move |start| start..(start + step).min(end))
    }

    /// One line for `--dry-run`: the form, the first dispatch's shapes, and the split.
    pub fn describe(&self) -> String {
        let count = self.dispatch_count();
        if count == 0 {
            return "nothing to move: no DirectML dispatch".to_string();
        }
        let first = self.dispatch(0);
        let shapes: Vec<String> = first.inputs.iter().map(|b| braces(&b.desc.sizes)).collect();
        let split = match &self.schedule {
            Schedule::Whole => "1 dispatch".to_string(),
            Schedule::Rounds(n) => format!("{count} dispatches of up to {n} rounds"),
            Schedule::Pieces(cuts) => format!(
                "{count} dispatches, each round cut in {} pieces",
                cuts.len() - 1
            ),
        };
        format!(
            "{} {} -> {} on axis {}, {split}; {}",
            self.data_type,
            shapes.join(" + "),
            braces(&first.output.sizes),
            first.axis,
            self.why
        )
    }
}

/// `{1,2,3}`: sizes as `--dry-run` shows them.
fn braces(sizes: &[u32]) -> String {
    let text: Vec<String> = sizes.iter().map(u32::to_string).collect();
    format!("{{{}}}", text.join(","))
}

mod levels;
mod schedule;
mod sizes;
pub mod split_dispatches;
#[cfg(test)]
mod tests;
