//! Zero-copy proofs through the store: the Arrow buffers of a decoded chunk lie inside the very
//! bytes the store returned.

use std::sync::Arc;

use arrow::array::{Array, AsArray, StringArray};
use bytes::Bytes;
use object_store::memory::InMemory;
use object_store::{ObjectStore, ObjectStoreExt};
use zarrow::{Node, StringType, ZarrArray, ZarrReadOptions, ZarrStore};
use zarrow::{VlenEncoding, ZarrWriteOptions};

use crate::common::location;

fn inside(ptr: *const u8, len: usize, outer: &Bytes) -> bool {
    let (start, p) = (outer.as_ptr() as usize, ptr as usize);
    p >= start && p + len <= start + outer.len()
}

fn labels() -> StringArray {
    StringArray::from_iter_values((0..1000).map(|i| format!("label-{}-ü", i % 37)))
}

async fn open(store: &ZarrStore, path: &str) -> ZarrArray {
    match Node::open_store(store.child(path), path).await.unwrap() {
        Node::Array(a) => a,
        Node::Group(_) => panic!("group"),
    }
}

/// Uncompressed `zarrow.arrow_vlen` in an object store: the Arrow offsets and data buffers are
/// the bytes the store holds — no string byte is copied from the store to Arrow.
#[tokio::test]
async fn arrow_vlen_from_store_copies_nothing() {
    let mem = Arc::new(InMemory::new());
    let store = ZarrStore::new(mem.clone() as Arc<dyn ObjectStore>, "zc");
    for large in [false, true] {
        let path = if large { "large" } else { "small" };
        let opts = ZarrWriteOptions {
            chunk_shape: Some(vec![400]),
            string_encoding: VlenEncoding::ArrowVlen { large },
            ..Default::default()
        };
        zarrow::write_array(&store, path, &labels(), &[1000], &opts)
            .await
            .unwrap();
        let array = open(&store, path).await;
        let stored = mem
            .get(&format!("zc/{path}/c/1").into())
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        let t = if large {
            StringType::LargeUtf8
        } else {
            StringType::Utf8
        };
        let got = array
            .read_chunk(&[1], &ZarrReadOptions::default().with_string_type(t))
            .await
            .unwrap();
        let data = got.to_data();
        assert_eq!(got.len(), 400);
        assert!(
            inside(data.buffers()[0].as_ptr(), data.buffers()[0].len(), &stored),
            "offsets were copied"
        );
        assert!(
            inside(data.buffers()[1].as_ptr(), data.buffers()[1].len(), &stored),
            "string data was copied"
        );
        // The edge chunk (200 of 400 elements) is a slice of the same buffers.
        let stored = mem
            .get(&format!("zc/{path}/c/2").into())
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        let edge = array
            .read_chunk(&[2], &ZarrReadOptions::default().with_string_type(t))
            .await
            .unwrap();
        assert_eq!(edge.len(), 200);
        assert!(
            inside(edge.to_data().buffers()[1].as_ptr(), 1, &stored),
            "edge chunk data was copied"
        );
    }
}

/// `vlen-utf8` read as Utf8View: the view buffer is the chunk as fetched (its items).
#[tokio::test]
async fn vlen_utf8_views_from_store_copy_nothing() {
    let mem = Arc::new(InMemory::new());
    let store = ZarrStore::new(mem.clone() as Arc<dyn ObjectStore>, "zcv");
    let opts = ZarrWriteOptions {
        chunk_shape: Some(vec![500]),
        ..Default::default()
    };
    zarrow::write_array(&store, "v", &labels(), &[1000], &opts)
        .await
        .unwrap();
    let array = open(&store, "v").await;
    let stored = mem
        .get(&"zcv/v/c/0".into())
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let got = array
        .read_chunk(
            &[0],
            &ZarrReadOptions::default().with_string_type(StringType::View),
        )
        .await
        .unwrap();
    let views = got.as_string_view();
    assert_eq!(views.value(3), "label-3-ü");
    assert_eq!(views.data_buffers().len(), 1);
    // The chunk as fetched (the views skip its 4-byte item count and length headers).
    let buffer = &views.data_buffers()[0];
    let (at, from) = (buffer.as_ptr() as usize, stored.as_ptr() as usize);
    assert!(
        from <= at && at <= from + 4,
        "the views' buffer is not the chunk fetched"
    );
    assert_eq!(buffer.len() + (at - from), stored.len());
}

