//! A sharded checkpoint as an output: which tensors go in which shard (huggingface_hub's
//! rule), the files' names, the previous set in the folder that the new one replaces, and the
//! output set they are all committed through, the index last.
//!
//! The folder keeps everything but the set: the commit replaces the files of the new set and
//! removes only the previous set's shards that the new set does not hold. A previous index is
//! data that whoever wrote to the folder, or shipped the checkpoint, controls, so a file it
//! lists is removed only when it is one that a set writes: a regular file (not a symbolic
//! link, not a folder) in the output folder itself, named like the set's shards
//! (`{prefix}-NNNNN-of-NNNNN.safetensors`), as transformers' `save_pretrained` removes only
//! such files and never follows a listed path. Everything else the previous index lists stays
//! where it is, and the plan says why ([`ShardPlan::left_alone`]). A set of one shard is
//! written as `{prefix}.safetensors` with no index, as the Hub libraries write it; the
//! previous index of that name, and the shards it lists, are then removed, so that no
//! reader finds an index that no longer matches.
//!
//! A symbolic link named like a file of the new set is refused: writing through it would put
//! the set's file outside the folder (a single-file output follows links; a set does not).

use std::path::{Path, PathBuf};

use crate::error::{Error, Refusal, Result};
use crate::format::index::{self, SetName};
use crate::messages;
use crate::output::OutputSet;
use crate::output::folders::Folders;

/// A sharded checkpoint to write: safetensors shards and their index, in one folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardedOutput {
    /// The folder the set is written in (created when it does not exist).
    pub folder: PathBuf,
    /// The set's name when the output (an index) or `--prefix` gives it; else the first
    /// input's index's, or `model`.
    pub name: Option<SetName>,
    /// The most bytes of tensor data in one shard (`--max-shard-size`).
    pub max_shard_size: u64,
    /// `--names-from`: the index whose weight_map assigns each tensor its file.
    pub names_from: Option<PathBuf>,
}

/// The files of a sharded output, planned before anything is written.
#[derive(Debug, Clone)]
pub struct ShardPlan {
    /// The folder the set goes in.
    pub folder: PathBuf,
    /// The set's name.
    pub name: SetName,
    /// The most bytes of tensor data a shard holds, unless one tensor alone is larger.
    pub max_shard_size: u64,
    /// The shards, in the order of their numbers.
    pub files: Vec<ShardFile>,
    /// The index's file name; none for a set of one file.
    pub index: Option<String>,
    /// Files of the previous set that the commit removes.
    pub removes: Vec<PathBuf>,
    /// What the previous index lists that the commit leaves where it is, and why.
    pub left_alone: Vec<LeftAlone>,
    /// Whether the folder is created (it does not exist yet).
    pub creates_folder: bool,
}

/// A file the folder's previous index lists that the commit does not remove, though the new
/// set does not hold it: it is not one a set writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftAlone {
    /// The name as the previous index lists it.
    pub listed: String,
    /// Why it stays.
    pub why: &'static str,
}

/// One shard of the output.
#[derive(Debug, Clone)]
pub struct ShardFile {
    /// Its file name in the folder.
    pub name: String,
    /// Its tensors, as indexes into the job, in the order they are written.
    pub tensors: Vec<usize>,
    /// Bytes of tensor data it holds.
    pub bytes: u64,
}

impl ShardPlan {
    /// Splits tensors of `sizes` bytes (in the job's order) into shards of at most `max`
    /// bytes, names them after `name`, and finds the previous set's files to remove.
    pub fn new(folder: &Path, name: SetName, max: u64, sizes: &[u64]) -> Result<ShardPlan> {
        let groups = index::split(sizes, max);
        let count = groups.len();
        let named = groups.into_iter().enumerate().map(|(at, tensors)| {
            let file = if count == 1 {
                name.single()
            } else {
                name.shard(at + 1, count)
            };
            (file, tensors)
        });
        let named: Vec<Assigned> = named.collect();
        ShardPlan::assigned(folder, name, max, sizes, named, count > 1)
    }

