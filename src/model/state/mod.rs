//! What a sequence keeps between forward steps: one state per layer, behind [`LayerState`].
//!
//! Replay, branches, step mode and the prompt cache all cut a sequence back to an earlier
//! position and copy rows between batches. A full KV cache can be cut anywhere; a sliding-window
//! layer keeps only its window (and some room to rewind), and a recurrent layer keeps no past
//! positions at all but the snapshots it took, so each state says where it can be cut back to
//! ([`LayerState::cuts`]) and the engine recomputes from there.

mod borrowed;
pub(crate) mod kv;
pub(crate) mod recurrent;

use crate::model::formats::config::ModelConfig;
use borrowed::Borrowed;
use candle_core::Result;
use kv::KvLayer;
use recurrent::RecurrentLayer;
use std::any::Any;
use std::fmt::Debug;

/// The most positions one forward appends at once: a prompt runs in slices this long, which
/// bounds its `[heads, slice, context]` attention scores and a windowed layer's buffer.
pub(crate) const LONGEST_APPEND: usize = 512;

/// Where a state holding some positions can be cut back to and go on from: every position from
/// `from` on, the `points` before it, and 0 (starting over).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cuts {
    from: usize,
    points: Vec<usize>,
}

impl Cuts {
    /// Anywhere from `from` on (a KV cache: 0 unless a window dropped earlier positions).
    pub fn from(from: usize) -> Self {
        Self {
            from,
            points: Vec::new(),
        }
    }

    /// At `len` itself and at `points` (a recurrent state's snapshots).
    pub fn at(len: usize, points: Vec<usize>) -> Self {
        Self { from: len, points }
    }

    /// The latest position at or before `want` a cut can reach.
    pub fn nearest(&self, want: usize) -> usize {
        if want >= self.from {
            return want;
        }
        let points = self.points.iter().copied();
        points.filter(|&p| p <= want).max().unwrap_or(0)
    }

    pub fn allows(&self, len: usize) -> bool {
        self.nearest(len) == len
    }

    /// The cuts both allow.
    pub fn and(&self, other: &Cuts) -> Cuts {
        let from = self.from.max(other.from);
        let mut points: Vec<usize> = [self.from, other.from]
            .into_iter()
            .chain(self.points.iter().chain(&other.points).copied())
            .filter(|&p| p < from && self.allows(p) && other.allows(p))
            .collect();
        points.sort_unstable();
        points.dedup();
        Cuts { from, points }
    }
}

/// When a recurrent layer keeps snapshots of a row: at every `every`-th position, at most
/// `cap` of them (past it, every other one goes and the spacing doubles).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Snapshots {
    pub every: usize,
    pub cap: usize,
}

/// The replay budget (`SAMPLAB_REPLAY_BUDGET`) when none is set. Kept logits and snapshots of
/// recurrent states both count against it, so the engine and the memory check read it here.
pub const DEFAULT_REPLAY_BUDGET: usize = 512 << 20;

/// Samples that share the replay budget's snapshots: each row may take this fraction of it.
const ROWS_PER_REPLAY_BUDGET: usize = 8;

/// Positions between a row's first snapshots.
const SNAPSHOT_EVERY: usize = 32;

/// Snapshots kept of a row at most, whatever the budget: past it they thin out.
const MOST_SNAPSHOTS: usize = 64;

impl Snapshots {
    pub const NONE: Snapshots = Snapshots { every: 0, cap: 0 };

    /// For each row of a run under a replay budget of `budget` bytes: as many as an eighth of
    /// it holds.
    pub fn within_replay_budget(config: &ModelConfig, budget: usize) -> Snapshots {
        let bytes = budget / ROWS_PER_REPLAY_BUDGET;
        let recurrent = config.layers.iter().filter(|p| p.recurrent).count();
        let each = match config.delta_net {
            Some(shape) => recurrent * shape.state_floats() * size_of::<f32>(),
            None => 0,
        };
        match bytes.checked_div(each) {
            Some(cap) if cap > 0 => Snapshots {
                every: SNAPSHOT_EVERY,
                cap: cap.min(MOST_SNAPSHOTS),
            },
            _ => Snapshots::NONE,
        }
    }
}

/// One layer's memory of a batch of rows that share one length. The sequence's length is kept
/// by [`SequenceState`] and handed in, so that every layer agrees on it.
pub(crate) trait LayerState: Debug + Send + Sync {
    /// Where a state holding `len` positions can be cut back to.
    fn cuts(&self, len: usize) -> Cuts;

