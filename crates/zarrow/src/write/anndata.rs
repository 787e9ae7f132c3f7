//! The AnnData dataframe layout (`layout 'anndata'`): what `anndata.io.read_elem` reads as a
//! pandas DataFrame. A table column becomes one stored array or an encoded group of them:
//!
//! - the index (`index` option, a string column; default `_index`, the row numbers as
//!   strings, as anndata makes them): a `string-array`, named by the group's `_index`;
//! - Dictionary columns: a `categorical` group, `codes` (−1 for NULL) and `categories` (the
//!   distinct dictionary values in order of first appearance, written at the end);
//! - nullable integers, booleans and strings: `nullable-integer` / `nullable-boolean` /
//!   `nullable-string-array` groups, `values` (NULL as 0, false, "") and a boolean `mask`;
//! - anything else: an `array` (`string-array`) of its own, NULLs as in the xarray layout.
//!
//! The group carries `encoding-type: dataframe` and `column-order`. [`AnnDataFrame`] turns each
//! incoming batch into the stored arrays' values, so the table writer streams them unchanged.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{
    Array, ArrayRef, BooleanArray, Int32Array, Int64Array, RecordBatch, StringArray,
};
use arrow_schema::{DataType as ArrowType, Field, Schema};
use serde_json::{json, Map, Value};

use super::chunk::encode;
use super::column::{encoding_attributes, is_string, ColumnWriter};
use super::options::TableWriteOptions;
use crate::{Error, Result};

/// The name of a generated index, which no column may have.
const GENERATED_INDEX: &str = "_index";

/// A categorical column's categories so far.
#[derive(Debug)]
struct Categories {
    /// The categories' type (the dictionary's value type).
    values_type: ArrowType,
    /// Code of each category, by its bytes.
    codes: HashMap<Vec<u8>, i64>,
    /// The categories, in code order, as slices of the dictionaries they came from.
    parts: Vec<ArrayRef>,
    /// Codes are Int64 (64-bit dictionary keys), else Int32.
    wide: bool,
    /// The categories are ordered (the dictionary field's `dict_is_ordered`).
    ordered: bool,
}

