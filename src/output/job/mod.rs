//! A job: one output written by N workers, on one machine or many sharing a file system
//! (`--workers N --begin`, `--worker I/N`, `--workers N --commit`, `--workers N --abandon`;
//! the flow is `src/flow/join/workers/`). This module owns the files a job keeps beside its
//! output, and what each step may do to them.
//!
//! # The files
//! In the output's folder (a file's folder, or a sharded output's own folder):
//! - the **manifest**, `.{NAME}.tjoin-job` (`NAME` the output file's name; in a sharded
//!   output's folder, `.tjoin-job`): JSON ([`Manifest`]) saying the job's token, its worker
//!   count, the plan's digest, every input file's version (inode, length, change time), the
//!   output's files and their lengths, and each worker's share of their bytes;
//! - a **data file** per output file, `.{FILE}.tjoin-job-{TOKEN}`, created by `--begin` at
//!   its final length (sparse), which each worker writes its share of in place, and which
//!   `--commit` renames over the target;
//! - a **record** per finished worker, `{MANIFEST}.done-{I}` ([`Done`]), written whole
//!   under another name and renamed into place, so that it exists only once its share is
//!   on the disk.
//!
//! # What an attacker's manifest can do
//! The manifest and the records are data whoever can write to the folder controls. They are
//! read with a limit, parsed strictly (unknown fields refused), and checked against the plan
//! every step makes again from the inputs' headers: the digest, the worker count, the files'
//! names and lengths. Paths are never taken from them: every path is made here from the
//! output's name, and the token, which goes into names, must be 16 hexadecimal digits. A
//! file is written only when it is a regular file with one link, of the length the plan
//! says, opened without following a link; it is never created over an existing file or
//! truncated. `--abandon` removes only files named as a job names them, in the folder
//! itself, that `lstat` finds regular: a file tjoin did not create is never removed on a
//! manifest's word.
//!
//! # An object store
//! A job whose output is in S3 keeps the same manifest in the bucket
//! (`KEY.tjoin-job/manifest.json`, [`s3`]), with [`Manifest::upload`]: the multipart
//! upload's id, its part size, and the part numbers of each worker's share (shares are cut
//! at part boundaries, each worker uploading its own parts, the commit completing the upload
//! with every part's ETag the records list). A local manifest that has one is refused.

#[cfg(feature = "remote")]
pub mod s3;
mod window;

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use window::{Position, Window};

use crate::error::{Error, Result};
use crate::messages;

/// The version of the manifest's layout this build writes and reads.
pub const LAYOUT: u32 = 1;

/// The step of a job the command line asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// `--workers N --dry-run`: the plan, with each worker's share.
    Shares(u32),
    /// `--workers N --begin`: plan, and record the job beside the output.
    Begin(u32),
    /// `--worker I/N`: write share `I` of `N`.
    Worker(u32, u32),
    /// `--workers N --commit`: check that every worker finished, and publish the output.
    Commit(u32),
    /// `--workers N --abandon`: remove the job's files; the output stays as it was.
    Abandon(u32),
}

impl Step {
    /// The job's worker count.
    pub fn workers(self) -> u32 {
        match self {
            Step::Shares(n) | Step::Begin(n) | Step::Commit(n) | Step::Abandon(n) => n,
            Step::Worker(_, n) => n,
        }
    }
}

/// What `--begin` records beside the output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// The layout of this record ([`LAYOUT`]).
    pub tjoin_job: u32,
    /// The version of tjoin that began the job: every step must run the same.
    pub tjoin: String,
    /// 16 hexadecimal digits naming the job's data files.
    pub token: String,
    /// How many workers share the output.
    pub workers: u32,
    /// The digest of the plan, the output's layout and the shares.
    pub digest: String,
    /// Every file the inputs were read from, in order, as it was at `--begin`.
    pub inputs: Vec<Version>,
    /// The output's files, in the order of their bytes.
    pub files: Vec<JobFile>,
    /// Each worker's share: a range of the output's bytes, the files' bytes one after
    /// another.
    pub shares: Vec<[u64; 2]>,
    /// An object store's multipart upload (issue 44); `None` for a local output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upload: Option<Upload>,
}

/// What a job records of one input file, to tell whether it is still the same.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Version {
    /// The path as the step that began the job was given it, for messages only.
    pub path: String,
    /// The inode (0 where the system has none to tell).
    pub inode: u64,
    /// The length in bytes.
    pub len: u64,
    /// The change time (Unix) in seconds and nanoseconds.
    pub changed: (i64, u32),
    /// An object's entity tag (an ETag), for an input in an object store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
}

