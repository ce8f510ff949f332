//! What `--dry-run` prints on standard output: the checked plan. Nothing here reads data.

use std::collections::HashSet;
use std::path::Path;

use crate::backend::Engine;
use crate::config::JoinRules;
use crate::format::{Format, shape_text};
use crate::input::Input;
use crate::job::TensorJob;
use crate::messages::quote;
use crate::plan::Placement;
use crate::shards::ShardPlan;
use crate::spec::Spec;

/// The plan of a checked job as aligned text: the rules it passed, the engine (unless it is
/// the default CPU engine) and why, the inputs, each output tensor with its axis (as given and
/// as the operator takes it) or `kept` and the rule that decided it, the output, and what the
/// engine does with each tensor.
pub fn dry_run(
    rules: &JoinRules,
    inputs: &[Input],
    job: &[TensorJob],
    output: Option<(&Path, Format)>,
    engine: &Engine,
    shards: Option<&ShardPlan>,
) -> String {
    let spec = rules.spec;
    let mut text = format!(
        "dry run: nothing written; the join passes {}\n",
        passed(spec)
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
                let held = match input.offsets() {
                    Some(_) => block_files(input),
                    None => tensors(input.tensors.len()),
                };
                vec![
                    input.name.position.to_string(),
                    input.name.label(),
                    input.format.name().to_string(),
                    held,
                    bytes(data),
                ]
            })
            .collect()
    };
    text.push_str(&table(&rows));
    text.push_str(&index_notes(inputs));
    text.push_str(&reader_notes(inputs));
    if single {
        text.push_str(&format!("axis: {}\n", axis(&job[0], rules)));
    } else {
        text.push_str("tensors:\n");
        let rows: Vec<Vec<String>> = job
            .iter()
            .map(|t| {
                vec![
                    t.out.name.clone(),
                    // --axis-for rules may set each tensor's axis: show the one it joins along.
                    if let Some(placement) = &t.placement {
                        format!("blocks {}", placement.grid.describe())
                    } else if t.kept && inputs.len() == 1 {
                        "copied".to_string()
                    } else if t.kept {
                        "kept".to_string()
                    } else {
                        format!("axis {}", t.plan.axis)
                    },
                    t.out.dtype.to_string(),
                    shape_text(&t.out.shape),
                    bytes(t.out.bytes),
                    format!("by {}", decided_by(t, rules)),
                ]
            })
            .collect();
        text.push_str(&table(&rows));
        text.push_str(&blocks_text(job));
    }
    let (path, format) = match output {
        Some((path, format)) => (crate::messages::path(path), format.name()),
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
    if let Some(shards) = shards {
        text.push_str(&shards_text(shards, job));
    }
    let plans: Vec<Vec<String>> = (0..job.len())
        .filter_map(|i| Some(vec![job[i].out.name.clone(), engine.describe(i)?]))
        .collect();
    match &plans[..] {
        [] => {}
        [only] if single => text.push_str(&format!("directml: {}\n", quote(&only[1]))),
        _ => text.push_str(&format!("directml:\n{}", table(&plans))),
    }
    text
}

/// `10 blocks in 4 files`: what a distributed checkpoint's input holds.
fn block_files(input: &Input) -> String {
    let files: HashSet<&Path> = input.tensors.iter().map(|t| &*t.name.path).collect();
    format!("{} blocks in {} files", input.tensors.len(), files.len())
}

/// Each tensor made from blocks, with the region of the full tensor each block fills.
fn blocks_text(job: &[TensorJob]) -> String {
    let mut text = String::new();
    for t in job {
        let Some(placement) = &t.placement else {
            continue;
        };
        text.push_str(&format!(
            "  {}  {}\n",
            quote(&t.out.name),
            placement.grid.describe()
        ));
        let rows: Vec<Vec<String>> = t
            .sources
            .iter()
            .zip(&placement.offsets)
            .map(|(source, offsets)| {
                let region: Vec<String> = offsets
                    .iter()
                    .zip(&source.info.shape)
                    .map(|(o, d)| format!("{o}:{}", o + d))
                    .collect();
                vec![
                    format!("  [{}]", region.join(", ")),
                    source.name.to_string(),
                ]
            })
            .collect();
        text.push_str(&table(&rows));
    }
    if text.is_empty() {
        text
    } else {
        format!("blocks:\n{text}")
    }
}

