//! Readers of columns read from arrays as they are stored: a plain array (its fill values as
//! NULL, the CF conventions applied, if asked) and an AnnData masked group (`values` NULL
//! where `mask` is set).

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::ArrayRef;

use super::{AheadChunk, ColumnReader, ColumnRuns, Placement, RowBox, RunMap, Runs, Values};
use crate::array::{ReadContext, ZarrArray};
use crate::table::cf::{equals_scalar, null_where, CfDecode};
use crate::Result;

/// A plain array's column.
pub(super) struct PlainReader {
    values: Arc<PlainValues>,
    at: Placement,
}

/// What the table shows of a plain array's elements: equal to the fill value → NULL
/// (`fill`, the `fill_as_null` option), then the CF conventions (`cf`, `decode_cf`).
struct PlainValues {
    array: ZarrArray,
    fill: Option<ArrayRef>,
    cf: Option<CfDecode>,
    /// The timestamps' type with the array's time zone (`zarrow.timezone`).
    zoned: Option<arrow_schema::DataType>,
}

impl PlainValues {
    fn apply(&self, mut v: ArrayRef) -> Result<ArrayRef> {
        if let Some(fill) = &self.fill {
            if let Some(mask) = equals_scalar(v.as_ref(), fill.as_ref()) {
                v = null_where(v, &mask)?;
            }
        }
        if let Some(cf) = &self.cf {
            v = cf.apply(self.array.path(), v)?;
        }
        if let Some(zoned) = &self.zoned {
            if matches!(v.data_type(), arrow_schema::DataType::Timestamp(_, None)) {
                // The same instants, labelled with their zone (the buffers are shared).
                let data = v
                    .to_data()
                    .into_builder()
                    .data_type(zoned.clone())
                    .build()?;
                v = arrow_array::make_array(data);
            }
        }
        Ok(v)
    }

    /// Whether [`Self::apply`] changes anything.
    fn maps(&self) -> bool {
        self.fill.is_some() || self.cf.is_some() || self.zoned.is_some()
    }
}

impl PlainReader {
    pub(super) fn new(
        array: ZarrArray,
        fill: Option<ArrayRef>,
        cf: Option<CfDecode>,
        at: Placement,
    ) -> Self {
        let strings = crate::options::StringType::default();
        let stored = array
            .metadata()
            .data_type
            .arrow_type(strings, strings.binary());
        let zoned = match crate::table::column::with_timezone(stored, &array) {
            dt @ arrow_schema::DataType::Timestamp(_, Some(_)) => Some(dt),
            _ => None,
        };
        let values = Arc::new(PlainValues {
            array,
            fill,
            cf,
            zoned,
        });
        PlainReader { values, at }
    }
}

impl ColumnReader for PlainReader {
    fn read<'a>(&'a self, rows: &'a RowBox, ctx: &'a ReadContext) -> Values<'a> {
        Box::pin(async move {
            let v = self.at.read(&self.values.array, rows, ctx).await?;
            self.at.lay_out(self.values.apply(v)?, rows)
        })
    }

    fn runs<'a>(
        &'a self,
        coords: &'a [u64],
        rows: &'a RowBox,
        ahead: AheadChunk,
        ctx: &'a ReadContext,
    ) -> Runs<'a> {
        Box::pin(async move {
            let stored = match ahead {
                AheadChunk::NotFetched => {
                    return self.read(rows, ctx).await.map(ColumnRuns::Whole);
                }
                AheadChunk::Stored(bytes) => Some(bytes),
                AheadChunk::Missing => None,
            };
            let started = std::time::Instant::now();
            let reader = (self.values.array)
                .chunk_reader_in(coords, stored, ctx)
                .await?;
            ctx.metrics.add_decode(started.elapsed());
            let map = self.values.maps().then(|| {
                let values = self.values.clone();
                Arc::new(move |v| values.apply(v)) as RunMap
            });
            Ok(ColumnRuns::Runs(Box::new(reader), map))
        })
    }

    fn fetched_ahead(&self) -> Option<&ZarrArray> {
        self.at.aligned.then_some(&self.values.array)
    }
}

/// An AnnData `nullable-*` group's column: `values`, NULL where `mask` is set.
pub(super) struct MaskedReader {
    values: ZarrArray,
    mask: ZarrArray,
    at: Placement,
}

impl MaskedReader {
    pub(super) fn new(values: ZarrArray, mask: ZarrArray, at: Placement) -> Self {
        MaskedReader { values, mask, at }
    }
}

impl ColumnReader for MaskedReader {
    fn read<'a>(&'a self, rows: &'a RowBox, ctx: &'a ReadContext) -> Values<'a> {
        Box::pin(async move {
            let (v, m) = futures::try_join!(
                self.at.read(&self.values, rows, ctx),
                self.at.read(&self.mask, rows, ctx)
            )?;
            self.at.lay_out(null_where(v, m.as_boolean())?, rows)
        })
    }
}
