//! Keys and values of every layer for a batch of sequences that share one length.
//!
//! Buffers are `[rows, kv_heads, capacity, head_dim]` and grow in chunks up to the context
//! length, so that a decode step writes one position in place instead of concatenating
//! (which would copy the whole cache every token).

use candle_core::{DType, Device, Result, Tensor};

/// Positions added when a buffer grows, unless doubling adds more.
const GROW_CHUNK: usize = 256;

/// Not `Clone`: buffers are written in place, so a shallow copy would share them.
#[derive(Debug)]
pub(crate) struct KvCache {
    layers: Vec<Option<(Tensor, Tensor)>>,
    len: usize,
    rows: usize,
    max_len: usize,
}

impl KvCache {
    /// An empty cache of one row, for a prompt.
    pub(crate) fn new(num_layers: usize, max_len: usize) -> Self {
        Self {
            layers: vec![None; num_layers],
            len: 0,
            rows: 1,
            max_len,
        }
    }

    /// A batch of no rows, which [`KvCache::extend`] fills.
    pub(crate) fn empty_batch(num_layers: usize, max_len: usize) -> Self {
        Self {
            rows: 0,
            ..Self::new(num_layers, max_len)
        }
    }

    /// Positions held per row.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// Writes `k`, `v` (`[rows, kv_heads, new, head_dim]`) after the cached positions and
    /// returns views of everything cached for the layer, new positions included. Call
    /// `advance` once every layer has appended.
    pub(crate) fn append(
        &mut self,
        layer: usize,
        k: &Tensor,
        v: &Tensor,
    ) -> Result<(Tensor, Tensor)> {
        let (rows, heads, new, dim) = k.dims4()?;
        let needed = self.len + new;
        let slot = &mut self.layers[layer];
        let capacity = slot.as_ref().map_or(0, |(k, _)| k.dim(2).unwrap_or(0));
        if needed > capacity {
            let grown = needed
                .next_multiple_of(GROW_CHUNK)
                .max(capacity * 2)
                .min(self.max_len.max(needed));
            let alloc = |dtype: DType, device: &Device| {
                Tensor::zeros((rows, heads, grown, dim), dtype, device)
            };
            let (nk, nv) = (alloc(k.dtype(), k.device())?, alloc(v.dtype(), v.device())?);
            if let Some((ok, ov)) = slot.as_ref() {
                nk.slice_set(&ok.narrow(2, 0, self.len)?.contiguous()?, 2, 0)?;
                nv.slice_set(&ov.narrow(2, 0, self.len)?.contiguous()?, 2, 0)?;
            }
            *slot = Some((nk, nv));
        }
        let (ck, cv) = slot.as_ref().expect("allocated above");
        ck.slice_set(&k.contiguous()?, 2, self.len)?;
        cv.slice_set(&v.contiguous()?, 2, self.len)?;
        Ok((ck.narrow(2, 0, needed)?, cv.narrow(2, 0, needed)?))
    }

    pub(crate) fn advance(&mut self, new: usize) {
        self.len += new;
    }

    /// Copies the single cached row to `n` rows.
    pub(crate) fn fork(&mut self, n: usize) -> Result<()> {
        for (k, v) in self.layers.iter_mut().flatten() {
            let (_, heads, capacity, dim) = k.dims4()?;
            *k = k.broadcast_as((n, heads, capacity, dim))?.contiguous()?;
            *v = v.broadcast_as((n, heads, capacity, dim))?.contiguous()?;
        }
        self.rows = n;
        Ok(())
    }

    /// Forgets every position from `len` on; later appends overwrite them.
    pub(crate) fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Bytes the cached positions hold (spare capacity not counted).
    pub(crate) fn bytes(&self) -> usize {
        let per_position: usize = self
            .layers
            .iter()
            .flatten()
            .map(|(k, v)| {
                let (rows, heads, _, dim) = k.dims4().unwrap_or_default();
                rows * heads * dim * (k.dtype().size_in_bytes() + v.dtype().size_in_bytes())
            })
            .sum();
        per_position * self.len
    }

