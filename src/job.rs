//! The job: which tensors the output holds, each the join of which input tensors, all
//! checked and planned before anything is written.
//!
//! Two shapes of job: a single-tensor join (every input is, or names with `FILE:NAME`, one
//! tensor), and a whole-file join (every input and the output hold named tensors: each
//! tensor is joined with its namesakes, or kept from the first input with `--keep`).

use std::collections::{HashMap, HashSet};

use crate::copy;
use crate::dtype::DType;
use crate::error::{Error, Refusal, Result, excerpt};
use crate::format::{Format, Layout, OutTensor, TensorInfo, shape_text};
use crate::input::{Input, Tensor};
use crate::plan::{self, JoinPlan};
use crate::rules::{AxisRule, glob_match};
use crate::spec::{self, Spec};

/// One tensor of the output and how to make it.
pub struct TensorJob<'a> {
    /// What the output's header says about it.
    pub out: OutTensor,
    /// How the copy engine makes it.
    pub plan: JoinPlan,
    /// The input tensors it joins, one per entry of `plan.inputs`.
    pub sources: Vec<&'a Tensor>,
    /// Copied from the first input by `--keep` rather than joined.
    pub kept: bool,
}

/// What the command line says about the job beyond its inputs.
#[derive(Debug, Clone, Copy)]
pub struct JobOptions<'c> {
    /// The axis of every tensor no `axis_for` rule matches (`None`: the spec's default).
    pub axis: Option<i64>,
    /// The join rules.
    pub spec: Spec,
    /// `--axis-for` rules, first match wins.
    pub axis_for: &'c [AxisRule],
    /// `--keep` patterns.
    pub keep: &'c [String],
    /// `--name`: the output tensor's name in a single-tensor join.
    pub name: Option<&'c str>,
    /// The output's format.
    pub output: Format,
    /// `--cast`: the element type every input is converted to.
    pub cast: Option<&'c DType>,
}

impl JobOptions<'_> {
    /// The layout the output format demands: safetensors and JSON hold C order only.
    fn layout(&self) -> Option<Layout> {
        self.output.needs_c_order().then_some(Layout::C)
    }

    fn axis_for(&self, name: &str) -> Option<i64> {
        self.axis_for
            .iter()
            .find(|rule| glob_match(&rule.glob, name))
            .map_or(self.axis, |rule| Some(rule.axis))
    }

    fn is_kept(&self, name: &str) -> bool {
        self.keep.iter().any(|glob| glob_match(glob, name))
    }
}

/// Checks and plans every tensor of the output.
pub fn build<'a>(inputs: &'a [Input], options: &JobOptions) -> Result<Vec<TensorJob<'a>>> {
    let whole_files = options.output.is_container()
        && !inputs.is_empty()
        && inputs
            .iter()
            .all(|i| i.format.is_container() && i.selected.is_none());
    if whole_files {
        build_whole(inputs, options)
    } else {
        build_single(inputs, options)
    }
}

/// One output tensor, the join of one tensor of each input.
fn build_single<'a>(inputs: &'a [Input], options: &JobOptions) -> Result<Vec<TensorJob<'a>>> {
    let sources = inputs
        .iter()
        .map(only_tensor)
        .collect::<Result<Vec<&Tensor>>>()?;
    let named = sources.iter().find_map(|t| t.name.tensor.as_deref());
    let name = match (options.name, named, options.output) {
        (Some(name), _, _) | (None, Some(name), _) => name.to_string(),
        (None, None, Format::SafeTensors) => {
            return Err(Error::refused(
                "the joined tensor needs a name in a .safetensors file",
                "name it with --name NAME",
            ));
        }
        (None, None, _) => "arr_0".to_string(),
    };
    // One tensor: its refusals need no name to tell them apart.
    let name_refusals = false;
    match plan_tensor(&name, sources, options, name_refusals) {
        Ok(job) => Ok(vec![job]),
        Err(refusals) => Err(Error::Refused(refusals)),
    }
}

