//! An output made of several files (a sharded checkpoint's shards and its index), written
//! under temporary names and committed together: all of them or none.
//!
//! # The contract
//!
//! - **Before the commit**, a failure or an interrupt leaves nothing new. Each member is
//!   written to a new file in its own target's folder: on Linux an unnamed one (`O_TMPFILE`),
//!   which the kernel removes however the process ends, linked under a temporary name at the
//!   commit's first step; elsewhere, or where the file system refuses unnamed files, a
//!   temporary file (`.{name}.{pid}.XXXXXX.tjoin-partial`), removed when the set is dropped
//!   and, should SIGINT, SIGTERM, SIGHUP or SIGXFSZ (or a SIGBUS from a shrinking input) end
//!   the process, by the signal handler; a later run removes one left by a killed process.
//! - **A failure during the commit** leaves the previous files byte for byte, including a
//!   new set that reuses an old set's names: every file that the commit replaces or removes
//!   is first kept under a backup name (`.{name}.XXXXXX.tjoin-backup`, a hard link, or a
//!   copy where hard links fail), and on failure the commit rolls back: each backup is
//!   renamed back over its target and each new file placed where none was is removed.
//! - **A success** leaves exactly the new set: every member at its target, every file named
//!   by [`OutputSet::remove_at_commit`] gone, and no temporary or backup file.
//! - **No-clobber** ([`OutputSet::new`]`(true)`): a member whose target exists is refused
//!   when it is added, before anything is written, and again at the commit, before anything
//!   changes; a target that appears between that check and the member's rename is not
//!   replaced either (the rename refuses, and the commit rolls back).
//!
//! # The order of the commit
//!
//! 1. Check every target again: none may be a directory and, with no-clobber, none may
//!    exist. A file to remove may not be a directory. Give every unnamed member a
//!    temporary name.
//! 2. Back up every existing target and every file to remove, except for the last change
//!    (nothing that follows it could fail and call for its backup). A lone member replacing
//!    a file is one rename, as it always was.
//! 3. Rename the members over their targets in the order they were added, then remove the
//!    files to remove in the order they were named. A caller adds an index file last, so
//!    that it appears only once every shard it lists is in place, and names the previous
//!    shards it no longer lists for removal, so that they go only once nothing lists them:
//!    a reader that opens the index at any moment finds its shards.
//! 4. Remove the backups.
//!
//! Steps 3 and 4 hold off the signal handler: a Ctrl-C during them takes effect once the
//! commit has finished or rolled back, never in between. Steps 1 and 2 change no target, so
//! a signal there removes the temporary files (backups included) at once.
//!
//! # What cannot be made atomic
//!
//! One rename replaces one file atomically; nothing makes several renames one. A SIGKILL,
//! a crash or a power loss during the commit skips the rollback, and what remains on disk
//! says how far it went: a `.NAME.XXXXXX.tjoin-backup` is the previous version of `NAME`,
//! a `.NAME.XXXXXX.tjoin-partial` a member not yet renamed into place.
//! - In steps 1 and 2, the previous set is intact: delete the backups and partial files.
//! - In step 3, the folder holds a mix of new and previous files. To go back to the
//!   previous set, rename each backup over its `NAME`, delete the partial files, then the
//!   files that the new set added (the previous index does not list them). To finish the
//!   new set instead, delete the backups and partial files and run tjoin again.
//! - In step 4, the new set is complete: delete the backups.
//!
//! When a rollback itself fails, the error message names what it could not undo; a backup
//! it could not rename back is kept, never removed. A backup that cannot be removed once the
//! new set is in place is left too, and the error says so. tjoin does not flush the files to
//! the disk before it renames them, so after a power loss a file renamed shortly before may
//! also be short or empty, as with any program that does not call `fsync`.
//!
//! A backup by copy (where the file system has no hard links) keeps the bytes and the
//! permissions, not the owner, the other hard links or the extended attributes; it also
//! takes as long to make as the file takes to copy.
//!
//! On Windows, the renames are the standard library's: `SetFileInformationByHandle` with
//! `FileRenameInfoEx` and POSIX semantics where the system and file system offer it (Windows
//! 10 1607 and later, NTFS), which replaces a file that others hold open with
//! `FILE_SHARE_DELETE`; elsewhere `MoveFileExW` with `MOVEFILE_REPLACE_EXISTING`, which
//! does not. Windows documents no promise that either is atomic. A rename refused because
//! the target is in use (another process holding it without `FILE_SHARE_DELETE`, or mapping
//! it: a running program reading the checkpoint, say; Wine refuses any open handle) is
//! tried again for 2 s; then the commit fails on it and rolls back, and the rollback can
//! meet the same refusal, which its message then lists with the backups it kept. A file to
//! remove that is in use fails the same way, without a second try. FAT and exFAT volumes have
//! no hard links, so every backup there is a copy.

