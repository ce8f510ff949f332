//! A PyTorch distributed checkpoint (DCP) in the HF writer's form as one input: the `.safetensors` files the ranks
//! wrote with `HuggingFaceStorageWriter(save_distributed=True)`, named on the command line or
//! held in a folder (PyTorch globs `*.safetensors`, so any names do). Each file's
//! `__metadata__` carries `DCP_SHARDING_INFO`, a JSON object that gives, for every tensor of
//! the file, `{"saved_offsets": [...]}`: where that block starts inside the full tensor.
//!
//! The input's tensors are the blocks of every file, file after file, and `Input::offsets`
//! holds each one's offsets; `src/plan/grid.rs` checks and plans them. The DCP keys are dropped
//! from the metadata the output inherits, leaving `{"format": "pt"}`.

use std::collections::HashMap;
use std::path::PathBuf;

use crate::error::{Error, InputRef, Refusal, Result, capped};
use crate::format::Format;
use crate::input::{Extras, Input, OpenOptions};
use crate::messages::excerpt;
use crate::sys::spill::Spill;

/// The `__metadata__` key that holds the blocks' offsets.
pub const SHARDING_INFO: &str = "DCP_SHARDING_INFO";
/// The other key DCP adds, dropped from the output with `SHARDING_INFO`.
const VERSION: &str = "DCP_VERSION";

/// `DCP_SHARDING_INFO`'s text as each tensor's offsets, or what is wrong with it.
pub(super) fn parse_sharding_info(
    text: &str,
) -> std::result::Result<HashMap<String, Vec<u64>>, String> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let serde_json::Value::Object(entries) = value else {
        return Err("it is not a JSON object".to_string());
    };
    entries
        .into_iter()
        .map(|(name, entry)| {
            let offsets = entry
                .get("saved_offsets")
                .and_then(|o| o.as_array())
                .and_then(|o| o.iter().map(serde_json::Value::as_u64).collect());
            match offsets {
                Some(offsets) => Ok((name, offsets)),
                None => Err(format!(
                    "the entry of `{}` has no \"saved_offsets\" list of whole numbers",
                    excerpt(&name)
                )),
            }
        })
        .collect()
}

/// Whether a safetensors `__metadata__` is that of a DCP rank file.
pub fn has_sharding_info(metadata: &[(String, String)]) -> bool {
    metadata.iter().any(|(key, _)| key == SHARDING_INFO)
}

/// The note of every input of this form: it records no full shape.
const INFERRED: &str = "the full shapes are inferred from the blocks (this form of distributed \
                        checkpoint records none): a missing last rank's file cannot be seen; \
                        check the shapes with --like a reference of the model";

/// Opens the rank files an index (`index`) lists as one input, placed by their offsets.
pub fn open_listed(
    name: &InputRef,
    index: &str,
    files: &[PathBuf],
    options: OpenOptions,
    spill: &mut Spill,
) -> Result<Input> {
    let mut input =
        open_folder(name, files, options, spill)?.ok_or_else(|| Error::Unsupported {
            input: name.clone(),
            reason: format!(
                "its first shard has {SHARDING_INFO} metadata but no file it lists reads as a \
             distributed checkpoint's rank file"
            ),
        })?;
    let extras = input.extras.get_or_insert_with(Box::default);
    extras.notes.insert(
        0,
        format!(
            "the index {index} lists the rank files of a distributed checkpoint ({SHARDING_INFO}): \
             their blocks are placed by their offsets, not by the index's weight_map, and the \
             files it does not list are not read"
        ),
    );
    Ok(input)
}

/// Whether `input` is one rank's file of a DCP checkpoint.
pub(in crate::input) fn is_rank_file(input: &Input) -> bool {
    input.format == Format::SafeTensors
        && input.shards().is_none()
        && input.offsets().is_none()
        && sharding_info_text(input).is_some()
}

fn sharding_info_text(input: &Input) -> Option<&str> {
    let metadata = input.metadata()?;
    let (_, text) = metadata.iter().find(|(key, _)| key == SHARDING_INFO)?;
    Some(text)
}

