//! Just enough of the ZIP format for .npz files: reading the central directory (ZIP64
//! included) to find each member's data, and writing members front to back with data
//! descriptors, as Python's `zipfile` does on a stream it cannot seek (compared on a fixture:
//! the same bytes but for the permissions in the external attributes, rw-r--r-- here and
//! rw------- there).
//! <https://pkware.cachefly.net/webdocs/casestudies/APPNOTE.TXT>
//!
//! Why not the zip crate (9.8, tried on a `numpy.savez` fixture): its reader would serve
//! (`by_index_raw(i).data_start()` is the offset to map), but its writer cannot lay members out
//! as `zipfile` does for numpy: `large_file(true)` puts ZIP64 sizes in every central directory
//! entry (numpy's have none below 2 GiB), without it the local header lacks the ZIP64 field
//! numpy forces, and its streaming mode writes local sizes of 0 where `zipfile` writes 0xFFFFFFFF.
//! With the writer hand-written, the reader stays too: it shares the writer's record layouts,
//! and the crate's reader alone would bring about ten more crates into the build.

use std::collections::HashSet;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};

use crate::messages::excerpt;

const LOCAL_HEADER: u32 = 0x0403_4b50;
const CENTRAL_HEADER: u32 = 0x0201_4b50;
const DATA_DESCRIPTOR: u32 = 0x0807_4b50;
const END_OF_DIRECTORY: u32 = 0x0605_4b50;
const ZIP64_END_OF_DIRECTORY: u32 = 0x0606_4b50;
const ZIP64_LOCATOR: u32 = 0x0706_4b50;
const ZIP64_EXTRA: u16 = 0x0001;
/// Stored (no compression) and deflate, the two methods numpy writes.
pub const STORED: u16 = 0;
/// See [`STORED`].
pub const DEFLATED: u16 = 8;
/// Python's `zipfile.ZIP64_LIMIT`: values above it go in ZIP64 fields (some readers take
/// the 32-bit fields as signed).
const ZIP64_LIMIT: u64 = (1 << 31) - 1;
/// A central directory larger than this is refused before it is read.
const MAX_DIRECTORY: u64 = 1 << 30;
/// The end-of-directory record is 22 bytes plus a comment of at most 65535.
const MAX_END_SEARCH: u64 = 22 + 0xFFFF;

/// One member of an archive, as its central directory entry and local header describe it.
#[derive(Debug, Clone)]
pub struct Member {
    /// Its name in the archive (`x.npy`).
    pub name: String,
    /// `STORED`, `DEFLATED` or another method.
    pub method: u16,
    /// The CRC-32 of its uncompressed bytes.
    pub crc: u32,
    /// Bytes of (possibly compressed) data in the archive.
    pub compressed: u64,
    /// Bytes once uncompressed.
    pub size: u64,
    /// Where its data starts in the archive.
    pub data_start: u64,
}

/// Whether a file's first bytes are a ZIP archive's signature: its first local header, or
/// the end record of an empty archive.
pub fn is_signature(head: &[u8]) -> bool {
    head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06")
}

/// Whether a file read as a format that has both a ZIP form and another (a `torch.save`
/// checkpoint) is in its ZIP form: it starts as every ZIP record does.
pub fn is_archive(head: &[u8]) -> bool {
    head.starts_with(b"PK")
}

/// Reads the central directory of the archive `file` of `file_len` bytes. Errors are reasons
/// for a message that names the file.
pub fn directory(file: &File, file_len: u64) -> Result<Vec<Member>, String> {
    directory_in(file, 0, file_len)
}