use std::fs::{self, File};
use std::io::{self, ErrorKind};
use std::path::{Path, PathBuf};

use super::temporary::{self, Kind, Partial, Temporary};
use crate::error::{Error, Result};
use crate::format::Sink;

/// Several files written under temporary names, committed together by [`OutputSet::commit`];
/// dropping the set instead removes every temporary file.
pub struct OutputSet {
    members: Vec<Member>,
    removals: Vec<PathBuf>,
    no_clobber: bool,
    /// Whether a member's target may be a symbolic link, followed to the file it points to.
    follows_links: bool,
    /// The folders cleared of stale partial files already.
    cleaned: Vec<PathBuf>,
}

/// One file of a set, being written under a temporary name beside its target.
pub struct Member {
    /// The path the user named, for messages.
    target: PathBuf,
    /// The file the new version replaces: `target` with its symbolic links followed.
    destination: PathBuf,
    partial: Partial,
}

impl OutputSet {
    /// An empty set. With `no_clobber`, no member may replace an existing file.
    pub fn new(no_clobber: bool) -> OutputSet {
        OutputSet {
            members: Vec::new(),
            removals: Vec::new(),
            no_clobber,
            follows_links: true,
            cleaned: Vec::new(),
        }
    }

    /// The set, refusing a member's target that is a symbolic link (when added, and again at
    /// the commit): a sharded checkpoint's files are written in its folder, never through a
    /// link to a file elsewhere.
    pub fn without_links(mut self) -> OutputSet {
        self.follows_links = false;
        self
    }

    /// Adds a member that the commit renames to `target`, after the members added before it,
    /// and creates its temporary file, empty, in `target`'s folder; a symbolic link is
    /// followed, and the file it points to is replaced in its own folder (a set made
    /// [`OutputSet::without_links`] refuses it instead). The new file gets
    /// the mode (and, where this process may set them, the owner and group) of the file it
    /// replaces. Refuses a target that is a directory, is in a folder that does not exist,
    /// is already in the set, that the user could not write to (as `cp` refuses it) or,
    /// with no-clobber, exists.
    pub fn add(&mut self, target: &Path) -> Result<&mut Member> {
        if !self.follows_links {
            check_not_a_link(target)?;
        }
        let destination = follow_links(target).map_err(|e| write_failed(target, e))?;
        check_target(target, &destination, self.no_clobber)?;
        check_writable(target, &destination)?;
        let twice = if self.members.iter().any(|m| m.target == target) {
            Some("the output names it twice")
        } else if self.removals.iter().any(|r| r == target) {
            Some("the output both writes and removes it")
        } else {
            None
        };
        if let Some(why) = twice {
            return Err(refuse(target, ErrorKind::InvalidInput, why.to_string()));
        }
        let folder = crate::sys::folder_of(&destination);
        if !self.cleaned.iter().any(|f| f == folder) {
            temporary::remove_stale_partials(folder);
            self.cleaned.push(folder.to_path_buf());
        }
        let partial =
            Partial::new(&destination).map_err(|e| folder_refused(target, &destination, e))?;
        keep_mode_and_owner(&destination, partial.as_file())
            .map_err(|e| write_failed(target, e))?;
        self.members.push(Member {
            target: target.to_path_buf(),
            destination,
            partial,
        });
        Ok(self.members.last_mut().expect("just pushed"))
    }

    /// Names a file for the commit to remove once every member is in place (a sharded
    /// checkpoint's previous shard that the new index no longer lists); a rollback puts it
    /// back. A file that does not exist at the commit is left alone.
    pub fn remove_at_commit(&mut self, path: &Path) -> Result<()> {
        check_removal(path)?;
        if self.members.iter().any(|m| m.target == path) {
            let why = "the output both writes and removes it".to_string();
            return Err(refuse(path, ErrorKind::InvalidInput, why));
        }
        if !self.removals.iter().any(|r| r == path) {
            self.removals.push(path.to_path_buf());
        }
        Ok(())
    }