/// Every tensor of the inputs, joined with its namesakes; every problem in one error.
fn build_whole<'a>(inputs: &'a [Input], options: &JobOptions) -> Result<Vec<TensorJob<'a>>> {
    if options.name.is_some() {
        return Err(Error::refused(
            "--name names the tensor of a single-tensor join, but these inputs are \
                       joined tensor by tensor, each keeping its name",
            "drop --name, or pick one tensor of each input with FILE:NAME",
        ));
    }
    // Every name once, in the order the inputs first hold it; and each input's tensors by
    // name, for a model's thousands of tensors looked up in every input.
    let mut seen = HashSet::new();
    let mut names: Vec<&str> = Vec::new();
    let mut by_name: Vec<HashMap<&str, &Tensor>> = Vec::with_capacity(inputs.len());
    for input in inputs {
        let mut tensors = HashMap::with_capacity(input.tensors.len());
        for tensor in &input.tensors {
            let name = tensor.name.tensor.as_deref().unwrap_or_default();
            if seen.insert(name) {
                names.push(name);
            }
            // The first of two tensors of one name, as a search from the front finds it.
            if let Some(name) = tensor.name.tensor.as_deref() {
                tensors.entry(name).or_insert(tensor);
            }
        }
        by_name.push(tensors);
    }
    let mut refusals = Vec::new();
    let missing: Vec<String> = inputs
        .iter()
        .zip(&by_name)
        .filter_map(|(input, tensors)| {
            let lacks: Vec<&str> = names
                .iter()
                .copied()
                .filter(|n| !tensors.contains_key(n))
                .collect();
            // A model's thousands of names would bury the message: the first few say it.
            const SHOWN: usize = 10;
            let more = match lacks.len().saturating_sub(SHOWN) {
                0 => String::new(),
                more => format!(" and {more} more"),
            };
            (!lacks.is_empty()).then(|| {
                format!(
                    "{} lacks {} of {}: {}{more}",
                    input.name,
                    lacks.len(),
                    names.len(),
                    lacks[..lacks.len().min(SHOWN)]
                        .iter()
                        .map(|name| excerpt(name))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })
        })
        .collect();
    if !missing.is_empty() {
        refusals.push(Refusal {
            headline: "the inputs do not hold the same tensors: each tensor is joined with its \
                       namesakes in every input"
                .to_string(),
            details: missing,
            hint: Some(
                "join the tensors they share one at a time with FILE:NAME, or drop the inputs \
                 that lack some"
                    .to_string(),
            ),
        });
    }
    let mut jobs = Vec::new();
    for &name in &names {
        let sources: Vec<&Tensor> = by_name
            .iter()
            .filter_map(|t| t.get(name).copied())
            .collect();
        if sources.len() != inputs.len() {
            continue;
        }
        let planned = if options.is_kept(name) {
            keep_tensor(name, &sources, options)?
        } else if sources.iter().any(|t| t.info.shape.is_empty()) {
            Err(vec![Refusal {
                headline: format!(
                    "tensor `{}` is a scalar (rank 0) in {}: it has no axis to join along",
                    excerpt(name),
                    sources[0].name
                ),
                details: Vec::new(),
                hint: Some(format!(
                    "copy it from the first input with --keep '{}' (tjoin checks that \
                     every input holds the same value)",
                    excerpt(name)
                )),
            }])
        } else {
            plan_tensor(name, sources, options, true)
        };
        match planned {
            Ok(job) => jobs.push(job),
            Err(problems) => refusals.extend(problems),
        }
    }
    if refusals.is_empty() {
        Ok(jobs)
    } else {
        Err(Error::Refused(refusals))
    }
}

/// Checks and plans the join of `sources` into the output tensor `name`; with `name_refusals`,
/// each refusal starts with the tensor's name.
fn plan_tensor<'a>(
    name: &str,
    sources: Vec<&'a Tensor>,
    options: &JobOptions,
    name_refusals: bool,
) -> std::result::Result<TensorJob<'a>, Vec<Refusal>> {
    let label = name_refusals.then_some(name);
    let axis = spec::check_with(options.spec, &sources, options.axis_for(name), options.cast)
        .map_err(|e| about(label, e))?;
    check_byte_runs(&sources, axis)?;
    let infos: Vec<&TensorInfo> = sources.iter().map(|t| &t.info).collect();
    let plan = plan::plan_with(&infos, axis, options.layout(), options.cast);
    Ok(job(name, plan, sources))
}

