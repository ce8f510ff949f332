//! The plan of a checked job as one typed report, built once from the plan and rendered twice
//! (as hyperfine's `src/export/` renders one result): as text for people ([`super::text`],
//! `--dry-run`) and as JSON for scripts ([`PlanReport::json`], `--dry-run=json`); `report`
//! itself chooses between them (`PlanReport::render`, `PlanReport::print`), so that this file
//! knows nothing of the text. Nothing here reads data.
//!
//! The JSON is serde's rendering of these types, field by field in the order they are
//! declared; they are declared in alphabetical order, which is the order the JSON has always
//! had. The man page's DRY RUN section (`src/cli/generate.rs`, `DRY_RUN_FIELDS`) lists the
//! fields; keep the three in step. Fields marked `#[serde(skip)]` are what only the text shows.

use std::collections::HashSet;
use std::path::Path;

use serde::Serialize;

use crate::backend::Engine;
use crate::error::InputRef;
use crate::format::Format;
use crate::input::{Input, Tensor};
use crate::output::kind::Description;
use crate::output::shards::ShardPlan;
use crate::plan::job::JobOptions;
use crate::plan::spec::Spec;
use crate::plan::tensor_job::TensorJob;
use crate::report::warning::Warning;

/// What a dry run reports: the rules the join passed, the engine and why, the inputs, each
/// output tensor and how it is made, the output and its shards.
#[derive(Debug, Clone, Serialize)]
pub struct PlanReport {
    /// `-a` as given.
    pub axis_given: Option<i64>,
    /// Why `--backend` chose its engine; `None` for the default CPU engine.
    pub backend: Option<String>,
    /// The model family whose built-in rules a merge given no axis and no rules used, and
    /// what told it; `None` otherwise.
    pub family: Option<String>,
    /// What each `--exclude` (and the `--only` flags together) removed.
    pub filtered: Vec<FilterReport>,
    /// The inputs, in order.
    pub inputs: Vec<InputReport>,
    /// The output.
    pub output: OutputReport,
    /// The rules the join passed: the profile's, or only its shape rules without `--spec`.
    pub rules: String,
    /// The files of a sharded output.
    pub shards: Option<ShardsReport>,
    /// The `--spec` profile's name; `None` without `--spec`.
    pub spec: Option<&'static str>,
    /// The output tensors, in output order.
    pub tensors: Vec<TensorReport>,
    /// The warnings planning gave, which were printed on standard error as they arose
    /// ([`super::warning::Warnings`]); in neither rendering, which is the plan alone.
    #[serde(skip)]
    pub warnings: Vec<Warning>,
    /// Whether the plan was carried out (`--print-plan`) rather than only checked
    /// (`--dry-run`); the text's first line says which, the JSON is the same.
    #[serde(skip)]
    pub written: bool,
    /// Each worker's share, when `--workers N` shares the output (`src/flow/join/workers/`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workers: Option<Vec<ShareReport>>,
}

/// One worker's share of a job's output.
#[derive(Debug, Clone, Serialize)]
pub struct ShareReport {
    /// The byte after its last.
    pub end: u64,
    /// The output files it writes into.
    pub files: Vec<String>,
    /// The first byte of its share, in the output's files' bytes one after another.
    pub start: u64,
    /// The worker, from 0.
    pub worker: u32,
}

/// What a filter removed.
#[derive(Debug, Clone, Serialize)]
pub struct FilterReport {
    /// The filter as written: `--exclude 'optimizer.*'`.
    pub filter: String,
    /// The names of the tensors it removed.
    pub removed: Vec<String>,
}

impl From<crate::plan::filter::Removed> for FilterReport {
    fn from(removed: crate::plan::filter::Removed) -> FilterReport {
        FilterReport {
            filter: removed.filter,
            removed: removed.names,
        }
    }
}

/// One input.
#[derive(Debug, Clone, Serialize)]
pub struct InputReport {
    /// Its format's name.
    pub format: &'static str,
    /// For a sharded checkpoint, its index.
    pub index: Option<IndexReport>,
    /// What its reader noted: a checkpoint's values that are not tensors, its tensors that
    /// share a storage.
    pub notes: Vec<String>,
    /// The path as given (with `:NAME` when one tensor was selected).
    pub path: String,
    /// Its position among the inputs, from 1.
    pub position: usize,
    /// The tensors it holds.
    pub tensors: Vec<TensorHeld>,
    /// For a distributed checkpoint, how many files its blocks are in.
    #[serde(skip)]
    pub block_files: Option<usize>,
}

