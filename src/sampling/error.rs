//! What can go wrong in a sampling step: only the model's output can be unusable.

/// A step that cannot produce a token; the engine ends that sample with reason `error`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SamplingError {
    #[error("every logit is -inf or NaN, so no token can be chosen (the model output is broken)")]
    NoCandidates,
    #[error("token id {token} is outside the model's vocabulary of {vocab} tokens")]
    TokenOutOfRange { token: u32, vocab: usize },
    #[error(transparent)]
    Constraint(#[from] super::constraint::ConstraintError),
}