fn job<'a>(name: &str, plan: JoinPlan, sources: Vec<&'a Tensor>) -> TensorJob<'a> {
    let out = OutTensor {
        name: name.to_string(),
        dtype: plan.dtype.clone(),
        shape: plan.shape.clone(),
        layout: plan.layout,
        bytes: plan.bytes,
    };
    TensorJob {
        out,
        plan,
        sources,
        kept: false,
    }
}

/// Prefixes each refusal of one tensor's join with its name (in a whole-file join there are
/// many); other errors become a refusal of their own.
fn about(name: Option<&str>, error: Error) -> Vec<Refusal> {
    match error {
        Error::Refused(refusals) => refusals
            .into_iter()
            .map(|mut r| {
                if let Some(name) = name {
                    r.headline = format!("tensor `{}`: {}", excerpt(name), r.headline);
                }
                r
            })
            .collect(),
        other => vec![Refusal {
            headline: other.to_string(),
            details: Vec::new(),
            hint: None,
        }],
    }
}

/// Sub-byte types (float4, float6) pack elements across byte boundaries, so a join with
/// several rounds needs every input's run to fill whole bytes.
fn check_byte_runs(sources: &[&Tensor], axis: usize) -> std::result::Result<(), Vec<Refusal>> {
    let dtype: &DType = &sources[0].info.dtype;
    let shape = &sources[0].info.shape;
    let rounds: u64 = shape[..axis].iter().product();
    if dtype.bits() % 8 == 0 || rounds <= 1 {
        return Ok(());
    }
    let bad: Vec<String> = sources
        .iter()
        .filter_map(|t| {
            let run: u64 = t.info.shape[axis..].iter().product();
            dtype.bytes_for(run).is_none().then(|| {
                format!(
                    "{}  {}  {}: {run} elements of {} bits per run = {} bits",
                    t.name,
                    dtype,
                    t.info.shape_text(),
                    dtype.bits(),
                    run * dtype.bits()
                )
            })
        })
        .collect();
    if bad.is_empty() {
        return Ok(());
    }
    Err(vec![Refusal {
        headline: format!(
            "cannot join {dtype} tensors along axis {axis}: the join copies {rounds} runs from \
             each input, and some runs end inside a byte"
        ),
        details: bad,
        hint: Some(format!(
            "{dtype} packs {} bits per element; join along axis 0, or along an axis where \
             each input's run (its size there times the sizes after it) is a multiple of {} \
             elements",
            dtype.bits(),
            8 / gcd(8, dtype.bits())
        )),
    }])
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// A `--keep` tensor: checked to be byte-identical in every input, then copied from the
/// first (a join of one input). A damaged input (a stored .npz member failing its CRC-32) is
/// an error of its own, not one of the refusals.
fn keep_tensor<'a>(
    name: &str,
    sources: &[&'a Tensor],
    options: &JobOptions,
) -> Result<std::result::Result<TensorJob<'a>, Vec<Refusal>>> {
    let first = sources[0];
    let mut differing = Vec::new();
    for other in &sources[1..] {
        match copy::differs(first, other) {
            Ok(None) => {}
            Ok(Some(how)) => differing.push(format!("{}: {how}", other.name)),
            Err(e @ Error::Malformed { .. }) => return Err(e),
            Err(e) => differing.push(format!("{}: cannot be compared: {e}", other.name)),
        }
    }
    if !differing.is_empty() {
        let mut details = vec![format!(
            "{}  {}  {}",
            first.name,
            first.info.dtype,
            first.info.shape_text()
        )];
        details.extend(differing);
        return Ok(Err(vec![Refusal {
            headline: format!(
                "tensor `{}` matches --keep but is not the same in every input; it would be \
                 copied from {}",
                excerpt(name),
                first.name
            ),
            details,
            hint: Some(
                "change --keep so that it does not match this tensor, and it is joined along \
                 its axis like the others"
                    .to_string(),
            ),
        }]));
    }
    let info = &first.info;
    // --cast converts every tensor of the output, kept ones too.
    let cast = options.cast.filter(|&to| to != &info.dtype);
    if let Some(to) = cast
        && !crate::cast::castable(&info.dtype, to)
    {
        return Ok(Err(vec![Refusal {
            headline: format!(
                "tensor `{}` matches --keep, but its {} cannot be cast to {to}",
                excerpt(name),
                info.dtype
            ),
            details: Vec::new(),
            hint: Some(format!(
                "--cast converts between {}",
                crate::cast::CAST_TYPES
            )),
        }]));
    }
    let plan = if info.shape.is_empty() || options.layout().is_none_or(|l| l == info.layout) {
        plan::copy_as_is(info, cast)
    } else {
        plan::plan_with(&[info], 0, options.layout(), cast)
    };
    Ok(Ok(TensorJob {
        kept: true,
        ..job(name, plan, vec![first])
    }))
}

