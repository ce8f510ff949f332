//! The join rules of `docs/rules.md`, one profile per column of its rules table, checked on
//! the inputs' headers before any byte is written. Every refusal names the offending inputs,
//! the dimension and the sizes, cites the spec in its own terms, and hints at what would work;
//! among many inputs, the odd ones out (`crate::outliers`) lead the headline and the list.

pub mod directml_split;
mod table;

use crate::dtype::DType;
use crate::dtype::cast;
use crate::error::{Error, Refusal, Result};
use crate::input::Tensor;
use crate::outliers;
use table::{Column, Mark, dtype_marks, table};

/// One column of the rules table in `docs/rules.md` (and one row of its DirectML feature-level
/// table).
#[derive(Debug, PartialEq, Eq)]
pub struct Profile {
    /// The name `--spec` takes.
    pub name: &'static str,
    /// How messages cite it.
    pub title: &'static str,
    /// The most inputs it allows.
    pub max_inputs: u64,
    /// The axis it uses when none is given (ONNX Concat-1 defaults to 1).
    pub default_axis: Option<i64>,
    /// Whether the spec states negative axes. Where it does not, tjoin still accepts one in
    /// range and reports the operator's (non-negative) axis in `--dry-run`.
    pub negative_axis: bool,
    /// The ranks it supports, inclusive.
    pub ranks: (usize, usize),
    /// The names its element types have.
    pub vocabulary: Vocabulary,
    /// The element types it supports, in its own names.
    pub types: &'static [&'static str],
    /// Whether an input may have size 0 along the join axis.
    pub zero_join_size: bool,
}

/// Whose names a profile's element types are listed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vocabulary {
    /// `float`, `int64`, `bfloat16`, ...
    Onnx,
    /// `f32`, `i64`, `boolean`, ...
    OpenVino,
    /// `FLOAT32`, `INT64`, ...
    DirectMl,
}

impl Vocabulary {
    /// The name of `dtype` in this vocabulary, if it has one.
    pub fn name(self, dtype: &DType) -> Option<&'static str> {
        match self {
            Vocabulary::Onnx => dtype.onnx_name(),
            Vocabulary::OpenVino => dtype.openvino_name(),
            Vocabulary::DirectMl => dtype.directml_name(),
        }
    }
}

/// Concat-13 added bfloat16 to the types of Concat-4 (and Concat-11).
const ONNX_13_TYPES: &[&str] = &[
    "bfloat16",
    "bool",
    "complex128",
    "complex64",
    "double",
    "float",
    "float16",
    "int16",
    "int32",
    "int64",
    "int8",
    "string",
    "uint16",
    "uint32",
    "uint64",
    "uint8",
];
const ONNX_4_TYPES: &[&str] = ONNX_13_TYPES.split_at(1).1;
const ONNX_1_TYPES: &[&str] = &["double", "float", "float16"];
const OPENVINO_NUMERIC: &[&str] = &[
    "bf16", "f16", "f32", "f64", "f8e4m3", "f8e5m2", "i8", "i16", "i32", "i64", "u8", "u16", "u32",
    "u64",
];
const DML_4_1_TYPES: &[&str] = &[
    "FLOAT64", "FLOAT32", "FLOAT16", "INT64", "INT32", "INT16", "INT8", "UINT64", "UINT32",
    "UINT16", "UINT8",
];
const DML_2_1_TYPES: &[&str] = &[
    "FLOAT32", "FLOAT16", "INT32", "INT16", "INT8", "UINT32", "UINT16", "UINT8",
];
const DML_1_0_TYPES: &[&str] = &["FLOAT32", "FLOAT16", "INT32", "INT16", "UINT32", "UINT16"];

const ONNX_MAX_INPUTS: u64 = (1 << 31) - 1;
const UNBOUNDED: u64 = u64::MAX;
const DML_MAX_INPUTS: u64 = u32::MAX as u64;

