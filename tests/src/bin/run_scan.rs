//! Runs a serialized zarrow scan in a process of its own: reads the scan's JSON on standard
//! input, writes its batches as an Arrow IPC stream on standard output. The scan-everywhere
//! test (`it/scan.rs`) checks that this process gives the batches the planning one does.

use std::io::Read;

use arrow::ipc::writer::StreamWriter;
use futures::TryStreamExt;
use zarrow::ZarrScan;

fn main() {
    if let Err(e) = run() {
        eprintln!("run_scan: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut json = String::new();
    std::io::stdin().read_to_string(&mut json)?;
    let scan = ZarrScan::from_json(&json)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let (schema, batches) = runtime.block_on(async {
        let stream = scan.open().await?;
        let schema = stream.schema();
        let batches: Vec<_> = stream.try_collect().await?;
        Ok::<_, zarrow::Error>((schema, batches))
    })?;
    let mut writer = StreamWriter::try_new(std::io::stdout().lock(), &schema)?;
    for batch in &batches {
        writer.write(batch)?;
    }
    writer.finish()?;
    Ok(())
}
