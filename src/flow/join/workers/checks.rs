//! What a job of several workers cannot share, refused before anything is written: no
//! output, standard output, a device or a link, a format whose bytes depend on the data,
//! a split's file outputs in several folders (or prefixes), outputs some in object storage
//! and some not, inputs read from standard input.

use std::path::Path;

use crate::error::{Error, Result};
use crate::format::Format;
use crate::output::job::Paths;
use crate::output::kind::Description;

use super::Planning;

/// The output named by URL, if it is (a job of several workers uploads each of its files as
/// one multipart upload's parts): a split's first; refuses what such a job cannot share
/// (some outputs named by URL and others not, a split's file outputs in several prefixes or
/// buckets, a format whose bytes depend on the data, an input read from standard input).
pub(super) fn remote_output<'p>(planning: &Planning<'p, '_>) -> Result<Option<Remote<'p>>> {
    let remotes: Vec<Option<Remote<'p>>> = planning
        .parts
        .iter()
        .map(|p| Remote::of(p.planned.describe()))
        .collect();
    let Some(&first) = remotes.first() else {
        return Ok(None);
    };
    if let Some(other) = remotes.iter().find(|r| r.is_some() != first.is_some()) {
        let url = first.or(*other).map_or(Path::new(""), |r| r.url);
        return Err(Error::refused(
            format!(
                "the outputs are some in object storage ({}) and some not, and a job keeps \
                 its files beside its first output",
                crate::messages::path(url)
            ),
            "name every output in S3 (-o 's3://BUCKET/tp{rank}.safetensors'), or every one \
             on a file system the workers share",
        ));
    }
    let Some(remote) = first else {
        return Ok(None);
    };
    #[cfg(feature = "remote")]
    super::s3::check_outputs(planning, remote)?;
    check_distinct(planning)?;
    check_formats_and_inputs(planning, remote.url)?;
    Ok(Some(remote))
}

/// An output in object storage: what `-o` names, and whether it is a sharded set.
#[derive(Debug, Clone, Copy)]
pub(super) struct Remote<'p> {
    pub(super) url: &'p Path,
    #[cfg_attr(not(feature = "remote"), allow(dead_code))]
    pub(super) sharded: bool,
}

impl<'p> Remote<'p> {
    /// The output `described`, if it is named by URL.
    pub(super) fn of(described: Description<'p>) -> Option<Remote<'p>> {
        let is_url = crate::sys::remote::is_url;
        match described {
            Description::File(path) if is_url(path) => Some(Remote {
                url: path,
                sharded: false,
            }),
            Description::Sharded { path, shards } if is_url(path) || is_url(&shards.folder) => {
                Some(Remote {
                    url: path,
                    sharded: true,
                })
            }
            _ => None,
        }
    }
}

/// Refuses what a job cannot share: no output, standard output, a device or a link, a
/// format whose bytes depend on the data, a split's outputs in several folders, inputs read
/// from standard input (each worker would read its own). Returns the job's paths.
pub(super) fn check_can_share(planning: &Planning) -> Result<Paths> {
    let first = planning.parts.first().map(|p| p.planned.describe());
    let paths = match first {
        None | Some(Description::None) => None,
        Some(Description::File(path)) => Some(Paths::of(path, None)),
        Some(Description::Sharded { path, shards }) => Some(Paths::of(path, Some(&shards.folder))),
    };
    let Some(paths) = paths else {
        return Err(Error::refused(
            "a job of several workers needs an output",
            "name it with -o, the same in every step",
        ));
    };
    for part in &planning.parts {
        // A sharded output's files are in its own folder, its job's data files beside them.
        let folder = match part.planned.describe() {
            Description::Sharded { shards, .. } => shards.folder.as_path(),
            _ => paths.folder.as_path(),
        };
        for file in part.planned.files() {
            check_target((&paths, folder), &file.target)?;
        }
    }
    check_distinct(planning)?;
    check_formats_and_inputs(planning, &paths.output)?;
    Ok(paths)
}

/// Refuses outputs that name one file twice (a split's file output and another's sharded
/// output with a shard of that name in its folder; two URLs that name one object, spelled
/// otherwise: `-o s3://B/p.npy -o S3://B/p.npy`): the job would write two files to one
/// target, one replacing the other.
fn check_distinct(planning: &Planning) -> Result<()> {
    let mut seen = std::collections::HashSet::new();
    let targets = planning.parts.iter().flat_map(|p| p.planned.targets());
    for target in targets {
        // An object by its location; a URL that does not parse is refused when planned.
        let named = match crate::sys::remote::is_url(&target) {
            true => crate::sys::remote::Location::parse(&target.to_string_lossy()).ok(),
            false => None,
        };
        if !seen.insert(named.ok_or_else(|| target.clone())) {
            return Err(Error::refused(
                format!(
                    "the outputs name {} twice, and a job would write both files to it, one \
                     replacing the other",
                    crate::messages::path(&target)
                ),
                "give each output names of its own: a sharded output a folder or prefix of its \
                 own (-o 'tp{rank}/', -o 's3://BUCKET/tp{rank}/')",
            ));
        }
    }
    Ok(())
}

/// Refuses a format whose bytes depend on the data, and inputs read from standard input
/// (each worker would read its own), in a job whose output is `output`.
pub(super) fn check_formats_and_inputs(planning: &Planning, output: &Path) -> Result<()> {
    for part in &planning.parts {
        if part.format != Format::Npy && part.format != Format::SafeTensors {
            return Err(Error::refused(
                format!(
                    "a job of several workers writes .npy and .safetensors outputs, whose \
                     headers fix every tensor's place before its data is written; {} is {}",
                    crate::messages::path(output),
                    part.format.name()
                ),
                "write .npy or .safetensors outputs (or a sharded folder), or run in one \
                 process",
            ));
        }
    }
    if let Some(input) = planning.inputs.iter().find(|i| i.name.is_stdin()) {
        return Err(Error::refused(
            format!(
                "{} is standard input, which each worker of a job would read for itself",
                input.name
            ),
            "save it to a file every worker sees, and name that file",
        ));
    }
    Ok(())
}

/// Refuses a target a job cannot write: one not in the job's folder (a split's outputs in
/// several folders), standard output, a device or a link (the data file beside it is renamed
/// over it, where a one-process run writes a device in place or follows a link).
fn check_target((paths, folder): (&Paths, &Path), target: &Path) -> Result<()> {
    let shown = crate::messages::path(target);
    if crate::sys::folder_of(target) != folder {
        return Err(Error::refused(
            format!(
                "the outputs {} and {shown} are in different folders, and a job keeps its \
                 files in one, beside its first output",
                crate::messages::path(&paths.output)
            ),
            "name outputs in one folder (part-{part}.npy, tp{rank}.safetensors), or run the \
             split in one process",
        ));
    }
    let direct = crate::output::written_directly(target)
        || target.as_os_str() == crate::sys::STDOUT
        || target
            .symlink_metadata()
            .is_ok_and(|m| m.file_type().is_symlink());
    if direct {
        return Err(Error::refused(
            format!(
                "the output {shown} is not a regular file that a job can replace: a job's \
                 workers write a file beside it, which the commit renames over it"
            ),
            "name a regular file (the file a link points to, not the link) on a file system \
             every worker sees",
        ));
    }
    Ok(())
}
