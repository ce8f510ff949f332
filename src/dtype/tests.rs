//! The element types' unit tests: names in every vocabulary, byte swaps, promotion.

use super::*;

#[test]
fn swaps_reverse_each_unit_of_each_element() {
    let mut bytes = [1, 2, 3, 4, 5, 6, 7, 8];
    swap_in_place(&mut bytes, 4, &Swaps::Uniform(2));
    assert_eq!(bytes, [2, 1, 4, 3, 6, 5, 8, 7]);
    let mut records = [1, 2, 3, 9, 4, 5, 6, 9];
    swap_in_place(&mut records, 4, &Swaps::Ranges(Box::new(vec![(0, 3)])));
    assert_eq!(records, [3, 2, 1, 9, 6, 5, 4, 9]);
}

fn parse(descr: &str) -> (DType, ByteOrder) {
    let stored = DType::from_npy(&npyz::DType::parse(descr).unwrap()).unwrap();
    (stored.dtype, stored.order)
}

#[test]
fn plain_types_round_trip_through_descr() {
    for descr in [
        "'<f4'",
        "'>i8'",
        "'|b1'",
        "'|u1'",
        "'<c16'",
        "'<M8[ns]'",
        "'>m8[s]'",
        "'|S5'",
        "'<U3'",
        "'|V4'",
        "'<f2'",
    ] {
        let (dtype, order) = parse(descr);
        assert_eq!(dtype.npy_descr(order), descr);
    }
}

#[test]
fn records_are_written_as_numpy_writes_them() {
    let descr = "[('a', '<i4'), ('b', '<f8', (2,)), ('c', [('d', '|u1'), ('e', '<i2', (2, 3))])]";
    let (dtype, order) = parse(descr);
    assert_eq!(dtype.npy_descr(order), descr);
    assert_eq!(dtype.itemsize(), 4 + 16 + 1 + 12);
}

#[test]
fn big_endian_record_fields_become_little_with_their_swaps() {
    let descr = "[('a', '>i4'), ('b', '|u1'), ('c', '>f2', (2,))]";
    let stored = DType::from_npy(&npyz::DType::parse(descr).unwrap()).unwrap();
    assert_eq!(
        stored.dtype.npy_descr(stored.order),
        "[('a', '<i4'), ('b', '|u1'), ('c', '<f2', (2,))]"
    );
    assert_eq!(
        stored.swaps,
        Swaps::Ranges(Box::new(vec![(0, 4), (5, 2), (7, 2)]))
    );
}

#[test]
fn swap_units_follow_the_element_structure() {
    assert_eq!(DType::Complex128.swap_width(), Some(8));
    assert_eq!(DType::Unicode(3).swap_width(), Some(4));
    assert_eq!(DType::Bytes(5).swap_width(), None);
    assert_eq!(DType::UInt8.swap_width(), None);
    assert_eq!(DType::Float16.swap_width(), Some(2));
}

#[test]
fn object_arrays_are_refused_with_the_reason() {
    let dtype = npyz::DType::parse("'|O'").unwrap();
    assert!(
        DType::from_npy(&dtype)
            .unwrap_err()
            .contains("Python objects")
    );
}

/// Each vocabulary's column of [`NAMES`]: its name for a type, by the method the rest of
/// tjoin calls, and the column itself.
type Column = (
    &'static str,
    fn(&DType) -> Option<&'static str>,
    fn(&Names) -> Option<&'static str>,
);

const COLUMNS: [Column; 5] = [
    (
        "numpy",
        |d| d.names().map(|row| row.numpy),
        |row| Some(row.numpy),
    ),
    ("safetensors", DType::safetensors_name, |row| {
        row.safetensors
    }),
    ("ONNX", DType::onnx_name, |row| row.onnx),
    ("OpenVINO", DType::openvino_name, |row| row.openvino),
    ("DirectML", DType::directml_name, |row| row.directml),
];