    /// The members, in the order they were added.
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// The members, to write to.
    pub fn members_mut(&mut self) -> &mut [Member] {
        &mut self.members
    }

    /// Puts every member in place and removes the files named for removal, in the order of
    /// the module's documentation; on failure, puts every previous file back as it was.
    pub fn commit(self) -> Result<()> {
        let OutputSet {
            members,
            removals,
            no_clobber,
            follows_links,
            ..
        } = self;
        for member in &members {
            if !follows_links {
                check_not_a_link(&member.target)?;
            }
            check_target(&member.target, &member.destination, no_clobber)?;
        }
        for path in &removals {
            check_removal(path)?;
        }
        let changes = members.len() + removals.len();
        let mut placed = Vec::with_capacity(members.len());
        for Member {
            target,
            destination,
            partial,
        } in members
        {
            let named = partial.into_named(&destination);
            let named = named.map_err(|e| write_failed(&target, e))?;
            placed.push((target, destination, Some(named)));
        }
        let removed = removals.into_iter().map(|path| (path.clone(), path, None));
        let mut steps = Vec::with_capacity(changes);
        for (at, (target, destination, partial)) in placed.into_iter().chain(removed).enumerate() {
            // Nothing after the last change can fail and call for its backup.
            let backup = if at + 1 < changes {
                back_up(&destination)?
            } else {
                None
            };
            steps.push(Step {
                name: target,
                target: destination,
                partial,
                backup,
            });
        }
        let _signals_wait = temporary::hold_signals();
        let mut done = Vec::with_capacity(changes);
        for step in steps {
            match step.apply(no_clobber) {
                Ok(step) => done.push(step),
                Err(error) => return Err(roll_back(done, error)),
            }
        }
        remove_backups(done)
    }
}

impl Member {
    /// The path it is committed to.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Makes `file`, complete, the new version the commit puts at the target, in place of
    /// the empty one the set created: a job's data file, which its workers wrote
    /// (`src/output/job/`). It is given its own name beside the target at the commit (on
    /// Linux through its descriptor, elsewhere now, by a hard link to `path`, where it is),
    /// so the data file's own name stays until the job removes it.
    pub fn adopt(&mut self, file: File, path: &Path) -> Result<()> {
        let failed = |e| Error::io("take the job's data file", path, e);
        keep_mode_and_owner(&self.destination, &file).map_err(failed)?;
        #[cfg(target_os = "linux")]
        {
            let _ = path;
            self.partial = Partial::Unnamed(file);
        }
        #[cfg(not(target_os = "linux"))]
        {
            drop(file);
            let linked = Temporary::create(&self.destination, Kind::Partial, |to| {
                fs::hard_link(path, to)?;
                fs::OpenOptions::new().read(true).write(true).open(to)
            });
            self.partial = Partial::Named(linked.map_err(failed)?);
        }
        Ok(())
    }

    /// Writes `bytes` at `offset`, over what is there (a header, once the sizes it gives are
    /// known).
    pub fn write_at(&self, offset: u64, bytes: &[u8]) -> io::Result<()> {
        crate::sys::write_all_at(self.partial.as_file(), bytes, offset)
    }
}

impl Sink for Member {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        io::Write::write_all(&mut self.partial.as_file(), bytes)
    }

    fn copy_from(&mut self, file: &File, offset: u64, len: u64) -> io::Result<u64> {
        crate::sys::copy_in_kernel(file, offset, len, self.partial.as_file())
    }

    fn name(&self) -> &Path {
        &self.target
    }
}

/// One change of the commit: a member to rename over its target (`partial`), or a file to
/// remove; and the target's previous version, if it has one that must be kept.
struct Step {
    /// The path the user named, for messages.
    name: PathBuf,
    target: PathBuf,
    partial: Option<Temporary<()>>,
    backup: Option<Temporary<()>>,
}

/// A change made, with what undoes it.
struct Done {
    target: PathBuf,
    /// Whether a new file now stands at the target.
    placed: bool,
    backup: Option<Temporary<()>>,
}

