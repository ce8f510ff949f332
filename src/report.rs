//! What `--dry-run` prints on standard output: the checked plan. Nothing here reads data.

use std::path::Path;

use crate::backend::Engine;
use crate::format::{Format, shape_text};
use crate::input::Input;
use crate::job::TensorJob;
use crate::spec::Spec;

/// The plan of a checked job as aligned text: the rules it passed, the engine (unless it is
/// the default CPU engine) and why, the inputs, each output tensor with its axis (as given and
/// as the operator takes it) or `kept`, the output, and what the engine does with each tensor.
pub fn dry_run(
    spec: Spec,
    inputs: &[Input],
    job: &[TensorJob],
    axis_given: Option<i64>,
    output: Option<(&Path, Format)>,
    engine: &Engine,
) -> String {
    let mut text = format!(
        "dry run: nothing written; the join passes {}\n",
        rules(spec)
    );
    if let Some(note) = &engine.note {
        text.push_str(&format!("backend: {note}\n"));
    }
    let single = job.len() == 1 && !job[0].kept && job[0].sources.len() == inputs.len();
    text.push_str("inputs:\n");
    let rows: Vec<Vec<String>> = if single {
        job[0]
            .sources
            .iter()
            .zip(inputs)
            .map(|(source, input)| {
                vec![
                    source.name.position.to_string(),
                    source.name.label(),
                    input.format.name().to_string(),
                    source.info.dtype.to_string(),
                    source.info.shape_text(),
                    bytes(source.info.data_len),
                ]
            })
            .collect()
    } else {
        inputs
            .iter()
            .map(|input| {
                let data: u64 = input.tensors.iter().map(|t| t.info.data_len).sum();
                vec![
                    input.name.position.to_string(),
                    input.name.label(),
                    input.format.name().to_string(),
                    tensors(input.tensors.len()),
                    bytes(data),
                ]
            })
            .collect()
    };
    text.push_str(&table(&rows));
    if single {
        text.push_str(&format!("axis: {}\n", axis(&job[0], axis_given)));
    } else {
        text.push_str("tensors:\n");
        let rows: Vec<Vec<String>> = job
            .iter()
            .map(|t| {
                vec![
                    t.out.name.clone(),
                    // --axis-for rules may set each tensor's axis: show the one it joins along.
                    if t.kept {
                        "kept".to_string()
                    } else {
                        format!("axis {}", t.plan.axis)
                    },
                    t.out.dtype.to_string(),
                    shape_text(&t.out.shape),
                    bytes(t.out.bytes),
                ]
            })
            .collect();
        text.push_str(&table(&rows));
    }
    let (path, format) = match output {
        Some((path, format)) => (path.display().to_string(), format.name()),
        None => ("(no output named)".to_string(), "-"),
    };
    let what = match job {
        [only] if single => format!("{}  {}", only.out.dtype, shape_text(&only.out.shape)),
        _ => tensors(job.len()),
    };
    text.push_str(&format!(
        "output: {path}  {format}  {what}  {}\n",
        bytes(total_bytes(job))
    ));
    let plans: Vec<Vec<String>> = (0..job.len())
        .filter_map(|i| Some(vec![job[i].out.name.clone(), engine.describe(i)?]))
        .collect();
    match &plans[..] {
        [] => {}
        [only] if single => text.push_str(&format!("directml: {}\n", only[1])),
        _ => text.push_str(&format!("directml:\n{}", table(&plans))),
    }
    text
}

/// The same plan as JSON, for scripts (`--dry-run --format json`). The fields are listed in
/// the man page's DRY RUN section; keep the two in step.
pub fn dry_run_json(
    spec: Spec,
    inputs: &[Input],
    job: &[TensorJob],
    axis_given: Option<i64>,
    output: Option<(&Path, Format)>,
    engine: &Engine,
) -> String {
    let inputs: Vec<serde_json::Value> = inputs
        .iter()
        .map(|input| {
            let tensors: Vec<serde_json::Value> = input
                .tensors
                .iter()
                .map(|t| {
                    serde_json::json!({
                        "name": t.name.tensor,
                        "dtype": t.info.dtype.to_string(),
                        "shape": t.info.shape,
                        "bytes": t.info.data_len,
                    })
                })
                .collect();
            serde_json::json!({
                "position": input.name.position,
                "path": input.name.label(),
                "format": input.format.name(),
                "tensors": tensors,
            })
        })
        .collect();
    let tensors: Vec<serde_json::Value> = job
        .iter()
        .enumerate()
        .map(|(index, t)| {
            serde_json::json!({
                "name": t.out.name,
                "kept": t.kept,
                "axis": (!t.kept).then_some(t.plan.axis),
                "dtype": t.out.dtype.to_string(),
                "shape": t.out.shape,
                "bytes": t.out.bytes,
                "inputs": t.sources.iter().map(|s| s.name.position).collect::<Vec<_>>(),
                "engine": engine.describe(index),
            })
        })
        .collect();
    let plan = serde_json::json!({
        "rules": rules(spec),
        "spec": spec.check_types.then_some(spec.profile.name),
        "axis_given": axis_given,
        "backend": engine.note,
        "inputs": inputs,
        "tensors": tensors,
        "output": {
            "path": output.map(|(path, _)| path.display().to_string()),
            "format": output.map(|(_, format)| format.name()),
            "bytes": total_bytes(job),
        },
    });
    format!("{plan}\n")
}

/// The rules the join passed: the profile's, or only its shape rules without `--spec`.
fn rules(spec: Spec) -> String {
    if spec.check_types {
        spec.title()
    } else {
        format!("{}'s shape rules", spec.title())
    }
}

/// Bytes of output data, all tensors together.
fn total_bytes(job: &[TensorJob]) -> u64 {
    job.iter().map(|t| t.out.bytes).sum()
}

/// The join axis as the operator takes it, and as given when that differs.
fn axis(tensor: &TensorJob, given: Option<i64>) -> String {
    let axis = tensor.plan.axis;
    match given {
        Some(given) if given != axis as i64 => format!("{axis} (given as {given})"),
        None => format!("{axis} (the default)"),
        _ => axis.to_string(),
    }
}

fn bytes(count: u64) -> String {
    format!("{count} bytes")
}

fn tensors(count: usize) -> String {
    format!("{count} tensor{}", if count == 1 { "" } else { "s" })
}

/// Rows of cells as lines with columns aligned, indented by two spaces.
fn table(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut text = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:width$}"))
            .collect();
        text.push_str(&format!("  {}\n", cells.join("  ").trim_end()));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_their_columns() {
        let rows = vec![
            vec!["1".to_string(), "a.npy".to_string(), "[2, 3]".to_string()],
            vec!["10".to_string(), "bb.npy".to_string(), "[2]".to_string()],
        ];
        assert_eq!(table(&rows), "  1   a.npy   [2, 3]\n  10  bb.npy  [2]\n");
    }
}