/// For each sharded input, its index, shards and both byte counts: the index's `total_size`
/// and the tensors'.
fn index_notes(inputs: &[Input]) -> String {
    let mut text = String::new();
    for input in inputs {
        let Some(set) = input.shards() else { continue };
        let said = match set.total_size {
            Some(size) if size == set.tensor_bytes => format!("total_size {}", bytes(size)),
            Some(size) => format!("total_size {}, which differs", bytes(size)),
            None => "no total_size".to_string(),
        };
        let shards = set.files.len();
        text.push_str(&format!(
            "  input {}: {shards} shard{}; the index says {said}; the tensors hold {}\n",
            input.name.position,
            if shards == 1 { "" } else { "s" },
            bytes(set.tensor_bytes)
        ));
    }
    text
}

/// What the readers noted about each input: a checkpoint's values that are not tensors, its
/// tensors that share a storage.
fn reader_notes(inputs: &[Input]) -> String {
    let mut text = String::new();
    for input in inputs {
        for note in input.notes() {
            text.push_str(&format!("  input {}: {note}\n", input.name.position));
        }
    }
    text
}

/// The files of a sharded output: each shard with its tensors and bytes, the index, the
/// previous set's files the commit removes, and what else the previous index lists, which the
/// commit leaves alone.
fn shards_text(shards: &ShardPlan, job: &[TensorJob]) -> String {
    let mut text = format!(
        "shards: {} in {} (at most {} each, unless one tensor alone is larger){}\n",
        shards.files.len(),
        crate::messages::path(&shards.folder),
        bytes(shards.max_shard_size),
        if shards.creates_folder {
            ", a folder to create"
        } else {
            ""
        }
    );
    for file in &shards.files {
        text.push_str(&format!(
            "  {}  {}  {}\n",
            quote(&file.name),
            tensors(file.tensors.len()),
            bytes(file.bytes)
        ));
        let rows: Vec<Vec<String>> = file
            .tensors
            .iter()
            .map(|&t| {
                let out = &job[t].out;
                vec![
                    format!("  {}", out.name),
                    out.dtype.to_string(),
                    shape_text(&out.shape),
                    bytes(out.bytes),
                ]
            })
            .collect();
        text.push_str(&table(&rows));
    }
    if let Some(index) = &shards.index {
        let index = quote(index);
        text.push_str(&format!("  {index}  the index, placed last\n"));
    }
    for path in &shards.removes {
        text.push_str(&format!(
            "  removes {}: the previous set's, not in the new one\n",
            crate::messages::path(path)
        ));
    }
    let left_alone = shards.left_alone.iter().map(|left| {
        format!(
            "leaves {} alone: the previous index lists it, but {}",
            crate::messages::name(&left.listed),
            left.why
        )
    });
    for line in crate::error::capped(left_alone.collect(), 20) {
        text.push_str(&format!("  {line}\n"));
    }
    text
}

/// The same plan as JSON, for scripts (`--dry-run=json`). The fields are listed in
/// the man page's DRY RUN section; keep the two in step.
pub fn dry_run_json(
    rules: &JoinRules,
    inputs: &[Input],
    job: &[TensorJob],
    output: Option<(&Path, Format)>,
    engine: &Engine,
    shards: Option<&ShardPlan>,
) -> String {
    let (spec, axis_given) = (rules.spec, rules.axis);
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
            let index = input.shards().map(|set| {
                let files: Vec<String> =
                    set.files.iter().map(|f| f.display().to_string()).collect();
                serde_json::json!({
                    "path": set.index.display().to_string(),
                    "files": files,
                    "total_size": set.total_size,
                    "tensor_bytes": set.tensor_bytes,
                })
            });
            serde_json::json!({
                "position": input.name.position,
                "path": input.name.label(),
                "format": input.format.name(),
                "tensors": tensors,
                "index": index,
                "notes": input.notes(),
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
                "axis": (!t.kept && t.placement.is_none()).then_some(t.plan.axis),
                "blocks": t.placement.as_ref().map(|p| blocks_json(t, p)),
                "rule": t.rule.map(|at| rules.tensor_rules[at].written()),
                "dtype": t.out.dtype.to_string(),
                "shape": t.out.shape,
                "bytes": t.out.bytes,
                "inputs": t.sources.iter().map(|s| s.name.position).collect::<Vec<_>>(),
                "engine": engine.describe(index),
            })
        })
        .collect();
    let plan = serde_json::json!({
        "rules": passed(spec),
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
        "shards": shards.map(|shards| shards_json(shards, job)),
    });
    format!("{plan}\n")
}

