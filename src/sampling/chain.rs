//! The llama.cpp and transformers chains: each stage as that engine's source defines it, run in
//! the engine's order on a candidate list, then one inverse-CDF draw.
//!
//! The list starts as the whole vocabulary held densely (index = id); the first stage that cuts
//! it lists the survivors. top_k and min_p cut a dense pool without listing it, so that the common
//! chains touch the vocabulary once or twice per step.

use super::adjust::{self, Logits};
use super::history::SampleState;
use super::rng::SampleRng;
use super::select::{collect_top_k, key_id};
use super::softmax::sanitize;
use crate::params::{SamplingParams, Stage};
use std::collections::HashMap;

/// One candidate: its token, its current logit, and its probability after the last softmax.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Cand {
    pub id: u32,
    pub logit: f32,
    pub p: f32,
}

/// The candidates of one step.
#[derive(Debug, Clone, Default)]
pub(super) struct Pool {
    /// The logit of every token by id, while no stage has listed the candidates.
    dense: Vec<f32>,
    listed: bool,
    pub cands: Vec<Cand>,
    /// Whether `cands` is in descending logit order (ties to the lower id).
    sorted: bool,
    /// The position of each id in `cands`, built when a sparse stage needs it.
    index: HashMap<u32, usize>,
    keys: Vec<u64>,
}

impl Logits for Pool {
    fn adjust(&mut self, id: u32, f: impl FnOnce(f32) -> f32) {
        if !self.listed {
            return self.dense.as_mut_slice().adjust(id, f);
        }
        if self.index.is_empty() {
            self.index = self
                .cands
                .iter()
                .enumerate()
                .map(|(i, c)| (c.id, i))
                .collect();
        }
        if let Some(&i) = self.index.get(&id) {
            self.cands[i].logit = f(self.cands[i].logit);
            self.sorted = false;
        }
    }
}

/// Descending logit, ties to the lower id: the draw order.
fn by_logit(a: &Cand, b: &Cand) -> std::cmp::Ordering {
    b.logit.total_cmp(&a.logit).then(a.id.cmp(&b.id))
}

impl Pool {
    /// Starts a step from the model's logits (NaN read as -inf).
    pub fn reset(&mut self, logits: &[f32]) {
        self.dense.clear();
        self.dense.extend(logits.iter().map(|&x| sanitize(x)));
        self.listed = false;
        self.cands.clear();
        self.sorted = false;
        self.index.clear();
    }

    fn list(&mut self) {
        if !self.listed {
            self.cands = self
                .dense
                .iter()
                .enumerate()
                .map(|(id, &logit)| Cand {
                    id: id as u32,
                    logit,
                    p: 0.0,
                })
                .collect();
            self.listed = true;
        }
    }

    /// Keeps the candidates `keep` says yes to.
    fn retain(&mut self, keep: impl Fn(&Cand) -> bool) {
        self.cands.retain(keep);
        self.index.clear();
    }

    fn truncate(&mut self, n: usize) {
        self.cands.truncate(n);
        self.index.clear();
    }

    fn sort(&mut self) {
        if !self.sorted {
            self.cands.sort_unstable_by(by_logit);
            self.sorted = true;
            self.index.clear();
        }
    }

    /// llama.cpp's softmax: probabilities from the current logits, sorting first if asked.
    fn softmax(&mut self, sort: bool) {
        self.list();
        if sort {
            self.sort();
        }
        let max = self
            .cands
            .iter()
            .map(|c| c.logit)
            .fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0f64;
        for c in &mut self.cands {
            c.p = if max == f32::NEG_INFINITY {
                0.0
            } else {
                (c.logit - max).exp()
            };
            sum += f64::from(c.p);
        }
        if sum > 0.0 {
            for c in &mut self.cands {
                c.p = (f64::from(c.p) / sum) as f32;
            }
        }
    }

    fn len(&self) -> usize {
        if self.listed {
            self.cands.len()
        } else {
            self.dense.len()
        }
    }

    /// Keeps the `k` largest logits (ties at the edge to the lower id); listed and sorted after.
    fn top_k(&mut self, k: usize) {
        self.top_k_ties(k, false);
    }

