//! The join rules of ONNX Concat-13 (SPEC.md), checked on the inputs' headers before any byte
//! is written. Every refusal names each offending input, the dimension and the sizes, and
//! hints at what would work.

use crate::error::{Error, Refusal, Result};
use crate::input::Tensor;

/// Checks the inputs against the rules and returns the axis counted from the front.
pub fn check(inputs: &[&Tensor], axis: i64) -> Result<usize> {
    let Some(first) = inputs.first() else {
        return Err(refused(Refusal {
            headline: "nothing to join: no inputs were given".to_string(),
            details: Vec::new(),
            hint: Some("name one or more .npy files".to_string()),
        }));
    };
    check_no_scalars(inputs)?;
    check_equal_rank(inputs)?;
    let rank = first.info.shape.len();
    let axis = normalize_axis(axis, rank).ok_or_else(|| axis_out_of_range(inputs, axis))?;
    let mut refusals = Vec::new();
    refusals.extend(dtype_mismatch(inputs));
    refusals.extend(dims_mismatch(inputs, axis));
    if refusals.is_empty() {
        Ok(axis)
    } else {
        Err(Error::Refused(refusals))
    }
}

/// The axis counted from the front, if `axis` lies in `[-rank, rank - 1]`.
pub fn normalize_axis(axis: i64, rank: usize) -> Option<usize> {
    let rank = i64::try_from(rank).ok()?;
    let normalized = if axis < 0 { axis + rank } else { axis };
    (0..rank)
        .contains(&normalized)
        .then_some(normalized as usize)
}

fn refused(refusal: Refusal) -> Error {
    Error::Refused(vec![refusal])
}

fn check_no_scalars(inputs: &[&Tensor]) -> Result<()> {
    let scalars: Vec<&&Tensor> = inputs.iter().filter(|i| i.info.shape.is_empty()).collect();
    if scalars.is_empty() {
        return Ok(());
    }
    let names: Vec<String> = scalars.iter().map(|i| i.name.to_string()).collect();
    Err(refused(Refusal {
        headline: format!(
            "cannot join a scalar (rank 0): {} {} no dimension to join along",
            names.join(", "),
            if scalars.len() == 1 { "has" } else { "have" }
        ),
        details: table(inputs, &[]),
        hint: Some(
            "save scalars as 1-element arrays (numpy: x.reshape(1)) and join those along axis 0"
                .to_string(),
        ),
    }))
}

fn check_equal_rank(inputs: &[&Tensor]) -> Result<()> {
    let rank = inputs[0].info.shape.len();
    let odd: Vec<&&Tensor> = inputs
        .iter()
        .filter(|i| i.info.shape.len() != rank)
        .collect();
    if odd.is_empty() {
        return Ok(());
    }
    let differing: Vec<String> = odd
        .iter()
        .map(|i| format!("{} has rank {}", i.name, i.info.shape.len()))
        .collect();
    Err(refused(Refusal {
        headline: format!(
            "cannot join inputs of different rank: {} has rank {rank}, {}",
            inputs[0].name,
            differing.join(", ")
        ),
        details: table(inputs, &[]),
        hint: Some(format!(
            "every input needs the same number of dimensions; reshape the others to rank {rank} \
             (for example by adding or dropping dimensions of size 1)"
        )),
    }))
}

fn axis_out_of_range(inputs: &[&Tensor], axis: i64) -> Error {
    let rank = inputs[0].info.shape.len();
    refused(Refusal {
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
    })
}

fn dtype_mismatch(inputs: &[&Tensor]) -> Option<Refusal> {
    let first = &inputs[0].info.dtype;
    let marks: Vec<Mark> = inputs
        .iter()
        .enumerate()
        .filter(|(_, i)| &i.info.dtype != first)
        .map(|(row, i)| Mark {
            row,
            column: Column::DType,
            text: format!("{} != {first}", i.info.dtype),
        })
        .collect();
    if marks.is_empty() {
        return None;
    }
    Some(Refusal {
        headline: "cannot join inputs of different element types".to_string(),
        details: table(inputs, &marks),
        hint: Some(format!(
            "the join rules take one element type; convert the inputs to one type first \
             (numpy: x.astype('{first}'))"
        )),
    })
}

