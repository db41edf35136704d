//! What a sequence keeps between forward steps: one state per layer, behind [`LayerState`].
//!
//! Replay, branches, step mode and the prompt cache all cut a sequence back to an earlier
//! position and copy rows between batches. A full KV cache can be cut anywhere; a sliding-window
//! layer keeps only its window (and some room to rewind), and a recurrent layer keeps no past
//! positions at all, so each state says how far back it can be cut ([`LayerState::earliest_cut`])
//! and the engine recomputes what lies further back.

mod borrowed;
pub(crate) mod kv;

use crate::model::formats::config::ModelConfig;
use borrowed::Borrowed;
use candle_core::Result;
use kv::KvLayer;
use std::any::Any;
use std::fmt::Debug;

/// The most positions one forward appends at once: a prompt runs in slices this long, which
/// bounds its `[heads, slice, context]` attention scores and a windowed layer's buffer.
pub(crate) const LONGEST_APPEND: usize = 512;

/// One layer's memory of a batch of rows that share one length. The sequence's length is kept
/// by [`SequenceState`] and handed in, so that every layer agrees on it.
pub(crate) trait LayerState: Debug + Send + Sync {
    /// The shortest length that a state holding `len` positions can be cut back to and go on
    /// from (0 is always allowed: it starts over).
    fn earliest_cut(&self, len: usize) -> usize;

    /// Forgets every position from `len` on (`len` at least [`LayerState::earliest_cut`], or 0).
    fn truncate(&mut self, len: usize);

    /// Copies the single row to `n` rows.
    fn fork(&mut self, n: usize) -> Result<()>;

    /// A one-row copy of row `row` cut to `len` positions, which must be at least
    /// [`LayerState::earliest_cut`] of `held`, the positions held now.
    fn snapshot(&self, row: usize, len: usize, held: usize) -> Result<Box<dyn LayerState>>;

    /// Appends one row per source (one-row states of the same kind, each holding at least
    /// `len` positions and cuttable to `len`), all cut to `len`. The batch holds `len`
    /// positions itself, or no rows.
    fn extend(&mut self, sources: &[&dyn LayerState], len: usize) -> Result<()>;

    /// Keeps the rows whose flag is true, in order.
    fn retain_rows(&mut self, keep: &[bool]) -> Result<()>;

    /// Bytes the state holds for `len` positions (spare capacity not counted).
    fn bytes(&self, len: usize) -> usize;

    fn as_any(&self) -> &dyn Any;

    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// Every layer's state for a batch of rows that share one length.
#[derive(Debug)]
pub(crate) struct SequenceState {
    layers: Vec<Box<dyn LayerState>>,
    len: usize,
    rows: usize,
}

impl SequenceState {
    /// An empty state of one row, for a prompt: one layer state per layer of the plan.
    pub(crate) fn new(config: &ModelConfig) -> Self {
        let layers = config
            .layers
            .iter()
            .map(|plan| match plan.kv_from {
                Some(_) => Box::new(Borrowed) as Box<dyn LayerState>,
                None => Box::new(KvLayer::new(plan.window, config.context_length)),
            })
            .collect();
        Self {
            layers,
            len: 0,
            rows: 1,
        }
    }

    /// A batch of no rows, which [`SequenceState::extend`] fills.
    pub(crate) fn empty_batch(config: &ModelConfig) -> Self {
        Self {
            rows: 0,
            ..Self::new(config)
        }
    }

    /// Positions held per row.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// Layer `layer`'s keys and values; an error where that layer keeps another kind of state.
    pub(crate) fn kv(&mut self, layer: usize) -> Result<&mut KvLayer> {
        self.layers[layer]
            .as_any_mut()
            .downcast_mut()
            .ok_or_else(|| candle_core::Error::Msg(format!("layer {layer} keeps no keys")))
    }

    /// Notes `new` positions appended by every layer.
    pub(crate) fn advance(&mut self, new: usize) {
        self.len += new;
    }

    /// The shortest length every layer can be cut back to.
    pub(crate) fn earliest_cut(&self) -> usize {
        self.layers
            .iter()
            .map(|layer| layer.earliest_cut(self.len))
            .max()
            .unwrap_or(0)
    }

    /// Forgets every position from `len` on. Below [`SequenceState::earliest_cut`] (and above
    /// 0) that is an error: the caller recomputes instead.
    pub(crate) fn truncate(&mut self, len: usize) -> Result<()> {
        if len >= self.len {
            return Ok(());
        }
        if len > 0 && len < self.earliest_cut() {
            candle_core::bail!(
                "cannot cut a sequence of {} positions back to {len}: its windowed layers keep \
                 positions from {} on",
                self.len,
                self.earliest_cut()
            );
        }
        for layer in &mut self.layers {
            layer.truncate(len);
        }
        self.len = len;
        Ok(())
    }

    /// Copies the single row to `n` rows.
    pub(crate) fn fork(&mut self, n: usize) -> Result<()> {
        for layer in &mut self.layers {
            layer.fork(n)?;
        }
        self.rows = n;
        Ok(())
    }

    /// Bytes every layer holds for the cached positions.
    pub(crate) fn bytes(&self) -> usize {
        self.layers.iter().map(|layer| layer.bytes(self.len)).sum()
    }

    /// Takes the rows whose flag is false out of the batch, each as a one-row state of its own,
    /// in order; the others stay.
    pub(crate) fn split_off(&mut self, keep: &[bool]) -> Result<Vec<SequenceState>> {
        let mut taken = Vec::new();
        for row in (0..keep.len()).filter(|&r| !keep[r]) {
            let layers = self
                .layers
                .iter()
                .map(|layer| layer.snapshot(row, self.len, self.len))
                .collect::<Result<_>>()?;
            taken.push(SequenceState {
                layers,
                len: self.len,
                rows: 1,
            });
        }
        self.retain_rows(keep)?;
        Ok(taken)
    }

    /// Appends one row per source (each a one-row state), cut to its first `len` positions.
    /// The batch must be empty or hold `len` positions itself, and each source must be
    /// cuttable to `len`.
    pub(crate) fn extend(&mut self, sources: &[&SequenceState], len: usize) -> Result<()> {
        if sources.is_empty() {
            return Ok(());
        }
        if self.rows != 0 && self.len != len {
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
        if let Some(far) = sources
            .iter()
            .find(|s| s.len > len && s.earliest_cut() > len)
        {
            candle_core::bail!(
                "a joining row of {} positions cannot be cut back to {len}, only to {}",
                far.len,
                far.earliest_cut()
            );
        }
        for (i, layer) in self.layers.iter_mut().enumerate() {
            let parts: Vec<&dyn LayerState> = sources.iter().map(|s| &*s.layers[i]).collect();
            layer.extend(&parts, len)?;
        }
        self.rows += sources.len();
        self.len = len;
        Ok(())
    }

    /// Keeps the rows whose flag is true, in order.
    pub(crate) fn retain_rows(&mut self, keep: &[bool]) -> Result<()> {
        for layer in &mut self.layers {
            layer.retain_rows(keep)?;
        }
        self.rows = keep.iter().filter(|&&k| k).count();
        Ok(())
    }
}

/// Positions of one row that a layer with this window holds at most, over a sequence of
/// `positions`: all of them, or (windowed) its window, the room to rewind and a slice's growth.
pub(crate) fn positions_held(window: Option<usize>, positions: usize) -> usize {
    match window {
        Some(window) => positions.min(kv::window_capacity(window)),
        None => positions,
    }
}
