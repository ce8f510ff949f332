//! The fuzz input as a file: every reader takes an open file and its length, exactly as tjoin
//! calls them, so the length checks run too. One temporary file per process, rewritten for
//! each input.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::sync::Mutex;

use tjoin::error::InputRef;

static FILE: Mutex<Option<File>> = Mutex::new(None);

/// Calls `read` with a file holding `data`, its length, and a name for messages.
pub fn with_file<T>(data: &[u8], read: impl FnOnce(&File, u64, &InputRef) -> T) -> T {
    let mut slot = FILE.lock().unwrap();
    let file = slot.get_or_insert_with(|| tempfile::tempfile().expect("a temporary file"));
    file.set_len(0).unwrap();
    file.seek(SeekFrom::Start(0)).unwrap();
    file.write_all(data).unwrap();
    file.seek(SeekFrom::Start(0)).unwrap();
    let name = InputRef {
        position: 1,
        location: std::path::Path::new("fuzz-input").into(),
        tensor: None,
    };
    read(file, data.len() as u64, &name)
}
