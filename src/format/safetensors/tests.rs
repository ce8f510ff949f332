//! The safetensors header: what the crate writes, and what it refuses.

use super::*;

fn out(name: &str, dtype: DType, shape: &[u64]) -> OutTensor {
    let elements: u64 = shape.iter().product();
    OutTensor {
        name: name.to_string(),
        bytes: dtype.bytes_for(elements).unwrap(),
        dtype,
        shape: shape.to_vec(),
        layout: Layout::C,
    }
}

#[test]
fn header_is_what_the_crate_writes() {
    let tensors = [
        out("b", DType::Float32, &[2, 2]),
        out("a", DType::UInt8, &[3]),
    ];
    let metadata = BTreeMap::from([("format".to_string(), "pt".to_string())]);
    let text = header(Some(&metadata), &tensors).unwrap();
    assert_eq!(text.len() % 8, 0);
    assert_eq!(
        String::from_utf8(text).unwrap().trim_end(),
        r#"{"__metadata__":{"format":"pt"},"b":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"a":{"dtype":"U8","shape":[3],"data_offsets":[16,19]}}"#
    );
}

#[test]
fn order_is_alignment_then_name() {
    let tensors = [
        out("z", DType::UInt8, &[1]),
        out("b", DType::Float32, &[1]),
        out("a", DType::Float32, &[1]),
        out("c", DType::Float64, &[1]),
    ];
    let writer = SafeTensorsWriter { metadata: None };
    assert_eq!(writer.order(&tensors), [3, 2, 1, 0]);
}

proptest::proptest! {
    #[test]
    fn random_headers_never_panic(text in r#"\{("[a-c]":\{"dtype":"(F32|F4|U8|BF16)","shape":\[[0-9,]{0,12}\],"data_offsets":\[[0-9]{1,20},[0-9]{1,20}\]\},?){0,3}\}"#) {
        let _ = parse_text(text.as_bytes());
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
        let _ = parse_text(&bytes);
    }
}

#[test]
fn escapes_are_decoded_and_checked_as_json_says() {
    let header = br#"{"\u00e9\ud83d\ude00\n":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}"#;
    assert_eq!(
        parse_text(header).unwrap().tensors[0].name,
        "\u{e9}\u{1f600}\n"
    );
    // Four hex digits, not a number with a sign (from_str_radix took "+0e9").
    let header = br#"{"\u+0e9":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}"#;
    assert!(
        parse_text(header)
            .unwrap_err()
            .contains("a \\u escape needs four hex digits")
    );
    let header = br#"{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}"#;
    assert!(parse_text(header).unwrap_err().contains("not valid JSON"));
}

#[test]
fn sub_byte_tensors_must_fill_whole_bytes() {
    let header = br#"{"x":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}"#;
    assert!(
        parse_text(header)
            .unwrap_err()
            .contains("whole number of bytes")
    );
    let header = br#"{"x":{"dtype":"F6_E2M3","shape":[4],"data_offsets":[0,3]}}"#;
    assert_eq!(parse_text(header).unwrap().end, 3);
}

#[test]
fn parse_header_asks_for_the_bytes_it_needs_then_reads_them() {
    let text = br#"{"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]}}"#;
    let mut file = (text.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(text);
    file.extend_from_slice(&[1, 2, 3]);
    assert_eq!(parse_header(&file[..5]).unwrap_err(), Parse::Need(8));
    let data_start = 8 + text.len() as u64;
    assert_eq!(
        parse_header(&file[..9]).unwrap_err(),
        Parse::Need(data_start)
    );
    let header = parse_header(&file).unwrap();
    assert_eq!((header.data_start, header.end), (data_start, 3));
    assert_eq!(check_data_len(&header, 3), Ok(()));
    assert!(
        check_data_len(&header, 2)
            .unwrap_err()
            .contains("truncated")
    );
    let huge = (MAX_HEADER_LEN + 1).to_le_bytes();
    assert!(matches!(parse_header(&huge), Err(Parse::Malformed(_))));
}
