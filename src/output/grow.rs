//! Growing a file in place (`--append`): its advisory lock, the journal that lets an
//! interrupted append be undone, the sink that writes past the old end, and the commit that
//! rewrites the header last. What to write is `src/flow/append.rs`'s business; how to write it so
//! that a crash leaves either the old file or the new one is this module's.
//!
//! # The contract
//!
//! 1. **One appender at a time.** The target is opened for writing and its advisory lock
//!    (`flock`, exclusive) taken without waiting; a second appender is refused with a message
//!    that names the file. Readers take no lock: the header, rewritten last, is what they go by.
//! 2. **The journal first.** `.NAME.tjoin-journal`, beside the target, is created (never
//!    over an existing one) and holds the target's identity (device and inode), its length
//!    before and after, and its header before and after. It is flushed (`fsync`), and so is
//!    its folder, before the target changes.
//! 3. **The data past the old end.** The new data is written after the last byte of the old
//!    data, then flushed (`fdatasync`). The old bytes, header included, are untouched.
//! 4. **The header last.** The header, of the same length (numpy's spare room on the growth
//!    axis), is rewritten in place and flushed: that is the commit. Signals wait while it is
//!    written.
//! 5. **The journal goes.** It is removed once the header is on the disk.
//!
//! A failure or an interrupt (SIGINT, SIGTERM, SIGHUP, or SIGBUS from an input that shrank)
//! before step 4 cuts the target back to its old length, flushes it and removes the journal:
//! the file is byte for byte what it was. A SIGKILL or a power loss skips that; the target
//! then holds extra bytes after the end its (old) header declares, and the journal says what
//! it was. tjoin's readers refuse such a file, and `tjoin --recover FILE` undoes the append
//! (or, when the new header had reached the disk, keeps it and removes the journal).
//!
//! A concurrent reader sees the old header and the old data, which never move, or the new
//! header, written only once the new data was flushed: the old shape or the new one, never
//! a header that promises bytes not yet written.

