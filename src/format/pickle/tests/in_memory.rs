//! A checkpoint read from bytes in memory (any [`ReadRange`] but a file) gives what the same
//! checkpoint read from its file gives: the ZIP form through the zip driver, the legacy form,
//! and strided views gathered from the bytes rather than a map of the file.

use super::*;
use crate::format::OwnData;
use std::fs::File;

/// The file and the bytes of `fixtures/NAME`.
fn fixture(name: &str) -> (File, Vec<u8>) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name);
    (File::open(&path).unwrap(), std::fs::read(&path).unwrap())
}

fn input() -> InputRef {
    InputRef {
        position: 1,
        location: std::path::Path::new("model.pt").into(),
        tensor: None,
    }
}

fn read_pt(source: &dyn ReadRange, len: u64) -> Result<Contents> {
    let mut head = [0u8; 2];
    source.read_range(0, &mut head).unwrap();
    if !zip::is_archive(&head) {
        return read_legacy(source, len, &input(), None);
    }
    let members = zip::read_directory(source, len).map_err(|why| malformed(&input(), why))?;
    let archive = archive_of(&members).expect("a torch.save archive");
    read_zip(source, &input(), &members, &archive, None)
}

/// Each tensor's name, header and, for a gathered view, the bytes gathered.
fn described(contents: &Contents) -> Vec<(Option<String>, TensorInfo, Option<Vec<u8>>)> {
    contents
        .tensors
        .iter()
        .map(|t| {
            let gathered = match &t.file {
                Some(OwnData::File(file)) => {
                    let mut bytes = vec![0; t.info.data_len as usize];
                    crate::sys::read_exact_at(file, &mut bytes, t.info.data_offset).unwrap();
                    Some(bytes)
                }
                _ => None,
            };
            (t.name.clone(), t.info.clone(), gathered)
        })
        .collect()
}

#[test]
fn checkpoints_read_from_bytes_are_those_read_from_their_files() {
    let names = [
        "pytorch/views.pt",
        "pytorch/dtypes_legacy.pt",
        "pytorch/dtypes_proto4.pt",
        "strided/views.pt",
        "strided/views_legacy.pt",
        "strided/chunk_1.pt",
    ];
    for name in names {
        let (file, bytes) = fixture(name);
        let len = bytes.len() as u64;
        let from_file = described(&read_pt(&file, len).unwrap());
        let from_bytes = described(&read_pt(&bytes.as_slice(), len).unwrap());
        assert_eq!(from_bytes, from_file, "{name}");
        if name.starts_with("strided") {
            assert!(from_bytes.iter().any(|(_, _, g)| g.is_some()), "{name}");
        }
    }
}
