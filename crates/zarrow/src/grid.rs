//! Chunk grids (regular and rectilinear), and selections of chunks as ranges over them.
//!
//! A [`ChunkGrid`] is a shape cut into chunks: per dimension, runs of equal chunk edges (a
//! regular grid is one run per dimension; the last chunk along a dimension may stick out past
//! the shape). Everything that maps chunks to elements or back goes through it. A
//! [`ChunkRanges`] selects chunks of a grid without listing them: per dimension a sorted list
//! of disjoint ranges of chunk indices, the selection being their product, enumerated in C
//! order, and a window `[start, end)` of that enumeration (what a partition or a limit reads).
//! Everything here costs memory and time in the number of runs and ranges, never in the number
//! of chunks: a regular grid of 2^40 chunks is one run and one range per dimension.
//!
//! ```text
//!  dims:   d0: [0..2, 5..6]   d1: [0..3]        selection = {0,1,5} × {0,1,2}, C order:
//!  ordinal 0 1 2 3 4 5 6 7 8  →  (0,0) (0,1) (0,2) (1,0) (1,1) (1,2) (5,0) (5,1) (5,2)
//!  window  2..5               →  (0,2) (1,0) (1,1)
//! ```

use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::Error;

/// What is wrong with a chunk grid, chunk coordinates or a chunk selection. Carries no array:
/// [`GridError::in_array`] adds it ([`Error::Grid`]); a grid built from metadata is the
/// metadata's fault ([`Error::Metadata`]).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GridError {
    /// A chunk shape with another number of dimensions than the shape.
    #[error("chunk shape {chunk_shape:?} does not have the {} dimensions of shape {shape:?}", shape.len())]
    Dimensions {
        /// The shape.
        shape: Vec<u64>,
        /// The chunk shape.
        chunk_shape: Vec<u64>,
    },
    /// A chunk shape with a zero extent.
    #[error("chunk shape {chunk_shape:?} has a zero extent")]
    ZeroExtent {
        /// The chunk shape.
        chunk_shape: Vec<u64>,
    },
    /// More chunks than a `u64` counts.
    #[error("a grid of {grid_shape:?} chunks has more chunks than fit in 64 bits")]
    TooManyChunks {
        /// Chunks along each dimension.
        grid_shape: Vec<u64>,
    },
    /// Chunk coordinates outside the grid (or with another number of dimensions).
    #[error("chunk {coords:?} outside the chunk grid {grid_shape:?}")]
    OutsideGrid {
        /// The coordinates.
        coords: Vec<u64>,
        /// Chunks along each dimension.
        grid_shape: Vec<u64>,
    },
    /// A chunk of more elements than a `u64` counts.
    #[error("chunk {chunk_shape:?} holds more than 2^64 elements")]
    TooManyElements {
        /// The chunk's in-bounds shape.
        chunk_shape: Vec<u64>,
    },
    /// Chunk ranges for another number of dimensions than the grid's.
    #[error("chunk ranges for {ranges} dimensions, but the grid has {grid}")]
    RangeDimensions {
        /// Dimensions of the ranges.
        ranges: usize,
        /// Dimensions of the grid.
        grid: usize,
    },
    /// A selection of more chunks than a `u64` counts.
    #[error("chunk ranges select over 2^64 chunks")]
    TooManySelected,
    /// A selection (of a deserialized scan) that does not fit the grid: the store changed
    /// since it was planned, or it was planned for another array.
    #[error("chunk ranges {ranges} do not fit the chunk grid {grid_shape:?}")]
    RangesDoNotFit {
        /// The selection, as displayed.
        ranges: String,
        /// Chunks along each dimension.
        grid_shape: Vec<u64>,
    },
    /// Selected chunks holding more rows than a `u64` counts.
    #[error("the selected chunks hold over 2^64 rows")]
    TooManyRows,
    /// Chunk edges for another number of dimensions than the shape's.
    #[error("chunk edges for {dims} dimensions, but shape {shape:?} has {}", shape.len())]
    RunDimensions {
        /// The shape.
        shape: Vec<u64>,
        /// Dimensions the edges were given for.
        dims: usize,
    },
    /// Chunk edges along a dimension that are empty or more than [`MAX_GRID_RUNS`] runs.
    #[error("dimension {dim} declares {runs} runs of chunk edges (1 to {max} allowed)")]
    RunCount {
        /// The dimension.
        dim: usize,
        /// Runs declared.
        runs: usize,
        /// The most allowed.
        max: usize,
    },
    /// A chunk edge, or a run count, of zero.
    #[error("dimension {dim} declares a zero chunk edge or run count")]
    ZeroRun {
        /// The dimension.
        dim: usize,
    },
    /// Chunk edges that do not reach the end of the shape.
    #[error("chunk edges along dimension {dim} cover {covered} elements, short of its {extent}")]
    EdgesShort {
        /// The dimension.
        dim: usize,
        /// The shape along it.
        extent: u64,
        /// Elements the edges cover (saturated at 2^64 - 1).
        covered: u64,
    },
}

impl GridError {
    /// This error about the array (or table) at `array`.
    pub fn in_array(self, array: impl Into<String>) -> Error {
        Error::Grid {
            array: array.into(),
            source: Box::new(self),
        }
    }
}

/// The most runs of chunk sizes one dimension of a grid may declare (an explicit edge is a run
/// of one; equal neighbours merge). Metadata declaring more is refused before anything is
/// allocated per run.
pub const MAX_GRID_RUNS: usize = 1 << 20;

/// Which kind of chunk grid an array declares (how its metadata spells it). Both read through
/// the same code: a regular dimension is one run of equal chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GridKind {
    /// The core `regular` grid: one chunk shape.
    Regular,
    /// The `rectilinear` grid of zarr-extensions: explicit chunk edge lengths per dimension.
    Rectilinear,
}

/// `count` chunks of `size` elements along a dimension, the first at chunk index
/// `first_chunk` and element `first_elem`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Run {
    size: u64,
    count: u64,
    first_chunk: u64,
    first_elem: u64,
}

