//! The plan report as text for people (`--dry-run`): aligned tables of the inputs and the
//! output tensors, the output and its shards. Every name in it comes from the inputs or the
//! command line and is quoted ([`crate::messages::quote`]); standard output's gate quotes
//! each line again.

use crate::messages::shape_text;
use crate::messages::{excerpt, quote};
use crate::plan::Grid;

use super::plan::{PlanReport, ShardsReport, TensorReport};

/// The plan as aligned text: the rules it passed, the engine (unless it is the default CPU
/// engine) and why, the inputs, each output tensor with its axis (as given and as the
/// operator takes it) or `kept` and the rule that decided it, the output, and what the engine
/// does with each tensor; with `--append`, where the new data goes.
pub fn render(report: &PlanReport) -> String {
    let mut text = match report.written {
        true => format!("written; the join passed {}\n", report.rules),
        false => format!(
            "dry run: nothing written; the join passes {}\n",
            report.rules
        ),
    };
    if let Some(note) = &report.backend {
        text.push_str(&format!("backend: {note}\n"));
    }
    if let Some(family) = &report.family {
        text.push_str(&format!("family: {family}\n"));
    }
    let single = report.single();
    text.push_str("inputs:\n");
    text.push_str(&table(&input_rows(report, single)));
    text.push_str(&index_notes(report));
    text.push_str(&reader_notes(report));
    text.push_str(&filtered_text(report));
    if single {
        text.push_str(&format!("axis: {}\n", axis(&report.tensors[0], report)));
    } else {
        text.push_str("tensors:\n");
        text.push_str(&table(&tensor_rows(report)));
        text.push_str(&counters_text(report));
        text.push_str(&blocks_text(report));
    }
    let output = &report.output;
    let (path, format) = match (&output.path, output.format) {
        (Some(path), Some(format)) => (quote(path).into_owned(), format),
        _ => ("(no output named)".to_string(), "-"),
    };
    let what = match &report.tensors[..] {
        [only] if single => format!("{}  {}", only.dtype, shape_text(&only.shape)),
        all => tensors(all.len()),
    };
    text.push_str(&format!(
        "output: {path}  {format}  {what}  {}\n",
        bytes(output.bytes)
    ));
    if let Some(shards) = &report.shards {
        text.push_str(&shards_text(shards, report));
    }
    let plans: Vec<Vec<String>> = report
        .tensors
        .iter()
        .filter_map(|t| Some(vec![t.name.clone(), t.engine.clone()?]))
        .collect();
    match &plans[..] {
        [] => {}
        [only] if single => text.push_str(&format!("directml: {}\n", quote(&only[1]))),
        _ => text.push_str(&format!("directml:\n{}", table(&plans))),
    }
    if let Some(shares) = &report.workers {
        text.push_str(&shares_text(shares));
    }
    if let Some(append) = &output.append {
        text.push_str(&format!(
            "append: in place, {} bytes written at byte {} of {path}, after its {} bytes of \
             data; then its header rewritten for the new shape\n",
            append.bytes, append.offset, append.data_before
        ));
    }
    text
}

/// The inputs' rows: for one tensor, each input's part of it; else each input's file with
/// how many tensors (or blocks) it holds.
fn input_rows(report: &PlanReport, single: bool) -> Vec<Vec<String>> {
    if single {
        report.tensors[0]
            .sources
            .iter()
            .zip(&report.inputs)
            .map(|(source, input)| {
                vec![
                    source.name.position.to_string(),
                    source.name.label(),
                    input.format.to_string(),
                    source.dtype.clone(),
                    shape_text(&source.shape),
                    bytes(source.bytes),
                ]
            })
            .collect()
    } else {
        report
            .inputs
            .iter()
            .map(|input| {
                let data: u64 = input.tensors.iter().map(|t| t.bytes).sum();
                let held = match input.block_files {
                    Some(files) => format!("{} blocks in {files} files", input.tensors.len()),
                    None => tensors(input.tensors.len()),
                };
                vec![
                    input.position.to_string(),
                    input.path.clone(),
                    input.format.to_string(),
                    held,
                    bytes(data),
                ]
            })
            .collect()
    }
}

