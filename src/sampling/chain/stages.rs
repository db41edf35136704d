//! Each filter and warper stage as its engine's source defines it, on a [`Pool`].

use super::super::rng::SampleRng;
use super::pool::{Cand, Pool};
use crate::params::SamplingParams;

/// Mirostat 1 or 2: truncates by the target surprise `mu` (version 2) or to the top k that the
/// estimated Zipf exponent implies (version 1). The draw then moves `mu` (see `chain::run`).
pub(super) fn mirostat(pool: &mut Pool, params: &SamplingParams, mu: f32) {
    let n_vocab = pool.len() as f32;
    pool.softmax(true);
    if params.mirostat == 1 {
        // Zipf exponent estimated from the 100 most likely tokens.
        let (mut sum_ti_bi, mut sum_ti_sq) = (0.0f32, 0.0f32);
        for i in 0..99.min(pool.cands.len().saturating_sub(1)) {
            let t = ((i + 2) as f32 / (i + 1) as f32).ln();
            let b = (pool.cands[i].p / pool.cands[i + 1].p).ln();
            sum_ti_bi += t * b;
            sum_ti_sq += t * t;
        }
        let s_hat = sum_ti_bi / sum_ti_sq;
        let epsilon = s_hat - 1.0;
        let k = ((epsilon * 2f32.powf(mu)) / (1.0 - n_vocab.powf(-epsilon))).powf(1.0 / s_hat);
        let k = if k.is_finite() { (k as i64).max(1) } else { 1 } as usize;
        pool.truncate(k.min(pool.cands.len()));
    } else {
        let keep = pool
            .cands
            .iter()
            .position(|c| -c.p.log2() > mu)
            .unwrap_or(pool.cands.len())
            .max(1);
        pool.truncate(keep);
    }
    pool.softmax(true);
}

pub(super) fn top_n_sigma(pool: &mut Pool, n: f32) {
    if n <= 0.0 || pool.len() <= 1 {
        return;
    }
    pool.list();
    let finite = pool.cands.iter().filter(|c| c.logit != f32::NEG_INFINITY);
    let (mut max, mut sum, mut count) = (f32::NEG_INFINITY, 0.0f32, 0usize);
    for c in finite.clone() {
        max = max.max(c.logit);
        sum += c.logit;
        count += 1;
    }
    if count == 0 {
        return;
    }
    let mean = sum / count as f32;
    let variance = finite.map(|c| (c.logit - mean).powi(2)).sum::<f32>() / count as f32;
    let bar = max - n * variance.sqrt();
    for c in &mut pool.cands {
        if c.logit < bar {
            c.logit = f32::NEG_INFINITY;
        }
    }
}

/// The entropy of the candidates' probabilities (after a softmax).
fn entropy(pool: &Pool) -> f32 {
    pool.cands
        .iter()
        .filter(|c| c.p > 0.0)
        .map(|c| -c.p * c.p.ln())
        .sum()
}

/// Every candidate with how far its surprise is from the entropy, the most typical first (ties
/// to the lower id): the order both engines' typical sampling walks.
fn by_typicality(pool: &mut Pool) -> Vec<(f32, Cand)> {
    pool.softmax(true);
    let entropy = entropy(pool);
    let mut order: Vec<(f32, Cand)> = pool
        .cands
        .iter()
        .map(|&c| ((-c.p.ln() - entropy).abs(), c))
        .collect();
    order.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.id.cmp(&b.1.id)));
    order
}

pub(super) fn typical_llama(pool: &mut Pool, p: f32, min_keep: usize) {
    if p >= 1.0 {
        return;
    }
    let order = by_typicality(pool);
    let mut cum = 0.0f32;
    let mut last = order.len();
    for (i, (_, c)) in order.iter().enumerate() {
        cum += c.p;
        if cum > p && (min_keep == 0 || i + 1 >= min_keep) {
            last = i + 1;
            break;
        }
    }
    pool.replace(order[..last].iter().map(|&(_, c)| c).collect());
}

pub(super) fn top_p_llama(pool: &mut Pool, p: f32, min_keep: usize) {
    if p >= 1.0 {
        return;
    }
    pool.softmax(true);
    let mut cum = 0.0f32;
    if let Some(i) = pool.cands.iter().enumerate().position(|(i, c)| {
        cum += c.p;
        cum >= p && i + 1 >= min_keep
    }) {
        pool.truncate(i + 1);
    }
}

