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
    pub(crate) fn new(num_layers: usize, max_len: usize) -> Self {
        Self {
            layers: vec![None; num_layers],
            len: 0,
            rows: 1,
            max_len,
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

    /// Keeps the rows whose flag is true, in order.
    pub(crate) fn retain_rows(&mut self, keep: &[bool]) -> Result<()> {
        let kept: Vec<u32> = (0..keep.len() as u32)
            .filter(|&i| keep[i as usize])
            .collect();
        if kept.len() == self.rows {
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
