//! Fuzz the metadata parsers: any bytes as a v3 `zarr.json`, a v2 `.zarray`/`.zgroup` with its
//! `.zattrs`, or a consolidated `.zmetadata` — parsing must give metadata or an error, never
//! panic, and whatever parses must answer the questions a table asks of it (its Arrow type,
//! chunk grid, element count, dimension names) without panicking or allocating by its numbers.
//!
//! Input: byte 0 picks the parser; for v2 documents with attributes, the rest is split at the
//! first NUL into the document and its `.zattrs`. Run with `fuzz/run.sh` (or
//! `cargo +nightly fuzz run metadata` from `fuzz/`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use zarrow::internals::{parse_v2_array, parse_v2_consolidated, parse_v2_group, parse_v3};
use zarrow::ZarrReadOptions;
use zarrow::{ArrayMetadata, NodeMetadata};

fn exercise_array(meta: &ArrayMetadata) {
    let _ = meta.num_elements();
    let _ = meta.read_grid_shape();
    let _ = meta.read_chunk_shape();
    let _ = meta.read_chain();
    for d in 0..meta.ndim() {
        let _ = meta.dimension_name(d);
    }
    let opts = ZarrReadOptions::default();
    let _ = meta
        .data_type
        .arrow_type(opts.string_type, opts.binary_type());
    let _ = meta.data_type.name();
    let _ = zarrow::internals::fill_array(&meta.data_type, &meta.fill_value, 3, &opts);
}

fn exercise(node: &NodeMetadata) {
    if let NodeMetadata::Array(meta) = node {
        exercise_array(meta);
    }
}

fuzz_target!(|input: &[u8]| {
    let Some((&selector, rest)) = input.split_first() else {
        return;
    };
    let (doc, attrs) = match rest.iter().position(|&b| b == 0) {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let limits = zarrow::ReadLimits::default();
    match selector % 4 {
        0 => {
            if let Ok(node) = parse_v3("fuzz", rest, &limits) {
                exercise(&node);
            }
        }
        1 => {
            if let Ok(meta) = parse_v2_array("fuzz", doc, attrs, &limits) {
                exercise_array(&meta);
            }
        }
        2 => {
            let _ = parse_v2_group("fuzz", doc, attrs);
        }
        _ => {
            if let Ok(nodes) = parse_v2_consolidated("fuzz", rest, &limits) {
                for (_, node) in nodes.iter().take(64) {
                    exercise(node);
                }
            }
        }
    }
});
