//! A split's plan as `tjoin split --dry-run` reports it: every output, its tensors, the
//! slices of the input each is made of (`[0:4096, :]`) and their bytes; one typed report,
//! rendered as text or, by serde, as JSON.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::input::Input;
use crate::messages::quote;
use crate::plan::heads::Heads;
use crate::plan::tensor_job::TensorJob;

use super::plan::PlanForm;
use super::text::table;

/// The plan of a split.
#[derive(Debug, Clone, Serialize)]
pub struct SplitReport {
    /// The input, as the user named it.
    pub input: String,
    /// Its format.
    pub format: &'static str,
    /// Bytes of tensor data written, over every output.
    pub bytes: u64,
    /// The outputs, in order.
    pub outputs: Vec<SplitOutputReport>,
    /// The model's attention heads a rank split was checked by, and where they come from
    /// (`--heads` or a config.json), if known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heads: Option<Heads>,
    /// Why `--backend` chose its engine; `None` for the default CPU engine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// The rules every cut tensor passed (`--spec directml[:LEVEL]`: "DirectML Split at
    /// feature level 4.1"); `None` without `--spec`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rules: Option<String>,
    /// Whether the split was carried out (`--print-plan`) rather than only checked
    /// (`--dry-run`); the text's first line says which, the JSON is the same.
    #[serde(skip)]
    pub written: bool,
    /// Each worker's share, when `--workers N` shares the outputs (`src/flow/join/workers/`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workers: Option<Vec<super::ShareReport>>,
}

/// One file a split writes (a sharded checkpoint's shards and index are each one).
#[derive(Debug, Clone, Serialize)]
pub struct SplitOutputReport {
    /// Its path, as the command line gives it (or the template makes it).
    pub path: String,
    /// Its format.
    pub format: &'static str,
    /// Bytes of tensor data in it.
    pub bytes: u64,
    /// Its tensors, in the order the file lists them.
    pub tensors: Vec<SplitTensorReport>,
}

/// One tensor of an output: which slices of the input's tensor of the same name it holds.
#[derive(Debug, Clone, Serialize)]
pub struct SplitTensorReport {
    /// Its name (a .npy file's tensor has none; `arr_0` as numpy.savez names it).
    pub name: String,
    /// Its element type.
    pub dtype: String,
    /// Its shape.
    pub shape: Vec<u64>,
    /// The slices of the input tensor it joins, as Python indexes them: `[0:4096, :]`.
    pub slices: Vec<String>,
    /// Copied whole (`keep`) rather than cut.
    pub kept: bool,
    /// Bytes of data.
    pub bytes: u64,
}

impl SplitReport {
    /// The report of splitting `input` into `files`, each with its path, its format
    /// (`index` for a sharded checkpoint's index) and its tensors in the file's order.
    pub fn new(input: &Input, files: &[(String, &'static str, Vec<&TensorJob>)]) -> SplitReport {
        let outputs: Vec<SplitOutputReport> = files
            .iter()
            .map(|(path, format, tensors)| {
                let tensors: Vec<SplitTensorReport> =
                    tensors.iter().map(|t| SplitTensorReport::new(t)).collect();
                SplitOutputReport {
                    path: path.clone(),
                    format,
                    bytes: tensors.iter().map(|t| t.bytes).sum(),
                    tensors,
                }
            })
            .collect();
        SplitReport {
            input: input.name.location.as_path().display().to_string(),
            format: input.format.name(),
            bytes: outputs.iter().map(|o| o.bytes).sum(),
            outputs,
            heads: None,
            backend: None,
            rules: None,
            written: false,
            workers: None,
        }
    }

    /// The report in `form`: one line of JSON, or text for people.
    pub fn render(&self, form: PlanForm) -> String {
        match form {
            // Serializing strings, numbers and vectors cannot fail.
            PlanForm::Json => format!("{}\n", serde_json::to_string(self).unwrap_or_default()),
            PlanForm::Text => self.text(),
        }
    }

    /// Prints the report in `form` on standard output: the text through the gate that quotes
    /// what acts on a terminal, the JSON exactly.
    pub fn print(&self, form: PlanForm) -> Result<()> {
        match form {
            PlanForm::Text => crate::messages::print(&self.render(form)),
            PlanForm::Json => crate::messages::print_exact(&self.render(form)),
        }
        .map_err(|e| Error::io("write", std::path::Path::new("standard output"), e))
    }

    fn text(&self) -> String {
        let (done, splits) = match self.written {
            true => ("written", "was split"),
            false => ("dry run: nothing written", "splits"),
        };
        let mut text = format!(
            "{done}; {} ({}) {splits} into {} files, {} bytes of data\n",
            quote(&self.input),
            self.format,
            self.outputs.len(),
            self.bytes
        );
        if let Some(rules) = &self.rules {
            text.push_str(&format!("rules: {rules}, every cut tensor passes\n"));
        }
        if let Some(note) = &self.backend {
            text.push_str(&format!("backend: {note}\n"));
        }
        if let Some(heads) = &self.heads {
            let dim = heads.head_dim.map_or(String::new(), |d| format!(" of {d}"));
            text.push_str(&format!(
                "attention heads: {} query, {} key-value{dim} (from {}); every rank gets whole heads\n",
                heads.query,
                heads.key_value,
                quote(&heads.from)
            ));
        }
        for output in &self.outputs {
            text.push_str(&format!(
                "{} ({}, {} bytes):\n",
                quote(&output.path),
                output.format,
                output.bytes
            ));
            let rows: Vec<Vec<String>> = output
                .tensors
                .iter()
                .map(|t| {
                    let slices = if t.kept {
                        "whole (kept)".to_string()
                    } else {
                        t.slices.join(" + ")
                    };
                    vec![
                        t.name.clone(),
                        t.dtype.clone(),
                        crate::messages::shape_text(&t.shape),
                        slices,
                        format!("{} bytes", t.bytes),
                    ]
                })
                .collect();
            text.push_str(&table(&rows));
        }
        if let Some(shares) = &self.workers {
            text.push_str(&super::text::shares_text(shares));
        }
        text
    }
}

impl SplitTensorReport {
    fn new(job: &TensorJob) -> SplitTensorReport {
        let info = &job.sources[0].info;
        let rank = info.shape.len();
        let axis = job.plan.axis;
        let slices = match &job.ranges {
            Some(ranges) if !job.kept => ranges
                .iter()
                .map(|range| {
                    let dims: Vec<String> = (0..rank)
                        .map(|a| {
                            if a == axis {
                                format!("{}:{}", range.start, range.end)
                            } else {
                                ":".to_string()
                            }
                        })
                        .collect();
                    format!("[{}]", dims.join(", "))
                })
                .collect(),
            _ => vec![format!("[{}]", vec![":"; rank].join(", "))],
        };
        SplitTensorReport {
            name: job.out.name.clone(),
            dtype: job.out.dtype.to_string(),
            shape: job.out.shape.clone(),
            slices,
            kept: job.kept,
            bytes: job.out.bytes,
        }
    }
}
