//! `--like REF`: the shape a reference header gives each tensor (the header of the model the
//! shards were split from, or of one with another tensor-parallel degree), read without the
//! data, and the check that the job's output tensors have those shapes. A reference is given
//! as an input is (a `.safetensors` file, an index, a folder, a PyTorch checkpoint); several
//! `--like` flags give the union of their tensors.
//! A refusal names the tensor, the rule that set its axis, and the axis or `--keep` that
//! gives the reference's shape.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::error::{Error, InputRef, Refusal, Result, capped};
use crate::format::{index, safetensors, shape_text};
use crate::limits;
use crate::messages;
use crate::plan::rules::{self, Origin, Rule, shell_quote};
use crate::sys::{self, Accept};

/// The tensor shapes of the reference headers, all `--like` flags together.
#[derive(Debug, Clone)]
pub struct Reference {
    /// The files as the user named them, in the order of the flags.
    paths: Vec<PathBuf>,
    /// Each tensor's name, shape and the reference (in `paths`) that gives it: the first
    /// reference's tensors in its order, then each next reference's new ones.
    tensors: Vec<(String, Vec<u64>, usize)>,
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
    /// Reads every reference `--like` names, headers only, and takes the union of their
    /// tensors: a reference is a `.safetensors` file, a sharded checkpoint's index
    /// (`*.safetensors.index.json`, `pytorch_model.bin.index.json`), a folder holding one
    /// (or one checkpoint file, `.safetensors` or PyTorch's), or a PyTorch checkpoint (`.pt`, `.pth`, `.bin`): whatever an
    /// input may be whose tensors have names. A name two references give different shapes
    /// is refused: the output cannot match both.
    pub fn read(paths: &[PathBuf]) -> Result<Reference> {
        let mut tensors: Vec<(String, Vec<u64>, usize)> = Vec::new();
        let mut at: HashMap<String, usize> = HashMap::new();
        let mut conflicts = Vec::new();
        for (which, path) in paths.iter().enumerate() {
            for (name, shape) in Reference::read_one(path)? {
                match at.get(&name) {
                    Some(&first) => {
                        let (_, known, from) = &tensors[first];
                        if *known != shape {
                            conflicts.push(format!(
                                "{}  {} in {}, {} in {}",
                                messages::name(&name),
                                shape_text(known),
                                messages::path(&paths[*from]),
                                shape_text(&shape),
                                messages::path(path)
                            ));
                        }
                    }
                    None => {
                        at.insert(name.clone(), tensors.len());
                        tensors.push((name, shape, which));
                    }
                }
            }
        }
        if !conflicts.is_empty() {
            return Err(Error::Refused(vec![Refusal {
                headline: format!(
                    "the --like references give {} tensor{} two shapes: the output cannot \
                     match both",
                    conflicts.len(),
                    if conflicts.len() == 1 { "" } else { "s" }
                ),
                details: capped(conflicts, SHOWN),
                hint: Some(
                    "several --like flags name parts of one model (their tensors are joined); \
                     name the references of one model only"
                        .to_string(),
                ),
            }]));
        }
        Ok(Reference {
            paths: paths.to_vec(),
            tensors,
        })
    }

    /// The tensors one reference declares, with their shapes, in its order.
    fn read_one(path: &Path) -> Result<Vec<(String, Vec<u64>)>> {
        let file_name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if index::is_index_name(file_name) {
            return Reference::read_index(path);
        }
        if file_name.ends_with(".safetensors") {
            let contents = read_header(path, None)?;
            return Ok(contents
                .tensors
                .into_iter()
                .map(|t| (t.name.unwrap_or_default(), t.info.shape.into_vec()))
                .collect());
        }
        Reference::read_as_input(path)
    }

    /// Any other reference (a folder, a PyTorch checkpoint or `.bin` set, an `.npz`) is read
    /// as an input is, headers only: the same forms, the same checks, and messages that name
    /// it as the `--like` reference. Its tensors must have names.
    fn read_as_input(path: &Path) -> Result<Vec<(String, Vec<u64>)>> {
        // Standard input is the inputs' to read, not a reference's.
        if path.as_os_str() == crate::error::STDIN {
            return Err(Error::refused(
                "--like - would read the reference from standard input, which is the inputs'",
                "name the reference's file, index or folder",
            ));
        }
        let options = crate::input::OpenOptions::default();
        let mut spill = crate::sys::spill::Spill::default();
        let mut head = Vec::new();
        let input =
            crate::input::Input::open(0, path.into(), options, &mut spill, &mut head, None)?;
        let mut tensors = Vec::with_capacity(input.tensors.len());
        for tensor in input.tensors.into_vec() {
            let Some(name) = tensor.name.tensor else {
                return Err(Error::refused(
                    format!(
                        "--like {} holds one unnamed tensor, as every {} file does: it gives \
                         no tensor's shape by name",
                        messages::path(path),
                        input.format.extension()
                    ),
                    "name the model the output should match: its .safetensors file, its \
                     index, its folder, or its PyTorch checkpoint (.pt, .pth, .bin)",
                ));
            };
            tensors.push((name.into_string(), tensor.info.shape.into_vec()));
        }
        Ok(tensors)
    }

    /// The reference of a sharded checkpoint: its index's tensors, each shape from the header
    /// of the shard the index names for it (only the shards' headers are read).
    fn read_index(path: &Path) -> Result<Vec<(String, Vec<u64>)>> {
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
        Ok(parsed
            .weight_map
            .into_iter()
            .filter_map(|(name, _)| shapes.remove(&name).map(|shape| (name, shape)))
            .collect())
    }

