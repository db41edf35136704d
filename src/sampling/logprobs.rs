//! Raw log-probabilities: log_softmax of the model's unprocessed logits (vLLM's default), for
//! generated tokens and for prompt tokens, which are scored rather than sampled.

use super::error::SamplingError;
use super::select::{collect_top_k, key_id};
use super::softmax::{log_sum_exp_and_entropy, sanitize};

/// A token and its raw logprob.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenLogprob {
    pub id: u32,
    pub logprob: f32,
}

/// How likely the model found a given token at one position (prompt_logprobs).
#[derive(Debug, Clone, PartialEq)]
pub struct ScoredToken {
    pub id: u32,
    pub logprob: f32,
    /// vLLM's 1-based rank: how many tokens have a raw logit at least as large as this one.
    pub rank: u32,
    /// The n best tokens by raw logprob (ties to the lower id), then this token if it is not
    /// among them, as vLLM returns them.
    pub top: Vec<TokenLogprob>,
}

pub(super) fn score_token(
    logits: &[f32],
    token: u32,
    top_n: u32,
    keys: &mut Vec<u64>,
) -> Result<ScoredToken, SamplingError> {
    let value =
        logits
            .get(token as usize)
            .map(|&x| sanitize(x))
            .ok_or(SamplingError::TokenOutOfRange {
                token,
                vocab: logits.len(),
            })?;
    let log_norm = log_normalizer(logits)?.log_norm;
    let top = top_ids(logits, top_n, token, keys)
        .map(|id| TokenLogprob {
            id,
            logprob: sanitize(logits[id as usize]) - log_norm,
        })
        .collect();
    Ok(ScoredToken {
        id: token,
        logprob: value - log_norm,
        rank: rank(logits, value),
        top,
    })
}

/// The raw logprob of `id` in `logits` (normalised by `log_norm`); -inf for an id the row
/// does not hold.
pub fn logprob_of(logits: &[f32], log_norm: f32, id: u32) -> f32 {
    logits
        .get(id as usize)
        .map_or(f32::NEG_INFINITY, |&x| sanitize(x) - log_norm)
}

/// A row of logits' log_softmax normaliser and the entropy (nats) of its distribution, which
/// come from one pass over the vocabulary.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Normalizer {
    pub log_norm: f32,
    pub entropy: f32,
}

/// The row's [`Normalizer`], or an error when no logit is usable.
pub fn log_normalizer(logits: &[f32]) -> Result<Normalizer, SamplingError> {
    let (log_norm, entropy) = log_sum_exp_and_entropy(logits);
    if log_norm == f32::NEG_INFINITY {
        Err(SamplingError::NoCandidates)
    } else {
        Ok(Normalizer {
            log_norm,
            entropy: entropy as f32,
        })
    }
}

/// vLLM counts ties against the token, so two equally likely best tokens both have rank 2.
pub(super) fn rank(logits: &[f32], value: f32) -> u32 {
    logits
        .iter()
        .map(|&x| u32::from(sanitize(x) >= value))
        .sum()
}

/// Ids of the `n` best raw logits (ties to the lower id), then `token` if it is not among them.
pub(super) fn top_ids<'a>(
    logits: &[f32],
    n: u32,
    token: u32,
    keys: &'a mut Vec<u64>,
) -> impl Iterator<Item = u32> + 'a {
    let n = n as usize;
    collect_top_k(logits, n, keys);
    keys.sort_unstable();
    keys.truncate(n);
    let listed = keys.iter().any(|&key| key_id(key) == token);
    keys.iter()
        .map(|&key| key_id(key))
        .chain((!listed).then_some(token))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn score(logits: &[f32], token: u32, top_n: u32) -> Result<ScoredToken, SamplingError> {
        score_token(logits, token, top_n, &mut Vec::new())
    }

    #[test]
    fn scores_match_log_softmax() {
        let logits = [1.0f32, 3.0, 2.0, 3.0];
        let norm = logits.iter().map(|&x| f64::from(x).exp()).sum::<f64>().ln();
        let scored = score(&logits, 2, 2).unwrap();
        assert!((f64::from(scored.logprob) - (2.0 - norm)).abs() < 1e-6);
        assert_eq!(scored.rank, 3);
        let ids: Vec<u32> = scored.top.iter().map(|t| t.id).collect();
        assert_eq!(ids, [1, 3, 2]);
        assert!((f64::from(scored.top[0].logprob) - (3.0 - norm)).abs() < 1e-6);
    }

    #[test]
    fn zero_alternatives_lists_the_token_alone() {
        let scored = score(&[0.0, 1.0], 0, 0).unwrap();
        assert_eq!(scored.top.len(), 1);
        assert_eq!(scored.top[0].id, 0);
    }

    #[test]
    fn bad_inputs_are_errors() {
        assert_eq!(
            score(&[0.0], 5, 1),
            Err(SamplingError::TokenOutOfRange { token: 5, vocab: 1 })
        );
        assert_eq!(
            score(&[f32::NAN, f32::NEG_INFINITY], 0, 1),
            Err(SamplingError::NoCandidates)
        );
        let masked = score(&[f32::NAN, 0.0], 0, 1).unwrap();
        assert_eq!(masked.logprob, f32::NEG_INFINITY);
        assert_eq!(masked.rank, 2);
    }
}