pub(super) fn min_p(pool: &mut Pool, p: f32, min_keep: usize) {
    if p <= 0.0 || pool.len() == 0 {
        return;
    }
    let ln_p = p.ln();
    if !pool.sorted {
        let logits = || -> Box<dyn Iterator<Item = f32> + '_> {
            if pool.listed {
                Box::new(pool.cands.iter().map(|c| c.logit))
            } else {
                Box::new(pool.dense.iter().copied())
            }
        };
        let max = logits().fold(f32::NEG_INFINITY, f32::max);
        let bar = max + ln_p;
        let kept = logits().filter(|&l| l >= bar).count();
        if kept > 0 && kept >= min_keep {
            if pool.listed {
                pool.retain(|c| c.logit >= bar);
            } else {
                pool.cands = pool
                    .dense
                    .iter()
                    .enumerate()
                    .filter(|&(_, &l)| l >= bar)
                    .map(|(id, &logit)| Cand {
                        id: id as u32,
                        logit,
                        p: 0.0,
                    })
                    .collect();
                pool.listed = true;
                pool.index.clear();
            }
            return;
        }
    }
    pool.list();
    pool.sort();
    let bar = pool.cands[0].logit + ln_p;
    let keep = (1..pool.cands.len())
        .find(|&i| pool.cands[i].logit < bar && i >= min_keep)
        .unwrap_or(pool.cands.len());
    pool.truncate(keep);
}

pub(super) fn xtc(pool: &mut Pool, params: &SamplingParams, min_keep: usize, coin: &mut SampleRng) {
    let (probability, threshold) = (params.xtc_probability, params.xtc_threshold);
    if probability <= 0.0 || threshold > 0.5 || pool.len() < 2 {
        return;
    }
    if coin.uniform() as f32 > probability {
        return;
    }
    pool.softmax(true);
    let last_above = pool.cands.iter().take_while(|c| c.p >= threshold).count();
    let pos_last = last_above.saturating_sub(1);
    if pool.cands.len() - pos_last >= min_keep && pos_last > 0 {
        pool.cands.drain(..pos_last);
        pool.index.clear();
    }
}

/// llama.cpp's temperature stage, dynamic when `dynatemp_range` > 0: the temperature moves
/// within temperature ± range with the normalised entropy to the power `dynatemp_exponent`.
pub(super) fn dynamic_temperature(pool: &mut Pool, params: &SamplingParams) {
    let (t, range) = (params.temperature, params.dynatemp_range);
    if range <= 0.0 {
        return pool.temperature(t);
    }
    if pool.len() <= 1 {
        return;
    }
    let (low, high) = ((t - range).max(0.0), t + range);
    let max_entropy = (pool.len() as f32).ln();
    pool.softmax(true);
    let normalized = entropy(pool) / max_entropy;
    pool.temperature(low + (high - low) * normalized.powf(params.dynatemp_exponent));
}

/// transformers' TypicalLogitsWarper: tokens by |surprise - entropy|, kept while the mass before
/// them is below `mass`, with every token tied with the last one kept.
pub(super) fn typical_transformers(pool: &mut Pool, mass: f32) {
    if mass >= 1.0 {
        return;
    }
    let order = by_typicality(pool);
    let mut cum = 0.0f32;
    let below = order
        .iter()
        .take_while(|(_, c)| {
            cum += c.p;
            cum < mass
        })
        .count();
    let edge = order[below.min(order.len() - 1)].0;
    let first = order[0].1.id;
    pool.replace(
        order
            .into_iter()
            .filter(|&(score, c)| score <= edge || c.id == first)
            .map(|(_, c)| c)
            .collect(),
    );
}

/// How many of the likeliest tokens transformers' top-h weighs (`TopHLogitsWarper.top_n`).
const TOP_H_CANDIDATES: usize = 100;

/// transformers' TopHLogitsWarper: of the 100 likeliest tokens (probabilities taken over those
/// 100), the longest top prefix whose entropy terms -p ln p sum to at most `top_h` times their
/// entropy; the likeliest always stays. Sums in f64, so that the edge is the formula's.
pub(super) fn top_h(pool: &mut Pool, top_h: Option<f32>) {
    let Some(top_h) = top_h else {
        return;
    };
    pool.top_k(TOP_H_CANDIDATES.min(pool.len()));
    let max = pool.cands.first().map_or(0.0, |c| f64::from(c.logit));
    let weights: Vec<f64> = pool
        .cands
        .iter()
        .map(|c| (f64::from(c.logit) - max).exp())
        .collect();
    let total: f64 = weights.iter().sum();
    // A token of probability 0 ends the prefix: transformers' term for it is NaN.
    let terms: Vec<f64> = weights
        .iter()
        .map(|w| w / total)
        .map(|p| if p > 0.0 { -p * p.ln() } else { f64::NAN })
        .collect();
    let bar = terms.iter().filter(|t| !t.is_nan()).sum::<f64>() * f64::from(top_h);
    let mut cum = 0.0;
    let kept = terms
        .iter()
        .take_while(|&&term| {
            cum += term;
            cum <= bar
        })
        .count();
    pool.truncate(kept.max(1));
}

/// transformers' TopPLogitsWarper: from the least likely up, drops tokens while their mass stays
/// within `1 - top_p`; the most likely always stays.
pub(super) fn top_p_transformers(pool: &mut Pool, top_p: f32) {
    if top_p >= 1.0 {
        return;
    }
    pool.softmax(true);
    let mut cum = 0.0f32;
    let dropped = pool
        .cands
        .iter()
        .rev()
        .take_while(|c| {
            cum += c.p;
            cum <= 1.0 - top_p
        })
        .count();
    pool.truncate((pool.cands.len() - dropped).max(1));
}
