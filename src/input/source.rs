//! The seam every input's bytes come through, in the spirit of the object_store crate's
//! `ObjectStore`: a [`Source`] says what is at a [`Location`] (its [`Head`]: length, version,
//! kind), reads a range of it, and lists a prefix (a folder). The [`Version`] is what "the
//! input changed while tjoin read it" compares: a file's identity and change time locally,
//! an ETag remotely.
//!
//! Local files are the first source ([`LocalFiles`]); standard input and other pipes are
//! read once, front to back, into an unnamed temporary file (`src/input/stream.rs`), and
//! JSON text is converted into the spill (`src/sys/spill.rs`): both are then local files.
//! The engine maps local files where they lie; a source without local files is read by
//! range, in bounded buffers ([`Source::read_at`]).
//!
//! A new source (S3, GCS, Azure, HTTP) is one file that implements [`Source`] (blocking: a
//! source that is async inside runs its own runtime) and one line in `sources::SCHEMES`
//! (`src/input/sources.rs`), which is where a location's source is found.

use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::num::NonZeroU32;
#[cfg(not(unix))]
use std::time::SystemTime;

use crate::location::Location;
use crate::sys;

/// Where inputs are read from: one per scheme, shared by every input of the run.
pub trait Source: Send + Sync {
    /// What is at `location` now: its length, version and kind. A location that does not
    /// exist is an error of kind `NotFound`.
    fn head(&self, location: &Location) -> io::Result<Head>;

    /// Fills `buf` with the bytes at `offset` of the object at `location`, which must still
    /// be `version` (locally: the same file, unchanged; remotely: `If-Match` its ETag). A
    /// read past the end, or of an object that changed, fails.
    fn read_at(
        &self,
        location: &Location,
        version: &Version,
        offset: u64,
        buf: &mut [u8],
    ) -> io::Result<()>;

    /// What is directly inside `prefix` (a folder's entries, the objects under a prefix
    /// up to the next `/`), in no particular order.
    fn list(&self, prefix: &Location) -> io::Result<Vec<Entry>>;

    /// Copies the object at `location`, as `head` (its head) describes it, into `to` (an
    /// empty file), every read pinned to its version: for the readers of a file rather than
    /// bytes. By [`Source::read_at`] in pieces of 8 MiB, one after another; a source with a
    /// faster way (several reads in flight) says so here.
    fn download(&self, location: &Location, head: &Head, to: &File) -> io::Result<()> {
        const PIECE: u64 = 8 << 20;
        let mut buf = vec![0; PIECE.min(head.len) as usize];
        let mut at = 0;
        while at < head.len {
            let piece = &mut buf[..PIECE.min(head.len - at) as usize];
            self.read_at(location, &head.version, at, piece)?;
            sys::write_all_at(to, piece, at)?;
            at += piece.len() as u64;
        }
        Ok(())
    }

    /// Whether its objects are local files, which the engine maps where they lie; `false`
    /// for a source whose bytes arrive by range ([`Source::read_at`]).
    fn is_local(&self) -> bool {
        false
    }
}

/// What is at a location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// Its length in bytes (0 for a folder or a stream).
    pub len: u64,
    /// Its version, compared again before the output is committed.
    pub version: Version,
    /// What it is.
    pub kind: Kind,
}

/// What a location holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file, or an object: bytes that can be read by range.
    Object,
    /// A folder, or a prefix that has objects under it: listed, not read.
    Folder,
    /// A pipe or a device: read once, front to back.
    Stream,
    /// Anything else (a socket), named as a message says it.
    Other(&'static str),
}

/// One entry of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its name inside the prefix (a file name, a key's last part).
    pub name: OsString,
    /// Whether it is an object (a regular file, after symlinks), not a folder.
    pub is_object: bool,
}

/// What an input was when it was read, to tell whether it changed since.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Version {
    /// A local file's identity, length and change time.
    Local(Stamp),
    /// An object's entity tag (an ETag, or a generation), as its store gives it.
    Tag(Box<str>),
}

