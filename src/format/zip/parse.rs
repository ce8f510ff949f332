//! The ZIP reader's stages, each a pure function of the bytes it is given that says which
//! range of the archive it needs when they are not enough ([`Parse::Need`]): the end records
//! ([`parse_end`]), the central directory's entries ([`Entries::next`]), each member's local
//! header ([`parse_local`]), then the checks across members ([`Listing`]). A ZIP is read from
//! its tail, so a request is a range of the archive, not a length. The one driver,
//! [`super::read_directory`], feeds them from any [`super::ReadRange`].

use std::collections::HashSet;
use std::ops::Range;

use super::{
    CENTRAL_HEADER, END_OF_DIRECTORY, LOCAL_HEADER, MAX_DIRECTORY, MAX_END_SEARCH, Member,
    ZIP64_END_OF_DIRECTORY, ZIP64_EXTRA, ZIP64_LOCATOR, le16, le32, le64,
};
use crate::messages::excerpt;

/// Why a stage gave no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parse {
    /// It needs these bytes of the archive (offsets from its first byte).
    Need(Range<u64>),
    /// The archive is not one tjoin reads: why, as a reason for a message naming the file.
    Refused(String),
}

/// What the end records say: how many members the archive counts, and where its central
/// directory lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct End {
    /// Members the end record counts.
    pub entries: u64,
    /// Bytes of the central directory.
    pub dir_size: u64,
    /// Where the central directory starts.
    pub dir_offset: u64,
}

/// How many of an archive's last bytes to read first: the end record of an archive without
/// a comment, with room for a ZIP64 locator and record before it.
pub const FIRST_TAIL: u64 = 22 + 20 + 56;

/// The fixed part of a central directory entry, before its name, extra field and comment.
pub const CENTRAL_HEADER_LEN: u64 = 46;

/// The fixed part of a local header, before its name and extra field.
const LOCAL_HEADER_LEN: u64 = 30;

/// The bytes of the central directory asked for at a time: a directory that lies about its
/// size costs what it really holds.
const DIRECTORY_CHUNK: u64 = 64 << 10;

/// Parses the end records of an archive of `file_len` bytes. `tail` holds its last bytes
/// (a range that ends at `file_len`: the driver replaces it when such a range is asked for);
/// `record` holds the 56 bytes of its ZIP64 end record once asked for (any other range),
/// empty before. The end record is searched for backwards from the end, across a comment of
/// up to 64 KiB.
pub fn parse_end(tail: &[u8], record: &[u8], file_len: u64) -> Result<End, Parse> {
    let refused = |why: &str| Parse::Refused(why.to_string());
    let tail_at = file_len.saturating_sub(tail.len() as u64);
    let searched = file_len.min(MAX_END_SEARCH);
    let found = (0..tail.len().saturating_sub(21))
        .rev()
        .find(|&i| le32(tail, i) == Some(END_OF_DIRECTORY));
    let end_at = match found {
        Some(at) => at,
        None if (tail.len() as u64) < searched => {
            return Err(Parse::Need(file_len - searched..file_len));
        }
        None => {
            return Err(refused(
                "it has no ZIP end-of-directory record; the file is truncated or not a zip",
            ));
        }
    };
    let end = &tail[end_at..];
    let entries = u64::from(le16(end, 10).unwrap_or(0));
    let dir_size = u64::from(le32(end, 12).unwrap_or(0));
    let dir_offset = u64::from(le32(end, 16).unwrap_or(0));
    if entries != 0xFFFF && dir_size != 0xFFFF_FFFF && dir_offset != 0xFFFF_FFFF {
        return Ok(End {
            entries,
            dir_size,
            dir_offset,
        });
    }
    let end_pos = tail_at + end_at as u64;
    let missing = "its ZIP64 end-of-directory locator is missing";
    let locator_pos = end_pos.checked_sub(20).ok_or_else(|| refused(missing))?;
    let Some(locator) = locator_pos
        .checked_sub(tail_at)
        .and_then(|at| tail.get(at as usize..at as usize + 20))
    else {
        return Err(Parse::Need(locator_pos..file_len));
    };
    if le32(locator, 0) != Some(ZIP64_LOCATOR) {
        return Err(refused(missing));
    }
    let record_pos = le64(locator, 8).unwrap_or(u64::MAX);
    if record_pos.checked_add(56).is_none_or(|e| e > file_len) {
        return Err(refused(
            "its ZIP64 end-of-directory record lies outside the file",
        ));
    }
    let in_tail = record_pos
        .checked_sub(tail_at)
        .and_then(|at| tail.get(at as usize..at as usize + 56));
    let record = match (in_tail, record.get(..56)) {
        (Some(bytes), _) | (None, Some(bytes)) => bytes,
        (None, None) => return Err(Parse::Need(record_pos..record_pos + 56)),
    };
    if le32(record, 0) != Some(ZIP64_END_OF_DIRECTORY) {
        return Err(refused("its ZIP64 end-of-directory record is damaged"));
    }
    Ok(End {
        entries: le64(record, 32).unwrap_or(0),
        dir_size: le64(record, 40).unwrap_or(0),
        dir_offset: le64(record, 48).unwrap_or(0),
    })
}

