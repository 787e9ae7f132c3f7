//! Reading a box of an array: the elements of `start .. start + shape` in C order, assembled
//! from the read units (chunks, or inner chunks of shards) that intersect it.
//!
//! ```text
//!  region ─▶ intersecting chunks ─▶ read_chunk (concurrently, through an optional ChunkCache)
//!        ─▶ one chunk that is exactly the region: returned as is (zero-copy)
//!        ─▶ one chunk: slice (contiguous part) or take; several: interleave
//! ```

use arrow_array::{new_empty_array, Array, ArrayRef, UInt32Array};
use futures::{StreamExt, TryStreamExt};

use super::{ReadContext, ZarrArray};
use crate::grid::c_order;
use crate::options::ZarrReadOptions;
use crate::{ChunkError, Error, Result};

impl ZarrArray {
    /// The elements of the box `start .. start + shape`, in C order.
    pub async fn read_region(
        &self,
        start: &[u64],
        shape: &[u64],
        opts: &ZarrReadOptions,
    ) -> Result<ArrayRef> {
        self.read_region_in(start, shape, &ReadContext::new(opts.clone()))
            .await
    }

    /// [`Self::read_region`] in a scan's context: read units through its cache (if any),
    /// fetches counted in its metrics.
    pub async fn read_region_in(
        &self,
        start: &[u64],
        shape: &[u64],
        ctx: &ReadContext,
    ) -> Result<ArrayRef> {
        let opts = &ctx.options;
        let ndim = self.shape().len();
        if start.len() != ndim || shape.len() != ndim {
            return Err(self.region_out_of_bounds(start, shape));
        }
        for d in 0..ndim {
            if start[d]
                .checked_add(shape[d])
                .is_none_or(|end| end > self.shape()[d])
            {
                return Err(self.region_out_of_bounds(start, shape));
            }
        }
        if shape.contains(&0) {
            return Ok(new_empty_array(
                &self.arrow_field("", opts).data_type().clone(),
            ));
        }
        let grid = self.grid();
        let spans: Vec<std::ops::Range<u64>> = (0..ndim)
            .map(|d| grid.chunks_in(d, &(start[d]..start[d] + shape[d])))
            .collect();
        let first: Vec<u64> = spans.iter().map(|r| r.start).collect();
        let counts: Vec<u64> = spans.iter().map(|r| r.end - r.start).collect();
        // The chunk holding element `p` along `d`, and where that chunk starts.
        let locate = |d: usize, p: u64| -> (u64, u64) {
            let ci = grid.chunks_in(d, &(p..p + 1)).start;
            (ci, grid.elements(d, ci..ci + 1).start)
        };
        let chunks: Vec<Vec<u64>> = c_order(&counts)
            .map(|rel| rel.iter().zip(&first).map(|(r, f)| r + f).collect())
            .collect();
        let arrays = self.read_chunks_in(&chunks, ctx).await?;
        if chunks.len() == 1 {
            let (origin, valid) = grid
                .chunk_box(&chunks[0])
                .map_err(|e| e.in_array(self.path()))?;
            if origin == start && valid == shape {
                return Ok(arrays[0].clone());
            }
        }
        // (chunk number, element in that chunk) of every region element, C order.
        let total: u64 = shape.iter().product();
        let mut pairs: Vec<(usize, usize)> = Vec::with_capacity(total as usize);
        let valid_shapes: Vec<Vec<u64>> = chunks
            .iter()
            .map(|c| self.chunk_valid_shape(c))
            .collect::<Result<_>>()?;
        let chunk_strides = |k: usize| -> Vec<u64> {
            let v = &valid_shapes[k];
            let mut s = vec![1u64; ndim];
            for d in (0..ndim.saturating_sub(1)).rev() {
                s[d] = s[d + 1] * v[d + 1];
            }
            s
        };
        let strides: Vec<Vec<u64>> = (0..chunks.len()).map(chunk_strides).collect();
        let mut count_strides = vec![1u64; ndim];
        for d in (0..ndim.saturating_sub(1)).rev() {
            count_strides[d] = count_strides[d + 1] * counts[d + 1];
        }
        if ndim == 0 {
            pairs.push((0, 0));
        } else {
            let outer: Vec<u64> = shape[..ndim - 1].to_vec();
            let last_d = ndim - 1;
            for pos in c_order(&outer) {
                // Chunk index and local offset for the outer dimensions.
                let mut k_outer = 0u64;
                let mut local_outer = vec![0u64; ndim];
                for d in 0..last_d {
                    let (ci, origin) = locate(d, start[d] + pos[d]);
                    k_outer += (ci - first[d]) * count_strides[d];
                    local_outer[d] = start[d] + pos[d] - origin;
                }
                let mut p = start[last_d];
                let end = start[last_d] + shape[last_d];
                while p < end {
                    let (ci, origin) = locate(last_d, p);
                    let seg_end = grid.elements(last_d, ci..ci + 1).end.min(end);
                    let k = (k_outer + (ci - first[last_d])) as usize;
                    let st = &strides[k];
                    let base: u64 = (0..last_d).map(|d| local_outer[d] * st[d]).sum();
                    for q in p..seg_end {
                        pairs.push((k, (base + (q - origin)) as usize));
                    }
                    p = seg_end.max(p + 1);
                }
            }
        }
        if arrays.len() == 1 {
            let first_idx = pairs.first().map_or(0, |p| p.1);
            if pairs.iter().enumerate().all(|(i, p)| p.1 == first_idx + i) {
                return Ok(arrays[0].slice(first_idx, pairs.len()));
            }
            let idx = UInt32Array::from_iter_values(pairs.iter().map(|p| p.1 as u32));
            return Ok(arrow_select::take::take(&arrays[0], &idx, None)?);
        }
        let refs: Vec<&dyn Array> = arrays.iter().map(|a| a.as_ref()).collect();
        Ok(arrow_select::interleave::interleave(&refs, &pairs)?)
    }

