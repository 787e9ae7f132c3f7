//! `zarrow schema`: the Arrow schema of the table at a location, then the arrays left out of it
//! and why.

use std::io::Write;

use anyhow::{Context, Result};
use datafusion::catalog::TableProvider;
use zarrow_datafusion::{ZarrTable, ZarrTableOptions};

use crate::SchemaArgs;

pub(crate) async fn run(args: SchemaArgs) -> Result<()> {
    let text = render(&args).await?;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

async fn render(args: &SchemaArgs) -> Result<String> {
    let mut map = args.table.to_map();
    map.remove("concurrency"); // a scan setting: nothing to do with the schema
    let options = ZarrTableOptions::from_options(&map).context("invalid table options")?;
    let table = ZarrTable::try_new(&args.location, options)
        .await
        .with_context(|| format!("cannot open '{}' as a table", args.location))?;
    let schema = table.schema();

    let mut rows: Vec<[String; 3]> = vec![["column".into(), "type".into(), "nullable".into()]];
    for field in schema.fields() {
        rows.push([
            field.name().clone(),
            field.data_type().to_string(),
            if field.is_nullable() { "yes" } else { "no" }.into(),
        ]);
    }
    let w0 = rows.iter().map(|r| r[0].chars().count()).max().unwrap_or(0);
    let w1 = rows.iter().map(|r| r[1].chars().count()).max().unwrap_or(0);
    let mut out = String::new();
    for r in &rows {
        out.push_str(&format!("{:<w0$}  {:<w1$}  {}\n", r[0], r[1], r[2]));
    }

    let left_out = table.left_out();
    if !left_out.is_empty() {
        out.push_str("\nleft out:\n");
        let w = left_out
            .iter()
            .map(|(name, _)| name.chars().count())
            .max()
            .unwrap_or(0);
        for (name, reason) in left_out {
            out.push_str(&format!("  {name:<w$}  {reason}\n"));
        }
    }
    Ok(out)
}