/// The output tensors' rows: each with its axis (or `kept`, `copied`, its blocks), type,
/// shape, bytes and what decided it.
fn tensor_rows(report: &PlanReport) -> Vec<Vec<String>> {
    report
        .tensors
        .iter()
        .map(|t| {
            vec![
                t.name.clone(),
                // --axis-for rules may set each tensor's axis: show the one it joins along.
                if let Some(blocks) = &t.blocks {
                    format!("blocks {}", grid(&blocks.grid).describe())
                } else if t.kept && report.inputs.len() == 1 {
                    "copied".to_string()
                } else if t.kept {
                    "kept".to_string()
                } else {
                    // With the rule's words: `axis 0 chunks 4:1:1`, `axis 0 replicas 2`.
                    format!("axis {}{}", t.plan_axis, t.words)
                },
                t.dtype.clone(),
                shape_text(&t.shape),
                bytes(t.bytes),
                decided_by(t, report),
            ]
        })
        .collect()
}

/// Each worker's share of a job's output, balanced by bytes.
pub(super) fn shares_text(shares: &[super::plan::ShareReport]) -> String {
    let rows: Vec<Vec<String>> = shares
        .iter()
        .map(|share| {
            let files: Vec<String> = share.files.iter().map(|f| quote(f).into_owned()).collect();
            vec![
                format!("  worker {}/{}", share.worker, shares.len()),
                format!("bytes {}..{}", share.start, share.end),
                bytes(share.end - share.start),
                capped_list(&files),
            ]
        })
        .collect();
    format!(
        "workers: {}, each writing its share of the output's bytes\n{}",
        shares.len(),
        table(&rows)
    )
}

/// `a, b, c` or, past four, the first three and a count.
fn capped_list(items: &[String]) -> String {
    match items.len() {
        0 => "-".to_string(),
        1..=4 => items.join(", "),
        n => format!("{} and {} more", items[..3].join(", "), n - 3),
    }
}

/// The grid a report describes.
fn grid(grid: &super::plan::GridReport) -> Grid {
    Grid {
        axes: grid.axes.clone(),
        segments: grid.segments.clone(),
    }
}