/// One central directory entry: a member as the directory describes it, before its local
/// header is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Central {
    /// Its name's bytes, which its local header must repeat.
    pub raw_name: Vec<u8>,
    /// Its name as text.
    pub name: String,
    /// Its compression method.
    pub method: u16,
    /// The CRC-32 of its uncompressed bytes.
    pub crc: u32,
    /// Bytes of data in the archive.
    pub compressed: u64,
    /// Bytes once uncompressed.
    pub size: u64,
    /// Where its local header starts.
    pub local: u64,
}

/// The central directory's entries, read one after another ([`Entries::next`]); made by
/// [`entries`], which checks the directory's bounds first.
#[derive(Debug, Clone)]
pub struct Entries {
    /// Where the next entry starts.
    at: u64,
    /// Where the directory ends.
    end: u64,
    /// Entries not yet read.
    left: u64,
}

/// The entries of the central directory `end` locates, in an archive of `file_len` bytes:
/// refused when the directory lies outside the file, or counts more entries than its bytes
/// can hold (so that the work is bounded by the bytes, not by the count).
pub fn entries(end: &End, file_len: u64) -> Result<Entries, String> {
    let End {
        entries,
        dir_size,
        dir_offset,
    } = *end;
    let dir_end = dir_offset.checked_add(dir_size);
    if dir_end.is_none_or(|e| e > file_len) || dir_size > MAX_DIRECTORY {
        return Err(format!(
            "its central directory ({dir_size} bytes at offset {dir_offset}) lies outside the \
             file; the file is truncated or damaged"
        ));
    }
    if entries > dir_size / CENTRAL_HEADER_LEN {
        return Err(format!(
            "its end record counts {entries} members, more than its central directory of \
             {dir_size} bytes can describe; the file is damaged"
        ));
    }
    Ok(Entries {
        at: dir_offset,
        end: dir_offset + dir_size,
        left: entries,
    })
}

impl Entries {
    /// The next entry, parsed from `window`, bytes of the archive from `window_at`; `None`
    /// after the last. Asks for a range from the entry's start that holds it whole (at least
    /// a chunk of the directory, to read few times), never past the directory's end.
    pub fn next(&mut self, window: &[u8], window_at: u64) -> Result<Option<Central>, Parse> {
        if self.left == 0 {
            return Ok(None);
        }
        let (entry_at, dir_end) = (self.at, self.end);
        let damaged = || {
            Parse::Refused(format!(
                "its central directory is damaged: the entry at offset {entry_at} is cut short \
                 or malformed (the directory ends at offset {dir_end})"
            ))
        };
        let held = self
            .at
            .checked_sub(window_at)
            .and_then(|skip| window.get(usize::try_from(skip).ok()?..))
            .unwrap_or(&[]);
        let need = |len: u64| -> Parse {
            let want = len.max(DIRECTORY_CHUNK).min(self.end - self.at);
            Parse::Need(self.at..self.at + want)
        };
        if self.at + CENTRAL_HEADER_LEN > self.end {
            return Err(damaged());
        }
        let Some(fixed) = held.get(..CENTRAL_HEADER_LEN as usize) else {
            return Err(need(CENTRAL_HEADER_LEN));
        };
        if le32(fixed, 0) != Some(CENTRAL_HEADER) {
            return Err(damaged());
        }
        let field16 = |o: usize| u64::from(le16(fixed, o).unwrap_or(0));
        let field32 = |o: usize| le32(fixed, o).unwrap_or(0);
        let (name_len, extra_len) = (field16(28), field16(30));
        let total = CENTRAL_HEADER_LEN + name_len + extra_len + field16(32);
        if self.at + total > self.end {
            return Err(damaged());
        }
        let Some(entry) = held.get(..total as usize) else {
            return Err(need(total));
        };
        let name_end = (CENTRAL_HEADER_LEN + name_len) as usize;
        let raw_name = entry[CENTRAL_HEADER_LEN as usize..name_end].to_vec();
        let extra = &entry[name_end..name_end + extra_len as usize];
        let mut compressed = u64::from(field32(20));
        let mut size = u64::from(field32(24));
        let mut local = u64::from(field32(42));
        if let Some(zip64) = find_extra(extra, ZIP64_EXTRA) {
            let mut fields = zip64.chunks_exact(8).map(|c| le64(c, 0).unwrap_or(0));
            for value in [&mut size, &mut compressed, &mut local] {
                if *value == 0xFFFF_FFFF {
                    *value = fields.next().ok_or_else(damaged)?;
                }
            }
        }
        let name = String::from_utf8_lossy(&raw_name).into_owned();
        if field16(8) & 1 != 0 {
            let why = format!("its member {} is encrypted", excerpt(&name));
            return Err(Parse::Refused(why));
        }
        self.at += total;
        self.left -= 1;
        Ok(Some(Central {
            raw_name,
            name,
            method: field16(10) as u16,
            crc: field32(16),
            compressed,
            size,
            local,
        }))
    }
}

