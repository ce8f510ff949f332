//! The checks of a whole file's tensors and the ggml type table.

use super::header::{Parsed, parse_header};
use super::types::GgmlType;
use super::*;

fn header_of(tensors: &[(&str, u64, u64)], len: usize) -> (Header, u64) {
    let mut b = header::MAGIC.to_vec();
    b.extend_from_slice(&3u32.to_le_bytes());
    b.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
    b.extend_from_slice(&0u64.to_le_bytes());
    for (name, elems, offset) in tensors {
        header::encode_text(&mut b, name);
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&elems.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&offset.to_le_bytes());
    }
    b.resize(len.max(b.len()), 0);
    match parse_header(&b, b.len() as u64) {
        Ok(Parsed::Header(h)) => (h, b.len() as u64),
        other => panic!("{other:?}"),
    }
}

#[test]
fn overlapping_tensors_are_refused_naming_both() {
    let (h, len) = header_of(&[("a", 8, 0), ("b", 8, 32)], 4096);
    check_data(&h, len).expect("disjoint");
    let (h, len) = header_of(&[("a", 8, 0), ("b", 8, 32), ("c", 8, 32)], 4096);
    let why = check_data(&h, len).expect_err("b and c overlap");
    assert!(
        why.contains("`b`") && why.contains("`c`") && why.contains("overlap"),
        "{why}"
    );
    let (h, len) = header_of(&[("a", 8, 0), ("b", 100, 32)], 200);
    assert!(check_data(&h, len).expect_err("past").contains("`b`"));
}

#[test]
fn sizes_follow_from_type_and_first_dimension() {
    let q4k = GgmlType::from_code(12).expect("Q4_K");
    assert_eq!(q4k.name(), "Q4_K");
    assert!(q4k.is_quantized() && q4k.dtype().is_none());
    assert_eq!(q4k.bytes(&[512, 3]), Ok(2 * 3 * 144));
    let q8 = GgmlType::from_code(8).expect("Q8_0");
    assert_eq!(q8.bytes(&[64, 2]), Ok(2 * 2 * 34));
    let bf16 = GgmlType::from_code(30).expect("BF16");
    assert_eq!(bf16.dtype(), Some(crate::dtype::DType::BFloat16));
    assert_eq!(bf16.bytes(&[]), Ok(2));
    assert!(GgmlType::from_code(31).is_none());
}
