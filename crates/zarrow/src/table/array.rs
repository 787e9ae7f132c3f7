//! The array table: an array's elements as rows — one Int64 index column per dimension
//! (named after the dimension, else `dim_i`), then the value column, chunked as the array.

use super::column::Member;
use super::model::TableParts;
use super::{dim_column_name, value_column_name};
use super::{ColumnRole, TableColumn, TableDimension, TableOptions};
use crate::array::ZarrArray;
use crate::Result;

/// The table of `array`.
pub(super) fn array_table(array: ZarrArray, options: &TableOptions) -> Result<TableParts> {
    options.refuse_arrays(array.path(), "an array")?;
    let (dim_names, value) = array_table_names(&array);
    let dims: Vec<TableDimension> = dim_names
        .into_iter()
        .zip(array.shape())
        .map(|(name, &size)| TableDimension { name, size })
        .collect();
    let mut columns: Vec<TableColumn> = (dims.iter().enumerate())
        .map(|(d, dim)| TableColumn::index(dim.name.clone(), d))
        .collect();
    let ndim = dims.len();
    let grid = array.grid().clone();
    let location = array.store().location().to_string();
    let member = Member::array(value.clone(), array, None);
    let role = ColumnRole::Data((0..ndim).collect());
    columns.push(TableColumn::of_member(&member, value, role, options)?);
    Ok(TableParts {
        location,
        dims,
        grid,
        columns,
        left_out: Vec::new(),
    })
}

/// Names of the columns of an array table: the dimension columns (dimension names, else
/// `dim_i`; `<name>_index` where one would take the value column's name), then the value
/// column, named after the array — `value` for the array at the root of a store (`x.zarr`).
fn array_table_names(array: &ZarrArray) -> (Vec<String>, String) {
    let value = value_column_name(array.name());
    let dims = (0..array.shape().len())
        .map(|d| {
            let name = (array.metadata().dimension_name(d))
                .map_or_else(|| format!("dim_{d}"), str::to_string);
            dim_column_name(name, &value)
        })
        .collect();
    (dims, value)
}