/// Every profile, in the order of the tables in `docs/rules.md`. Adding a profile is adding a
/// row.
#[rustfmt::skip]
pub const PROFILES: &[Profile] = &[
    //        name            title                                  max inputs       default   negative  ranks          vocabulary             types             zero size
    profile("onnx-13",      "ONNX Concat-13",                      ONNX_MAX_INPUTS, None,     true,     (1, usize::MAX), Vocabulary::Onnx,     ONNX_13_TYPES,    true),
    profile("onnx-11",      "ONNX Concat-11",                      ONNX_MAX_INPUTS, None,     true,     (1, usize::MAX), Vocabulary::Onnx,     ONNX_4_TYPES,     true),
    profile("onnx-4",       "ONNX Concat-4",                       ONNX_MAX_INPUTS, None,     false,    (1, usize::MAX), Vocabulary::Onnx,     ONNX_4_TYPES,     true),
    profile("onnx-1",       "ONNX Concat-1",                       ONNX_MAX_INPUTS, Some(1),  false,    (1, usize::MAX), Vocabulary::Onnx,     ONNX_1_TYPES,     true),
    profile("openvino",     "OpenVINO Concat-1",                   UNBOUNDED,       None,     true,     (1, usize::MAX), Vocabulary::OpenVino, OPENVINO_NUMERIC, true),
    profile("directml:4.1", "DirectML Join at feature level 4.1",  DML_MAX_INPUTS,  None,     false,    (1, 8),          Vocabulary::DirectMl, DML_4_1_TYPES,    false),
    profile("directml:3.0", "DirectML Join at feature level 3.0",  DML_MAX_INPUTS,  None,     false,    (4, 5),          Vocabulary::DirectMl, DML_2_1_TYPES,    false),
    profile("directml:2.1", "DirectML Join at feature level 2.1",  DML_MAX_INPUTS,  None,     false,    (4, 4),          Vocabulary::DirectMl, DML_2_1_TYPES,    false),
    profile("directml:1.0", "DirectML Join at feature level 1.0",  DML_MAX_INPUTS,  None,     false,    (4, 4),          Vocabulary::DirectMl, DML_1_0_TYPES,    false),
];

#[allow(clippy::too_many_arguments)]
const fn profile(
    name: &'static str,
    title: &'static str,
    max_inputs: u64,
    default_axis: Option<i64>,
    negative_axis: bool,
    ranks: (usize, usize),
    vocabulary: Vocabulary,
    types: &'static [&'static str],
    zero_join_size: bool,
) -> Profile {
    Profile {
        name,
        title,
        max_inputs,
        default_axis,
        negative_axis,
        ranks,
        vocabulary,
        types,
        zero_join_size,
    }
}

/// Short names `--spec` also takes.
const ALIASES: &[(&str, &str)] = &[("onnx", "onnx-13"), ("directml", "directml:4.1")];

/// The rules a run applies: a profile, and whether its element-type list applies. Without
/// `--spec`, tjoin applies ONNX Concat-13's shape rules to every type numpy can store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    /// The profile.
    pub profile: &'static Profile,
    /// Whether the profile's element-type list is enforced.
    pub check_types: bool,
    /// The DirectML feature level asked for, when it has no row of its own (5.0 takes 4.1's).
    pub level: Option<(u32, u32)>,
}

impl Default for Spec {
    fn default() -> Spec {
        Spec::of(&PROFILES[0], false)
    }
}

impl Spec {
    /// Every name `--spec` takes, aliases first (other DirectML levels parse too).
    pub fn names() -> Vec<&'static str> {
        let aliases = ALIASES.iter().map(|(alias, _)| *alias);
        aliases.chain(PROFILES.iter().map(|p| p.name)).collect()
    }

    /// Parses a `--spec` value: a profile's name or alias. A DirectML feature level without
    /// a row of its own (say 5.0) takes the rules of the highest level below it.
    pub fn parse(text: &str) -> std::result::Result<Spec, String> {
        let name = ALIASES
            .iter()
            .find(|(alias, _)| *alias == text)
            .map_or(text, |(_, name)| name);
        let profile = PROFILES
            .iter()
            .find(|p| p.name == name)
            .or_else(|| directml_level(name))
            .ok_or_else(|| format!("unknown spec '{text}'; known: {}", Spec::names().join(", ")))?;
        let level = name
            .strip_prefix("directml:")
            .and_then(parse_level)
            .filter(|_| profile.name != name);
        Ok(Spec {
            level,
            ..Spec::of(profile, true)
        })
    }

    fn of(profile: &'static Profile, check_types: bool) -> Spec {
        Spec {
            profile,
            check_types,
            level: None,
        }
    }

    /// How messages cite the rules: "DirectML Join at feature level 5.0 (the rules of 4.1)".
    pub fn title(&self) -> String {
        match self.level {
            Some((major, minor)) => format!(
                "DirectML Join at feature level {major}.{minor} (the rules of {})",
                self.profile.name.trim_start_matches("directml:")
            ),
            None => self.profile.title.to_string(),
        }
    }
}

