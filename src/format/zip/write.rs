//! Writing ZIP archives as Python's `zipfile` does on a stream it cannot seek: a local header
//! with a ZIP64 field, the data, a data descriptor, then the central directory.

use super::{
    CENTRAL_HEADER, DATA_DESCRIPTOR, END_OF_DIRECTORY, LOCAL_HEADER, ZIP64_END_OF_DIRECTORY,
    ZIP64_EXTRA, ZIP64_LIMIT, ZIP64_LOCATOR,
};

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