impl Step {
    /// Makes the change. On failure the target is as it was, and the temporary file and the
    /// backup are removed.
    fn apply(self, no_clobber: bool) -> Result<Done> {
        let Step {
            name,
            target,
            partial,
            backup,
        } = self;
        let placed = partial.is_some();
        match partial {
            Some(partial) => partial
                .rename_to(&target, no_clobber)
                .map_err(|(e, _)| Error::io("rename the finished output to", &name, e))?,
            None => match fs::remove_file(&target) {
                Err(e) if e.kind() != ErrorKind::NotFound => {
                    return Err(Error::io("remove the previous", &name, e));
                }
                _ => {}
            },
        }
        Ok(Done {
            target,
            placed,
            backup,
        })
    }
}

impl Done {
    /// Puts the previous version back; says what could not be undone.
    fn undo(self) -> Option<String> {
        let target = crate::messages::path(&self.target);
        match self.backup {
            Some(backup) => backup
                .rename_to(&self.target, false)
                .err()
                .map(|(e, backup)| {
                    let kept = backup.keep();
                    format!(
                        "{target} could not be put back ({e}); its previous version is kept as {}",
                        crate::messages::path(&kept)
                    )
                }),
            None if self.placed => fs::remove_file(&self.target)
                .err()
                .map(|e| format!("the new {target} could not be removed ({e})")),
            None => None,
        }
    }
}

/// Undoes `done`, last change first, after `error`; returns `error`, with what could not be
/// undone added to its message.
fn roll_back(done: Vec<Done>, error: Error) -> Error {
    let stuck: Vec<String> = done.into_iter().rev().filter_map(Done::undo).collect();
    if stuck.is_empty() {
        return error;
    }
    let note = format!("; then the rollback failed: {}", stuck.join("; "));
    match error {
        Error::Io {
            action,
            path,
            source,
        } => Error::io(
            action,
            &path,
            io::Error::new(source.kind(), format!("{source}{note}")),
        ),
        other => other,
    }
}

