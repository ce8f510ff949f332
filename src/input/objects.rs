//! Reading an input whose source is not local (`s3://`, `gs://`, `az://`, `https://`), for
//! the opening stage (`open.rs`'s `open_object`) and the readers of composite inputs (sharded
//! sets, DCP, DeepSpeed): its head asked of its source ([`head`]), its header parsed from
//! bytes by the format's parser through one driver over [`Source::read_at`]
//! ([`read_header`]), which reads more when the parser asks (the first bytes the head read
//! serve the first parse). Its tensors' data stay in the object
//! ([`crate::input::DataFile::Remote`]), read by range when the engine copies them.
//!
//! ZIP archives (.npz, `torch.save`'s ZIP form) and legacy `torch.save` pickles are read by
//! range through [`Object`] ([`crate::format::Format::read_ranged`]): the archive's end and
//! directory, each member's local and .npy header, the pickle, never a tensor's data (a
//! deflated .npz member is inflated from a ranged stream when its data is first read; a
//! strided `.pt` view is read into memory, up to 256 MiB). The files of composite inputs
//! read by position (a DCP checkpoint's `.distcp` files, a DeepSpeed checkpoint's rank files)
//! are opened by [`open_readable`]: a local file, or an [`Object`], whose archives, pickles
//! and headers their readers read by range, and whose tensors' data stay in the object.
//! Small files read whole (an index, DCP's `.metadata`, DeepSpeed's `latest`) are read into
//! memory under a limit ([`read_whole`]). Formats read from neither (JSON text) are
//! downloaded whole, every read pinned to the ETag the head saw, into an unnamed temporary
//! file, and read as a local file is ([`open_regular`]).
//!
//! Below `open.rs`, which it does not name: the opening stage decides what an input is
//! (a composite input, one object) and calls here for the bytes.

use std::fs::File;
use std::io;
use std::sync::{Arc, Mutex, PoisonError};

use super::source::{Head, Kind, Source, Version};
use super::sources;
use crate::error::{InputRef, Result};
use crate::format::zip::ReadRange;
use crate::location::Location;
use crate::sys::Limit;

/// How many bytes the first parse of a header is given: those the head read
/// (`input::remote::FIRST_READ`), without a request of their own.
pub(super) const FIRST: u64 = super::remote::FIRST_READ;

/// The head of `location` as its source gave it, for a remote one the head that the opening
/// of an input asked for last when it is the same location's: opening an input asks what is
/// at its location several times (its selection, its form, its index or header), and each
/// head of an object is a GET. Every read stays pinned to the version this head saw, and the
/// check before the commit asks the source afresh (`Input::check_unchanged`).
pub fn head(location: &Location) -> io::Result<Head> {
    static LAST: Mutex<Option<(Location, Head)>> = Mutex::new(None);
    let source = sources::source_of(location)?;
    if source.is_local() {
        return source.head(location);
    }
    let mut last = LAST.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((at, head)) = last.as_ref()
        && at == location
    {
        return Ok(head.clone());
    }
    let head = source.head(location)?;
    *last = Some((location.clone(), head.clone()));
    Ok(head)
}

/// Whether there is an object (locally, a file) at `location`, asked of its source: a file a
/// checkpoint's folder may hold (`.metadata`, `latest`, `common.pt`), which in object storage
/// is an object under a prefix, never a file on disk. Through [`head`], so that the read of
/// the file that follows costs no second head.
pub fn is_object(location: &Location) -> bool {
    head(location).is_ok_and(|head| head.kind == Kind::Object)
}

/// What a header parser makes of the bytes it was given.
pub enum Step<T> {
    /// It is done.
    Done(T),
    /// It needs this many bytes in all, from the object's first.
    Need(u64),
}

