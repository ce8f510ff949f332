//! `--recover`: repairing what an append that did not finish left behind, by the journal
//! it wrote beside the target (`src/output/grow.rs` writes it and holds its contract).
//! Everything is checked before anything is written: a journal is acted on only if it agrees
//! with itself and with the file, and nothing is changed when a check fails.

use std::path::Path;

use super::grow::{self, Journaled, Target};
use crate::error::{Error, InputRef, Result};
use crate::format::npy::{self, HeaderBytes, PastEnd, ReadAt};
use crate::format::{Layout, TensorInfo};
use crate::{messages, sys};

/// Refuses an append to `target`, whose journal is beside it, with what disagrees when
/// `--recover` would not act on that journal; `Ok` when it would (the caller then says that
/// an earlier append is to be recovered from). Writes nothing.
pub fn check(target: &Target) -> Result<()> {
    recovery(target).map(|_| ())
}

/// Repairs `path` after an append that did not finish: with the append's journal, undoes it
/// (the old length, and the old header if the new one was being written) or, when the new
/// header had reached the disk, keeps it; with a journal whose writing was cut short, removes
/// it; without one, cuts the file back to the end of the data its header declares. Checks
/// everything first ([`recovery`]) and changes nothing when a check fails. Says on standard
/// error what it did.
pub fn recover(path: &Path) -> Result<()> {
    let target = Target::lock(path, "recover")?;
    let recovery = recovery(&target)?;
    if recovery.keep != recovery.len || recovery.header.is_some() {
        target.repair(recovery.keep, recovery.header.as_deref())?;
    }
    target.remove_journal()?;
    let shown = messages::path(path);
    let info = &recovery.holds;
    let holds = format!(
        "{} {}, {} bytes",
        info.dtype,
        info.shape_text(),
        recovery.keep
    );
    if recovery.done.is_empty() {
        messages::eprintln(format_args!(
            "tjoin: {shown} needs no recovery: it ends where its header says ({holds})"
        ));
    } else {
        let done = recovery.done.join("; ");
        messages::eprintln(format_args!(
            "tjoin: recovered {shown}: {done}; it holds {holds}"
        ));
    }
    Ok(())
}

/// What `--recover` is to do to a target, decided before anything is written.
struct Recovery {
    /// The target's length now.
    len: u64,
    /// The length to cut it back to.
    keep: u64,
    /// The header to write first, if any.
    header: Option<Vec<u8>>,
    /// What the file holds once recovered.
    holds: TensorInfo,
    /// What will have been done, for the message.
    done: Vec<String>,
}

impl Recovery {
    /// A recovery that cuts a file of `len` bytes back to `keep`, after writing `header` if
    /// one is given; `done` gains the cut, when there is one.
    fn new(
        len: u64,
        keep: u64,
        header: Option<Vec<u8>>,
        holds: TensorInfo,
        mut done: Vec<String>,
    ) -> Recovery {
        if len > keep {
            done.push(format!(
                "removed {} bytes after the end of its data",
                len - keep
            ));
        }
        Recovery {
            len,
            keep,
            header,
            holds,
            done,
        }
    }
}

/// Decides what `--recover` does to `target`, and checks that it may, without writing
/// anything: a journal is acted on only if it agrees with itself and with the file
/// ([`from_journal`]); one cut short while it was written, only if the file ends where its
/// header says; without a journal, the file is cut back to the end of the data its header
/// declares.
fn recovery(target: &Target) -> Result<Recovery> {
    let path = target.path();
    let len = target.length()?;
    let name = InputRef {
        position: 1,
        location: path.into(),
        tensor: None,
    };
    let journal_path = target.journal_path();
    let shown_journal = messages::path(&journal_path);
    let mut done = Vec::new();
    match target.journal()? {
        Journaled::Found(journal) => return from_journal(target, &journal, len, &name),
        Journaled::CutShort => {
            let info = header_past_end(target.file(), len, &name)?;
            let end = info.data_offset + info.data_len;
            if end != len {
                let why = format!(
                    "it was cut short while it was written, so its append stopped before \
                     changing {}; yet that file is {len} bytes long, where its header declares \
                     {end}",
                    messages::path(path)
                );
                return Err(target.not_its_journal(&journal_path, why));
            }
            done.push(format!(
                "removed the journal {shown_journal}, cut short by an append killed before it \
                 changed the file"
            ));
        }
        found => {
            if let Journaled::Stale = found {
                done.push(format!(
                    "removed the journal {shown_journal}, left by an append to an earlier file \
                     of that name"
                ));
            }
        }
    }
    let info = header_past_end(target.file(), len, &name)?;
    let keep = info.data_offset + info.data_len;
    Ok(Recovery::new(len, keep, None, info, done))
}

