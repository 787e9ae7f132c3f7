//! The newest cases as zarrista 0.1.0 and zarrs-python 0.2.3 write them
//! (`zarrista_newest.zarr`, see `generate_zarrista.py`): low-precision types through
//! `packbits`, bfloat16, a rectilinear grid, an `optional` inside shards, and zarr-python
//! 3.4 with zarrs-python's codec pipeline writing sharded strings and sharded rectilinear
//! arrays. Each reads with its writer's values (also checked by the fixture walk).

use arrow::array::Array;
use serde_json::Value;
use zarrow::StringType;

use crate::common::{data_dir, location, read_c_order};
use crate::fixtures::check_entries;

fn entries() -> Vec<Value> {
    let text = std::fs::read(data_dir().join("expected_zarrista.json")).unwrap();
    serde_json::from_slice(&text).unwrap()
}

#[test]
fn zarrista_and_zarrs_python_arrays_read_as_their_writers_read_them() {
    let entries = entries();
    let writers = |w: &str| {
        entries
            .iter()
            .filter(|e| e["writer"].as_str().unwrap().starts_with(w))
            .count()
    };
    assert_eq!((writers("zarrista"), writers("zarrs-python")), (7, 2));
    for s in [StringType::Utf8, StringType::View] {
        check_entries(&entries, s, location);
    }
}

#[test]
fn a_sharded_optional_has_nulls_where_the_mask_says() {
    let loc = location("zarrista_newest.zarr", "optional_int16_sharded");
    let (shape, array) = read_c_order(&loc, StringType::Utf8).unwrap();
    assert_eq!(shape, vec![12]);
    let nulls: Vec<usize> = (0..array.len()).filter(|&i| array.is_null(i)).collect();
    assert_eq!(nulls, vec![1, 6, 7, 8, 10]);
}