use std::fs::{self, File, OpenOptions};
use std::io::{self, ErrorKind, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::temporary::{self, CutBackOnSignals, Registered};
use crate::error::{Error, Result};
use crate::format::Sink;
use crate::messages;
use crate::sys;

/// The file an append grows, opened for writing, its advisory lock held until it is dropped.
pub struct Target {
    file: Arc<File>,
    path: PathBuf,
    id: (u64, u64),
    /// The user who owns it (Unix).
    #[cfg(unix)]
    owner: u32,
}

impl Target {
    /// Opens `path` for reading and writing and takes its lock, for `what` (`append to`,
    /// `recover`); refuses when another process holds it.
    pub fn lock(path: &Path, what: &str) -> Result<Target> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| Error::io(what, path, e))?;
        let metadata = file.metadata().map_err(|e| Error::io(what, path, e))?;
        if !metadata.is_file() {
            let why = io::Error::other("it is not a regular file");
            return Err(Error::io(what, path, why));
        }
        let locked = sys::try_lock_exclusive(&file).map_err(|e| Error::io("lock", path, e))?;
        if !locked {
            return Err(Error::Unfinished {
                what: format!(
                    "cannot {what} {}: another process holds its lock, as an append to it does \
                     while it runs",
                    crate::messages::path(path)
                ),
                hint: "run again once that append has finished (tjoin takes the lock with \
                       flock; `fuser` or `lsof` names the process)"
                    .to_string(),
            });
        }
        let id = sys::file_id(&file).map_err(|e| Error::io(what, path, e))?;
        Ok(Target {
            file: Arc::new(file),
            path: path.to_path_buf(),
            id,
            #[cfg(unix)]
            owner: std::os::unix::fs::MetadataExt::uid(&metadata),
        })
    }

    /// The path it was opened by.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open file.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Its length now.
    pub fn length(&self) -> Result<u64> {
        let metadata = self.file.metadata();
        Ok(metadata
            .map_err(|e| Error::io("read the length of", &self.path, e))?
            .len())
    }

    /// Whether the path still names the file that was opened and locked.
    pub fn is_at_path(&self) -> bool {
        sys::path_id(&self.path) == Some(self.id)
    }

    /// Where its journal is: `.NAME.tjoin-journal` beside it.
    pub fn journal_path(&self) -> PathBuf {
        journal_path(&self.path)
    }

    /// The journal an append to this file left, if there is one; `Err` when it cannot be
    /// read, or is not one tjoin could have written for this file (see [`read_journal`]). A
    /// journal of another file of the same name (the target was since replaced) is
    /// [`Journaled::Stale`]; one whose writing stopped part way, [`Journaled::CutShort`].
    pub fn journal(&self) -> Result<Journaled> {
        let path = self.journal_path();
        let Some(bytes) = self.read_journal(&path)? else {
            return Ok(Journaled::None);
        };
        let text = String::from_utf8_lossy(&bytes);
        match Journal::parse(&text) {
            Some(journal) if journal.id == self.id => Ok(Journaled::Found(journal)),
            Some(_) => Ok(Journaled::Stale),
            None if Journal::is_cut_short(&text) => Ok(Journaled::CutShort),
            None => Err(self.not_its_journal(
                &path,
                "it does not hold what tjoin writes in a journal".to_string(),
            )),
        }
    }

    /// The journal at `path`, read whole; `None` when there is none. Refused, before it is
    /// read: anything but a regular file (it is opened without following a symbolic link,
    /// and without waiting, so that a FIFO cannot hang tjoin), a file owned by someone other
    /// than the target's owner, the user running tjoin or root (on Unix; only they can have
    /// written it for this file), and a file longer than [`JOURNAL_LIMIT`].
    fn read_journal(&self, path: &Path) -> Result<Option<Vec<u8>>> {
        let file = match open_journal(path) {
            Ok(file) => file,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            #[cfg(unix)]
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                let why = "it is a symbolic link, and tjoin writes its journal as a regular file";
                return Err(self.not_its_journal(path, why.to_string()));
            }
            Err(e) => return Err(Error::io("read the append journal", path, e)),
        };
        let failed = |e| Error::io("read the append journal", path, e);
        let metadata = file.metadata().map_err(failed)?;
        if !metadata.is_file() {
            let why = format!(
                "it is {}, and tjoin writes its journal as a regular file",
                file_kind(&metadata)
            );
            return Err(self.not_its_journal(path, why));
        }
        #[cfg(unix)]
        {
            let owner = std::os::unix::fs::MetadataExt::uid(&metadata);
            let user = sys::effective_user();
            if ![self.owner, user, 0].contains(&owner) {
                let why = format!(
                    "it belongs to user {owner}, but {} belongs to user {} and tjoin runs as \
                     user {user}: an append by either would have written it as its own",
                    messages::path(&self.path),
                    self.owner
                );
                return Err(self.not_its_journal(path, why));
            }
        }
        let too_long = |len: u64| {
            let why = format!(
                "it is {len} bytes long, more than the {JOURNAL_LIMIT} bytes (5 MiB) a journal \
                 is read up to (tjoin's journals hold two headers of at most 1 MiB, in hex)"
            );
            self.not_its_journal(path, why)
        };
        if metadata.len() > JOURNAL_LIMIT {
            return Err(too_long(metadata.len()));
        }
        let mut bytes = Vec::new();
        (&file)
            .take(JOURNAL_LIMIT + 1)
            .read_to_end(&mut bytes)
            .map_err(failed)?;
        if bytes.len() as u64 > JOURNAL_LIMIT {
            return Err(too_long(bytes.len() as u64));
        }
        Ok(Some(bytes))
    }

    /// The refusal of the file at `journal`, beside this target, as its append journal:
    /// `why` says what disagrees. Nothing was changed.
    pub fn not_its_journal(&self, journal: &Path, why: String) -> Error {
        let target = messages::path(&self.path);
        Error::Unfinished {
            what: format!(
                "{} is not a journal tjoin can act on for {target}: {why}; nothing was changed",
                messages::path(journal)
            ),
            hint: format!(
                "if no append of yours to {target} was interrupted, remove it; without a \
                 journal, `tjoin --recover {target}` cuts the file back to the end of the data \
                 its header declares"
            ),
        }
    }

    /// Cuts the file back to `len` bytes, first writing `header` at its start if given, and
    /// flushes it: what `--recover` does.
    pub fn repair(&self, len: u64, header: Option<&[u8]>) -> Result<()> {
        let failed = |e| Error::io("repair", &self.path, e);
        if let Some(header) = header {
            sys::write_all_at(&self.file, header, 0).map_err(failed)?;
        }
        self.file.set_len(len).map_err(failed)?;
        self.file.sync_data().map_err(failed)
    }

    /// Removes the journal beside the file, if there is one, and flushes the folder.
    pub fn remove_journal(&self) -> Result<()> {
        let path = self.journal_path();
        match fs::remove_file(&path) {
            Ok(()) => sync_folder(&path).map_err(|e| Error::io("flush the folder of", &path, e)),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io("remove the append journal", &path, e)),
        }
    }

    /// Starts growing the file from `journal.old_len` to `journal.new_len` bytes: writes and
    /// flushes the journal, arms the undo on signals, and places the cursor at the old end.
    /// The caller checked that the file is `old_len` bytes long and starts with `old_header`.
    pub fn grow(self, old_header: Vec<u8>, new_header: Vec<u8>, new_len: u64) -> Result<Growth> {
        let old_len = self.length()?;
        let journal = Journal {
            id: self.id,
            old_len,
            new_len,
            old_header,
            new_header,
        };
        let journal_path = self.journal_path();
        // Registered before it exists, so that no signal finds it unregistered.
        let registered = temporary::remove_on_signals(&journal_path);
        write_journal(&journal_path, &journal)?;
        let cut_back = CutBackOnSignals::new(&self.file, old_len);
        let growth = Growth {
            target: self,
            journal,
            journal_path,
            _registered: registered,
            cut_back: Some(cut_back),
            written: 0,
            header_written: false,
            done: false,
        };
        let at = (&*growth.target.file).seek(SeekFrom::Start(old_len));
        if let Err(e) = at {
            let error = Error::io("write to", &growth.target.path, e);
            return Err(growth.abandon(error));
        }
        Ok(growth)
    }
}

