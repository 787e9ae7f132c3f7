//! The reader of an AnnData categorical group's column: `codes` as the keys of a dictionary
//! over `categories` (read once per reader, as far as codes can refer).

use arrow_array::ArrayRef;
use tokio::sync::OnceCell;

use super::{ColumnReader, Placement, RowBox, Values};
use crate::array::{ReadContext, ZarrArray};
use crate::table::anndata;
use crate::Result;

/// An AnnData categorical's column.
pub(super) struct CategoricalReader {
    codes: ZarrArray,
    categories: ZarrArray,
    /// The categories codes can refer to, read on first use (held in the scan's cache).
    loaded: OnceCell<ArrayRef>,
    at: Placement,
}

impl CategoricalReader {
    pub(super) fn new(codes: ZarrArray, categories: ZarrArray, at: Placement) -> Self {
        CategoricalReader {
            codes,
            categories,
            loaded: OnceCell::new(),
            at,
        }
    }

    async fn categories(&self, ctx: &ReadContext) -> Result<ArrayRef> {
        let n = self.categories.shape().first().copied().unwrap_or(0);
        let n = anndata::addressable_categories(&self.codes.metadata().data_type, n);
        let load = || self.categories.read_prefix_in(n, ctx);
        let read = || async {
            match &ctx.cache {
                Some(cache) => {
                    let key = format!("first {n} categories of {}", self.categories.path());
                    cache.get_or_hold(&key, load).await
                }
                None => load().await,
            }
        };
        Ok(self.loaded.get_or_try_init(read).await?.clone())
    }
}

impl ColumnReader for CategoricalReader {
    fn read<'a>(&'a self, rows: &'a RowBox, ctx: &'a ReadContext) -> Values<'a> {
        Box::pin(async move {
            let categories = self.categories(&self.at.context(ctx)).await?;
            let codes = self.at.read(&self.codes, rows, ctx).await?;
            let values = anndata::dictionary(self.codes.path(), codes, categories)?;
            self.at.lay_out(values, rows)
        })
    }
}