/// Checks the journal of an append to `target` (now `len` bytes long) against itself and the
/// file, and decides from it: its old header declares exactly its old length and its new
/// header its new one, both the same array but for the growth axis; the file is between the
/// two lengths; its header is the old one (cut back to the old length), the new one with the
/// file at the new length (kept), or a mix of the two byte by byte, torn while it was
/// written (the old header put back, then cut back).
fn from_journal(
    target: &Target,
    journal: &grow::Journal,
    len: u64,
    name: &InputRef,
) -> Result<Recovery> {
    let path = target.path();
    let shown = messages::path(path);
    let refuse = |why: String| target.not_its_journal(&target.journal_path(), why);
    let declared = |header: &[u8], which: &str, recorded: u64| -> Result<TensorInfo> {
        let from = HeaderBytes {
            head: header,
            rest: &mut std::io::empty(),
            start: 0,
            len: u64::MAX,
            past_end: PastEnd::Allowed,
        };
        let info = npy::read_header(from, name).map_err(|e| {
            let reason = match e {
                Error::Malformed { reason, .. } => reason,
                e => e.to_string(),
            };
            refuse(format!("its {which} header is not a .npy header: {reason}"))
        })?;
        if info.data_offset != header.len() as u64 {
            return Err(refuse(format!(
                "its {which} header is {} bytes long, but declares data from byte {}",
                header.len(),
                info.data_offset
            )));
        }
        let end = info.data_offset + info.data_len;
        if end != recorded {
            return Err(refuse(format!(
                "its {which} header declares {} {}, which ends at byte {end}, but its {which} \
                 length is {recorded}",
                info.dtype,
                info.shape_text()
            )));
        }
        Ok(info)
    };
    let old = declared(&journal.old_header, "old", journal.old_len)?;
    let new = declared(&journal.new_header, "new", journal.new_len)?;
    if !grown_from(&old, &new) {
        return Err(refuse(format!(
            "its old header ({} {}, {} order) and its new one ({} {}, {} order) are not one \
             array grown along its growth axis",
            old.dtype,
            old.shape_text(),
            layout_name(old.layout),
            new.dtype,
            new.shape_text(),
            layout_name(new.layout)
        )));
    }
    if len < journal.old_len || len > journal.new_len {
        return Err(refuse(format!(
            "{shown} is {len} bytes long, and an append of this journal leaves it between its \
             old length, {}, and its new length, {}",
            journal.old_len, journal.new_len
        )));
    }
    let mut head = vec![0; journal.old_header.len()];
    sys::read_exact_at(target.file(), &mut head, 0)
        .map_err(|e| Error::io("read the header of", path, e))?;
    let (old_header, new_header) = (&journal.old_header, &journal.new_header);
    let mut done = Vec::new();
    let (keep, header, holds) = if head == *new_header {
        if len != journal.new_len {
            return Err(refuse(format!(
                "{shown} starts with its new header, but is {len} bytes long where that header \
                 declares {} (an append writes the header only once the data is on the disk)",
                journal.new_len
            )));
        }
        done.push(
            "kept the appended data: the append had finished, its new header was on the disk"
                .to_string(),
        );
        (journal.new_len, None, new)
    } else if head == *old_header {
        if len == journal.old_len {
            done.push(format!(
                "removed the journal {} of an append killed before it changed the file",
                messages::path(&target.journal_path())
            ));
        }
        (journal.old_len, None, old)
    } else if let Some(at) =
        (0..head.len()).find(|&i| head[i] != old_header[i] && head[i] != new_header[i])
    {
        return Err(refuse(format!(
            "the header of {shown} is neither its old header nor its new one, nor a mix of \
             the two: its byte {at} is {:#04x}, where the old header has {:#04x} and the new \
             one {:#04x}",
            head[at], old_header[at], new_header[at]
        )));
    } else {
        done.push(
            "put its old header back (the crash came while the new one was being written)"
                .to_string(),
        );
        (journal.old_len, Some(old_header.clone()), old)
    };
    Ok(Recovery::new(len, keep, header, holds, done))
}

/// The header of the file an append left (`len` bytes long), taking the bytes after the
/// data it declares as what the append left: the data ends at `data_offset + data_len`.
fn header_past_end(file: &std::fs::File, len: u64, name: &InputRef) -> Result<TensorInfo> {
    let from = HeaderBytes {
        head: &[],
        rest: &mut ReadAt { file, at: 0 },
        start: 0,
        len,
        past_end: PastEnd::Allowed,
    };
    npy::read_header(from, name)
}

/// Whether `new` is `old` grown along its growth axis (0 in C order, the last in Fortran
/// order): the same element type, byte order and layout, the same extent on every other axis.
fn grown_from(old: &TensorInfo, new: &TensorInfo) -> bool {
    let rank = old.shape.len();
    if rank == 0 || new.shape.len() != rank {
        return false;
    }
    let growth = match old.layout {
        Layout::C => 0,
        Layout::Fortran => rank - 1,
    };
    let others_equal = (0..rank)
        .filter(|&axis| axis != growth)
        .all(|axis| old.shape[axis] == new.shape[axis]);
    (&old.dtype, &old.swaps, old.layout) == (&new.dtype, &new.swaps, new.layout)
        && others_equal
        && new.shape[growth] >= old.shape[growth]
}

fn layout_name(layout: Layout) -> &'static str {
    match layout {
        Layout::C => "C",
        Layout::Fortran => "Fortran",
    }
}