/// A tensor an input holds, as its header describes it.
#[derive(Debug, Clone, Serialize)]
pub struct TensorHeld {
    /// Bytes of data.
    pub bytes: u64,
    /// Element type.
    pub dtype: String,
    /// Its name; `None` in a single-tensor file.
    pub name: Option<String>,
    /// Its shape.
    pub shape: Vec<u64>,
}

/// A sharded checkpoint's index, as an input.
#[derive(Debug, Clone, Serialize)]
pub struct IndexReport {
    /// The shards, in the order read.
    pub files: Vec<String>,
    /// The index file.
    pub path: String,
    /// What the tensors hold.
    pub tensor_bytes: u64,
    /// What the index's `metadata.total_size` says.
    pub total_size: Option<u64>,
}

/// One output tensor and how it is made.
#[derive(Debug, Clone, Serialize)]
pub struct TensorReport {
    /// The axis it is joined along; `None` when kept or made from blocks.
    pub axis: Option<usize>,
    /// For a tensor made from a distributed checkpoint's blocks, where they go.
    pub blocks: Option<BlocksReport>,
    /// Bytes of output data.
    pub bytes: u64,
    /// The proportions of the parts each input's piece is joined by (`chunks` in its rule).
    pub chunks: Option<Vec<u64>>,
    /// A step counter `--cast` left in its own type, exact.
    pub counter: bool,
    /// Element type.
    pub dtype: String,
    /// What DirectML does with it; `None` on the CPU engine.
    pub engine: Option<String>,
    /// The positions of the inputs it comes from.
    pub inputs: Vec<usize>,
    /// Copied from the first input (`--keep`, or as the only input) rather than joined.
    pub kept: bool,
    /// Its name in the output.
    pub name: String,
    /// Its rule says that each input holds whole heads or groups of a fused tensor (`plain`).
    pub plain: bool,
    /// How many consecutive inputs hold the same piece, when more than one (`replicas`).
    pub replicas: Option<u64>,
    /// The tensor rule that decided it, as written (`--keep '*norm*'`).
    pub rule: Option<String>,
    /// Its shape.
    pub shape: Vec<u64>,
    /// The axis the engine's plan joins along, kept or not.
    #[serde(skip)]
    pub plan_axis: usize,
    /// The rule that decided it, as messages cite it.
    #[serde(skip)]
    pub rule_cited: Option<String>,
    /// The rule's words after the axis, as a rules line writes them (` chunks 4:1:1`).
    #[serde(skip)]
    pub words: String,
    /// The input tensors it is made from.
    #[serde(skip)]
    pub sources: Vec<SourceReport>,
}

/// An input tensor an output tensor is made from.
#[derive(Debug, Clone)]
pub struct SourceReport {
    /// Which input, which file, which tensor.
    pub name: InputRef,
    /// Element type.
    pub dtype: String,
    /// Its shape.
    pub shape: Vec<u64>,
    /// Bytes of data.
    pub bytes: u64,
}

/// The blocks a tensor is made from and the grid they make.
#[derive(Debug, Clone, Serialize)]
pub struct BlocksReport {
    /// Each block, in the order they are placed.
    pub blocks: Vec<BlockReport>,
    /// The grid: its cut axes and the segments along each.
    pub grid: GridReport,
}

/// A block grid.
#[derive(Debug, Clone, Serialize)]
pub struct GridReport {
    /// The cut axes.
    pub axes: Vec<usize>,
    /// The lengths of the segments along each cut axis.
    pub segments: Vec<Vec<u64>>,
}

/// One block of a tensor: where it starts in the full tensor.
#[derive(Debug, Clone, Serialize)]
pub struct BlockReport {
    /// Where it starts, on every axis.
    pub offsets: Vec<u64>,
    /// The file it is in.
    pub path: String,
    /// Its shape.
    pub shape: Vec<u64>,
    /// Which input, file and tensor it is.
    #[serde(skip)]
    pub source: InputRef,
}

/// The output.
#[derive(Debug, Clone, Serialize)]
pub struct OutputReport {
    /// With `--append`: where the new data goes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub append: Option<AppendReport>,
    /// The data the output would hold, all tensors together.
    pub bytes: u64,
    /// Its format's name; `None` without `-o`.
    pub format: Option<&'static str>,
    /// Its path; `None` without `-o`.
    pub path: Option<String>,
}

