//! The per-step sampling pipeline (docs/sampling.md), from logits to a token and from tokens to
//! text and a stop decision.
//!
//! A [`Sampler`] is built once per run from the params; each sample owns a [`SampleState`]
//! (its seeded random stream and the tokens seen so far). Per step, `Sampler::sample` turns the
//! model's logits into a [`SampledToken`]: the chosen id with its raw logprob, processed
//! probability, rank and the top alternatives; `Sampler::score` scores prompt tokens. The
//! [`detokenizer`] turns ids into text as it completes, and the [`stop`] matcher decides what
//! may be shown and when a sample ends.

pub mod detokenizer;
pub mod stop;

mod adjust;
mod chain;
mod constraint;
mod error;
mod history;
mod logprobs;
mod penalty;
mod rng;
mod sampler;
mod select;
mod softmax;
mod token_lists;

pub use chain::{StageTrace, order_as_llama_cpp_stages, stage_names};
pub use constraint::{Constraint, ConstraintError, Vocabulary, check as check_constraint};
pub use error::SamplingError;
pub use history::SampleState;
pub use logprobs::{Normalizer, ScoredToken, TokenLogprob, log_normalizer, logprob_of};
pub use rng::{SampleRng, sample_seed};
pub use sampler::{KeptToken, Reported, SampledToken, Sampler, TopToken};
pub use token_lists::TokenLists;