/// A tensor's grid and blocks, as `--dry-run=json` lists them.
fn blocks_json(tensor: &TensorJob, placement: &Placement) -> serde_json::Value {
    let blocks: Vec<serde_json::Value> = tensor
        .sources
        .iter()
        .zip(&placement.offsets)
        .map(|(source, offsets)| {
            serde_json::json!({
                "path": source.name.path.display().to_string(),
                "offsets": offsets,
                "shape": source.info.shape,
            })
        })
        .collect();
    serde_json::json!({
        "grid": {"axes": placement.grid.axes, "segments": placement.grid.segments},
        "blocks": blocks,
    })
}

/// The files of a sharded output, as `--dry-run=json` lists them.
fn shards_json(shards: &ShardPlan, job: &[TensorJob]) -> serde_json::Value {
    let files: Vec<serde_json::Value> = shards
        .files
        .iter()
        .map(|file| {
            let names: Vec<&str> = file
                .tensors
                .iter()
                .map(|&t| job[t].out.name.as_str())
                .collect();
            serde_json::json!({
                "name": file.name,
                "tensors": names,
                "bytes": file.bytes,
            })
        })
        .collect();
    let removes: Vec<String> = shards
        .removes
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    let left_alone: Vec<serde_json::Value> = shards
        .left_alone
        .iter()
        .map(|left| serde_json::json!({"name": left.listed, "why": left.why}))
        .collect();
    serde_json::json!({
        "folder": shards.folder.display().to_string(),
        "max_shard_size": shards.max_shard_size,
        "files": files,
        "index": shards.index,
        "removes": removes,
        "left_alone": left_alone,
    })
}

/// The rules the join passed: the profile's, or only its shape rules without `--spec`.
fn passed(spec: Spec) -> String {
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

/// The join axis as the operator takes it, and as given when that differs or a rule gave it.
fn axis(tensor: &TensorJob, rules: &JoinRules) -> String {
    let axis = tensor.plan.axis;
    match (tensor.rule, rules.axis) {
        (Some(at), _) => format!("{axis} (by {})", quote(&rules.tensor_rules[at].to_string())),
        (None, Some(given)) if given != axis as i64 => format!("{axis} (given as {given})"),
        (None, None) => format!("{axis} (the default)"),
        _ => axis.to_string(),
    }
}

/// What decided how a tensor is treated: its rule, or `-a`.
fn decided_by(tensor: &TensorJob, rules: &JoinRules) -> String {
    match (tensor.rule, rules.axis) {
        (Some(at), _) => rules.tensor_rules[at].to_string(),
        (None, _) if tensor.placement.is_some() => "the blocks' offsets".to_string(),
        (None, Some(given)) => format!("-a {given}"),
        (None, None) => "the default axis".to_string(),
    }
}

fn bytes(count: u64) -> String {
    format!("{count} bytes")
}

fn tensors(count: usize) -> String {
    format!("{count} tensor{}", if count == 1 { "" } else { "s" })
}

/// Rows of cells as lines with columns aligned, indented by two spaces. Every cell is quoted
/// ([`crate::messages::quote`]): tensor, file and rule names come from the inputs.
fn table(rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| row.iter().map(|cell| quote(cell).into_owned()).collect())
        .collect();
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
    for row in &rows {
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
