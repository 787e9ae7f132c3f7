//! `zarrow schema`: the Arrow schema of the table at a location, then the arrays left out of it
//! and why.

use std::io::Write;

use anyhow::{Context, Result};
use datafusion::catalog::TableProvider;
use zarrow::tree::{push_padded, short};
use zarrow_datafusion::{ZarrTable, ZarrTableOptions};

use crate::SchemaArgs;

/// The most characters of a column name a line shows (names of 100,000 characters exist in
/// hostile stores).
const NAME_MAX: usize = 120;

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
            short(field.name(), NAME_MAX),
            short(&field.data_type().to_string(), 4 * NAME_MAX),
            if field.is_nullable() { "yes" } else { "no" }.into(),
        ]);
    }
    let w0 = rows.iter().map(|r| r[0].chars().count()).max().unwrap_or(0);
    let w1 = rows.iter().map(|r| r[1].chars().count()).max().unwrap_or(0);
    let mut out = String::new();
    for r in &rows {
        push_padded(&mut out, &r[0], w0);
        out.push_str("  ");
        push_padded(&mut out, &r[1], w1);
        out.push_str("  ");
        out.push_str(&r[2]);
        out.push('\n');
    }

    let left_out = table.left_out();
    if !left_out.is_empty() {
        out.push_str("\nleft out:\n");
        let names: Vec<String> = left_out
            .iter()
            .map(|(name, _)| short(name, NAME_MAX))
            .collect();
        let w = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
        for (name, (_, reason)) in names.iter().zip(left_out) {
            out.push_str("  ");
            push_padded(&mut out, name, w);
            out.push_str("  ");
            out.push_str(&short(reason, 4 * NAME_MAX));
            out.push('\n');
        }
    }
    Ok(out)
}