impl Version {
    /// Whether it is the same file, unchanged: all but the path, which may differ between
    /// machines and working folders.
    pub fn same(&self, other: &Version) -> bool {
        let of = |v: &Version| (v.inode, v.len, v.changed, v.tag.clone());
        of(self) == of(other)
    }
}

/// One file of the output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobFile {
    /// Its name in the output's folder.
    pub name: String,
    /// Its length in bytes.
    pub len: u64,
    /// The job's folder it is in ([`Paths::folders`]): 0, the manifest's, but for the files
    /// of a split's sharded outputs, each in its own folder.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub folder: u32,
}

/// Whether a folder's number is the first's, which the manifest does not write.
fn is_zero(folder: &u32) -> bool {
    *folder == 0
}

/// The multipart uploads of a job whose output is in a bucket: one per output file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Upload {
    /// The output's address, as `-o` names it (an object, a sharded set's index or prefix).
    pub url: String,
    /// Each output file's upload, in the order of [`Manifest::files`].
    pub files: Vec<FileUpload>,
    /// For each worker, its first part and how many parts it uploads, the parts of every
    /// file counted one after another.
    pub parts: Vec<[u32; 2]>,
    /// The part size `--part-size` gave `--begin`, which cut every file's parts by it
    /// (`None`: each file's least that fits, 5 MiB for most); the later steps cut by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part_size: Option<u64>,
}

/// The multipart upload of one output file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileUpload {
    /// The upload's id, as the store gave it.
    pub upload_id: String,
    /// The size of every part but the last.
    pub part_size: u64,
}

/// What a worker records once its share is on the disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Done {
    /// The layout of this record ([`LAYOUT`]).
    pub tjoin_job: u32,
    /// The job's token.
    pub token: String,
    /// The plan's digest.
    pub digest: String,
    /// The worker.
    pub worker: u32,
    /// Its share, as the manifest gives it.
    pub share: [u64; 2],
    /// In a job whose output is an object: the ETag of each part it uploaded, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub etags: Vec<String>,
}

impl Done {
    /// The record of `worker` finishing its share of the job `manifest`, having uploaded the
    /// parts `etags` names (none for a local output).
    pub fn of(manifest: &Manifest, worker: u32, etags: Vec<String>) -> Done {
        Done {
            tjoin_job: LAYOUT,
            token: manifest.token.clone(),
            digest: manifest.digest.clone(),
            worker,
            share: manifest.shares[worker as usize],
            etags,
        }
    }
}

use crate::limits::{JOB_MANIFEST as MANIFEST_LIMIT, JOB_RECORD as DONE_LIMIT};

/// Where a job's files are, made from the output's path alone.
#[derive(Debug, Clone)]
pub struct Paths {
    /// The folder the output's files and the job's files are in.
    pub folder: PathBuf,
    /// Every folder the job's data files are in, each beside the output files it becomes:
    /// `folder` first, then (a split's sharded outputs) each other output's folder. Made
    /// from the command line, never from the manifest, which only numbers them.
    pub folders: Vec<PathBuf>,
    /// The manifest.
    pub manifest: PathBuf,
    /// The output as the user named it, for messages.
    pub output: PathBuf,
}

impl Paths {
    /// The job of the output `output`: a file (`sharded: false`), or a sharded output whose
    /// folder is `folder`.
    pub fn of(output: &Path, sharded_folder: Option<&Path>) -> Paths {
        let (folder, manifest) = match sharded_folder {
            Some(folder) => (folder.to_path_buf(), folder.join(".tjoin-job")),
            None => {
                let folder = crate::sys::folder_of(output).to_path_buf();
                let mut name = std::ffi::OsString::from(".");
                name.push(output.file_name().unwrap_or_default());
                name.push(".tjoin-job");
                let manifest = folder.join(name);
                (folder, manifest)
            }
        };
        Paths {
            folders: vec![folder.clone()],
            folder,
            manifest,
            output: output.to_path_buf(),
        }
    }

    /// The same job, its data files also in `more` folders (each counted once, in order).
    pub fn with_folders(mut self, more: impl IntoIterator<Item = PathBuf>) -> Paths {
        for folder in more {
            if !self.folders.contains(&folder) {
                self.folders.push(folder);
            }
        }
        self
    }

    /// A file named `name` of the job in its folder: the manifest's staged name.
    fn data(&self, name: &str, token: &str) -> PathBuf {
        self.folder.join(format!(".{name}.tjoin-job-{token}"))
    }