/// What is beside a target.
pub enum Journaled {
    /// No journal.
    None,
    /// The journal of an append to this very file.
    Found(Journal),
    /// The journal of an append to an earlier file of the same name.
    Stale,
    /// A journal whose writing stopped part way (an empty one included): the append that
    /// was writing it was killed before it changed its target.
    CutShort,
}

/// What an append writes down before it changes its target: enough to undo it, or to tell
/// that it completed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Journal {
    /// The target's device and inode.
    pub id: (u64, u64),
    /// Its length before the append.
    pub old_len: u64,
    /// Its length after it.
    pub new_len: u64,
    /// Its header before the append.
    pub old_header: Vec<u8>,
    /// Its header after it (the same length).
    pub new_header: Vec<u8>,
}

/// The first line of a journal: what it is, and the version of its form.
const JOURNAL_TITLE: &str = "tjoin append journal 1";

/// The keys of a journal's lines after its title, in order.
const JOURNAL_KEYS: [&str; 6] = [
    "device",
    "inode",
    "old length",
    "new length",
    "old header",
    "new header",
];

/// The most bytes of a journal tjoin reads (5 MiB): a journal holds two headers of the same
/// length in hex, and tjoin reads no .npy header longer than 1 MiB (and its preamble), so the
/// journal of any append it could have made fits.
pub const JOURNAL_LIMIT: u64 = crate::limits::JOURNAL.bytes;

impl Journal {
    /// The journal as text: a title line, then `key: value` lines; the headers in hex.
    fn to_text(&self) -> String {
        format!(
            "{JOURNAL_TITLE}\ndevice: {}\ninode: {}\nold length: {}\nnew length: {}\n\
             old header: {}\nnew header: {}\n",
            self.id.0,
            self.id.1,
            self.old_len,
            self.new_len,
            hex(&self.old_header),
            hex(&self.new_header)
        )
    }

    /// Reads [`Journal::to_text`]'s form back; `None` for anything else.
    fn parse(text: &str) -> Option<Journal> {
        let mut lines = text.lines();
        if lines.next()? != JOURNAL_TITLE {
            return None;
        }
        let mut value = |key: &str| lines.next()?.strip_prefix(key)?.strip_prefix(": ");
        let number = |text: Option<&str>| text?.parse::<u64>().ok();
        let journal = Journal {
            id: (number(value("device"))?, number(value("inode"))?),
            old_len: number(value("old length"))?,
            new_len: number(value("new length"))?,
            old_header: unhex(value("old header")?)?,
            new_header: unhex(value("new header")?)?,
        };
        (journal.old_header.len() == journal.new_header.len()).then_some(journal)
    }

