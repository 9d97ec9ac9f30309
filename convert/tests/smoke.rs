mod common;

use common::*;
use kafluss_convert::DataType;

#[test]
fn flat_json_converts() {
    let plan = flat_plan(vec![
        col("order_id", DataType::BigInt),
        col(
            "amount",
            DataType::Decimal {
                precision: 18,
                scale: 2,
            },
        ),
        col("_kafka_rescue", DataType::String),
    ]);
    let batch = convert(
        &plan,
        &[
            r#"{"order_id": 1, "amount": 12.3}"#,
            r#"{"order_id": "x", "amount": "1.50", "extra": [1, 2]}"#,
        ],
    )
    .unwrap();
    assert_eq!(
        render_row(&batch, 0),
        r#"{"order_id":1,"amount":"12.30","_kafka_rescue":null}"#
    );
    assert_eq!(
        render_row(&batch, 1),
        r#"{"order_id":null,"amount":"1.50","_kafka_rescue":"{\"order_id\":\"x\",\"extra\":[1,2]}"}"#
    );
}