/// The one driver of the header parsers over a source: parses the object's first bytes
/// (those its head read, for a remote object), and reads more while the parser asks for
/// more, each read pinned to `head`'s version. A parser that asks for no more than it was
/// given, or for more than the object holds, is its own error's to name.
pub fn read_header<T>(
    name: &InputRef,
    head: &Head,
    parse: &mut dyn FnMut(&[u8]) -> Result<Step<T>>,
) -> Result<(T, Vec<u8>)> {
    let location = &name.location;
    let source = sources::source_of(location).map_err(|e| name.io_error("read", e))?;
    let mut bytes = vec![0; head.len.min(FIRST) as usize];
    let read = |bytes: &mut [u8], at: u64| {
        source
            .read_at(location, &head.version, at, bytes)
            .map_err(|e| name.io_error("read the header of", e))
    };
    read(&mut bytes, 0)?;
    loop {
        let needed = match parse(&bytes)? {
            Step::Done(done) => return Ok((done, bytes)),
            Step::Need(needed) => needed.min(head.len),
        };
        let have = bytes.len();
        if needed <= have as u64 {
            let why = format!(
                "its header asks for {needed} bytes, and all {} are read",
                head.len
            );
            return Err(name.io_error("read the header of", io::Error::other(why)));
        }
        bytes.resize(needed as usize, 0);
        read(&mut bytes[have..], have as u64)?;
    }
}

/// An object read by position, every read pinned to the version its head saw: the source
/// the ZIP and pickle readers read an archive from, each read a ranged GET. Its first bytes
/// (those its header's first parse was given) and the last window it read serve the reads
/// that fall inside them, so that the small reads of a parser (a member's local header, then
/// its .npy header just after) cost one request between them. Shared by its clones.
#[derive(Clone)]
pub struct Object(Arc<ObjectAt>);

struct ObjectAt {
    source: &'static dyn Source,
    location: Location,
    version: Version,
    len: u64,
    first: Vec<u8>,
    /// The last window read, and where it starts.
    window: Mutex<(u64, Vec<u8>)>,
}

/// How many bytes a small read asks for at once: a member's local header and its .npy
/// header, or a pickle's next pieces.
const WINDOW: u64 = 64 << 10;

impl Object {
    /// The object at `location` as `head` saw it, whose first bytes are `first`.
    pub fn new(location: &Location, head: &Head, first: &[u8]) -> io::Result<Object> {
        Ok(Object(Arc::new(ObjectAt {
            source: sources::source_of(location)?,
            location: location.clone(),
            version: head.version.clone(),
            len: head.len,
            first: first.to_vec(),
            window: Mutex::new((0, Vec::new())),
        })))
    }
}

/// The bytes `at..at + len` of `bytes`, which start at `from`, if they hold them all.
fn inside(bytes: &[u8], from: u64, at: u64, len: usize) -> Option<&[u8]> {
    let start = usize::try_from(at.checked_sub(from)?).ok()?;
    bytes.get(start..start.checked_add(len)?)
}

impl ReadRange for Object {
    fn read_range(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let at = &*self.0;
        if let Some(bytes) = inside(&at.first, 0, offset, buf.len()) {
            buf.copy_from_slice(bytes);
            return Ok(());
        }
        let read =
            |offset: u64, buf: &mut [u8]| at.source.read_at(&at.location, &at.version, offset, buf);
        if buf.len() as u64 >= WINDOW {
            return read(offset, buf);
        }
        let mut window = at.window.lock().unwrap_or_else(PoisonError::into_inner);
        if inside(&window.1, window.0, offset, buf.len()).is_none() {
            // A window that ends at the object's end when it would pass it: a ZIP archive's
            // end records, its directory and its last members' headers in one read.
            let start = offset.min(at.len.saturating_sub(WINDOW));
            let end = at.len.min(start.saturating_add(WINDOW)).max(start);
            let mut bytes = vec![0; (end - start) as usize];
            read(start, &mut bytes)?;
            *window = (start, bytes);
        }
        let bytes = inside(&window.1, window.0, offset, buf.len());
        buf.copy_from_slice(bytes.ok_or(io::ErrorKind::UnexpectedEof)?);
        Ok(())
    }

    fn detached(&self) -> io::Result<Box<dyn ReadRange>> {
        Ok(Box::new(self.clone()))
    }
}

/// A local file or an object, opened to be read by position: the files of a composite input
/// (a DCP checkpoint's `.distcp` files, a DeepSpeed checkpoint's rank files) whose
/// directories, pickles and headers their readers read by range, never downloaded.
#[derive(Clone)]
pub enum Readable {
    /// A local file, as it lies.
    File(Arc<File>),
    /// An object, each read a ranged GET pinned to the version its head saw.
    Object(Object),
}