/// Opens every `.safetensors` file of a folder that holds no index; they make one input when
/// they are the files of a DCP checkpoint. `None` when none of them is; a folder that mixes
/// them with other files is refused, naming those.
pub fn open_folder(
    name: &InputRef,
    files: &[PathBuf],
    options: OpenOptions,
    spill: &mut Spill,
) -> Result<Option<Input>> {
    let members = files.iter().map(PathBuf::as_path);
    let opened = Input::open_members(name.position, members, options, spill)?;
    let others: Vec<String> = opened
        .iter()
        .filter(|i| !is_rank_file(i))
        .map(|i| i.name.location.to_string())
        .collect();
    if others.len() == opened.len() {
        return Ok(None);
    }
    if !others.is_empty() {
        return Err(Error::Refused(vec![Refusal {
            headline: format!(
                "{name} holds the files of a PyTorch distributed checkpoint (their metadata \
                 has {SHARDING_INFO}) and {} other .safetensors file{}",
                others.len(),
                if others.len() == 1 { "" } else { "s" }
            ),
            details: capped(others, 10),
            hint: Some(
                "move the other files out of the folder, or name the checkpoint's files \
                 themselves"
                    .to_string(),
            ),
        }]));
    }
    combine(name.clone(), opened).map(Some)
}

/// The blocks of every file, each with its offsets, as one input named `name`.
pub(in crate::input) fn combine(name: InputRef, files: Vec<Input>) -> Result<Input> {
    let mut tensors = Vec::new();
    let mut offsets = Vec::new();
    let mut watched = Vec::new();
    let mut problems = Vec::new();
    let metadata = files[0].metadata().map(|pairs| {
        let kept = pairs
            .iter()
            .filter(|(key, _)| key != SHARDING_INFO && key != VERSION);
        kept.cloned().collect()
    });
    for mut file in files {
        let text = sharding_info_text(&file).unwrap_or_default();
        let mut entries = parse_sharding_info(text).map_err(|why| Error::Malformed {
            input: file.name.clone(),
            format: "safetensors (PyTorch distributed checkpoint)",
            reason: format!("its __metadata__ {SHARDING_INFO} cannot be read: {why}"),
        })?;
        // With FILE:NAME, the file's other tensors are left out on purpose.
        let whole_file = file.selected().is_none();
        for tensor in std::mem::take(&mut file.tensors) {
            let tensor_name = tensor.name.tensor.as_deref().unwrap_or_default();
            match entries.remove(tensor_name) {
                Some(saved) if saved.len() == tensor.info.shape.len() => {
                    offsets.push(saved);
                    tensors.push(tensor);
                }
                Some(saved) => problems.push(format!(
                    "{}: {SHARDING_INFO} gives {} offsets for a tensor of rank {}",
                    tensor.name,
                    saved.len(),
                    tensor.info.shape.len()
                )),
                None => problems.push(format!(
                    "{}: {SHARDING_INFO} has no entry for it",
                    tensor.name
                )),
            }
        }
        let mut extra: Vec<String> = entries.into_keys().map(|k| excerpt(&k).into()).collect();
        extra.sort();
        if !extra.is_empty() && whole_file {
            problems.push(format!(
                "{}: {SHARDING_INFO} lists tensors the file does not hold: {}",
                file.name,
                capped(extra, 5).join(", ")
            ));
        }
        watched.extend(file.into_watched());
    }
    if !problems.is_empty() {
        return Err(Error::Inconsistent(vec![Refusal {
            headline: format!(
                "the PyTorch distributed checkpoint {name} does not agree with its \
                 {SHARDING_INFO}:"
            ),
            details: capped(problems, 20),
            hint: Some(
                "a file is damaged or from another checkpoint: save the checkpoint again"
                    .to_string(),
            ),
        }]));
    }
    let mut watched = watched.into_iter();
    Ok(Input {
        name,
        tensors: tensors.into(),
        format: Format::SafeTensors,
        watched: watched.next().expect("a checkpoint of at least one file"),
        extras: Extras {
            metadata,
            notes: vec![INFERRED.to_string()],
            offsets: Some(offsets),
            more_watched: watched.collect(),
            ..Extras::default()
        }
        .boxed(),
    })
}