    /// Whether `text` is the start of what [`Journal::to_text`] writes, cut short: empty, or
    /// its lines so far as they are written, the last one perhaps incomplete. What a kill
    /// while the journal was being written leaves.
    fn is_cut_short(text: &str) -> bool {
        let mut lines: Vec<&str> = text.split('\n').collect();
        // `split` yields at least one piece: the text after the last newline, unfinished.
        let last = lines.pop().unwrap_or_default();
        lines.len() <= JOURNAL_KEYS.len()
            && lines
                .iter()
                .enumerate()
                .all(|(at, line)| fits_line(at, line, true))
            && fits_line(lines.len(), last, false)
    }
}

/// Whether `line` is line `at` of a journal's text (`complete`), or the start of one.
fn fits_line(at: usize, line: &str, complete: bool) -> bool {
    let Some(key) = at.checked_sub(1).map(|k| JOURNAL_KEYS.get(k)) else {
        return if complete {
            line == JOURNAL_TITLE
        } else {
            JOURNAL_TITLE.starts_with(line)
        };
    };
    let Some(key) = key else {
        return !complete && line.is_empty();
    };
    let lead = format!("{key}: ");
    let Some(value) = line.strip_prefix(&lead) else {
        return !complete && lead.starts_with(line);
    };
    let digits = |c: char| {
        if at <= 4 {
            c.is_ascii_digit()
        } else {
            c.is_ascii_hexdigit()
        }
    };
    (!complete || !value.is_empty()) && value.chars().all(digits)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(text.get(at..at + 2)?, 16).ok())
        .collect()
}

/// `.NAME.tjoin-journal` beside `target`.
pub fn journal_path(target: &Path) -> PathBuf {
    let mut name = std::ffi::OsString::from(".");
    name.push(target.file_name().unwrap_or_default());
    name.push(".tjoin-journal");
    crate::sys::folder_of(target).join(name)
}

/// Creates the journal (never over one that exists: an earlier append's is the caller's to
/// refuse) and flushes it and its folder.
fn write_journal(path: &Path, journal: &Journal) -> Result<()> {
    let failed = |e| Error::io("write the append journal", path, e);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(failed)?;
    let written = file
        .write_all(journal.to_text().as_bytes())
        .and_then(|()| file.sync_all())
        .and_then(|()| sync_folder(path));
    if let Err(e) = written {
        let _ = fs::remove_file(path);
        return Err(failed(e));
    }
    Ok(())
}

/// Flushes the folder `path` is in, so that a file created or removed there stays so after
/// a power loss.
fn sync_folder(path: &Path) -> io::Result<()> {
    #[cfg(unix)]
    return File::open(crate::sys::folder_of(path))?.sync_all();
    #[cfg(not(unix))]
    {
        let _ = path;
        Ok(())
    }
}

/// Opens the journal at `path` for reading: not through a symbolic link (Unix: `ELOOP`;
/// Windows: the link itself is opened, and its metadata says so), and without waiting for a
/// writer should it be a FIFO.
fn open_journal(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut options,
        libc::O_NONBLOCK | libc::O_NOFOLLOW,
    );
    #[cfg(windows)]
    std::os::windows::fs::OpenOptionsExt::custom_flags(
        &mut options,
        sys::windows::FILE_FLAG_OPEN_REPARSE_POINT | sys::windows::FILE_FLAG_BACKUP_SEMANTICS,
    );
    options.open(path)
}

/// What kind of file that is not a regular one `metadata` describes.
fn file_kind(metadata: &fs::Metadata) -> &'static str {
    let kind = metadata.file_type();
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_socket() {
            return "a socket";
        }
        if kind.is_block_device() || kind.is_char_device() {
            return "a device";
        }
    }
    if kind.is_symlink() {
        "a symbolic link"
    } else if kind.is_dir() {
        "a folder"
    } else {
        "not a regular file"
    }
}

/// A file being grown: written through as a [`Sink`] after its old end, then committed by
/// rewriting its header. Dropped without a commit, it is cut back to its old length.
pub struct Growth {
    target: Target,
    journal: Journal,
    journal_path: PathBuf,
    _registered: Registered,
    cut_back: Option<CutBackOnSignals>,
    written: u64,
    header_written: bool,
    done: bool,
}