#[test]
fn every_name_of_the_table_round_trips() {
    for (vocabulary, name_of, column) in COLUMNS {
        for row in &NAMES {
            assert_eq!(
                name_of(&row.dtype),
                column(row),
                "{vocabulary}: {:?}",
                row.dtype
            );
            let Some(name) = column(row) else { continue };
            // One type per name, so that a name read back is the type written.
            let named: Vec<&DType> = NAMES
                .iter()
                .filter(|other| column(other) == Some(name))
                .map(|other| &other.dtype)
                .collect();
            assert_eq!(named, [&row.dtype], "{vocabulary} name {name}");
        }
    }
    for row in &NAMES {
        assert_eq!(row.dtype.names().map(|r| r.numpy), Some(row.numpy));
        assert_eq!(DType::from_name(row.numpy).as_ref(), Some(&row.dtype));
        assert_eq!(row.dtype.to_string(), row.numpy);
        if let Some(name) = row.safetensors {
            assert_eq!(DType::from_safetensors(name).as_ref(), Some(&row.dtype));
        }
        assert_eq!(row.dtype.in_npy(), row.descr.is_some(), "{:?}", row.dtype);
        if let Some(code) = row.descr {
            // The byte orders numpy writes the type in.
            let orders: &[char] = match row.dtype.swap_width() {
                Some(_) => &['<', '>'],
                None => &['|'],
            };
            for order in orders {
                let descr = format!("'{order}{code}'");
                let (dtype, stored) = parse(&descr);
                assert_eq!(dtype, row.dtype, "{descr}");
                assert_eq!(dtype.npy_descr(stored), descr);
            }
        }
    }
    // The parameterized types are outside the table; strings have an ONNX and an
    // OpenVINO name all the same.
    assert_eq!(DType::Unicode(3).onnx_name(), Some("string"));
    assert_eq!(DType::Bytes(3).openvino_name(), Some("string"));
    assert_eq!(DType::Bytes(3).directml_name(), None);
    assert_eq!(DType::DateTime64("ns".into()).safetensors_name(), None);
}

#[test]
fn safetensors_ranks_follow_its_dtype_order_and_sub_byte_sizes_count_bits() {
    let order = [
        "BOOL",
        "F4",
        "F6_E2M3",
        "F6_E3M2",
        "U8",
        "I8",
        "F8_E5M2",
        "F8_E4M3",
        "F8_E8M0",
        "F8_E4M3FNUZ",
        "F8_E5M2FNUZ",
        "I16",
        "U16",
        "F16",
        "BF16",
        "I32",
        "U32",
        "F32",
        "C64",
        "F64",
        "I64",
        "U64",
    ];
    for (rank, name) in order.into_iter().enumerate() {
        let dtype = DType::from_safetensors(name).unwrap();
        assert_eq!(dtype.safetensors_rank(), Some(rank), "{name}");
    }
    assert_eq!(DType::Complex128.safetensors_name(), None);
    assert_eq!(DType::Complex128.safetensors_rank(), None);
    assert_eq!(DType::Float4.bytes_for(6), Some(3));
    assert_eq!(DType::Float4.bytes_for(3), None);
    assert_eq!(DType::Float6E2M3.bytes_for(4), Some(3));
    assert_eq!(DType::Float6E3M2.bytes_for(2), None);
    assert_eq!(DType::BFloat16.bytes_for(3), Some(6));
    assert_eq!(DType::BFloat16.to_string(), "bfloat16");
    assert!(!DType::Float8E5M2.in_npy() && DType::Float16.in_npy());
}

#[test]
fn parameterized_names_round_trip_through_from_name() {
    for dtype in [
        DType::DateTime64("ns".into()),
        DType::Unicode(5),
        DType::Bytes(3),
    ] {
        assert_eq!(DType::from_name(&dtype.to_string()), Some(dtype));
    }
    assert_eq!(DType::from_name("<U5"), Some(DType::Unicode(5)));
    assert_eq!(DType::from_name("|S3"), Some(DType::Bytes(3)));
    assert_eq!(DType::from_name("float"), None);
}

#[test]
fn python_strings_escape_like_repr() {
    assert_eq!(python_str("a"), "'a'");
    assert_eq!(python_str("it's"), "\"it's\"");
    assert_eq!(python_str("é"), "'é'");
}
