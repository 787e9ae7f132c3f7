//! A DataFusion application over zarr: register the sample store's `obs`, `var` and `X`
//! (`data/pbmc_sample.zarr`) as tables with `register_zarr` and query them with SQL and with the
//! DataFrame API.
//!
//! ```sh
//! cargo run -p zarrow-examples --example datafusion_sql
//! ```

use anyhow::Result;
use datafusion::functions_aggregate::expr_fn::{avg, count};
use datafusion::prelude::*;
use zarrow_datafusion::{SessionContextZarrExt, ZarrTableOptions};
use zarrow_examples::sample;

#[tokio::main]
async fn main() -> Result<()> {
    let ctx = SessionContext::new();
    // AnnData dataframe groups: `cell_type` (categorical) becomes a dictionary column with
    // NULLs for unannotated cells, `n_genes` (nullable integer) an Int64 column with NULLs.
    ctx.register_zarr("obs", &sample("obs")?, ZarrTableOptions::default())
        .await?;
    ctx.register_zarr("var", &sample("var")?, ZarrTableOptions::default())
        .await?;
    // The count matrix: one row per (cell, gene).
    ctx.register_zarr("x", &sample("X")?, ZarrTableOptions::default())
        .await?;

    let cells = ctx.table("obs").await?.count().await?;
    anyhow::ensure!(cells == 2000, "expected 2000 cells, found {cells}");

    println!("Cells per cell type and donor:");
    ctx.sql(
        "SELECT cell_type, batch, count(*) AS cells, round(avg(pct_mito), 2) AS mean_pct_mito, \
                count(n_genes) AS with_n_genes \
         FROM obs GROUP BY cell_type, batch ORDER BY cell_type NULLS LAST, batch",
    )
    .await?
    .show()
    .await?;

    println!("Mitochondrial genes, by the number of cells expressing them:");
    ctx.sql(
        "SELECT gene_symbol, gene_ids, n_cells FROM var WHERE mito ORDER BY n_cells DESC LIMIT 5",
    )
    .await?
    .show()
    .await?;

    println!("The cells with the most counts, from the matrix (dim_0 = cell, dim_1 = gene):");
    ctx.sql(
        "SELECT dim_0 AS cell, sum(\"X\") AS counts, count(*) FILTER (WHERE \"X\" > 0) AS genes \
         FROM x GROUP BY dim_0 ORDER BY counts DESC, cell LIMIT 5",
    )
    .await?
    .show()
    .await?;

    println!("The same kind of question with the DataFrame API (donor B, per cell type):");
    ctx.table("obs")
        .await?
        .filter(col("batch").eq(lit("donor_B")))?
        .aggregate(
            vec![col("cell_type")],
            vec![
                count(lit(1)).alias("cells"),
                avg(col("total_counts")).alias("mean_counts"),
            ],
        )?
        .sort(vec![col("cells").sort(false, true)])?
        .limit(0, Some(3))?
        .show()
        .await?;
    Ok(())
}