impl Growth {
    /// Commits the append: checks that exactly the planned bytes were written, flushes them,
    /// rewrites the header and flushes it, then removes the journal. Any failure before the
    /// header is on the disk undoes the append.
    pub fn commit(mut self) -> Result<()> {
        let path = self.target.path.clone();
        let end = self.journal.old_len + self.written;
        if end != self.journal.new_len {
            let why = format!(
                "{} bytes were written where {} were planned",
                self.written,
                self.journal.new_len - self.journal.old_len
            );
            return Err(self.abandon(Error::io("append to", &path, io::Error::other(why))));
        }
        if let Err(e) = self.target.file.sync_data() {
            return Err(self.abandon(Error::io("flush the appended data of", &path, e)));
        }
        {
            // A signal now waits for the header: the append either commits or is undone.
            let _hold = temporary::hold_signals();
            self.header_written = true;
            let file = &self.target.file;
            let header = sys::write_all_at(file, &self.journal.new_header, 0)
                .and_then(|()| file.sync_data());
            if let Err(e) = header {
                return Err(self.abandon(Error::io("write the new header of", &path, e)));
            }
            self.done = true;
            self.cut_back = None;
        }
        fs::remove_file(&self.journal_path)
            .and_then(|()| sync_folder(&self.journal_path))
            .map_err(|e| Error::Unfinished {
                what: format!(
                    "the append to {} is complete, but its journal {} could not be removed: {e}",
                    crate::messages::path(&path),
                    crate::messages::path(&self.journal_path)
                ),
                hint: format!(
                    "`tjoin --recover {}` removes it (the next append refuses to start while it \
                     is there)",
                    crate::messages::path(&path)
                ),
            })
    }

    /// Undoes the append after `error`: the old header back if the new one was being
    /// written, the file cut back to its old length and flushed, the journal removed. Should
    /// that fail too, the error says so and the journal stays for `--recover`.
    pub fn abandon(mut self, error: Error) -> Error {
        match self.roll_back() {
            Ok(()) => error,
            Err(e) => Error::Unfinished {
                what: format!(
                    "{error}; undoing the append failed too ({e}), so {} may hold extra bytes \
                     after its data",
                    crate::messages::path(&self.target.path)
                ),
                hint: format!(
                    "`tjoin --recover {}` cuts it back, as its journal says",
                    crate::messages::path(&self.target.path)
                ),
            },
        }
    }

