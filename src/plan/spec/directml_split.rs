//! DirectML Split's own rules (`DML_SPLIT_OPERATOR_DESC`), which `tjoin split --spec
//! directml[:LEVEL]` checks on every tensor before anything is written: the members (`Axis` in
//! `[0, InputTensor.DimensionCount - 1]`, `OutputCount` greater than 0 and a UINT, the
//! outputs' sizes adding up along the axis), the sizes every buffer tensor must have
//! (`DML_BUFFER_TENSOR_DESC`: no dimension of size 0, at most 2^32 - 1 elements), and the
//! page's "Tensor support" table by feature level. That table equals Join's but for 3.0, where
//! Split takes 1 to 8 dimensions and Join 4 or 5.

use super::{DML_1_0_TYPES, DML_2_1_TYPES, DML_4_1_TYPES, Spec, Vocabulary};
use crate::dtype::DType;
use crate::error::Refusal;
use crate::messages::shape_text;

/// Where the rules are stated, as refusals cite them.
const SPLIT_PAGE: &str = "DML_SPLIT_OPERATOR_DESC";
const BUFFER_PAGE: &str = "DML_BUFFER_TENSOR_DESC";

/// The most elements a DirectML buffer tensor holds ("may not exceed (2^32 - 1) elements").
const MAX_ELEMENTS: u64 = u32::MAX as u64;

/// One row of Split's tensor support table: its lowest feature level, the ranks it takes
/// (inclusive) and its element types.
pub type SplitRow = ((u32, u32), (usize, usize), &'static [&'static str]);

/// Split's tensor support from each row's lowest feature level on, highest level first. A
/// level without a row takes the row below it.
#[rustfmt::skip]
pub const SPLIT_ROWS: [SplitRow; 4] = [
    ((4, 1), (1, 8), DML_4_1_TYPES),
    ((3, 0), (1, 8), DML_2_1_TYPES),
    ((2, 1), (4, 4), DML_2_1_TYPES),
    ((1, 0), (4, 4), DML_1_0_TYPES),
];

/// Split's rules at one feature level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitRules {
    /// The level asked for.
    pub level: (u32, u32),
    /// The lowest level of the row that applies.
    pub row: (u32, u32),
    /// The ranks it takes, inclusive.
    pub ranks: (usize, usize),
    /// The element types it takes, in DirectML's names.
    pub types: &'static [&'static str],
}

impl SplitRules {
    /// Split's rules at the DirectML level `spec` names (`directml:5.0` takes 4.1's row), or
    /// `None` for a profile of another runtime, whose split tjoin does not check.
    pub fn of(spec: &Spec) -> Option<SplitRules> {
        let named = super::parse_level(spec.profile.name.strip_prefix("directml:")?)?;
        let level = spec.level.unwrap_or(named);
        Some(SplitRules::at(level))
    }

    /// Split's rules at feature level `level` (below 1.0: 1.0's).
    pub fn at(level: (u32, u32)) -> SplitRules {
        let row = SPLIT_ROWS
            .iter()
            .find(|(lowest, _, _)| level >= *lowest)
            .unwrap_or(&SPLIT_ROWS[SPLIT_ROWS.len() - 1]);
        SplitRules {
            level,
            row: row.0,
            ranks: row.1,
            types: row.2,
        }
    }

    /// "DirectML Split at feature level 5.0 (the rules of 4.1)".
    pub fn title(&self) -> String {
        let (major, minor) = self.level;
        let mut title = format!("DirectML Split at feature level {major}.{minor}");
        if self.row != self.level {
            title.push_str(&format!(" (the rules of {}.{})", self.row.0, self.row.1));
        }
        title
    }

    fn supports_rank(&self, rank: usize) -> bool {
        (self.ranks.0..=self.ranks.1).contains(&rank)
    }

    fn supports_type(&self, dtype: &DType) -> bool {
        Vocabulary::DirectMl
            .name(dtype)
            .is_some_and(|name| self.types.contains(&name))
    }
}

/// "1 to 8 dimensions", "4 dimensions".
fn ranks_text((low, high): (usize, usize)) -> String {
    if low == high {
        format!("{low} dimensions")
    } else {
        format!("{low} to {high} dimensions")
    }
}

