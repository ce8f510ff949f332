//! What `--dry-run` prints: the checked plan, on standard output.

use std::fmt::Write;
use std::path::Path;

use crate::backend::Engine;
use crate::format::shape_text;
use crate::job::TensorJob;
use crate::spec::Spec;

/// The plan of a checked job as text: the rules it passed, the engine (unless it is the
/// default CPU engine) and why, each input, the axis as given and as the operator takes it,
/// the output, and what the engine does with it.
pub fn dry_run(
    spec: Spec,
    job: &[TensorJob],
    axis_given: Option<i64>,
    output: Option<&Path>,
    engine: &Engine,
) -> String {
    let mut text = String::new();
    let rules = if spec.check_types {
        spec.title()
    } else {
        format!("{}'s shape rules", spec.title())
    };
    let _ = writeln!(text, "dry run: nothing written; the join passes {rules}");
    if let Some(note) = &engine.note {
        let _ = writeln!(text, "backend: {note}");
    }
    let output = output.map_or("(no output named)".to_string(), |p| p.display().to_string());
    for (index, tensor) in job.iter().enumerate() {
        for source in &tensor.sources {
            let _ = writeln!(
                text,
                "  input {}  {}  {}  {}",
                source.name.position,
                source.name.label(),
                source.info.dtype,
                source.info.shape_text()
            );
        }
        let axis = tensor.plan.axis;
        let given = match axis_given {
            Some(given) if given != axis as i64 => format!(" (given as {given})"),
            None => " (the profile's default)".to_string(),
            _ => String::new(),
        };
        let _ = writeln!(text, "  axis    {axis}{given}");
        let _ = writeln!(
            text,
            "  output  {output}  {}  {}  {} bytes of data",
            tensor.out.dtype,
            shape_text(&tensor.out.shape),
            tensor.out.bytes
        );
        if let Some(how) = engine.describe(index) {
            let _ = writeln!(text, "  engine  DirectML Join: {how}");
        }
    }
    text
}
