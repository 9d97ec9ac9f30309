//! `_kafka_rescue` layouts: the exact compact JSON text for unknown members at every level,
//! unconvertible values, merged places, arrays with placeholders, maps keyed by map key,
//! flat-layout system-name conflicts, and the `_kafka_rescue` member itself.

mod common;

use common::*;
use kafluss_convert::{ConversionPlan, DataType};

fn rescue_of(plan: &ConversionPlan, json: &str) -> String {
    let batch = convert(plan, &[json]).unwrap_or_else(|e| panic!("{json}: {e}"));
    let index = batch.schema().index_of("_kafka_rescue").unwrap();
    cell(batch.column(index).as_ref(), 0)
}

fn stored(plan: &ConversionPlan, json: &str) -> String {
    let batch = convert(plan, &[json]).unwrap_or_else(|e| panic!("{json}: {e}"));
    render_row(&batch, 0)
}

fn flat() -> ConversionPlan {
    flat_plan(vec![
        col("id", DataType::BigInt),
        col(
            "r",
            row(vec![col("a", DataType::Int), col("b", DataType::String)]),
        ),
        col("arr", array(DataType::Int)),
        col("rows", array(row(vec![col("q", DataType::Int)]))),
        col("m", map(row(vec![col("a", DataType::Int)]))),
        col("_kafka_rescue", DataType::String),
    ])
}