    /// The set whose files are `files`, each with its tensors (indexes into `sizes`, the
    /// job's bytes per tensor), with an index when `indexed`.
    pub fn assigned(
        folder: &Path,
        name: SetName,
        max: u64,
        sizes: &[u64],
        files: Vec<Assigned>,
        indexed: bool,
    ) -> Result<ShardPlan> {
        let files: Vec<ShardFile> = files
            .into_iter()
            .map(|(name, tensors)| ShardFile {
                name,
                bytes: tensors.iter().map(|&t| sizes[t]).sum(),
                tensors,
            })
            .collect();
        // A checkpoint with no tensors at all is still one (empty) file, as save_file writes.
        let files = if files.is_empty() {
            vec![ShardFile {
                name: name.single(),
                tensors: Vec::new(),
                bytes: 0,
            }]
        } else {
            files
        };
        let index = (indexed || files.len() > 1).then(|| name.index());
        // A prefix in object storage (`s3://b/ckpt/`) has no folder, links or previous set
        // here: its files are uploaded, and nothing under it is removed.
        let local = !crate::sys::remote::is_url(folder);
        let creates_folder = local && !folder.is_dir();
        let names = files.iter().map(|f| f.name.as_str());
        let previous = match local {
            true => {
                check_no_links(folder, names.chain(index.as_deref()))?;
                previous_files(folder, &name, &files, index.is_none())?
            }
            false => Previous::default(),
        };
        Ok(ShardPlan {
            folder: folder.to_path_buf(),
            name,
            max_shard_size: max,
            files,
            index,
            removes: previous.removes,
            left_alone: previous.left_alone,
            creates_folder,
        })
    }

    /// The index's text for a job whose output tensors are named `names` (indexes as in
    /// `files`), as transformers writes it.
    pub fn index_text(&self, names: &[&str]) -> String {
        let mut total = 0;
        let mut map = Vec::with_capacity(names.len());
        for file in &self.files {
            total += file.bytes;
            for &tensor in &file.tensors {
                map.push((names[tensor].to_string(), file.name.clone()));
            }
        }
        index::write(total, &map)
    }

    /// Refuses, for `--no-clobber`, a set whose commit would remove files of the previous
    /// set (the new set's own files are refused when added, if they exist).
    pub fn check_no_clobber(&self) -> Result<()> {
        if self.removes.is_empty() {
            return Ok(());
        }
        Err(Error::Refused(vec![Refusal {
            headline: format!(
                "--no-clobber forbids replacing files, but writing this set into {} would \
                 remove the previous set's files:",
                crate::messages::path(&self.folder)
            ),
            details: self
                .removes
                .iter()
                .map(|p| crate::messages::path(p))
                .collect(),
            hint: Some(
                "drop --no-clobber to replace the previous set, or write into another folder"
                    .to_string(),
            ),
        }]))
    }

    /// A file left in the folder that a loader may read instead of the new set: a single-file
    /// checkpoint of the same name beside a new index. It is not the previous index's to
    /// remove, so it stays; the caller warns.
    pub fn shadowing_file(&self) -> Option<PathBuf> {
        let single = self.folder.join(self.name.single());
        let local = !crate::sys::remote::is_url(&self.folder);
        (local && self.index.is_some() && single.is_file()).then_some(single)
    }

    /// Creates the folder if it does not exist; the returned guard removes it again, if it
    /// is still empty, unless [`Folders::keep`] is called once the set is committed.
    pub fn prepare_folder(&self) -> Result<Folders> {
        let mut made = Folders::none();
        if self.creates_folder && !self.folder.is_dir() {
            made.create(&self.folder)?;
        }
        Ok(made)
    }

    /// The output set: a member for each shard (to write, in order), then the index's
    /// member (written here), and the previous set's files to remove at the commit.
    pub fn members(&self, no_clobber: bool) -> Result<OutputSet> {
        let mut set = OutputSet::new(no_clobber).without_links();
        for file in &self.files {
            set.add(&self.folder.join(&file.name))?;
        }
        if let Some(index) = &self.index {
            set.add(&self.folder.join(index))?;
        }
        for path in &self.removes {
            set.remove_at_commit(path)?;
        }
        Ok(set)
    }
}

