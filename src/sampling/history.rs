//! One sample's evolving state: its random streams, the tokens so far, and what stateful stages
//! (mirostat, adaptive-p) carry from step to step.

use super::chain::AdaptiveMemory;
use super::constraint::{Constraint, ConstraintError, Mask, Parser};
use super::penalty::SeenTokens;
use super::rng::{SampleRng, sample_seed};

/// Mixed into a sample's seed for the stream of XTC's coin, so that the coin never takes the
/// draw's uniform (a knob change must not shift every later draw).
const COIN_STREAM: u64 = 0x5854_435f_636f_696e;
/// Mixed into a sample's seed for the draws llama.cpp makes again when its first one broke
/// the grammar.
const RESAMPLE_STREAM: u64 = 0x6772_616d_6d61_7221;

#[derive(Debug, Clone)]
pub struct SampleState {
    /// The final draw's stream: exactly one uniform per step.
    pub(super) rng: SampleRng,
    /// XTC's coin: one uniform per step where XTC runs.
    pub(super) coin: SampleRng,
    /// llama.cpp's second draw, in steps where the first broke the grammar.
    pub(super) resample: SampleRng,
    pub(super) seen: SeenTokens,
    /// Prompt and generated tokens, in order: the windows of llama.cpp's penalties and DRY.
    pub(super) tokens: Vec<u32>,
    pub(super) prompt_len: usize,
    /// Mirostat's target surprise `mu`; `None` until its first step sets it to 2 tau.
    pub(super) mu: Option<f32>,
    /// adaptive-p's average of the chosen tokens' probabilities; `None` until its first step.
    pub(super) adaptive: Option<AdaptiveMemory>,
    /// Where the sample is in its constraint (structured outputs), if the run has one.
    parser: Option<Parser>,
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
            resample: SampleRng::new(own ^ RESAMPLE_STREAM),
            seen,
            tokens: prompt.to_vec(),
            prompt_len: prompt.len(),
            mu: None,
            adaptive: None,
            parser: None,
        }
    }

    /// The sample's text must satisfy `constraint`, from its first generated token.
    pub fn constrained(mut self, constraint: Option<&Constraint>) -> Self {
        self.parser = constraint.map(Constraint::start);
        self
    }

    /// Computes the constraint's mask for the next step, if the run has a constraint and it is
    /// not computed yet: the engine calls this while the forward pass runs, the sampler before
    /// it samples.
    pub fn prepare_constraint(&mut self) -> Result<(), ConstraintError> {
        match &mut self.parser {
            Some(parser) => parser.prepare().map(|_| ()),
            None => Ok(()),
        }
    }

    /// The constraint's mask at this step, once prepared.
    pub(super) fn mask(&self) -> Option<&Mask> {
        self.parser.as_ref().and_then(Parser::mask)
    }

    /// Whether the constraint is complete and allows nothing more: the sample ends.
    pub fn constraint_finished(&self) -> bool {
        self.parser.as_ref().is_some_and(Parser::is_finished)
    }

    /// How many of `path`'s tokens the constraint allows in a row (all when there is none).
    pub fn constraint_allows(&self, path: &[u32]) -> usize {
        self.parser
            .as_ref()
            .map_or(path.len(), |parser| parser.allowed_prefix(path))
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
        if let Some(parser) = &mut self.parser {
            parser.accept(id);
        }
    }
}
