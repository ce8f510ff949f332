//! The sharded checkpoint: a folder of safetensors shards and their index, as
//! huggingface_hub's `save_torch_state_dict` writes them, chosen when the config stage asks
//! for one (a folder or an index as a join's `-o`, `DIR/` as a split's output).

use std::path::Path;

use super::{Asked, How, OutputKind, Planned, PlannedFile, Tensors};
use crate::error::{Error, Result};
use crate::format::{Format, OutTensor, Writer};
use crate::output::shards::{self, ShardPlan, ShardedOutput};

/// The kind of the output asked, if it is a sharded checkpoint: one is asked for, and `-o`
/// names where.
pub(super) fn claim<'c>(asked: &Asked<'c>) -> Option<OutputKind<'c>> {
    let (path, set) = (asked.path?, asked.sharded?);
    Some(OutputKind::Sharded { path, set })
}

/// The format a sharded checkpoint is written in, whatever its path: safetensors.
pub(super) const FORMAT: Format = Format::SafeTensors;

/// The shards of a sharded output, their tensors in the order each file lists them: the job's
/// (the first input's) order split by huggingface_hub's rule, each shard then in the writer's
/// order.
pub(super) fn plan(
    path: &Path,
    sharded: &ShardedOutput,
    tensors: &Tensors,
    writer: &dyn Writer,
) -> Result<Planned> {
    check_named(path, &sharded.folder, tensors.named)?;
    let job = tensors.described;
    let name = sharded
        .name
        .clone()
        .unwrap_or_else(|| tensors.set_name.cloned().unwrap_or_default());
    let sizes: Vec<u64> = job.iter().map(|t| t.bytes).collect();
    let (folder, max) = (&sharded.folder, sharded.max_shard_size);
    let names: Vec<&str> = job.iter().map(|t| t.name.as_str()).collect();
    let mut plan = match &sharded.names_from {
        Some(index) => {
            let (from_index, files) = shards::names_from(index, &names)?;
            let name = sharded.name.clone().unwrap_or(from_index);
            ShardPlan::assigned(folder, name, max, &sizes, files, true)?
        }
        None => ShardPlan::new(folder, name, max, &sizes)?,
    };
    for file in &mut plan.files {
        let described: Vec<OutTensor> = file.tensors.iter().map(|&t| job[t].clone()).collect();
        let order = writer.order(&described);
        file.tensors = order.into_iter().map(|at| file.tensors[at]).collect();
    }
    if tensors.no_clobber {
        plan.check_no_clobber()?;
    }
    let files = plan
        .files
        .iter()
        .map(|file| PlannedFile {
            target: plan.folder.join(&file.name),
            tensors: file.tensors.clone(),
        })
        .collect();
    let index = plan.index.is_some().then(|| plan.index_text(&names));
    Ok(Planned {
        path: Some(path.to_path_buf()),
        shown_as: plan.folder.clone(),
        files,
        no_clobber: tensors.no_clobber,
        part_size: tensors.part_size,
        how: How::Sharded(Box::new(plan), index),
    })
}

/// Refuses a sharded output (a folder, or an index) for tensors that have no names (.npy and
/// JSON files each hold one, unnamed) when `--name` gives none either: a checkpoint's files
/// are found by their tensors' names, and `-o existing_dir` was most likely meant as a file in
/// that folder. `output` is the path given, `folder` the set's.
fn check_named(output: &Path, folder: &Path, named: bool) -> Result<()> {
    if named {
        return Ok(());
    }
    // A file in the folder, when there is one to write it in.
    let file = match Some(folder).filter(|f| f.is_dir()) {
        Some(folder) => folder.join("out.npy"),
        None => Path::new("out.npy").to_path_buf(),
    };
    Err(Error::refused(
        format!(
            "-o {}: a folder or an index as the output is a sharded checkpoint of named \
             tensors, but the inputs' tensors have no names (.npy and JSON files hold one \
             unnamed tensor each)",
            crate::messages::path(output)
        ),
        format!(
            "name a file to write, such as -o {}, or name the tensor with --name to write it \
             as a safetensors checkpoint in the folder",
            crate::messages::path(&file)
        ),
    ))
}
