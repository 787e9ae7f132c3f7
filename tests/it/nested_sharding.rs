//! Nested sharding (issue 21, item 6): shards of shards as tensorstore's zarr3 driver writes
//! them (`tensorstore_nested.zarr`; its values, as tensorstore reads them, are checked with
//! every other fixture in `fixtures.rs`). A chunk is read by ranges: the shard's index, the
//! inner shard's index, the chunk — never a whole shard.

use arrow::array::AsArray;
use arrow::datatypes::Int32Type;
use zarrow::{ChunkError, Error, ReadContext, ZarrArray, ZarrReadOptions};

use crate::common::{copy_dir, data_dir, location};

#[tokio::test]
async fn a_chunk_is_three_ranged_reads() {
    let array = ZarrArray::open(&location("tensorstore_nested.zarr", "int32_2d"))
        .await
        .unwrap();
    assert_eq!(array.chunk_shape(), [5, 5]);
    assert_eq!(array.chunk_grid_shape(), [9, 7]);
    let shard_size = std::fs::metadata(data_dir().join("tensorstore_nested.zarr/int32_2d/c/0/0"))
        .unwrap()
        .len();

    let ctx = ReadContext::default();
    let metrics = &ctx.metrics;
    let chunk = array.fetch_chunk_in(&[1, 4], &ctx).await.unwrap().unwrap();
    // Shard (20, 30) holds 2 x 2 inner shards (10, 15), each 2 x 3 chunks (5, 5); indexes are
    // 16 bytes an entry and a crc32c.
    let (outer_index, inner_index) = (4 * 16 + 4, 6 * 16 + 4);
    let counts = metrics.counts();
    assert_eq!(counts.requests, 3);
    assert_eq!(
        counts.bytes_fetched,
        outer_index + inner_index + chunk.len() as u64
    );
    assert!(counts.bytes_fetched < shard_size);
    // A chunk of the same inner shard: both indexes are cached.
    array.fetch_chunk_in(&[1, 5], &ctx).await.unwrap();
    assert_eq!(metrics.counts().requests, 4);

    let values = array
        .decode_chunk(&[1, 4], Some(chunk), &ZarrReadOptions::default())
        .unwrap();
    let want: Vec<i32> = (5..10)
        .flat_map(|r| (20..25).map(move |c| (r * 31 + c) * 7 - 5000))
        .collect();
    assert_eq!(values.as_primitive::<Int32Type>().values().to_vec(), want);

    // Rows 20..29 were never written: shard c/1/0 is stored, the inner shard is not.
    let ctx = ReadContext::default();
    let metrics = &ctx.metrics;
    assert!(array.fetch_chunk_in(&[4, 0], &ctx).await.unwrap().is_none());
    assert_eq!(metrics.counts().requests, 1);
    assert_eq!(
        array.chunk_location(&[4, 0]).to_string(),
        "c/1/0 (inner chunk 0/0)"
    );
}

#[tokio::test]
async fn a_damaged_inner_shard_index_names_the_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("nested.zarr");
    copy_dir(&data_dir().join("tensorstore_nested.zarr"), &store);
    let shard = store.join("int32_2d/c/0/0");
    let mut bytes = std::fs::read(&shard).unwrap();
    // The outer index (end of the object) gives inner shard 0's range; its own index is that
    // range's last 100 bytes: flip a bit of its checksum.
    let n = bytes.len();
    let outer = &bytes[n - 68..n - 4];
    let word = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap());
    let (offset, nbytes) = (word(&outer[..8]), word(&outer[8..16]));
    let end = (offset + nbytes) as usize;
    bytes[end - 1] ^= 1;
    std::fs::write(&shard, bytes).unwrap();
    let array = ZarrArray::open(store.join("int32_2d").to_str().unwrap())
        .await
        .unwrap();
    let e = array
        .read_chunk(&[0, 0], &ZarrReadOptions::default())
        .await
        .unwrap_err();
    match e {
        Error::Chunk {
            ref chunk,
            source: ChunkError::Checksum { .. },
            ..
        } => assert_eq!(chunk, "c/0/0 (inner chunk 0/0)", "{e}"),
        other => panic!("expected a checksum error, got {other}"),
    }
}
