//! Keys and values of one layer for a batch of rows: every position, or a sliding window's.
//!
//! Buffers are `[rows, kv_heads, capacity, head_dim]` and grow in chunks, so that a decode step
//! writes one position in place instead of concatenating (which would copy the whole cache
//! every token). A windowed layer, when its buffer is full, drops the positions no query will
//! see again beyond some room to rewind: its memory is bounded by its window, not the context.

use super::{Cuts, LONGEST_APPEND, LayerState};
use candle_core::{DType, Device, Result, Tensor};
use std::any::Any;

/// Positions added when a buffer grows, unless doubling adds more.
const GROW_CHUNK: usize = 256;

/// Positions a windowed layer keeps behind its window, so that a sequence can be cut back that
/// far without recomputing: a replayed sample whose token changed, a prompt edited near its end.
fn rewind_room(window: usize) -> usize {
    window
}

/// The buffer a windowed layer grows to before it compacts: the window, the room to rewind,
/// and as much again as the window of slack, so that it compacts once per window's worth of
/// decode steps (copying twice the window: two positions a step).
fn window_limit(window: usize) -> usize {
    window - 1 + rewind_room(window) + window
}

/// The most positions a windowed layer's buffer holds: its limit, or a prompt slice beyond the
/// kept positions.
pub(crate) fn window_capacity(window: usize) -> usize {
    window_limit(window).max(window - 1 + rewind_room(window) + LONGEST_APPEND)
}

/// Not `Clone`: buffers are written in place, so a shallow copy would share them.
#[derive(Debug)]
pub(crate) struct KvLayer {
    buffers: Option<(Tensor, Tensor)>,
    /// The position that index 0 of the buffers holds (0 unless a window has moved on).
    offset: usize,
    /// Each query sees at most this many positions, its own included.
    window: Option<usize>,
    /// The context length: a full layer grows no further.
    max_len: usize,
}

impl KvLayer {
    pub(crate) fn new(window: Option<usize>, max_len: usize) -> Self {
        Self {
            buffers: None,
            offset: 0,
            window,
            max_len,
        }
    }

    fn capacity(&self) -> usize {
        self.buffers
            .as_ref()
            .map_or(0, |(k, _)| k.dim(2).unwrap_or(0))
    }

    /// The most positions the buffers grow to.
    fn limit(&self) -> usize {
        self.window.map_or(self.max_len, window_limit)
    }

    /// Writes `k`, `v` (`[rows, kv_heads, new, head_dim]`) at positions `len..len + new` and
    /// returns views of every position held, new ones last: attention's queries are the last
    /// `new` of them, and a window counts back from each query within the views.
    pub(crate) fn append(
        &mut self,
        len: usize,
        k: &Tensor,
        v: &Tensor,
    ) -> Result<(Tensor, Tensor)> {
        let (rows, heads, new, dim) = k.dims4()?;
        let capacity = self.capacity();
        if len - self.offset + new > capacity {
            let keep_from = match self.window {
                Some(w) => len.saturating_sub(w - 1 + rewind_room(w)).max(self.offset),
                None => self.offset,
            };
            let kept = len - keep_from;
            let needed = kept + new;
            let grown = needed
                .next_multiple_of(GROW_CHUNK)
                .max(capacity * 2)
                .min(self.limit().max(needed));
            let alloc = |dtype: DType, device: &Device| {
                Tensor::zeros((rows, heads, grown, dim), dtype, device)
            };
            let (nk, nv) = (alloc(k.dtype(), k.device())?, alloc(v.dtype(), v.device())?);
            if let Some((ok, ov)) = self.buffers.as_ref().filter(|_| kept > 0) {
                let from = keep_from - self.offset;
                nk.slice_set(&ok.narrow(2, from, kept)?.contiguous()?, 2, 0)?;
                nv.slice_set(&ov.narrow(2, from, kept)?.contiguous()?, 2, 0)?;
            }
            self.buffers = Some((nk, nv));
            self.offset = keep_from;
        }
        let at = len - self.offset;
        let (ck, cv) = self.buffers.as_ref().expect("allocated above");
        ck.slice_set(&k.contiguous()?, 2, at)?;
        cv.slice_set(&v.contiguous()?, 2, at)?;
        Ok((ck.narrow(2, 0, at + new)?, cv.narrow(2, 0, at + new)?))
    }

    /// The shortest length a layer holding `len` positions can be cut back to and go on from.
    fn earliest_cut(&self, len: usize) -> usize {
        match self.window {
            // The next query at the cut sees `w - 1` positions before it.
            Some(w) if self.offset > 0 => (self.offset + w - 1).min(len),
            _ => 0,
        }
    }

    /// `self`'s buffers as another layer of its kind.
    fn same_kind<'a>(&self, other: &'a dyn LayerState) -> Result<&'a KvLayer> {
        other
            .as_any()
            .downcast_ref::<KvLayer>()
            .filter(|o| o.window == self.window)
            .ok_or_else(|| {
                candle_core::Error::Msg("a joining row keeps another kind of state".into())
            })
    }
}

