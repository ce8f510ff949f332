//! The reader's and writer's unit tests.

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

/// An archive of two stored members, and the bytes of its members' data.
fn two_members() -> Vec<u8> {
    let mut bytes = local_header("a.npy", STORED);
    bytes.extend_from_slice(b"hello");
    let second = bytes.len() as u64;
    bytes.extend(local_header("b.npy", STORED));
    bytes.extend_from_slice(b"world!");
    let written = [
        stored("a.npy", b"hello", 0),
        stored("b.npy", b"world!", second),
    ];
    let start = bytes.len() as u64;
    bytes.extend(central_directory(&written, start));
    bytes
}

/// The last `n` bytes of `bytes`.
fn last(bytes: &[u8], n: u64) -> &[u8] {
    &bytes[bytes.len() - n as usize..]
}

#[test]
fn the_end_record_is_found_behind_a_comment_of_64_kib() {
    let mut bytes = two_members();
    let comment = vec![b'c'; 0xFFFF];
    let at = bytes.len() - 2;
    bytes[at..].copy_from_slice(&0xFFFFu16.to_le_bytes());
    let expected = parse_end(last(&bytes, FIRST_TAIL), &[], bytes.len() as u64).unwrap();
    bytes.extend_from_slice(&comment);
    let len = bytes.len() as u64;
    // The first tail holds only the comment: the whole 64 KiB search range is asked for.
    let asked = parse_end(last(&bytes, FIRST_TAIL), &[], len);
    assert_eq!(asked, Err(Parse::Need(len - (22 + 0xFFFF)..len)));
    let end = parse_end(last(&bytes, 22 + 0xFFFF), &[], len).unwrap();
    assert_eq!(end, expected);
    let members = read_directory(&bytes, len).unwrap();
    assert_eq!(members.len(), 2);
    assert_eq!(&bytes[members[1].data_start as usize..][..6], b"world!");
    // One byte more of comment, and the record is out of reach, as for every reader.
    bytes.push(b'c');
    let why = read_directory(&bytes, len + 1).unwrap_err();
    assert!(why.contains("no ZIP end-of-directory record"), "{why}");
}

#[test]
fn a_truncated_tail_is_refused_after_the_whole_search_range() {
    let bytes = two_members();
    let cut = &bytes[..bytes.len() - 5];
    let len = cut.len() as u64;
    assert_eq!(
        parse_end(last(cut, FIRST_TAIL), &[], len),
        Err(Parse::Need(0..len))
    );
    let why = parse_end(cut, &[], len).unwrap_err();
    assert_eq!(
        why,
        Parse::Refused(
            "it has no ZIP end-of-directory record; the file is truncated or not a zip".into()
        )
    );
    // Shorter than an end record: refused without asking for more.
    assert!(matches!(
        parse_end(b"PK\x05\x06", &[], 4),
        Err(Parse::Refused(_))
    ));
}