    /// Forgets every position from `len` on (one [`LayerState::cuts`] of `held` allows).
    fn truncate(&mut self, len: usize, held: usize) -> Result<()>;

    /// Copies the single row to `n` rows.
    fn fork(&mut self, n: usize) -> Result<()>;

    /// A one-row copy of row `row` cut to `len` positions, which [`LayerState::cuts`] of
    /// `held`, the positions held now, must allow.
    fn snapshot(&self, row: usize, len: usize, held: usize) -> Result<Box<dyn LayerState>>;

    /// Appends one row per source (one-row states of the same kind, source `i` holding
    /// `held[i]` positions and cuttable to `len`), all cut to `len`. The batch holds `len`
    /// positions itself, or no rows.
    fn extend(&mut self, sources: &[&dyn LayerState], len: usize, held: &[usize]) -> Result<()>;

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
    pub(crate) fn new(config: &ModelConfig, snapshots: Snapshots) -> Self {
        Self::with_rows(config, snapshots, 1)
    }

    /// A batch of no rows, which [`SequenceState::extend`] fills.
    pub(crate) fn empty_batch(config: &ModelConfig, snapshots: Snapshots) -> Self {
        Self::with_rows(config, snapshots, 0)
    }

    fn with_rows(config: &ModelConfig, snapshots: Snapshots, rows: usize) -> Self {
        let layers = config
            .layers
            .iter()
            .map(
                |plan| match (config.delta_net.filter(|_| plan.recurrent), plan.kv_from) {
                    (Some(shape), _) => {
                        Box::new(RecurrentLayer::new(shape, snapshots, rows)) as Box<dyn LayerState>
                    }
                    (None, Some(_)) => Box::new(Borrowed),
                    (None, None) => Box::new(KvLayer::new(plan.window, config.context_length)),
                },
            )
            .collect();
        Self {
            layers,
            len: 0,
            rows,
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

    /// Layer `layer`'s recurrent state; an error where that layer keeps another kind.
    pub(crate) fn recurrent(&mut self, layer: usize) -> Result<&mut RecurrentLayer> {
        self.layers[layer]
            .as_any_mut()
            .downcast_mut()
            .ok_or_else(|| {
                candle_core::Error::Msg(format!("layer {layer} keeps no recurrent state"))
            })
    }

    /// Notes `new` positions appended by every layer.
    pub(crate) fn advance(&mut self, new: usize) {
        self.len += new;
    }

    /// Where every layer can be cut back to.
    pub(crate) fn cuts(&self) -> Cuts {
        self.layers
            .iter()
            .fold(Cuts::from(0), |cuts, layer| cuts.and(&layer.cuts(self.len)))
    }

    /// Forgets every position from `len` on. Where [`SequenceState::cuts`] does not allow
    /// `len` that is an error: the caller recomputes instead.
    pub(crate) fn truncate(&mut self, len: usize) -> Result<()> {
        if len >= self.len {
            return Ok(());
        }
        let cuts = self.cuts();
        if !cuts.allows(len) {
            candle_core::bail!(
                "cannot cut a sequence of {} positions back to {len}: its windowed or \
                 recurrent layers can go back to {} at most",
                self.len,
                cuts.nearest(len)
            );
        }
        for layer in &mut self.layers {
            layer.truncate(len, self.len)?;
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
        if let Some(far) = sources.iter().find(|s| !s.cuts().allows(len)) {
            candle_core::bail!(
                "a joining row of {} positions cannot be cut back to {len}, only to {}",
                far.len,
                far.cuts().nearest(len)
            );
        }
        let held: Vec<usize> = sources.iter().map(|s| s.len).collect();
        for (i, layer) in self.layers.iter_mut().enumerate() {
            let parts: Vec<&dyn LayerState> = sources.iter().map(|s| &*s.layers[i]).collect();
            layer.extend(&parts, len, &held)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_windows_cuts_and_a_recurrent_states_combine_to_what_both_allow() {
        let window = Cuts::from(10);
        let snapshots = Cuts::at(40, vec![8, 16, 32]);
        let both = window.and(&snapshots);
        assert_eq!(both.nearest(40), 40);
        assert_eq!(both.nearest(39), 32);
        assert_eq!(both.nearest(20), 16);
        // 8 is a snapshot, but the window dropped what position 8 needs.
        assert_eq!(both.nearest(9), 0);
        assert!(both.allows(0) && both.allows(16) && !both.allows(31));
        assert_eq!(Cuts::from(0).and(&Cuts::from(0)).nearest(7), 7);
    }
}
