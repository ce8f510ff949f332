//! `--like REF`: the shape a reference safetensors header gives each tensor (the header of
//! the model the shards were split from, or of one with another tensor-parallel degree),
//! read without the data, and the check that the job's output tensors have those shapes.
//! A refusal names the tensor, the rule that set its axis, and the axis or `--keep` that
//! gives the reference's shape.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::error::{Error, InputRef, Refusal, Result, capped};
use crate::format::{index, safetensors, shape_text};
use crate::limits;
use crate::messages;
use crate::plan::job::TensorJob;
use crate::plan::rules::{self, Origin, Rule, shell_quote};
use crate::sys::{self, Accept};

/// The tensor shapes of a reference header.
#[derive(Debug)]
pub struct Reference {
    /// The file as the user named it.
    path: PathBuf,
    /// Each tensor's name and shape, in the header's order.
    tensors: Vec<(String, Vec<u64>)>,
}

/// What would give a tensor the reference's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fix {
    /// Joining along this axis.
    Axis(usize),
    /// Keeping one copy.
    Keep,
}

/// How many items a refusal lists before "... and N more".
const SHOWN: usize = 10;

impl Reference {
    /// Reads the header of the safetensors file `path`, or of every shard of the sharded
    /// checkpoint whose index `path` is, and none of their data.
    pub fn read(path: &Path) -> Result<Reference> {
        let file_name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if index::is_index_name(file_name) {
            return Reference::read_index(path);
        }
        let contents = read_header(path, None)?;
        let tensors = contents
            .tensors
            .into_iter()
            .map(|t| (t.name.unwrap_or_default(), t.info.shape.into_vec()))
            .collect();
        Ok(Reference {
            path: path.into(),
            tensors,
        })
    }

    /// The reference of a sharded checkpoint: its index's tensors, each shape from the header
    /// of the shard the index names for it (only the shards' headers are read).
    fn read_index(path: &Path) -> Result<Reference> {
        let text = sys::read_whole(path, &limits::INDEX, Accept::Stream)
            .map_err(|e| Error::io("read the --like reference", path, e))?;
        let parsed = index::parse(&text).map_err(|why| {
            Error::refused(
                format!(
                    "--like {} is not a valid index: {why}",
                    crate::messages::path(path)
                ),
                "name the model.safetensors.index.json of the checkpoint the output should match",
            )
        })?;
        let folder = path.parent().unwrap_or(Path::new(""));
        let mut shapes: HashMap<String, Vec<u64>> = HashMap::new();
        let mut shards: Vec<&str> = parsed.weight_map.iter().map(|(_, f)| f.as_str()).collect();
        shards.sort_unstable();
        shards.dedup();
        // The shards the input index would refuse to read, --like refuses too.
        let outside: Vec<String> = shards
            .iter()
            .filter(|shard| !index::is_inside_folder(shard))
            .map(|shard| messages::name(shard))
            .collect();
        if !outside.is_empty() {
            return Err(Error::Refused(vec![Refusal {
                headline: format!(
                    "--like {} lists {} shard{} that {} not a path inside the index's folder",
                    messages::path(path),
                    outside.len(),
                    if outside.len() == 1 { "" } else { "s" },
                    if outside.len() == 1 { "is" } else { "are" }
                ),
                details: capped(outside, SHOWN),
                hint: Some(
                    "an index lists its shards by name, in its own folder: name the index of \
                     the checkpoint the output should match, or its unsplit .safetensors file"
                        .to_string(),
                ),
            }]));
        }
        for shard in shards {
            for found in read_header(&folder.join(shard), Some(path))?.tensors {
                shapes.insert(found.name.unwrap_or_default(), found.info.shape.into_vec());
            }
        }
        let tensors = parsed
            .weight_map
            .into_iter()
            .filter_map(|(name, _)| shapes.remove(&name).map(|shape| (name, shape)))
            .collect();
        Ok(Reference {
            path: path.to_path_buf(),
            tensors,
        })
    }

    /// Each tensor's shape, by name.
    pub fn shapes(&self) -> HashMap<&str, &[u64]> {
        self.tensors
            .iter()
            .map(|(name, shape)| (name.as_str(), shape.as_slice()))
            .collect()
    }

