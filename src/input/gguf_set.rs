//! A GGUF input: one file, or a split set named by its first file
//! (`model-00001-of-00003.gguf`, the others found beside it by gguf-split's names) or by all
//! its files. Every file's header is read and checked (`format::gguf::read_header`), and the
//! set's `split.*` keys are checked against each other and against the files found: a
//! missing file, a count that disagrees, a file out of its place, keys a later file should
//! not hold are refused before anything is written.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::Stamp;
use crate::error::{Error, InputRef, Refusal, Result};
use crate::format::gguf::header::{ALIGNMENT_KEY, Header, TensorInfo, Value};
use crate::format::gguf::{self, types::ValueType};

/// The key of a file's place in its set, from 0 (uint16).
pub const SPLIT_NO: &str = "split.no";
/// The key of the number of files in the set (uint16).
pub const SPLIT_COUNT: &str = "split.count";
/// The key of the number of tensors in the whole set (int32).
pub const SPLIT_TENSORS: &str = "split.tensors.count";

/// One GGUF file, open, its header read.
pub struct GgufFile {
    /// The path, as messages name it.
    pub path: Arc<Path>,
    /// The file.
    pub file: File,
    /// Its length.
    pub len: u64,
    /// Its header.
    pub header: Header,
    /// What it was when opened, to tell a change before the output is committed.
    stamp: Stamp,
}

/// A GGUF input: its files in the set's order (one for an unsplit file).
pub struct GgufSet {
    /// The files.
    pub files: Vec<GgufFile>,
}

/// What to do about files that do not make one set.
const SET_HINT: &str = "name the set's first file, with every file of the set beside it as \
                        gguf-split names them, or name every file in order; a file written \
                        again by another split does not belong to this set";

/// What to do about a later file whose alignment is unsure.
const ALIGNMENT_HINT: &str = "split the unsplit file again with tjoin split, which writes \
                              `general.alignment` into every file of a set whose alignment is \
                              not 32";

/// A tensor of the set, with where its data lies.
pub struct SetTensor<'s> {
    /// Its info, as its file's header gives it.
    pub info: &'s TensorInfo,
    /// The file its data is in (index into `files`).
    pub file: usize,
    /// Where its data starts in that file.
    pub start: u64,
}

impl GgufSet {
    /// Opens the GGUF input `paths` names: one file (unsplit, or the first of a set, whose
    /// other files are found by gguf-split's names), or every file of a set, in order.
    /// A set named by URL is refused: its files are copied from as local files.
    pub fn open(paths: &[Arc<Path>]) -> Result<GgufSet> {
        let remote = paths.iter().position(|p| crate::sys::remote::is_url(p));
        if let Some(at) = remote {
            return Err(refused(
                format!(
                    "input {} ({}) is in object storage, and a GGUF merge or split reads its \
                     set from local files",
                    at + 1,
                    crate::messages::path(&paths[at])
                ),
                "copy the set into a local folder first (aws s3 cp --recursive, gcloud storage \
                 cp, azcopy); a plain tensor is read from a URL by name (MODEL.gguf:NAME -o \
                 t.npy)",
            ));
        }
        let first = open_file(&paths[0], 1)?;
        let count = split_count(&first)?;
        let mut files = vec![first];
        if paths.len() > 1 {
            for (at, path) in paths.iter().enumerate().skip(1) {
                files.push(open_file(path, at + 1)?);
            }
        } else if let Some(count) = count {
            for no in 1..count {
                let path = sibling(&files[0].path, no, count)?;
                files.push(open_file(&path, 1)?);
            }
        } else if let Some((_, named)) = numbered(&files[0].path) {
            return Err(refused(
                format!(
                    "{} is named as the first file of a set of {named} but has no `{SPLIT_COUNT}` \
                     key",
                    crate::messages::path(&files[0].path)
                ),
                "name every file of the set in order, or rename a file that is whole",
            ));
        }
        let set = GgufSet { files };
        set.check()?;
        Ok(set)
    }

