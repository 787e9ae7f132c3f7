//! The hierarchy at a location as text, one line per node (what `zarrow tree` and the Python
//! package's `zarrow.tree` print).
//!
//! ```text
//! pbmc_sample.zarr  group, zarr v3, consolidated
//! ├── X    float32  [2000, 200]  chunks [250, 200]  bytes → zstd  fill 0.0
//! └── obs/          dataframe
//!     └── …
//! ```
//!
//! A node that cannot be opened (an unsupported data type, bad metadata) is a line of its own
//! with the reason; the rest of the tree is printed around it. A group that says it is an
//! AnnData dataframe and is not a valid one (no `_index`, a column `column-order` names is
//! not there) is marked invalid with the reason, and what it holds is listed below it. The tree is fetched a level at
//! a time, sibling groups at once (`ZarrGroup::subtree`).

use crate::grid::GridKind;
use crate::node::Subtree;
pub use crate::text::{push_padded, short};
use crate::{Node, Result, ZarrArray, ZarrGroup};

/// One printed line before alignment: tree prefix + name, then the columns.
struct Line {
    name: String,
    columns: Vec<String>,
}

/// The whole tree at `location` as text.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> zarrow::Result<()> {
/// let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/pbmc_sample.zarr");
/// let tree = zarrow::tree::render(sample).await?;
/// let first = tree.lines().next().unwrap_or_default();
/// assert!(first.starts_with("pbmc_sample.zarr") && first.contains("group"), "{first}");
/// assert!(tree.lines().any(|l| l.contains("X") && l.contains("float32")), "{tree}");
/// assert!(tree.contains("obs/"), "{tree}");
/// # Ok(())
/// # }
/// ```
pub async fn render(location: &str) -> Result<String> {
    render_node(location, Node::open(location).await?).await
}

/// The whole tree of an open node as text; `location` names its root line.
pub async fn render_node(location: &str, node: Node) -> Result<String> {
    let root_name = display_name(location);
    let mut lines = Vec::new();
    match &node {
        Node::Array(a) => lines.push(Line {
            name: root_name,
            columns: array_columns(a),
        }),
        Node::Group(g) => {
            let meta = g.metadata();
            let mut desc = format!("group, zarr v{}", meta.zarr_format);
            if meta.consolidated.is_some() {
                desc.push_str(", consolidated");
            }
            if let Some(kind) = encoding_type(g) {
                desc.push_str(", ");
                desc.push_str(&kind);
            }
            let subtree = g.subtree().await?;
            if let Some(invalid) = &subtree.invalid {
                desc.push_str(", ");
                desc.push_str(&invalid_text(invalid));
            }
            lines.push(Line {
                name: format!("{root_name}/"),
                columns: vec![desc],
            });
            group_lines(subtree, "", &mut lines);
        }
    }
    Ok(align(&lines))
}

/// The last component of a location, for the root line.
fn display_name(location: &str) -> String {
    let trimmed = location.trim_end_matches('/');
    let name = trimmed.rsplit('/').next().unwrap_or(trimmed);
    if name.is_empty() {
        trimmed.to_string()
    } else {
        name.to_string()
    }
}

fn group_lines(tree: Subtree, prefix: &str, lines: &mut Vec<Line>) {
    let mut children = tree.children;
    children.sort_by(|a, b| a.0.cmp(&b.0));
    let n = children.len();
    for (i, (name, child, below)) in children.into_iter().enumerate() {
        let name = short(&name, NAME_MAX);
        let last = i + 1 == n;
        let branch = if last { "└── " } else { "├── " };
        match child {
            Err(e) => lines.push(Line {
                name: format!("{prefix}{branch}{name}"),
                columns: vec![format!("unreadable: {e}")],
            }),
            Ok(Node::Array(a)) => lines.push(Line {
                name: format!("{prefix}{branch}{name}"),
                columns: array_columns(&a),
            }),
            Ok(Node::Group(g)) => {
                let invalid = below.as_ref().and_then(|b| b.invalid.as_ref());
                let desc: Vec<String> = encoding_type(&g)
                    .into_iter()
                    .chain(invalid.map(invalid_text))
                    .collect();
                lines.push(Line {
                    name: format!("{prefix}{branch}{name}/"),
                    columns: (!desc.is_empty())
                        .then(|| desc.join(", "))
                        .into_iter()
                        .collect(),
                });
                let deeper = format!("{prefix}{}", if last { "    " } else { "│   " });
                if let Some(below) = below {
                    group_lines(below, &deeper, lines);
                }
            }
        }
    }
}