/// A file's name and its tensors (indexes into the job).
pub type Assigned = (String, Vec<usize>);

/// The files of the index at `path` (`--names-from`), each with the tensors its weight_map
/// puts in it (indexes into `names`, the job's tensors), in the order of their numbers, and
/// the set's name the index's file name gives. Every tensor must be mapped, to a plain file
/// name; tensors the map names that the job lacks are refused too.
pub fn names_from(path: &Path, names: &[&str]) -> Result<(SetName, Vec<Assigned>)> {
    let text = crate::sys::read_whole(path, &crate::limits::INDEX, crate::sys::Accept::Stream)
        .map_err(|e| Error::io("read the index", path, e))?;
    let index = index::parse(&text).map_err(|why| {
        Error::refused(
            format!("--names-from {}: {why}", crate::messages::path(path)),
            "name a model.safetensors.index.json, as transformers or PyTorch writes it",
        )
    })?;
    let at: std::collections::HashMap<&str, usize> =
        names.iter().enumerate().map(|(i, &n)| (n, i)).collect();
    let mut files: Vec<Assigned> = Vec::new();
    let mut mapped = vec![false; names.len()];
    let mut problems = Vec::new();
    for (tensor, file) in &index.weight_map {
        match at.get(tensor.as_str()) {
            _ if !is_file_name(file) => problems.push(format!(
                "`{}` goes in {}, which is not a file name",
                crate::messages::name(tensor),
                crate::messages::name(file)
            )),
            Some(&t) if !mapped[t] => {
                mapped[t] = true;
                match files.iter_mut().find(|(name, _)| name == file) {
                    Some((_, tensors)) => tensors.push(t),
                    None => files.push((file.clone(), vec![t])),
                }
            }
            Some(_) => problems.push(format!(
                "`{}` is listed twice",
                crate::messages::name(tensor)
            )),
            None => problems.push(format!(
                "`{}` is not a tensor of the output",
                crate::messages::name(tensor)
            )),
        }
    }
    let unmapped = names.iter().zip(&mapped).filter(|(_, m)| !**m);
    problems.extend(unmapped.map(|(n, _)| {
        let n = crate::messages::name(n);
        format!("`{n}` is a tensor the index does not map")
    }));
    if !problems.is_empty() {
        return Err(Error::Refused(vec![Refusal {
            headline: format!(
                "--names-from {} does not assign the output's tensors to files:",
                crate::messages::path(path)
            ),
            details: crate::error::capped(problems, 20),
            hint: Some(
                "give the index of the same model (its weight_map names every tensor once), \
                 or drop --names-from to split by --max-shard-size"
                    .to_string(),
            ),
        }]));
    }
    files.sort_by_key(|(file, _)| (index::shard_number(file).unwrap_or(u64::MAX), file.clone()));
    let file_name = path.file_name().and_then(|n| n.to_str());
    let name = file_name.and_then(SetName::of_index).unwrap_or_default();
    Ok((name, files))
}

/// Refuses symbolic links in `folder` named like the new set's files (`names`): the set's
/// files are written in the folder itself, never through a link to somewhere else.
fn check_no_links<'a>(folder: &Path, names: impl Iterator<Item = &'a str>) -> Result<()> {
    let mut links = Vec::new();
    for name in names {
        let path = folder.join(name);
        let is_link = path
            .symlink_metadata()
            .is_ok_and(|m| m.file_type().is_symlink());
        if !is_link {
            continue;
        }
        let points_to = match std::fs::read_link(&path) {
            Ok(to) => messages::path(&to),
            Err(e) => format!("somewhere it cannot tell ({e})"),
        };
        links.push(format!("{} -> {points_to}", messages::path(&path)));
    }
    if links.is_empty() {
        return Ok(());
    }
    Err(Error::Refused(vec![Refusal {
        headline: format!(
            "the output folder {} holds symbolic links named like files of the new set, and a \
             set's files are written in its folder, not through links to files elsewhere:",
            messages::path(folder)
        ),
        details: crate::error::capped(links, 20),
        hint: Some(
            "remove the links (the files they point to stay as they are), or write the set \
             into another folder"
                .to_string(),
        ),
    }]))
}