    /// The header whose keys the set carries: the first file's.
    pub fn first(&self) -> &GgufFile {
        &self.files[0]
    }

    /// Every tensor, in the set's order, with where its data is.
    pub fn tensors(&self) -> impl Iterator<Item = SetTensor<'_>> {
        self.files.iter().enumerate().flat_map(|(at, file)| {
            file.header.tensors.iter().map(move |info| SetTensor {
                info,
                file: at,
                start: file.header.data_offset + info.offset,
            })
        })
    }

    /// Fails if a file changed since it was opened (its data may be a mixture of two
    /// versions).
    pub fn check_unchanged(&self) -> Result<()> {
        for (at, file) in self.files.iter().enumerate() {
            let name = input_ref(&file.path, at + 1);
            let now = Stamp::of(&file.file).map_err(|e| name.io_error("re-check", e))?;
            if now != file.stamp {
                let why = "it changed while tjoin was reading it; no output was written, run \
                           again once nothing else writes to it";
                return Err(name.io_error("read", std::io::Error::other(why)));
            }
        }
        Ok(())
    }

    /// Checks the files agree as one set: each file's `split.no` is its place, every
    /// `split.count` the number of files, every `split.tensors.count` the tensors there
    /// are; later files hold no keys but these (and their own alignment); no tensor name
    /// comes twice.
    fn check(&self) -> Result<()> {
        let n = self.files.len();
        let total: usize = self.files.iter().map(|f| f.header.tensors.len()).sum();
        let mut problems = Vec::new();
        for (at, file) in self.files.iter().enumerate() {
            let name = crate::messages::path(&file.path);
            let keys = split_keys(file)?;
            match keys {
                None if n == 1 => {}
                None => problems.push((
                    format!(
                        "{name} has no `{SPLIT_COUNT}` key, but is file {} of a set of {n}",
                        at + 1
                    ),
                    SET_HINT,
                )),
                Some((no, count, tensors)) => {
                    if count as usize != n {
                        problems.push((
                            format!(
                                "{name} says `{SPLIT_COUNT}` = {count}, but the set has {n} files"
                            ),
                            SET_HINT,
                        ));
                    }
                    if no as usize != at {
                        problems.push((
                            format!(
                                "{name} says `{SPLIT_NO}` = {no} (file {} of the set), but it \
                                 is file {} here",
                                no + 1,
                                at + 1
                            ),
                            SET_HINT,
                        ));
                    }
                    if tensors < 0 || tensors as usize != total {
                        problems.push((
                            format!(
                                "{name} says `{SPLIT_TENSORS}` = {tensors}, but the set's files \
                                 hold {total} tensors"
                            ),
                            SET_HINT,
                        ));
                    }
                }
            }
            if at > 0
                && let Some(problem) = unsure_alignment(file, &self.files[0])
            {
                problems.push((problem, ALIGNMENT_HINT));
            }
            if at > 0
                && let Some(problem) = extra_keys(file, &name)
            {
                problems.push((problem, SET_HINT));
            }
        }
        let mut seen = std::collections::HashMap::new();
        for (at, file) in self.files.iter().enumerate() {
            for info in &file.header.tensors {
                if let Some(before) = seen.insert(info.name.as_str(), at) {
                    problems.push((
                        format!(
                            "the tensor `{}` is in {} and again in {}",
                            info.name,
                            crate::messages::path(&self.files[before].path),
                            crate::messages::path(&file.path)
                        ),
                        SET_HINT,
                    ));
                }
            }
        }
        if problems.is_empty() {
            return Ok(());
        }
        Err(Error::Inconsistent(
            problems
                .into_iter()
                .map(|(headline, hint)| Refusal {
                    headline,
                    details: Vec::new(),
                    hint: Some(hint.to_string()),
                })
                .collect(),
        ))
    }
}