    fn roll_back(&mut self) -> io::Result<()> {
        if self.done {
            return Ok(());
        }
        let file = &self.target.file;
        if self.header_written {
            sys::write_all_at(file, &self.journal.old_header, 0)?;
        }
        file.set_len(self.journal.old_len)?;
        file.sync_data()?;
        self.done = true;
        self.cut_back = None;
        match fs::remove_file(&self.journal_path) {
            Err(e) if e.kind() != ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

impl Drop for Growth {
    /// A panic, or an early return without `commit` or `abandon`: undo what can be undone.
    fn drop(&mut self) {
        let _ = self.roll_back();
    }
}

/// The most one write holds off a signal's undo: a kernel copy goes in pieces of this size.
const WRITE_PIECE: u64 = 64 << 20;

impl Growth {
    /// Runs `write` on the target, so that a signal's undo waits for it to end (once the
    /// append is undone or committed, there is nothing to wait for).
    fn write<T>(&self, write: impl FnOnce(&File) -> T) -> T {
        match &self.cut_back {
            Some(cut_back) => cut_back.write(|| write(&self.target.file)),
            None => write(&self.target.file),
        }
    }
}

impl Sink for Growth {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.write(|mut file| file.write_all(bytes))?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    fn copy_from(&mut self, file: &File, offset: u64, len: u64) -> io::Result<u64> {
        let mut copied = 0;
        while copied < len {
            let piece = (len - copied).min(WRITE_PIECE);
            let done = self.write(|to| sys::copy_in_kernel(file, offset + copied, piece, to))?;
            self.written += done;
            copied += done;
            if done < piece {
                break;
            }
        }
        Ok(copied)
    }

    fn name(&self) -> &Path {
        &self.target.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn journal() -> Journal {
        Journal {
            id: (2049, 123456),
            old_len: 192,
            new_len: 256,
            old_header: b"\x93NUMPY\x01\x00old\n".to_vec(),
            new_header: b"\x93NUMPY\x01\x00new\n".to_vec(),
        }
    }

    #[test]
    fn a_journal_reads_back_and_nothing_else_reads_as_one() {
        let written = journal();
        assert_eq!(Journal::parse(&written.to_text()), Some(written.clone()));
        let text = written.to_text();
        assert_eq!(
            Journal::parse(&text.replace("journal 1", "journal 2")),
            None
        );
        assert_eq!(Journal::parse(&text.replace("192", "x")), None);
        assert_eq!(Journal::parse(&text[..text.len() - 4]), None);
        assert_eq!(Journal::parse(""), None);
    }

    /// What an append killed while writing its journal leaves (every start of the text, the
    /// empty one included) reads as cut short; a whole journal, or anything else, does not.
    #[test]
    fn a_journal_cut_short_is_told_from_anything_else() {
        let text = journal().to_text();
        for end in 0..text.len() {
            assert!(Journal::is_cut_short(&text[..end]), "{:?}", &text[..end]);
        }
        assert!(!Journal::is_cut_short(&text));
        for other in [
            "x",
            "tjoin append journal 2\n",
            "tjoin append journal 1\ninode: 1",
            "tjoin append journal 1\ndevice: 12x",
            "tjoin append journal 1\ndevice: \n",
            &text.replace("old header: ", "old header: zz"),
            &format!("{text}more"),
        ] {
            assert!(!Journal::is_cut_short(other), "{other:?}");
        }
    }

    /// The journal of an append to a file with the longest header tjoin reads (1 MiB and a
    /// 12-byte preamble) is within the limit a journal is read up to.
    #[test]
    fn the_largest_journal_fits_within_the_limit() {
        let header = vec![b' '; (1 << 20) + 12];
        let largest = Journal {
            id: (u64::MAX, u64::MAX),
            old_len: u64::MAX,
            new_len: u64::MAX,
            old_header: header.clone(),
            new_header: header,
        };
        assert!(largest.to_text().len() as u64 <= JOURNAL_LIMIT);
    }

    #[test]
    fn the_journal_sits_beside_its_target() {
        assert_eq!(
            journal_path(Path::new("data/train.npy")),
            Path::new("data/.train.npy.tjoin-journal")
        );
        assert_eq!(
            journal_path(Path::new("train.npy")),
            Path::new("./.train.npy.tjoin-journal")
        );
    }

    /// `t.npy` in `dir`, locked and growing by 8 bytes, its header to become `HEADER`.
    fn growing(dir: &Path) -> (PathBuf, Growth) {
        let path = dir.join("t.npy");
        fs::write(&path, b"header\nold data").unwrap();
        let target = Target::lock(&path, "append to").unwrap();
        // A second lock on the same file is refused while the first is held.
        assert!(Target::lock(&path, "append to").is_err());
        let growth = target
            .grow(b"header\n".to_vec(), b"HEADER\n".to_vec(), 23)
            .unwrap();
        assert!(journal_path(&path).exists());
        (path, growth)
    }

    #[test]
    fn a_growth_dropped_before_its_commit_leaves_the_file_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let (path, mut growth) = growing(dir.path());
        growth.write_all(b"new data").unwrap();
        drop(growth);
        assert_eq!(fs::read(&path).unwrap(), b"header\nold data");
        assert!(!journal_path(&path).exists());
    }

    #[test]
    fn a_commit_writes_the_header_last_and_removes_the_journal() {
        let dir = tempfile::tempdir().unwrap();
        let (path, mut growth) = growing(dir.path());
        growth.write_all(b"new ").unwrap();
        growth.write_all(b"data").unwrap();
        growth.commit().unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"HEADER\nold datanew data");
        assert!(!journal_path(&path).exists());
    }

    #[test]
    fn a_commit_of_the_wrong_number_of_bytes_is_undone() {
        let dir = tempfile::tempdir().unwrap();
        let (path, mut growth) = growing(dir.path());
        growth.write_all(b"new").unwrap();
        let error = growth.commit().unwrap_err().to_string();
        assert!(error.contains("3 bytes were written where 8"), "{error}");
        assert_eq!(fs::read(&path).unwrap(), b"header\nold data");
    }
}