/// What the commit does to the previous set: the files it removes, and the files the previous
/// index lists that it leaves alone.
#[derive(Default)]
struct Previous {
    removes: Vec<PathBuf>,
    left_alone: Vec<LeftAlone>,
}

/// Whether `name`, from an index, names a file in the index's folder itself: one name, with no
/// folder, `..`, root or drive in it, on any system.
fn is_file_name(name: &str) -> bool {
    let mut components = Path::new(name).components();
    let one = matches!(
        (components.next(), components.next()),
        (Some(std::path::Component::Normal(_)), None)
    );
    one && !name.contains(['/', '\\'])
}

/// What a file the previous index lists is.
enum Listed {
    /// One of the previous set's shards, which the commit may remove.
    Shard(PathBuf),
    /// Nothing: no such file in the folder.
    Absent,
    /// Something no set writes, left alone for this reason.
    Other(&'static str),
}

/// What `listed`, a file name the previous index of the set `name` in `folder` gives, is: a
/// shard only if it is a regular file in the folder itself named like the set's shards.
fn classify(folder: &Path, name: &SetName, listed: &str) -> Listed {
    if !is_file_name(listed) {
        return Listed::Other("it is a path, not a file name in the output folder");
    }
    if !name.is_shard_name(listed) {
        return Listed::Other(
            "its name is not a shard's of this set ({prefix}-NNNNN-of-NNNNN.safetensors)",
        );
    }
    let path = folder.join(listed);
    // lstat: a link is judged as the link, never as what it points to.
    match path.symlink_metadata() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Listed::Absent,
        Err(_) => Listed::Other("it cannot be examined"),
        Ok(m) if m.file_type().is_symlink() => Listed::Other("it is a symbolic link"),
        Ok(m) if m.is_dir() => Listed::Other("it is a folder"),
        Ok(m) if !m.is_file() => Listed::Other("it is not a regular file"),
        Ok(_) => Listed::Shard(path),
    }
}

/// The files of the previous set in `folder` that the new one does not hold: those the
/// previous index of the same name lists that are its shards ([`classify`]), and that
/// index itself when the new set has none; and what else that index lists, left alone.
fn previous_files(
    folder: &Path,
    name: &SetName,
    files: &[ShardFile],
    drops_index: bool,
) -> Result<Previous> {
    let index_name = name.index();
    let previous = folder.join(&index_name);
    let mut found = Previous::default();
    match previous.symlink_metadata() {
        Ok(m) if m.file_type().is_symlink() => {
            // A link is not the set's own index: neither it nor what it lists is removed.
            let why = "it is a symbolic link (so neither it nor the files it lists are removed)";
            if drops_index {
                found.left_alone.push(LeftAlone {
                    listed: index_name,
                    why,
                });
            }
            return Ok(found);
        }
        Ok(m) if m.is_file() => {}
        _ => return Ok(found),
    }
    let text = crate::sys::read_whole(
        &previous,
        &crate::limits::INDEX,
        crate::sys::Accept::Regular,
    )
    .map_err(|e| Error::io("read", &previous, e))?;
    // An index that does not parse lists nothing tjoin can trust: its shards stay.
    if let Ok(index) = index::parse(&text) {
        let mut seen = std::collections::HashSet::new();
        for (_, listed) in index.weight_map {
            if files.iter().any(|f| f.name == listed) || !seen.insert(listed.clone()) {
                continue;
            }
            match classify(folder, name, &listed) {
                Listed::Shard(path) => found.removes.push(path),
                Listed::Other(why) => found.left_alone.push(LeftAlone { listed, why }),
                Listed::Absent => {}
            }
        }
    }
    found.removes.sort();
    found.left_alone.sort_by(|a, b| a.listed.cmp(&b.listed));
    // The index goes first, so that no reader follows it to a shard already removed.
    if drops_index {
        found.removes.insert(0, previous);
    }
    Ok(found)
}