/// Checks one tensor's split against DirectML's Split at `rules`' level: `label` names the
/// tensor as messages do, `axis` is the axis the cut uses (counted from the front or back)
/// and `sizes` the sizes along it of the pieces Split would write (`OutputCount` of them, in
/// order; a tensor copied whole is one piece). Every problem is returned.
pub fn check_split(
    rules: &SplitRules,
    label: &str,
    dtype: &DType,
    shape: &[u64],
    axis: i64,
    sizes: &[u64],
) -> Vec<Refusal> {
    let title = rules.title();
    let mut refusals = Vec::new();
    let rank = shape.len();
    refusals.extend(rank_refusal(rules, label, shape));
    refusals.extend(type_refusal(rules, label, dtype));
    let normalized = super::normalize_axis(axis, rank);
    if normalized.is_none() {
        refusals.push(Refusal {
            headline: format!(
                "{title}: Axis must be in the range [0, InputTensor.DimensionCount - 1] \
                 ({SPLIT_PAGE}); axis {axis} is not an axis of {label}, which has {rank} \
                 dimensions"
            ),
            details: vec![format!("shape {}", shape_text(shape))],
            hint: Some(if rank == 0 {
                "a scalar has no axis to split along: keep it whole, or reshape it to [1]"
                    .to_string()
            } else {
                format!("cut along an axis from 0 to {}", rank - 1)
            }),
        });
    }
    if sizes.is_empty() || sizes.len() as u64 > u64::from(u32::MAX) {
        refusals.push(Refusal {
            headline: format!(
                "{title}: OutputCount \"must be greater than 0\" and is a UINT ({SPLIT_PAGE}); \
                 the split of {label} has {} outputs",
                sizes.len()
            ),
            details: Vec::new(),
            hint: Some("cut into 1 to 4294967295 parts".to_string()),
        });
    }
    let Some(axis) = normalized else {
        return refusals;
    };
    let total: u128 = sizes.iter().map(|&s| u128::from(s)).sum();
    if total != u128::from(shape[axis]) {
        refusals.push(Refusal {
            headline: format!(
                "{title}: the outputs' sizes along the axis must add up to the input's \
                 ({SPLIT_PAGE}); those of {label} add up to {total}, not {}",
                shape[axis]
            ),
            details: vec![format!("sizes along axis {axis}: {}", shape_text(sizes))],
            hint: Some(format!("give sizes that add up to {}", shape[axis])),
        });
    }
    let empty: Vec<String> = sizes
        .iter()
        .enumerate()
        .filter(|(_, s)| **s == 0)
        .map(|(piece, _)| (piece + 1).to_string())
        .collect();
    if let Some(dim) = shape.iter().position(|&d| d == 0) {
        refusals.push(Refusal {
            headline: format!(
                "{title}: {BUFFER_PAGE} says \"specifying a size of zero in any dimension is \
                 invalid\"; {label} has size 0 in dimension {dim}"
            ),
            details: vec![format!("shape {}", shape_text(shape))],
            hint: Some("leave the empty tensor out: it holds no data".to_string()),
        });
    } else if !empty.is_empty() {
        refusals.push(Refusal {
            headline: format!(
                "{title}: {BUFFER_PAGE} says \"specifying a size of zero in any dimension is \
                 invalid\"; output{} {} of {label} would have size 0 along axis {axis}",
                if empty.len() == 1 { "" } else { "s" },
                empty.join(", ")
            ),
            details: vec![format!("sizes along axis {axis}: {}", shape_text(sizes))],
            hint: Some(format!(
                "give every output at least one along axis {axis}: sizes without the zeros \
                 ({}), or at most {} parts",
                shape_text(&sizes.iter().copied().filter(|&s| s > 0).collect::<Vec<_>>()),
                shape[axis]
            )),
        });
    }
    let elements = shape
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d))
        .unwrap_or(u64::MAX);
    if elements > MAX_ELEMENTS {
        refusals.push(Refusal {
            headline: format!(
                "{title}: \"the total size of a buffer tensor may not exceed (2^32 - 1) \
                 elements\" ({BUFFER_PAGE}); {label} has {elements}"
            ),
            details: vec![format!("shape {}", shape_text(shape))],
            hint: Some(
                "split it in two steps: first into parts of fewer elements along another axis"
                    .to_string(),
            ),
        });
    }
    refusals
}

