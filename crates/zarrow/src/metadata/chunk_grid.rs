//! The `chunk_grid` of v3 array metadata, and v2's `chunks`, as a [`ChunkGrid`].
//!
//! ```text
//!  {"name": "regular",     "configuration": {"chunk_shape": [4, 3]}}
//!  {"name": "rectilinear", "configuration": {"kind": "inline",
//!                                            "chunk_shapes": [[2, [3, 4], 1], 5]}}
//!      per dimension: a bare integer (chunks of that edge, as regular), or a list of edges,
//!      each an integer or a run-length pair [edge, count]  →  2 3 3 3 3 1 | 5 5 5 …
//! ```

use serde_json::Value;

use crate::grid::{ChunkGrid, MAX_GRID_RUNS};
use crate::{Error, Result};

/// The grid a v3 `chunk_grid` declares over `shape` (errors name the array at `path`).
pub(super) fn parse_v3_grid(
    path: &str,
    key: &str,
    shape: &[u64],
    grid: &Value,
) -> Result<ChunkGrid> {
    check_elements(path, key, shape)?;
    let name = grid.get("name").and_then(Value::as_str).unwrap_or("");
    let config = grid.get("configuration");
    match name {
        "regular" => {
            let chunk_shape = super::as_u64_vec(config.and_then(|c| c.get("chunk_shape")))
                .ok_or_else(|| {
                    Error::metadata(path, key, "chunk_grid.configuration.chunk_shape missing")
                })?;
            regular_grid(path, key, shape, chunk_shape)
        }
        "rectilinear" => rectilinear_grid(path, key, shape, config),
        _ => Err(Error::UnsupportedChunkGrid {
            array: path.to_string(),
            grid: name.to_string(),
        }),
    }
}

/// A regular grid of `chunk_shape` over `shape`, checked.
pub(super) fn regular_grid(
    path: &str,
    key: &str,
    shape: &[u64],
    chunk_shape: Vec<u64>,
) -> Result<ChunkGrid> {
    check_elements(path, key, shape)?;
    if chunk_shape.len() != shape.len() {
        return Err(Error::metadata(
            path,
            key,
            format!("chunk shape {chunk_shape:?} does not match shape {shape:?}"),
        ));
    }
    if chunk_shape.contains(&0) {
        return Err(Error::metadata(path, key, "chunk shape has a zero extent"));
    }
    ChunkGrid::new(shape.to_vec(), chunk_shape)
        .map_err(|e| Error::metadata_caused_by(path, key, format!("chunk_grid: {e}"), e))
}

/// A shape of at most 2^64 elements (then no grid over it has more chunks).
fn check_elements(path: &str, key: &str, shape: &[u64]) -> Result<()> {
    if crate::grid::checked_product(shape).is_none() {
        return Err(Error::metadata(
            path,
            key,
            format!("shape {shape:?} has more than 2^64 elements"),
        ));
    }
    Ok(())
}

fn rectilinear_grid(
    path: &str,
    key: &str,
    shape: &[u64],
    config: Option<&Value>,
) -> Result<ChunkGrid> {
    let bad = |message: String| Error::metadata(path, key, format!("chunk_grid: {message}"));
    match config.and_then(|c| c.get("kind")).and_then(Value::as_str) {
        Some("inline") => {}
        other => {
            return Err(bad(format!(
                "rectilinear kind must be \"inline\", found {other:?}"
            )))
        }
    }
    let dims = config
        .and_then(|c| c.get("chunk_shapes"))
        .and_then(Value::as_array)
        .ok_or_else(|| bad("rectilinear chunk_shapes missing or not a list".into()))?;
    if dims.len() != shape.len() {
        return Err(bad(format!(
            "chunk_shapes has {} dimensions, shape {shape:?} has {}",
            dims.len(),
            shape.len()
        )));
    }
    let runs = dims
        .iter()
        .zip(shape)
        .enumerate()
        .map(|(d, (spec, &extent))| {
            dim_runs(spec, extent).map_err(|m| bad(format!("dimension {d}: {m}")))
        })
        .collect::<Result<Vec<_>>>()?;
    ChunkGrid::rectilinear(shape.to_vec(), runs)
        .map_err(|e| Error::metadata_caused_by(path, key, format!("chunk_grid: {e}"), e))
}