/// The DirectML row that applies at feature level `name` (`directml:5.0`).
fn directml_level(name: &str) -> Option<&'static Profile> {
    let level = parse_level(name.strip_prefix("directml:")?)?;
    PROFILES
        .iter()
        .filter_map(|p| Some((p, parse_level(p.name.strip_prefix("directml:")?)?)))
        .filter(|(_, row)| *row <= level)
        .max_by_key(|(_, row)| *row)
        .map(|(p, _)| p)
}

fn parse_level(text: &str) -> Option<(u32, u32)> {
    let (major, minor) = text.split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// Checks the inputs against `spec` and returns the join axis counted from the front.
/// `axis` is the user's; `None` takes the profile's default, where it has one. With `cast`
/// (`--cast`), every input is converted to it: element types may then differ, but each must
/// be one the cast converts from.
pub fn check_with(
    spec: Spec,
    inputs: &[&Tensor],
    axis: Option<i64>,
    cast: Option<&DType>,
) -> Result<usize> {
    check_quietly(spec, inputs, axis, cast).map_err(|refusals| {
        let hint = other_profiles_that_accept(spec, inputs, axis, cast);
        Error::Refused(with_hint(refusals, hint))
    })
}

/// The checks, with hints only about the inputs themselves.
fn check_quietly(
    spec: Spec,
    inputs: &[&Tensor],
    axis: Option<i64>,
    cast: Option<&DType>,
) -> std::result::Result<usize, Vec<Refusal>> {
    let profile = spec.profile;
    let Some(first) = inputs.first() else {
        return Err(vec![Refusal {
            headline: "nothing to join: no inputs were given".to_string(),
            details: Vec::new(),
            hint: Some("name one or more tensor files".to_string()),
        }]);
    };
    let title = spec.title();
    if inputs.len() as u64 > profile.max_inputs {
        return Err(vec![too_many_inputs(&title, profile, inputs.len())]);
    }
    let axis = axis
        .or(profile.default_axis)
        .ok_or_else(|| vec![axis_missing(&title, spec.check_types)])?;
    check_no_scalars(inputs).map_err(|r| vec![r])?;
    let mut refusals: Vec<Refusal> = rank_unsupported(&title, profile, inputs)
        .into_iter()
        .collect();
    if let Err(unequal) = check_equal_rank(inputs) {
        refusals.push(unequal);
        return Err(refusals);
    }
    let rank = first.info.shape.len();
    let normalized =
        normalize_axis(axis, rank).ok_or_else(|| vec![axis_out_of_range(inputs, axis)]);
    // A profile's type list is about the tensor the runtime joins: with --cast that is the
    // cast's result, whatever the inputs' own types, so the target type is what is checked.
    match (spec.check_types, cast) {
        (false, _) => {}
        (true, None) => refusals.extend(types_unsupported(&title, profile, inputs)),
        (true, Some(to)) => refusals.extend(cast_unsupported(&title, profile, to)),
    }
    match cast {
        Some(to) => refusals.extend(not_castable(inputs, to)),
        None => refusals.extend(dtype_mismatch(inputs)),
    }
    let axis = match normalized {
        Ok(axis) => axis,
        Err(mut out_of_range) => {
            out_of_range.extend(refusals);
            return Err(out_of_range);
        }
    };
    refusals.extend(dims_mismatch(inputs, axis));
    refusals.extend(join_size_overflow(inputs, axis));
    if !profile.zero_join_size {
        refusals.extend(zero_join_size(&title, inputs, axis));
    }
    if refusals.is_empty() {
        Ok(axis)
    } else {
        Err(refusals)
    }
}

/// Adds, to the last refusal's hint, the profiles under which the same job passes.
fn with_hint(mut refusals: Vec<Refusal>, accepted_by: Option<String>) -> Vec<Refusal> {
    if let (Some(last), Some(accepted_by)) = (refusals.last_mut(), accepted_by) {
        last.hint = Some(match last.hint.take() {
            Some(hint) => format!("{hint}\nhint: {accepted_by}"),
            None => accepted_by,
        });
    }
    refusals
}

/// "accepted by --spec directml:4.1 (DirectML Join at feature level 4.1)", when the job
/// was refused under an explicit spec and some other profile takes it.
fn other_profiles_that_accept(
    spec: Spec,
    inputs: &[&Tensor],
    axis: Option<i64>,
    cast: Option<&DType>,
) -> Option<String> {
    if !spec.check_types {
        return None;
    }
    let accepting: Vec<String> = PROFILES
        .iter()
        .filter(|p| *p != spec.profile)
        .filter(|p| check_quietly(Spec::of(p, true), inputs, axis, cast).is_ok())
        .map(|p| p.name.to_string())
        .collect();
    (!accepting.is_empty()).then(|| format!("the same join passes --spec {}", accepting.join(", ")))
}

fn too_many_inputs(title: &str, profile: &Profile, count: usize) -> Refusal {
    Refusal {
        headline: format!(
            "{title} takes at most {} inputs; this join has {count}",
            profile.max_inputs
        ),
        details: Vec::new(),
        hint: Some("join the inputs in groups, then join the groups".to_string()),
    }
}

/// The refusal of a join with no axis; `explicit`: under a `--spec` the user gave, whose
/// profiles differ in this (only onnx-1 has a default axis).
fn axis_missing(title: &str, explicit: bool) -> Refusal {
    let numpy = "add -a 0 to join along the first axis, as numpy.concatenate does by default";
    Refusal {
        headline: format!("no axis given: name one with -a/--axis ({title} requires one)"),
        details: Vec::new(),
        hint: Some(match explicit {
            true => format!("{numpy}; of the --spec profiles only onnx-1 has a default axis (1)"),
            false => numpy.to_string(),
        }),
    }
}

fn rank_unsupported(title: &str, profile: &Profile, inputs: &[&Tensor]) -> Option<Refusal> {
    let odd: Vec<String> = inputs
        .iter()
        .filter(|i| !supports_rank(profile, i.info.shape.len()))
        .map(|i| format!("{} has {}", i.name, i.info.shape.len()))
        .collect();
    if odd.is_empty() {
        return None;
    }
    let rank = inputs[0].info.shape.len();
    let others: Vec<String> = siblings(profile)
        .filter(|p| supports_rank(p, rank))
        .map(|p| format!("{} supports {}", p.title, rank_range(p)))
        .collect();
    Some(Refusal {
        headline: format!(
            "{title} supports {}; {}",
            rank_range(profile),
            outliers::bounded_list(&odd)
        ),
        details: table(inputs, &[]),
        hint: Some(if others.is_empty() {
            format!(
                "reshape the inputs to {} (adding or dropping dimensions of size 1 changes no \
                 data)",
                rank_range(profile)
            )
        } else {
            others.join("; ")
        }),
    })
}

fn supports_rank(profile: &Profile, rank: usize) -> bool {
    (profile.ranks.0..=profile.ranks.1).contains(&rank)
}

/// "1 to 8 dimensions", "4 dimensions", "1 or more dimensions".
fn rank_range(profile: &Profile) -> String {
    match profile.ranks {
        (low, usize::MAX) => format!("{low} or more dimensions"),
        (low, high) if low == high => format!("{low} dimensions"),
        (low, high) => format!("{low} to {high} dimensions"),
    }
}

/// The other rows that name types the same way (the other feature levels of DirectML).
fn siblings(profile: &Profile) -> impl Iterator<Item = &'static Profile> + '_ {
    PROFILES
        .iter()
        .filter(move |p| p.vocabulary == profile.vocabulary && *p != profile)
}

fn supports_type(profile: &Profile, dtype: &DType) -> bool {
    profile
        .vocabulary
        .name(dtype)
        .is_some_and(|name| profile.types.contains(&name))
}

fn types_unsupported(title: &str, profile: &Profile, inputs: &[&Tensor]) -> Option<Refusal> {
    let marks = dtype_marks(inputs, |dtype| {
        (!supports_type(profile, dtype)).then(|| match profile.vocabulary.name(dtype) {
            Some(name) => format!("{name} is not supported"),
            None => format!("{title} has no such element type"),
        })
    });
    let first = marks.first()?;
    let dtype = &inputs[first.row].info.dtype;
    let others: Vec<&str> = siblings(profile)
        .filter(|p| supports_type(p, dtype))
        .map(|p| p.name)
        .collect();
    let mut details = table(inputs, &marks);
    details.push(format!("{title} supports {}", profile.types.join(", ")));
    Some(Refusal {
        headline: format!(
            "{title} does not support {dtype} tensors; {} is {dtype}",
            inputs[first.row].name
        ),
        details,
        hint: Some(if !others.is_empty() {
            format!("{dtype} is supported by --spec {}", others.join(", "))
        } else if cast::castable(dtype, dtype) {
            "convert the inputs to a type it supports: --cast TYPE does it while joining"
                .to_string()
        } else {
            "convert the inputs to a type it supports first".to_string()
        }),
    })
}

/// The refusal of a `--cast` to a type the profile does not support.
fn cast_unsupported(title: &str, profile: &Profile, to: &DType) -> Option<Refusal> {
    if supports_type(profile, to) {
        return None;
    }
    let others: Vec<&str> = siblings(profile)
        .filter(|p| supports_type(p, to))
        .map(|p| p.name)
        .collect();
    Some(Refusal {
        headline: format!(
            "{title} does not support {to} tensors, and --cast {to} makes every input {to}"
        ),
        details: vec![format!("{title} supports {}", profile.types.join(", "))],
        hint: Some(if others.is_empty() {
            "cast to a type the profile lists instead".to_string()
        } else {
            format!("{to} is supported by --spec {}", others.join(", "))
        }),
    })
}

fn zero_join_size(title: &str, inputs: &[&Tensor], axis: usize) -> Option<Refusal> {
    let marks: Vec<Mark> = inputs
        .iter()
        .enumerate()
        .filter(|(_, i)| i.info.shape[axis] == 0)
        .map(|(row, _)| Mark {
            row,
            column: Column::Dim(axis),
            text: "size 0".to_string(),
        })
        .collect();
    if marks.is_empty() {
        return None;
    }
    Some(Refusal {
        headline: format!("{title} needs a non-zero size along the join axis {axis}"),
        details: table(inputs, &marks),
        hint: Some(
            "leave out the inputs that are empty along the axis: they add nothing".to_string(),
        ),
    })
}

/// The axis counted from the front, if `axis` lies in `[-rank, rank - 1]`.
pub fn normalize_axis(axis: i64, rank: usize) -> Option<usize> {
    let rank = i64::try_from(rank).ok()?;
    let normalized = if axis < 0 { axis + rank } else { axis };
    (0..rank)
        .contains(&normalized)
        .then_some(normalized as usize)
}

fn check_no_scalars(inputs: &[&Tensor]) -> std::result::Result<(), Refusal> {
    let marks: Vec<Mark> = (0..inputs.len())
        .filter(|&row| inputs[row].info.shape.is_empty())
        .map(|row| Mark {
            row,
            column: Column::Shape,
            text: "rank 0".to_string(),
        })
        .collect();
    if marks.is_empty() {
        return Ok(());
    }
    let names: Vec<String> = marks
        .iter()
        .map(|m| inputs[m.row].name.to_string())
        .collect();
    Err(Refusal {
        headline: format!(
            "cannot join a scalar (rank 0): {} {} no dimension to join along",
            outliers::bounded_list(&names),
            if names.len() == 1 { "has" } else { "have" }
        ),
        details: table(inputs, &marks),
        hint: Some(
            "save scalars as 1-element arrays (numpy: x.reshape(1)) and join those along axis 0"
                .to_string(),
        ),
    })
}

fn check_equal_rank(inputs: &[&Tensor]) -> std::result::Result<(), Refusal> {
    let ranks: Vec<usize> = inputs.iter().map(|i| i.info.shape.len()).collect();
    let split = outliers::split(&ranks);
    let reference = split.as_ref().map_or(0, |s| s.reference);
    let rank = ranks[reference];
    let marks: Vec<Mark> = (0..inputs.len())
        .filter(|&row| ranks[row] != rank)
        .map(|row| Mark {
            row,
            column: Column::Shape,
            text: format!("rank {} != {rank}", ranks[row]),
        })
        .collect();
    if marks.is_empty() {
        return Ok(());
    }
    let reshape = |what: &str| {
        format!(
            "every input needs the same number of dimensions; reshape {what} to rank {rank} \
             (for example by adding or dropping dimensions of size 1)"
        )
    };
    let (headline, hint) = match split {
        Some(split) => (
            split.headline(
                |i| format!("{} has rank {}", inputs[i].name, ranks[i]),
                &format!("have rank {rank}"),
            ),
            format!(
                "{}: {}",
                split.remove_or_fix(|i| inputs[i].name.to_string()),
                reshape(if split.outliers.len() == 1 {
                    "it"
                } else {
                    "them"
                })
            ),
        ),
        None => {
            let differing: Vec<String> = marks
                .iter()
                .map(|m| format!("{} has rank {}", inputs[m.row].name, ranks[m.row]))
                .collect();
            (
                format!(
                    "{} has rank {rank}, {}",
                    inputs[reference].name,
                    outliers::bounded_list(&differing)
                ),
                reshape("the others"),
            )
        }
    };
    Err(Refusal {
        headline: format!("cannot join inputs of different rank: {headline}"),
        details: table(inputs, &marks),
        hint: Some(hint),
    })
}

fn axis_out_of_range(inputs: &[&Tensor], axis: i64) -> Refusal {
    let rank = inputs[0].info.shape.len();
    Refusal {
        headline: format!(
            "axis {axis} is out of range for inputs of rank {rank} (valid: -{rank} to {})",
            rank - 1
        ),
        details: table(inputs, &[]),
        hint: Some(format!(
            "axes count from 0 for the first dimension and from -1 for the last; \
             use -a {} to join along the last dimension",
            rank - 1
        )),
    }
}

fn dtype_mismatch(inputs: &[&Tensor]) -> Option<Refusal> {
    let dtypes: Vec<&DType> = inputs.iter().map(|i| &i.info.dtype).collect();
    let split = outliers::split(&dtypes);
    let first = dtypes[split.as_ref().map_or(0, |s| s.reference)];
    let marks = dtype_marks(inputs, |dtype| {
        (dtype != first).then(|| format!("{dtype} != {first}"))
    });
    if marks.is_empty() {
        return None;
    }
    let promoted = cast::promote_all(dtypes.iter().copied());
    let hint = match (&split, promoted) {
        (Some(split), _) => {
            let fix = split.remove_or_fix(|i| inputs[i].name.to_string());
            if split
                .outliers
                .iter()
                .all(|&i| cast::castable(dtypes[i], first))
            {
                format!("{fix}, or add --cast {first} (the others' type) to convert while joining")
            } else {
                format!("{fix}: the join rules take one element type (numpy: x.astype('{first}'))")
            }
        }
        (None, Some(to)) if cast::castable(&to, &to) => format!(
            "the join rules take one element type; add --cast {to} to convert every input \
             while joining ({to} is the type numpy would promote these to)"
        ),
        (None, Some(to)) => format!(
            "the join rules take one element type; numpy would promote these to {to}, which \
             --cast does not write; convert the inputs to one type first \
             (numpy: x.astype('{to}'))"
        ),
        (None, None) => format!(
            "the join rules take one element type; convert the inputs to one type first \
             (numpy: x.astype('{first}'))"
        ),
    };
    let headline = match &split {
        Some(split) => format!(
            ": {}",
            split.headline(
                |i| format!("{} is {}", inputs[i].name, dtypes[i]),
                &format!("are {first}")
            )
        ),
        None => String::new(),
    };
    Some(Refusal {
        headline: format!("cannot join inputs of different element types{headline}"),
        details: table(inputs, &marks),
        hint: Some(hint),
    })
}

fn not_castable(inputs: &[&Tensor], to: &DType) -> Option<Refusal> {
    let marks = dtype_marks(inputs, |dtype| {
        (!cast::castable(dtype, to)).then(|| format!("{dtype} cannot be cast"))
    });
    if marks.is_empty() {
        return None;
    }
    Some(Refusal {
        headline: format!("cannot cast every input to {to}"),
        details: table(inputs, &marks),
        hint: Some(format!(
            "--cast converts between {}; convert the others first",
            cast::CAST_TYPES
        )),
    })
}

fn dims_mismatch(inputs: &[&Tensor], axis: usize) -> Option<Refusal> {
    // What must agree: every size but the one along the axis.
    let outside_axis: Vec<Vec<Option<u64>>> = inputs
        .iter()
        .map(|i| {
            let sizes = i.info.shape.iter().enumerate();
            sizes
                .map(|(dim, &size)| (dim != axis).then_some(size))
                .collect()
        })
        .collect();
    let split = outliers::split(&outside_axis);
    let reference_row = split.as_ref().map_or(0, |s| s.reference);
    let reference = &inputs[reference_row].info.shape;
    let mut marks = Vec::new();
    let mut differing_dims = Vec::new();
    for (row, input) in inputs.iter().enumerate() {
        for (dim, (&size, &expected)) in input.info.shape.iter().zip(reference).enumerate() {
            if size != expected && dim != axis {
                marks.push(Mark {
                    row,
                    column: Column::Dim(dim),
                    text: format!("{size} != {expected}"),
                });
                differing_dims.push(dim);
            }
        }
    }
    if marks.is_empty() {
        return None;
    }
    differing_dims.sort_unstable();
    differing_dims.dedup();
    let rank = reference.len();
    let (headline, hint) = match split {
        Some(split) => {
            let shared = format!("have {}", pattern(&outside_axis[reference_row]));
            let has = |i: usize| {
                format!(
                    "{} has shape {}",
                    inputs[i].name,
                    inputs[i].info.shape_text()
                )
            };
            let mut hint = format!(
                "{}; the other {} inputs join along axis {axis} as they are",
                split.remove_or_fix(|i| inputs[i].name.to_string()),
                outliers::thousands(split.agreeing)
            );
            // The axis may be what is wrong: say so when one other axis joins them all.
            if let [only] = dims_that_differ(inputs, rank).as_slice() {
                hint.push_str(&format!(
                    "\nhint: or, if axis {axis} is not the one meant: {}",
                    axes_that_work(&[*only], rank)
                ));
            }
            (split.headline(has, &shared), hint)
        }
        None => (
            format!("the inputs differ in {}", dimension_list(&differing_dims)),
            axes_that_work(&dims_that_differ(inputs, rank), rank),
        ),
    };
    Some(Refusal {
        headline: format!("cannot join along axis {axis}: {headline}"),
        details: table(inputs, &marks),
        hint: Some(hint),
    })
}

/// A shape with `*` for the size that may differ: `[*, 128]`.
fn pattern(sizes: &[Option<u64>]) -> String {
    let sizes: Vec<String> = sizes
        .iter()
        .map(|size| size.map_or("*".to_string(), |s| s.to_string()))
        .collect();
    format!("[{}]", sizes.join(", "))
}

/// The refusal of inputs whose sizes along the axis add up to more than a size can be. Only
/// empty inputs get there: the data of the others would have to fill more than 2^64 bytes.
fn join_size_overflow(inputs: &[&Tensor], axis: usize) -> Option<Refusal> {
    inputs
        .iter()
        .try_fold(0u64, |sum, i| sum.checked_add(i.info.shape[axis]))
        .is_none()
        .then(|| Refusal {
            headline: format!(
                "cannot join along axis {axis}: the inputs' sizes along it add up to more than \
                 {}, the largest size a dimension can have",
                u64::MAX
            ),
            details: table(inputs, &[]),
            hint: Some("join fewer inputs, or along another axis".to_string()),
        })
}

/// "dimension 3" or "dimensions 1 and 3" or "dimensions 0, 1 and 3".
fn dimension_list(dims: &[usize]) -> String {
    let names: Vec<String> = dims.iter().map(usize::to_string).collect();
    match names.as_slice() {
        [one] => format!("dimension {one}"),
        [init @ .., last] => format!("dimensions {} and {last}", init.join(", ")),
        [] => "no dimension".to_string(),
    }
}

/// The dimensions in which the inputs do not all have the same size.
fn dims_that_differ(inputs: &[&Tensor], rank: usize) -> Vec<usize> {
    let reference = &inputs[0].info.shape;
    (0..rank)
        .filter(|&dim| inputs.iter().any(|i| i.info.shape[dim] != reference[dim]))
        .collect()
}

/// Which axes inputs that differ in `disagree` could be joined along: one at most.
fn axes_that_work(disagree: &[usize], rank: usize) -> String {
    match disagree {
        [only] => format!(
            "these inputs can only be joined along axis {only} (or {})",
            *only as i64 - rank as i64
        ),
        _ => format!(
            "no axis can join these inputs: they differ in {}, and a join allows only one \
             dimension to differ",
            dimension_list(disagree)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check of a join without `--cast`.
    fn check(spec: Spec, inputs: &[&Tensor], axis: Option<i64>) -> Result<usize> {
        check_with(spec, inputs, axis, None)
    }

    #[test]
    fn axes_normalize_from_both_ends() {
        assert_eq!(normalize_axis(-1, 4), Some(3));
        assert_eq!(normalize_axis(-4, 4), Some(0));
        assert_eq!(normalize_axis(3, 4), Some(3));
        assert_eq!(normalize_axis(4, 4), None);
        assert_eq!(normalize_axis(-5, 4), None);
        assert_eq!(normalize_axis(0, 0), None);
    }

    #[test]
    fn dimension_lists_read_as_english() {
        assert_eq!(dimension_list(&[3]), "dimension 3");
        assert_eq!(dimension_list(&[1, 3]), "dimensions 1 and 3");
        assert_eq!(dimension_list(&[0, 1, 3]), "dimensions 0, 1 and 3");
    }

    fn tensor(position: usize, shape: &[u64]) -> Tensor {
        use crate::dtype::ByteOrder;
        use crate::format::{Layout, TensorInfo};
        let file = tempfile::tempfile().expect("a temporary file");
        Tensor {
            name: crate::error::InputRef {
                position,
                location: std::path::Path::new(&format!("{position}.npy")).into(),
                tensor: None,
            },
            info: TensorInfo {
                dtype: DType::UInt8,
                byte_order: ByteOrder::NotApplicable,
                swaps: Default::default(),
                shape: shape.into(),
                layout: Layout::C,
                data_offset: 128,
                data_len: 0,
            },
            file: crate::input::DataFile::Open(std::sync::Arc::new(file)),
            stored_crc: None,
        }
    }

    #[test]
    fn sizes_that_add_up_past_u64_are_refused_not_wrapped() {
        let (a, b) = (tensor(1, &[0, 1 << 63]), tensor(2, &[0, 1 << 63]));
        let Err(Error::Refused(refusals)) = check(Spec::default(), &[&a, &b], Some(1)) else {
            panic!("joined");
        };
        assert!(refusals[0].headline.contains("add up to more than"));
        assert_eq!(check(Spec::default(), &[&a, &b], Some(0)).ok(), Some(0));
    }
}