    /// The data file of the output file `file`, in the folder the manifest numbers (which
    /// [`read`] checked is one of [`Paths::folders`]).
    pub fn data_of(&self, file: &JobFile, token: &str) -> PathBuf {
        let folder = self.folders.get(file.folder as usize);
        let folder = folder.unwrap_or(&self.folder);
        folder.join(format!(".{}.tjoin-job-{token}", file.name))
    }

    /// Worker `worker`'s record.
    pub fn done(&self, worker: u32) -> PathBuf {
        let mut name = self.manifest.as_os_str().to_owned();
        name.push(format!(".done-{worker}"));
        PathBuf::from(name)
    }

    /// The manifest, as messages show it.
    fn shown(&self) -> String {
        messages::path(&self.manifest)
    }
}

/// A new token: 16 hexadecimal digits that differ between jobs.
pub fn new_token() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let here = &nanos as *const u128 as usize;
    let seed = format!("{nanos}.{}.{here}", std::process::id());
    format!("{:016x}", digest(seed.as_bytes()) as u64)
}

/// A 128-bit FNV-1a digest of `bytes`: the plan's, compared between the steps of a job. It
/// tells a different plan from the same one; a manifest that lies about it is refused by the
/// other checks (the files' lengths, the inputs' versions) or writes the same bytes.
pub fn digest(bytes: &[u8]) -> u128 {
    const OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
    digest_more(OFFSET, bytes)
}

/// The digest of what `hash` digested followed by `bytes`.
pub fn digest_more(hash: u128, bytes: &[u8]) -> u128 {
    const PRIME: u128 = 0x0000000001000000000000000000013b;
    bytes
        .iter()
        .fold(hash, |hash, &b| (hash ^ u128::from(b)).wrapping_mul(PRIME))
}

/// Whether `token` is one a job makes: 16 lowercase hexadecimal digits.
fn valid_token(token: &str) -> bool {
    token.len() == 16
        && token
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Whether `name` is a plain file name (no folder, not `.` or `..`, no NUL).
fn plain_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains(['/', '\\', '\0'])
        && name.len() <= 200
}

/// The manifest beside the output, if there is one; refuses one that is not a manifest
/// this build writes.
pub fn read(paths: &Paths) -> Result<Option<Manifest>> {
    match fs::symlink_metadata(&paths.manifest) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("read the job's manifest", &paths.manifest, e)),
        Ok(m) if !m.file_type().is_file() => {
            return Err(refused_manifest(paths, "it is not a regular file"));
        }
        Ok(_) => {}
    }
    let bytes = crate::sys::read_whole(
        &paths.manifest,
        &MANIFEST_LIMIT,
        crate::sys::Accept::Regular,
    )
    .map_err(|e| Error::io("read the job's manifest", &paths.manifest, e))?;
    let manifest = parse(&bytes).map_err(|why| refused_manifest(paths, &why))?;
    if let Some(why) = unknown_folder(paths, &manifest) {
        return Err(refused_manifest(paths, &why));
    }
    if manifest.upload.is_some() {
        let why = "it records an object store's upload, where the output is a local file";
        return Err(refused_manifest(paths, why));
    }
    Ok(Some(manifest))
}

/// What is wrong when `manifest` numbers a folder the job's outputs are not in.
fn unknown_folder(paths: &Paths, manifest: &Manifest) -> Option<String> {
    let known = paths.folders.len();
    let file = manifest.files.iter().find(|f| f.folder as usize >= known)?;
    Some(format!(
        "it puts {} in folder {} of the job, whose outputs are in {known}",
        messages::name(&file.name),
        file.folder
    ))
}

/// A manifest's bytes, parsed strictly and checked: what is wrong with them otherwise.
fn parse(bytes: &[u8]) -> std::result::Result<Manifest, String> {
    let manifest: Manifest =
        serde_json::from_slice(bytes).map_err(|e| format!("it is not a job's manifest ({e})"))?;
    let files_ok = !manifest.files.is_empty() && manifest.files.iter().all(|f| plain_name(&f.name));
    let why = if manifest.tjoin_job != LAYOUT {
        Some(format!(
            "its layout is {}, where this tjoin reads {LAYOUT}",
            manifest.tjoin_job
        ))
    } else if manifest.tjoin != env!("CARGO_PKG_VERSION") {
        Some(format!(
            "tjoin {} began it, and this is tjoin {}: every step of a job runs the same version",
            messages::name(&manifest.tjoin),
            env!("CARGO_PKG_VERSION")
        ))
    } else if !valid_token(&manifest.token) {
        Some("its token is not 16 hexadecimal digits".to_string())
    } else if !files_ok {
        Some("it names an output file that is not a plain file name".to_string())
    } else if manifest.shares.len() != manifest.workers as usize {
        Some("its shares are not one per worker".to_string())
    } else {
        None
    };
    match why {
        Some(why) => Err(why),
        None => Ok(manifest),
    }
}