impl Readable {
    /// What its readers read it through.
    pub fn reader(&self) -> &dyn ReadRange {
        match self {
            Readable::File(file) => file,
            Readable::Object(object) => object,
        }
    }

    /// The local file, if it is one.
    pub fn file(&self) -> Option<&Arc<File>> {
        match self {
            Readable::File(file) => Some(file),
            Readable::Object(_) => None,
        }
    }
}

/// Opens the local file or object at `location` to be read by position, and says what it
/// was: a local file opened (a FIFO refused, not waited on), an object by its head alone
/// (the head's first read serves the reads of its first bytes that follow at once).
pub fn open_readable(location: &Location) -> io::Result<(Readable, Head)> {
    let source = sources::source_of(location)?;
    if source.is_local() {
        let (file, metadata) = crate::sys::open_regular(location.as_path())?;
        let head = super::source::LocalFiles::head_of(&metadata);
        return Ok((Readable::File(Arc::new(file)), head));
    }
    let head = head(location)?;
    if head.kind != Kind::Object {
        return Err(io::Error::other("it is a prefix (a folder), not an object"));
    }
    let object = Object::new(location, &head, &[])?;
    Ok((Readable::Object(object), head))
}

/// Opens the object or local file at `location` whole: a local file as it lies, an object
/// downloaded (pinned to the version its head saw) into an unnamed temporary file. For the
/// readers that read a file rather than bytes; the file's head says what it was.
pub fn open_regular(location: &Location) -> io::Result<(File, Head)> {
    let source = sources::source_of(location)?;
    if source.is_local() {
        let (file, metadata) = crate::sys::open_regular(location.as_path())?;
        return Ok((file, super::source::LocalFiles::head_of(&metadata)));
    }
    let head = head(location)?;
    let file = download(location, &head)?;
    Ok((file, head))
}

/// The bytes of the object or local file at `location`, up to `limit` (an index, a file
/// list), and what it was when read; a failure says what failed (`open`, `read`).
pub fn read_whole(
    location: &Location,
    limit: &Limit,
) -> std::result::Result<(Vec<u8>, Head), (&'static str, io::Error)> {
    use crate::sys::Accept;
    let source = sources::source_of(location).map_err(|e| ("read", e))?;
    if source.is_local() {
        // Opened without waiting, so that a FIFO is refused instead of waited on.
        let (file, metadata) =
            crate::sys::open_regular(location.as_path()).map_err(|e| ("open", e))?;
        let bytes = crate::sys::read_opened(&file, &metadata, limit, Accept::Regular)
            .map_err(|e| ("read", e))?;
        return Ok((bytes, super::source::LocalFiles::head_of(&metadata)));
    }
    let read = || {
        let head = head(location)?;
        if head.kind != Kind::Object {
            return Err(io::Error::other("it is a prefix (a folder), not an object"));
        }
        if head.len > limit.bytes {
            return Err(limit.exceeded());
        }
        let mut bytes = vec![0; head.len as usize];
        source.read_at(location, &head.version, 0, &mut bytes)?;
        Ok((bytes, head))
    };
    read().map_err(|e| ("read", e))
}

/// Downloads the object at `location`, whose `head` its source gave, into an unnamed
/// temporary file (removed by the system when closed, whatever ends the process), every
/// read pinned to its version (`Source::download`).
pub fn download(location: &Location, head: &Head) -> io::Result<File> {
    if head.kind != Kind::Object {
        return Err(io::Error::other("it is a prefix (a folder), not an object"));
    }
    let file = tempfile::tempfile().map_err(|e| {
        let folder = std::env::temp_dir();
        io::Error::new(
            e.kind(),
            format!(
                "it is copied into a temporary file to be read, which cannot be made in {} \
                 (TMPDIR): {e}\nhint: point TMPDIR at a folder with room for the object",
                crate::messages::path(&folder)
            ),
        )
    })?;
    sources::source_of(location)?.download(location, head, &file)?;
    Ok(file)
}
