//! AnnData stores written by anndata (the fixtures `anndata_v3.zarr`, `anndata_v2.zarr`) and
//! then made invalid: their `obs` dataframe's `column-order` names a column that is not there
//! or 200,000 of them, or `_index` is missing (the attribute, or the array it names). anndata
//! cannot read such a dataframe; zarrow's queries refuse it and `tree` marks it invalid.

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use crate::copy_dir;

/// One way of making `obs` invalid.
pub struct Case {
    /// A name for messages and directories.
    pub name: &'static str,
    /// The attribute the reason is about.
    pub attribute: &'static str,
    /// The reason zarrow gives (after `invalid metadata for '…' (<attribute>): `).
    pub reason: &'static str,
    edit: fn(&mut Map<String, Value>),
    /// The `_index` array is removed too.
    remove_index_array: bool,
}

/// Every case.
pub fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "missing_column",
            attribute: "column-order",
            reason: "names the column 'gone', which the group does not hold",
            edit: |a| {
                a["column-order"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!("gone"))
            },
            remove_index_array: false,
        },
        Case {
            name: "huge_column_order",
            attribute: "column-order",
            reason: "names the column 'c000000', which the group does not hold",
            edit: |a| {
                let huge: Vec<String> = (0..200_000).map(|i| format!("c{i:06}")).collect();
                a["column-order"] = json!(huge);
            },
            remove_index_array: false,
        },
        Case {
            name: "no_index_attribute",
            attribute: "_index",
            reason: "no such attribute, naming the index column",
            edit: |a| {
                a.remove("_index");
            },
            remove_index_array: false,
        },
        Case {
            name: "no_index_array",
            attribute: "_index",
            reason: "names the index column '_index', which the group does not hold",
            edit: |_| {},
            remove_index_array: true,
        },
    ]
}

/// The stores the cases are applied to: one v3, one v2, both consolidated at the root.
pub const STORES: [&str; 2] = ["anndata_v3.zarr", "anndata_v2.zarr"];

impl Case {
    /// The fixture store `store` copied under `dir` with this case applied to its `obs`, in
    /// its own metadata document and in the root's consolidated metadata (zarrow reads the
    /// one opening `obs`, the other walking from the root): the copy's path.
    pub fn apply(&self, dir: &Path, store: &str) -> PathBuf {
        let copy = dir.join(format!("{}_{store}", self.name));
        copy_dir(&crate::fixtures_dir().join(store), &copy);
        let v3 = copy.join("zarr.json").exists();
        let edit = |attributes: &mut Value| (self.edit)(attributes.as_object_mut().unwrap());
        if v3 {
            rewrite(&copy.join("obs/zarr.json"), |doc| {
                edit(&mut doc["attributes"])
            });
            rewrite(&copy.join("zarr.json"), |doc| {
                edit(&mut doc["consolidated_metadata"]["metadata"]["obs"]["attributes"])
            });
        } else {
            rewrite(&copy.join("obs/.zattrs"), edit);
            rewrite(&copy.join(".zmetadata"), |doc| {
                edit(&mut doc["metadata"]["obs/.zattrs"])
            });
        }
        if self.remove_index_array {
            std::fs::remove_dir_all(copy.join("obs/_index")).unwrap();
            let consolidated = if v3 { "zarr.json" } else { ".zmetadata" };
            rewrite(&copy.join(consolidated), |doc| {
                let entries = match doc.get_mut("consolidated_metadata") {
                    Some(c) => &mut c["metadata"],
                    None => &mut doc["metadata"],
                };
                entries
                    .as_object_mut()
                    .unwrap()
                    .retain(|key, _| !key.starts_with("obs/_index"));
            });
        }
        copy
    }
}

/// The JSON document at `path` changed by `f`.
fn rewrite(path: &Path, f: impl FnOnce(&mut Value)) {
    let mut doc: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    f(&mut doc);
    std::fs::write(path, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
}