/// The refusal of a manifest that is not one this build wrote, and what to do.
fn refused_manifest(paths: &Paths, why: &str) -> Error {
    refused_manifest_at(&paths.shown(), &messages::path(&paths.output), why)
}

/// The same, of the manifest shown as `manifest` of the output shown as `output`.
fn refused_manifest_at(manifest: &str, output: &str, why: &str) -> Error {
    Error::refused(
        format!("the job's manifest {manifest} cannot be used: {why}"),
        format!(
            "if no job is running for {output}, abandon it (the same command with --workers N \
             --abandon) and begin again"
        ),
    )
}

/// Records the job `manifest` beside the output and creates its data files at their
/// lengths; refuses when a job is recorded there already (also one begun at the same moment
/// elsewhere: the manifest appears by one hard link, which only one can make).
pub fn begin(paths: &Paths, manifest: &Manifest) -> Result<()> {
    if let Some(existing) = read(paths)? {
        return Err(already_begun(paths, existing.workers));
    }
    if let Some(why) = unknown_folder(paths, manifest) {
        let why = io::Error::other(why);
        return Err(Error::io("write the job's manifest", &paths.manifest, why));
    }
    let mut created = Created(Vec::new());
    for file in &manifest.files {
        let path = paths.data_of(file, &manifest.token);
        let data = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| Error::io("create the job's data file", &path, e))?;
        created.0.push(path.clone());
        data.set_len(file.len)
            .map_err(|e| Error::io("size the job's data file", &path, e))?;
    }
    let text = serde_json::to_vec_pretty(manifest).map_err(io::Error::other);
    let text = text.map_err(|e| Error::io("write the job's manifest", &paths.manifest, e))?;
    let staged = paths.data("tjoin-job", &manifest.token);
    write_new(&staged, &text).map_err(|e| Error::io("write the job's manifest", &staged, e))?;
    created.0.push(staged.clone());
    match fs::hard_link(&staged, &paths.manifest) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            return Err(already_begun(paths, manifest.workers));
        }
        Err(e) => return Err(Error::io("write the job's manifest", &paths.manifest, e)),
        Ok(()) => {}
    }
    let _ = fs::remove_file(&staged);
    created.0.clear();
    Ok(())
}

/// Files a step created, removed again unless it succeeds.
struct Created(Vec<PathBuf>);

impl Drop for Created {
    fn drop(&mut self) {
        for path in &self.0 {
            let _ = fs::remove_file(path);
        }
    }
}

/// Writes `bytes` to a new file at `path` (never over one) and flushes it to the disk.
fn write_new(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = OpenOptions::new().write(true).create_new(true).open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// The refusal of a second `--begin`.
fn already_begun(paths: &Paths, workers: u32) -> Error {
    Error::refused(
        format!(
            "a job of {workers} workers is already recorded for {} ({})",
            messages::path(&paths.output),
            paths.shown()
        ),
        "run its workers and commit it (--workers N --commit), or abandon it (--workers N \
         --abandon) before beginning another",
    )
}

/// The refusal of a worker or a commit with no job recorded.
pub fn not_begun(paths: &Paths) -> Error {
    Error::refused(
        format!(
            "no job is recorded for {} (there is no {})",
            messages::path(&paths.output),
            paths.shown()
        ),
        "begin it first with the same command and --workers N --begin; a job that was \
         committed or abandoned is over",
    )
}

/// Opens the data file of output file `index` to write a share of it: refuses anything but
/// a regular file of one link and of the length the manifest says, and never follows a
/// link.
pub fn open_data(paths: &Paths, manifest: &Manifest, index: usize) -> Result<File> {
    let file = &manifest.files[index];
    let path = paths.data_of(file, &manifest.token);
    if let Ok(metadata) = fs::symlink_metadata(&path)
        && !metadata.file_type().is_file()
    {
        return Err(not_the_jobs(
            &path,
            &format!("it is {}", crate::sys::kind_of(&metadata)),
        ));
    }
    let mut options = OpenOptions::new();
    options.read(true).write(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut options,
        libc::O_NOFOLLOW | libc::O_NONBLOCK,
    );
    let opened = options.open(&path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => Error::refused(
            format!("the job's data file {} is missing", messages::path(&path)),
            "the job was abandoned or committed meanwhile, or the file was removed: abandon \
             the job and begin it again",
        ),
        _ => Error::io("open the job's data file", &path, e),
    })?;
    check_data(&path, &opened, file.len)?;
    Ok(opened)
}