    /// [`Pool::top_k`], keeping every token tied with the k-th when `ties` says so.
    fn top_k_ties(&mut self, k: usize, ties: bool) {
        if self.listed {
            self.sort();
            match self.cands.get(k.saturating_sub(1)).map(|c| c.logit) {
                Some(edge) if ties => self.retain(|c| c.logit >= edge),
                _ => self.truncate(k),
            }
        } else {
            collect_top_k(&self.dense, k, &mut self.keys);
            self.keys.sort_unstable();
            if !ties {
                self.keys.truncate(k);
            }
            self.cands = self
                .keys
                .iter()
                .map(|&key| Cand {
                    id: key_id(key),
                    logit: self.dense[key_id(key) as usize],
                    p: 0.0,
                })
                .collect();
            self.listed = true;
            self.sorted = true;
            self.index.clear();
        }
    }

    /// The logits divided by `t`; at or below 0 only the (first) largest survives, as llama.cpp's
    /// temperature does it.
    fn temperature(&mut self, t: f32) {
        if !self.listed && t > 0.0 {
            self.dense.iter_mut().for_each(|l| *l /= t);
            return;
        }
        self.list();
        if t <= 0.0 {
            if let Some(best) = self.cands.iter().enumerate().fold(
                None::<(usize, f32)>,
                |best, (i, c)| match best {
                    Some((_, l)) if c.logit <= l => best,
                    _ => Some((i, c.logit)),
                },
            ) {
                for (i, c) in self.cands.iter_mut().enumerate() {
                    if i != best.0 {
                        c.logit = f32::NEG_INFINITY;
                    }
                }
            }
            return;
        }
        for c in &mut self.cands {
            c.logit /= t;
        }
    }

    /// Sorts the survivors into draw order with their final probabilities.
    fn finish(&mut self) {
        self.softmax(true);
    }

    /// The inverse CDF at `u` over the candidates in draw order; `None` when nothing is left.
    fn draw(&self, u: f64) -> Option<usize> {
        let total: f64 = self.cands.iter().map(|c| f64::from(c.p)).sum();
        let target = u * total;
        let mut mass = 0.0;
        let last = self.cands.iter().rposition(|c| c.p > 0.0)?;
        Some(
            self.cands
                .iter()
                .position(|c| {
                    mass += f64::from(c.p);
                    mass > target
                })
                .unwrap_or(last)
                .min(last),
        )
    }
}

/// What a chain step needs besides the params and the logits.
pub(super) struct StepInput<'a> {
    pub state: &'a mut SampleState,
    pub eos_ids: &'a [u32],
    pub bad_words: &'a [Vec<u32>],
    pub breakers: &'a [u32],
    pub scratch: &'a mut Vec<(u32, u32)>,
}

/// llama.cpp's chain: logit bias (and ignore_eos as a ban), then `samplers` (or the default
/// order), or temperature and mirostat; draws with `u` and returns the chosen candidate's
/// position, the pool then holding the final distribution in draw order.
pub(super) fn llama_cpp(
    pool: &mut Pool,
    params: &SamplingParams,
    input: StepInput,
    u: f64,
) -> Option<usize> {
    adjust::logit_bias(pool, params);
    if params.ignore_eos {
        adjust::ban(pool, input.eos_ids.iter().copied());
    }
    let state = input.state;
    if params.mirostat != 0 {
        pool.temperature(params.temperature);
        return mirostat(pool, params, state, u);
    }
    let min_keep = params.min_keep as usize;
    let order = params
        .samplers
        .as_deref()
        .unwrap_or(&Stage::LLAMA_CPP_DEFAULT);
    for &stage in order {
        match stage {
            Stage::Penalties => adjust::penalties(pool, params, state, input.scratch),
            Stage::Dry => adjust::dry(pool, params, state, input.breakers),
            Stage::TopNSigma => top_n_sigma(pool, params.top_n_sigma),
            Stage::TopK => {
                if let Some(k) = params.top_k_limit() {
                    pool.top_k(k.min(pool.len()));
                }
            }
            Stage::TypicalP => typical_llama(pool, params.typical_p, min_keep),
            Stage::TopP => top_p_llama(pool, params.top_p, min_keep),
            Stage::MinP => min_p_llama(pool, params.min_p, min_keep),
            Stage::Xtc => xtc(pool, params, min_keep, &mut state.coin),
            Stage::Temperature => dynamic_temperature(pool, params),
        }
    }
    pool.finish();
    pool.draw(u)
}

/// Mirostat 1 or 2 after temperature: truncates by the target surprise `mu`, draws, and moves
/// `mu` towards tau by the surprise of the drawn token.
fn mirostat(
    pool: &mut Pool,
    params: &SamplingParams,
    state: &mut SampleState,
    u: f64,
) -> Option<usize> {
    let (tau, eta) = (params.mirostat_tau, params.mirostat_eta);
    let mu = *state.mu.get_or_insert(2.0 * tau);
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
    let chosen = pool.draw(u)?;
    let surprise = -pool.cands[chosen].p.log2();
    state.mu = Some(mu - eta * (surprise - tau));
    Some(chosen)
}

