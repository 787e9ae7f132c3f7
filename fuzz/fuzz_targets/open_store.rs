//! Fuzz a whole store: the input is a small store (keys and their bytes) held in memory;
//! zarrow walks its hierarchy as `tree` does, opens the root and each child as a table (group,
//! xarray/CF or AnnData dataframe, array) and reads up to a few thousand rows. Every metadata
//! document, attribute, codec chain and chunk on the way is hostile: the result must be batches
//! or an error, never a panic, a hang, an invalid Arrow array or an allocation sized by a
//! number in the input (libFuzzer's `-malloc_limit_mb` in `fuzz/run.sh` catches those).
//!
//! Input: entries of `[key length: u8][key][value length: u16 LE][value]` until the bytes run
//! out. `fuzz/seeds.py` turns the fixture stores into such entries.
#![no_main]

#[path = "shared/read_table.rs"]
mod shared;

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use object_store::memory::InMemory;
use zarrow::{Node, ZarrStore};

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a current-thread runtime")
    })
}

/// The entries of the input, as (key, value).
fn entries(mut input: &[u8]) -> Vec<(String, Bytes)> {
    let mut out = Vec::new();
    while let Some((&klen, rest)) = input.split_first() {
        let klen = klen as usize;
        if rest.len() < klen + 2 {
            break;
        }
        let key = String::from_utf8_lossy(&rest[..klen]).into_owned();
        let vlen = u16::from_le_bytes([rest[klen], rest[klen + 1]]) as usize;
        let value = &rest[klen + 2..];
        let value = &value[..vlen.min(value.len())];
        out.push((key, Bytes::copy_from_slice(value)));
        input = &rest[klen + 2 + value.len()..];
    }
    out
}

fuzz_target!(|input: &[u8]| {
    let entries = entries(input);
    if entries.is_empty() {
        return;
    }
    runtime().block_on(async {
        let memory = Arc::new(InMemory::new());
        let store = ZarrStore::new(memory, "");
        for (key, value) in entries {
            if object_store::path::Path::parse(&key).is_err() {
                continue;
            }
            let _ = store.put(&key, value).await;
        }
        let Ok(root) = Node::open_store(store, "").await else {
            return;
        };
        let _ = zarrow::tree::render_node("fuzz", root.clone()).await;
        let children = match &root {
            Node::Group(group) => group.children().await.unwrap_or_default(),
            Node::Array(_) => Vec::new(),
        };
        shared::read_table(root, true).await;
        // children that do not open are listed with their reason (the tree above); the rest
        // are read
        for (_, child) in children.into_iter().take(8) {
            if let Ok(child) = child {
                shared::read_table(child, true).await;
            }
        }
    });
});
