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
//! Inputs named by URL are read through the input stage's remote source
//! (`input::remote`): each object is downloaded, every read pinned to the ETag its first
//! read saw, into a staging folder that the join then reads as local files: an object, an
//! index with the shards it names (beside it), or what is directly under a prefix (a
//! sharded set, a DCP checkpoint's folder). Messages name the URL, not the staged copy
//! (`messages::show_as`).
//! Until the input stage parses headers from bytes and the engine reads by range, this is
//! how a remote input is read: it needs room in `TMPDIR` for the inputs, and a dry run
//! downloads them too.

use std::path::Path;
#[cfg(feature = "remote")]
use std::path::PathBuf;

use crate::config::{Action, JoinConfig};
use crate::error::{Error, Result};
use crate::flow::join;
use crate::sys::remote::{self, Location};

/// Runs the join `config` describes: its inputs named by URL downloaded first, and, when its
/// output is a URL, written into a staging folder, then uploaded there.
pub fn join(config: &JoinConfig) -> Result<()> {
    let Some((staged, _fetched)) = fetch_inputs(config)? else {
        return join_to(config);
    };
    join_to(&staged)
}

/// The join `config` describes; when its output is a URL, written into a staging folder,
/// then uploaded there.
fn join_to(config: &JoinConfig) -> Result<()> {
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

/// The inputs downloaded into a staging folder (removed when dropped).
struct Fetched {
    #[cfg(feature = "remote")]
    _staging: remote::Staging,
}

#[cfg(not(feature = "remote"))]
fn fetch_inputs(config: &JoinConfig) -> Result<Option<(JoinConfig, Fetched)>> {
    match config.inputs.iter().find(|input| remote::is_url(input)) {
        None => Ok(None),
        Some(input) => {
            let location = Location::parse(&input.to_string_lossy())
                .map_err(|why| Error::io("read", input, std::io::Error::other(why)))?;
            Err(Error::io("read", input, remote::not_built(&location)))
        }
    }
}

/// `config` with each input named by URL replaced by its staged copy, or `None` when no
/// input is a URL.
#[cfg(feature = "remote")]
fn fetch_inputs(config: &JoinConfig) -> Result<Option<(JoinConfig, Fetched)>> {
    use std::sync::Arc;
    if !config.inputs.iter().any(|input| remote::is_url(input)) {
        return Ok(None);
    }
    let staging = remote::Staging::new(".tjoin-download.")
        .map_err(|e| Error::io("create a staging folder in", &std::env::temp_dir(), e))?;
    let mut staged = config.clone();
    for (at, input) in config.inputs.iter().enumerate() {
        if !remote::is_url(input) {
            continue;
        }
        let folder = staging.path().join((at + 1).to_string());
        std::fs::create_dir(&folder).map_err(|e| Error::io("create", &folder, e))?;
        let (object, selected) = selection(input)?;
        let root = fetch(&object, &folder).map_err(|e| Error::io("read", input, e))?;
        let mut text = root.clone().into_os_string();
        if let Some(name) = &selected {
            text.push(format!(":{name}"));
        }
        staged.inputs[at] = Arc::from(Path::new(&text));
        // A prefix's files are shown under it: `s3://b/ckpt` + `/model.safetensors`.
        let shown = object.as_path().to_string_lossy();
        crate::messages::show_as(&root, shown.trim_end_matches('/'));
    }
    let fetched = Fetched { _staging: staging };
    Ok(Some((staged, fetched)))
}

/// The object an input names, and the tensor after a colon (`s3://b/k.safetensors:embed`)
/// when the whole text names no object but the part before its last colon does.
#[cfg(feature = "remote")]
fn selection(input: &Path) -> Result<(crate::location::Location, Option<String>)> {
    use crate::location::Location as Named;
    let text = input.to_string_lossy();
    let whole = Named::new(input);
    // A colon in the key's last part only: `http://host:8080/a.npy` has none.
    let last_part = text.rfind('/').map_or(0, |at| at + 1);
    let Some(colon) = text[last_part..].rfind(':').map(|at| last_part + at) else {
        return Ok((whole, None));
    };
    match crate::input::sources::head(&whole) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        // An object by the whole name, or an error the download will report.
        _ => return Ok((whole, None)),
    }
    let object = Named::new(Path::new(&text[..colon]));
    Ok((object, Some(text[colon + 1..].to_string())))
}

/// Downloads what `location` names into `folder`: an object (an index with the shards it
/// names beside it), or the objects directly under a prefix. The local path that stands for
/// it.
#[cfg(feature = "remote")]
fn fetch(location: &crate::location::Location, folder: &Path) -> std::io::Result<PathBuf> {
    use crate::input::source::Kind;
    use crate::input::sources;
    let url = crate::input::remote::url(location)?;
    let head = sources::head(location)?;
    if head.kind == Kind::Folder {
        for entry in sources::list(location)?.into_iter().filter(|e| e.is_object) {
            let name = entry.name.to_string_lossy().into_owned();
            download(&location.child(&name), &folder.join(&name))?;
        }
        return Ok(folder.to_path_buf());
    }
    let name = url.file_name().to_string();
    let local = folder.join(&name);
    download(location, &local)?;
    if name.ends_with(".index.json") {
        let text = std::fs::read(&local)?;
        let index = crate::format::index::parse(&text).map_err(std::io::Error::other)?;
        let mut files: Vec<&str> = index.weight_map.iter().map(|(_, f)| f.as_str()).collect();
        files.sort_unstable();
        files.dedup();
        for file in files {
            // A name that leaves the index's folder is left for the set's reader to refuse.
            let (Some(shard), Some(at)) = (url.sibling(file), checked_join(folder, file)) else {
                continue;
            };
            let shard = crate::location::Location::new(Path::new(&shard.url()));
            download(&shard, &at)?;
        }
    }
    Ok(local)
}

/// `folder` joined with a name from a file, when it stays inside it.
#[cfg(feature = "remote")]
fn checked_join(folder: &Path, name: &str) -> Option<PathBuf> {
    use std::path::Component;
    let inside = Path::new(name)
        .components()
        .all(|part| matches!(part, Component::Normal(_)));
    inside.then(|| folder.join(name))
}

/// Downloads one object into a new file at `local`.
#[cfg(feature = "remote")]
fn download(location: &crate::location::Location, local: &Path) -> std::io::Result<()> {
    if let Some(parent) = local.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let file = std::fs::File::create_new(local)?;
    crate::input::sources::head(location)
        .and_then(|head| crate::input::remote::download(location, &head, &file))
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", location.label(None))))
}
