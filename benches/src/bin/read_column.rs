//! zarrow's side of the "full read of one column" comparison in `benches/sql_compare.py`:
//! open a zarr array and read every chunk into Arrow, in this process, the way
//! `zarr.open_array(path)[:]` reads it into numpy in zarr-python's.
//!
//! ```text
//! read_column <array location> [--repeat N] [--string-type utf8|large_utf8|view] [--concurrency N]
//! ```
//!
//! Each round opens the array (metadata), reads all chunks (`ZarrArray::read_chunks`: fetches
//! and decodes `concurrency` at a time on the tokio runtime's threads) and keeps the arrays —
//! one Arrow array per chunk, as a chunked column — until the round's clock stops. Prints one
//! JSON object: `{"seconds": [...], "rows": …, "value_bytes": …, "type": …}`.

use std::time::Instant;

use arrow_array::Array;
use zarrow::{StringType, ZarrArray, ZarrReadOptions};

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
    while let Some(a) = args.next() {
        match a.as_str() {
            "--repeat" => repeat = args.next().ok_or("--repeat needs a number")?.parse()?,
            "--string-type" => {
                string_type = StringType::parse(&args.next().ok_or("--string-type needs a type")?)?
            }
            "--concurrency" => {
                concurrency = Some(args.next().ok_or("--concurrency needs a number")?.parse()?)
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
        let arrays = runtime.block_on(async {
            let array = ZarrArray::open(&location).await?;
            array.read_chunks(&array.all_chunks(), &opts).await
        })?;
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
