//! A Gated DeltaNet layer's memory of a batch of rows: per row, the convolution's window of
//! recent inputs and one state matrix per value head, with no past positions to cut back to.
//!
//! So that a re-run, a branch or a prompt edit at position `k` need not start over, each row
//! keeps snapshots of its state at every `every`-th position (thinned to the `cap` latest
//! spacing when they grow past it); a cut restores the nearest one at or before `k`.

use super::{Cuts, LayerState, Snapshots};
use crate::model::formats::config::DeltaNetShape;
use candle_core::Result;
use std::any::Any;

/// One row's memory at one position.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RowState {
    /// The last `kernel - 1` inputs of the convolution, oldest first, `[kernel - 1, channels]`.
    pub conv: Vec<f32>,
    /// Per value head `h`, `matrix[h][j][i]`: how value `j` responds to key component `i`.
    pub matrix: Vec<f32>,
}

impl RowState {
    fn zeros(shape: &DeltaNetShape) -> Self {
        Self {
            conv: vec![0.0; (shape.conv_kernel - 1) * shape.conv_channels()],
            matrix: vec![0.0; shape.v_heads * shape.head_dim * shape.head_dim],
        }
    }

    fn bytes(&self) -> usize {
        (self.conv.len() + self.matrix.len()) * size_of::<f32>()
    }
}

/// One row: its state now and its snapshots, oldest first, each at the position it holds.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub now: RowState,
    snapshots: Vec<(usize, RowState)>,
    /// Positions between snapshots: the layer's `every`, doubled each time the row thinned
    /// its snapshots to stay within the cap.
    spacing: usize,
}

impl Row {
    /// Whether a snapshot falls due when the row holds `len` positions.
    pub(crate) fn due(&self, len: usize, policy: Snapshots) -> bool {
        policy.cap > 0 && self.spacing > 0 && len.is_multiple_of(self.spacing)
    }

    /// Keeps `state`, the row at `len` positions, if a snapshot is due there (the spacing
    /// may have doubled since [`Row::due`] said so); past the cap every other one goes.
    pub(crate) fn offer(&mut self, len: usize, state: RowState, policy: Snapshots) {
        if !self.due(len, policy) {
            return;
        }
        self.snapshots.push((len, state));
        if self.snapshots.len() > policy.cap {
            self.spacing *= 2;
            let spacing = self.spacing;
            self.snapshots.retain(|(at, _)| at.is_multiple_of(spacing));
        }
    }

    /// Positions this row can be cut back to below `len` (besides 0).
    fn cut_points(&self) -> impl Iterator<Item = usize> + '_ {
        self.snapshots.iter().map(|(at, _)| *at)
    }

    /// This row as it was at `len` positions, of `held` now: itself, a snapshot, or (at 0)
    /// the empty state. Snapshots past `len` are dropped.
    fn cut(&self, len: usize, held: usize, shape: &DeltaNetShape) -> Result<Row> {
        let mut snapshots: Vec<(usize, RowState)> = self
            .snapshots
            .iter()
            .filter(|(at, _)| *at <= len)
            .cloned()
            .collect();
        let now = if len == held {
            self.now.clone()
        } else if len == 0 {
            RowState::zeros(shape)
        } else {
            match snapshots.last() {
                Some((at, state)) if *at == len => state.clone(),
                _ => candle_core::bail!(
                    "a recurrent state of {held} positions keeps no snapshot at {len}"
                ),
            }
        };
        snapshots.retain(|(at, _)| *at < len);
        Ok(Row {
            now,
            snapshots,
            spacing: self.spacing,
        })
    }

    fn bytes(&self) -> usize {
        self.now.bytes() + self.snapshots.iter().map(|(_, s)| s.bytes()).sum::<usize>()
    }
}

#[derive(Debug)]
pub(crate) struct RecurrentLayer {
    shape: DeltaNetShape,
    policy: Snapshots,
    rows: Vec<Row>,
}

impl RecurrentLayer {
    /// `rows` empty rows.
    pub(crate) fn new(shape: DeltaNetShape, policy: Snapshots, rows: usize) -> Self {
        let row = Row {
            now: RowState::zeros(&shape),
            snapshots: Vec::new(),
            spacing: policy.every,
        };
        Self {
            shape,
            policy,
            rows: vec![row; rows],
        }
    }

    pub(crate) fn policy(&self) -> Snapshots {
        self.policy
    }

    pub(crate) fn rows_mut(&mut self) -> &mut [Row] {
        &mut self.rows
    }

    fn same_kind<'a>(&self, other: &'a dyn LayerState) -> Result<&'a RecurrentLayer> {
        other
            .as_any()
            .downcast_ref::<RecurrentLayer>()
            .filter(|o| o.shape == self.shape)
            .ok_or_else(|| {
                candle_core::Error::Msg("a joining row keeps another kind of state".into())
            })
    }
}

impl LayerState for RecurrentLayer {
    /// Only where every row has a snapshot (or at the length itself, or 0).
    fn cuts(&self, len: usize) -> Cuts {
        let mut points: Vec<usize> = match self.rows.first() {
            Some(row) => row.cut_points().collect(),
            None => Vec::new(),
        };
        points.retain(|p| self.rows.iter().all(|r| r.cut_points().any(|q| q == *p)));
        Cuts::at(len, points)
    }

    fn truncate(&mut self, len: usize, held: usize) -> Result<()> {
        let shape = self.shape;
        for row in &mut self.rows {
            *row = row.cut(len, held, &shape)?;
        }
        Ok(())
    }

    fn fork(&mut self, n: usize) -> Result<()> {
        if let Some(row) = self.rows.first().cloned() {
            self.rows = vec![row; n];
        }
        Ok(())
    }

    fn snapshot(&self, row: usize, len: usize, held: usize) -> Result<Box<dyn LayerState>> {
        let Some(source) = self.rows.get(row) else {
            candle_core::bail!("no row {row} in a batch of {}", self.rows.len());
        };
        Ok(Box::new(RecurrentLayer {
            shape: self.shape,
            policy: self.policy,
            rows: vec![source.cut(len, held, &self.shape)?],
        }))
    }

    fn extend(&mut self, sources: &[&dyn LayerState], len: usize, held: &[usize]) -> Result<()> {
        for (source, &held) in sources.iter().zip(held) {
            let source = self.same_kind(*source)?;
            let Some(row) = source.rows.first() else {
                candle_core::bail!("a joining row holds no state");
            };
            self.rows.push(row.cut(len, held, &self.shape)?);
        }
        Ok(())
    }

    fn retain_rows(&mut self, keep: &[bool]) -> Result<()> {
        let mut flags = keep.iter();
        self.rows.retain(|_| flags.next().copied().unwrap_or(false));
        Ok(())
    }

    fn bytes(&self, _len: usize) -> usize {
        self.rows.iter().map(Row::bytes).sum()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