    /// The first `k` elements of a 1-D array, each read unit decoded only as far as they
    /// reach (run by run where it can be, see the `decode::rows` module): where a unit holds
    /// more than is wanted — a categories array claiming 2^31 values in one chunk, of which
    /// int8 codes reach 128 — the rest is neither decoded nor filled. Not through the
    /// context's cache, which holds whole units. Other arrays read as [`Self::read_region_in`].
    pub async fn read_prefix_in(&self, k: u64, ctx: &ReadContext) -> Result<ArrayRef> {
        let &[len] = self.shape() else {
            return self.read_region_in(&[0], &[k], ctx).await;
        };
        if k == 0 || k > len {
            return self.read_region_in(&[0], &[k], ctx).await;
        }
        let mut parts: Vec<ArrayRef> = Vec::new();
        let mut done = 0u64;
        while done < k {
            let coords = [self.grid().chunks_in(0, &(done..done + 1)).start];
            let stored = self.fetch_chunk_in(&coords, ctx).await?;
            let mut rows = self.chunk_reader_in(&coords, stored, ctx).await?;
            let want = usize::try_from(k - done).unwrap_or(usize::MAX);
            let part = rows.next_rows(want.min(rows.remaining()))?;
            if part.is_empty() {
                // A read unit that decodes to no element: the chunk is malformed.
                return Err(self.chunk_error(
                    &self.chunk_location(&coords),
                    ChunkError::Invalid("the read unit holds no element".into()),
                ));
            }
            done += part.len() as u64;
            parts.push(part);
        }
        if let [one] = parts.as_slice() {
            return Ok(one.clone());
        }
        let refs: Vec<&dyn Array> = parts.iter().map(|a| a.as_ref()).collect();
        Ok(arrow_select::concat::concat(&refs)?)
    }

    /// [`Self::read_chunk_in`] of several read units, `concurrency` at once. Inner chunks of
    /// shards that the cache does not hold are fetched first, together
    /// ([`Self::fetch_chunks_in`]: nearby ranges of a shard in one GET).
    async fn read_chunks_in(
        &self,
        chunks: &[Vec<u64>],
        ctx: &ReadContext,
    ) -> Result<Vec<ArrayRef>> {
        let parallel = ctx.options.concurrency.max(1);
        if chunks.len() < 2 || self.metadata().shard_levels().is_empty() {
            let reads: Vec<_> = chunks.iter().map(|c| self.read_chunk_in(c, ctx)).collect();
            return futures::stream::iter(reads)
                .buffered(parallel)
                .try_collect()
                .await;
        }
        let cached = |c: &Vec<u64>| {
            ctx.cache
                .as_ref()
                .is_some_and(|cache| cache.contains(&(self.path().to_string(), c.clone())))
        };
        let wanted: Vec<Vec<u64>> = chunks.iter().filter(|c| !cached(c)).cloned().collect();
        let fetched = self.fetch_chunks_in(&wanted, ctx).await?;
        let mut prefetched: std::collections::HashMap<Vec<u64>, Option<bytes::Bytes>> =
            wanted.into_iter().zip(fetched).collect();
        let jobs: Vec<_> = chunks.iter().map(|c| (c, prefetched.remove(c))).collect();
        let reads: Vec<_> = jobs
            .into_iter()
            .map(|(c, stored)| self.read_chunk_with(c, stored, ctx))
            .collect();
        futures::stream::iter(reads)
            .buffered(parallel)
            .try_collect()
            .await
    }

