//! A table's columns as data: what each is read from ([`ColumnSource`]), made from the
//! members of a node ([`Member`]: an array, or an AnnData encoded group), and its Arrow field.
//! Nothing here reads: the readers are made from these by `read/`.

use arrow_array::ArrayRef;
use arrow_schema::{DataType as ArrowType, Field};

use super::cf::CfDecode;
use super::read::dictionary::{dictionary_type, encodable};
use super::{ColumnRole, TableOptions};
use crate::array::ZarrArray;
use crate::decode::fill_array;
use crate::{Error, Result};

/// The time zone an array's attributes give its timestamps ([`super::TIMEZONE_ATTRIBUTE`]).
pub(crate) fn timezone_of(array: &ZarrArray) -> Option<std::sync::Arc<str>> {
    match array.metadata().attributes.get(super::TIMEZONE_ATTRIBUTE) {
        Some(serde_json::Value::String(tz)) if !tz.is_empty() => Some(tz.as_str().into()),
        _ => None,
    }
}

/// `dt`, a naive timestamp, with the time zone of `array` (other types unchanged).
pub(crate) fn with_timezone(dt: ArrowType, array: &ZarrArray) -> ArrowType {
    match (dt, timezone_of(array)) {
        (ArrowType::Timestamp(unit, None), Some(tz)) => ArrowType::Timestamp(unit, Some(tz)),
        (dt, _) => dt,
    }
}

/// One column of a table.
#[derive(Debug, Clone)]
pub struct TableColumn {
    /// The column name.
    pub name: String,
    /// What it holds.
    pub role: ColumnRole,
    /// The array (or AnnData group) it is read from; empty for index columns.
    pub source: String,
    kind: ColumnSource,
}

/// What a column's values are read from.
#[derive(Debug, Clone)]
pub(crate) enum ColumnSource {
    /// The Int64 position along a table dimension.
    Index,
    /// An array's elements; its fill value as NULL (`fill_as_null`), the CF conventions
    /// applied (`decode_cf`).
    Plain {
        array: ZarrArray,
        fill: Option<ArrayRef>,
        cf: Option<CfDecode>,
    },
    /// An AnnData `nullable-*` group: `values`, NULL where `mask` is set.
    Masked { values: ZarrArray, mask: ZarrArray },
    /// An AnnData categorical: `codes` into `categories`.
    Categorical {
        codes: ZarrArray,
        categories: ZarrArray,
        /// pandas' `ordered`: kept as the Arrow dictionary's `dict_is_ordered`.
        ordered: bool,
    },
    /// A sparse matrix's compressed dimension: the position of each stored element, from
    /// `indptr` over `nnz` stored elements (see `sparse.rs`).
    SparseMajor { indptr: ZarrArray, nnz: u64 },
    /// A sparse matrix's other dimension: `indices` as Int64, below `size`.
    SparseMinor { indices: ZarrArray, size: u64 },
}

impl ColumnSource {
    /// The array whose chunking the column follows.
    pub(crate) fn main_array(&self) -> Option<&ZarrArray> {
        match self {
            ColumnSource::Index | ColumnSource::SparseMajor { .. } => None,
            ColumnSource::Plain { array, .. } => Some(array),
            ColumnSource::Masked { values, .. } => Some(values),
            ColumnSource::Categorical { codes, .. } => Some(codes),
            ColumnSource::SparseMinor { indices, .. } => Some(indices),
        }
    }
}

/// A member of a table: an array, or an AnnData encoded group that reads as one.
#[derive(Debug, Clone)]
pub(super) struct Member {
    pub(super) name: String,
    pub(super) path: String,
    /// All dimension names, if every dimension is named.
    pub(super) dims: Option<Vec<String>>,
    pub(super) shape: Vec<u64>,
    pub(super) kind: MemberKind,
}

/// What a member is.
#[derive(Debug, Clone)]
pub(super) enum MemberKind {
    Array(ZarrArray),
    Masked {
        values: ZarrArray,
        mask: ZarrArray,
    },
    Categorical {
        codes: ZarrArray,
        categories: ZarrArray,
        ordered: bool,
    },
}

/// All dimension names of `array`, if every dimension is named.
pub(super) fn dim_names(array: &ZarrArray) -> Option<Vec<String>> {
    let ndim = array.shape().len();
    (0..ndim)
        .map(|d| array.metadata().dimension_name(d).map(str::to_string))
        .collect::<Option<Vec<_>>>()
}

impl Member {
    /// An array as a member named `name`.
    pub(super) fn array(name: String, array: ZarrArray, dims: Option<Vec<String>>) -> Self {
        Member {
            name,
            path: array.path().to_string(),
            dims,
            shape: array.shape().to_vec(),
            kind: MemberKind::Array(array),
        }
    }
}

