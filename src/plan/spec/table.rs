//! The inputs table of a refusal: one aligned line per input (position, file, element type,
//! shape), carets under the cells that differ, and, past a screenful of inputs, the odd ones
//! out, a reference input and a count of the rest.

use crate::dtype::DType;
use crate::input::Tensor;
use crate::messages::excerpt;
use crate::outliers::{self, Row};

/// A caret under one cell of the inputs table, with a note after it.
pub(super) struct Mark {
    pub(super) row: usize,
    pub(super) column: Column,
    pub(super) text: String,
}

/// A mark under the element type of each input `note` has a note for.
pub(super) fn dtype_marks(
    inputs: &[&Tensor],
    note: impl Fn(&DType) -> Option<String>,
) -> Vec<Mark> {
    inputs
        .iter()
        .enumerate()
        .filter_map(|(row, i)| {
            note(&i.info.dtype).map(|text| Mark {
                row,
                column: Column::DType,
                text,
            })
        })
        .collect()
}

#[derive(Clone, Copy, PartialEq)]
pub(super) enum Column {
    DType,
    /// The shape as a whole (its rank).
    Shape,
    Dim(usize),
}

/// One aligned line per input (position, file, element type, shape), each followed by a
/// line of carets under the cells `marks` point at; past [`outliers::ROWS`] inputs, the
/// marked ones, one unmarked as the reference, and lines that count the rest.
pub(super) fn table(inputs: &[&Tensor], marks: &[Mark]) -> Vec<String> {
    let mut marked: Vec<usize> = marks.iter().map(|m| m.row).collect();
    marked.sort_unstable();
    marked.dedup();
    let listed = outliers::rows(inputs.len(), &marked);
    let cells = |i: &Tensor| {
        [
            format!("input {}", i.name.position),
            // Cut: a name or record type from the file could be megabytes (and a width
            // past 65535 makes `format!` panic).
            excerpt(&i.name.label()).into_owned(),
            excerpt(&i.info.dtype.to_string()).into_owned(),
            i.info.shape_text(),
        ]
    };
    let rows: Vec<(usize, [String; 4])> = listed
        .iter()
        .filter_map(|row| match row {
            Row::Input(i) => Some((*i, cells(inputs[*i]))),
            _ => None,
        })
        .collect();
    let width = |col: usize| {
        rows.iter()
            .map(|(_, r)| r[col].chars().count())
            .max()
            .unwrap_or(0)
    };
    let widths = [width(0), width(1), width(2)];
    let dtype_start = widths[0] + 2 + widths[1] + 2;
    let shape_start = dtype_start + widths[2] + 2;
    let mut rows = rows.into_iter();
    let mut lines = Vec::new();
    for row in &listed {
        if let Some(count) = row.count_text(|i| inputs[i].name.position) {
            lines.push(count);
            continue;
        }
        let Some((row, cells)) = rows.next() else {
            break;
        };
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
                Column::Shape => shape_start,
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
                Column::DType | Column::Shape => m.text.clone(),
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
    fn carets_point_at_the_dimension() {
        assert_eq!(dim_offset(&[1, 1, 2, 4], 3), "[1, 1, 2, ".len());
        assert_eq!(dim_offset(&[10, 200], 1), "[10, ".len());
    }
}