/// Where an append writes: after the target's old end.
#[derive(Debug, Clone, Serialize)]
pub struct AppendReport {
    /// How many bytes are added.
    pub bytes: u64,
    /// The byte after the file's old end, where they go.
    pub offset: u64,
    /// The bytes of data the target holds before.
    #[serde(skip)]
    pub data_before: u64,
}

/// The files of a sharded output.
#[derive(Debug, Clone, Serialize)]
pub struct ShardsReport {
    /// Each shard.
    pub files: Vec<ShardFileReport>,
    /// The folder the set goes in.
    pub folder: String,
    /// The index's file name; `None` for a set of one file.
    pub index: Option<String>,
    /// What the previous index lists that the commit leaves where it is, and why.
    pub left_alone: Vec<LeftAloneReport>,
    /// The most bytes of tensor data a shard holds, unless one tensor alone is larger.
    pub max_shard_size: u64,
    /// The previous set's files the commit removes.
    pub removes: Vec<String>,
    /// Whether the folder is created.
    #[serde(skip)]
    pub creates_folder: bool,
}

/// One shard of a sharded output.
#[derive(Debug, Clone, Serialize)]
pub struct ShardFileReport {
    /// Bytes of tensor data it holds.
    pub bytes: u64,
    /// Its file name in the folder.
    pub name: String,
    /// Its tensors' names, in the order the file lists them.
    pub tensors: Vec<String>,
    /// Its tensors, as indexes into [`PlanReport::tensors`].
    #[serde(skip)]
    pub at: Vec<usize>,
}

/// A file the previous index lists that the commit leaves alone.
#[derive(Debug, Clone, Serialize)]
pub struct LeftAloneReport {
    /// The name as the previous index lists it.
    pub name: String,
    /// Why it stays.
    pub why: &'static str,
}

/// A path as the JSON has always shown it: lossy where it is not UTF-8.
fn shown(path: &Path) -> String {
    path.display().to_string()
}

/// How a dry run prints the plan (`--dry-run[=FORM]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PlanForm {
    /// A table for people.
    Text,
    /// One JSON object for scripts; a refusal is printed as one too.
    Json,
}

impl PlanReport {
    /// The report of a checked job, planned by `rules` (what planning was given: `-a`, the
    /// spec, the tensor rules): `output` is the output its kind describes (none for a dry
    /// run without `-o`) and its format, when `-o` or `--format` says it.
    pub fn new(
        rules: &JobOptions,
        inputs: &[Input],
        job: &[TensorJob],
        output: (Description, Option<Format>),
        engine: &Engine,
    ) -> PlanReport {
        let spec = rules.spec;
        let (described, format) = output;
        let output = described.path().zip(format);
        let shards = match described {
            Description::Sharded { shards, .. } => Some(shards),
            Description::None | Description::File(_) => None,
        };
        PlanReport {
            axis_given: rules.axis,
            backend: engine.note.clone(),
            filtered: Vec::new(),
            family: None,
            inputs: inputs.iter().map(InputReport::new).collect(),
            output: OutputReport {
                append: None,
                bytes: job.iter().map(|t| t.out.bytes).sum(),
                format: output.map(|(_, format)| format.name()),
                path: output.map(|(path, _)| shown(path)),
            },
            rules: passed(spec),
            shards: shards.map(|shards| ShardsReport::new(shards, job)),
            spec: spec.check_types.then_some(spec.profile.name),
            tensors: job
                .iter()
                .enumerate()
                .map(|(at, t)| TensorReport::new(t, rules, engine.describe(at)))
                .collect(),
            warnings: Vec::new(),
            written: false,
            workers: None,
        }
    }

    /// Whether the job is one tensor joined from one tensor of each input: the text then
    /// shows the inputs' tensors and the axis rather than a table of tensors.
    pub fn single(&self) -> bool {
        matches!(&self.tensors[..], [only] if !only.kept && only.sources.len() == self.inputs.len())
    }

    /// The report as `--dry-run=json` prints it: one line of JSON.
    pub fn json(&self) -> String {
        // Serializing types of numbers, strings, options and vectors cannot fail.
        let json = serde_json::to_string(self).unwrap_or_default();
        format!("{json}\n")
    }
}