/// Reads the central directory of an archive that lies inside `file`, its `file_len` bytes
/// from byte `base` (a chunk of a PyTorch distributed checkpoint's `.distcp` file is a
/// `torch.save` archive at an offset). The archive's own offsets count from `base`; the
/// members' `data_start` count from the start of `file`.
pub fn directory_in(file: &File, base: u64, file_len: u64) -> Result<Vec<Member>, String> {
    let mut reader = Based { file, base };
    let (entries, dir_size, dir_offset) = end_record(&mut reader, file_len)?;
    if dir_offset
        .checked_add(dir_size)
        .is_none_or(|e| e > file_len)
        || dir_size > MAX_DIRECTORY
    {
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
    // Read in pieces, entry by entry: a directory that lies costs what it really holds.
    let mut dir = io::BufReader::with_capacity(
        64 << 10,
        Span {
            file,
            at: base + dir_offset,
            end: base + dir_offset + dir_size,
        },
    );
    let mut members = Vec::new();
    // Where each member's records lie in the file: its local header to the end of its data.
    let mut spans: Vec<(u64, u64, usize)> = Vec::new();
    let mut names: HashSet<String> = HashSet::new();
    let (mut name, mut extra) = (Vec::new(), Vec::new());
    for _ in 0..entries {
        let damaged = || "its central directory is damaged".to_string();
        let mut fixed = [0u8; CENTRAL_HEADER_LEN as usize];
        dir.read_exact(&mut fixed).map_err(|_| damaged())?;
        if le32(&fixed, 0) != Some(CENTRAL_HEADER) {
            return Err(damaged());
        }
        let field16 = |o: usize| le16(&fixed, o).ok_or_else(damaged);
        let field32 = |o: usize| le32(&fixed, o).ok_or_else(damaged);
        let flags = field16(8)?;
        let method = field16(10)?;
        let crc = field32(16)?;
        let mut compressed = u64::from(field32(20)?);
        let mut size = u64::from(field32(24)?);
        let name_len = usize::from(field16(28)?);
        let extra_len = usize::from(field16(30)?);
        let comment_len = u64::from(field16(32)?);
        let mut local = u64::from(field32(42)?);
        for (buffer, len) in [(&mut name, name_len), (&mut extra, extra_len)] {
            buffer.resize(len, 0);
            dir.read_exact(buffer).map_err(|_| damaged())?;
        }
        let skipped = io::copy(&mut (&mut dir).take(comment_len), &mut io::sink());
        if skipped.ok() != Some(comment_len) {
            return Err(damaged());
        }
        let raw_name = name.clone();
        let name = String::from_utf8_lossy(&name).into_owned();
        if let Some(zip64) = find_extra(&extra, ZIP64_EXTRA) {
            let mut fields = zip64.chunks_exact(8).map(|c| le64(c, 0).unwrap_or(0));
            for value in [&mut size, &mut compressed, &mut local] {
                if *value == 0xFFFF_FFFF {
                    *value = fields.next().ok_or_else(damaged)?;
                }
            }
        }
        if flags & 1 != 0 {
            return Err(format!("its member {} is encrypted", excerpt(&name)));
        }
        let data_start = local_data_start(&mut reader, local, file_len, &raw_name, &name)?;
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
        if !names.insert(name.clone()) {
            return Err(format!(
                "it has two members named {}; readers disagree on which to read (torch reads \
                 the first, numpy the last), so tjoin reads neither: the file was not written \
                 by torch.save or numpy",
                excerpt(&name)
            ));
        }
        spans.push((local, data_start + compressed, members.len()));
        members.push(Member {
            name,
            method,
            crc,
            compressed,
            size,
            data_start: base + data_start,
        });
    }
    refuse_overlaps(&mut spans, &members)?;
    Ok(members)
}

/// Reads the end-of-directory record (and its ZIP64 record, when the archive has one) of an
/// archive of `file_len` bytes: how many members it counts, and its central directory's
/// size and offset.
fn end_record(reader: &mut Based, file_len: u64) -> Result<(u64, u64, u64), String> {
    let tail_len = file_len.min(MAX_END_SEARCH);
    let tail = read_at(reader, file_len - tail_len, tail_len as usize)?;
    let end_at = (0..tail.len().saturating_sub(21))
        .rev()
        .find(|&i| le32(&tail, i) == Some(END_OF_DIRECTORY))
        .ok_or("it has no ZIP end-of-directory record; the file is truncated or not a zip")?;
    let end = &tail[end_at..];
    let mut entries = u64::from(le16(end, 10).unwrap_or(0));
    let mut dir_size = u64::from(le32(end, 12).unwrap_or(0));
    let mut dir_offset = u64::from(le32(end, 16).unwrap_or(0));
    if entries == 0xFFFF || dir_size == 0xFFFF_FFFF || dir_offset == 0xFFFF_FFFF {
        let end_pos = file_len - tail_len + end_at as u64;
        let locator_pos = end_pos
            .checked_sub(20)
            .ok_or("its ZIP64 end-of-directory locator is missing")?;
        let locator = read_at(reader, locator_pos, 20)?;
        if le32(&locator, 0) != Some(ZIP64_LOCATOR) {
            return Err("its ZIP64 end-of-directory locator is missing".to_string());
        }
        let record_pos = le64(&locator, 8).unwrap_or(u64::MAX);
        if record_pos.checked_add(56).is_none_or(|e| e > file_len) {
            return Err("its ZIP64 end-of-directory record lies outside the file".to_string());
        }
        let record = read_at(reader, record_pos, 56)?;
        if le32(&record, 0) != Some(ZIP64_END_OF_DIRECTORY) {
            return Err("its ZIP64 end-of-directory record is damaged".to_string());
        }
        entries = le64(&record, 32).unwrap_or(0);
        dir_size = le64(&record, 40).unwrap_or(0);
        dir_offset = le64(&record, 48).unwrap_or(0);
    }
    Ok((entries, dir_size, dir_offset))
}

/// Refuses members whose records overlap (`spans`: each one's local header to the end of
/// its data): central directory entries that share a local header or its data would make a
/// small file inflate many times over, and every writer lays members one after another.
fn refuse_overlaps(spans: &mut [(u64, u64, usize)], members: &[Member]) -> Result<(), String> {
    spans.sort_unstable();
    for pair in spans.windows(2) {
        let ((start, end, first), (next, _, second)) = (pair[0], pair[1]);
        if next < end {
            return Err(format!(
                "its members {} and {} overlap in the file (bytes {start} to {end}, and from \
                 {next}): one archive's members never share bytes, and a reader that reads \
                 both reads one record twice; the file is damaged or made to mislead",
                excerpt(&members[first].name),
                excerpt(&members[second].name)
            ));
        }
    }
    Ok(())
}

/// Where a member's data starts: after its local header, whose extra field's length may
/// differ from the central directory's. Its name must be the central directory's `raw_name`
/// (`name` as text), as numpy and Python's zipfile require: a reader that reads the local
/// headers alone would read another member.
fn local_data_start(
    reader: &mut Based,
    local: u64,
    file_len: u64,
    raw_name: &[u8],
    name: &str,
) -> Result<u64, String> {
    if local.checked_add(30).is_none_or(|e| e > file_len) {
        return Err(format!(
            "its member {} starts past the end of the file",
            excerpt(name)
        ));
    }
    let header = read_at(reader, local, 30)?;
    if le32(&header, 0) != Some(LOCAL_HEADER) {
        return Err(format!(
            "the local header of its member {} is damaged",
            excerpt(name)
        ));
    }
    let name_len = u64::from(le16(&header, 26).unwrap_or(0));
    let extra_len = u64::from(le16(&header, 28).unwrap_or(0));
    let local_name = if name_len == raw_name.len() as u64 && local + 30 + name_len <= file_len {
        read_at(reader, local + 30, raw_name.len())?
    } else {
        Vec::new()
    };
    if local_name != raw_name {
        let shown = if local_name.is_empty() {
            format!("a name of {name_len} bytes")
        } else {
            excerpt(&String::from_utf8_lossy(&local_name)).to_string()
        };
        return Err(format!(
            "its member {} is named {shown} in its local header: the two names differ, so \
             readers disagree on what the member is (numpy refuses the file)",
            excerpt(name)
        ));
    }
    Ok(local + 30 + name_len + extra_len)
}

/// The fixed part of a central directory entry, before its name, extra field and comment.
const CENTRAL_HEADER_LEN: u64 = 46;

/// Bytes `at..end` of a file, read with positional reads (the file's cursor is left to the
/// readers of local headers).
struct Span<'a> {
    file: &'a File,
    at: u64,
    end: u64,
}