/// One dimension of a grid: the runs of equal chunks covering `0..extent` (runs wholly past
/// the extent are dropped, the last run's count cut to the chunks that reach into it).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Axis {
    extent: u64,
    runs: Vec<Run>,
    /// The largest chunk declared along the dimension.
    largest: u64,
}

impl Axis {
    /// An axis over `extent` cut by `runs` of `(size, count)`; `None` when the runs do not
    /// reach the extent.
    fn new(extent: u64, declared: &[(u64, u64)]) -> Option<Self> {
        let largest = declared.iter().map(|r| r.0).max().unwrap_or(0);
        let mut runs: Vec<Run> = Vec::new();
        let (mut chunk, mut elem) = (0u64, 0u64);
        for &(size, count) in declared {
            if elem >= extent {
                break;
            }
            if count == 0 {
                continue;
            }
            // Chunks of this run that start before the extent.
            let count = count.min((extent - elem).div_ceil(size));
            match runs.last_mut() {
                Some(last) if last.size == size => last.count += count,
                _ => runs.push(Run {
                    size,
                    count,
                    first_chunk: chunk,
                    first_elem: elem,
                }),
            }
            chunk = chunk.checked_add(count)?;
            elem = elem.saturating_add(count.saturating_mul(size));
        }
        (elem >= extent).then_some(Axis {
            extent,
            runs,
            largest,
        })
    }

    /// The number of chunks (reaching into the extent).
    fn len(&self) -> u64 {
        self.runs.last().map_or(0, |r| r.first_chunk + r.count)
    }

    /// The run holding chunk `i` (`i` below [`Self::len`]).
    fn run_of_chunk(&self, i: u64) -> &Run {
        let at = self.runs.partition_point(|r| r.first_chunk <= i);
        &self.runs[at.saturating_sub(1)]
    }

    /// Where chunk `i` starts, clipped to the extent (the extent for `i` past the last chunk).
    fn boundary(&self, i: u64) -> u64 {
        if i >= self.len() {
            return self.extent;
        }
        let run = self.run_of_chunk(i);
        (run.first_elem + (i - run.first_chunk) * run.size).min(self.extent)
    }

    /// The declared (stored) size of chunk `i`, which may reach past the extent.
    fn size(&self, i: u64) -> u64 {
        self.run_of_chunk(i).size
    }

    /// The chunk holding element `e` (`e` below the extent).
    fn chunk_of(&self, e: u64) -> u64 {
        let at = self.runs.partition_point(|r| r.first_elem <= e);
        let run = &self.runs[at.saturating_sub(1)];
        run.first_chunk + (e - run.first_elem) / run.size
    }

    /// The chunks holding any element of `elems` (clipped to the extent).
    fn chunks_in(&self, elems: &Range<u64>) -> Range<u64> {
        let end = elems.end.min(self.extent);
        if elems.start >= end || self.runs.is_empty() {
            return 0..0;
        }
        self.chunk_of(elems.start)..self.chunk_of(end - 1) + 1
    }
}

/// A grid of chunks over a shape: per dimension, runs of equal chunk sizes. The core
/// `regular` grid is one run per dimension (the last chunk may stick out past the shape); the
/// `rectilinear` grid lists chunk edges, explicitly or run-length encoded, and is stored as
/// those runs, never expanded. Lookups are binary searches over the runs: chunk indices to
/// element ranges ([`Self::chunk_box`], [`Self::elements`]) and element ranges to chunk index
/// ranges ([`Self::chunks_in`]).
///
/// ```
/// use zarrow::ChunkGrid;
///
/// // 10 × 7 elements in chunks of 4 × 4: the last chunk along each dimension is partial.
/// let grid = ChunkGrid::new(vec![10, 7], vec![4, 4])?;
/// assert_eq!(grid.grid_shape(), [3, 2]);
/// assert_eq!(grid.num_chunks(), 6);
/// let (start, shape) = grid.chunk_box(&[2, 1])?;
/// assert_eq!((start, shape), (vec![8, 4], vec![2, 3]));
/// assert_eq!(grid.chunk_len(&[2, 1])?, 6);
/// assert!(grid.check(&[3, 0]).is_err());
/// assert!(ChunkGrid::new(vec![10], vec![0]).is_err());
///
/// // Rows in chunks of 2, 2, 2 then 5 (the run-length form `[[2, 3], 5]`).
/// let grid = ChunkGrid::rectilinear(vec![10], vec![vec![(2, 3), (5, 1)]])?;
/// assert_eq!(grid.grid_shape(), [4]);
/// assert_eq!(grid.chunk_box(&[3])?, (vec![6], vec![4]));
/// assert_eq!(grid.stored_shape(&[3])?, [5]);
/// assert_eq!(grid.chunks_in(0, &(3..7)), 1..4);
/// # Ok::<(), zarrow::GridError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkGrid {
    shape: Vec<u64>,
    kind: GridKind,
    axes: Vec<Axis>,
    largest: Vec<u64>,
}

impl ChunkGrid {
    /// A regular grid of `chunk_shape` chunks over `shape`. Chunk extents must be positive,
    /// and the number of chunks must fit in a `u64`.
    pub fn new(shape: Vec<u64>, chunk_shape: Vec<u64>) -> Result<Self, GridError> {
        if shape.len() != chunk_shape.len() {
            return Err(GridError::Dimensions { shape, chunk_shape });
        }
        if chunk_shape.contains(&0) {
            return Err(GridError::ZeroExtent { chunk_shape });
        }
        let runs = shape
            .iter()
            .zip(&chunk_shape)
            .map(|(&s, &c)| vec![(c, s.div_ceil(c))])
            .collect();
        Self::from_runs(shape, GridKind::Regular, runs)
    }

    /// A rectilinear grid over `shape`: per dimension, runs of `(size, count)` chunks (an
    /// explicit edge is a run of one). Sizes and counts must be positive, at most
    /// [`MAX_GRID_RUNS`] runs per dimension, and the edges must reach the shape (they may
    /// reach past it).
    pub fn rectilinear(shape: Vec<u64>, runs: Vec<Vec<(u64, u64)>>) -> Result<Self, GridError> {
        if shape.len() != runs.len() {
            return Err(GridError::RunDimensions {
                shape,
                dims: runs.len(),
            });
        }
        for (dim, r) in runs.iter().enumerate() {
            if r.is_empty() || r.len() > MAX_GRID_RUNS {
                return Err(GridError::RunCount {
                    dim,
                    runs: r.len(),
                    max: MAX_GRID_RUNS,
                });
            }
            if r.iter().any(|&(size, count)| size == 0 || count == 0) {
                return Err(GridError::ZeroRun { dim });
            }
        }
        Self::from_runs(shape, GridKind::Rectilinear, runs)
    }