#[derive(Debug)]
enum Kind {
    /// One array.
    Plain,
    /// `values` + `mask` (`encoding-type` the group's).
    Masked(&'static str),
    Categorical(Categories),
}

#[derive(Debug)]
struct Column {
    /// Its position in the input batches.
    input: usize,
    name: String,
    kind: Kind,
}

/// The AnnData layout of a table being written (see the module documentation).
#[derive(Debug)]
pub(crate) struct AnnDataFrame {
    /// The index column's position in the input, `None` for the generated `_index`.
    index: Option<usize>,
    index_name: String,
    columns: Vec<Column>,
}

/// Whether `field` was read from a plain AnnData array (`array`, `string-array`).
fn read_as_plain(field: &Field) -> bool {
    matches!(
        field
            .metadata()
            .get(crate::table::ENCODING_KEY)
            .map(String::as_str),
        Some("array" | "string-array")
    )
}

/// The bytes of each element of `values` (`None` for NULLs): what tells categories apart.
fn element_bytes(values: &dyn Array) -> Result<Vec<Option<Vec<u8>>>> {
    let nulls = values.logical_nulls();
    let valid = |i: usize| nulls.as_ref().is_none_or(|n| n.is_valid(i));
    match super::chunk::zarr_type(values.data_type())?.2 {
        Some(size) => {
            let bytes = encode::fixed_values(values, &vec![0; size])?;
            Ok(bytes
                .chunks_exact(size.max(1))
                .take(values.len())
                .enumerate()
                .map(|(i, b)| valid(i).then(|| b.to_vec()))
                .collect())
        }
        None => Ok(encode::byte_items(values)?
            .into_iter()
            .map(|b| b.map(<[u8]>::to_vec))
            .collect()),
    }
}

/// The index column's position in `schema` (`None` for the generated `_index`) and name:
/// the `index` option's (a string column), else the column zarrow's reader marks as a
/// dataframe's index (read from an AnnData dataframe: strings, or the numbers anndata also
/// writes and reads as an index).
fn index_column(schema: &Schema, options: &TableWriteOptions) -> Result<(Option<usize>, String)> {
    if options.index.is_none() {
        let marked = schema.fields().iter().enumerate().find(|(_, f)| {
            crate::table::is_anndata_index(f)
                && (is_string(f.data_type())
                    || f.data_type().is_integer()
                    || f.data_type().is_floating())
        });
        if let Some((at, field)) = marked {
            return Ok((Some(at), field.name().clone()));
        }
    }
    let index_option = options.index.clone();
    let index = match &index_option {
        Some(name) => {
            let invalid = |message: String| Error::invalid_option("index", message);
            let (at, field) = schema
                .column_with_name(name)
                .ok_or_else(|| invalid(format!("no column '{name}' in the input")))?;
            if !is_string(field.data_type()) {
                return Err(invalid(format!(
                    "column '{name}' is of type {}: an AnnData index is strings \
                     (cast it in the query)",
                    field.data_type()
                )));
            }
            Some(at)
        }
        None => None,
    };
    let name = index_option.unwrap_or_else(|| GENERATED_INDEX.to_string());
    Ok((index, name))
}

/// The writers of a dataframe's stored arrays, and their fields, in order.
#[derive(Default)]
struct StoredArrays {
    writers: Vec<ColumnWriter>,
    fields: Vec<Field>,
}

impl StoredArrays {
    /// An array at `path` of `field`'s values, with AnnData's `encoding`.
    fn add(&mut self, field: Field, path: String, encoding: &'static str) -> Result<()> {
        self.writers
            .push(ColumnWriter::new(&field, path.clone(), Some(encoding))?);
        self.fields
            .push(Field::new(path, field.data_type().clone(), true));
        Ok(())
    }
}

/// The AnnData encoding of `field`, its arrays added to `arrays`.
fn column_kind(field: &Field, arrays: &mut StoredArrays) -> Result<Kind> {
    let name = field.name();
    let array_encoding = |dt: &ArrowType| {
        if is_string(dt) {
            "string-array"
        } else {
            "array"
        }
    };
    Ok(match field.data_type() {
        dt @ ArrowType::Struct(_) => {
            return Err(Error::Write {
                path: name.clone(),
                message: format!(
                    "column '{name}' of type {dt}: an AnnData dataframe has no \
                     structured columns (use layout 'xarray')"
                ),
            })
        }
        ArrowType::Dictionary(key, values) => {
            let wide = matches!(key.as_ref(), ArrowType::Int64 | ArrowType::UInt64)
                || matches!(key.as_ref(), ArrowType::UInt32);
            let codes_type = if wide {
                ArrowType::Int64
            } else {
                ArrowType::Int32
            };
            arrays.add(
                Field::new("codes", codes_type, false),
                format!("{name}/codes"),
                "array",
            )?;
            // The categories' writer is made at the end, when their number is known; check
            // their type now.
            ColumnWriter::new(
                &Field::new("categories", values.as_ref().clone(), false),
                format!("{name}/categories"),
                Some("array"),
            )?;
            Kind::Categorical(Categories {
                values_type: values.as_ref().clone(),
                codes: HashMap::new(),
                parts: Vec::new(),
                wide,
                ordered: field.dict_is_ordered().unwrap_or(false),
            })
        }
        // Read from a plain AnnData array (`zarrow.encoding-type` says so): a plain array
        // again, as the source had it.
        dt if field.is_nullable()
            && !read_as_plain(field)
            && (dt.is_integer() || *dt == ArrowType::Boolean || is_string(dt)) =>
        {
            let encoding = if dt.is_integer() {
                "nullable-integer"
            } else if *dt == ArrowType::Boolean {
                "nullable-boolean"
            } else {
                "nullable-string-array"
            };
            arrays.add(
                Field::new(name, dt.clone(), true),
                format!("{name}/values"),
                array_encoding(dt),
            )?;
            arrays.add(
                Field::new("mask", ArrowType::Boolean, false),
                format!("{name}/mask"),
                "array",
            )?;
            Kind::Masked(encoding)
        }
        dt => {
            arrays.add(field.clone(), name.clone(), array_encoding(dt))?;
            Kind::Plain
        }
    })
}

impl AnnDataFrame {
    /// The layout of `schema`, and the writers of its stored arrays (the index first, then the
    /// columns' arrays in order); errors name the column.
    pub fn new(
        schema: &Schema,
        options: &TableWriteOptions,
    ) -> Result<(Self, Vec<ColumnWriter>, Vec<Field>)> {
        let (index, index_name) = index_column(schema, options)?;
        let mut arrays = StoredArrays::default();
        let index_type = index.map_or(ArrowType::Utf8, |at| schema.field(at).data_type().clone());
        let encoding = if is_string(&index_type) {
            "string-array"
        } else {
            "array"
        };
        arrays.add(
            Field::new(&index_name, index_type, false),
            index_name.clone(),
            encoding,
        )?;
        let mut columns = Vec::new();
        for (input, field) in schema.fields().iter().enumerate() {
            if Some(input) == index {
                continue;
            }
            let name = field.name().clone();
            if name == GENERATED_INDEX {
                return Err(Error::InvalidArgument(format!(
                    "column '{name}': AnnData reserves that name for the index"
                )));
            }
            let kind = column_kind(field, &mut arrays)?;
            columns.push(Column { input, name, kind });
        }
        Ok((
            Self {
                index,
                index_name,
                columns,
            },
            arrays.writers,
            arrays.fields,
        ))
    }