impl InputReport {
    fn new(input: &Input) -> InputReport {
        let block_files = input.offsets().map(|_| {
            let files: HashSet<&Path> = input
                .tensors
                .iter()
                .map(|t| t.name.location.as_path())
                .collect();
            files.len()
        });
        InputReport {
            // A DCP checkpoint of the default form (its `.metadata` records the full shapes)
            // is read as safetensors are, but is none; nor is a DeepSpeed checkpoint.
            format: match (input.consolidated(), input.recorded()) {
                (Some(_), _) => "deepspeed",
                (None, Some(_)) => "dcp",
                (None, None) => input.format.name(),
            },
            index: input.shards().map(|set| IndexReport {
                files: set.files.iter().map(|f| shown(f)).collect(),
                path: shown(&set.index),
                tensor_bytes: set.tensor_bytes,
                total_size: set.total_size,
            }),
            notes: input.notes().to_vec(),
            path: input.name.label(),
            position: input.name.position,
            tensors: input.tensors.iter().map(TensorHeld::new).collect(),
            block_files,
        }
    }
}

impl TensorHeld {
    fn new(tensor: &Tensor) -> TensorHeld {
        TensorHeld {
            bytes: tensor.info.data_len,
            dtype: tensor.info.dtype.to_string(),
            name: tensor.name.tensor.as_deref().map(str::to_string),
            shape: tensor.info.shape.to_vec(),
        }
    }
}

impl TensorReport {
    fn new(t: &TensorJob, rules: &JobOptions, engine: Option<String>) -> TensorReport {
        let blocks = t.placement.as_ref().map(|placement| BlocksReport {
            blocks: t
                .sources
                .iter()
                .zip(&placement.offsets)
                .map(|(source, offsets)| BlockReport {
                    offsets: offsets.clone(),
                    path: shown(source.name.location.as_path()),
                    shape: source.info.shape.to_vec(),
                    source: source.name.clone(),
                })
                .collect(),
            grid: GridReport {
                axes: placement.grid.axes.clone(),
                segments: placement.grid.segments.clone(),
            },
        });
        let rule = t.rule.map(|at| &rules.rules.rules()[at]);
        TensorReport {
            axis: (!t.kept && t.placement.is_none()).then_some(t.plan.axis),
            blocks,
            bytes: t.out.bytes,
            chunks: match &t.parts.fused {
                crate::plan::chunks::Fused::Chunks(shares) => Some(shares.clone()),
                _ => None,
            },
            counter: t.counter,
            dtype: t.out.dtype.to_string(),
            engine,
            inputs: t.sources.iter().map(|s| s.name.position).collect(),
            kept: t.kept,
            name: t.out.name.clone(),
            plain: t.parts.fused == crate::plan::chunks::Fused::Plain,
            replicas: (t.parts.replicas > 1).then_some(t.parts.replicas),
            rule: rule.map(|rule| rule.written()),
            shape: t.out.shape.clone(),
            plan_axis: t.plan.axis,
            rule_cited: rule.map(ToString::to_string),
            words: t.parts.to_string(),
            sources: t
                .sources
                .iter()
                .map(|source| SourceReport {
                    name: source.name.clone(),
                    dtype: source.info.dtype.to_string(),
                    shape: source.info.shape.to_vec(),
                    bytes: source.info.data_len,
                })
                .collect(),
        }
    }
}

impl ShardsReport {
    fn new(shards: &ShardPlan, job: &[TensorJob]) -> ShardsReport {
        ShardsReport {
            files: shards
                .files
                .iter()
                .map(|file| ShardFileReport {
                    bytes: file.bytes,
                    name: file.name.clone(),
                    tensors: file
                        .tensors
                        .iter()
                        .map(|&t| job[t].out.name.clone())
                        .collect(),
                    at: file.tensors.clone(),
                })
                .collect(),
            folder: shown(&shards.folder),
            index: shards.index.clone(),
            left_alone: shards
                .left_alone
                .iter()
                .map(|left| LeftAloneReport {
                    name: left.listed.clone(),
                    why: left.why,
                })
                .collect(),
            max_shard_size: shards.max_shard_size,
            removes: shards.removes.iter().map(|p| shown(p)).collect(),
            creates_folder: shards.creates_folder,
        }
    }
}