    /// [`Self::read_chunk`] in a scan's context: through its cache (if any), fetches counted.
    pub async fn read_chunk_in(&self, coords: &[u64], ctx: &ReadContext) -> Result<ArrayRef> {
        self.read_chunk_with(coords, None, ctx).await
    }

    /// [`Self::read_chunk_in`], the unit's stored bytes already fetched when `prefetched` is
    /// `Some` (`Some(None)`: not stored).
    async fn read_chunk_with(
        &self,
        coords: &[u64],
        prefetched: Option<Option<bytes::Bytes>>,
        ctx: &ReadContext,
    ) -> Result<ArrayRef> {
        let read = || async {
            let stored = match prefetched {
                Some(stored) => stored,
                None => self.fetch_chunk_in(coords, ctx).await?,
            };
            let started = std::time::Instant::now();
            let array = self.decode_fetched(coords, stored, ctx).await;
            ctx.metrics.add_decode(started.elapsed());
            array
        };
        match &ctx.cache {
            None => read().await,
            Some(cache) => {
                let key = (self.path().to_string(), coords.to_vec());
                cache.get_or_read(key, read).await
            }
        }
    }

    fn region_out_of_bounds(&self, start: &[u64], shape: &[u64]) -> Error {
        Error::RegionOutOfBounds {
            array: self.path().to_string(),
            start: start.into(),
            shape: shape.into(),
            array_shape: self.shape().into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use arrow_array::cast::AsArray;

    use super::*;

    use crate::test_util::fixture;

    /// `string_2d`: (7, 5) in chunks of (3, 2); element (r, c) of the C-order values.
    fn expected_2d() -> Vec<String> {
        let path = fixture("expected_v3.json");
        let all: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let entry = all
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["store"] == "v3_strings.zarr" && e["path"] == "string_2d")
            .unwrap();
        entry["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    }

    #[tokio::test]
    async fn regions_across_chunks() {
        let array = ZarrArray::open(&fixture("v3_strings.zarr/string_2d"))
            .await
            .unwrap();
        let want = expected_2d();
        let opts = ZarrReadOptions::default();
        let plain = ReadContext::new(opts.clone());
        let cached = ReadContext {
            cache: Some(std::sync::Arc::new(super::super::ChunkCache::new(1 << 20))),
            ..plain.clone()
        };
        for (start, shape) in [
            ([0u64, 0u64], [7u64, 5u64]),
            ([1, 1], [5, 3]),
            ([6, 4], [1, 1]),
            ([3, 2], [3, 2]), // exactly chunk (1, 1), which is not stored
            ([2, 0], [2, 5]),
            ([0, 3], [7, 0]),
        ] {
            for ctx in [&plain, &cached] {
                let got = array.read_region_in(&start, &shape, ctx).await.unwrap();
                let got = got.as_string::<i32>();
                let mut expected = Vec::new();
                for r in start[0]..start[0] + shape[0] {
                    for c in start[1]..start[1] + shape[1] {
                        expected.push(want[(r * 5 + c) as usize].as_str());
                    }
                }
                let got: Vec<&str> = got.iter().map(|v| v.unwrap()).collect();
                assert_eq!(got, expected, "region {start:?} + {shape:?}");
            }
        }
        let e = array
            .read_region(&[5, 0], &[3, 1], &opts)
            .await
            .unwrap_err();
        match &e {
            Error::RegionOutOfBounds {
                array: path,
                start,
                shape,
                array_shape,
            } => {
                assert!(path.ends_with("string_2d"), "{path}");
                assert_eq!(
                    (&**start, &**shape, &**array_shape),
                    (&[5, 0][..], &[3, 1][..], &[7, 5][..])
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(e.array(), Some(array.path()));
        let e = array.read_region(&[0], &[1], &opts).await.unwrap_err();
        assert!(matches!(e, Error::RegionOutOfBounds { .. }), "{e:?}");
    }

    #[tokio::test]
    async fn exact_chunk_is_returned_as_read() {
        let array = ZarrArray::open(&fixture("v3_strings.zarr/string_2d"))
            .await
            .unwrap();
        let opts = ZarrReadOptions::default();
        let chunk = array.read_chunk(&[0, 1], &opts).await.unwrap();
        let region = array.read_region(&[0, 2], &[3, 2], &opts).await.unwrap();
        assert_eq!(chunk.to_data(), region.to_data());
        // one chunk, a contiguous part: a slice of it
        let part = array.read_region(&[1, 2], &[2, 2], &opts).await.unwrap();
        assert_eq!(part.len(), 4);
    }
}