    /// The stored arrays' values of `batch`, whose first row is row `first_row` of the table.
    pub fn arrays(&mut self, batch: &RecordBatch, first_row: u64) -> Result<Vec<ArrayRef>> {
        let mut out = Vec::with_capacity(batch.num_columns() + 1);
        out.push(match self.index {
            Some(at) => {
                let index = batch.column(at);
                if index.null_count() > 0 {
                    return Err(Error::InvalidArgument(format!(
                        "index column '{}' holds NULLs: an AnnData index cannot",
                        self.index_name
                    )));
                }
                index.clone()
            }
            None => Arc::new(StringArray::from_iter_values(
                (first_row..first_row + batch.num_rows() as u64).map(|r| r.to_string()),
            )) as ArrayRef,
        });
        for column in &mut self.columns {
            let values = batch.column(column.input);
            match &mut column.kind {
                Kind::Plain => out.push(values.clone()),
                Kind::Masked(_) => {
                    let mask = match values.logical_nulls() {
                        Some(nulls) => BooleanArray::new(!nulls.inner(), None),
                        None => BooleanArray::from(vec![false; values.len()]),
                    };
                    out.push(values.clone());
                    out.push(Arc::new(mask));
                }
                Kind::Categorical(categories) => {
                    out.push(categories.codes_of(&column.name, values)?);
                }
            }
        }
        Ok(out)
    }

    /// The group's attributes.
    pub fn attributes(&self) -> Map<String, Value> {
        let mut attrs = encoding_attributes("dataframe", "0.2.0");
        attrs.insert("_index".into(), json!(self.index_name));
        let order: Vec<&str> = self.columns.iter().map(|c| c.name.as_str()).collect();
        attrs.insert("column-order".into(), json!(order));
        attrs
    }

    /// The encoded groups below the dataframe: (path, attributes).
    pub fn groups(&self) -> Vec<(String, Map<String, Value>)> {
        self.columns
            .iter()
            .filter_map(|c| match &c.kind {
                Kind::Plain => None,
                Kind::Masked(encoding) => {
                    Some((c.name.clone(), encoding_attributes(encoding, "0.1.0")))
                }
                Kind::Categorical(categories) => {
                    let mut attrs = encoding_attributes("categorical", "0.2.0");
                    attrs.insert("ordered".into(), json!(categories.ordered));
                    Some((c.name.clone(), attrs))
                }
            })
            .collect()
    }

    /// Each categorical column's categories array: its writer and values.
    pub fn categories(&self) -> Result<Vec<(ColumnWriter, ArrayRef)>> {
        let mut out = Vec::new();
        for c in &self.columns {
            if let Kind::Categorical(cat) = &c.kind {
                let values = match cat.parts.len() {
                    0 => arrow_array::new_empty_array(&cat.values_type),
                    _ => {
                        let parts: Vec<&dyn Array> = cat.parts.iter().map(|p| p.as_ref()).collect();
                        arrow_select::concat::concat(&parts)?
                    }
                };
                let field = Field::new("categories", cat.values_type.clone(), false);
                let encoding = if is_string(&cat.values_type) {
                    "string-array"
                } else {
                    "array"
                };
                let writer =
                    ColumnWriter::new(&field, format!("{}/categories", c.name), Some(encoding))?;
                out.push((writer, values));
            }
        }
        Ok(out)
    }
}

impl Categories {
    /// The codes of a dictionary array's rows, adding its new values to the categories.
    fn codes_of(&mut self, name: &str, values: &ArrayRef) -> Result<ArrayRef> {
        let dict = values.as_any_dictionary();
        let local = dict.values();
        // global code of each dictionary value (−1: a NULL value)
        let mut mapping = Vec::with_capacity(local.len());
        for (i, bytes) in element_bytes(local.as_ref())?.into_iter().enumerate() {
            let Some(bytes) = bytes else {
                mapping.push(-1i64);
                continue;
            };
            let next = self.codes.len() as i64;
            let code = *self.codes.entry(bytes).or_insert_with(|| {
                self.parts.push(local.slice(i, 1));
                next
            });
            mapping.push(code);
        }
        if !self.wide && self.codes.len() > i32::MAX as usize {
            return Err(Error::Write {
                path: name.to_string(),
                message: format!("column '{name}' has more than 2^31 categories"),
            });
        }
        let keys = dict.normalized_keys();
        let key_nulls = dict.keys().logical_nulls();
        let code = |row: usize| match &key_nulls {
            Some(n) if n.is_null(row) => -1,
            _ => mapping[keys[row]],
        };
        // Merge the one-row slices of what is new so far (bounded by the categories' count).
        if self.parts.len() > 64 {
            let parts: Vec<&dyn Array> = self.parts.iter().map(|p| p.as_ref()).collect();
            self.parts = vec![arrow_select::concat::concat(&parts)?];
        }
        Ok(if self.wide {
            Arc::new(Int64Array::from_iter_values((0..keys.len()).map(code)))
        } else {
            Arc::new(Int32Array::from_iter_values(
                (0..keys.len()).map(|r| code(r) as i32),
            ))
        })
    }
}