/// The one tensor an input holds.
fn only_tensor(input: &Input) -> Result<&Tensor> {
    match input.tensors.as_slice() {
        [only] => Ok(only),
        [] => Err(Error::refused(
            format!(
                "{} holds no tensors, and this join takes one tensor from each input",
                input.name
            ),
            "leave it out of the inputs",
        )),
        tensors => {
            let names: Vec<_> = tensors
                .iter()
                .filter_map(|t| t.name.tensor.as_deref())
                .take(5)
                .map(|name| excerpt(name))
                .collect();
            Err(Error::refused(
                format!(
                    "{} holds {} tensors ({}{}) and this join takes one tensor from each input",
                    input.name,
                    tensors.len(),
                    names.join(", "),
                    if tensors.len() > names.len() {
                        ", ..."
                    } else {
                        ""
                    }
                ),
                format!(
                    "pick one as {}:NAME, or write a .safetensors or .npz output (with only \
                     multi-tensor inputs) to join every tensor with its namesakes",
                    input.name.path.display()
                ),
            ))
        }
    }
}

/// Refuses the job unless every output tensor has shape `expected` (DirectML's check that
/// `joinSize == OutputTensor.Sizes[Axis]` and that every other size matches).
pub fn check_expected_shape(job: &[TensorJob], expected: &[u64]) -> Result<()> {
    let refusals: Vec<Refusal> = job
        .iter()
        .filter(|t| t.out.shape != expected)
        .map(|t| {
            let differing: Vec<String> = if t.out.shape.len() == expected.len() {
                (0..expected.len())
                    .filter(|&d| t.out.shape[d] != expected[d])
                    .map(|d| format!("dimension {d}: {} != {}", t.out.shape[d], expected[d]))
                    .collect()
            } else {
                vec![format!("rank {} != {}", t.out.shape.len(), expected.len())]
            };
            let axis = t.plan.axis;
            let sizes: Vec<String> = t
                .sources
                .iter()
                .map(|s| s.info.shape[axis].to_string())
                .collect();
            let mut details = vec![
                differing.join(", "),
                format!(
                    "along the join axis {axis}: {} = {}",
                    sizes.join(" + "),
                    t.out.shape[axis]
                ),
            ];
            details.extend(
                t.sources
                    .iter()
                    .map(|s| format!("{} is {}", s.name, s.info.shape_text())),
            );
            // In a whole-file join, say which tensor.
            let tensor = match job {
                [_] => String::new(),
                _ => format!("tensor `{}`: ", excerpt(&t.out.name)),
            };
            Refusal {
                headline: format!(
                    "{tensor}the output would have shape {}, not the expected {}",
                    shape_text(&t.out.shape),
                    shape_text(expected)
                ),
                details,
                hint: Some(
                    "check the inputs and the axis (-a), or correct --expect-shape".to_string(),
                ),
            }
        })
        .collect();
    if refusals.is_empty() {
        Ok(())
    } else {
        Err(Error::Refused(refusals))
    }
}