    /// Refuses every output tensor of `job` whose shape differs from the reference's, or that
    /// the reference lacks, and (when the job has several tensors) every reference tensor the
    /// output lacks. `rules` are the rules the job was built by; `copies` is the number of
    /// inputs.
    pub fn check(&self, job: &[TensorJob], rules: &[Rule], copies: usize) -> Result<()> {
        let shapes = self.shapes();
        let name = crate::messages::path(&self.path);
        let mut refusals = Vec::new();
        let mut wrong = Vec::new();
        let mut fixes: Vec<(Fix, &str)> = Vec::new();
        // The flags that decided tensors an --axis-for would fix: a new --axis-for would not
        // act while they are on the line (see `fix_hint`).
        let mut overriding: Vec<String> = Vec::new();
        let mut absent = Vec::new();
        for tensor in job {
            let out = &tensor.out;
            let Some(&want) = shapes.get(out.name.as_str()) else {
                absent.push(out.name.clone());
                continue;
            };
            if out.shape == want {
                continue;
            }
            let how = match (tensor.kept, tensor.rule) {
                (true, Some(at)) => format!("kept by {}", rules[at]),
                (false, Some(at)) => {
                    format!("joined along axis {} by {}", tensor.plan.axis, rules[at])
                }
                (_, None) => format!("joined along axis {}", tensor.plan.axis),
            };
            let fix = fix_for(tensor, want, copies);
            let gives = match fix {
                Some(Fix::Axis(axis)) => format!("axis {axis} gives it"),
                Some(Fix::Keep) => "keeping one copy gives it".to_string(),
                None => "no axis gives it".to_string(),
            };
            wrong.push(format!(
                "{}  {} ({how}); {name} has {}: {gives}",
                out.name,
                shape_text(&out.shape),
                shape_text(want)
            ));
            if let Some(fix) = fix {
                fixes.push((fix, out.name.as_str()));
                if let (Fix::Axis(_), Some(at)) = (fix, tensor.rule)
                    && matches!(rules[at].origin, Origin::KeepFlag | Origin::AxisForFlag)
                {
                    let flag = rules[at].to_string();
                    if !overriding.contains(&flag) {
                        overriding.push(flag);
                    }
                }
            }
        }
        if !wrong.is_empty() {
            let names: Vec<&str> = job.iter().map(|t| t.out.name.as_str()).collect();
            refusals.push(Refusal {
                headline: format!(
                    "{} output tensor{} would not have the shape {name} gives {}",
                    wrong.len(),
                    if wrong.len() == 1 { "" } else { "s" },
                    if wrong.len() == 1 { "it" } else { "them" }
                ),
                details: capped(wrong, SHOWN),
                hint: Some(fix_hint(&fixes, &names, &overriding)),
            });
        }
        if !absent.is_empty() {
            refusals.push(Refusal {
                headline: format!(
                    "{name} has no tensor of the name of {} output tensor{}, so {} shape \
                     cannot be checked",
                    absent.len(),
                    if absent.len() == 1 { "" } else { "s" },
                    if absent.len() == 1 { "its" } else { "their" }
                ),
                details: capped(absent, SHOWN),
                hint: Some(format!(
                    "name with --like the model these inputs were split from; {name} holds {}",
                    self.tensors.len()
                )),
            });
        }
        if job.len() > 1 {
            let output: std::collections::HashSet<&str> =
                job.iter().map(|t| t.out.name.as_str()).collect();
            let lacking: Vec<String> = self
                .tensors
                .iter()
                .map(|(name, _)| name)
                .filter(|name| !output.contains(name.as_str()))
                .cloned()
                .collect();
            if !lacking.is_empty() {
                refusals.push(Refusal {
                    headline: format!(
                        "the output would lack {} tensor{} {name} holds",
                        lacking.len(),
                        if lacking.len() == 1 { "" } else { "s" }
                    ),
                    details: capped(lacking, SHOWN),
                    hint: Some(
                        "join every shard of the model, or name with --like the header of \
                         the part these shards hold"
                            .to_string(),
                    ),
                });
            }
        }
        if refusals.is_empty() {
            Ok(())
        } else {
            Err(Error::Refused(refusals))
        }
    }
}