/// Why `file` (named `name`), a later file of a set, cannot be merged as it is: keys besides
/// `split.*` and its own alignment, which a merge would drop.
fn extra_keys(file: &GgufFile, name: &str) -> Option<String> {
    let extra: Vec<&str> = file
        .header
        .kvs
        .iter()
        .map(|kv| kv.key.as_str())
        .filter(|key| !key.starts_with("split.") && *key != ALIGNMENT_KEY)
        .collect();
    let key = extra.first()?;
    Some(format!(
        "{name} holds {} key{} besides `split.*` (`{key}` first), which a merge would drop: \
         gguf-split keeps every key in the first file",
        extra.len(),
        if extra.len() == 1 { "" } else { "s" }
    ))
}

/// Why the data of `file`, a later file of the set whose first file is `first`, may start
/// at either of two places: it has no `general.alignment`, so GGUF's default of 32 applies,
/// but the first file sets another, which some writers (gguf-py's split) apply to every file
/// of the set without saying so. When both put the data at the same byte, nothing is unsure.
fn unsure_alignment(file: &GgufFile, first: &GgufFile) -> Option<String> {
    let header = &file.header;
    let theirs = first.header.alignment;
    let own_key = header.kvs.iter().any(|kv| kv.key == ALIGNMENT_KEY);
    if own_key || theirs == header.alignment {
        return None;
    }
    let other = header.infos_end.checked_next_multiple_of(theirs)?;
    (other != header.data_offset).then(|| {
        format!(
            "{} has no `{ALIGNMENT_KEY}`, so its data starts at byte {} (GGUF's default \
             alignment, {}), but at byte {other} by the first file's alignment, {theirs}; tjoin \
             cannot tell which its writer meant",
            crate::messages::path(&file.path),
            header.data_offset,
            header.alignment
        )
    })
}

fn input_ref(path: &Arc<Path>, position: usize) -> InputRef {
    InputRef {
        position,
        location: Arc::clone(path).into(),
        tensor: None,
    }
}

fn refused(headline: String, hint: &str) -> Error {
    Error::refused(headline, hint)
}

/// Opens one file and reads its header.
fn open_file(path: &Path, position: usize) -> Result<GgufFile> {
    let path: Arc<Path> = Arc::from(path);
    let name = input_ref(&path, position);
    let (file, metadata) = crate::sys::open_regular(&path).map_err(|e| name.io_error("open", e))?;
    let len = metadata.len();
    let header = gguf::read_header(&file, len, &name)?;
    Ok(GgufFile {
        stamp: Stamp::from(&metadata),
        path,
        file,
        len,
        header,
    })
}

/// The set's `split.no`, `split.count` and `split.tensors.count`, when the file has the
/// first two; refuses them of the wrong types, or one without the others.
fn split_keys(file: &GgufFile) -> Result<Option<(u64, u64, i64)>> {
    let get = |key: &str, vtype: ValueType| {
        let kv = file.header.kvs.iter().find(|kv| kv.key == key)?;
        Some((kv.vtype == vtype).then_some(&kv.value).ok_or(kv.vtype))
    };
    let wrong = |key: &str, found: ValueType, wanted: ValueType| {
        refused(
            format!(
                "{}: `{key}` is of type {}, not {}",
                crate::messages::path(&file.path),
                found.name(),
                wanted.name()
            ),
            "write the set again with gguf-split or tjoin split",
        )
    };
    let no = get(SPLIT_NO, ValueType::UInt16);
    let count = get(SPLIT_COUNT, ValueType::UInt16);
    let tensors = get(SPLIT_TENSORS, ValueType::Int32);
    match (no, count, tensors) {
        (None, None, None) => Ok(None),
        (
            Some(Ok(Value::Unsigned(no))),
            Some(Ok(Value::Unsigned(count))),
            Some(Ok(Value::Signed(tensors))),
        ) => Ok(Some((*no, *count, *tensors))),
        (Some(Err(found)), _, _) => Err(wrong(SPLIT_NO, found, ValueType::UInt16)),
        (_, Some(Err(found)), _) => Err(wrong(SPLIT_COUNT, found, ValueType::UInt16)),
        (_, _, Some(Err(found))) => Err(wrong(SPLIT_TENSORS, found, ValueType::Int32)),
        _ => Err(refused(
            format!(
                "{} has some of the keys `{SPLIT_NO}`, `{SPLIT_COUNT}`, `{SPLIT_TENSORS}` but not \
                 all three",
                crate::messages::path(&file.path)
            ),
            "write the set again with gguf-split or tjoin split",
        )),
    }
}