    fn from_runs(
        shape: Vec<u64>,
        kind: GridKind,
        runs: Vec<Vec<(u64, u64)>>,
    ) -> Result<Self, GridError> {
        let mut axes = Vec::with_capacity(shape.len());
        for (dim, (&extent, r)) in shape.iter().zip(&runs).enumerate() {
            let axis = Axis::new(extent, r).ok_or_else(|| GridError::EdgesShort {
                dim,
                extent,
                covered: r
                    .iter()
                    .fold(0u64, |acc, &(s, c)| acc.saturating_add(s.saturating_mul(c))),
            })?;
            axes.push(axis);
        }
        let largest = axes.iter().map(|a| a.largest).collect();
        let grid = ChunkGrid {
            shape,
            kind,
            axes,
            largest,
        };
        checked_product(&grid.grid_shape()).ok_or_else(|| GridError::TooManyChunks {
            grid_shape: grid.grid_shape(),
        })?;
        Ok(grid)
    }

    /// The shape the grid covers.
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }

    /// How the grid was declared.
    pub fn kind(&self) -> GridKind {
        self.kind
    }

    /// The largest chunk along each dimension: for a regular grid, its chunk shape.
    pub fn chunk_shape(&self) -> &[u64] {
        &self.largest
    }

    /// Per dimension, the runs of `(size, count)` chunks reaching into the shape.
    pub fn runs(&self, d: usize) -> Vec<(u64, u64)> {
        self.axes
            .get(d)
            .map(|a| a.runs.iter().map(|r| (r.size, r.count)).collect())
            .unwrap_or_default()
    }

    /// The number of chunks along each dimension.
    pub fn grid_shape(&self) -> Vec<u64> {
        self.axes.iter().map(Axis::len).collect()
    }

    /// The number of chunks (checked to fit when the grid was made).
    pub fn num_chunks(&self) -> u64 {
        checked_product(&self.grid_shape()).unwrap_or(u64::MAX)
    }

    /// Checks that `coords` is a chunk of the grid.
    pub fn check(&self, coords: &[u64]) -> Result<(), GridError> {
        if coords.len() != self.axes.len()
            || coords.iter().zip(&self.axes).any(|(c, a)| *c >= a.len())
        {
            return Err(GridError::OutsideGrid {
                coords: coords.to_vec(),
                grid_shape: self.grid_shape(),
            });
        }
        Ok(())
    }

    /// The in-bounds extent of chunk index `i` along dimension `d` (0 outside the grid).
    pub fn extent(&self, d: usize, i: u64) -> u64 {
        self.elements(d, i..i.saturating_add(1)).count() as u64
    }

    /// The in-bounds elements along dimension `d` of the chunk indices `chunks`.
    pub fn elements(&self, d: usize, chunks: Range<u64>) -> Range<u64> {
        match self.axes.get(d) {
            Some(a) => {
                let start = a.boundary(chunks.start);
                start..a.boundary(chunks.end).max(start)
            }
            None => 0..0,
        }
    }

    /// The chunk indices along dimension `d` holding any element of `elems`.
    pub fn chunks_in(&self, d: usize, elems: &Range<u64>) -> Range<u64> {
        self.axes.get(d).map_or(0..0, |a| a.chunks_in(elems))
    }

    /// The box of elements of chunk `coords`: (start, in-bounds shape) per dimension.
    pub fn chunk_box(&self, coords: &[u64]) -> Result<(Vec<u64>, Vec<u64>), GridError> {
        self.check(coords)?;
        Ok(coords
            .iter()
            .enumerate()
            .map(|(d, &c)| {
                let r = self.elements(d, c..c + 1);
                (r.start, r.end - r.start)
            })
            .unzip())
    }

    /// The stored shape of chunk `coords`: its declared edges, which may reach past the shape
    /// (what its codecs encode).
    pub fn stored_shape(&self, coords: &[u64]) -> Result<Vec<u64>, GridError> {
        self.check(coords)?;
        Ok(coords
            .iter()
            .zip(&self.axes)
            .map(|(&c, a)| a.size(c))
            .collect())
    }

    /// The number of in-bounds elements of chunk `coords` (`None` past 64 bits).
    pub fn chunk_len(&self, coords: &[u64]) -> Result<u64, GridError> {
        let (_, shape) = self.chunk_box(coords)?;
        checked_product(&shape).ok_or(GridError::TooManyElements { chunk_shape: shape })
    }

    /// The grid with its dimensions in another order: dimension `i` of the result is
    /// dimension `order[i]` of this one (`order` a permutation of the dimensions).
    pub fn transposed(&self, order: &[usize]) -> Result<Self, GridError> {
        let mut seen = vec![false; self.axes.len()];
        for &d in order {
            match seen.get_mut(d) {
                Some(s) if !*s => *s = true,
                _ => break,
            }
        }
        if order.len() != self.axes.len() || seen.contains(&false) {
            return Err(GridError::RangeDimensions {
                ranges: order.len(),
                grid: self.axes.len(),
            });
        }
        Ok(ChunkGrid {
            shape: order.iter().map(|&d| self.shape[d]).collect(),
            kind: self.kind,
            axes: order.iter().map(|&d| self.axes[d].clone()).collect(),
            largest: order.iter().map(|&d| self.largest[d]).collect(),
        })
    }

    /// Elements along dimension `d` in the chunk indices `range`.
    fn elements_in(&self, d: usize, range: &Range<u64>) -> u64 {
        let r = self.elements(d, range.clone());
        r.end - r.start
    }
}

/// The product of `values`, or `None` when it does not fit in a `u64`.
pub fn checked_product(values: &[u64]) -> Option<u64> {
    values.iter().try_fold(1u64, |acc, v| acc.checked_mul(*v))
}

