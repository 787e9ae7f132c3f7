//! Read a zarr array with the core reader, write it to an Arrow IPC file, read the file back
//! with arrow-ipc and check that the batches are equal.
//!
//! ```sh
//! cargo run -p zarrow-examples --example ipc_export [-- <array location>]
//! ```
//!
//! The default array is the cell barcodes of the sample store, `data/pbmc_sample.zarr/obs/barcode`.

use std::fs::File;

use anyhow::{ensure, Context, Result};
use arrow::array::RecordBatch;
use arrow::ipc::reader::FileReader;
use arrow::ipc::writer::FileWriter;
use arrow::util::pretty::pretty_format_batches;
use zarrow::{StringType, ZarrReadOptions, ZarrRecordBatchReaderBuilder};
use zarrow_examples::sample;

fn main() -> Result<()> {
    let location = match std::env::args().nth(1) {
        Some(location) => location,
        None => sample("obs/barcode")?,
    };

    // 1. zarr → Arrow: one Int64 index column per dimension, then the values, chunk by chunk.
    let reader = ZarrRecordBatchReaderBuilder::try_new(&location)
        .with_context(|| format!("cannot open the zarr array at '{location}'"))?
        .with_options(ZarrReadOptions::default().with_string_type(StringType::Utf8))
        .with_batch_size(500)
        .build()?;
    let schema = arrow::array::RecordBatchReader::schema(&reader);
    let batches: Vec<RecordBatch> = reader.collect::<Result<_, _>>()?;
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    println!(
        "read {rows} rows in {} batches from {location}",
        batches.len()
    );
    for field in schema.fields() {
        println!("  {}: {}", field.name(), field.data_type());
    }

    // 2. Arrow → IPC file.
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("array.arrow");
    let mut writer = FileWriter::try_new(File::create(&path)?, &schema)?;
    for batch in &batches {
        writer.write(batch)?;
    }
    writer.finish()?;
    println!(
        "wrote {} ({} bytes)",
        path.display(),
        std::fs::metadata(&path)?.len()
    );

    // 3. IPC file → Arrow, and compare.
    let back = FileReader::try_new(File::open(&path)?, None)?;
    ensure!(
        back.schema() == schema,
        "schema changed: {:?}",
        back.schema()
    );
    let back: Vec<RecordBatch> = back.collect::<Result<_, _>>()?;
    ensure!(
        back.len() == batches.len(),
        "{} batches read back, {} written",
        back.len(),
        batches.len()
    );
    for (i, (a, b)) in batches.iter().zip(&back).enumerate() {
        ensure!(a == b, "batch {i} differs after the round trip");
    }
    println!("read back {} batches: equal", back.len());

    let head: Vec<RecordBatch> = back
        .first()
        .map(|b| b.slice(0, b.num_rows().min(5)))
        .into_iter()
        .collect();
    println!("{}", pretty_format_batches(&head)?);
    Ok(())
}