impl LayerState for KvLayer {
    fn cuts(&self, len: usize) -> Cuts {
        Cuts::from(self.earliest_cut(len))
    }

    fn truncate(&mut self, len: usize, _held: usize) -> Result<()> {
        // Positions from `len` on are overwritten by the next appends; cut to 0, the buffers
        // start over at position 0.
        if len <= self.offset {
            self.offset = 0;
        }
        Ok(())
    }

    fn fork(&mut self, n: usize) -> Result<()> {
        if let Some((k, v)) = self.buffers.as_mut() {
            let (_, heads, capacity, dim) = k.dims4()?;
            *k = k.broadcast_as((n, heads, capacity, dim))?.contiguous()?;
            *v = v.broadcast_as((n, heads, capacity, dim))?.contiguous()?;
        }
        Ok(())
    }

    fn snapshot(&self, row: usize, len: usize, held: usize) -> Result<Box<dyn LayerState>> {
        if len > 0 && len < self.earliest_cut(held) {
            candle_core::bail!(
                "cannot copy {len} positions of a window that keeps positions from {} on",
                self.offset
            );
        }
        let (offset, buffers) = match self.buffers.as_ref() {
            Some((k, v)) if len > self.offset => {
                let kept = len - self.offset;
                let cut = |t: &Tensor| t.narrow(0, row, 1)?.narrow(2, 0, kept)?.contiguous();
                (self.offset, Some((cut(k)?, cut(v)?)))
            }
            _ => (0, None),
        };
        Ok(Box::new(KvLayer {
            buffers,
            offset,
            window: self.window,
            max_len: self.max_len,
        }))
    }

    fn extend(&mut self, sources: &[&dyn LayerState], len: usize, _held: &[usize]) -> Result<()> {
        let sources: Vec<&KvLayer> = sources
            .iter()
            .map(|s| self.same_kind(*s))
            .collect::<Result<_>>()?;
        let mut parts: Vec<(usize, &(Tensor, Tensor))> = Vec::with_capacity(sources.len() + 1);
        if let Some(own) = self.buffers.as_ref() {
            parts.push((self.offset, own));
        }
        for source in &sources {
            let Some(buffers) = source.buffers.as_ref() else {
                candle_core::bail!("a joining row holds no keys");
            };
            parts.push((source.offset, buffers));
        }
        // Every row keeps the positions from the latest offset on, which each can spare: its
        // own cut to `len` keeps no earlier ones.
        let offset = parts.iter().map(|(o, _)| *o).max().unwrap_or(0);
        let kept = len - offset;
        let mut ks = Vec::with_capacity(parts.len());
        let mut vs = Vec::with_capacity(parts.len());
        for (own_offset, (k, v)) in parts {
            ks.push(k.narrow(2, offset - own_offset, kept)?);
            vs.push(v.narrow(2, offset - own_offset, kept)?);
        }
        let (k, v) = (Tensor::cat(&ks, 0)?, Tensor::cat(&vs, 0)?);
        let (rows, heads, _, dim) = k.dims4()?;
        let capacity = kept
            .next_multiple_of(GROW_CHUNK)
            .min(self.limit().max(kept));
        let nk = Tensor::zeros((rows, heads, capacity, dim), k.dtype(), k.device())?;
        let nv = Tensor::zeros((rows, heads, capacity, dim), v.dtype(), v.device())?;
        nk.slice_set(&k.contiguous()?, 2, 0)?;
        nv.slice_set(&v.contiguous()?, 2, 0)?;
        self.buffers = Some((nk, nv));
        self.offset = offset;
        Ok(())
    }

    fn retain_rows(&mut self, keep: &[bool]) -> Result<()> {
        let kept: Vec<u32> = (0..keep.len() as u32)
            .filter(|&i| keep[i as usize])
            .collect();
        if kept.len() == keep.len() {
            return Ok(());
        }
        if kept.is_empty() {
            self.buffers = None;
            self.offset = 0;
            return Ok(());
        }
        if let Some((k, v)) = self.buffers.as_mut() {
            let index = Tensor::new(kept.as_slice(), k.device())?;
            *k = k.index_select(&index, 0)?;
            *v = v.index_select(&index, 0)?;
        }
        Ok(())
    }