fn top_n_sigma(pool: &mut Pool, n: f32) {
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

fn typical_llama(pool: &mut Pool, p: f32, min_keep: usize) {
    if p >= 1.0 {
        return;
    }
    pool.softmax(true);
    let entropy: f32 = pool
        .cands
        .iter()
        .filter(|c| c.p > 0.0)
        .map(|c| -c.p * c.p.ln())
        .sum();
    let mut order: Vec<(f32, Cand)> = pool
        .cands
        .iter()
        .map(|&c| ((-c.p.ln() - entropy).abs(), c))
        .collect();
    order.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut cum = 0.0f32;
    let mut last = order.len();
    for (i, (_, c)) in order.iter().enumerate() {
        cum += c.p;
        if cum > p && (min_keep == 0 || i + 1 >= min_keep) {
            last = i + 1;
            break;
        }
    }
    pool.cands = order[..last].iter().map(|&(_, c)| c).collect();
    pool.sorted = false;
    pool.index.clear();
}

fn top_p_llama(pool: &mut Pool, p: f32, min_keep: usize) {
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

fn min_p_llama(pool: &mut Pool, p: f32, min_keep: usize) {
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

fn xtc(pool: &mut Pool, params: &SamplingParams, min_keep: usize, coin: &mut SampleRng) {
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
fn dynamic_temperature(pool: &mut Pool, params: &SamplingParams) {
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
    let entropy: f32 = pool
        .cands
        .iter()
        .filter(|c| c.p > 0.0)
        .map(|c| -c.p * c.p.ln())
        .sum();
    let normalized = entropy / max_entropy;
    pool.temperature(low + (high - low) * normalized.powf(params.dynatemp_exponent));
}

/// transformers: sequence bias, repetition penalty, bad words and min_new_tokens on the logits,
/// then (sampling) temperature, top_k, top_p, min_p and typical_p, each as its warper does it.
pub(super) fn transformers(
    pool: &mut Pool,
    params: &SamplingParams,
    input: StepInput,
    u: f64,
) -> Option<usize> {
    let state = input.state;
    adjust::logit_bias(pool, params);
    adjust::penalties(pool, params, state, input.scratch);
    adjust::bad_words(pool, input.bad_words, state);
    if (state.output().len() as u64) < u64::from(params.min_tokens) {
        adjust::ban(pool, input.eos_ids.iter().copied());
    }
    if params.is_greedy() {
        pool.top_k(1);
        pool.finish();
        return pool.draw(u);
    }
    pool.temperature(params.temperature);
    if let Some(k) = params.top_k_limit() {
        // Every token tied with the k-th stays, as transformers' `>=` keeps it.
        pool.top_k_ties(k, true);
    }
    if params.top_p < 1.0 {
        // Drops the least likely tokens while their mass stays within 1 - top_p.
        pool.softmax(true);
        let mut cum = 0.0f32;
        let keep = pool.cands.len()
            - pool
                .cands
                .iter()
                .rev()
                .take_while(|c| {
                    cum += c.p;
                    cum <= 1.0 - params.top_p
                })
                .count();
        pool.truncate(keep.max(1));
    }
    if params.min_p > 0.0 {
        pool.softmax(true);
        let bar = params.min_p * pool.cands.first().map_or(0.0, |c| c.p);
        let first = pool.cands.first().map(|c| c.id);
        pool.retain(|c| c.p >= bar || Some(c.id) == first);
    }
    if params.typical_p < 1.0 {
        typical_transformers(pool, params.typical_p);
    }
    pool.finish();
    pool.draw(u)
}

/// transformers' TypicalLogitsWarper: tokens by |surprise - entropy|, kept while the mass before
/// them is below `mass`, with every token tied with the last one kept.
fn typical_transformers(pool: &mut Pool, mass: f32) {
    pool.softmax(true);
    let entropy: f32 = pool
        .cands
        .iter()
        .filter(|c| c.p > 0.0)
        .map(|c| -c.p * c.p.ln())
        .sum();
    let mut order: Vec<(f32, Cand)> = pool
        .cands
        .iter()
        .map(|&c| ((-c.p.ln() - entropy).abs(), c))
        .collect();
    order.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.id.cmp(&b.1.id)));
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
    pool.cands = order
        .into_iter()
        .filter(|&(score, c)| score <= edge || c.id == first)
        .map(|(_, c)| c)
        .collect();
    pool.sorted = false;
    pool.index.clear();
}