/// The axis along which joining the tensor's inputs gives `want`, or keeping one copy when
/// every input already has it; `copies` is the number of inputs (a kept tensor's job holds
/// only the first).
fn fix_for(tensor: &TensorJob, want: &[u64], copies: usize) -> Option<Fix> {
    let sliced: Vec<Vec<u64>> = match &tensor.ranges {
        Some(ranges) => tensor
            .sources
            .iter()
            .zip(ranges)
            .map(|(s, range)| {
                let mut shape = s.info.shape.to_vec();
                shape[tensor.plan.axis] = range.end - range.start;
                shape
            })
            .collect(),
        None => Vec::new(),
    };
    let shapes: Vec<&[u64]> = if tensor.kept {
        vec![&*tensor.sources[0].info.shape; copies]
    } else if tensor.ranges.is_some() {
        sliced.iter().map(Vec::as_slice).collect()
    } else {
        tensor.sources.iter().map(|s| &*s.info.shape).collect()
    };
    if shapes.iter().all(|&shape| shape == want) {
        return Some(Fix::Keep);
    }
    (0..want.len())
        .find(|&axis| {
            let sum: u64 = shapes
                .iter()
                .map(|s| s.get(axis).copied().unwrap_or(0))
                .sum();
            sum == want[axis]
                && shapes.iter().all(|s| {
                    s.len() == want.len() && (0..want.len()).all(|d| d == axis || s[d] == want[d])
                })
        })
        .map(Fix::Axis)
}

/// The flags that fix the tensors, grouped by pattern. `overriding` are the flags given that
/// decided tensors an `--axis-for` fixes: the `--keep` flags decide before every `--axis-for`,
/// and an earlier `--axis-for` before a later one, so the hint says to drop them first rather
/// than suggest a flag that would not act.
fn fix_hint(fixes: &[(Fix, &str)], names: &[&str], overriding: &[String]) -> String {
    let mut kinds: Vec<Fix> = Vec::new();
    for (fix, _) in fixes {
        if !kinds.contains(fix) {
            kinds.push(*fix);
        }
    }
    let mut flags = Vec::new();
    for kind in kinds {
        let targets: Vec<&str> = fixes
            .iter()
            .filter(|(fix, _)| *fix == kind)
            .map(|&(_, name)| name)
            .collect();
        for (glob, _) in rules::suggest_globs(&targets, names) {
            flags.push(match kind {
                Fix::Axis(axis) => format!("--axis-for {}", shell_quote(&format!("{glob}={axis}"))),
                Fix::Keep => format!("--keep {}", shell_quote(&glob)),
            });
        }
    }
    if flags.is_empty() {
        return "check that the inputs are the shards of the model --like names".to_string();
    }
    let add = capped(flags, SHOWN).join(" ");
    if overriding.is_empty() {
        return format!("add {add} (or correct the rule that decided them)");
    }
    format!(
        "--keep flags decide before --axis-for flags, and earlier flags before later ones: \
         drop {}, then add {add}",
        capped(overriding.to_vec(), SHOWN).join(" ")
    )
}

/// The tensors a `--like` safetensors file declares: its header only. `index` is the `--like`
/// index that lists it, if one does, for the messages.
fn read_header(path: &Path, index: Option<&Path>) -> Result<crate::format::Contents> {
    let name = crate::messages::path(path);
    // Opened without waiting: a FIFO (named, or listed by a --like index) is refused, not
    // waited on; the header is read in place, which a pipe cannot give.
    let (file, metadata) = sys::open_regular(path).map_err(|e| {
        let e = match index {
            Some(index) => std::io::Error::new(
                e.kind(),
                format!("{e} (the --like index {} lists it)", messages::path(index)),
            ),
            None => e,
        };
        Error::io("open the --like reference", path, e)
    })?;
    let len = metadata.len();
    let input = InputRef {
        position: 0,
        path: path.into(),
        tensor: None,
    };
    safetensors::read(&file, len, &input).map_err(|e| match e {
        Error::Malformed { reason, .. } => Error::refused(
            format!("--like {name} is not a valid safetensors file: {reason}"),
            "name the .safetensors file of the model the output should match",
        ),
        Error::InputIo { action, source, .. } => {
            Error::io(format!("{action} the --like reference"), path, source)
        }
        other => other,
    })
}