    fn bytes(&self, len: usize) -> usize {
        self.buffers.as_ref().map_or(0, |(k, v)| {
            let (rows, heads, _, dim) = k.dims4().unwrap_or_default();
            let per_position =
                rows * heads * dim * (k.dtype().size_in_bytes() + v.dtype().size_in_bytes());
            per_position * len.saturating_sub(self.offset)
        })
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::kernels::attention::CausalAttention;
    use crate::model::kernels::attention::tests::noise;

    const WINDOW: usize = 3;
    const HEADS: usize = 2;
    const DIM: usize = 8;

    /// Queries, keys and values of `rows` rows over `positions` positions.
    struct Inputs {
        q: Tensor,
        k: Tensor,
        v: Tensor,
    }

    impl Inputs {
        fn new(rows: usize, positions: usize) -> Self {
            Self {
                q: noise((rows, HEADS, positions, DIM), 1),
                k: noise((rows, 1, positions, DIM), 2),
                v: noise((rows, 1, positions, DIM), 3),
            }
        }

        /// Appends positions `at..at + new` of `rows` to `layer` and returns the attention of
        /// their queries.
        fn step(
            &self,
            layer: &mut KvLayer,
            rows: (usize, usize),
            at: usize,
            new: usize,
        ) -> Vec<f32> {
            let cut = |t: &Tensor| t.narrow(0, rows.0, rows.1)?.narrow(2, at, new);
            let (k, v) = layer
                .append(at, &cut(&self.k).unwrap(), &cut(&self.v).unwrap())
                .unwrap();
            let op = CausalAttention {
                scale: 0.5,
                window: Some(WINDOW),
                sinks: None,
            };
            let q = cut(&self.q).unwrap().contiguous().unwrap();
            q.apply_op3_no_bwd(&k, &v, &op)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1()
                .unwrap()
        }
    }

    #[test]
    fn a_window_attends_as_a_full_cache_does_while_dropping_what_it_passed() {
        let positions = 120;
        let inputs = Inputs::new(1, positions);
        let mut full = KvLayer::new(None, positions);
        let mut windowed = KvLayer::new(Some(WINDOW), positions);
        let (mut len, mut most_held) = (0, 0);
        for new in [9, 1, 1, 5, 1, 1, 1, 2].iter().cycle() {
            let new = (*new).min(positions - len);
            if new == 0 {
                break;
            }
            let want = inputs.step(&mut full, (0, 1), len, new);
            let got = inputs.step(&mut windowed, (0, 1), len, new);
            assert_eq!(got, want, "{new} positions at {len}");
            len += new;
            most_held = most_held.max(windowed.capacity());
            let cut = windowed.earliest_cut(len);
            assert!(cut <= len - (WINDOW - 1).min(len), "cut {cut} at {len}");
        }
        assert!(windowed.offset > 0, "the window never moved on");
        assert!(most_held <= window_capacity(WINDOW), "{most_held}");
        assert!(
            windowed.bytes(len) * 4 < full.bytes(len),
            "kept positions bounded"
        );
    }

    #[test]
    fn a_window_cut_back_as_far_as_it_allows_goes_on_as_a_full_cache_does() {
        let positions = 60;
        let inputs = Inputs::new(1, positions);
        let mut full = KvLayer::new(None, positions);
        let mut windowed = KvLayer::new(Some(WINDOW), positions);
        for at in 0..40 {
            inputs.step(&mut full, (0, 1), at, 1);
            inputs.step(&mut windowed, (0, 1), at, 1);
        }
        let cut = windowed.earliest_cut(40);
        assert!(cut > 0 && cut < 40, "{cut}");
        full.truncate(cut, 40).unwrap();
        windowed.truncate(cut, 40).unwrap();
        for at in cut..positions {
            let want = inputs.step(&mut full, (0, 1), at, 1);
            assert_eq!(inputs.step(&mut windowed, (0, 1), at, 1), want, "at {at}");
        }
        // Cut to nothing, it starts over.
        windowed.truncate(0, positions).unwrap();
        assert_eq!(windowed.cuts(0), Cuts::from(0));
        let fresh = inputs.step(&mut KvLayer::new(Some(WINDOW), positions), (0, 1), 0, 5);
        assert_eq!(inputs.step(&mut windowed, (0, 1), 0, 5), fresh);
    }

    #[test]
    fn rows_whose_windows_moved_on_differently_join_one_batch_and_attend_as_before() {
        let positions = 50;
        let inputs = Inputs::new(2, positions);
        // Row 0 decodes one position at a time (its window moves on often); row 1 runs its
        // first 30 positions at once (kept whole) and then decodes.
        let mut row0 = KvLayer::new(Some(WINDOW), positions);
        let mut row1 = KvLayer::new(Some(WINDOW), positions);
        for at in 0..30 {
            inputs.step(&mut row0, (0, 1), at, 1);
        }
        inputs.step(&mut row1, (1, 1), 0, 30);
        assert_ne!(row0.offset, row1.offset);
        let (mut alone0, mut alone1) = (
            row0.snapshot(0, 30, 30).unwrap(),
            row1.snapshot(0, 30, 30).unwrap(),
        );
        let alone0 = alone0.as_any_mut().downcast_mut::<KvLayer>().unwrap();
        let alone1 = alone1.as_any_mut().downcast_mut::<KvLayer>().unwrap();
        let mut batch = KvLayer::new(Some(WINDOW), positions);
        batch.extend(&[&row0, &row1], 30, &[30, 30]).unwrap();
        for at in 30..positions {
            let both = inputs.step(&mut batch, (0, 2), at, 1);
            let mut each = inputs.step(alone0, (0, 1), at, 1);
            each.extend(inputs.step(alone1, (1, 1), at, 1));
            assert_eq!(both, each, "at {at}");
        }
        // A row cut before what its window kept cannot be copied.
        assert!(row0.snapshot(0, 10, 30).is_err());
    }
}