/// Refuses a data file that is not a regular file of one link and `len` bytes.
fn check_data(path: &Path, file: &File, len: u64) -> Result<()> {
    let metadata = file
        .metadata()
        .map_err(|e| Error::io("open the job's data file", path, e))?;
    #[cfg(unix)]
    let links = std::os::unix::fs::MetadataExt::nlink(&metadata);
    #[cfg(not(unix))]
    let links = 1;
    let why = if !metadata.is_file() {
        Some(format!("it is {}", crate::sys::kind_of(&metadata)))
    } else if links != 1 {
        Some(format!(
            "it has {links} names, where a job's data file has one"
        ))
    } else if metadata.len() != len {
        Some(format!(
            "it is {} bytes long, where the job planned {len}",
            metadata.len()
        ))
    } else {
        None
    };
    match why {
        None => Ok(()),
        Some(why) => Err(not_the_jobs(path, &why)),
    }
}

/// The refusal of a data file that is not the one the job made.
fn not_the_jobs(path: &Path, why: &str) -> Error {
    Error::refused(
        format!(
            "the job's data file {} is not the one the job made: {why}",
            messages::path(path)
        ),
        "abandon the job (--workers N --abandon) and begin it again",
    )
}

/// Records that `done.worker` finished: written whole under a new name, flushed, then
/// renamed over any record of an earlier run of the same worker.
pub fn record_done(paths: &Paths, done: &Done) -> Result<()> {
    let path = paths.done(done.worker);
    let text = serde_json::to_vec(done).map_err(io::Error::other);
    let text = text.map_err(|e| Error::io("record the worker's finish in", &path, e))?;
    let mut staged = path.as_os_str().to_owned();
    staged.push(format!(".{}.{}", std::process::id(), new_token()));
    let staged = PathBuf::from(staged);
    let created = Created(vec![staged.clone()]);
    write_new(&staged, &text).map_err(|e| Error::io("record the worker's finish in", &path, e))?;
    fs::rename(&staged, &path).map_err(|e| Error::io("record the worker's finish in", &path, e))?;
    std::mem::forget(created);
    Ok(())
}

/// The workers of `manifest` that have no record of finishing its job (a record of another
/// job, or another share, counts as none).
pub fn unfinished(paths: &Paths, manifest: &Manifest) -> Result<Vec<u32>> {
    let mut missing = Vec::new();
    for worker in 0..manifest.workers {
        let path = paths.done(worker);
        let bytes = match crate::sys::read_whole(&path, &DONE_LIMIT, crate::sys::Accept::Regular) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                missing.push(worker);
                continue;
            }
            Err(e) => return Err(Error::io("read the worker's record", &path, e)),
        };
        let done: Option<Done> = serde_json::from_slice(&bytes).ok();
        if done != Some(Done::of(manifest, worker, Vec::new())) {
            missing.push(worker);
        }
    }
    Ok(missing)
}

/// The refusal of a commit while `missing` workers have not finished.
pub fn refuse_unfinished(paths: &Paths, manifest: &Manifest, missing: &[u32]) -> Error {
    refuse_unfinished_of(
        &messages::path(&paths.output),
        manifest,
        missing,
        "beside the output",
    )
}

/// The refusal of a commit of the output shown as `output` while `missing` workers have not
/// finished, whose records are `beside`.
fn refuse_unfinished_of(output: &str, manifest: &Manifest, missing: &[u32], beside: &str) -> Error {
    let n = manifest.workers;
    let listed: Vec<String> = missing.iter().map(|w| format!("{w}/{n}")).collect();
    let run = match missing {
        [one] => format!("--worker {one}/{n}"),
        _ => format!("--worker I/{n} for each"),
    };
    Error::refused(
        format!(
            "cannot commit {output}: {} of the {n} workers {} not finished: {} (no record of {} \
             {beside}); nothing was written",
            missing.len(),
            if missing.len() == 1 { "has" } else { "have" },
            crate::error::capped(listed, 20).join(", "),
            if missing.len() == 1 { "it" } else { "them" },
        ),
        format!("run {run} with the same command (a worker run again is safe), then commit again"),
    )
}

