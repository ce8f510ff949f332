//! A join whose output is an object (`-o s3://BUCKET/KEY`) or a sharded set under a prefix
//! (`-o s3://BUCKET/PREFIX/`, or the set's index by its URL). The join is the usual one,
//! written and committed into a staging folder in the temporary folder (`TMPDIR`), which
//! therefore needs room for the output; its files are then unlinked (open, so that no
//! signal leaves them behind) and uploaded, each as one object that the store shows only
//! once complete (`sys::remote::Upload`): a sharded set's shards first, its index last, so
//! that a reader who finds the index finds every shard it names. Any failure or signal
//! before an object is complete aborts its upload. Nothing under the prefix is removed: a
//! previous set's extra shards stay, and the new index no longer names them.
//!
//! With `--no-clobber`, every key is checked before a byte is uploaded (and a one-part
//! object is a conditional create). A dry run plans with the URL as the output's path and
//! sends nothing.
//!
//! Inputs named by URL are opened by the input stage (`input/objects.rs`): their headers
//! parsed from ranged reads, their data read by range as the engine copies it.

use std::path::Path;
#[cfg(feature = "remote")]
use std::path::PathBuf;

use crate::config::{Action, JoinConfig};
use crate::error::{Error, Result};
use crate::flow::join;
use crate::sys::remote::{self, Location};

/// Runs the join `config` describes; when its output is a URL, written into a staging
/// folder, then uploaded there. Inputs named by URL are the input stage's to read.
pub fn join(config: &JoinConfig) -> Result<()> {
    let Some(output) = config.output.path.as_deref().filter(|p| remote::is_url(p)) else {
        return join::run(config);
    };
    let location = Location::parse(&output.to_string_lossy()).map_err(|why| {
        Error::refused(
            format!(
                "the output {} is not a URL tjoin writes: {why}",
                crate::messages::path(output)
            ),
            "name an object as s3://BUCKET/KEY (gs://, az://), or a sharded set's prefix as \
             s3://BUCKET/PREFIX/",
        )
    })?;
    // A job's steps upload their own parts (`join::workers`).
    if matches!(config.action, Action::DryRun(_)) || config.job.is_some() {
        return join::run(config);
    }
    write(config, output, &location)
}

#[cfg(not(feature = "remote"))]
fn write(_config: &JoinConfig, output: &Path, location: &Location) -> Result<()> {
    Err(Error::io("write", output, remote::not_built(location)))
}

#[cfg(feature = "remote")]
fn write(config: &JoinConfig, output: &Path, location: &Location) -> Result<()> {
    let staging = remote::Staging::new(".tjoin-upload.")
        .map_err(|e| Error::io("create a staging folder in", &std::env::temp_dir(), e))?;
    let mut staged = config.clone();
    let (staged_path, folder) = match &mut staged.output.sharded {
        Some(sharded) => {
            sharded.folder = staging.path().to_path_buf();
            let name = (!location.is_prefix()).then(|| location.file_name().to_string());
            (
                name.map_or_else(|| staging.path().join(""), |n| staging.path().join(n)),
                true,
            )
        }
        None if location.is_prefix() => {
            return Err(Error::refused(
                format!(
                    "the output {} names a prefix, where one file is written",
                    crate::messages::path(output)
                ),
                "name the object (s3://BUCKET/KEY.safetensors), or write a sharded set \
                 (--max-shard-size, --prefix, or named tensors into a prefix)",
            ));
        }
        None => (staging.path().join(location.file_name()), false),
    };
    staged.output.path = Some(staged_path.clone());
    // Checked against the store before anything is uploaded, below.
    staged.output.no_clobber = false;
    if config.output.no_clobber && !folder {
        refuse_existing(location)?;
    }
    join::run(&staged).map_err(|e| named_as_output(e, staging.path(), output))?;
    let files = staged_files(staging.path(), folder, &staged_path)
        .map_err(|e| Error::io("read the staged output in", staging.path(), e))?;
    let targets: Vec<(Location, std::fs::File, u64)> = files
        .into_iter()
        .map(|(name, file, len)| {
            let target = match folder {
                true => sibling_in(location, &name),
                false => Some(location.clone()),
            };
            target
                .map(|target| (target, file, len))
                .ok_or_else(|| Error::io("name", output, std::io::Error::other(name)))
        })
        .collect::<Result<_>>()?;
    drop(staging);
    if config.output.no_clobber && folder {
        for (target, _, _) in &targets {
            refuse_existing(target)?;
        }
    }
    for (target, file, len) in &targets {
        remote::Upload::file(target, file, *len, config.output.no_clobber)
            .map_err(|e| Error::io("upload", Path::new(&target.url()), e))?;
    }
    Ok(())
}

/// The object a staged file of a sharded set goes to: beside the index the URL names, or
/// under the prefix it names.
#[cfg(feature = "remote")]
fn sibling_in(location: &Location, name: &str) -> Option<Location> {
    if location.is_prefix() {
        let key = format!("{}{name}", location.key);
        return Location::parse(&format!(
            "{}",
            Location {
                key,
                ..location.clone()
            }
        ))
        .ok();
    }
    location.sibling(name)
}

/// `--no-clobber` against the store: refused before the join runs (a single object) or
/// before any upload (a set's files).
#[cfg(feature = "remote")]
fn refuse_existing(location: &Location) -> Result<()> {
    remote::Upload::check_absent(location)
        .map_err(|e| Error::io("write", Path::new(&location.url()), e))
}

/// The staged output's files, opened and unlinked, with their names and lengths: the set's
/// index last (it is written last, so that a reader who finds it finds every shard).
#[cfg(feature = "remote")]
fn staged_files(
    staging: &Path,
    folder: bool,
    staged_path: &Path,
) -> std::io::Result<Vec<(String, std::fs::File, u64)>> {
    let paths: Vec<PathBuf> = if folder {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(staging)?
            .map(|entry| entry.map(|e| e.path()))
            .collect::<std::io::Result<_>>()?;
        paths.sort_by_key(|p| (is_index(p), p.clone()));
        paths
    } else {
        vec![staged_path.to_path_buf()]
    };
    let mut files = Vec::with_capacity(paths.len());
    for path in paths {
        let file = std::fs::File::open(&path)?;
        let len = file.metadata()?.len();
        std::fs::remove_file(&path)?;
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        files.push((name, file, len));
    }
    Ok(files)
}

#[cfg(feature = "remote")]
fn is_index(path: &Path) -> bool {
    path.to_string_lossy().ends_with(".index.json")
}

/// An error of the staged join that names a staged file, naming the output instead.
#[cfg(feature = "remote")]
fn named_as_output(error: Error, staging: &Path, output: &Path) -> Error {
    match error {
        Error::Io {
            action,
            path,
            source,
        } if path.starts_with(staging) => Error::Io {
            action,
            path: output.to_path_buf(),
            source,
        },
        error => error,
    }
}
