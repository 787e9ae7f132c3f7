//! How read units are fetched, against a store that records every request: large units in
//! parallel ranged parts, nearby inner chunks of a shard in one GET, sizes held to limits.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int32Type;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use serde_json::json;
use zarrow_testkit::RecordingStore;

use super::{ReadContext, ZarrArray};
use crate::grid::ChunkRanges;
use crate::options::ZarrReadOptions;
use crate::store::ZarrStore;
use crate::{Error, Node};

fn int32s(values: std::ops::Range<i32>) -> Vec<u8> {
    values.flat_map(i32::to_le_bytes).collect()
}

/// An int32 array of 64 elements in one shard of 4 inner chunks of 16: inner chunks 0 and 1
/// touch, inner chunk 2 is 100 bytes after them, inner chunk 3 is not stored.
async fn sharded() -> (ZarrArray, Arc<RecordingStore>) {
    let memory = Arc::new(InMemory::new());
    let meta = json!({
        "zarr_format": 3, "node_type": "array", "shape": [64], "data_type": "int32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [64]}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
        "codecs": [{"name": "sharding_indexed", "configuration": {
            "chunk_shape": [16],
            "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
            "index_location": "end"}}]
    });
    let mut shard = int32s(0..32);
    shard.extend(vec![0xEE; 100]);
    shard.extend(int32s(32..48));
    for (offset, nbytes) in [(0u64, 64u64), (64, 64), (228, 64), (u64::MAX, u64::MAX)] {
        shard.extend(offset.to_le_bytes());
        shard.extend(nbytes.to_le_bytes());
    }
    let put = |key: &str, bytes: Vec<u8>| {
        let memory = memory.clone();
        let key = Path::from(key);
        async move { memory.put(&key, bytes.into()).await.unwrap() }
    };
    put("s/zarr.json", meta.to_string().into_bytes()).await;
    put("s/c/0", shard).await;
    open(memory, "s").await
}

async fn open(memory: Arc<InMemory>, root: &str) -> (ZarrArray, Arc<RecordingStore>) {
    let recording = RecordingStore::new(memory as Arc<dyn ObjectStore>, Default::default());
    let store = ZarrStore::new(recording.clone(), Path::from(root));
    let array = Node::open_store(store, root)
        .await
        .unwrap()
        .into_array(root)
        .unwrap();
    recording.clear();
    (array, recording)
}

fn context(range_split_bytes: u64, coalesce_bytes: u64) -> ReadContext {
    let mut options = ZarrReadOptions::default();
    options.fetch.range_split_bytes = range_split_bytes;
    options.fetch.coalesce_bytes = coalesce_bytes;
    ReadContext::new(options)
}

#[tokio::test]
async fn nearby_inner_chunks_of_a_shard_are_one_get() {
    let mut expected: Vec<i32> = (0..48).collect();
    expected.extend([0; 16]);
    // Touching ranges merge always; the one 100 bytes on only within coalesce_bytes. (Each
    // array reads the shard's index once.)
    for (gap, want) in [
        (0, vec!["bytes=-64", "bytes=0-127", "bytes=228-291"]),
        (100, vec!["bytes=-64", "bytes=0-291"]),
    ] {
        let (array, recording) = sharded().await;
        let ctx = context(0, gap);
        let got = array.read_region_in(&[0], &[64], &ctx).await.unwrap();
        let got: Vec<i32> = got.as_primitive::<Int32Type>().values().to_vec();
        assert_eq!(got, expected);
        assert_eq!(recording.ranges(), want, "{}", recording.describe());
        let c = ctx.metrics.counts();
        assert_eq!(c.requests as usize, want.len());
    }
}

#[tokio::test]
async fn a_large_inner_chunk_is_fetched_in_ranged_parts() {
    let (array, recording) = sharded().await;
    let ctx = context(16, 0);
    let bytes = array.fetch_chunk_in(&[2], &ctx).await.unwrap().unwrap();
    assert_eq!(bytes.as_ref(), int32s(32..48).as_slice());
    assert_eq!(
        recording.ranges(),
        [
            "bytes=-64",
            "bytes=228-243",
            "bytes=244-259",
            "bytes=260-275",
            "bytes=276-291"
        ]
    );
    assert_eq!(ctx.metrics.counts().requests, 5);
    assert_eq!(ctx.metrics.counts().bytes_fetched, 64 + 64);
}

#[tokio::test]
async fn a_large_chunk_is_fetched_in_ranged_parts_and_held_to_its_limit() {
    let memory = Arc::new(InMemory::new());
    let meta = json!({
        "zarr_format": 3, "node_type": "array", "shape": [4096], "data_type": "int32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4096]}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]
    });
    let put = |key: &str, bytes: Vec<u8>| {
        let memory = memory.clone();
        let key = Path::from(key);
        async move { memory.put(&key, bytes.into()).await.unwrap() }
    };
    put("a/zarr.json", meta.to_string().into_bytes()).await;
    put("a/c/0", int32s(0..4096)).await;
    // A chunk far larger than 4096 int32 can take (2 × 16 KiB + 1 MiB).
    put("b/zarr.json", meta.to_string().into_bytes()).await;
    put("b/c/0", vec![0; 3 << 20]).await;
    let (array, recording) = open(memory.clone(), "a").await;
    let ctx = context(4096, 0);
    let bytes = array.fetch_chunk_in(&[0], &ctx).await.unwrap().unwrap();
    assert_eq!(bytes.as_ref(), int32s(0..4096).as_slice());
    assert_eq!(
        recording.ranges(),
        [
            "bytes=0-4095",
            "bytes=12288-16383",
            "bytes=4096-8191",
            "bytes=8192-12287"
        ]
    );
    assert_eq!(ctx.metrics.counts().requests, 4);

    let (array, recording) = open(memory, "b").await;
    let e = array.fetch_chunk_in(&[0], &ctx).await.unwrap_err();
    assert!(
        matches!(&e, Error::Chunk { .. }) && e.to_string().contains("3145728 bytes"),
        "{e}"
    );
    assert_eq!(recording.requests().len(), 1, "{}", recording.describe());
}

#[tokio::test]
async fn stored_sizes_share_a_shard_among_its_units() {
    let (array, _) = sharded().await;
    // 356 bytes: 48 values, 100 between, a 64-byte index; four units in the one shard.
    let all = array.all_chunks();
    assert_eq!(array.stored_sizes(&all, 10).await, Some(vec![89; 4]));
    let two = ChunkRanges::from_dims(&[4], vec![vec![0..2]]).unwrap();
    assert_eq!(array.stored_sizes(&two, 10).await, Some(vec![178; 2]));
    // More objects than allowed (the shard and zarr.json): no answer.
    assert_eq!(array.stored_sizes(&all, 1).await, None);
}