/// The end records of a ZIP64 archive whose directory has `entries` entries of `size`
/// bytes at `offset`, with `gap` bytes between its ZIP64 record and its locator, as the
/// archive's last bytes from `at`.
fn zip64_end(at: u64, gap: usize, (entries, size, offset): (u64, u64, u64)) -> Vec<u8> {
    let mut out = ZIP64_END_OF_DIRECTORY.to_le_bytes().to_vec();
    out.extend_from_slice(&44u64.to_le_bytes());
    out.extend_from_slice(&[45, 0, 45, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    for value in [entries, entries, size, offset] {
        out.extend_from_slice(&value.to_le_bytes());
    }
    out.extend(std::iter::repeat_n(0, gap));
    out.extend_from_slice(&ZIP64_LOCATOR.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&at.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(&END_OF_DIRECTORY.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&[0xFF; 12]);
    out.extend_from_slice(&[0; 2]);
    out
}

#[test]
fn zip64_end_records_are_read_from_the_tail_or_asked_for() {
    let at = 1000;
    let figures = (70_000, 4_000_000, 5 << 30);
    let expected = End {
        entries: 70_000,
        dir_size: 4_000_000,
        dir_offset: 5 << 30,
    };
    let tail = zip64_end(at, 0, figures);
    let len = at + tail.len() as u64;
    assert_eq!(parse_end(&tail, &[], len), Ok(expected));
    // Given the end record alone, the locator before it is asked for with it.
    assert_eq!(
        parse_end(last(&tail, 22), &[], len),
        Err(Parse::Need(len - 42..len))
    );
    // A record far before its locator is asked for alone, then read from what came.
    let far = zip64_end(at, 100_000, figures);
    let len = at + far.len() as u64;
    let tail = last(&far, FIRST_TAIL);
    assert_eq!(parse_end(tail, &[], len), Err(Parse::Need(at..at + 56)));
    assert_eq!(parse_end(tail, &far[..56], len), Ok(expected));
    // A record said to lie past the end of the file is refused, not asked for.
    let past = zip64_end(len, 0, figures);
    let why = parse_end(&past, &[], 200).unwrap_err();
    assert_eq!(
        why,
        Parse::Refused("its ZIP64 end-of-directory record lies outside the file".into())
    );
}

#[test]
fn a_zip64_archive_is_read_through_the_driver() {
    let mut bytes = local_header("a.npy", STORED);
    bytes.extend_from_slice(b"hello");
    let start = bytes.len() as u64;
    let directory_bytes = central_directory(&[stored("a.npy", b"hello", 0)], start);
    let entry = &directory_bytes[..directory_bytes.len() - 22];
    bytes.extend_from_slice(entry);
    let record_at = bytes.len() as u64;
    bytes.extend(zip64_end(record_at, 3000, (1, entry.len() as u64, start)));
    let members = read_directory(&bytes, bytes.len() as u64).unwrap();
    assert_eq!(members.len(), 1);
    assert_eq!(&bytes[members[0].data_start as usize..][..5], b"hello");
}

#[test]
fn an_entry_count_larger_than_the_directory_is_refused_before_any_entry() {
    let end = End {
        entries: 3,
        dir_size: 2 * CENTRAL_HEADER_LEN + 10,
        dir_offset: 0,
    };
    let why = entries(&end, 1000).unwrap_err();
    assert_eq!(
        why,
        "its end record counts 3 members, more than its central directory of 102 bytes can \
         describe; the file is damaged"
    );
    // Two fit: each is asked for within the directory's bounds, and the second, cut short
    // by the directory's end, is damage.
    let end = End {
        entries: 2,
        dir_size: 2 * CENTRAL_HEADER_LEN + 9,
        ..end
    };
    let mut list = entries(&end, 1000).unwrap();
    assert_eq!(list.next(&[], 0), Err(Parse::Need(0..101)));
    let bytes = two_members();
    let start = bytes.len() - 22 - 2 * (CENTRAL_HEADER_LEN as usize + 5);
    let directory = &bytes[start..start + 101];
    let first = list.next(directory, 0).unwrap().unwrap();
    assert_eq!(first.name, "a.npy");
    assert_eq!(
        list.next(directory, 0),
        Err(Parse::Refused(
            "its central directory is damaged: the entry at offset 51 is cut short or \
             malformed (the directory ends at offset 101)"
                .into()
        ))
    );
}

#[test]
fn a_local_extra_field_unlike_the_central_one_decides_where_data_starts() {
    // The central entry has no extra field; the local header has one of 7 bytes.
    let mut bytes = vec![0u8; 100];
    let mut header = local_header("a.npy", STORED);
    header[28..30].copy_from_slice(&7u16.to_le_bytes());
    header.truncate(30 + 5);
    header.extend_from_slice(&[1, 0, 3, 0, 9, 9, 9]);
    bytes.extend_from_slice(&header);
    bytes.extend_from_slice(b"hello");
    let central = Central {
        raw_name: b"a.npy".to_vec(),
        name: "a.npy".into(),
        method: STORED,
        crc: crc32fast::hash(b"hello"),
        compressed: 5,
        size: 5,
        local: 100,
    };
    let len = bytes.len() as u64;
    // Its fixed part and the name the directory gives are asked for at once.
    assert_eq!(parse_local(&[], &central, len), Err(Parse::Need(100..135)));
    let data_start = parse_local(&bytes[100..135], &central, len).unwrap();
    assert_eq!(data_start, 100 + 30 + 5 + 7);
    assert_eq!(&bytes[data_start as usize..], b"hello");
    // Past the end, it is refused without a read.
    let far = Central {
        local: len - 29,
        ..central
    };
    assert!(matches!(
        parse_local(&[], &far, len),
        Err(Parse::Refused(_))
    ));
}

#[test]
fn a_member_whose_local_header_lies_past_the_end_is_refused_with_its_offset() {
    let mut bytes = two_members();
    let len = bytes.len();
    // The second central entry's local header offset (its field at 42).
    let second = len - 22 - (CENTRAL_HEADER_LEN as usize + 5);
    bytes[second + 42..second + 46].copy_from_slice(&0x7FFF_0000u32.to_le_bytes());
    let why = read_directory(&bytes.as_slice(), len as u64).unwrap_err();
    assert_eq!(
        why,
        format!(
            "its member b.npy has its local header at offset 2147418112, past the end of the \
             file ({len} bytes; a local header needs 30); the file is truncated or damaged"
        )
    );
}

/// Bytes whose reads at `fail_from` fail, as a remote object's do once it is replaced.
struct FailingFrom {
    bytes: Vec<u8>,
    fail_from: u64,
}

impl ReadRange for FailingFrom {
    fn read_range(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        if offset == self.fail_from {
            return Err(io::Error::other("precondition failed: the object changed"));
        }
        self.bytes.as_slice().read_range(offset, buf)
    }

    fn detached(&self) -> io::Result<Box<dyn ReadRange>> {
        Err(io::ErrorKind::Unsupported.into())
    }
}

#[test]
fn a_failed_read_of_the_directory_is_the_source_s_failure_not_damage() {
    let bytes = two_members();
    let len = bytes.len() as u64;
    // The directory: two entries of 46 + 5 bytes before the end record. The first read of
    // the tail (98 bytes) holds neither entry whole, so the entries are read again.
    let directory = len - 22 - 2 * (CENTRAL_HEADER_LEN + 5);
    let source = FailingFrom {
        bytes,
        fail_from: directory,
    };
    let why = read_directory(&source, len).unwrap_err();
    assert_eq!(
        why,
        "reading its zip directory failed: precondition failed: the object changed"
    );
}
