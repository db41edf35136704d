//! The per-stage inspector's question — what did each stage of the chain do at one step of one
//! sample? — answered from the logits the replay store kept: the sampler replays the sample's
//! earlier steps (so penalties, DRY, XTC's coin, mirostat and adaptive-p stand where they
//! stood), then traces the step.

use super::events::RunId;
use super::generate::record_key;
use super::replay::ReplayStore;
use crate::params::SamplingParams;
use crate::sampling::{Constraint, SampleState, Sampler, StageTrace, TokenLists, log_normalizer};
use tokenizers::Tokenizer;

/// Trace `ids` at the last of `tokens`, the sample's tokens so far.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceRequest {
    pub run_id: RunId,
    pub sample: u32,
    /// The sample's own seed (the run's seed + its index).
    pub seed: u64,
    /// For a branch: its place among the run's branches, and how many of its first tokens
    /// were forced (its path).
    pub branch: Option<(usize, usize)>,
    /// The sample's tokens up to and including the traced one.
    pub tokens: Vec<u32>,
    pub params: SamplingParams,
    /// The tokens to follow through the chain: the chosen one and its alternatives.
    pub ids: Vec<u32>,
}

impl TraceRequest {
    /// The traced step (0 is the first generated token).
    pub fn step(&self) -> usize {
        self.tokens.len().saturating_sub(1)
    }
}

/// The chain's stages at the request's step, or why they cannot be shown.
pub fn trace(
    store: &ReplayStore,
    tokenizer: &Tokenizer,
    eos_ids: &[u32],
    vocab_size: usize,
    constraint: Option<&Constraint>,
    request: &TraceRequest,
) -> anyhow::Result<Vec<StageTrace>> {
    let gone = || {
        anyhow::anyhow!(
            "the logits of this step are no longer kept (another run or the replay budget \
             replaced them): run again to inspect it"
        )
    };
    let (branch, forced) = request.branch.unzip();
    let key = record_key(request.seed, branch);
    let (prompt, steps) = store.kept_steps(key, &request.tokens).ok_or_else(gone)?;
    let mut sampler = Sampler::new(&request.params)?.with_tokens(TokenLists::new(
        tokenizer,
        eos_ids,
        &request.params,
    ));
    let mut state = SampleState::new(request.seed, 0, prompt, vocab_size).constrained(constraint);
    let (last, earlier) = steps.split_last().ok_or_else(gone)?;
    let forced = forced.unwrap_or(0);
    for (step, (logits, &token)) in earlier.iter().zip(&request.tokens).enumerate() {
        let force = (step < forced).then_some(token);
        let norm = log_normalizer(logits)?;
        let drawn = sampler.sample_or_force(logits, norm, &mut state, force)?;
        if drawn.id != token {
            return Err(gone());
        }
    }
    Ok(sampler.trace(last, &state, &request.ids)?)
}