/// Removes the job's own files once the output is committed: the manifest first (the job is
/// over), then the records and data files it names.
pub fn finish(paths: &Paths, manifest: &Manifest) -> Result<()> {
    fs::remove_file(&paths.manifest)
        .map_err(|e| Error::io("remove the job's manifest", &paths.manifest, e))?;
    for worker in 0..manifest.workers {
        remove_own(&paths.done(worker))?;
    }
    for file in &manifest.files {
        remove_own(&paths.data_of(file, &manifest.token))?;
    }
    remove_staged_records(paths, manifest.workers)?;
    Ok(())
}

/// Removes the records a worker killed between writing and renaming one left under their
/// staged names (`{RECORD}.{PID}.{TOKEN}`, [`record_done`]), of workers `0..workers`; says
/// which. Only names made so, of regular files in the job's folder.
fn remove_staged_records(paths: &Paths, workers: u32) -> Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    let Ok(entries) = fs::read_dir(&paths.folder) else {
        return Ok(removed);
    };
    let records: Vec<String> = (0..workers)
        .filter_map(|w| Some(paths.done(w).file_name()?.to_str()?.to_string()))
        .collect();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let staged = records.iter().any(|record| {
            let rest = name
                .strip_prefix(record.as_str())
                .and_then(|r| r.strip_prefix('.'));
            let parts = rest.and_then(|r| r.split_once('.'));
            parts.is_some_and(|(pid, token)| {
                !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()) && valid_token(token)
            })
        });
        if staged && remove_own(&entry.path())? {
            removed.push(entry.path());
        }
    }
    Ok(removed)
}

/// What `--abandon` removed.
pub struct Abandoned {
    /// The files removed.
    pub removed: Vec<PathBuf>,
}

/// Abandons the job beside the output: removes its data files, its records and its
/// manifest, each only when it is a regular file named as a job names them in the folder.
/// `workers` must be the job's count. Refuses when there is no job.
pub fn abandon(paths: &Paths, workers: u32) -> Result<Abandoned> {
    let manifest = match read(paths) {
        Ok(manifest) => manifest.ok_or_else(|| not_begun(paths))?,
        // One this build cannot read names no data file it can trust: the manifest and the
        // records, whose names are made from the output's, go; data files stay.
        Err(Error::Refused(_)) => return abandon_unread(paths, workers),
        Err(other) => return Err(other),
    };
    check_count(&messages::path(&paths.output), &manifest, workers)?;
    let mut removed = Vec::new();
    for file in &manifest.files {
        let path = paths.data_of(file, &manifest.token);
        if remove_own(&path)? {
            removed.push(path);
        }
    }
    for worker in 0..manifest.workers {
        let path = paths.done(worker);
        if remove_own(&path)? {
            removed.push(path);
        }
    }
    removed.extend(remove_staged_records(paths, manifest.workers)?);
    remove_own(&paths.manifest)?;
    removed.push(paths.manifest.clone());
    Ok(Abandoned { removed })
}

/// Refuses to abandon the job `manifest` of the output shown as `output` by a count of
/// `workers` other than its own.
fn check_count(output: &str, manifest: &Manifest, workers: u32) -> Result<()> {
    if manifest.workers == workers {
        return Ok(());
    }
    Err(Error::refused(
        format!(
            "the job recorded for {output} has {} workers, not {workers}",
            manifest.workers
        ),
        format!("abandon it with --workers {}", manifest.workers),
    ))
}

/// Abandons a job whose manifest cannot be read: removes the manifest and the records of
/// workers `0..workers`, which are named from the output's name alone.
fn abandon_unread(paths: &Paths, workers: u32) -> Result<Abandoned> {
    let mut removed = Vec::new();
    for worker in 0..workers {
        let path = paths.done(worker);
        if remove_own(&path)? {
            removed.push(path);
        }
    }
    if remove_own(&paths.manifest)? {
        removed.push(paths.manifest.clone());
    }
    Ok(Abandoned { removed })
}

/// Removes `path` when `lstat` finds a regular file there (a link, a folder or anything
/// else is left alone); says whether it did.
fn remove_own(path: &Path) -> Result<bool> {
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::io("remove the job's file", path, e)),
        Ok(m) if !m.file_type().is_file() => Ok(false),
        Ok(_) => match fs::remove_file(path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                Err(Error::io("remove the job's file", path, e))
            }
            _ => Ok(true),
        },
    }
}

#[cfg(test)]
mod tests;