/// The refusal of a tensor (`label`, of `shape`) of a rank Split does not take at `rules`'
/// level, with the levels that take it.
fn rank_refusal(rules: &SplitRules, label: &str, shape: &[u64]) -> Option<Refusal> {
    let rank = shape.len();
    let title = rules.title();
    if rules.supports_rank(rank) {
        return None;
    }
    let others: Vec<String> = SPLIT_ROWS
        .iter()
        .filter(|(_, ranks, _)| (ranks.0..=ranks.1).contains(&rank))
        .map(|(lowest, ranks, _)| {
            format!(
                "--spec directml:{}.{} takes {}",
                lowest.0,
                lowest.1,
                ranks_text(*ranks)
            )
        })
        .collect();
    Some(Refusal {
        headline: format!(
            "{title} supports {} ({SPLIT_PAGE}, its tensor support table); {label} has {rank}",
            ranks_text(rules.ranks)
        ),
        details: vec![format!("shape {}", shape_text(shape))],
        hint: Some(if others.is_empty() {
            format!(
                "reshape it to {} first (dimensions of size 1 change no data)",
                ranks_text(rules.ranks)
            )
        } else {
            others.join("; ")
        }),
    })
}

/// The refusal of a tensor (`label`) of an element type Split does not take at `rules`'
/// level, with the levels that take it.
fn type_refusal(rules: &SplitRules, label: &str, dtype: &DType) -> Option<Refusal> {
    let title = rules.title();
    if rules.supports_type(dtype) {
        return None;
    }
    let name = Vocabulary::DirectMl.name(dtype);
    let others: Vec<String> = SPLIT_ROWS
        .iter()
        .filter(|(_, _, types)| name.is_some_and(|n| types.contains(&n)))
        .map(|(lowest, _, _)| format!("directml:{}.{}", lowest.0, lowest.1))
        .collect();
    Some(Refusal {
        headline: format!(
            "{title} does not support {dtype} tensors ({SPLIT_PAGE}, its tensor support \
             table); {label} is {dtype}"
        ),
        details: vec![format!("{title} supports {}", rules.types.join(", "))],
        hint: Some(match (name, others.is_empty()) {
            (Some(_), false) => {
                format!("{dtype} is supported by --spec {}", others.join(", "))
            }
            (None, _) => format!(
                "DirectML has no {dtype} tensors: convert the tensor to a type it lists first"
            ),
            (Some(_), true) => "convert the tensor to a type it lists first".to_string(),
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dtype(name: &str) -> DType {
        DType::from_name(name).unwrap()
    }

    fn at(text: &str) -> SplitRules {
        SplitRules::of(&Spec::parse(text).unwrap()).unwrap()
    }

    fn headlines(refusals: &[Refusal]) -> Vec<&str> {
        refusals.iter().map(|r| r.headline.as_str()).collect()
    }

    #[test]
    fn the_levels_follow_the_split_page_not_the_join_page() {
        assert_eq!(at("directml").ranks, (1, 8));
        assert_eq!(at("directml:3.0").ranks, (1, 8));
        assert_eq!(at("directml:2.1").ranks, (4, 4));
        assert_eq!(at("directml:1.0").ranks, (4, 4));
        assert_eq!(
            at("directml:5.0").title(),
            "DirectML Split at feature level 5.0 (the rules of 4.1)"
        );
        assert_eq!(at("directml:3.1").row, (3, 0));
        assert_eq!(
            at("directml:2.1").title(),
            "DirectML Split at feature level 2.1"
        );
        assert!(SplitRules::of(&Spec::parse("onnx").unwrap()).is_none());
        assert!(SplitRules::of(&Spec::parse("openvino").unwrap()).is_none());
    }

    #[test]
    fn a_split_directml_takes_passes() {
        let ok = check_split(
            &at("directml:3.0"),
            "`w`",
            &dtype("float32"),
            &[6, 4],
            0,
            &[2, 1, 3],
        );
        assert!(ok.is_empty(), "{:?}", headlines(&ok));
        let ok = check_split(
            &at("directml:1.0"),
            "`w`",
            &dtype("float16"),
            &[1, 1, 6, 2],
            -2,
            &[3, 3],
        );
        assert!(ok.is_empty(), "{:?}", headlines(&ok));
    }

    #[test]
    fn ranks_outside_the_row_are_refused_naming_the_levels_that_take_them() {
        let refused = check_split(
            &at("directml:2.1"),
            "`w`",
            &dtype("float32"),
            &[6, 4],
            0,
            &[3, 3],
        );
        assert_eq!(refused.len(), 1);
        assert!(
            refused[0].headline.contains("supports 4 dimensions"),
            "{}",
            refused[0].headline
        );
        assert!(refused[0].headline.contains("`w` has 2"));
        assert!(refused[0].headline.contains("DML_SPLIT_OPERATOR_DESC"));
        let hint = refused[0].hint.as_deref().unwrap();
        assert!(
            hint.contains("--spec directml:3.0 takes 1 to 8 dimensions"),
            "{hint}"
        );
        let nine = [1, 1, 1, 1, 1, 1, 1, 1, 2];
        let refused = check_split(&at("directml"), "`w`", &dtype("float32"), &nine, 8, &[1, 1]);
        assert_eq!(refused.len(), 1);
        assert!(refused[0].hint.as_deref().unwrap().starts_with("reshape"));
    }

    #[test]
    fn types_are_checked_per_level() {
        let refused = check_split(
            &at("directml:3.0"),
            "`w`",
            &dtype("float64"),
            &[4],
            0,
            &[2, 2],
        );
        assert_eq!(refused.len(), 1);
        assert!(
            refused[0].headline.contains("does not support float64"),
            "{}",
            refused[0].headline
        );
        assert_eq!(
            refused[0].hint.as_deref(),
            Some("float64 is supported by --spec directml:4.1")
        );
        let refused = check_split(
            &at("directml:1.0"),
            "`w`",
            &dtype("int8"),
            &[1, 1, 1, 4],
            3,
            &[4],
        );
        assert!(
            refused[0]
                .hint
                .as_deref()
                .unwrap()
                .contains("directml:3.0, directml:2.1")
        );
        let refused = check_split(&at("directml"), "`w`", &dtype("bfloat16"), &[4], 0, &[4]);
        assert!(
            refused[0]
                .hint
                .as_deref()
                .unwrap()
                .starts_with("DirectML has no bfloat16")
        );
    }

    #[test]
    fn the_members_axis_output_count_and_sizes_are_checked() {
        let rules = at("directml");
        let f32 = dtype("float32");
        let refused = check_split(&rules, "`w`", &f32, &[4, 2], 2, &[4]);
        assert!(
            refused[0]
                .headline
                .contains("[0, InputTensor.DimensionCount - 1]")
        );
        let refused = check_split(&rules, "`w`", &f32, &[4, 2], 0, &[]);
        assert!(
            refused[0]
                .headline
                .contains("OutputCount \"must be greater than 0\"")
        );
        let refused = check_split(&rules, "`w`", &f32, &[4, 2], 0, &[1, 2]);
        assert!(
            refused[0].headline.contains("add up to 3, not 4"),
            "{}",
            refused[0].headline
        );
        let refused = check_split(&rules, "`w`", &f32, &[2, 2], 0, &[1, 1, 0]);
        assert_eq!(refused.len(), 1);
        assert!(
            refused[0]
                .headline
                .contains("output 3 of `w` would have size 0"),
            "{}",
            refused[0].headline
        );
        assert_eq!(
            refused[0].hint.as_deref(),
            Some(
                "give every output at least one along axis 0: sizes without the zeros \
                 ([1, 1]), or at most 2 parts"
            )
        );
        let refused = check_split(&rules, "`w`", &f32, &[0, 2], 1, &[1, 1]);
        assert!(refused[0].headline.contains("size 0 in dimension 0"));
        let refused = check_split(
            &rules,
            "`w`",
            &f32,
            &[1 << 16, 1 << 16],
            0,
            &[1 << 15, 1 << 15],
        );
        assert!(refused[0].headline.contains("(2^32 - 1) elements"));
        let scalar = check_split(&rules, "`s`", &f32, &[], 0, &[1]);
        assert_eq!(scalar.len(), 2, "{:?}", headlines(&scalar));
    }
}