/// A selection of chunks of a grid: per dimension, sorted disjoint ranges of chunk indices,
/// their product enumerated in C order, and a window of that enumeration (see the module
/// docs). Cheap to clone and to serialize: its size is the number of ranges.
///
/// ```
/// use zarrow::{ChunkGrid, ChunkRanges};
///
/// let grid = ChunkGrid::new(vec![10, 7], vec![4, 4])?;
/// // Chunk rows 0 and 2 (ranges are clipped to the grid and merged), every chunk column.
/// let chunks = ChunkRanges::from_dims(&grid.grid_shape(), vec![vec![0..1, 2..5], vec![0..2]])?;
/// assert_eq!(chunks.to_string(), "[0..1,2..3]×[0..2]");
/// let coords: Vec<Vec<u64>> = chunks.iter().collect();
/// assert_eq!(coords, [[0, 0], [0, 1], [2, 0], [2, 1]]);
/// assert_eq!(chunks.rows(&grid)?, 16 + 12 + 8 + 6);
///
/// // Partitions of a scan: windows of the same selection.
/// let parts = chunks.split(2);
/// assert_eq!(parts[1].iter().collect::<Vec<_>>(), [[2, 0], [2, 1]]);
/// assert_eq!(parts[1].to_string(), "[0..1,2..3]×[0..2] window 2..4");
/// // A LIMIT: the shortest prefix holding enough rows.
/// assert_eq!(chunks.take_rows(&grid, 20)?.len(), 2);
/// assert_eq!(ChunkRanges::all(&grid.grid_shape()).len(), 6);
/// # Ok::<(), zarrow::GridError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkRanges {
    dims: Vec<Vec<Range<u64>>>,
    window: Range<u64>,
}

impl ChunkRanges {
    /// Every chunk of a grid of `grid_shape` chunks.
    pub fn all(grid_shape: &[u64]) -> Self {
        let dims: Vec<Vec<Range<u64>>> = grid_shape
            .iter()
            .map(|&g| std::iter::once(0..g).filter(|r| !r.is_empty()).collect())
            .collect();
        let total = Self::product_len(&dims);
        ChunkRanges {
            dims,
            window: 0..total,
        }
    }

    /// No chunks (of a grid of `ndim` dimensions).
    pub fn none(ndim: usize) -> Self {
        ChunkRanges {
            dims: vec![Vec::new(); ndim],
            window: 0..0,
        }
    }

    /// The product of per-dimension ranges of chunk indices of a grid of `grid_shape` chunks
    /// (ranges are clipped to the grid, sorted and merged), all of it.
    pub fn from_dims(grid_shape: &[u64], dims: Vec<Vec<Range<u64>>>) -> Result<Self, GridError> {
        if dims.len() != grid_shape.len() {
            return Err(GridError::RangeDimensions {
                ranges: dims.len(),
                grid: grid_shape.len(),
            });
        }
        let dims: Vec<Vec<Range<u64>>> = dims
            .into_iter()
            .zip(grid_shape)
            .map(|(ranges, &g)| normalize(ranges, g))
            .collect();
        let total = checked_product(
            &dims
                .iter()
                .map(|r| r.iter().map(|r| r.end - r.start).sum())
                .collect::<Vec<u64>>(),
        )
        .ok_or(GridError::TooManySelected)?;
        Ok(ChunkRanges {
            dims,
            window: 0..total,
        })
    }

    /// The single chunk at `coords`.
    pub fn single(grid_shape: &[u64], coords: &[u64]) -> Result<Self, GridError> {
        let dims = coords
            .iter()
            .map(|&c| std::iter::once(c..c + 1).collect())
            .collect();
        let ranges = Self::from_dims(grid_shape, dims)?;
        if ranges.is_empty() {
            return Err(GridError::OutsideGrid {
                coords: coords.to_vec(),
                grid_shape: grid_shape.to_vec(),
            });
        }
        Ok(ranges)
    }

    /// Checks that the ranges fit a grid of `grid_shape` chunks (for a deserialized scan).
    pub fn check(&self, grid_shape: &[u64]) -> Result<(), GridError> {
        let fits = self.dims.len() == grid_shape.len()
            && self.dims.iter().zip(grid_shape).all(|(ranges, &g)| {
                ranges.windows(2).all(|w| w[0].end < w[1].start)
                    && ranges.iter().all(|r| r.start < r.end && r.end <= g)
            })
            && self.window.start <= self.window.end
            && self.window.end <= Self::product_len(&self.dims);
        if fits {
            Ok(())
        } else {
            Err(GridError::RangesDoNotFit {
                ranges: self.to_string(),
                grid_shape: grid_shape.to_vec(),
            })
        }
    }

    fn product_len(dims: &[Vec<Range<u64>>]) -> u64 {
        checked_product(
            &dims
                .iter()
                .map(|r| r.iter().map(|r| r.end - r.start).sum())
                .collect::<Vec<u64>>(),
        )
        .unwrap_or(0)
    }

    /// The per-dimension ranges (before the window).
    pub fn dims(&self) -> &[Vec<Range<u64>>] {
        &self.dims
    }

    /// The window of the C-order enumeration this selection reads.
    pub fn window(&self) -> Range<u64> {
        self.window.clone()
    }

    /// The number of chunks selected (in the window).
    pub fn len(&self) -> u64 {
        self.window.end - self.window.start
    }

    /// Whether no chunk is selected.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of ranges (what planning and serializing cost).
    pub fn num_ranges(&self) -> usize {
        self.dims.iter().map(Vec::len).sum()
    }

    /// The chunks selected along each dimension.
    fn counts(&self) -> Vec<u64> {
        self.dims
            .iter()
            .map(|r| r.iter().map(|r| r.end - r.start).sum())
            .collect()
    }

    /// The `k`-th selected chunk index along dimension `d`.
    fn index_at(&self, d: usize, mut k: u64) -> u64 {
        for r in &self.dims[d] {
            let n = r.end - r.start;
            if k < n {
                return r.start + k;
            }
            k -= n;
        }
        u64::MAX
    }