/// The runs of `(edge, count)` one dimension's spec declares. Counts are kept, never expanded.
fn dim_runs(spec: &Value, extent: u64) -> std::result::Result<Vec<(u64, u64)>, String> {
    if let Some(edge) = spec.as_u64() {
        // A bare integer: edges of that length as far as the shape reaches.
        return Ok(vec![(edge, extent.div_ceil(edge.max(1)).max(1))]);
    }
    let list = spec
        .as_array()
        .ok_or_else(|| format!("{spec} is neither an edge length nor a list of them"))?;
    if list.len() > MAX_GRID_RUNS {
        return Err(format!(
            "{} chunk edge entries, over the limit of {MAX_GRID_RUNS}",
            list.len()
        ));
    }
    list.iter()
        .map(|entry| match entry {
            Value::Number(_) => entry.as_u64().map(|e| (e, 1)),
            Value::Array(pair) => match pair.as_slice() {
                [edge, count] => edge.as_u64().zip(count.as_u64()),
                _ => None,
            },
            _ => None,
        })
        .map(|run| {
            run.ok_or_else(|| "chunk edges must be integers or [edge, count] pairs".to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::grid::{GridError, GridKind};

    fn parse(shape: &[u64], grid: Value) -> Result<ChunkGrid> {
        parse_v3_grid("g/x", "zarr.json", shape, &grid)
    }

    fn rect(shapes: Value) -> Value {
        json!({"name": "rectilinear", "configuration": {"kind": "inline", "chunk_shapes": shapes}})
    }

    #[test]
    fn parses_explicit_run_length_and_bare_edges() {
        let g = parse(&[15, 12], rect(json!([[2, [3, 4], 1], 5]))).unwrap();
        assert_eq!(g.kind(), GridKind::Rectilinear);
        assert_eq!(g.grid_shape(), [6, 3]);
        assert_eq!(g.runs(0), [(2, 1), (3, 4), (1, 1)]);
        assert_eq!(g.chunk_box(&[5, 2]).unwrap(), (vec![14, 10], vec![1, 2]));
        assert_eq!(g.stored_shape(&[5, 2]).unwrap(), [1, 5]);
        // Edges may reach past the shape (a shrunk array); extra chunks are not in the grid.
        let g = parse(&[4], rect(json!([[3, 3, 3]]))).unwrap();
        assert_eq!(g.grid_shape(), [2]);
        let g = parse(&[0], rect(json!([[3]]))).unwrap();
        assert_eq!(g.grid_shape(), [0]);
        let r = parse(
            &[6],
            json!({"name": "regular", "configuration": {"chunk_shape": [4]}}),
        );
        assert_eq!(r.unwrap().kind(), GridKind::Regular);
    }

    #[test]
    fn bad_grids_are_metadata_errors_naming_the_array() {
        let cases = [
            (rect(json!([[3, 3]])), "cover 6 elements, short of its 10"),
            (rect(json!([[3, 0, 7]])), "zero chunk edge"),
            (rect(json!([[[2, 0], 10]])), "zero chunk edge"),
            (rect(json!([0])), "zero chunk edge"),
            (rect(json!([[]])), "0 runs"),
            (rect(json!([[2, "x"]])), "integers or [edge, count] pairs"),
            (
                rect(json!([[[2, 3, 4]]])),
                "integers or [edge, count] pairs",
            ),
            (rect(json!([[-1]])), "integers or [edge, count] pairs"),
            (rect(json!([[10], [10]])), "2 dimensions"),
            (rect(json!({"a": 1})), "chunk_shapes missing"),
            (
                json!({"name": "rectilinear", "configuration": {"chunk_shapes": [[10]]}}),
                "kind must be",
            ),
        ];
        for (grid, want) in cases {
            let e = parse(&[10], grid.clone()).unwrap_err();
            assert_eq!(e.array(), Some("g/x"), "{grid}");
            assert!(e.to_string().contains(want), "{grid}: {e}");
        }
        let e = parse(&[10], json!({"name": "hexagonal"})).unwrap_err();
        assert!(matches!(e, Error::UnsupportedChunkGrid { .. }), "{e}");
        // A declared count allocates nothing: 2^63 chunks of one element is one run.
        let huge = parse(&[1 << 62], rect(json!([[[1, 1u64 << 63]]]))).unwrap();
        assert_eq!(huge.runs(0), [(1, 1 << 62)]);
        // Too many entries are refused before the runs are built.
        let many = Value::Array(vec![json!(1); MAX_GRID_RUNS + 1]);
        let e = parse(&[10], rect(Value::Array(vec![many]))).unwrap_err();
        assert!(e.to_string().contains("over the limit"), "{e}");
        let short = GridError::EdgesShort {
            dim: 0,
            extent: 10,
            covered: 6,
        };
        assert!(
            std::error::Error::source(&parse(&[10], rect(json!([[3, 3]]))).unwrap_err())
                .is_some_and(|s| s.to_string() == short.to_string())
        );
    }
}
