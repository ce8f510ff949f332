//! Checks that the plan's codes are the generated bindings' values, and HRESULT names.

use super::*;
use plan::DataType;

#[test]
fn plan_codes_are_the_generated_bindings_values() {
    for (data_type, code) in [
        (DataType::Float32, DML_TENSOR_DATA_TYPE_FLOAT32),
        (DataType::Float16, DML_TENSOR_DATA_TYPE_FLOAT16),
        (DataType::UInt32, DML_TENSOR_DATA_TYPE_UINT32),
        (DataType::UInt16, DML_TENSOR_DATA_TYPE_UINT16),
        (DataType::UInt8, DML_TENSOR_DATA_TYPE_UINT8),
        (DataType::Int32, DML_TENSOR_DATA_TYPE_INT32),
        (DataType::Int16, DML_TENSOR_DATA_TYPE_INT16),
        (DataType::Int8, DML_TENSOR_DATA_TYPE_INT8),
        (DataType::Float64, DML_TENSOR_DATA_TYPE_FLOAT64),
        (DataType::UInt64, DML_TENSOR_DATA_TYPE_UINT64),
        (DataType::Int64, DML_TENSOR_DATA_TYPE_INT64),
    ] {
        assert_eq!(data_type.code(), code, "{data_type}");
    }
    let levels = [
        DML_FEATURE_LEVEL_1_0,
        DML_FEATURE_LEVEL_2_0,
        DML_FEATURE_LEVEL_2_1,
        DML_FEATURE_LEVEL_3_0,
        DML_FEATURE_LEVEL_3_1,
        DML_FEATURE_LEVEL_4_0,
        DML_FEATURE_LEVEL_4_1,
        DML_FEATURE_LEVEL_5_0,
        DML_FEATURE_LEVEL_5_1,
        DML_FEATURE_LEVEL_5_2,
        DML_FEATURE_LEVEL_6_0,
        DML_FEATURE_LEVEL_6_1,
        DML_FEATURE_LEVEL_6_2,
        DML_FEATURE_LEVEL_6_3,
        DML_FEATURE_LEVEL_6_4,
    ];
    assert_eq!(KNOWN_LEVELS.map(FeatureLevel::code), levels);
}

#[test]
fn hresults_are_named_when_known() {
    assert_eq!(
        hresult_text(DXGI_ERROR_NOT_FOUND),
        "DXGI_ERROR_NOT_FOUND (0x887A0002)"
    );
    assert_eq!(hresult_text(HRESULT(0x1234_5678)), "0x12345678");
}