    /// The coordinates of ordinal `ord` of the whole product (not of the window).
    fn coords_at(&self, ord: u64) -> Vec<u64> {
        let counts = self.counts();
        let mut digits = vec![0u64; counts.len()];
        let mut rest = ord;
        for d in (0..counts.len()).rev() {
            let c = counts[d].max(1);
            digits[d] = rest % c;
            rest /= c;
        }
        digits
            .iter()
            .enumerate()
            .map(|(d, &k)| self.index_at(d, k))
            .collect()
    }

    /// The selected chunks, in C order.
    pub fn iter(&self) -> ChunkRangesIter {
        self.clone().into_iter()
    }

    /// The selected chunks, in reverse C order (the last first).
    pub fn iter_rev(&self) -> impl Iterator<Item = Vec<u64>> + Send + 'static {
        let this = self.clone();
        self.window
            .clone()
            .rev()
            .map(move |ord| this.coords_at(ord))
    }

    /// The same selection restricted to `sub`, a window relative to this one.
    pub fn sub_window(&self, sub: Range<u64>) -> Self {
        let start = (self.window.start + sub.start).min(self.window.end);
        let end = (self.window.start + sub.end).clamp(start, self.window.end);
        ChunkRanges {
            dims: self.dims.clone(),
            window: start..end,
        }
    }

    /// At most `n` selections of nearly equal chunk counts, in order, covering this one.
    pub fn split(&self, n: usize) -> Vec<Self> {
        let len = self.len();
        let n = (n.max(1) as u64).min(len.max(1));
        let (per, extra) = (len / n, len % n);
        let mut out = Vec::with_capacity(n as usize);
        let mut at = 0;
        for i in 0..n {
            let k = per + u64::from(i < extra);
            out.push(self.sub_window(at..at + k));
            at += k;
        }
        out
    }

    /// At most `n` selections in order, covering this one, of nearly equal total weight:
    /// `weights[k]` is the cost of the `k`-th selected chunk (its stored bytes, say). Part `i`
    /// ends at whichever chunk boundary puts the running total nearest `(i + 1) / n` of the
    /// whole, so a heavy chunk ends up in a part of its own rather than beside others that
    /// could have gone to the next part; every part holds at least one chunk. Weights that do
    /// not match the selection (or weigh nothing) give [`Self::split`]'s runs of equal counts.
    pub fn split_weighted(&self, n: usize, weights: &[u64]) -> Vec<Self> {
        let len = self.len();
        let total: u128 = weights.iter().map(|&w| u128::from(w)).sum();
        if weights.len() as u64 != len || total == 0 {
            return self.split(n);
        }
        let n = (n.max(1) as u64).min(len.max(1));
        // before[k]: the weight of the chunks before chunk k.
        let before: Vec<u128> = std::iter::once(0)
            .chain(weights.iter().scan(0u128, |sum, &w| {
                *sum += u128::from(w);
                Some(*sum)
            }))
            .collect();
        let mut out = Vec::with_capacity(n as usize);
        let mut start = 0u64;
        for i in 1..n {
            // The boundary nearest total * i / n (`before[past]` is the first at or past it),
            // leaving a chunk for each part after this one.
            let target = total * u128::from(i) / u128::from(n);
            let past = before.partition_point(|&b| b < target);
            let nearest = match past.checked_sub(1) {
                Some(under) if target - before[under] <= before[past] - target => under,
                _ => past,
            };
            let end = (nearest as u64).clamp(start + 1, len - (n - i));
            out.push(self.sub_window(start..end));
            start = end;
        }
        out.push(self.sub_window(start..len));
        out
    }

    /// The in-bounds elements (table rows) of the selected chunks of `grid`, checked.
    pub fn rows(&self, grid: &ChunkGrid) -> Result<u64, GridError> {
        let end = self.rows_before(grid, self.window.end)?;
        let start = self.rows_before(grid, self.window.start)?;
        Ok(end - start)
    }

    /// The rows of the first `ord` chunks of the whole product, C order.
    ///
    /// The first `ord` chunks are, digit by digit of `ord` in the mixed radix of the
    /// per-dimension counts: along the first dimension, every chunk before digit 0 (all of
    /// the dimensions after it), then at digit 0 the same question one dimension down.
    fn rows_before(&self, grid: &ChunkGrid, ord: u64) -> Result<u64, GridError> {
        let total = Self::product_len(&self.dims);
        let overflow = || GridError::TooManyRows;
        let ndim = self.dims.len();
        if ndim == 0 || grid.shape().is_empty() {
            return Ok(u64::from(ord > 0));
        }
        let full: Vec<u64> = (0..ndim)
            .map(|d| self.dims[d].iter().map(|r| grid.elements_in(d, r)).sum())
            .collect();
        if ord >= total {
            return checked_product(&full).ok_or_else(overflow);
        }
        let counts = self.counts();
        let mut digits = vec![0u64; ndim];
        let mut rest = ord;
        for d in (0..ndim).rev() {
            digits[d] = rest % counts[d].max(1);
            rest /= counts[d].max(1);
        }
        let mut rows: u128 = 0;
        let mut outer: u128 = 1; // rows of one step at the digits fixed so far
        for d in 0..ndim {
            let before = self.elements_of_first(grid, d, digits[d]) as u128;
            let inner: u128 = full[d + 1..].iter().map(|&f| f as u128).product();
            rows = rows
                .checked_add(outer.saturating_mul(before).saturating_mul(inner))
                .ok_or_else(overflow)?;
            let at = self.index_at(d, digits[d]);
            outer = outer.saturating_mul(grid.extent(d, at) as u128);
        }
        u64::try_from(rows).map_err(|_| overflow())
    }

    /// Elements along dimension `d` in the first `k` selected chunk indices.
    fn elements_of_first(&self, grid: &ChunkGrid, d: usize, mut k: u64) -> u64 {
        let mut sum = 0;
        for r in &self.dims[d] {
            if k == 0 {
                break;
            }
            let n = (r.end - r.start).min(k);
            sum += grid.elements_in(d, &(r.start..r.start + n));
            k -= n;
        }
        sum
    }

    /// The shortest prefix of this selection holding at least `limit` rows of `grid`.
    pub fn take_rows(&self, grid: &ChunkGrid, limit: u64) -> Result<Self, GridError> {
        // Binary search on the window's end: rows grow with it.
        let start_rows = self.rows_before(grid, self.window.start)?;
        let (mut lo, mut hi) = (self.window.start, self.window.end);
        if self.rows_before(grid, hi)? - start_rows <= limit {
            return Ok(self.clone());
        }
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.rows_before(grid, mid)? - start_rows >= limit {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Ok(ChunkRanges {
            dims: self.dims.clone(),
            window: self.window.start..lo,
        })
    }
}