impl TableColumn {
    /// A column with no array: the Int64 position along table dimension `dim`.
    pub(super) fn index(name: String, dim: usize) -> Self {
        TableColumn {
            name,
            role: ColumnRole::Index(dim),
            source: String::new(),
            kind: ColumnSource::Index,
        }
    }

    /// A column read from `source` (a sparse matrix's positions, from its arrays).
    pub(super) fn sourced(
        name: String,
        role: ColumnRole,
        source: &ZarrArray,
        kind: ColumnSource,
    ) -> Self {
        TableColumn {
            name,
            role,
            source: source.path().to_string(),
            kind,
        }
    }

    /// Member `member`'s column, named `name`, with the options' fill and CF handling.
    pub(super) fn of_member(
        member: &Member,
        name: String,
        role: ColumnRole,
        options: &TableOptions,
    ) -> Result<Self> {
        let kind = match &member.kind {
            MemberKind::Array(array) => {
                let meta = array.metadata();
                // A v2 `"fill_value": null` (zarr-python 2's for object arrays) names no fill
                // value: no stored value stands for a missing one. zarrow's writer declares
                // where the fill value marks its NULLs: those are NULL by default.
                let declared = super::declares_nulls(&meta.attributes);
                let fill = if (options.fill_as_null || declared) && !meta.fill_value.json.is_null()
                {
                    Some(
                        fill_array(&meta.data_type, &meta.fill_value, 1, &options.read)
                            .map_err(|e| Error::chunk(array.path(), "fill value", e))?,
                    )
                } else {
                    None
                };
                let cf = if options.decode_cf {
                    CfDecode::from_metadata(array.path(), meta)?
                } else {
                    None
                };
                ColumnSource::Plain {
                    array: array.clone(),
                    fill,
                    cf,
                }
            }
            MemberKind::Masked { values, mask } => ColumnSource::Masked {
                values: values.clone(),
                mask: mask.clone(),
            },
            MemberKind::Categorical {
                codes,
                categories,
                ordered,
            } => ColumnSource::Categorical {
                codes: codes.clone(),
                categories: categories.clone(),
                ordered: *ordered,
            },
        };
        Ok(TableColumn {
            name,
            role,
            source: member.path.clone(),
            kind,
        })
    }

    /// The AnnData `encoding-type` of a column read from a plain array that has one.
    pub(super) fn plain_encoding(&self) -> Option<String> {
        match &self.kind {
            ColumnSource::Plain { array, .. } => {
                match array.metadata().attributes.get("encoding-type") {
                    Some(serde_json::Value::String(e)) => Some(e.clone()),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// What the column is read from.
    pub(crate) fn source_kind(&self) -> &ColumnSource {
        &self.kind
    }

    /// The column's Arrow field under `options`: a dictionary where the `dictionary` option
    /// names it.
    pub(super) fn field(&self, options: &TableOptions) -> Field {
        let field = self.stored_field(options);
        if !self.encoded_as_dictionary(options) {
            return field;
        }
        let dt = dictionary_type(field.data_type().clone());
        field.with_data_type(dt)
    }

    /// Whether the column's batches are encoded as dictionaries: the `dictionary` option
    /// names it, and it holds strings or bytes (an AnnData categorical already is one).
    pub(crate) fn encoded_as_dictionary(&self, options: &TableOptions) -> bool {
        options.names_dictionary(&self.name)
            && matches!(
                self.kind,
                ColumnSource::Plain { .. } | ColumnSource::Masked { .. }
            )
            && encodable(self.stored_field(options).data_type())
    }

    /// The column's Arrow field as its arrays give it.
    fn stored_field(&self, options: &TableOptions) -> Field {
        let opts = &options.read;
        let (dt, nullable) = match &self.kind {
            ColumnSource::Index
            | ColumnSource::SparseMajor { .. }
            | ColumnSource::SparseMinor { .. } => (ArrowType::Int64, false),
            ColumnSource::Plain { array, cf, .. } => {
                let stored = with_timezone(
                    array.arrow_field(&self.name, opts).data_type().clone(),
                    array,
                );
                (
                    cf.as_ref()
                        .map_or(stored.clone(), |cf| cf.output_type(&stored)),
                    true,
                )
            }
            ColumnSource::Masked { values, .. } => (
                values.arrow_field(&self.name, opts).data_type().clone(),
                true,
            ),
            ColumnSource::Categorical {
                codes,
                categories,
                ordered,
            } => {
                let key = codes.arrow_field("", opts).data_type().clone();
                let value = categories.arrow_field("", opts).data_type().clone();
                let dt = ArrowType::Dictionary(Box::new(key), Box::new(value));
                return Field::new(&self.name, dt, true).with_dict_is_ordered(*ordered);
            }
        };
        Field::new(&self.name, dt, nullable)
    }
}
