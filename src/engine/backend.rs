//! What the engine needs from a model: a prompt cache, and batched decode steps over rows that
//! can leave the batch and join a later one where they left off.
//!
//! The trait keeps the generation loop independent of candle, so it is tested with a
//! deterministic fake model as well as the real llama forward.

use super::backend_choice::BackendKind;
use crate::model::Cuts;
use crate::model::memory::{self, Free, MemoryError};
use std::any::Any;

/// A model with a cache of its last prompt and a batch of rows that decode together.
pub trait Backend {
    /// Whose forward pass this is, for every label that names where numbers came from.
    fn kind(&self) -> BackendKind;

    fn vocab_size(&self) -> usize;

    /// Bytes of weights read by one forward step, for the bandwidth figure of `samplab bench`.
    fn weight_bytes(&self) -> u64;

    /// Each weight type of the model's matrices and the kernel that runs it, for `samplab
    /// bench`; empty where the backend does not say.
    fn kernels(&self) -> Vec<(String, String)> {
        Vec::new()
    }

    /// The most positions (prompt + generated) the model can attend over.
    fn context_length(&self) -> usize;

    /// Bytes one row's sequence state takes at `positions` positions, so that a run can be
    /// refused before it grows past the free memory; 0 where the backend keeps none.
    fn state_bytes(&self, _positions: usize) -> u64 {
        0
    }

    /// The memory the KV cache grows into: the host's, or a GPU's own.
    fn free_memory(&self) -> Result<Option<Free>, MemoryError> {
        Ok(memory::available()?.map(Free::host))
    }

    /// Makes the prompt cache hold `prompt`, running only the positions past the longest
    /// prefix it already holds, and past no more than `logits_from` (whose logits are wanted).
    /// Returns the logits after each position from `logits_from` on: row `j` predicts the token
    /// after `prompt[..=logits_from + j]`; none when `logits_from` is `prompt.len()`.
    fn prefill(&mut self, prompt: &[u32], logits_from: usize) -> anyhow::Result<Prefill>;

    /// Appends rows to the batch, each holding `len` positions: a copy of the prompt cache's
    /// (after a `prefill` of that prompt) with the row's own tokens run on top, or a parked row
    /// cut to `len`. The rows already in the batch must hold `len` positions too.
    fn join(&mut self, rows: Vec<RowSource>, len: usize) -> anyhow::Result<()>;

    /// Feeds one token to each row of the batch; returns one logits row per row, in order.
    fn decode(&mut self, tokens: &[u32]) -> anyhow::Result<Vec<Vec<f32>>>;

    /// Takes the rows whose flag is false out of the batch (in the current row order) and
    /// hands them back, in order, to join a later batch.
    fn retire(&mut self, keep: &[bool]) -> anyhow::Result<Vec<ParkedRow>>;

    /// A copy of the first `len` positions of a parked row (or fewer, where it can be cut back
    /// only to an earlier snapshot), which stays as it is: a branch starts from the keys and
    /// values of the sample it branches from. `None` where the backend cannot copy rows (the
    /// branch then computes its own).
    fn fork(&self, _row: &ParkedRow, _len: usize) -> anyhow::Result<Option<ParkedRow>> {
        Ok(None)
    }

    /// Forgets the prompt cache and the batch: the next prefill runs every position.
    fn reset(&mut self);
}

/// What a prefill ran and returned.
#[derive(Debug, Default)]
pub struct Prefill {
    /// Logits after each position from the requested one on.
    pub logits: Vec<Vec<f32>>,
    /// Positions run through the model; the others came from the prompt cache.
    pub computed: usize,
}

/// Where a row joining the batch gets its cached positions.
pub enum RowSource {
    /// The prompt cache's positions, then these tokens of the row's own run through the model:
    /// none for a sample's first step, or a sample's tokens where its parked row is gone or
    /// cannot be cut back far enough.
    Prompt { then: Vec<u32> },
    /// A parked row cut to its `then`'s start (one of its cuts), then these tokens of its own
    /// run through the model: none, or those after a recurrent state's snapshot.
    Parked { row: ParkedRow, then: Vec<u32> },
}

impl RowSource {
    /// The prompt cache's positions alone.
    pub fn prompt() -> Self {
        Self::Prompt { then: Vec::new() }
    }
}

/// One row's cached keys and values, out of the batch. Only the backend that made it reads it.
pub struct ParkedRow {
    row: Box<dyn Any + Send>,
    positions: usize,
    bytes: usize,
    cuts: Cuts,
}

impl ParkedRow {
    /// `row` holds `positions` positions in `bytes` bytes.
    pub fn new(row: impl Any + Send, positions: usize, bytes: usize) -> Self {
        Self {
            row: Box::new(row),
            positions,
            bytes,
            cuts: Cuts::from(0),
        }
    }

    /// The row can be cut back only where `cuts` allow (a windowed layer has dropped what a
    /// shorter row would need; a recurrent one keeps snapshots).
    pub fn with_cuts(self, cuts: Cuts) -> Self {
        Self { cuts, ..self }
    }

    /// The latest position at or before `len` the row can be cut back to and go on from.
    pub fn nearest_cut(&self, len: usize) -> usize {
        self.cuts.nearest(len.min(self.positions))
    }

    pub fn positions(&self) -> usize {
        self.positions
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The backend's own row, when this row is of type `T`.
    pub fn into_inner<T: Any>(self) -> Option<T> {
        self.row.downcast().ok().map(|row| *row)
    }

    /// The backend's own row, borrowed, when it is of type `T`.
    pub fn inner<T: Any>(&self) -> Option<&T> {
        self.row.downcast_ref()
    }
}