impl std::fmt::Display for ChunkRanges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let dims: Vec<String> = self
            .dims
            .iter()
            .map(|ranges| {
                let parts: Vec<String> = ranges
                    .iter()
                    .map(|r| format!("{}..{}", r.start, r.end))
                    .collect();
                format!("[{}]", parts.join(","))
            })
            .collect();
        write!(f, "{}", dims.join("×"))?;
        if self.window != (0..Self::product_len(&self.dims)) {
            write!(f, " window {}..{}", self.window.start, self.window.end)?;
        }
        Ok(())
    }
}

/// Sorted, merged ranges within `0..limit`, empty ones dropped.
fn normalize(mut ranges: Vec<Range<u64>>, limit: u64) -> Vec<Range<u64>> {
    ranges.retain(|r| r.start < r.end.min(limit));
    for r in &mut ranges {
        r.end = r.end.min(limit);
    }
    ranges.sort_by_key(|r| r.start);
    let mut out: Vec<Range<u64>> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match out.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}

impl IntoIterator for ChunkRanges {
    type Item = Vec<u64>;
    type IntoIter = ChunkRangesIter;

    fn into_iter(self) -> ChunkRangesIter {
        let left = self.len();
        ChunkRangesIter {
            ranges: self,
            next: None,
            left,
        }
    }
}

/// Every position of a box of `shape`, in C order.
pub fn c_order(shape: &[u64]) -> ChunkRangesIter {
    ChunkRanges::all(shape).into_iter()
}

/// The chunks of a [`ChunkRanges`], in C order.
#[derive(Debug)]
pub struct ChunkRangesIter {
    ranges: ChunkRanges,
    /// Per dimension: (range number, index) of the next chunk.
    next: Option<Vec<(usize, u64)>>,
    left: u64,
}

impl Iterator for ChunkRangesIter {
    type Item = Vec<u64>;

    fn next(&mut self) -> Option<Vec<u64>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let dims = &self.ranges.dims;
        let pos = match self.next.take() {
            Some(pos) => pos,
            None => {
                let coords = self.ranges.coords_at(self.ranges.window.start);
                coords
                    .iter()
                    .enumerate()
                    .map(|(d, &c)| (dims[d].iter().position(|r| r.contains(&c)).unwrap_or(0), c))
                    .collect()
            }
        };
        let out: Vec<u64> = pos.iter().map(|&(_, c)| c).collect();
        // Step to the next position, last dimension fastest.
        let mut step = pos;
        for d in (0..step.len()).rev() {
            let (r, c) = step[d];
            if c + 1 < dims[d][r].end {
                step[d] = (r, c + 1);
                self.next = Some(step);
                return Some(out);
            }
            if r + 1 < dims[d].len() {
                step[d] = (r + 1, dims[d][r + 1].start);
                self.next = Some(step);
                return Some(out);
            }
            step[d] = (0, dims[d][0].start);
        }
        self.next = Some(step);
        Some(out)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.left).unwrap_or(usize::MAX);
        (n, usize::try_from(self.left).ok())
    }
}

