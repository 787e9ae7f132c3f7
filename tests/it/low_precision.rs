//! Low-precision data types, `packbits`, `scale_offset` and `cast_value`
//! (`newest_lowprec.zarr`, written by tensorstore or hand-made per the zarr-extensions specs,
//! see `generate_newest.py`): each array reads with its writer's values (also checked by the
//! fixture walk) as the Arrow type `docs/tables.md` names.

use arrow::array::Array;
use serde_json::Value;
use zarrow::StringType;

use crate::common::{data_dir, location, read_c_order};
use crate::fixtures::check_entries;

fn entries() -> Vec<Value> {
    let text = std::fs::read(data_dir().join("expected_newest.json")).unwrap();
    serde_json::from_slice(&text).unwrap()
}

#[test]
fn every_low_precision_array_reads_as_its_writer_reads_it() {
    let entries = entries();
    // Every type of the mapping, from tensorstore and hand-made, packbits in each padding,
    // and scale_offset / cast_value in and around shards.
    let core = ["bool", "int16", "float32", "float64"];
    let types: std::collections::BTreeSet<&str> = entries
        .iter()
        .map(|e| e["dtype"].as_str().unwrap())
        .filter(|t| !core.contains(t))
        .collect();
    assert_eq!(types.len(), 15, "{types:?}");
    let codecs = |name: &str| {
        entries
            .iter()
            .filter(|e| e["path"].as_str().unwrap().contains(name))
            .count()
    };
    assert_eq!((codecs("packbits"), codecs("cast")), (6, 4));
    let writers = |w: &str| {
        entries
            .iter()
            .filter(|e| e["writer"].as_str().unwrap().starts_with(w))
            .count()
    };
    assert!(writers("tensorstore") >= 10 && writers("hand-made") >= 10);
    check_entries(&entries, StringType::Utf8, location);
}

#[test]
fn low_precision_types_widen_to_the_documented_arrow_types() {
    for e in entries() {
        let (store, path) = (e["store"].as_str().unwrap(), e["path"].as_str().unwrap());
        let (_, array) = read_c_order(&location(store, path), StringType::Utf8).unwrap();
        assert_eq!(
            array.data_type().to_string(),
            e["arrow"].as_str().unwrap(),
            "{path} ({})",
            e["dtype"]
        );
    }
}