/// The body of the extra field `id` in the extra fields `extra`.
fn find_extra(mut extra: &[u8], id: u16) -> Option<&[u8]> {
    while extra.len() >= 4 {
        let kind = le16(extra, 0)?;
        let len = usize::from(le16(extra, 2)?);
        let body = extra.get(4..4 + len)?;
        if kind == id {
            return Some(body);
        }
        extra = &extra[4 + len..];
    }
    None
}

/// Where the data of the member `central` starts, parsed from `header`, the bytes of an
/// archive of `file_len` bytes from its local header on: after that header, whose extra
/// field's length may differ from the central directory's. Its name must be the central
/// directory's, as numpy and Python's zipfile require: a reader that reads the local headers
/// alone would read another member. Asks for the header and the name the directory gives.
pub fn parse_local(header: &[u8], central: &Central, file_len: u64) -> Result<u64, Parse> {
    let local = central.local;
    let name = &central.name;
    if local
        .checked_add(LOCAL_HEADER_LEN)
        .is_none_or(|e| e > file_len)
    {
        let why = format!(
            "its member {} has its local header at offset {local}, past the end of the file \
             ({file_len} bytes; a local header needs {LOCAL_HEADER_LEN}); the file is \
             truncated or damaged",
            excerpt(name)
        );
        return Err(Parse::Refused(why));
    }
    let raw_len = central.raw_name.len() as u64;
    let Some(fixed) = header.get(..LOCAL_HEADER_LEN as usize) else {
        let want = (local + LOCAL_HEADER_LEN + raw_len).min(file_len);
        return Err(Parse::Need(local..want));
    };
    if le32(fixed, 0) != Some(LOCAL_HEADER) {
        return Err(Parse::Refused(format!(
            "the local header of its member {} is damaged",
            excerpt(name)
        )));
    }
    let name_len = u64::from(le16(fixed, 26).unwrap_or(0));
    let extra_len = u64::from(le16(fixed, 28).unwrap_or(0));
    let name_end = local + LOCAL_HEADER_LEN + name_len;
    let local_name = if name_len == raw_len && name_end <= file_len {
        let at = LOCAL_HEADER_LEN as usize;
        match header.get(at..at + name_len as usize) {
            Some(bytes) => bytes,
            None => return Err(Parse::Need(local..name_end)),
        }
    } else {
        &[]
    };
    if local_name != central.raw_name.as_slice() {
        let shown = if local_name.is_empty() {
            format!("a name of {name_len} bytes")
        } else {
            excerpt(&String::from_utf8_lossy(local_name)).to_string()
        };
        return Err(Parse::Refused(format!(
            "its member {} is named {shown} in its local header: the two names differ, so \
             readers disagree on what the member is (numpy refuses the file)",
            excerpt(name)
        )));
    }
    Ok(name_end + extra_len)
}

/// The members found so far, checked across each other: no data past the end of the file,
/// no two of one name, none that share bytes ([`Listing::finish`]).
#[derive(Default)]
pub struct Listing {
    members: Vec<Member>,
    /// Where each member's records lie: its local header to the end of its data, and its
    /// place in `members`.
    spans: Vec<(u64, u64, usize)>,
    names: HashSet<String>,
}

impl Listing {
    /// Adds the member `central` whose data starts at `data_start`, in an archive of
    /// `file_len` bytes.
    pub fn add(&mut self, central: Central, data_start: u64, file_len: u64) -> Result<(), String> {
        let Central {
            name,
            method,
            crc,
            compressed,
            size,
            local,
            ..
        } = central;
        if data_start
            .checked_add(compressed)
            .is_none_or(|e| e > file_len)
        {
            return Err(format!(
                "its member {} claims {compressed} bytes from offset {data_start}, past the \
                 end of the file; the file is truncated",
                excerpt(&name)
            ));
        }
        if !self.names.insert(name.clone()) {
            return Err(format!(
                "it has two members named {}; readers disagree on which to read (torch reads \
                 the first, numpy the last), so tjoin reads neither: the file was not written \
                 by torch.save or numpy",
                excerpt(&name)
            ));
        }
        self.spans
            .push((local, data_start + compressed, self.members.len()));
        self.members.push(Member {
            name,
            method,
            crc,
            compressed,
            size,
            data_start,
        });
        Ok(())
    }

    /// The members, in the directory's order, once no two overlap: central directory entries
    /// that share a local header or its data would make a small file inflate many times over,
    /// and every writer lays members one after another.
    pub fn finish(mut self) -> Result<Vec<Member>, String> {
        self.spans.sort_unstable();
        for pair in self.spans.windows(2) {
            let ((start, end, first), (next, _, second)) = (pair[0], pair[1]);
            if next < end {
                return Err(format!(
                    "its members {} and {} overlap in the file (bytes {start} to {end}, and \
                     from {next}): one archive's members never share bytes, and a reader that \
                     reads both reads one record twice; the file is damaged or made to mislead",
                    excerpt(&self.members[first].name),
                    excerpt(&self.members[second].name)
                ));
            }
        }
        Ok(self.members)
    }
}