#[cfg(test)]
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;

    /// Every chunk of a grid, in C order, the slow way.
    fn all_coords(grid: &[u64]) -> Vec<Vec<u64>> {
        let mut out = vec![vec![]];
        for &g in grid {
            out = out
                .into_iter()
                .flat_map(|p| {
                    (0..g).map(move |i| {
                        let mut p = p.clone();
                        p.push(i);
                        p
                    })
                })
                .collect();
        }
        out
    }

    #[test]
    fn enumerates_products_in_c_order() {
        let r = ChunkRanges::from_dims(&[7, 3], vec![vec![5..6, 0..2], vec![0..3]]).unwrap();
        let got: Vec<Vec<u64>> = r.iter().collect();
        let want: Vec<Vec<u64>> = all_coords(&[7, 3])
            .into_iter()
            .filter(|c| [0, 1, 5].contains(&c[0]))
            .collect();
        assert_eq!(got, want);
        assert_eq!(r.len(), 9);
        assert_eq!(r.to_string(), "[0..2,5..6]×[0..3]");
        let w = r.sub_window(2..5);
        assert_eq!(w.iter().collect::<Vec<_>>(), want[2..5].to_vec());
        assert_eq!(w.to_string(), "[0..2,5..6]×[0..3] window 2..5");
    }

    #[test]
    fn splits_cover_in_order() {
        let r = ChunkRanges::from_dims(&[4, 5, 3], vec![vec![1..3], vec![0..1, 3..5], vec![0..3]])
            .unwrap();
        let whole: Vec<Vec<u64>> = r.iter().collect();
        for n in 1..=20 {
            let parts = r.split(n);
            assert!(parts.len() <= n);
            let joined: Vec<Vec<u64>> = parts.iter().flat_map(|p| p.iter()).collect();
            assert_eq!(joined, whole, "split into {n}");
            let lens: Vec<u64> = parts.iter().map(ChunkRanges::len).collect();
            assert!(lens.iter().max().unwrap() - lens.iter().min().unwrap() <= 1);
        }
    }

    #[test]
    fn weighted_splits_balance_the_weights() {
        let r = ChunkRanges::all(&[8]);
        let lens = |parts: &[ChunkRanges]| parts.iter().map(ChunkRanges::len).collect::<Vec<_>>();
        // One heavy chunk: it is a part of its own, the light ones share the rest.
        assert_eq!(
            lens(&r.split_weighted(2, &[1, 1, 1, 1, 1, 1, 1, 50])),
            [7, 1]
        );
        assert_eq!(
            lens(&r.split_weighted(2, &[50, 1, 1, 1, 1, 1, 1, 1])),
            [1, 7]
        );
        assert_eq!(
            lens(&r.split_weighted(2, &[1, 1, 1, 1, 1, 1, 50, 1])),
            [6, 2]
        );
        assert_eq!(
            lens(&r.split_weighted(3, &[1, 1, 1, 1, 1, 1, 1, 50])),
            [6, 1, 1]
        );
        // Light chunks after a heavy one are shared out.
        assert_eq!(
            lens(&r.split_weighted(2, &[4, 4, 4, 4, 1, 1, 1, 1])),
            [2, 6]
        );
        // Equal weights: equal counts, as `split`.
        assert_eq!(lens(&r.split_weighted(4, &[7; 8])), lens(&r.split(4)));
        // No usable weights: `split`.
        assert_eq!(lens(&r.split_weighted(3, &[0; 8])), lens(&r.split(3)));
        assert_eq!(lens(&r.split_weighted(3, &[1; 5])), lens(&r.split(3)));
        // Any weights, any n: non-empty parts covering the selection in order.
        let sel = ChunkRanges::from_dims(&[4, 5], vec![vec![0..1, 2..4], vec![1..5]]).unwrap();
        let whole: Vec<Vec<u64>> = sel.iter().collect();
        for seed in 0..50u64 {
            let weights: Vec<u64> = (0..sel.len())
                .map(|k| (k * 2_654_435_761 + seed * 97) % 13 * (seed % 3))
                .collect();
            for n in 1..=15 {
                let parts = sel.split_weighted(n, &weights);
                assert_eq!(parts.len(), n.min(whole.len()), "n {n} weights {weights:?}");
                assert!(parts.iter().all(|p| !p.is_empty()));
                let joined: Vec<Vec<u64>> = parts.iter().flat_map(|p| p.iter()).collect();
                assert_eq!(joined, whole, "n {n} weights {weights:?}");
                // Balanced: no part weighs more than its share and the heaviest chunk twice
                // over (each boundary is at most one chunk off its target).
                let total: u64 = weights.iter().sum();
                let heaviest = weights.iter().max().copied().unwrap_or(0);
                let mut at = 0usize;
                for p in &parts {
                    let len = p.len() as usize;
                    let w: u64 = weights[at..at + len].iter().sum();
                    let parts = parts.len() as u64;
                    assert!(
                        w <= total / parts + 1 + 2 * heaviest,
                        "n {n} weights {weights:?}"
                    );
                    at += len;
                }
            }
        }
    }

    #[test]
    fn rows_match_a_count_chunk_by_chunk() {
        // 10 × 7 in chunks of 4 × 3: edge chunks of 2 and 1.
        let grid = ChunkGrid::new(vec![10, 7], vec![4, 3]).unwrap();
        let r =
            ChunkRanges::from_dims(&grid.grid_shape(), vec![vec![0..1, 2..3], vec![1..3]]).unwrap();
        for start in 0..=r.len() {
            for end in start..=r.len() {
                let w = r.sub_window(start..end);
                let slow: u64 = w.iter().map(|c| grid.chunk_len(&c).unwrap()).sum();
                assert_eq!(w.rows(&grid).unwrap(), slow, "window {start}..{end}");
            }
        }
        for limit in 0..40 {
            let t = r.take_rows(&grid, limit).unwrap();
            let rows = t.rows(&grid).unwrap();
            assert!(rows >= limit.min(r.rows(&grid).unwrap()));
            if !t.is_empty() {
                let shorter = t.sub_window(0..t.len() - 1);
                assert!(shorter.rows(&grid).unwrap() < limit, "limit {limit}");
            }
        }
    }

    #[test]
    fn huge_grids_cost_nothing() {
        // 2^40 one-element chunks: one range, counted without enumerating.
        let n = 1u64 << 40;
        let grid = ChunkGrid::new(vec![n], vec![1]).unwrap();
        let all = ChunkRanges::all(&grid.grid_shape());
        assert_eq!(all.num_ranges(), 1);
        assert_eq!(all.rows(&grid).unwrap(), n);
        let parts = all.split(4);
        assert_eq!(parts[3].iter().next(), Some(vec![3 * (n / 4)]));
        let first = all.take_rows(&grid, 10).unwrap();
        assert_eq!(first.len(), 10);
        let json = serde_json::to_string(&all).unwrap();
        assert!(json.len() < 100, "{json}");
        assert_eq!(serde_json::from_str::<ChunkRanges>(&json).unwrap(), all);
        // A grid whose chunk count passes 64 bits is refused.
        assert!(ChunkGrid::new(vec![u64::MAX, u64::MAX], vec![1, 1]).is_err());
    }

    #[test]
    fn empty_and_zero_dimensional() {
        let grid = ChunkGrid::new(vec![0, 5], vec![2, 2]).unwrap();
        let all = ChunkRanges::all(&grid.grid_shape());
        assert!(all.is_empty());
        assert_eq!(all.iter().count(), 0);
        assert_eq!(all.rows(&grid).unwrap(), 0);
        let scalar = ChunkGrid::new(vec![], vec![]).unwrap();
        let one = ChunkRanges::all(&scalar.grid_shape());
        assert_eq!(one.iter().collect::<Vec<_>>(), vec![Vec::<u64>::new()]);
        assert_eq!(one.rows(&scalar).unwrap(), 1);
        assert!(ChunkRanges::single(&[3], &[3]).is_err());
    }

    #[test]
    fn errors_are_typed_and_name_the_array() {
        assert_eq!(
            ChunkGrid::new(vec![u64::MAX, u64::MAX], vec![1, 1]).unwrap_err(),
            GridError::TooManyChunks {
                grid_shape: vec![u64::MAX, u64::MAX]
            }
        );
        assert!(matches!(
            ChunkGrid::new(vec![4], vec![0]),
            Err(GridError::ZeroExtent { .. })
        ));
        let grid = ChunkGrid::new(vec![5, 4], vec![2, 2]).unwrap();
        let e = grid.chunk_box(&[3, 0]).unwrap_err();
        assert_eq!(
            e,
            GridError::OutsideGrid {
                coords: vec![3, 0],
                grid_shape: vec![3, 2]
            }
        );
        let e = e.in_array("g/x");
        assert_eq!(e.array(), Some("g/x"));
        assert_eq!(
            e.to_string(),
            "array 'g/x': chunk [3, 0] outside the chunk grid [3, 2]"
        );
        let planned = ChunkRanges::all(&[3, 2]);
        assert!(matches!(
            planned.check(&[2, 2]),
            Err(GridError::RangesDoNotFit { grid_shape, .. }) if grid_shape == [2, 2]
        ));
        assert_eq!(
            ChunkRanges::from_dims(&[3], vec![]).unwrap_err(),
            GridError::RangeDimensions { ranges: 0, grid: 1 }
        );
    }

    /// The edges of `runs`, expanded (the slow model).
    fn expand(runs: &[(u64, u64)]) -> Vec<u64> {
        runs.iter()
            .flat_map(|&(s, c)| std::iter::repeat_n(s, c as usize))
            .collect()
    }

    #[test]
    fn rectilinear_maps_chunks_and_elements_both_ways() {
        let runs = vec![(3, 2), (1, 1), (4, 3), (2, 1)]; // 3 3 1 4 4 4 2 = 21
        for extent in [0u64, 1, 5, 6, 7, 16, 19, 20, 21] {
            let grid = ChunkGrid::rectilinear(vec![extent], vec![runs.clone()]).unwrap();
            let edges = expand(&runs);
            let starts: Vec<u64> = edges
                .iter()
                .scan(0, |acc, e| {
                    let s = *acc;
                    *acc += e;
                    Some(s)
                })
                .collect();
            let n = starts.iter().filter(|&&s| s < extent).count() as u64;
            assert_eq!(grid.grid_shape(), [n], "extent {extent}");
            for i in 0..n {
                let (start, shape) = grid.chunk_box(&[i]).unwrap();
                let end = (starts[i as usize] + edges[i as usize]).min(extent);
                assert_eq!(
                    (start[0], shape[0]),
                    (starts[i as usize], end - starts[i as usize])
                );
                assert_eq!(grid.stored_shape(&[i]).unwrap(), [edges[i as usize]]);
            }
            assert!(grid.chunk_box(&[n]).is_err());
            for a in 0..=extent + 2 {
                for b in a..=extent + 2 {
                    let want: Vec<u64> = (0..n)
                        .filter(|&i| {
                            let s = starts[i as usize];
                            let b = b.min(extent);
                            a < b && s < b && a < s + edges[i as usize]
                        })
                        .collect();
                    let got: Vec<u64> = grid.chunks_in(0, &(a..b)).collect();
                    assert_eq!(got, want, "extent {extent} elements {a}..{b}");
                }
            }
        }
        assert_eq!(
            ChunkGrid::rectilinear(vec![5], vec![vec![(5, 1)]])
                .unwrap()
                .chunk_shape(),
            [5]
        );
    }

    #[test]
    fn rectilinear_rows_and_limits_match_a_count() {
        let grid = ChunkGrid::rectilinear(
            vec![11, 6],
            vec![vec![(1, 1), (4, 2), (9, 1)], vec![(2, 1), (4, 1)]],
        )
        .unwrap();
        assert_eq!(grid.grid_shape(), [4, 2]);
        let r =
            ChunkRanges::from_dims(&grid.grid_shape(), vec![vec![0..1, 2..4], vec![0..2]]).unwrap();
        for start in 0..=r.len() {
            for end in start..=r.len() {
                let w = r.sub_window(start..end);
                let slow: u64 = w.iter().map(|c| grid.chunk_len(&c).unwrap()).sum();
                assert_eq!(w.rows(&grid).unwrap(), slow, "window {start}..{end}");
            }
        }
        let t = r.take_rows(&grid, 7).unwrap();
        assert_eq!(t.iter().collect::<Vec<_>>(), [[0, 0], [0, 1], [2, 0]]);
    }

    #[test]
    fn huge_run_lengths_cost_one_run() {
        // 2^50 chunks declared in one run, and 2^60 past the extent: nothing is expanded.
        let grid = ChunkGrid::rectilinear(
            vec![1 << 40],
            vec![vec![(7, 1), (1, 1 << 50), (3, 1 << 60)]],
        )
        .unwrap();
        assert_eq!(grid.grid_shape(), [(1 << 40) - 6]);
        assert_eq!(grid.runs(0), [(7, 1), (1, (1 << 40) - 7)]);
        assert_eq!(grid.chunks_in(0, &(5..9)), 0..3);
        assert_eq!(grid.chunk_shape(), [7]);
    }

    #[test]
    fn bad_rectilinear_edges_are_typed_errors() {
        assert_eq!(
            ChunkGrid::rectilinear(vec![10], vec![vec![(3, 3)]]).unwrap_err(),
            GridError::EdgesShort {
                dim: 0,
                extent: 10,
                covered: 9
            }
        );
        assert_eq!(
            ChunkGrid::rectilinear(vec![10, 4], vec![vec![(10, 1)], vec![(0, 1)]]).unwrap_err(),
            GridError::ZeroRun { dim: 1 }
        );
        assert!(matches!(
            ChunkGrid::rectilinear(vec![10], vec![vec![(2, 0)]]),
            Err(GridError::ZeroRun { dim: 0 })
        ));
        assert!(matches!(
            ChunkGrid::rectilinear(vec![10], vec![vec![]]),
            Err(GridError::RunCount {
                dim: 0,
                runs: 0,
                ..
            })
        ));
        let many = vec![(1, 1); MAX_GRID_RUNS + 1];
        assert!(matches!(
            ChunkGrid::rectilinear(vec![10], vec![many]),
            Err(GridError::RunCount { .. })
        ));
        assert!(matches!(
            ChunkGrid::rectilinear(vec![10], vec![]),
            Err(GridError::RunDimensions { dims: 0, .. })
        ));
        // Saturating: edges whose sum passes 2^64 still cover.
        assert!(ChunkGrid::rectilinear(vec![u64::MAX], vec![vec![(u64::MAX, 2)]]).is_ok());
    }
}
