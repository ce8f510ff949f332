//! The legacy form of `torch.save` (`_use_new_zipfile_serialization=False`, torch 1.5 and
//! before): five pickles (a magic number, the protocol version 1001, `sys_info`, the data,
//! the storage keys), then each storage as a little-endian u64 element count and its bytes.
//! Every persistent ID that names a storage key must agree on its class and count: the file
//! stores the key's storage once, and each tensor is checked against the record it names.

use std::collections::HashMap;

use super::value::{self, FaultKind, Node};
use super::vm::{self, Fault, Pickled};
use super::{LEGACY_PROTOCOL, Located, fault_error, holdings, malformed, tensors};
use crate::dtype::ByteOrder;
use crate::error::{Error, InputRef, Result};
use crate::format::Contents;
use crate::format::zip::ReadRange;
use crate::messages::excerpt;

/// Reads the legacy form; with `select`, only that tensor.
pub fn read_legacy(
    source: &dyn ReadRange,
    file_len: u64,
    input: &InputRef,
    select: Option<&str>,
) -> Result<Contents> {
    let (pickles, storages_at) = read_pickles(source, file_len, input)?;
    let [_, _, _, data, key_list] = pickles;
    let Node::List(keys) = key_list.node(key_list.root) else {
        return Err(malformed(
            input,
            "its list of storage keys after the data pickle is not a list".to_string(),
        ));
    };
    let units = storage_units(&data, input)?;
    let places = place_storages(
        source,
        file_len,
        input,
        (&key_list, keys),
        &units,
        storages_at,
    )?;
    let locate = |storage: &value::Storage, _unit: u64| -> Result<Located> {
        match places.get(&*storage.key) {
            Some(&start) => Ok(Located { start, crc: None }),
            None => Err(malformed(
                input,
                format!(
                    "its pickle names the storage {}, which its list of storages leaves out",
                    excerpt(&storage.key)
                ),
            )),
        }
    };
    let holdings = holdings(&data, input)?;
    // The legacy form writes every storage little-endian, whatever the machine.
    tensors(holdings, input, select, ByteOrder::Little, locate, source)
}

/// The five pickles at the start of `source` (of `file_len` bytes), checked, and where the
/// storages start: the driver of [`legacy_pickles`], which parses bytes; a growing prefix of
/// the file is read until they all fit.
fn read_pickles(
    source: &dyn ReadRange,
    file_len: u64,
    input: &InputRef,
) -> Result<([Pickled; 5], u64)> {
    // The pickles come first; read a growing prefix of the file until they all fit.
    let limit = crate::limits::PICKLE.bytes;
    let mut want = file_len.min(1 << 20);
    loop {
        let mut bytes = vec![0; want as usize];
        source
            .read_range(0, &mut bytes)
            .map_err(|e| input.io_error("read", e))?;
        match legacy_pickles(&bytes) {
            Ok(done) => return Ok(done),
            Err(fault) if matches!(fault.kind, FaultKind::CutShort(_)) && want < file_len => {
                if want >= limit {
                    return Err(Error::InputIo {
                        action: "read",
                        input: input.clone(),
                        source: crate::limits::PICKLE.exceeded(),
                    });
                }
                want = file_len.min(want * 4).min(limit);
            }
            Err(fault) => return Err(fault_error(input, "", &fault)),
        }
    }
}

/// What a storage key holds: its element size, its element count, its class's name.
type Units<'a> = HashMap<&'a str, (u64, u64, &'a str)>;

/// Each storage's element size and count, from the persistent IDs in `data` that name it,
/// which must agree.
fn storage_units<'a>(data: &'a Pickled, input: &InputRef) -> Result<Units<'a>> {
    // Each tensor is checked against the record it names.
    let mut units: HashMap<&str, (u64, u64, &str)> = HashMap::new();
    for node in &data.nodes {
        if let Node::Storage(storage) = node {
            let unit = storage.dtype.map_or(1, |d| d.itemsize());
            let class = storage.dtype.map_or("UntypedStorage", |d| d.storage_name());
            match units.get(&*storage.key) {
                Some(&(u, n, c)) if (u, n, c) != (unit, storage.numel, class) => {
                    return Err(malformed(
                        input,
                        format!(
                            "its pickle names the storage {} twice, as {} of {c} and as {} \
                             of {class}: the file stores it once, so one of the tensors that \
                             name it would be read from bytes that are not its own (torch \
                             refuses the file too)",
                            excerpt(&storage.key),
                            elements(n),
                            elements(storage.numel)
                        ),
                    ));
                }
                Some(_) => {}
                None => {
                    units.insert(&storage.key, (unit, storage.numel, class));
                }
            }
        }
    }
    Ok(units)
}

