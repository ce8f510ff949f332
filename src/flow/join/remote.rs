//! A join whose output is an object (`-o s3://BUCKET/KEY`) or a sharded set under a prefix
//! (`-o s3://BUCKET/PREFIX/`, or the set's index by its URL). The join is the usual one, its
//! output planned with the URL as its path (a set's "folder" the prefix): the output stage
//! uploads each file as it is written (`output::upload`), nothing is staged, and the commit
//! completes the uploads, a sharded set's shards first, its index last, so that a reader who
//! finds the index finds every shard it names. Any failure or signal before then aborts
//! them. Nothing under the prefix is removed: a previous set's extra shards stay, and the
//! new index no longer names them.
//!
//! With `--no-clobber`, every key is checked before a byte is uploaded, and the upload's
//! PUT or completion is a conditional create on S3 (`sys::remote::Streaming::complete`). A dry run plans with the URL as the output's path and
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

/// Runs the join `config` describes; when its output is a URL, uploaded as it is written.
/// Inputs named by URL are the input stage's to read.
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
    let mut uploaded = config.clone();
    match &mut uploaded.output.sharded {
        // The set's files go under the prefix, or beside the index the URL names.
        Some(sharded) => sharded.folder = PathBuf::from(prefix_of(location)),
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
        None => {
            // Refused before the inputs are read; the upload checks again before its first
            // byte (`output::upload`).
            if config.output.no_clobber {
                refuse_existing(location)?;
            }
        }
    }
    join::run(&uploaded)
}

/// The URL of the "folder" a sharded set goes in: the prefix itself, or what is before the
/// index's name.
#[cfg(feature = "remote")]
fn prefix_of(location: &Location) -> String {
    let url = location.url();
    match location.is_prefix() {
        true => url,
        false => url[..url.len() - location.file_name().len()].to_string(),
    }
}

/// `--no-clobber` against the store: refused before the join runs.
#[cfg(feature = "remote")]
fn refuse_existing(location: &Location) -> Result<()> {
    remote::Upload::check_absent(location)
        .map_err(|e| Error::io("write", Path::new(&location.url()), e))
}