/// A file's identity (device and inode), length, and change time (ctime) on Unix, its
/// modification time elsewhere. A program that rewrites a file can set its modification time
/// back (`touch -r`, `cp -p`, `rsync`); the change time it cannot: the kernel sets it to the
/// present on every write and on every change of the times themselves, so that it alone
/// tells every change the modification time would. What this does not see: a change made
/// and undone with the times set back by someone who can set the clock, and (on Windows,
/// where the standard library offers no change time) a rewrite of the same length whose
/// modification time is set back. One time, not both: a join of 100,000 inputs keeps a
/// stamp of each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    id: (u64, u64),
    pub(super) len: u64,
    /// The change time (Unix) or modification time (elsewhere), in seconds since the epoch
    /// and nanoseconds plus one (never zero: the niche lets a [`Version`] be no larger than
    /// a stamp); `(0, 1)` where the system tells none.
    changed: (i64, NonZeroU32),
}

impl Stamp {
    /// The stamp of an open file.
    pub fn of(file: &File) -> io::Result<Stamp> {
        Ok(Stamp::from(&file.metadata()?))
    }

    /// What a job's manifest records of it (`src/output/job/`): the inode, the length and
    /// the change time in seconds and nanoseconds, without the device, whose number differs
    /// between the machines that mount one shared file system.
    pub fn version(&self) -> (u64, u64, (i64, u32)) {
        (
            self.id.1,
            self.len,
            (self.changed.0, self.changed.1.get() - 1),
        )
    }
}

impl From<&std::fs::Metadata> for Stamp {
    fn from(metadata: &std::fs::Metadata) -> Stamp {
        #[cfg(unix)]
        let (id, (seconds, nanos)) = {
            use std::os::unix::fs::MetadataExt;
            let changed = (metadata.ctime(), metadata.ctime_nsec() as u32);
            ((metadata.dev(), metadata.ino()), changed)
        };
        // Windows' file index and change time are not in stable Rust; length and
        // modification time still tell most changes.
        #[cfg(not(unix))]
        let (id, (seconds, nanos)) = ((0, 0), metadata.modified().map_or((0, 0), since_epoch));
        Stamp {
            id,
            len: metadata.len(),
            changed: (seconds, NonZeroU32::MIN.saturating_add(nanos)),
        }
    }
}

/// A time as seconds (negative before the epoch) and nanoseconds since the epoch.
#[cfg(not(unix))]
fn since_epoch(time: SystemTime) -> (i64, u32) {
    match time.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(after) => (after.as_secs() as i64, after.subsec_nanos()),
        Err(before) => {
            let before = before.duration();
            (-(before.as_secs() as i64), before.subsec_nanos())
        }
    }
}

/// The local file system: paths, folders, and the pipes and devices a path may name.
pub struct LocalFiles;

impl LocalFiles {
    /// The head of what `metadata` describes.
    pub fn head_of(metadata: &std::fs::Metadata) -> Head {
        let kind = if metadata.is_file() {
            Kind::Object
        } else if metadata.is_dir() {
            Kind::Folder
        } else if sys::is_stream(metadata) {
            Kind::Stream
        } else {
            Kind::Other(sys::kind_of(metadata))
        };
        let len = if kind == Kind::Object {
            metadata.len()
        } else {
            0
        };
        Head {
            len,
            version: Version::Local(Stamp::from(metadata)),
            kind,
        }
    }

    /// Opens the file at `location` without waiting for a writer; `None` when it is no
    /// longer `version`.
    pub fn reopen(location: &Location, version: &Version) -> io::Result<Option<File>> {
        // Without waiting: a FIFO put in the file's place is told apart by its stamp.
        let (file, metadata) = sys::open_without_waiting(location.as_path())?;
        let same = Version::Local(Stamp::from(&metadata)) == *version;
        Ok(same.then_some(file))
    }
}

impl Source for LocalFiles {
    fn head(&self, location: &Location) -> io::Result<Head> {
        std::fs::metadata(location.as_path()).map(|m| LocalFiles::head_of(&m))
    }

    fn read_at(
        &self,
        location: &Location,
        version: &Version,
        offset: u64,
        buf: &mut [u8],
    ) -> io::Result<()> {
        let file = LocalFiles::reopen(location, version)?.ok_or_else(changed)?;
        sys::read_exact_at(&file, buf, offset)
    }

