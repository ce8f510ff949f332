//! Fetching an input: opening its file and reading its first bytes (all of it when it is
//! small), here or ahead on a thread of its own.

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, mpsc};

use super::{Stamp, stream};
use crate::error::{InputRef, Result, STDIN};
use crate::format::Format;
use crate::sys;

/// An input file opened, its metadata taken and its first bytes read: by `Input::open`
/// itself, or ahead of it on another thread (`Prefetch`).
pub struct Fetched {
    /// The file and its metadata, or why it could not be opened.
    opened: io::Result<(File, std::fs::Metadata)>,
    /// Its first bytes (all of it when it is small enough), or why they could not be read;
    /// nothing for anything but a regular file.
    head: io::Result<Vec<u8>>,
}

impl Fetched {
    /// Opens `path` and reads its first bytes into `head` (a buffer to reuse): all of it when
    /// it is a regular file of at most `whole_up_to` bytes.
    pub fn fetch(path: &Path, whole_up_to: u64, mut head: Vec<u8>) -> Fetched {
        // Non-blocking, so that opening a FIFO returns at once and is refused by
        // `into_regular` instead of waiting for a writer (checking the path first would leave
        // a window in which it is replaced by one); for regular files the flag changes
        // nothing. One open and one fstat, where checking the path first cost a stat more
        // per input.
        let mut options = std::fs::OpenOptions::new();
        options.read(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
        // Windows opens a folder (a sharded checkpoint) only with FILE_FLAG_BACKUP_SEMANTICS
        // (0x02000000), and refuses it with "Access denied" otherwise. The share mode stays
        // the standard library's, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
        // so that another program may still rename over or remove an input tjoin reads.
        #[cfg(windows)]
        std::os::windows::fs::OpenOptionsExt::custom_flags(&mut options, 0x0200_0000);
        let opened = options
            .open(path)
            .and_then(|file| Ok((file.metadata()?, file)))
            .map(|(metadata, file)| (file, metadata));
        let head = match &opened {
            Ok((file, metadata)) if metadata.is_file() => {
                let whole = metadata.len() <= whole_up_to;
                read_head(file, metadata.len(), whole, &mut head).map(|()| head)
            }
            _ => Ok(Vec::new()),
        };
        Fetched { opened, head }
    }

    /// Whether it is a pipe or a device that is not a terminal, to be read once into a
    /// temporary file (a terminal, a socket or anything else is refused by `into_regular`).
    pub(super) fn is_stream(&self) -> bool {
        use std::io::IsTerminal;
        self.opened
            .as_ref()
            .is_ok_and(|(file, metadata)| sys::is_stream(metadata) && !file.is_terminal())
    }

    /// The pipe or device at `path`, read into an unnamed temporary file no further than its
    /// format says it reaches ([`stream::copy`]); a FIFO that nothing was written to is
    /// refused.
    pub(super) fn into_temp_file(
        self,
        path: &Path,
        forced: Option<Format>,
        name: &InputRef,
    ) -> Result<File> {
        let failed = |e| name.io_error("read", e);
        let (mut file, metadata) = self.opened.map_err(failed)?;
        // Opened without waiting; reading waits for the writer.
        sys::wait_on_reads(&file).map_err(failed)?;
        let copy = stream::copy(&mut file, path, forced, name)?;
        if sys::is_fifo(&metadata) && copy.metadata().map_err(failed)?.len() == 0 {
            return Err(failed(sys::nothing_written()));
        }
        Ok(copy)
    }

    /// Whether it is a folder.
    pub(super) fn is_dir(&self) -> bool {
        self.opened
            .as_ref()
            .is_ok_and(|(_, metadata)| metadata.is_dir())
    }

    /// The file and its stamp, leaving its first bytes in `head`; anything but a regular file
    /// is refused.
    pub(super) fn into_regular(self, name: &InputRef, head: &mut Vec<u8>) -> Result<(File, Stamp)> {
        let (file, metadata) = self.opened.map_err(|e| name.io_error("open", e))?;
        if !metadata.is_file() {
            let why = if metadata.is_dir() {
                "it is a directory".to_string()
            } else {
                // What `is_stream` leaves here: a terminal, a socket, a block device.
                let what = match sys::kind_of(&metadata) {
                    "a character device" => "a terminal",
                    other => other,
                };
                format!(
                    "it is not a regular file but {what}: tjoin reads its inputs from files, \
                     pipes and devices; save the data to a file first"
                )
            };
            return Err(name.io_error("open", io::Error::other(why)));
        }
        *head = self
            .head
            .map_err(|e| name.io_error("read the header of", e))?;
        Ok((file, Stamp::from(&metadata)))
    }
}

/// How much of a file one read takes in to find its header: numpy's are 128 bytes for plain
/// types. More would copy a small input's data twice (4 KiB cost 10% on 10,000 small files).
const HEAD: u64 = 1024;

/// Reads into `head` the file's first bytes, as many as nearly every header needs, or all of
/// it when `whole`: one positional read, the only one most inputs cost (over 100,000 inputs,
/// each system call saved is measurable).
pub fn read_head(file: &File, file_len: u64, whole: bool, head: &mut Vec<u8>) -> io::Result<()> {
    let len = if whole { file_len } else { file_len.min(HEAD) };
    head.clear();
    head.resize(len as usize, 0);
    sys::read_exact_at(file, head, 0)?;
    // Windows' positional reads move the cursor; the other readers start from it, at 0.
    #[cfg(windows)]
    {
        use std::io::Seek;
        (&*file).seek(std::io::SeekFrom::Start(0))?;
    }
    Ok(())
}

/// Opens inputs ahead of `Input::open`, on a thread of its own: with two cores, opening and
/// reading the next files overlaps the work on the current one (10,000 files of 4 KiB: 0.054 s
/// instead of 0.085). Files go over in batches of 32, so that the threads seldom wait for
/// each other (batches of 256 measured slower: less overlap), and at most a few batches are
/// open at once: `PREFETCH_FILES` file descriptors and, for small files read whole, 8 MiB.
/// The caller reserves the descriptors first (`sys::reserve_file_descriptors`).
pub struct Prefetch {
    batches: Option<mpsc::Receiver<Vec<Option<Fetched>>>>,
    batch: std::vec::IntoIter<Option<Fetched>>,
    /// Heads that are done with, for the thread to read into again: fresh memory is costly.
    spare: Option<mpsc::Sender<Vec<u8>>>,
}

/// Files opened ahead per batch.
const BATCH: usize = 32;
/// Batches waiting to be taken, at most.
const BATCHES_AHEAD: usize = 2;
/// With fewer inputs, a thread is not worth starting.
const PREFETCH_MIN: usize = 16;
/// The most files open ahead at once: the batches waiting, the one being filled and the one
/// being taken.
pub const PREFETCH_FILES: usize = (BATCHES_AHEAD + 2) * BATCH;

impl Prefetch {
    /// Starts opening `paths` in `scope`; regular files of at most `whole_up_to` bytes (read
    /// when each is opened) are read whole. Standard input and `FILE:NAME` paths are left to
    /// `Input::open`.
    pub fn start<'scope, 'env>(
        scope: &'scope std::thread::Scope<'scope, 'env>,
        paths: &'env [Arc<Path>],
        whole_up_to: &'env AtomicU64,
    ) -> Prefetch {
        if paths.len() < PREFETCH_MIN {
            return Prefetch {
                batches: None,
                batch: Vec::new().into_iter(),
                spare: None,
            };
        }
        let (send_batch, batches) = mpsc::sync_channel(BATCHES_AHEAD);
        let (spare, spares) = mpsc::channel::<Vec<u8>>();
        scope.spawn(move || {
            for chunk in paths.chunks(BATCH) {
                let batch = chunk
                    .iter()
                    .map(|path| {
                        let plain = path.as_os_str() != STDIN
                            && !path.to_str().is_some_and(|p| p.contains(':'));
                        plain.then(|| {
                            let head = spares.try_recv().unwrap_or_default();
                            Fetched::fetch(path, whole_up_to.load(Ordering::Relaxed), head)
                        })
                    })
                    .collect();
                // The inputs' owner stopped (at an error): open no more.
                if send_batch.send(batch).is_err() {
                    return;
                }
            }
        });
        Prefetch {
            batches: Some(batches),
            batch: Vec::new().into_iter(),
            spare: Some(spare),
        }
    }

    /// The next input, if it was opened ahead (to be called once per path, in order).
    pub fn take_next(&mut self) -> Option<Fetched> {
        if self.batch.len() == 0 {
            self.batch = self.batches.as_ref()?.recv().ok()?.into_iter();
        }
        self.batch.next().flatten()
    }

    /// Hands a head that is done with back to the thread; without one, leaves it to be
    /// reused here.
    pub fn recycle(&self, head: &mut Vec<u8>) {
        if let Some(spare) = &self.spare {
            // The thread may have finished: the buffer is then simply dropped.
            let _ = spare.send(std::mem::take(head));
        }
    }
}
