//! zarrow's side of the "full read of one column" comparison in `benches/sql_compare.py`:
//! open a zarr array and read every chunk into Arrow, in this process, the way
//! `zarr.open_array(path)[:]` reads it into numpy in zarr-python's.
//!
//! ```text
//! read_column <array location> [--repeat N] [--string-type utf8|large_utf8|view] [--concurrency N]
//!             [--batch-size ROWS]
//! ```
//!
//! Each round opens the array (metadata) and reads its value column through the scan every
//! reader uses (`ZarrScan`, one batch per chunk), split into one partition per core, each
//! read by a task of its own (as DataFusion runs partitions), and keeps the arrays — one Arrow
//! array per chunk, as a chunked column — until the round's clock stops. `--batch-size` reads
//! batches of that many rows instead, as a query does (DataFusion's default is 8192). Prints one JSON
//! object: `{"seconds": [...], "rows": …, "value_bytes": …, "type": …}`.

use std::time::Instant;

use std::sync::Arc;

use arrow_array::{Array, ArrayRef};
use zarrow::{StringType, TableModel, TableOptions, ZarrReadOptions, ZarrScan};

/// The allocator the `zarrow` binary uses.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    if let Err(e) = run() {
        eprintln!("read_column: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut location = None;
    let mut repeat = 5usize;
    let mut string_type = StringType::Utf8;
    let mut concurrency = None;
    let mut batch_size = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--repeat" => repeat = args.next().ok_or("--repeat needs a number")?.parse()?,
            "--string-type" => {
                string_type = StringType::parse(&args.next().ok_or("--string-type needs a type")?)?
            }
            "--concurrency" => {
                concurrency = Some(args.next().ok_or("--concurrency needs a number")?.parse()?)
            }
            "--batch-size" => {
                batch_size = Some(args.next().ok_or("--batch-size needs a number")?.parse()?)
            }
            _ if location.is_none() => location = Some(a),
            other => return Err(format!("unexpected argument '{other}'").into()),
        }
    }
    let location = location.ok_or("usage: read_column <array location> [--repeat N]")?;
    let mut opts = ZarrReadOptions::default().with_string_type(string_type);
    if let Some(n) = concurrency {
        opts = opts.with_concurrency(n);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut seconds = Vec::with_capacity(repeat);
    let (mut rows, mut value_bytes, mut data_type) = (0usize, 0usize, String::new());
    for _ in 0..repeat.max(1) {
        let start = Instant::now();
        let arrays = runtime.block_on(read(&location, &opts, batch_size))?;
        seconds.push(start.elapsed().as_secs_f64());
        rows = arrays.iter().map(|a| a.len()).sum();
        value_bytes = arrays.iter().map(|a| a.get_buffer_memory_size()).sum();
        data_type = arrays
            .first()
            .map(|a| a.data_type().to_string())
            .unwrap_or_default();
        drop(arrays);
    }
    println!(
        "{}",
        serde_json::json!({
            "seconds": seconds,
            "rows": rows,
            "value_bytes": value_bytes,
            "type": data_type,
        })
    );
    Ok(())
}

/// The value column of the array at `location`, in chunk order: one array per chunk, or per
/// batch of `batch_size` rows.
async fn read(
    location: &str,
    opts: &ZarrReadOptions,
    batch_size: Option<usize>,
) -> zarrow::Result<Vec<ArrayRef>> {
    let options = TableOptions {
        read: opts.clone(),
        ..Default::default()
    };
    let model = Arc::new(TableModel::open(location, options).await?);
    let mut scan = ZarrScan::new(&model);
    let value = scan.columns.pop().into_iter().collect();
    scan.columns = value;
    match batch_size {
        Some(rows) => scan.batch_size = rows.max(1),
        None => scan.batch_per_chunk(&model),
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let batches = scan.read_all(model, cores).await?;
    let arrays = batches.into_iter().map(|b| b.column(0).clone()).collect();
    Ok(arrays)
}