/// Where each storage of the key list `keys` (the nodes of `key_list`) starts in `source`,
/// counted and checked one after another from `storages_at`.
fn place_storages(
    source: &dyn ReadRange,
    file_len: u64,
    input: &InputRef,
    (key_list, keys): (&Pickled, &[value::Id]),
    units: &Units,
    storages_at: u64,
) -> Result<HashMap<String, u64>> {
    let mut at = storages_at;
    let mut places: HashMap<String, u64> = HashMap::new();
    for &key in keys.iter() {
        let key = match keys_node(key_list, key) {
            Some(key) => key,
            None => {
                return Err(malformed(
                    input,
                    "its list of storage keys holds something other than a string".to_string(),
                ));
            }
        };
        let Some(&(unit, numel, _)) = units.get(key.as_str()) else {
            return Err(malformed(
                input,
                format!(
                    "its list of storages names {}, which no tensor uses",
                    excerpt(&key)
                ),
            ));
        };
        let mut count = [0u8; 8];
        if at.checked_add(8).is_none_or(|end| end > file_len) {
            return Err(malformed(
                input,
                format!(
                    "it ends at byte {file_len}, before the count of storage {} at byte {at}: \
                     the file is cut short",
                    excerpt(&key)
                ),
            ));
        }
        source
            .read_range(at, &mut count)
            .map_err(|e| input.io_error("read", e))?;
        let count = u64::from_le_bytes(count);
        if count != numel {
            return Err(malformed(
                input,
                format!(
                    "its storage {} is stored with a count of {count} elements at byte {at}, \
                     but its pickle says {numel}",
                    excerpt(&key)
                ),
            ));
        }
        let start = at + 8;
        let end = count
            .checked_mul(unit)
            .and_then(|bytes| start.checked_add(bytes));
        match end {
            Some(end) if end <= file_len => {
                places.insert(key, start);
                at = end;
            }
            _ => {
                return Err(malformed(
                    input,
                    format!(
                        "its storage {} of {count} elements of {unit} byte{} from byte {start} \
                         reaches past the end of the file ({file_len} bytes): the file is cut \
                         short",
                        excerpt(&key),
                        if unit == 1 { "" } else { "s" }
                    ),
                ));
            }
        }
    }
    Ok(places)
}

/// `1 element`, `4 elements`.
fn elements(n: u64) -> String {
    format!("{n} element{}", if n == 1 { "" } else { "s" })
}

fn keys_node(keys: &Pickled, id: value::Id) -> Option<String> {
    match keys.node(id) {
        Node::Str(key) => Some(key.to_string()),
        Node::Int(key) => Some(key.to_string()),
        _ => None,
    }
}

/// The five pickles of the legacy form, checked, and where the storages start.
fn legacy_pickles(bytes: &[u8]) -> std::result::Result<([Pickled; 5], u64), Fault> {
    let mut at = 0usize;
    let next = |at: &mut usize| -> std::result::Result<Pickled, Fault> {
        let pickled = vm::run(&bytes[*at..], vm::LIMITS).map_err(|mut fault| {
            fault.at += *at as u64;
            fault
        })?;
        *at += pickled.len;
        Ok(pickled)
    };
    let magic = next(&mut at)?;
    let protocol = next(&mut at)?;
    let sys_info = next(&mut at)?;
    if !matches!(protocol.node(protocol.root), Node::Int(LEGACY_PROTOCOL)) {
        return Err(Fault {
            at: magic.len as u64,
            opcode: None,
            kind: FaultKind::Refused(
                "its protocol version is not 1001, the one torch.save's legacy form writes"
                    .to_string(),
            ),
        });
    }
    let data = next(&mut at)?;
    let keys = next(&mut at)?;
    Ok(([magic, protocol, sys_info, data, keys], at as u64))
}
