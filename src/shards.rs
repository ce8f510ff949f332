//! A sharded checkpoint as an output: which tensors go in which shard (huggingface_hub's
//! rule), the files' names, the previous set in the folder that the new one replaces, and the
//! output set they are all committed through, the index last.
//!
//! The folder keeps everything but the set: the commit replaces the files of the new set and
//! removes only the shards that the folder's previous index (the one of the same name) lists
//! and the new set does not, as transformers' `save_pretrained` does. A set of one shard is
//! written as `{prefix}.safetensors` with no index, as the Hub libraries write it; the
//! previous index of that name, and the shards it lists, are then removed, so that no
//! reader finds an index that no longer matches.

use std::path::{Path, PathBuf};

use crate::error::{Error, Refusal, Result};
use crate::format::index::{self, SetName};
use crate::output::{Member, OutputSet};

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
    /// Whether the folder is created (it does not exist yet).
    pub creates_folder: bool,
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
        let creates_folder = !folder.is_dir();
        let removes = previous_files(folder, &name, &files, index.is_none())?;
        Ok(ShardPlan {
            folder: folder.to_path_buf(),
            name,
            max_shard_size: max,
            files,
            index,
            removes,
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
        (self.index.is_some() && single.is_file()).then_some(single)
    }

    /// Creates the folder if it does not exist; the returned guard removes it again, if it
    /// is still empty, unless [`NewFolder::keep`] is called once the set is committed.
    pub fn prepare_folder(&self) -> Result<NewFolder> {
        if !self.creates_folder || self.folder.is_dir() {
            return Ok(NewFolder(None));
        }
        std::fs::create_dir(&self.folder)
            .map_err(|e| Error::io("create the output folder", &self.folder, e))?;
        Ok(NewFolder(Some(self.folder.clone())))
    }

    /// The output set: a member for each shard (to write, in order), then the index's
    /// member (written here), and the previous set's files to remove at the commit.
    pub fn members(&self, no_clobber: bool) -> Result<OutputSet> {
        let mut set = OutputSet::new(no_clobber);
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
    let text = std::fs::read(path).map_err(|e| Error::io("read the index", path, e))?;
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
        let plain = Path::new(file)
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
        match at.get(tensor.as_str()) {
            _ if !plain || file.is_empty() => problems.push(format!(
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

/// Writes the index's text into the last member of `set`, which [`ShardPlan::members`] made
/// for it.
pub fn write_index(set: &mut OutputSet, text: &str) -> Result<()> {
    let member: &mut Member = set.members_mut().last_mut().expect("the index's member");
    let target = member.target().to_path_buf();
    crate::output::Sink::write_all(member, text.as_bytes())
        .map_err(|e| Error::io("write the output", &target, e))
}

/// A folder made for the output, removed again (when empty) unless kept.
pub struct NewFolder(Option<PathBuf>);

impl NewFolder {
    /// The set is committed: the folder stays.
    pub fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for NewFolder {
    fn drop(&mut self) {
        if let Some(folder) = self.0.take() {
            // Only an empty folder goes; anything else in it is not this run's to remove.
            let _ = std::fs::remove_dir(folder);
        }
    }
}

/// The files of the previous set in `folder` that the new one does not hold: those the
/// previous index of the same name lists, and that index itself when the new set has none.
fn previous_files(
    folder: &Path,
    name: &SetName,
    files: &[ShardFile],
    drops_index: bool,
) -> Result<Vec<PathBuf>> {
    let previous = folder.join(name.index());
    if !previous.is_file() {
        return Ok(Vec::new());
    }
    let text = std::fs::read(&previous).map_err(|e| Error::io("read", &previous, e))?;
    let mut removes = Vec::new();
    // An index that does not parse lists nothing tjoin can trust: its shards stay.
    if let Ok(index) = index::parse(&text) {
        for (_, file) in index.weight_map {
            let plain = Path::new(&file)
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_)));
            let path = folder.join(&file);
            let kept = files.iter().any(|f| f.name == file);
            if plain && !kept && !removes.contains(&path) && path.is_file() {
                removes.push(path);
            }
        }
    }
    removes.sort();
    // The index goes first, so that no reader follows it to a shard already removed.
    if drops_index {
        removes.insert(0, previous);
    }
    Ok(removes)
}