/// Each tensor made from blocks, with the region of the full tensor each block fills.
fn blocks_text(report: &PlanReport) -> String {
    let mut text = String::new();
    for t in &report.tensors {
        let Some(blocks) = &t.blocks else {
            continue;
        };
        text.push_str(&format!(
            "  {}  {}\n",
            quote(&t.name),
            grid(&blocks.grid).describe()
        ));
        let rows: Vec<Vec<String>> = blocks
            .blocks
            .iter()
            .map(|block| {
                let region: Vec<String> = block
                    .offsets
                    .iter()
                    .zip(&block.shape)
                    .map(|(o, d)| format!("{o}:{}", o + d))
                    .collect();
                vec![
                    format!("  [{}]", region.join(", ")),
                    block.source.to_string(),
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

/// What the readers noted about each input: a checkpoint's values that are not tensors, its
/// tensors that share a storage.
fn reader_notes(report: &PlanReport) -> String {
    let mut text = String::new();
    for input in &report.inputs {
        for note in &input.notes {
            text.push_str(&format!("  input {}: {note}\n", input.position));
        }
    }
    text
}

/// For each sharded input, its index, shards and both byte counts: the index's `total_size`
/// and the tensors'.
fn index_notes(report: &PlanReport) -> String {
    let mut text = String::new();
    for input in &report.inputs {
        let Some(index) = &input.index else { continue };
        let said = match index.total_size {
            Some(size) if size == index.tensor_bytes => format!("total_size {}", bytes(size)),
            Some(size) => format!("total_size {}, which differs", bytes(size)),
            None => "no total_size".to_string(),
        };
        let shards = index.files.len();
        text.push_str(&format!(
            "  input {}: {shards} shard{}; the index says {said}; the tensors hold {}\n",
            input.position,
            if shards == 1 { "" } else { "s" },
            bytes(index.tensor_bytes)
        ));
    }
    text
}

/// The files of a sharded output: each shard with its tensors and bytes, the index, the
/// previous set's files the commit removes, and what else the previous index lists, which the
/// commit leaves alone.
fn shards_text(shards: &ShardsReport, report: &PlanReport) -> String {
    let mut text = format!(
        "shards: {} in {} (at most {} each, unless one tensor alone is larger){}\n",
        shards.files.len(),
        quote(&shards.folder),
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
            tensors(file.at.len()),
            bytes(file.bytes)
        ));
        let rows: Vec<Vec<String>> = file
            .at
            .iter()
            .map(|&t| {
                let out = &report.tensors[t];
                vec![
                    format!("  {}", out.name),
                    out.dtype.clone(),
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
            quote(path)
        ));
    }
    let left_alone = shards.left_alone.iter().map(|left| {
        format!(
            "leaves {} alone: the previous index lists it, but {}",
            crate::messages::name(&left.name),
            left.why
        )
    });
    for line in crate::error::capped(left_alone.collect(), 20) {
        text.push_str(&format!("  {line}\n"));
    }
    text
}

/// What each filter removed.
fn filtered_text(report: &PlanReport) -> String {
    let mut text = String::new();
    for filter in &report.filtered {
        let count = filter.removed.len();
        let names = filter.removed.iter().map(|n| format!("`{}`", excerpt(n)));
        text.push_str(&format!(
            "{} removed {count} tensor{}: {}\n",
            filter.filter,
            if count == 1 { "" } else { "s" },
            crate::error::capped(names.collect(), 5).join(", ")
        ));
    }
    text
}

/// The step counters `--cast` left exact, named.
fn counters_text(report: &PlanReport) -> String {
    let counters: Vec<String> = report
        .tensors
        .iter()
        .filter(|t| t.counter)
        .map(|t| format!("`{}`", excerpt(&t.name)))
        .collect();
    if counters.is_empty() {
        return String::new();
    }
    let count = counters.len();
    format!(
        "kept exact: {count} step counter{} left in {} own type by --cast ({}): a cast \
         would round them (1001 in bfloat16 is 1000)\n",
        if count == 1 { "" } else { "s" },
        if count == 1 { "its" } else { "their" },
        crate::error::capped(counters, 10).join(", ")
    )
}

/// The join axis as the operator takes it, and as given when that differs or a rule gave it.
fn axis(tensor: &TensorReport, report: &PlanReport) -> String {
    let axis = tensor.plan_axis;
    match (&tensor.rule_cited, report.axis_given) {
        (Some(rule), _) => format!("{axis}{} (by {})", tensor.words, quote(rule)),
        (None, Some(given)) if given != axis as i64 => format!("{axis} (given as {given})"),
        (None, None) => format!("{axis} (the default)"),
        _ => axis.to_string(),
    }
}

/// What decided how a tensor is treated: its rule, or `-a`; a copy of the one input's
/// tensor is decided by nothing (no axis is taken).
fn decided_by(tensor: &TensorReport, report: &PlanReport) -> String {
    match (&tensor.rule_cited, report.axis_given) {
        (Some(rule), _) => format!("by {rule}"),
        (None, _) if tensor.blocks.is_some() => "by the blocks' offsets".to_string(),
        (None, _) if tensor.kept && report.inputs.len() == 1 => "from the only input".to_string(),
        (None, Some(given)) => format!("by -a {given}"),
        (None, None) => "by the default axis".to_string(),
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
pub(super) fn table(rows: &[Vec<String>]) -> String {
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