impl Read for Span<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = usize::try_from(self.end - self.at).unwrap_or(usize::MAX);
        let len = buf.len().min(left);
        let n = crate::sys::read_at(self.file, &mut buf[..len], self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

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

/// A file whose bytes are counted from `base`: an archive inside a larger file.
struct Based<'a> {
    file: &'a File,
    base: u64,
}

fn read_at(reader: &mut Based, offset: u64, len: usize) -> Result<Vec<u8>, String> {
    let mut buf = vec![0; len];
    let mut file = reader.file;
    file.seek(SeekFrom::Start(reader.base + offset))
        .and_then(|_| file.read_exact(&mut buf))
        .map_err(|e| format!("reading its zip directory failed: {e}"))?;
    Ok(buf)
}

fn le16(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}

fn le32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn le64(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

/// What the central directory records about a member once it is written.
#[derive(Debug, Clone)]
pub struct Written {
    /// Its name.
    pub name: String,
    /// `STORED` or `DEFLATED`.
    pub method: u16,
    /// CRC-32 of the uncompressed bytes.
    pub crc: u32,
    /// Bytes in the archive.
    pub compressed: u64,
    /// Bytes uncompressed.
    pub size: u64,
    /// Where its local header starts.
    pub local: u64,
}

/// Bits 3 (sizes and CRC follow the data) and 11 (UTF-8 name) of the general purpose flags.
fn flags(name: &str) -> u16 {
    0x0008 | if name.is_ascii() { 0 } else { 0x0800 }
}

/// DOS date of 1980-01-01, time 00:00: a fixed stamp keeps outputs reproducible.
const DOS_DATE: u16 = (1 << 5) | 1;

/// A local header whose CRC and sizes come later in a data descriptor, with a ZIP64 extra
/// field (as numpy asks `zipfile` for with `force_zip64=True`).
pub fn local_header(name: &str, method: u16) -> Vec<u8> {
    let mut out = Vec::with_capacity(30 + name.len() + 20);
    out.extend_from_slice(&LOCAL_HEADER.to_le_bytes());
    out.extend_from_slice(&45u16.to_le_bytes());
    out.extend_from_slice(&flags(name).to_le_bytes());
    out.extend_from_slice(&method.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&DOS_DATE.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&u32::MAX.to_le_bytes());
    out.extend_from_slice(&u32::MAX.to_le_bytes());
    out.extend_from_slice(&(name.len() as u16).to_le_bytes());
    out.extend_from_slice(&20u16.to_le_bytes());
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(&ZIP64_EXTRA.to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes());
    out.extend_from_slice(&[0; 16]);
    out
}

/// The data descriptor after a member's data, with 8-byte sizes (its local header has a
/// ZIP64 extra field).
pub fn data_descriptor(member: &Written) -> Vec<u8> {
    let mut out = Vec::with_capacity(24);
    out.extend_from_slice(&DATA_DESCRIPTOR.to_le_bytes());
    out.extend_from_slice(&member.crc.to_le_bytes());
    out.extend_from_slice(&member.compressed.to_le_bytes());
    out.extend_from_slice(&member.size.to_le_bytes());
    out
}

/// The central directory and end records for `members`, written from offset `start`.
pub fn central_directory(members: &[Written], start: u64) -> Vec<u8> {
    let mut out = Vec::new();
    for member in members {
        // As Python's zipfile: both sizes in the ZIP64 field when either is large.
        let mut zip64 = Vec::new();
        let (size, compressed) = if member.size > ZIP64_LIMIT || member.compressed > ZIP64_LIMIT {
            zip64.extend_from_slice(&member.size.to_le_bytes());
            zip64.extend_from_slice(&member.compressed.to_le_bytes());
            (u32::MAX, u32::MAX)
        } else {
            (member.size as u32, member.compressed as u32)
        };
        let local = if member.local > ZIP64_LIMIT {
            zip64.extend_from_slice(&member.local.to_le_bytes());
            u32::MAX
        } else {
            member.local as u32
        };
        let mut extra = Vec::new();
        if !zip64.is_empty() {
            extra.extend_from_slice(&ZIP64_EXTRA.to_le_bytes());
            extra.extend_from_slice(&(zip64.len() as u16).to_le_bytes());
            extra.extend_from_slice(&zip64);
        }
        out.extend_from_slice(&CENTRAL_HEADER.to_le_bytes());
        out.extend_from_slice(&((3u16 << 8) | 45).to_le_bytes());
        out.extend_from_slice(&45u16.to_le_bytes());
        out.extend_from_slice(&flags(&member.name).to_le_bytes());
        out.extend_from_slice(&member.method.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&DOS_DATE.to_le_bytes());
        out.extend_from_slice(&member.crc.to_le_bytes());
        out.extend_from_slice(&compressed.to_le_bytes());
        out.extend_from_slice(&size.to_le_bytes());
        out.extend_from_slice(&(member.name.len() as u16).to_le_bytes());
        out.extend_from_slice(&(extra.len() as u16).to_le_bytes());
        // Comment length, disk number, internal attributes.
        out.extend_from_slice(&[0; 6]);
        out.extend_from_slice(&(0o100644u32 << 16).to_le_bytes());
        out.extend_from_slice(&local.to_le_bytes());
        out.extend_from_slice(member.name.as_bytes());
        out.extend_from_slice(&extra);
    }
    let dir_size = out.len() as u64;
    let count = members.len() as u64;
    if count >= 0xFFFF || dir_size > ZIP64_LIMIT || start > ZIP64_LIMIT {
        let record_at = start + dir_size;
        out.extend_from_slice(&ZIP64_END_OF_DIRECTORY.to_le_bytes());
        out.extend_from_slice(&44u64.to_le_bytes());
        out.extend_from_slice(&((3u16 << 8) | 45).to_le_bytes());
        out.extend_from_slice(&45u16.to_le_bytes());
        out.extend_from_slice(&[0; 8]);
        out.extend_from_slice(&count.to_le_bytes());
        out.extend_from_slice(&count.to_le_bytes());
        out.extend_from_slice(&dir_size.to_le_bytes());
        out.extend_from_slice(&start.to_le_bytes());
        out.extend_from_slice(&ZIP64_LOCATOR.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&record_at.to_le_bytes());
        out.extend_from_slice(&1u32.to_le_bytes());
    }
    let short = |v: u64| {
        u16::try_from(v)
            .ok()
            .filter(|&v| v < 0xFFFF)
            .unwrap_or(0xFFFF)
    };
    let long = |v: u64| {
        u32::try_from(v)
            .ok()
            .filter(|&v| u64::from(v) <= ZIP64_LIMIT)
            .unwrap_or(u32::MAX)
    };
    out.extend_from_slice(&END_OF_DIRECTORY.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&short(count).to_le_bytes());
    out.extend_from_slice(&short(count).to_le_bytes());
    out.extend_from_slice(&long(dir_size).to_le_bytes());
    out.extend_from_slice(&long(start).to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

/// Wraps an `io::Error` from decompressing with the member's name.
pub fn inflate_error(name: &str, e: io::Error) -> String {
    format!("its member {} cannot be decompressed: {e}", excerpt(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn written_archives_read_back() {
        let mut bytes = Vec::new();
        let mut written = Vec::new();
        for (name, data) in [("a.npy", &b"hello"[..]), ("é.npy", &b""[..])] {
            let local = bytes.len() as u64;
            bytes.extend(local_header(name, STORED));
            bytes.extend_from_slice(data);
            let member = Written {
                name: name.to_string(),
                method: STORED,
                crc: crc32fast::hash(data),
                compressed: data.len() as u64,
                size: data.len() as u64,
                local,
            };
            bytes.extend(data_descriptor(&member));
            written.push(member);
        }
        let start = bytes.len() as u64;
        bytes.extend(central_directory(&written, start));
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&bytes).unwrap();
        let members = directory(&file, bytes.len() as u64).unwrap();
        assert_eq!(members.len(), 2);
        assert_eq!(members[0].name, "a.npy");
        let at = members[0].data_start as usize;
        assert_eq!(&bytes[at..at + 5], b"hello");
        assert_eq!(members[0].crc, crc32fast::hash(b"hello"));
        assert_eq!(members[1].name, "é.npy");
    }

    #[cfg(unix)]
    #[test]
    fn members_past_4_gib_use_zip64_fields() {
        use std::os::unix::fs::FileExt;
        // A sparse file: a member of 5 GiB whose local header starts at 3 GiB.
        let (local, size) = (3u64 << 30, 5u64 << 30);
        let member = Written {
            name: "big.npy".to_string(),
            method: STORED,
            crc: 7,
            compressed: size,
            size,
            local,
        };
        let header = local_header(&member.name, STORED);
        let data_start = local + header.len() as u64;
        let descriptor = data_descriptor(&member);
        let dir_start = data_start + size + descriptor.len() as u64;
        let directory_bytes = central_directory(std::slice::from_ref(&member), dir_start);
        let file = tempfile::tempfile().unwrap();
        file.write_all_at(&header, local).unwrap();
        file.write_all_at(&descriptor, data_start + size).unwrap();
        file.write_all_at(&directory_bytes, dir_start).unwrap();
        let file_len = dir_start + directory_bytes.len() as u64;
        let members = directory(&file, file_len).unwrap();
        assert_eq!(members.len(), 1);
        assert_eq!(
            (
                members[0].size,
                members[0].compressed,
                members[0].data_start,
                members[0].crc
            ),
            (size, size, data_start, 7)
        );
    }

    proptest::proptest! {
        #[test]
        fn random_archives_never_panic(
            mut bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
            at in 0usize..300,
        ) {
            // Plant an end record so that parsing gets past the search for it.
            if at + 22 <= bytes.len() {
                bytes[at..at + 4].copy_from_slice(&END_OF_DIRECTORY.to_le_bytes());
            }
            let mut file = tempfile::tempfile().unwrap();
            file.write_all(&bytes).unwrap();
            let _ = directory(&file, bytes.len() as u64);
        }
    }

    /// An archive of `members` (name, where its local header is, its data), laid out by the
    /// caller: local headers at the offsets given, then the central directory.
    fn archive(bytes: &mut Vec<u8>, written: &[Written]) -> File {
        let start = bytes.len() as u64;
        bytes.extend(central_directory(written, start));
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(bytes).unwrap();
        file
    }

    fn stored(name: &str, data: &[u8], local: u64) -> Written {
        Written {
            name: name.to_string(),
            method: STORED,
            crc: crc32fast::hash(data),
            compressed: data.len() as u64,
            size: data.len() as u64,
            local,
        }
    }

    #[test]
    fn members_that_share_bytes_or_names_or_disagree_on_names_are_refused() {
        // b.npy's local header lies inside a.npy's data.
        let inner = local_header("b.npy", STORED);
        let mut data = inner.clone();
        data.extend_from_slice(&[7; 16]);
        let mut bytes = local_header("a.npy", STORED);
        let b_at = bytes.len() as u64;
        bytes.extend_from_slice(&data);
        let written = [stored("a.npy", &data, 0), stored("b.npy", &[7; 16], b_at)];
        let file = archive(&mut bytes, &written);
        let why = directory(&file, bytes.len() as u64).unwrap_err();
        assert!(why.contains("a.npy and b.npy overlap"), "{why}");
        // Two central entries for one local header: the second's name differs from it.
        let mut bytes = local_header("a.npy", STORED);
        bytes.extend_from_slice(b"hello");
        let written = [stored("a.npy", b"hello", 0), stored("c.npy", b"hello", 0)];
        let file = archive(&mut bytes, &written);
        let why = directory(&file, bytes.len() as u64).unwrap_err();
        assert!(
            why.contains("c.npy is named a.npy in its local header"),
            "{why}"
        );
        // Two members of one name, one after the other.
        let mut bytes = local_header("a.npy", STORED);
        bytes.extend_from_slice(b"hello");
        let second = bytes.len() as u64;
        bytes.extend(local_header("a.npy", STORED));
        bytes.extend_from_slice(b"world");
        let written = [
            stored("a.npy", b"hello", 0),
            stored("a.npy", b"world", second),
        ];
        let file = archive(&mut bytes, &written);
        let why = directory(&file, bytes.len() as u64).unwrap_err();
        assert!(why.contains("two members named a.npy"), "{why}");
    }

    #[test]
    fn garbage_is_refused_without_panicking() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(b"PK\x05\x06garbage").unwrap();
        assert!(directory(&file, 13).is_err());
        let mut file = tempfile::tempfile().unwrap();
        let mut end = END_OF_DIRECTORY.to_le_bytes().to_vec();
        end.extend_from_slice(&[0, 0, 0, 0, 1, 0, 1, 0, 46, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        file.write_all(&end).unwrap();
        assert!(directory(&file, end.len() as u64).is_err());
    }
}