fn dims_mismatch(inputs: &[&Tensor], axis: usize) -> Option<Refusal> {
    let reference = &inputs[0].info.shape;
    let mut marks = Vec::new();
    let mut differing_dims = Vec::new();
    for (row, input) in inputs.iter().enumerate().skip(1) {
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
    Some(Refusal {
        headline: format!(
            "cannot join along axis {axis}: the inputs differ in {}",
            dimension_list(&differing_dims)
        ),
        details: table(inputs, &marks),
        hint: Some(axes_that_work(inputs, rank)),
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

/// Which axes these inputs could be joined along: those outside which every dimension agrees.
fn axes_that_work(inputs: &[&Tensor], rank: usize) -> String {
    let reference = &inputs[0].info.shape;
    let disagree: Vec<usize> = (0..rank)
        .filter(|&dim| inputs.iter().any(|i| i.info.shape[dim] != reference[dim]))
        .collect();
    match disagree.as_slice() {
        [only] => format!(
            "these inputs can only be joined along axis {only} (or {})",
            *only as i64 - rank as i64
        ),
        _ => format!(
            "no axis can join these inputs: they differ in {}, and a join allows only one \
             dimension to differ",
            dimension_list(&disagree)
        ),
    }
}

/// A caret under one cell of the inputs table, with a note after it.
struct Mark {
    row: usize,
    column: Column,
    text: String,
}

#[derive(Clone, Copy, PartialEq)]
enum Column {
    DType,
    Dim(usize),
}

/// One aligned line per input (position, file, element type, shape), each followed by a
/// line of carets under the cells `marks` point at.
fn table(inputs: &[&Tensor], marks: &[Mark]) -> Vec<String> {
    let rows: Vec<[String; 4]> = inputs
        .iter()
        .map(|i| {
            [
                format!("input {}", i.name.position),
                i.name.label(),
                i.info.dtype.to_string(),
                i.info.shape_text(),
            ]
        })
        .collect();
    let width = |col: usize| {
        rows.iter()
            .map(|r| r[col].chars().count())
            .max()
            .unwrap_or(0)
    };
    let widths = [width(0), width(1), width(2)];
    let dtype_start = widths[0] + 2 + widths[1] + 2;
    let shape_start = dtype_start + widths[2] + 2;
    let mut lines = Vec::new();
    for (row, cells) in rows.iter().enumerate() {
        lines.push(format!(
            "{:w0$}  {:w1$}  {:w2$}  {}",
            cells[0],
            cells[1],
            cells[2],
            cells[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2]
        ));
        let row_marks: Vec<&Mark> = marks.iter().filter(|m| m.row == row).collect();
        if !row_marks.is_empty() {
            let shape = &inputs[row].info.shape;
            lines.push(caret_line(&row_marks, |column| match column {
                Column::DType => dtype_start,
                Column::Dim(dim) => shape_start + dim_offset(shape, dim),
            }));
        }
    }
    lines
}

/// Carets at each mark's column; a single mark carries its note (`^ 4 != 3`), several marks
/// list their notes after the last caret.
fn caret_line(marks: &[&Mark], position: impl Fn(Column) -> usize) -> String {
    let mut line = String::new();
    for mark in marks {
        let at = position(mark.column);
        while line.chars().count() < at {
            line.push(' ');
        }
        line.push('^');
    }
    let notes: Vec<String> = match marks {
        [only] => vec![only.text.clone()],
        _ => marks
            .iter()
            .map(|m| match m.column {
                Column::Dim(dim) => format!("dimension {dim}: {}", m.text),
                Column::DType => m.text.clone(),
            })
            .collect(),
    };
    format!("{line} {}", notes.join(", "))
}

/// Where dimension `dim`'s number starts in the text `[a, b, c]`.
fn dim_offset(shape: &[u64], dim: usize) -> usize {
    1 + shape[..dim]
        .iter()
        .map(|size| size.to_string().len() + 2)
        .sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn carets_point_at_the_dimension() {
        assert_eq!(dim_offset(&[1, 1, 2, 4], 3), "[1, 1, 2, ".len());
        assert_eq!(dim_offset(&[10, 200], 1), "[10, ".len());
    }
}