    fn list(&self, prefix: &Location) -> io::Result<Vec<Entry>> {
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(prefix.as_path())? {
            let entry = entry?;
            // After symlinks, as opening it will be.
            let is_object = entry.path().is_file();
            entries.push(Entry {
                name: entry.file_name(),
                is_object,
            });
        }
        Ok(entries)
    }

    fn is_local(&self) -> bool {
        true
    }
}

/// Why a read of an input that changed since its header was read fails.
pub fn changed() -> io::Error {
    io::Error::other(
        "it changed while tjoin was reading it; no output was written, run again once \
         nothing else writes to it",
    )
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn a_version_is_no_larger_than_the_stamp_it_holds() {
        assert_eq!(std::mem::size_of::<Version>(), std::mem::size_of::<Stamp>());
        let etag = |tag: &str| Version::Tag(tag.into());
        assert_ne!(etag("\"a1\""), etag("\"a2\""));
    }

    #[test]
    fn the_local_source_heads_reads_and_lists_a_folder() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.npy");
        std::fs::write(&file, b"0123456789").unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let folder = Location::new(dir.path());
        let source: &dyn Source = &LocalFiles;
        assert!(source.is_local());
        assert_eq!(source.head(&folder).unwrap().kind, Kind::Folder);
        let at = folder.child("a.npy");
        let head = source.head(&at).unwrap();
        assert_eq!((head.len, head.kind), (10, Kind::Object));
        let mut buf = [0; 4];
        source.read_at(&at, &head.version, 3, &mut buf).unwrap();
        assert_eq!(&buf, b"3456");
        let mut listed = source.list(&folder).unwrap();
        listed.sort_by(|a, b| a.name.cmp(&b.name));
        let names: Vec<_> = listed
            .iter()
            .map(|e| (e.name.clone(), e.is_object))
            .collect();
        assert_eq!(names, [("a.npy".into(), true), ("sub".into(), false)]);
        let missing = source.head(&Location::new(Path::new("/nonexistent/x")));
        assert_eq!(missing.unwrap_err().kind(), io::ErrorKind::NotFound);
    }

    /// A source that has only `read_at`, as a new one may start.
    struct Bytes(Vec<u8>);

    impl Source for Bytes {
        fn head(&self, _: &Location) -> io::Result<Head> {
            Err(io::Error::other("not asked of this test's source"))
        }

        fn read_at(&self, _: &Location, _: &Version, at: u64, buf: &mut [u8]) -> io::Result<()> {
            let at = at as usize;
            buf.copy_from_slice(&self.0[at..at + buf.len()]);
            Ok(())
        }

        fn list(&self, _: &Location) -> io::Result<Vec<Entry>> {
            Err(io::Error::other("not asked of this test's source"))
        }
    }

    #[test]
    fn a_source_downloads_by_its_reads_in_pieces() {
        let bytes: Vec<u8> = (0..(17u32 << 20) + 5).map(|v| v as u8).collect();
        let head = Head {
            len: bytes.len() as u64,
            version: Version::Tag("\"1\"".into()),
            kind: Kind::Object,
        };
        let to = tempfile::tempfile().unwrap();
        let at = Location::new(Path::new("x://b/k"));
        Bytes(bytes.clone()).download(&at, &head, &to).unwrap();
        let mut copied = vec![0; bytes.len()];
        sys::read_exact_at(&to, &mut copied, 0).unwrap();
        assert!(copied == bytes);
    }

    #[test]
    fn a_read_of_a_file_that_changed_fails() {
        let dir = tempfile::tempdir().unwrap();
        let at = Location::new(dir.path().join("a.npy").as_path());
        std::fs::write(at.as_path(), b"0123").unwrap();
        let head = LocalFiles.head(&at).unwrap();
        std::fs::write(at.as_path(), b"01234").unwrap();
        let mut buf = [0; 2];
        let failed = LocalFiles.read_at(&at, &head.version, 0, &mut buf);
        assert!(failed.unwrap_err().to_string().contains("it changed"));
    }
}