/// The rules the join passed: the profile's, or only its shape rules without `--spec`.
fn passed(spec: Spec) -> String {
    if spec.check_types {
        spec.title()
    } else {
        format!("{}'s shape rules", spec.title())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report with every optional part present.
    fn full() -> PlanReport {
        let source = InputRef {
            position: 1,
            location: Path::new("rank0/a.safetensors").into(),
            tensor: Some("w".into()),
        };
        PlanReport {
            axis_given: Some(-1),
            backend: Some("DirectML, as asked".to_string()),
            filtered: Vec::new(),
            family: None,
            inputs: vec![InputReport {
                format: "safetensors",
                index: Some(IndexReport {
                    files: vec!["rank0/a.safetensors".to_string()],
                    path: "rank0/model.safetensors.index.json".to_string(),
                    tensor_bytes: 24,
                    total_size: Some(25),
                }),
                notes: vec!["`step` is not a tensor (an int): skipped".to_string()],
                path: "rank0".to_string(),
                position: 1,
                tensors: vec![TensorHeld {
                    bytes: 24,
                    dtype: "float32".to_string(),
                    name: Some("w".to_string()),
                    shape: vec![2, 3],
                }],
                block_files: Some(1),
            }],
            output: OutputReport {
                append: Some(AppendReport {
                    bytes: 24,
                    offset: 152,
                    data_before: 24,
                }),
                bytes: 24,
                format: Some("safetensors"),
                path: Some("out".to_string()),
            },
            rules: "ONNX Concat-13's shape rules".to_string(),
            shards: Some(ShardsReport {
                files: vec![ShardFileReport {
                    bytes: 24,
                    name: "model.safetensors".to_string(),
                    tensors: vec!["w".to_string()],
                    at: vec![0],
                }],
                folder: "out".to_string(),
                index: Some("model.safetensors.index.json".to_string()),
                left_alone: vec![LeftAloneReport {
                    name: "../x".to_string(),
                    why: "it is a path",
                }],
                max_shard_size: 100,
                removes: vec!["out/old.safetensors".to_string()],
                creates_folder: true,
            }),
            spec: Some("onnx"),
            tensors: vec![TensorReport {
                axis: Some(1),
                blocks: Some(BlocksReport {
                    blocks: vec![BlockReport {
                        offsets: vec![0, 0],
                        path: "rank0/a.safetensors".to_string(),
                        shape: vec![2, 3],
                        source: source.clone(),
                    }],
                    grid: GridReport {
                        axes: vec![0],
                        segments: vec![vec![2]],
                    },
                }),
                bytes: 24,
                chunks: Some(vec![4, 1, 1]),
                counter: false,
                dtype: "float32".to_string(),
                engine: Some("Join".to_string()),
                inputs: vec![1],
                kept: false,
                name: "w".to_string(),
                plain: false,
                replicas: Some(2),
                rule: Some("--axis-for 'w=1'".to_string()),
                shape: vec![2, 3],
                plan_axis: 1,
                rule_cited: Some("--axis-for 'w=1'".to_string()),
                words: " chunks 4:1:1 replicas 2".to_string(),
                sources: vec![SourceReport {
                    name: source,
                    dtype: "float32".to_string(),
                    shape: vec![2, 3],
                    bytes: 24,
                }],
            }],
            warnings: vec![Warning::UnmatchedRule("a rule".to_string())],
            written: false,
            workers: None,
        }
    }

    /// The JSON lists every object's fields in alphabetical order, as it always has (it was
    /// built as `serde_json::Value`s, whose maps are sorted): a field declared out of order
    /// would move in the output. A `Value` made from the report sorts them again.
    #[test]
    fn json_fields_are_in_alphabetical_order() {
        let report = full();
        let sorted = serde_json::to_value(&report).expect("a JSON value");
        assert_eq!(report.json(), format!("{sorted}\n"));
    }

    /// What only the text shows stays out of the JSON; an append adds `output.append` with
    /// its offset and bytes.
    #[test]
    fn json_holds_the_documented_fields_only() {
        let json = full().json();
        for text_only in [
            "block_files",
            "plan_axis",
            "rule_cited",
            "sources",
            "source",
            "at",
            "creates_folder",
            "data_before",
            "warnings",
        ] {
            assert!(
                !json.contains(&format!("\"{text_only}\"")),
                "{text_only}: {json}"
            );
        }
        assert!(
            json.contains(r#""output":{"append":{"bytes":24,"offset":152},"bytes":24,"#),
            "{json}"
        );
        let mut report = full();
        report.output.append = None;
        assert!(report.json().contains(r#""output":{"bytes":24,"format""#));
    }
}
