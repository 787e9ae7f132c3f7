//! What the store-level fuzz targets do with each node they open: read it as a table (up to
//! 4096 rows) and check every array Arrow is handed. An error is fine; a panic, a hang or an
//! invalid array is a finding.

use std::sync::Arc;

use futures::TryStreamExt;
use zarrow::{Node, ScanContext, TableModel, TableOptions, ZarrScan};

/// Read `node` as a table, with `decode_cf` as given.
pub async fn read_table(node: Node, decode_cf: bool) {
    let mut options = TableOptions::default();
    options.read.limits.max_chunk_bytes = 16 << 20;
    options.read.concurrency = 2;
    options.decode_cf = decode_cf;
    let Ok(model) = TableModel::from_node(node, options).await else {
        return;
    };
    let mut scan = ZarrScan::new(&model);
    scan.limit = Some(4096);
    scan.batch_size = 1024;
    let Ok(stream) = scan.stream(Arc::new(model), ScanContext::default()) else {
        return;
    };
    let _ = stream
        .try_for_each(|batch| {
            for column in batch.columns() {
                if let Err(e) = column.to_data().validate_full() {
                    panic!("read an invalid array: {e}");
                }
            }
            futures::future::ready(Ok(()))
        })
        .await;
}