/// Removes the backups once every change is made; the new set stays in place even when one
/// cannot be removed, which the error then says.
fn remove_backups(done: Vec<Done>) -> Result<()> {
    let mut first_error = None;
    for Done { target, backup, .. } in done {
        let Some(backup) = backup else { continue };
        let path = backup.path().to_path_buf();
        if let Err(e) = backup.remove() {
            let why = format!(
                "{e}; the new files are in place, and the previous version is left as {}",
                crate::messages::path(&path)
            );
            let error = io::Error::new(e.kind(), why);
            first_error.get_or_insert(Error::io("remove the backup of", &target, error));
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// Keeps `target`'s current version, if it has one, under a backup name beside it: a hard
/// link, or a copy where hard links fail.
fn back_up(target: &Path) -> Result<Option<Temporary<()>>> {
    let failed = |e| Error::io("back up the previous", target, e);
    match target.symlink_metadata() {
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(failed(e)),
        Ok(_) => {}
    }
    let linked = Temporary::create(target, Kind::Backup, |backup| fs::hard_link(target, backup));
    let backup = match linked {
        Ok(link) => link,
        Err(_) => copy(target).map_err(failed)?,
    };
    Ok(Some(backup))
}

/// A copy of `target` under a backup name, with its permissions.
fn copy(target: &Path) -> io::Result<Temporary<()>> {
    // Created empty, and registered, before the copy: a signal during a long copy removes it.
    let backup = Temporary::new_file(target, Kind::Backup)?;
    let mut from = File::open(target)?;
    io::copy(&mut from, &mut backup.as_file())?;
    backup
        .as_file()
        .set_permissions(from.metadata()?.permissions())?;
    Ok(backup.closed())
}

/// Refuses a member's target that is a directory, is in a folder that does not exist or,
/// with `no_clobber`, exists; `target` is the path named, `destination` the file it leads to.
fn check_target(target: &Path, destination: &Path, no_clobber: bool) -> Result<()> {
    if destination.is_dir() {
        let why = "it is a directory; name a file inside it".to_string();
        return Err(refuse(target, ErrorKind::IsADirectory, why));
    }
    if no_clobber && target.symlink_metadata().is_ok() {
        let why = "it exists, and --no-clobber forbids replacing it".to_string();
        return Err(refuse(target, ErrorKind::AlreadyExists, why));
    }
    let folder = crate::sys::folder_of(destination);
    if !folder.is_dir() {
        let why = format!(
            "its folder {} does not exist",
            crate::messages::path(folder)
        );
        return Err(refuse(target, ErrorKind::NotFound, why));
    }
    Ok(())
}

/// `target` with its symbolic links followed, as `open` follows them, to the file they lead
/// to (which need not exist: a dangling link's file is created, as `numpy.save` creates it).
fn follow_links(target: &Path) -> io::Result<PathBuf> {
    // The limit Linux puts on a path's links (MAXSYMLINKS).
    const MOST_LINKS: usize = 40;
    let mut path = target.to_path_buf();
    for _ in 0..MOST_LINKS {
        match path.symlink_metadata() {
            Ok(metadata) if metadata.file_type().is_symlink() => {
                let points_to = fs::read_link(&path)?;
                path = crate::sys::folder_of(&path).join(points_to);
            }
            _ => return Ok(path),
        }
    }
    let why = "it is a loop of symbolic links (or a chain of more than 40)";
    Err(io::Error::other(why))
}

/// Refuses to replace an existing file the user could not write to, as `cp` refuses it (the
/// mode lacks the write bit for this user, who is not root, or the file system is read-only).
fn check_writable(target: &Path, destination: &Path) -> Result<()> {
    if !destination.is_file() {
        return Ok(());
    }
    crate::sys::may_write(destination).map_err(|e| not_writable(target, &e))
}

/// Why `target` cannot be replaced, given what the system said of writing to it: a file
/// system mounted read-only, which no change of the file's mode helps, or the file's mode.
fn not_writable(target: &Path, error: &io::Error) -> Error {
    if error.kind() == ErrorKind::ReadOnlyFilesystem {
        let why = "it is on a file system mounted read-only; name an output on another file \
                   system (or remount this one read-write)";
        return refuse(target, ErrorKind::ReadOnlyFilesystem, why.to_string());
    }
    let hint = "make it writable (chmod u+w) or name another output";
    let why = format!("it is read-only for this user; {hint}");
    refuse(target, ErrorKind::PermissionDenied, why)
}

/// The error for a temporary file that could not be made beside `destination`, with a hint
/// where the folder refused it.
fn folder_refused(target: &Path, destination: &Path, e: io::Error) -> Error {
    if e.kind() == ErrorKind::ReadOnlyFilesystem {
        return not_writable(target, &e);
    }
    if e.kind() != ErrorKind::PermissionDenied {
        return write_failed(target, e);
    }
    let why = format!(
        "{e}: its folder {} is not writable, and tjoin writes the new file there before it \
         renames it into place; make the folder writable or name an output elsewhere",
        crate::messages::path(crate::sys::folder_of(destination))
    );
    refuse(target, ErrorKind::PermissionDenied, why)
}

/// Gives `new`, the file that replaces `destination`, its mode and, where this process may,
/// its owner and group, as a file written over in place would keep them.
fn keep_mode_and_owner(destination: &Path, new: &File) -> io::Result<()> {
    let Ok(previous) = fs::metadata(destination) else {
        return Ok(());
    };
    if !previous.is_file() {
        return Ok(());
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        // Changing the owner clears the set-user-ID bits, so it comes before the mode. Only
        // root may give a file away: for anyone else the new file stays theirs.
        match std::os::unix::fs::fchown(new, Some(previous.uid()), Some(previous.gid())) {
            Err(e) if e.kind() != ErrorKind::PermissionDenied => return Err(e),
            _ => {}
        }
    }
    new.set_permissions(previous.permissions())
}

/// Refuses to remove anything but a regular file (a directory, a symbolic link, a device),
/// judged by `lstat`, never by what a link points to: the files tjoin removes are ones an
/// earlier run wrote. A path with nothing there passes: there is nothing to remove.
fn check_removal(path: &Path) -> Result<()> {
    let Ok(metadata) = path.symlink_metadata() else {
        return Ok(());
    };
    let kind = metadata.file_type();
    let (why, kind) = if kind.is_file() {
        return Ok(());
    } else if kind.is_dir() {
        ("it is a directory", ErrorKind::IsADirectory)
    } else if kind.is_symlink() {
        ("it is a symbolic link", ErrorKind::InvalidInput)
    } else {
        ("it is not a regular file", ErrorKind::InvalidInput)
    };
    let why = format!("{why}, and tjoin removes only regular files");
    Err(Error::io("remove", path, io::Error::new(kind, why)))
}

/// Refuses a member's target that is a symbolic link, naming where it points.
fn check_not_a_link(target: &Path) -> Result<()> {
    let is_link = target
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink());
    if !is_link {
        return Ok(());
    }
    let points_to = fs::read_link(target).map_or_else(
        |e| format!("somewhere it cannot tell ({e})"),
        |to| crate::messages::path(&to),
    );
    let why = format!(
        "it is a symbolic link to {points_to}, and the files of a set are written in its folder, \
         not through links; remove the link or write the set into another folder"
    );
    Err(refuse(target, ErrorKind::InvalidInput, why))
}

fn refuse(target: &Path, kind: ErrorKind, why: String) -> Error {
    write_failed(target, io::Error::new(kind, why))
}

fn write_failed(target: &Path, e: io::Error) -> Error {
    Error::io("write the output", target, e)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a file system mounted read-only, no chmod helps: the message says where the trouble
    /// is (a real read-only mount is not at hand in tests; the system's EROFS is).
    #[cfg(unix)]
    #[test]
    fn a_read_only_file_system_is_told_apart_from_a_read_only_file() {
        let target = Path::new("out.npy");
        let mounted = not_writable(target, &io::Error::from_raw_os_error(libc::EROFS));
        let mounted = mounted.to_string();
        assert!(
            mounted.starts_with("cannot write the output out.npy: "),
            "{mounted}"
        );
        assert!(
            mounted.contains("file system mounted read-only"),
            "{mounted}"
        );
        assert!(mounted.contains("another file system"), "{mounted}");
        assert!(!mounted.contains("chmod"), "{mounted}");
        let denied = not_writable(target, &io::Error::from_raw_os_error(libc::EACCES));
        let denied = denied.to_string();
        assert!(denied.contains("read-only for this user"), "{denied}");
        assert!(denied.contains("chmod u+w"), "{denied}");
        // A folder on such a file system, where the new file is made first, says so too.
        let folder = folder_refused(target, target, io::Error::from_raw_os_error(libc::EROFS));
        assert!(folder.to_string().contains("mounted read-only"), "{folder}");
    }

    /// The names in `dir`, sorted.
    fn listing(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// A folder holding a previous set: shards `a` and `old` in `shards/`, `c` and `index`
    /// beside it.
    fn previous_set() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("shards")).unwrap();
        for name in ["shards/a", "shards/old", "c", "index"] {
            fs::write(dir.path().join(name), format!("previous {name}")).unwrap();
        }
        dir
    }

    /// Asserts that `dir` holds the previous set, byte for byte, and nothing else.
    fn assert_previous_set(dir: &Path) {
        assert_eq!(listing(dir), ["c", "index", "shards"]);
        assert_eq!(listing(&dir.join("shards")), ["a", "old"]);
        for name in ["shards/a", "shards/old", "c", "index"] {
            let bytes = fs::read(dir.join(name)).unwrap();
            assert_eq!(bytes, format!("previous {name}").as_bytes(), "{name}");
        }
    }

    /// A new set over [`previous_set`]: shards `a` (replaced) and `b` (new), `c` (replaced),
    /// the index last (replaced), and `shards/old` to remove; every member written.
    fn new_set(dir: &Path) -> OutputSet {
        let mut set = OutputSet::new(false);
        for name in ["shards/a", "shards/b", "c", "index"] {
            let member = set.add(&dir.join(name)).unwrap();
            member.write_all(format!("new {name}").as_bytes()).unwrap();
        }
        set.remove_at_commit(&dir.join("shards/old")).unwrap();
        set.remove_at_commit(&dir.join("shards/never-was")).unwrap();
        set
    }

    #[test]
    fn a_commit_leaves_exactly_the_new_set() {
        let dir = previous_set();
        new_set(dir.path()).commit().unwrap();
        assert_eq!(listing(dir.path()), ["c", "index", "shards"]);
        assert_eq!(listing(&dir.path().join("shards")), ["a", "b"]);
        for name in ["shards/a", "shards/b", "c", "index"] {
            let bytes = fs::read(dir.path().join(name)).unwrap();
            assert_eq!(bytes, format!("new {name}").as_bytes(), "{name}");
        }
    }

    #[test]
    fn dropping_the_set_before_the_commit_leaves_nothing_new() {
        let dir = previous_set();
        let set = new_set(dir.path());
        drop(set);
        assert_previous_set(dir.path());
    }

    #[test]
    // It fails a rename by deleting a member's temporary file, which Windows refuses while
    // the file is open.
    #[cfg_attr(windows, ignore = "Windows cannot delete an open temporary file")]
    fn a_failure_in_the_middle_of_the_commit_puts_every_previous_file_back() {
        let dir = previous_set();
        let mut set = new_set(dir.path());
        // `shards/a` and `shards/b` are placed before `c`'s rename fails, for want of its
        // temporary file (a named one, which can be removed from outside).
        let c = Temporary::new_file(&dir.path().join("c"), Kind::Partial).unwrap();
        fs::remove_file(c.path()).unwrap();
        set.members[2].partial = Partial::Named(c);
        let error = set.commit().unwrap_err().to_string();
        let c = dir.path().join("c");
        let expected = format!("cannot rename the finished output to {}: ", c.display());
        assert!(error.starts_with(&expected), "{error}");
        assert!(!error.contains("tjoin-"), "{error}");
        assert_previous_set(dir.path());
    }

    #[test]
    fn a_target_that_became_a_directory_fails_the_commit_before_anything_changes() {
        let dir = previous_set();
        let set = new_set(dir.path());
        let c = dir.path().join("c");
        fs::remove_file(&c).unwrap();
        fs::create_dir(&c).unwrap();
        fs::write(c.join("inside"), "previous c/inside").unwrap();
        let error = set.commit().unwrap_err().to_string();
        assert!(error.contains("it is a directory"), "{error}");
        fs::remove_dir_all(&c).unwrap();
        fs::write(&c, "previous c").unwrap();
        assert_previous_set(dir.path());
    }

    #[test]
    fn a_rollback_puts_back_the_files_it_removed_and_replaced() {
        let dir = previous_set();
        let index = dir.path().join("index");
        let old = dir.path().join("shards/old");
        let mut set = OutputSet::new(false);
        set.add(&index).unwrap().write_all(b"new index").unwrap();
        let member = set.members.pop().unwrap();
        let partial = member.partial.into_named(&index).unwrap();
        let steps = [(index.clone(), Some(partial)), (old.clone(), None)];
        let done: Vec<Done> = steps
            .into_iter()
            .map(|(target, partial)| {
                let backup = back_up(&target).unwrap();
                let step = Step {
                    name: target.clone(),
                    target,
                    partial,
                    backup,
                };
                step.apply(false).unwrap()
            })
            .collect();
        assert_eq!(fs::read(&index).unwrap(), b"new index");
        assert!(!old.exists());
        let made_up = Error::io("commit", &index, io::Error::other("made up"));
        let error = roll_back(done, made_up).to_string();
        assert_eq!(error, format!("cannot commit {}: made up", index.display()));
        assert_previous_set(dir.path());
    }

    #[test]
    fn no_clobber_refuses_an_existing_target_when_added_and_at_commit() {
        let dir = previous_set();
        let mut set = OutputSet::new(true);
        let error = set
            .add(&dir.path().join("index"))
            .err()
            .unwrap()
            .to_string();
        assert!(
            error.contains("--no-clobber forbids replacing it"),
            "{error}"
        );
        set.add(&dir.path().join("shards/b")).unwrap();
        let late = dir.path().join("late");
        set.add(&late).unwrap();
        fs::write(&late, "someone else's").unwrap();
        let error = set.commit().unwrap_err().to_string();
        assert!(error.contains(&late.display().to_string()), "{error}");
        assert_eq!(fs::read(&late).unwrap(), b"someone else's");
        fs::remove_file(&late).unwrap();
        assert_previous_set(dir.path());
    }

    #[test]
    fn a_target_named_twice_or_both_written_and_removed_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let mut set = OutputSet::new(false);
        set.add(&a).unwrap();
        let twice = set.add(&a).err().unwrap().to_string();
        assert!(twice.ends_with("the output names it twice"), "{twice}");
        let both = set.remove_at_commit(&a).unwrap_err().to_string();
        assert!(
            both.ends_with("the output both writes and removes it"),
            "{both}"
        );
        let b = dir.path().join("b");
        set.remove_at_commit(&b).unwrap();
        let both = set.add(&b).err().unwrap().to_string();
        assert!(
            both.ends_with("the output both writes and removes it"),
            "{both}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_set_without_links_refuses_a_link_when_added_and_at_commit() {
        use std::os::unix::fs::symlink;
        let dir = previous_set();
        let outside = tempfile::tempdir().unwrap();
        let elsewhere = outside.path().join("elsewhere");
        fs::write(&elsewhere, "someone else's").unwrap();
        let link = dir.path().join("link");
        symlink(&elsewhere, &link).unwrap();
        let mut set = OutputSet::new(false).without_links();
        let error = set.add(&link).err().unwrap().to_string();
        let expected = format!("it is a symbolic link to {}", elsewhere.display());
        assert!(error.contains(&expected), "{error}");
        // A link that appears after the member was added is refused at the commit, before
        // anything changes.
        let late = dir.path().join("late");
        set.add(&dir.path().join("c")).unwrap();
        set.add(&late).unwrap().write_all(b"new late").unwrap();
        symlink(&elsewhere, &late).unwrap();
        let error = set.commit().unwrap_err().to_string();
        assert!(error.contains("is a symbolic link"), "{error}");
        assert_eq!(fs::read(&elsewhere).unwrap(), b"someone else's");
        fs::remove_file(&late).unwrap();
        fs::remove_file(&link).unwrap();
        assert_previous_set(dir.path());
        // Without the restriction, a link is followed, as a single-file output follows it.
        let mut set = OutputSet::new(false);
        symlink(&elsewhere, &link).unwrap();
        set.add(&link).unwrap().write_all(b"new").unwrap();
        set.commit().unwrap();
        assert_eq!(fs::read(&elsewhere).unwrap(), b"new");
    }

    #[cfg(unix)]
    #[test]
    fn only_regular_files_are_removed_and_a_link_is_judged_as_itself() {
        use std::os::unix::fs::symlink;
        let dir = previous_set();
        let outside = tempfile::tempdir().unwrap();
        let elsewhere = outside.path().join("elsewhere");
        fs::write(&elsewhere, "someone else's").unwrap();
        let link = dir.path().join("link");
        symlink(&elsewhere, &link).unwrap();
        let mut set = OutputSet::new(false);
        let error = set.remove_at_commit(&link).unwrap_err().to_string();
        assert!(error.contains("it is a symbolic link"), "{error}");
        let error = set.remove_at_commit(&dir.path().join("shards"));
        assert!(error.unwrap_err().to_string().contains("it is a directory"));
        // A file to remove that became a link by the commit fails it before anything changes.
        set.add(&dir.path().join("c"))
            .unwrap()
            .write_all(b"new c")
            .unwrap();
        set.remove_at_commit(&dir.path().join("shards/old"))
            .unwrap();
        fs::remove_file(dir.path().join("shards/old")).unwrap();
        symlink(&elsewhere, dir.path().join("shards/old")).unwrap();
        let error = set.commit().unwrap_err().to_string();
        assert!(error.contains("it is a symbolic link"), "{error}");
        assert_eq!(fs::read(&elsewhere).unwrap(), b"someone else's");
        assert!(
            fs::symlink_metadata(dir.path().join("shards/old"))
                .unwrap()
                .is_symlink()
        );
        assert_eq!(fs::read(dir.path().join("c")).unwrap(), b"previous c");
    }

    #[test]
    fn a_backup_by_copy_keeps_the_bytes_and_the_permissions() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("a");
        fs::write(&target, "previous a").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&target, fs::Permissions::from_mode(0o640)).unwrap();
        }
        let backup = copy(&target).unwrap();
        let name = backup.path().file_name().unwrap().to_string_lossy();
        assert!(
            name.starts_with(".a.") && name.ends_with(".tjoin-backup"),
            "{name}"
        );
        assert_eq!(fs::read(backup.path()).unwrap(), b"previous a");
        let (was, is) = (target.metadata(), backup.path().metadata());
        assert_eq!(was.unwrap().permissions(), is.unwrap().permissions());
        drop(backup);
        assert_eq!(listing(dir.path()), ["a"]);
    }
}
