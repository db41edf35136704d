//! One sample's evolving state: its random streams, the tokens so far, and what stateful stages
//! (mirostat) carry from step to step.

use super::penalty::SeenTokens;
use super::rng::{SampleRng, sample_seed};

/// Mixed into a sample's seed for the stream of XTC's coin, so that the coin never takes the
/// draw's uniform (a knob change must not shift every later draw).
const COIN_STREAM: u64 = 0x5854_435f_636f_696e;

#[derive(Debug, Clone)]
pub struct SampleState {
    /// The final draw's stream: exactly one uniform per step.
    pub(super) rng: SampleRng,
    /// XTC's coin: one uniform per step where XTC runs.
    pub(super) coin: SampleRng,
    pub(super) seen: SeenTokens,
    /// Prompt and generated tokens, in order: the windows of llama.cpp's penalties and DRY.
    pub(super) tokens: Vec<u32>,
    pub(super) prompt_len: usize,
    /// Mirostat's target surprise `mu`; `None` until its first step sets it to 2 tau.
    pub(super) mu: Option<f32>,
}

impl SampleState {
    /// Sample `index` of a run seeded with `seed`; the prompt's tokens count as seen.
    pub fn new(seed: u64, index: u32, prompt: &[u32], vocab_size: usize) -> Self {
        let mut seen = SeenTokens::new(vocab_size);
        for &id in prompt {
            seen.insert(id);
        }
        let own = sample_seed(seed, index);
        Self {
            rng: SampleRng::new(own),
            coin: SampleRng::new(own ^ COIN_STREAM),
            seen,
            tokens: prompt.to_vec(),
            prompt_len: prompt.len(),
            mu: None,
        }
    }

    /// The generated tokens so far.
    pub(super) fn output(&self) -> &[u32] {
        &self.tokens[self.prompt_len..]
    }

    /// The last `n` tokens (prompt included); `None` (llama.cpp's -1) is all of them.
    pub(super) fn last(&self, n: Option<usize>) -> &[u32] {
        let n = n.unwrap_or(self.tokens.len()).min(self.tokens.len());
        &self.tokens[self.tokens.len() - n..]
    }

    /// Records a token as the sample's next one: what the sampler does after each draw, and
    /// what a caller does for a token chosen elsewhere (a branch, a forced token).
    pub fn accept(&mut self, id: u32) {
        self.seen.insert(id);
        self.tokens.push(id);
    }
}
