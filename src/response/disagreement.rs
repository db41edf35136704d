//! Where another model disagrees with a sample token by token: the token's raw logprob and rank
//! under that model, and the KL divergence of the two raw distributions at each step.
//!
//! Figures that cannot be had are null with the reason beside them, never an approximation:
//! with another vocabulary the ids mean other tokens (ranks and logprobs are per id, and KL
//! needs one shared support), and KL also needs the sampling model's own distributions, which
//! a served model does not give.

use super::Trajectory;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One sample's tokens as another model sees them, aligned with the sample's `token_ids`.
/// With another vocabulary the figures are those of byte spans the two tokenizations share
/// (see [`super::alignment`]), and null where a token has none.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerToken {
    /// The other model's raw logprob of each token; with another vocabulary, of the bytes of
    /// the `covers` tokens that end with it.
    pub logprobs: Option<Vec<Option<f32>>>,
    /// Each token's rank in the other model's raw distribution: 1 is its most likely token;
    /// tokens of equal logit rank by id, the lower first (as greedy decoding breaks ties).
    /// With another vocabulary only where the token is exactly one of the other model's.
    pub ranks: Option<Vec<Option<u32>>>,
    /// KL(sampling model ‖ other model) of the two raw distributions at each step, in nats.
    pub kl: Option<Vec<f64>>,
    /// With another vocabulary: how many of the sample's tokens each logprob is of, this one
    /// and those before it (1 where the token is a span of its own); 0 where it has none.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub covers: Option<Vec<u32>>,
    /// Why a field above, or a figure in it, is null.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub null_reason: Option<String>,
}

impl PerToken {
    /// Nothing per token, for `reason`.
    pub fn unavailable(reason: impl Into<String>) -> Self {
        Self {
            null_reason: Some(reason.into()),
            ..Self::default()
        }
    }
}

impl super::SampleResponse {
    /// Files `score` under its sample (one per scoring model, the newest), and brings the
    /// run's mean KL up to date.
    pub fn add_cross_score(&mut self, score: super::CrossScore) {
        let Some(trajectory) = self.trajectories.get_mut(score.sample as usize) else {
            return;
        };
        let scores = trajectory.cross_scores.get_or_insert_with(Vec::new);
        scores.retain(|s| s.model != score.model);
        scores.push(score);
        let mean = mean_kl(&self.trajectories);
        if let Some(stats) = &mut self.stats {
            stats.mean_kl = mean;
        }
    }
}

/// Per other model, the mean per-token KL over the run's own samples (branches left out);
/// models whose KL is unavailable are absent, and `None` when none has one.
pub fn mean_kl(trajectories: &[Trajectory]) -> Option<BTreeMap<String, f64>> {
    let mut sums: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    let scores = trajectories
        .iter()
        .filter(|t| t.branch.is_none())
        .flat_map(|t| t.cross_scores.iter().flatten());
    for score in scores {
        if let Some(kl) = score.per_token.as_ref().and_then(|p| p.kl.as_ref()) {
            let (sum, n) = sums.entry(score.model.clone()).or_default();
            *sum += kl.iter().sum::<f64>();
            *n += kl.len();
        }
    }
    let means: BTreeMap<String, f64> = sums
        .into_iter()
        .filter(|(_, (_, n))| *n > 0)
        .map(|(model, (sum, n))| (model, sum / n as f64))
        .collect();
    (!means.is_empty()).then_some(means)
}

/// KL(A ‖ B) in nats of the distributions whose raw logits are `a` and `b` (one vocabulary),
/// summed in f64 over every token: `Σ p_A (log p_A − log p_B)`.
pub fn kl_divergence(a: &[f32], b: &[f32]) -> f64 {
    let (norm_a, norm_b) = (log_sum_exp(a), log_sum_exp(b));
    a.iter()
        .zip(b)
        .map(|(&la, &lb)| {
            let log_pa = f64::from(la) - norm_a;
            let p = log_pa.exp();
            // A token A never picks adds nothing, whatever B thinks of it (0 · log 0 = 0).
            if p == 0.0 {
                0.0
            } else {
                p * (log_pa - (f64::from(lb) - norm_b))
            }
        })
        .sum::<f64>()
        // Rounding can leave a hair below zero for equal distributions.
        .max(0.0)
}

/// The rank of `token` among `logits`: 1 + the tokens above it, counting equal logits of lower
/// ids as above; `None` for an id outside the vocabulary.
pub fn rank_of(logits: &[f32], token: u32) -> Option<u32> {
    let own = *logits.get(token as usize)?;
    let above = logits
        .iter()
        .enumerate()
        .filter(|&(id, &l)| l > own || (l == own && id < token as usize))
        .count();
    Some(above as u32 + 1)
}

fn log_sum_exp(logits: &[f32]) -> f64 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let max = f64::from(max);
    let sum: f64 = logits.iter().map(|&l| (f64::from(l) - max).exp()).sum();
    max + sum.ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kl_of_a_distribution_with_itself_is_zero_and_otherwise_positive() {
        let a = [1.0, 2.0, 0.5, -3.0];
        assert_eq!(kl_divergence(&a, &a), 0.0);
        // Shifting every logit changes nothing.
        let shifted: Vec<f32> = a.iter().map(|l| l + 7.0).collect();
        assert!(kl_divergence(&a, &shifted) < 1e-12);
        // Two tokens: p = (e/(1+e), 1/(1+e)) against (1/2, 1/2).
        let p = std::f64::consts::E / (1.0 + std::f64::consts::E);
        let expected = p * (2.0 * p).ln() + (1.0 - p) * (2.0 * (1.0 - p)).ln();
        assert!((kl_divergence(&[1.0, 0.0], &[0.0, 0.0]) - expected).abs() < 1e-9);
    }

    #[test]
    fn ranks_count_the_tokens_above_and_break_ties_by_lower_id() {
        let logits = [0.5, 2.0, 0.5, 3.0];
        assert_eq!(rank_of(&logits, 3), Some(1));
        assert_eq!(rank_of(&logits, 1), Some(2));
        assert_eq!(rank_of(&logits, 0), Some(3));
        assert_eq!(rank_of(&logits, 2), Some(4));
        assert_eq!(rank_of(&logits, 4), None);
    }
}