/// Why a group is not the AnnData dataframe it says it is, as its line shows it: `invalid
/// (column-order): names the column 'x', which the group does not hold; queries refuse it`.
fn invalid_text(invalid: &crate::Error) -> String {
    let reason = match invalid {
        crate::Error::Metadata { key, message, .. } => format!(" ({key}): {message}"),
        other => format!(": {other}"),
    };
    format!("invalid{}; queries refuse it", short(&reason, 4 * NAME_MAX))
}

/// The AnnData-style `encoding-type` attribute of a group (`dataframe`, `categorical`, …).
fn encoding_type(group: &ZarrGroup) -> Option<String> {
    group
        .metadata()
        .attributes
        .get("encoding-type")
        .and_then(|v| v.as_str())
        .map(str::to_string)
}

fn dims(values: &[u64]) -> String {
    let parts: Vec<String> = values.iter().map(u64::to_string).collect();
    format!("[{}]", parts.join(", "))
}

/// data type, shape, chunks (and inner chunks), codecs, fill value, dimension names.
fn array_columns(a: &ZarrArray) -> Vec<String> {
    let m = a.metadata();
    let mut chunks = match m.chunk_grid.kind() {
        GridKind::Regular => format!("chunks {}", dims(&m.chunk_shape)),
        GridKind::Rectilinear => format!("chunks rectilinear, up to {}", dims(&m.chunk_shape)),
    };
    if let Some(s) = m.sharding() {
        chunks.push_str(&format!(" inner {}", dims(&s.chunk_shape)));
    }
    let mut columns = vec![
        type_name(&m.data_type),
        dims(&m.shape),
        chunks,
        m.codecs.describe(),
        format!("fill {}", short(&m.fill_value.json.to_string(), 40)),
    ];
    if m.dimension_names
        .as_ref()
        .is_some_and(|d| d.iter().any(Option::is_some))
    {
        let names: Vec<String> = (0..m.ndim())
            .map(|d| short(m.dimension_name(d).unwrap_or("-"), NAME_MAX))
            .collect();
        columns.push(format!("dims ({})", names.join(", ")));
    }
    columns
}

/// The most characters of a name (a child key, a dimension or field name) a line shows.
const NAME_MAX: usize = 120;

/// The data type as the tree shows it: a struct of many fields by its first field and a count
/// (`schema` shows them all), so that one wide record array does not widen every line.
fn type_name(data_type: &crate::DataType) -> String {
    const WIDE: usize = 48;
    let name = data_type.name();
    match data_type {
        crate::DataType::Struct(fields) if name.chars().count() > WIDE && fields.len() > 1 => {
            format!(
                "struct{{{}: {}, …}} ({} fields)",
                short(&fields[0].name, NAME_MAX),
                type_name(&fields[0].data_type),
                fields.len()
            )
        }
        _ => short(&name, 4 * NAME_MAX),
    }
}

/// Pad the name and every column but the last to the widest entry of its column.
fn align(lines: &[Line]) -> String {
    let name_width = lines
        .iter()
        .map(|l| l.name.chars().count())
        .max()
        .unwrap_or(0);
    let ncols = lines.iter().map(|l| l.columns.len()).max().unwrap_or(0);
    let mut widths = vec![0usize; ncols];
    for l in lines.iter().filter(|l| l.columns.len() > 1) {
        for (w, c) in widths.iter_mut().zip(&l.columns) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for l in lines {
        let mut line = String::new();
        push_padded(&mut line, &l.name, name_width);
        if l.columns.len() <= 1 {
            // groups: one free-form description
            if let Some(c) = l.columns.first() {
                line.push_str("  ");
                line.push_str(c);
            }
        } else {
            for (i, c) in l.columns.iter().enumerate() {
                line.push_str("  ");
                if i + 1 == l.columns.len() {
                    line.push_str(c);
                } else {
                    push_padded(&mut line, c, widths[i]);
                }
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