    /// Takes the rows whose flag is false out of the batch, each as a one-row cache of its own
    /// (copied to its exact length), in order; the others stay.
    pub(crate) fn split_off(&mut self, keep: &[bool]) -> Result<Vec<KvCache>> {
        let mut taken = Vec::new();
        for row in (0..keep.len()).filter(|&r| !keep[r]) {
            let mut layers = Vec::with_capacity(self.layers.len());
            for layer in &self.layers {
                layers.push(match layer {
                    Some((k, v)) => Some((
                        k.narrow(0, row, 1)?.narrow(2, 0, self.len)?.contiguous()?,
                        v.narrow(0, row, 1)?.narrow(2, 0, self.len)?.contiguous()?,
                    )),
                    None => None,
                });
            }
            taken.push(KvCache {
                layers,
                len: self.len,
                rows: 1,
                max_len: self.max_len,
            });
        }
        self.retain_rows(keep)?;
        Ok(taken)
    }

    /// Appends one row per source (each a one-row cache), cut to its first `len` positions.
    /// The batch must be empty or hold `len` positions itself.
    pub(crate) fn extend(&mut self, sources: &[&KvCache], len: usize) -> Result<()> {
        if sources.is_empty() {
            return Ok(());
        }
        let empty = self.rows == 0;
        if !empty && self.len != len {
            candle_core::bail!(
                "cannot join rows at {len} positions to a batch at {}",
                self.len
            );
        }
        if let Some(short) = sources.iter().find(|s| s.rows != 1 || s.len < len) {
            candle_core::bail!(
                "a joining row must be one row of at least {len} positions, not {} of {}",
                short.rows,
                short.len
            );
        }
        let rows = self.rows + sources.len();
        let capacity = len.next_multiple_of(GROW_CHUNK).min(self.max_len.max(len));
        for (layer, slot) in self.layers.iter_mut().enumerate() {
            let mut parts = Vec::with_capacity(sources.len() + 1);
            if !empty && let Some((k, v)) = slot.as_ref() {
                parts.push((k.narrow(2, 0, len)?, v.narrow(2, 0, len)?));
            }
            for source in sources {
                let Some((k, v)) = source.layers[layer].as_ref() else {
                    candle_core::bail!("a joining row has no keys for layer {layer}");
                };
                parts.push((k.narrow(2, 0, len)?, v.narrow(2, 0, len)?));
            }
            let ks: Vec<&Tensor> = parts.iter().map(|(k, _)| k).collect();
            let vs: Vec<&Tensor> = parts.iter().map(|(_, v)| v).collect();
            let (k, v) = (
                Tensor::cat(&ks, 0)?.contiguous()?,
                Tensor::cat(&vs, 0)?.contiguous()?,
            );
            let (_, heads, _, dim) = k.dims4()?;
            let nk = Tensor::zeros((rows, heads, capacity, dim), k.dtype(), k.device())?;
            let nv = Tensor::zeros((rows, heads, capacity, dim), v.dtype(), v.device())?;
            nk.slice_set(&k, 2, 0)?;
            nv.slice_set(&v, 2, 0)?;
            *slot = Some((nk, nv));
        }
        self.rows = rows;
        self.len = len;
        Ok(())
    }

    /// Keeps the rows whose flag is true, in order.
    pub(crate) fn retain_rows(&mut self, keep: &[bool]) -> Result<()> {
        let kept: Vec<u32> = (0..keep.len() as u32)
            .filter(|&i| keep[i as usize])
            .collect();
        if kept.len() == self.rows {
            return Ok(());
        }
        if kept.is_empty() {
            self.layers.iter_mut().for_each(|layer| *layer = None);
            self.rows = 0;
            return Ok(());
        }
        for (k, v) in self.layers.iter_mut().flatten() {
            let index = Tensor::new(kept.as_slice(), k.device())?;
            *k = k.index_select(&index, 0)?;
            *v = v.index_select(&index, 0)?;
        }
        self.rows = kept.len();
        Ok(())
    }
}