#[test]
fn nothing_to_rescue_is_null() {
    let plan = flat();
    assert_eq!(
        rescue_of(&plan, r#"{"id":1,"r":{"a":1},"arr":[1],"m":{"k":{"a":1}}}"#),
        "null"
    );
    assert_eq!(rescue_of(&plan, r#"{"_kafka_rescue":null}"#), "null");
}

#[test]
fn table_of_layouts() {
    let plan = flat();
    let cases: &[(&str, &str)] = &[
        // Unknown root members, in input order; numbers keep their exact text.
        (
            r#"{"x":1.50,"id":1,"y":{"z":[1e400,-0]}}"#,
            r#"{"x":1.50,"y":{"z":[1e400,-0]}}"#,
        ),
        // An unconvertible root value.
        (r#"{"id":"7"}"#, r#"{"id":"7"}"#),
        (r#"{"id":1.0}"#, r#"{"id":1.0}"#),
        // Unknown and unconvertible members of a nested ROW merge at its place.
        (
            r#"{"r":{"a":"bad","z":2,"b":"ok"}}"#,
            r#"{"r":{"a":"bad","z":2}}"#,
        ),
        // Root members rescued whole come first, then nested places by field name.
        (
            r#"{"r":{"z":1},"x":2,"id":"s","y":3}"#,
            r#"{"x":2,"id":"s","y":3,"r":{"z":1}}"#,
        ),
        // Arrays keep their length with null placeholders.
        (r#"{"arr":[1,"two",3,4.5]}"#, r#"{"arr":[null,"two",null,4.5]}"#),
        (
            r#"{"rows":[{"q":1},{"q":"x","w":true},{"q":3}]}"#,
            r#"{"rows":[null,{"q":"x","w":true},null]}"#,
        ),
        // Maps are keyed by map key.
        (
            r#"{"m":{"k1":{"a":1},"k2":{"a":"x"},"k3":7}}"#,
            r#"{"m":{"k3":7,"k2":{"a":"x"}}}"#,
        ),
        // A container of the wrong kind is rescued whole.
        (
            r#"{"r":[1],"arr":{"a":1},"m":"s"}"#,
            r#"{"r":[1],"arr":{"a":1},"m":"s"}"#,
        ),
        // Strings are re-escaped compactly.
        (r#"{"s":"a\"b\\c\u0041\n\/\u00e9"}"#, r#"{"s":"a\"b\\cA\n/é"}"#),
        // Flat layout: members named like system columns are rescued, null ones too,
        // except a null `_kafka_rescue`.
        (
            r#"{"_kafka_key":"k","_kafka_value":{"a":1},"_kafka_headers":null,"_kafka_metadata":1,"_kafka_rescue":"r"}"#,
            r#"{"_kafka_key":"k","_kafka_value":{"a":1},"_kafka_headers":null,"_kafka_metadata":1,"_kafka_rescue":"r"}"#,
        ),
        (r#"{"_kafka_rescue":null,"zz":null}"#, r#"{"zz":null}"#),
        (r#"{"_kafka_rescue":{"a":1}}"#, r#"{"_kafka_rescue":{"a":1}}"#),
    ];
    for (json, want) in cases {
        assert_eq!(rescue_of(&plan, json), quote(want), "{json}");
    }
}

#[test]
fn valid_siblings_are_kept() {
    let plan = flat();
    assert_eq!(
        stored(
            &plan,
            r#"{"id":2,"r":{"a":"bad","b":"ok"},"arr":[1,"x",3],"m":{"k1":{"a":1},"k2":{"a":"x"}},"zz":0}"#
        ),
        r#"{"id":2,"r":{"a":null,"b":"ok"},"arr":[1,null,3],"rows":null,"m":{"k1":{"a":1},"k2":{"a":null}},"_kafka_rescue":"{\"zz\":0,\"r\":{\"a\":\"bad\"},\"arr\":[null,\"x\",null],\"m\":{\"k2\":{\"a\":\"x\"}}}"}"#
    );
}

#[test]
fn deep_nesting_mirrors_the_structure() {
    let plan = flat_plan(vec![
        col("a", array(map(array(row(vec![col("v", DataType::Boolean)]))))),
        col("_kafka_rescue", DataType::String),
    ]);
    let json = r#"{"a":[{"k":[{"v":true},{"v":1}]},{"j":[]},{"x":[{"v":false,"u":0}]}]}"#;
    assert_eq!(
        rescue_of(&plan, json),
        quote(r#"{"a":[{"k":[null,{"v":1}]},null,{"x":[{"u":0}]}]}"#)
    );
    assert_eq!(
        stored(&plan, json),
        r#"{"a":[{"k":[{"v":true},{"v":null}]},{"j":[]},{"x":[{"v":false}]}],"_kafka_rescue":"{\"a\":[{\"k\":[null,{\"v\":1}]},null,{\"x\":[{\"u\":0}]}]}"}"#
    );
}

#[test]
fn nested_layout_rescue_mirrors_the_json_root() {
    let plan = nested_plan(vec![
        col("_kafka_key", DataType::Bytes),
        col(
            "_kafka_value",
            row(vec![
                col("a", DataType::Int),
                col("r", row(vec![col("b", DataType::Date)])),
            ]),
        ),
        col("_kafka_rescue", DataType::String),
    ]);
    assert_eq!(
        rescue_of(
            &plan,
            r#"{"a":"x","r":{"b":"2023-02-29","c":1},"_kafka_key":"k","zz":[]}"#
        ),
        quote(r#"{"a":"x","_kafka_key":"k","zz":[],"r":{"b":"2023-02-29","c":1}}"#)
    );
    assert_eq!(rescue_of(&plan, r#"{"_kafka_rescue":null}"#), "null");
    assert_eq!(
        rescue_of(&plan, r#"{"_kafka_rescue":0}"#),
        quote(r#"{"_kafka_rescue":0}"#)
    );
}

#[test]
fn without_rescue_column_each_kind_fails() {
    let plan = flat_plan(vec![
        col("id", DataType::BigInt),
        col("r", row(vec![col("a", DataType::Int)])),
    ]);
    let cases = [
        (r#"{"zz":1}"#, "record 0: $.zz: unknown field and there is no _kafka_rescue column"),
        (r#"{"zz":null}"#, "record 0: $.zz: unknown field and there is no _kafka_rescue column"),
        (r#"{"r":{"zz":1}}"#, "record 0: $.r.zz: unknown field and there is no _kafka_rescue column"),
        (
            r#"{"_kafka_key":"k"}"#,
            "record 0: $._kafka_key: member name is reserved for the system column _kafka_key and there is no _kafka_rescue column",
        ),
        (r#"{"id":"x"}"#, r#"record 0: $.id: expected BIGINT, got string "x""#),
    ];
    for (json, want) in cases {
        assert_eq!(convert_one(&plan, json).unwrap_err().to_string(), want, "{json}");
    }
    // A null `_kafka_rescue` member is not an unknown field.
    assert_eq!(
        convert_one(&plan, r#"{"_kafka_rescue":null,"id":1}"#).unwrap(),
        r#"{"id":1,"r":null}"#
    );
    // In the nested layout system names are ordinary inside `_kafka_value`: such a member is
    // an unknown field like any other, and its refusal says so.
    let nested = nested_plan(vec![col("_kafka_value", row(vec![col("a", DataType::Int)]))]);
    for name in ["_kafka_key", "_kafka_rescue"] {
        assert_eq!(
            convert_one(&nested, &format!(r#"{{"{name}":1}}"#))
                .unwrap_err()
                .to_string(),
            format!("record 0: $.{name}: unknown field and there is no _kafka_rescue column"),
        );
    }
}
