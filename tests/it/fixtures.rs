//! Every fixture array reads exactly as its writer's reader reads it, in every string type.

use arrow::array::Array;
use zarrow::StringType;

use crate::common::{expected_entries, json_value, location, read_c_order, values_equal};

fn check_all(string_type: StringType) {
    let entries = expected_entries();
    assert!(
        entries.len() >= 100,
        "fixtures missing: found {} entries",
        entries.len()
    );
    check_entries(&entries, string_type, location);
}

/// Read every entry at `locate(store, path)` and compare all values.
pub fn check_entries(
    entries: &[serde_json::Value],
    string_type: StringType,
    locate: impl Fn(&str, &str) -> String,
) {
    let mut failures = Vec::new();
    for e in entries {
        let store = e["store"].as_str().unwrap();
        let path = e["path"].as_str().unwrap();
        let kind = e["kind"].as_str().unwrap();
        let loc = locate(store, path);
        let expected = e["values"].as_array().unwrap();
        match read_c_order(&loc, string_type) {
            Err(err) => failures.push(format!("{store}/{path}: {err}")),
            Ok((shape, array)) => {
                let want_shape: Vec<u64> = e["shape"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_u64().unwrap())
                    .collect();
                if shape != want_shape {
                    failures.push(format!(
                        "{store}/{path}: shape {shape:?}, expected {want_shape:?}"
                    ));
                    continue;
                }
                if array.len() != expected.len() {
                    failures.push(format!(
                        "{store}/{path}: {} values, expected {}",
                        array.len(),
                        expected.len()
                    ));
                    continue;
                }
                for (i, want) in expected.iter().enumerate() {
                    let got = json_value(array.as_ref(), i, kind);
                    if !values_equal(want, &got) {
                        failures.push(format!(
                            "{store}/{path}[{i}] ({kind}): got {got}, expected {want}"
                        ));
                        break;
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} fixture arrays differ:\n{}",
        failures.len(),
        entries.len(),
        failures.join("\n")
    );
}

#[test]
fn fixtures_read_as_utf8() {
    check_all(StringType::Utf8);
}

#[test]
fn fixtures_read_as_large_utf8() {
    check_all(StringType::LargeUtf8);
}

#[test]
fn fixtures_read_as_views() {
    check_all(StringType::View);
}