    /// Each tensor's shape, by name.
    pub fn shapes(&self) -> HashMap<&str, &[u64]> {
        self.tensors
            .iter()
            .map(|(name, shape, _)| (name.as_str(), shape.as_slice()))
            .collect()
    }

    /// Refuses every output tensor of `job` whose shape differs from the reference's, or that
    /// the reference lacks, and (when the job has several tensors) every reference tensor the
    /// output lacks. `rules` are the rules the job was built by.
    pub fn check(&self, job: &[Checked], rules: &[Rule]) -> Result<()> {
        let shapes: HashMap<&str, (&[u64], usize)> = self
            .tensors
            .iter()
            .map(|(name, shape, from)| (name.as_str(), (shape.as_slice(), *from)))
            .collect();
        // All references together, as the headlines name them; each tensor's own, in its line.
        let name = match self.paths.as_slice() {
            [one] => crate::messages::path(one),
            _ => "the --like references".to_string(),
        };
        let mut refusals = Vec::new();
        let mut wrong = Vec::new();
        let mut fixes: Vec<(Fix, &str)> = Vec::new();
        // The flags that decided tensors an --axis-for would fix: a new --axis-for would not
        // act while they are on the line (see `fix_hint`).
        let mut overriding: Vec<String> = Vec::new();
        let mut absent = Vec::new();
        for tensor in job {
            let Some(&(want, from)) = shapes.get(tensor.name) else {
                absent.push(tensor.name.to_string());
                continue;
            };
            if tensor.shape == want {
                continue;
            }
            let how = match (tensor.kept, tensor.rule) {
                (true, Some(at)) => format!("kept by {}", rules[at]),
                (false, Some(at)) => {
                    format!("joined along axis {} by {}", tensor.axis, rules[at])
                }
                (_, None) => format!("joined along axis {}", tensor.axis),
            };
            let fix = fix_for(tensor, want);
            let gives = match fix {
                Some(Fix::Axis(axis)) => format!("axis {axis} gives it"),
                Some(Fix::Keep) => "keeping one copy gives it".to_string(),
                None => "no axis gives it".to_string(),
            };
            wrong.push(format!(
                "{}  {} ({how}); {} has {}: {gives}",
                tensor.name,
                shape_text(tensor.shape),
                crate::messages::path(&self.paths[from]),
                shape_text(want)
            ));
            if let Some(fix) = fix {
                fixes.push((fix, tensor.name));
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
            let names: Vec<&str> = job.iter().map(|t| t.name).collect();
            refusals.push(Refusal {
                headline: format!(
                    "{} output tensor{} would not have the shape {name} {} {}",
                    wrong.len(),
                    if wrong.len() == 1 { "" } else { "s" },
                    if self.paths.len() == 1 {
                        "gives"
                    } else {
                        "give"
                    },
                    if wrong.len() == 1 { "it" } else { "them" }
                ),
                details: capped(wrong, SHOWN),
                hint: Some(fix_hint(&fixes, &names, &overriding)),
            });
        }
        if !absent.is_empty() {
            refusals.push(Refusal {
                headline: format!(
                    "{name} {} no tensor of the name of {} output tensor{}, so {} shape \
                     cannot be checked",
                    if self.paths.len() == 1 { "has" } else { "have" },
                    absent.len(),
                    if absent.len() == 1 { "" } else { "s" },
                    if absent.len() == 1 { "its" } else { "their" }
                ),
                details: capped(absent, SHOWN),
                hint: Some(format!(
                    "name with --like the model these inputs were split from; {name} {} {}",
                    if self.paths.len() == 1 {
                        "holds"
                    } else {
                        "hold"
                    },
                    self.tensors.len()
                )),
            });
        }
        if job.len() > 1 {
            let output: std::collections::HashSet<&str> = job.iter().map(|t| t.name).collect();
            let lacking: Vec<String> = self
                .tensors
                .iter()
                .map(|(name, _, _)| name)
                .filter(|name| !output.contains(name.as_str()))
                .cloned()
                .collect();
            if !lacking.is_empty() {
                refusals.push(Refusal {
                    headline: format!(
                        "the output would lack {} tensor{} {name} {}",
                        lacking.len(),
                        if lacking.len() == 1 { "" } else { "s" },
                        if self.paths.len() == 1 {
                            "holds"
                        } else {
                            "hold"
                        }
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

/// What `Reference::check` reads of one output tensor of a job: built by the job
/// (`TensorJob::checked`), so that the reference knows nothing of how jobs are made.
#[derive(Debug, Clone)]
pub struct Checked<'a> {
    /// The output tensor's name.
    pub name: &'a str,
    /// The output tensor's shape.
    pub shape: &'a [u64],
    /// The axis it is joined along.
    pub axis: usize,
    /// Copied from the first input by `--keep` rather than joined.
    pub kept: bool,
    /// The position in the rules of the rule that decided it; `None` when none did.
    pub rule: Option<usize>,
    /// What each input gives of it: its shape, or its range's shape in a chunked join; a kept
    /// tensor's first input's shape once per input.
    pub inputs: Vec<Vec<u64>>,
}

/// The axis along which joining the tensor's inputs gives `want`, or keeping one copy when
/// every input already has it.
fn fix_for(tensor: &Checked, want: &[u64]) -> Option<Fix> {
    let shapes = &tensor.inputs;
    if shapes.iter().all(|shape| shape.as_slice() == want) {
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