/// The number of files of the set whose first file is `first`, from its `split.count`:
/// `None` for a file that has no `split.*` keys. Refuses a
/// file that is not the first of its set, or whose name says another count.
fn split_count(first: &GgufFile) -> Result<Option<u64>> {
    let Some((no, count, _)) = split_keys(first)? else {
        return Ok(None);
    };
    let name = crate::messages::path(&first.path);
    if no != 0 {
        let hint = match numbered(&first.path) {
            Some(_) => format!(
                "name the first file, {}",
                crate::messages::path(&sibling_path(&first.path, 0, count))
            ),
            None => "name the set's first file".to_string(),
        };
        return Err(refused(
            format!(
                "{name} is file {} of a GGUF set of {count} (`{SPLIT_NO}` = {no}), not the \
                 first",
                no + 1
            ),
            &hint,
        ));
    }
    if count == 0 {
        return Err(refused(
            format!("{name} says `{SPLIT_COUNT}` = 0"),
            "write the set again with gguf-split or tjoin split",
        ));
    }
    if let Some((_, named)) = numbered(&first.path)
        && named != count
    {
        return Err(Error::Inconsistent(vec![Refusal {
            headline: format!(
                "{name} is named as one of {named} files, but says `{SPLIT_COUNT}` = {count}"
            ),
            details: Vec::new(),
            hint: Some("rename the files as their keys say, or write the set again".to_string()),
        }]));
    }
    Ok(Some(count))
}

/// The place and count a gguf-split name gives (`model-00002-of-00003.gguf`: 1 and 3).
pub fn numbered(path: &Path) -> Option<(u64, u64)> {
    let name = path.file_name()?.to_str()?;
    let stem = name
        .strip_suffix(".gguf")
        .or_else(|| name.strip_suffix(".GGUF"))?;
    let (rest, count) = stem.rsplit_once("-of-")?;
    let (_, no) = rest.rsplit_once('-')?;
    let digits = |s: &str| s.len() >= 5 && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(no) || !digits(count) {
        return None;
    }
    let (no, count): (u64, u64) = (no.parse().ok()?, count.parse().ok()?);
    (no >= 1 && no <= count).then_some((no - 1, count))
}

/// The path of file `no` (from 0) of `count` in the set whose first file is `first`, as
/// gguf-split names it; refuses a first file not named so.
fn sibling(first: &Path, no: u64, count: u64) -> Result<PathBuf> {
    if numbered(first).is_none() {
        return Err(refused(
            format!(
                "{} is the first file of a GGUF set of {count}, but its name is not \
                 gguf-split's (NAME-00001-of-{count:05}.gguf), so tjoin cannot tell the others'",
                crate::messages::path(first)
            ),
            "name every file of the set in order",
        ));
    }
    let path = sibling_path(first, no, count);
    if !path.exists() {
        return Err(refused(
            format!(
                "file {} of the GGUF set, {}, is missing",
                no + 1,
                crate::messages::path(&path)
            ),
            "put every file of the set beside the first (a download may be incomplete)",
        ));
    }
    Ok(path)
}

/// `first`'s stem with gguf-split's numbering for file `no` (from 0) of `count`.
fn sibling_path(first: &Path, no: u64, count: u64) -> PathBuf {
    let name = first.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let stem = name
        .rsplit_once("-of-")
        .and_then(|(rest, _)| rest.rsplit_once('-'))
        .map_or(name, |(stem, _)| stem);
    first.with_file_name(split_name(stem, no, count))
}

/// gguf-split's name of file `no` (from 0) of `count`: `STEM-00001-of-00003.gguf`.
pub fn split_name(stem: &str, no: u64, count: u64) -> String {
    format!("{stem}-{:05}-of-{count:05}.gguf", no + 1)
}