/// zarrs.vlen chunks written by zarrs: data is a slice of the fetched chunk; offsets are too
/// when the index lies at an aligned address (else only the offsets are copied).
#[tokio::test]
async fn zarrs_vlen_fixture_is_zero_copy() {
    for (name, width, index_at) in [
        ("strings_default", 8usize, Some(8usize)),
        ("strings_uint32_index", 4, None),
    ] {
        let array = ZarrArray::open(&location("zarrs_vlen.zarr", name))
            .await
            .unwrap();
        let stored = array
            .fetch_chunk(&[0])
            .await
            .unwrap()
            .expect("chunk 0 is stored");
        // uint64 offsets stay in place as LargeUtf8's int64; uint32 as Utf8's int32.
        let t = if width == 8 {
            StringType::LargeUtf8
        } else {
            StringType::Utf8
        };
        let got = array
            .decode_chunk(
                &[0],
                Some(stored.clone()),
                &ZarrReadOptions::default().with_string_type(t),
            )
            .unwrap();
        let data = got.to_data();
        assert!(
            inside(data.buffers()[1].as_ptr(), data.buffers()[1].len(), &stored),
            "{name}: data was copied"
        );
        // Index at the end: it starts after the data, before the 8-byte length.
        let index_pos = index_at.unwrap_or(stored.len() - 8 - 11 * width);
        let aligned = (stored.as_ptr() as usize + index_pos).is_multiple_of(width);
        let offsets_in_chunk = inside(data.buffers()[0].as_ptr(), data.buffers()[0].len(), &stored);
        assert_eq!(
            offsets_in_chunk, aligned,
            "{name}: aligned offsets are used in place, misaligned copied"
        );
    }
}

/// Chunks handed out a run of rows at a time (`ZarrArray::chunk_reader`, what the record-batch
/// readers and SQL scans use) keep the zero-copy claims run by run: views of an uncompressed
/// `vlen-utf8` chunk, `zarrow.arrow_vlen` offsets and data, and fixed-size values all point
/// into the fetched bytes.
#[tokio::test]
async fn runs_of_rows_copy_nothing() {
    let mem = Arc::new(InMemory::new());
    let store = ZarrStore::new(mem.clone() as Arc<dyn ObjectStore>, "runs");
    let numbers = arrow::array::Int64Array::from_iter_values(0..1000);
    for (path, values, encoding, t) in [
        (
            "views",
            Arc::new(labels()) as arrow::array::ArrayRef,
            VlenEncoding::Numcodecs,
            StringType::View,
        ),
        (
            "arrow",
            Arc::new(labels()),
            VlenEncoding::ArrowVlen { large: false },
            StringType::Utf8,
        ),
        (
            "ints",
            Arc::new(numbers),
            VlenEncoding::Numcodecs,
            StringType::Utf8,
        ),
    ] {
        let opts = ZarrWriteOptions {
            chunk_shape: Some(vec![600]),
            string_encoding: encoding,
            ..Default::default()
        };
        zarrow::write_array(&store, path, values.as_ref(), &[1000], &opts)
            .await
            .unwrap();
        let array = open(&store, path).await;
        // Chunk 1 is the edge chunk: 400 of its 600 elements are in bounds.
        let stored = array.fetch_chunk(&[1]).await.unwrap().unwrap();
        let read = ZarrReadOptions::default().with_string_type(t);
        let mut reader = array
            .chunk_reader(&[1], Some(stored.clone()), &read)
            .await
            .unwrap();
        assert_eq!(reader.remaining(), 400);
        let mut rows = 0;
        while reader.remaining() > 0 {
            let run = reader.next_rows(128).unwrap();
            let want = values.slice(600 + rows, run.len());
            let got = arrow::compute::cast(&run, want.data_type()).unwrap();
            assert_eq!(got.as_ref(), want.as_ref(), "{path}: rows {rows}..");
            let data = run.to_data();
            let bytes = match t {
                StringType::View => data.buffers()[1].clone(),
                _ => data.buffers().last().unwrap().clone(),
            };
            assert!(
                inside(bytes.as_ptr(), bytes.len(), &stored),
                "{path}: run at row {rows} was copied"
            );
            rows += run.len();
        }
        assert_eq!(rows, 400);
    }
}
