//! vLLM's per-step pipeline (docs/sampling.md): repetition penalty, temperature, min_p, top_k, top_p,
//! then one inverse-CDF draw over the kept tokens in descending-probability order.
//!
//! Every token is ordered by its processed logit (temperature is monotone, so this is the
//! probability order) with ties to the lower id. All filters keep an upper part of that order,
//! so the kept set is described by its last key and never has to be listed in full: with top_k
//! or top_p only the kept tokens are sorted, and with neither only the prefix the draw reaches.

use super::chain::{self, Cand, Pool, StageTrace, StepInput};
use super::error::SamplingError;
use super::history::SampleState;
use super::logprobs::{
    Normalizer, ScoredToken, log_normalizer, logprob_of, rank, score_token, top_ids,
};
use super::select::{collect_top_k, key_id, order_key};
use super::softmax::{self, LANES, any, sanitize, scaled, sum_exp};
use super::token_lists::TokenLists;
use crate::fast_exp::exp;
use crate::params::{LogprobsMode, ParamError, SamplingParams};
use crate::response::ConstraintStep;

/// Scaled logits (the log of a probability relative to the most likely token) at which the
/// mass pass also sums, so that listing a share of the mass can start near where it ends.
const MASS_LEVELS: [f32; 3] = [-3.0, -7.0, -12.0];

/// Headroom over the needed mass when picking a level, so round-off between the vectorised
/// sums and the listing sums rarely forces a second listing pass.
const LEVEL_MARGIN: f64 = 1.0001;

/// What the sampler reports per token; the UI maps `prob` to a colour.
#[derive(Debug, Clone, PartialEq)]
pub struct SampledToken {
    pub id: u32,
    /// Raw: log_softmax of the model's logits before any processing (vLLM's default).
    pub logprob: f32,
    /// After penalty, temperature and filters, renormalised over the kept tokens; 1 when greedy.
    pub prob: f32,
    /// vLLM's 1-based rank in the raw distribution: how many tokens have a raw logit at least
    /// as large as this one.
    pub rank: u32,
    /// With `logprobs: n` (or `with_alternatives(n)`): the n best tokens by raw logprob (ties
    /// to the lower id), then the chosen token if it is not among them, as vLLM returns them;
    /// empty when neither asks for any.
    pub top: Vec<TopToken>,
    /// Entropy in nats of the raw distribution (the model's own uncertainty at this step).
    pub entropy: f32,
    /// Entropy in nats of the processed distribution the token was drawn from: 0 when one
    /// token is left (greedy).
    pub kept_entropy: f32,
    /// The raw logprob of each watched token (`TokenLists::watched`), in its order.
    pub watched: Vec<f32>,
    /// What the run's constraint (structured outputs) did at this step, if it has one.
    pub constraint: Option<ConstraintStep>,
    /// With [`Sampler::with_traces`]: what each stage that acted did to `top` (the chosen
    /// token among them), as the inspector traces a step.
    pub trace: Option<Vec<StageTrace>>,
    /// The numbers `logprobs_mode` reports for the token.
    pub reported: Reported,
}

/// What a response's `logprobs` and `top_logprobs` say of a drawn token: the numbers
/// `logprobs_mode` names, as vLLM's `logprobs` output holds them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Reported {
    /// The chosen token's number: a logprob or a logit, the model's own or after processing.
    pub value: f32,
    /// The chosen token's probability in the distribution the numbers come from (the
    /// model's, or the processed one): the heatmap's colour for the mode.
    pub prob: f32,
    /// With `logprobs: n`: the n best tokens by the mode's numbers (ties to the lower id), then
    /// the chosen token if it is not among them, each with its number. A processed mode lists
    /// only tokens the filters kept, where vLLM fills up with -inf ones.
    pub top: Vec<(u32, f32)>,
}

/// The number reported for a token the filters removed (-inf): vLLM's server writes -inf as
/// this, and JSON has no -inf.
pub const REMOVED_FLOOR: f32 = -9999.0;

/// A token's logit and logprob in the distribution a mode reports from; `None` when the
/// filters removed it.
type Numbers<'a> = Box<dyn Fn(u32) -> Option<(f32, f32)> + 'a>;

impl Reported {
    /// The report for the chosen `id`: `best` lists tokens best first by the mode's numbers,
    /// `numbers` gives each one's; `n` is `logprobs`.
    fn new(
        id: u32,
        best: impl Iterator<Item = u32>,
        numbers: &Numbers,
        n: Option<u32>,
        mode: LogprobsMode,
    ) -> Self {
        let value = |t: u32| {
            let (logit, logprob) = numbers(t).unwrap_or((f32::NEG_INFINITY, f32::NEG_INFINITY));
            if mode.logits() { logit } else { logprob }.max(REMOVED_FLOOR)
        };
        let top = match n {
            Some(n) => {
                let mut ids: Vec<u32> = best.take(n as usize).collect();
                if !ids.contains(&id) {
                    ids.push(id);
                }
                ids.into_iter().map(|t| (t, value(t))).collect()
            }
            None => Vec::new(),
        };
        Self {
            value: value(id),
            prob: numbers(id).map_or(0.0, |(_, logprob)| logprob.exp()),
            top,
        }
    }
}

/// A token the model could have produced at a generated position.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TopToken {
    pub id: u32,
    pub logprob: f32,
    /// The processed probability; 0 when a filter removed the token (the inspector dims those).
    pub prob: f32,
}

/// A token of the processed distribution.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KeptToken {
    pub id: u32,
    pub prob: f32,
}

/// A token that may be drawn, before renormalisation.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    key: u64,
    weight: f32,
}

/// Which tokens survive a step and what each weighs: a token is kept when its order key is at
/// most `last_kept` and its scaled logit reaches `floor` (min_p); it weighs `exp(scaled)`.
#[derive(Debug, Clone, Copy)]
struct Cut {
    shift: f32,
    inv_temperature: f32,
    floor: f32,
    last_kept: u64,
    /// The total weight of the kept tokens.
    mass: f64,
    /// `Σ weight · s` of the kept tokens when they are unlisted, for their entropy.
    moment: f64,
    /// `None` when `Sampler::candidates` lists every kept token in draw order; otherwise the
    /// kept mass above each of `MASS_LEVELS`, for listing only what a draw needs.
    unlisted: Option<[f64; MASS_LEVELS.len()]>,
}

impl Cut {
    /// Whether the filters kept the token with processed logit `value`.
    fn keeps(&self, value: f32, id: u32) -> bool {
        order_key(value, id) <= self.last_kept
            && scaled(value, self.shift, self.inv_temperature) >= self.floor
    }

    fn weight(&self, value: f32) -> f32 {
        let s = scaled(value, self.shift, self.inv_temperature);
        if s >= self.floor { exp(s) } else { 0.0 }
    }

    /// The processed probability of a token with processed logit `value`.
    fn prob(&self, value: f32, id: u32) -> f32 {
        if order_key(value, id) > self.last_kept {
            return 0.0;
        }
        (f64::from(self.weight(value)) / self.mass) as f32
    }
}

/// vLLM's filters (temperature, min_p, top_k, top_p, or greedy's argmax) run as one cut of
/// the processed logits: a sampler takes it when its chain ends in exactly those steps, so the
/// chain's step list decides the path and the pool chain stays the reference for both.
#[derive(Debug, Clone, Copy)]
struct FusedCut {
    /// How many steps of the chain come before the filters: its logit processors.
    processors: usize,
    greedy: bool,
    inv_temperature: f32,
    top_k: Option<usize>,
    top_p: f32,
    /// ln(min_p): min_p compares probabilities, i.e. scaled logits against this.
    min_p_floor: f32,
}

impl FusedCut {
    fn of(steps: &[chain::Step], params: &SamplingParams) -> Option<Self> {
        let processors = steps.iter().take_while(|s| s.is_processor()).count();
        let greedy = match &steps[processors..] {
            [chain::Step::Greedy] => true,
            filters if filters == chain::VLLM_FILTERS => false,
            _ => return None,
        };
        Some(Self {
            processors,
            greedy,
            inv_temperature: params.temperature.recip(),
            top_k: params.top_k_limit(),
            top_p: params.top_p,
            min_p_floor: if params.min_p > 0.0 {
                params.min_p.ln()
            } else {
                f32::NEG_INFINITY
            },
        })
    }
}

/// The sampling pipeline for one run's params; it owns scratch buffers that grow to the
/// vocabulary once and are reused every step.
#[derive(Debug, Clone)]
pub struct Sampler {
    /// The engine's chain for the params, in its order.
    steps: Vec<chain::Step>,
    /// Where the chain ends in filters that one cut can run (vLLM's), that cut; the steps
    /// before them then run on plain logits. `None` runs the chain on a pool.
    fused: Option<FusedCut>,
    /// How many alternatives each `SampledToken` lists; `None` lists none.
    top_n: Option<u32>,
    /// Each `SampledToken` carries the step's stage trace.
    traces: bool,
    /// The whole params, for the stages of the other engines and the logit processors.
    params: SamplingParams,
    /// What the processors need to know about the vocabulary.
    tokens: TokenLists,
    /// The current step's logits after the logit processors (vLLM).
    work: Vec<f32>,
    keys: Vec<u64>,
    candidates: Vec<Candidate>,
    /// The candidates of the llama.cpp and transformers chains.
    pool: Pool,
    counts: Vec<(u32, u32)>,
}

impl Sampler {
    pub fn new(params: &SamplingParams) -> Result<Self, ParamError> {
        params.validate()?;
        let steps = chain::steps(params);
        Ok(Self {
            fused: FusedCut::of(&steps, params),
            steps,
            top_n: params.logprobs,
            traces: false,
            params: params.clone(),
            tokens: TokenLists::default(),
            work: Vec::new(),
            keys: Vec::new(),
            candidates: Vec::new(),
            pool: Pool::default(),
            counts: Vec::new(),
        })
    }

    /// The model's EOS ids, the bad words and DRY's breakers, as token ids.
    pub fn with_tokens(mut self, mut tokens: TokenLists) -> Self {
        tokens.breakers.sort_unstable();
        self.tokens = tokens;
        self
    }

    /// Lists at least `n` alternatives per token whatever `logprobs` asks, for a UI that
    /// inspects every token; the caller trims them to what the request asked for.
    pub fn with_alternatives(mut self, n: u32) -> Self {
        self.top_n = Some(self.top_n.map_or(n, |asked| asked.max(n)));
        self
    }

    /// Traces every step through the chain (its alternatives, at least as many as
    /// `with_alternatives` lists, and the chosen token): a run recorded for a shared page. It
    /// costs a clone of the sample's state and a second pass of the chain per step.
    pub fn with_traces(mut self, on: bool) -> Self {
        self.traces = on;
        self
    }

    /// Chooses the next token of one sample and records it in the sample's seen set.
    ///
    /// Exactly one uniform is drawn per call, greedy or not, so a sample stays coupled to its
    /// seed when parameters change between runs or mid-way.
    pub fn sample(
        &mut self,
        logits: &[f32],
        state: &mut SampleState,
    ) -> Result<SampledToken, SamplingError> {
        self.sample_normalized(logits, log_normalizer(logits)?, state)
    }

    /// [`Sampler::sample`] given the logits' [`log_normalizer`], kept from before: a replayed
    /// step saves a pass over the vocabulary.
    pub fn sample_normalized(
        &mut self,
        logits: &[f32],
        norm: Normalizer,
        state: &mut SampleState,
    ) -> Result<SampledToken, SamplingError> {
        self.sample_or_force(logits, norm, state, None)
    }

    /// [`Sampler::sample_normalized`], except that a `forced` token (one the user picked for a
    /// branch) is taken in place of the draw. The step runs in full all the same — its uniform
    /// drawn, its filters applied — so the sample's stream stays where a drawn step leaves it,
    /// and the forced token is reported with its own probabilities (0 kept when filtered).
    pub fn sample_or_force(
        &mut self,
        logits: &[f32],
        norm: Normalizer,
        state: &mut SampleState,
        forced: Option<u32>,
    ) -> Result<SampledToken, SamplingError> {
        let before = self.traces.then(|| state.clone());
        let u = state.rng.uniform();
        state.prepare_constraint()?;
        let constraint = state.mask().map(|mask| ConstraintStep {
            refused: mask.refused_mass(logits, norm.log_norm),
            allowed: mask.count,
        });
        // The chosen token, the entropy of what was kept, each token's kept probability, and
        // under a processed `logprobs_mode` its report, from whichever path made the
        // distribution.
        type Prob<'a> = Box<dyn Fn(u32) -> f32 + 'a>;
        let mode = self.params.logprobs_mode;
        let asked = self.params.logprobs;
        let (id, kept_entropy, prob, processed): (u32, f32, Prob, Option<Reported>) =
            if let Some(fused) = self.fused {
                let cut = self.cut(fused, logits, state)?;
                let id = match forced {
                    Some(id) => id,
                    None => self.draw(&cut, u)?,
                };
                let kept = self.kept_entropy(&cut);
                let processed = match mode.processed() {
                    true => {
                        let kept_cut = (!fused.greedy).then_some(&cut);
                        Some(fused_report(
                            &self.work,
                            kept_cut,
                            id,
                            asked,
                            mode,
                            &mut self.keys,
                        )?)
                    }
                    false => None,
                };
                let work = &self.work;
                let prob = Box::new(move |t: u32| cut.prob(work[t as usize], t));
                (id, kept, prob, processed)
            } else {
                let id = self.run_chain(logits, state, u, forced)?;
                let cands = &self.pool.cands;
                let kept = entropy_of(cands.iter().map(|c| f64::from(c.p)));
                let processed = mode
                    .processed()
                    .then(|| pool_report(cands, id, asked, mode));
                let prob = move |t: u32| cands.iter().find(|c| c.id == t).map_or(0.0, |c| c.p);
                (id, kept, Box::new(prob), processed)
            };
        state.accept(id);
        let token = report(
            logits,
            norm,
            id,
            self.top_n,
            &mut self.keys,
            prob,
            &self.tokens.watched,
        );
        let reported = processed.unwrap_or_else(|| {
            let raw = |t: u32| {
                let logit = sanitize(logits[t as usize]);
                Some((logit, logit - norm.log_norm))
            };
            let best = token.top.iter().map(|t| t.id);
            Reported::new(id, best, &(Box::new(raw) as Numbers), asked, mode)
        });
        let token = SampledToken {
            kept_entropy,
            constraint,
            reported,
            ..token
        };
        match before {
            Some(before) => {
                let ids: Vec<u32> = token.top.iter().map(|t| t.id).collect();
                let stages = self.trace(logits, &before, &ids)?;
                Ok(SampledToken {
                    trace: Some(StageTrace::acting(&stages).cloned().collect()),
                    ..token
                })
            }
            None => Ok(token),
        }
    }

    /// The llama.cpp or transformers chain on `logits`; the chosen token (`forced`, if given).
    /// llama.cpp samples before it checks a grammar, and only when the draw breaks it runs the
    /// grammar and the chain again and draws anew.
    fn run_chain(
        &mut self,
        logits: &[f32],
        state: &mut SampleState,
        u: f64,
        forced: Option<u32>,
    ) -> Result<u32, SamplingError> {
        let steps = std::mem::take(&mut self.steps);
        let id = self.run_steps(logits, state, &steps, u, forced);
        self.steps = steps;
        let mut id = id?;
        if forced.is_none() && state.mask().is_some_and(|mask| !mask.allows(id)) {
            let again = state.resample.uniform();
            let steps = chain::grammar_first(&self.params);
            id = self.run_steps(logits, state, &steps, again, None)?;
        }
        chain::learn(state, &self.pool, self.params.adaptive_decay, id);
        Ok(id)
    }

    fn run_steps(
        &mut self,
        logits: &[f32],
        state: &mut SampleState,
        steps: &[chain::Step],
        u: f64,
        forced: Option<u32>,
    ) -> Result<u32, SamplingError> {
        self.pool.reset(logits);
        let input = StepInput {
            state,
            tokens: &self.tokens,
            scratch: &mut self.counts,
        };
        chain::run(&mut self.pool, &self.params, steps, input, u, forced)
            .ok_or(SamplingError::NoCandidates)
    }

    /// What each stage of the engine's chain did to `ids` at this step (the per-stage
    /// inspector): their logits and probabilities after the model and after every stage, in the
    /// order the stages run. `state` is the sample's state before the step.
    pub fn trace(
        &mut self,
        logits: &[f32],
        state: &SampleState,
        ids: &[u32],
    ) -> Result<Vec<StageTrace>, SamplingError> {
        let mut state = state.clone();
        state.prepare_constraint()?;
        self.pool.reset(logits);
        let input = StepInput {
            state: &mut state,
            tokens: &self.tokens,
            scratch: &mut self.counts,
        };
        Ok(chain::trace(&mut self.pool, &self.params, input, ids))
    }

    /// Scores a prompt token against the logits of its position (prompt tokens are scored,
    /// not sampled), with the `top_n` best alternatives by raw logprob.
    pub fn score(
        &mut self,
        logits: &[f32],
        token: u32,
        top_n: u32,
    ) -> Result<ScoredToken, SamplingError> {
        score_token(logits, token, top_n, &mut self.keys)
    }

    /// The processed distribution (steps 1-5, renormalised) in draw order. Without top_k or
    /// top_p this sorts every token, so it is meant for tests and inspection, not every step.
    pub fn distribution(
        &mut self,
        logits: &[f32],
        state: &SampleState,
    ) -> Result<Vec<KeptToken>, SamplingError> {
        let mut state = state.clone();
        state.prepare_constraint()?;
        let Some(fused) = self.fused else {
            self.run_chain(logits, &mut state, 0.0, None)?;
            return Ok(self
                .pool
                .cands
                .iter()
                .filter(|c| c.p > 0.0)
                .map(|c| KeptToken {
                    id: c.id,
                    prob: c.p,
                })
                .collect());
        };
        let cut = self.cut(fused, logits, &state)?;
        if cut.unlisted.is_some() {
            self.list(&cut, cut.floor);
            self.candidates.sort_unstable_by_key(|c| c.key);
        }
        Ok(self
            .candidates
            .iter()
            .map(|c| KeptToken {
                id: key_id(c.key),
                prob: (f64::from(c.weight) / cut.mass) as f32,
            })
            .collect())
    }

    /// The chain's logit processors, the steps before the fused filters, on plain logits.
    fn process(&mut self, fused: FusedCut, state: &SampleState) {
        let work = self.work.as_mut_slice();
        for &step in &self.steps[..fused.processors] {
            step.adjust(work, &self.params, state, &self.tokens, &mut self.counts);
        }
    }

    /// Decides which tokens are kept, listing them when a filter bounds them.
    fn cut(
        &mut self,
        fused: FusedCut,
        logits: &[f32],
        state: &SampleState,
    ) -> Result<Cut, SamplingError> {
        self.work.clear();
        self.work.extend(logits.iter().map(|&x| sanitize(x)));
        self.process(fused, state);
        let shift = softmax::max(&self.work);
        if shift == f32::NEG_INFINITY {
            return Err(SamplingError::NoCandidates);
        }
        if fused.greedy {
            return self.cut_greedy(shift);
        }
        let mut cut = Cut {
            shift,
            inv_temperature: fused.inv_temperature,
            floor: fused.min_p_floor,
            last_kept: u64::MAX,
            mass: 0.0,
            moment: 0.0,
            unlisted: None,
        };
        match fused.top_k.filter(|&k| k < self.work.len()) {
            Some(k) => {
                collect_top_k(&self.work, k, &mut self.keys);
                self.candidates.clear();
                for &key in &self.keys {
                    let weight = cut.weight(self.work[key_id(key) as usize]);
                    if weight > 0.0 {
                        self.candidates.push(Candidate { key, weight });
                    }
                }
                self.candidates.sort_unstable_by_key(|c| c.key);
                let total = self.candidates.iter().map(|c| f64::from(c.weight)).sum();
                self.keep_nucleus(fused.top_p, &mut cut, total)?;
            }
            None => {
                let sums = sum_exp(
                    &self.work,
                    shift,
                    cut.inv_temperature,
                    cut.floor,
                    MASS_LEVELS,
                );
                if fused.top_p < 1.0 {
                    let needed = f64::from(fused.top_p) * sums.total;
                    self.list_prefix(&cut, &sums.above, sums.total, needed);
                    self.keep_nucleus(fused.top_p, &mut cut, sums.total)?;
                } else {
                    cut.mass = sums.total;
                    cut.moment = sums.moment;
                    cut.unlisted = Some(sums.above);
                }
            }
        }
        Ok(cut)
    }

    /// The entropy of what `cut` keeps: over the listed candidates, or (nothing bounding the
    /// kept set) from the sums of the pass that weighed the vocabulary.
    fn kept_entropy(&self, cut: &Cut) -> f32 {
        if cut.unlisted.is_some() {
            return softmax::entropy(cut.mass, cut.moment) as f32;
        }
        entropy_of(
            self.candidates
                .iter()
                .map(|c| f64::from(c.weight) / cut.mass),
        )
    }

    /// Argmax with ties to the lowest id; penalties still apply, temperature and filters don't.
    fn cut_greedy(&mut self, shift: f32) -> Result<Cut, SamplingError> {
        let id = first_index_of(&self.work, shift).ok_or(SamplingError::NoCandidates)?;
        let key = order_key(shift, id);
        self.candidates.clear();
        self.candidates.push(Candidate { key, weight: 1.0 });
        Ok(Cut {
            shift,
            inv_temperature: 1.0,
            floor: 0.0,
            last_kept: key,
            mass: 1.0,
            moment: 0.0,
            unlisted: None,
        })
    }

    /// Step 5: keeps the shortest listed prefix holding `top_p` of `total`, at least one token.
    fn keep_nucleus(&mut self, top_p: f32, cut: &mut Cut, total: f64) -> Result<(), SamplingError> {
        if top_p < 1.0 {
            let target = f64::from(top_p) * total;
            let mut mass = 0.0;
            if let Some(end) = self.candidates.iter().position(|c| {
                mass += f64::from(c.weight);
                mass >= target
            }) {
                self.candidates.truncate(end + 1);
            }
        }
        let last = self.candidates.last().ok_or(SamplingError::NoCandidates)?;
        cut.last_kept = last.key;
        cut.mass = self.candidates.iter().map(|c| f64::from(c.weight)).sum();
        Ok(())
    }

    /// Lists, sorted in draw order, a prefix of the kept tokens holding more than `needed` of
    /// `total`: from the highest mass level that holds it, else from a bar below which the
    /// vocabulary cannot hold `total - needed`, else everything (round-off).
    fn list_prefix(&mut self, cut: &Cut, above: &[f64], total: f64, needed: f64) {
        let bar = MASS_LEVELS
            .iter()
            .zip(above)
            .find(|&(_, &mass)| mass > needed * LEVEL_MARGIN)
            .map_or_else(
                || sufficient_bar(total, needed, self.work.len()),
                |(&l, _)| l,
            )
            .max(cut.floor);
        if self.list(cut, bar) <= needed && bar > cut.floor {
            self.list(cut, cut.floor);
        }
        self.candidates.sort_unstable_by_key(|c| c.key);
    }

    /// Lists, unsorted, every token whose scaled logit reaches `bar` (>= the floor) and whose
    /// weight is not 0; returns their mass.
    fn list(&mut self, cut: &Cut, bar: f32) -> f64 {
        self.candidates.clear();
        let reaches = |value| scaled(value, cut.shift, cut.inv_temperature) >= bar;
        let mut mass = 0.0;
        for (index, chunk) in self.work.chunks(LANES).enumerate() {
            if !any(chunk, reaches) {
                continue;
            }
            for (offset, &value) in chunk.iter().enumerate() {
                let s = scaled(value, cut.shift, cut.inv_temperature);
                let weight = exp(s);
                if s >= bar && weight > 0.0 {
                    self.candidates.push(Candidate {
                        key: order_key(value, (index * LANES + offset) as u32),
                        weight,
                    });
                    mass += f64::from(weight);
                }
            }
        }
        mass
    }

    /// Step 6: inverse CDF at `u` over the kept tokens in draw order.
    fn draw(&mut self, cut: &Cut, u: f64) -> Result<u32, SamplingError> {
        let target = u * cut.mass;
        if let Some(above) = cut.unlisted {
            self.list_prefix(cut, &above, cut.mass, target);
        }
        let mut mass = 0.0;
        let crossing = self.candidates.iter().find(|c| {
            mass += f64::from(c.weight);
            mass > target
        });
        // Only round-off misses the crossing (u < 1): the last kept token is then the answer.
        crossing
            .or(self.candidates.last())
            .map(|c| key_id(c.key))
            .ok_or(SamplingError::NoCandidates)
    }
}

/// The report of a drawn token `id`: raw logprob and rank from `logits`, its processed
/// probability and its `top_n` alternatives' from `prob`, whichever path made the distribution;
/// the raw entropy and the watched tokens' logprobs (the kept entropy is the caller's).
fn report(
    logits: &[f32],
    norm: Normalizer,
    id: u32,
    top_n: Option<u32>,
    keys: &mut Vec<u64>,
    prob: impl Fn(u32) -> f32,
    watched: &[u32],
) -> SampledToken {
    let log_norm = norm.log_norm;
    let raw = |id: u32| sanitize(logits[id as usize]);
    let top = match top_n {
        Some(n) => top_ids(logits, n, id, keys)
            .map(|alt| TopToken {
                id: alt,
                logprob: raw(alt) - log_norm,
                prob: prob(alt),
            })
            .collect(),
        None => Vec::new(),
    };
    SampledToken {
        id,
        logprob: raw(id) - log_norm,
        prob: prob(id),
        rank: rank(logits, raw(id)),
        top,
        entropy: norm.entropy,
        // The caller knows the processed distribution and the constraint.
        kept_entropy: 0.0,
        constraint: None,
        trace: None,
        // The caller knows what `logprobs_mode` reports.
        reported: Reported::default(),
        watched: watched
            .iter()
            .map(|&w| logprob_of(logits, log_norm, w))
            .collect(),
    }
}

/// A processed mode's report from the fused path: `work` holds the logits after the
/// processors, `cut` what the filters kept of them; `None` for greedy, which vLLM reports
/// unfiltered and at temperature 1.
fn fused_report(
    work: &[f32],
    cut: Option<&Cut>,
    id: u32,
    asked: Option<u32>,
    mode: LogprobsMode,
    keys: &mut Vec<u64>,
) -> Result<Reported, SamplingError> {
    let numbers: Numbers = match cut {
        Some(cut) => {
            let log_mass = cut.mass.ln() as f32;
            Box::new(move |t: u32| {
                let value = work[t as usize];
                cut.keeps(value, t).then(|| {
                    let s = scaled(value, cut.shift, cut.inv_temperature);
                    (value * cut.inv_temperature, s - log_mass)
                })
            })
        }
        None => {
            let log_norm = log_normalizer(work)?.log_norm;
            Box::new(move |t: u32| {
                let value = work[t as usize];
                (value > f32::NEG_INFINITY).then_some((value, value - log_norm))
            })
        }
    };
    // The filters keep an upper part of the processed order, so the best kept tokens are the
    // kept ones among the best of all.
    collect_top_k(work, asked.unwrap_or(0) as usize, keys);
    keys.sort_unstable();
    let best = keys
        .iter()
        .map(|&key| key_id(key))
        .filter(|&t| numbers(t).is_some());
    Ok(Reported::new(id, best, &numbers, asked, mode))
}

/// A processed mode's report from the llama.cpp or transformers chain: its candidates, in
/// draw order once the chain has run.
fn pool_report(cands: &[Cand], id: u32, asked: Option<u32>, mode: LogprobsMode) -> Reported {
    let kept = || cands.iter().filter(|c| c.logit > f32::NEG_INFINITY);
    let max = kept().map(|c| c.logit).fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = kept().map(|c| f64::from(c.logit - max).exp()).sum();
    let log_norm = max + sum.ln() as f32;
    let numbers: Numbers = Box::new(move |t: u32| {
        kept()
            .find(|c| c.id == t)
            .map(|c| (c.logit, c.logit - log_norm))
    });
    Reported::new(id, kept().map(|c| c.id), &numbers, asked, mode)
}

/// `-Σ p ln p` over probabilities that sum to one (zeros count nothing).
fn entropy_of(probs: impl Iterator<Item = f64>) -> f32 {
    let h: f64 = probs.filter(|&p| p > 0.0).map(|p| -p * p.ln()).sum();
    h.max(0.0) as f32
}

/// The lowest id holding `target`, testing `LANES` values at a time.
fn first_index_of(values: &[f32], target: f32) -> Option<u32> {
    values
        .chunks(LANES)
        .enumerate()
        .find(|(_, chunk)| any(chunk, |value| value == target))
        .and_then(|(index, chunk)| {
            let offset = chunk.iter().position(|&value| value == target)?;
            Some((index * LANES + offset) as u32)
        })
}

/// A scaled-logit bar that keeps more than `needed`: each of the `n` tokens below it weighs
/// less than e^bar, so together they hold less than `total - needed`.
fn sufficient_bar(total: f64, needed: f64, n: usize) -> f32 {
    let spare = total - needed;
    if spare > 0.0 {
        (spare / n as f64).ln() as f32
    } else {
        f32::NEG_INFINITY
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// u = 1 cannot come from the rng, but it is where round-off pushes a target at most: the
    /// draw must then still return the last kept token, in every listing mode.
    #[test]
    fn u_at_the_edges_picks_the_first_and_last_kept_tokens() {
        let logits = [0.3, 1.0, 0.1, 0.7, -0.2];
        let state = SampleState::new(0, 0, &[], logits.len());
        let cases = [
            (SamplingParams::default(), 4),
            (
                SamplingParams {
                    top_k: 3,
                    ..SamplingParams::default()
                },
                0,
            ),
            (
                SamplingParams {
                    top_p: 0.5,
                    ..SamplingParams::default()
                },
                3,
            ),
        ];
        for (params, last) in cases {
            let mut sampler = Sampler::new(&params).unwrap();
            for (u, want) in [(0.0, 1), (1.0 - f64::EPSILON / 2.0, last), (1.0, last)] {
                let fused = sampler.fused.expect("vLLM's chain ends in its filters");
                let cut = sampler.cut(fused, &logits, &state).unwrap();
                assert_eq!(sampler.draw(&cut, u), Ok(want), "u = {u}, {params:?}");
            }
        }
    }

    /// Token `forced` (or the draw) of one step on `logits` under `yaml`, the prompt `[1]`.
    fn sampled(yaml: &str, logits: &[f32], forced: Option<u32>) -> SampledToken {
        let params = SamplingParams::from_yaml(yaml).unwrap();
        let mut sampler = Sampler::new(&params).unwrap();
        let mut state = SampleState::new(7, 0, &[1], logits.len());
        let norm = log_normalizer(logits).unwrap();
        sampler
            .sample_or_force(logits, norm, &mut state, forced)
            .unwrap()
    }

    fn log_softmax(xs: &[f32]) -> Vec<f32> {
        let max = xs.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let sum: f32 = xs.iter().map(|&x| (x - max).exp()).sum();
        xs.iter().map(|&x| x - max - sum.ln()).collect()
    }

    fn assert_top(reported: &Reported, want: &[(u32, f32)]) {
        let ids: Vec<u32> = reported.top.iter().map(|t| t.0).collect();
        let want_ids: Vec<u32> = want.iter().map(|t| t.0).collect();
        assert_eq!(ids, want_ids, "{reported:?}");
        for (got, want) in reported.top.iter().zip(want) {
            assert!((got.1 - want.1).abs() < 1e-5, "{got:?} vs {want:?}");
        }
    }

    const LOGITS: [f32; 4] = [1.0, 3.0, 2.0, 0.5];

    #[test]
    fn raw_modes_report_the_models_numbers_the_best_n_then_the_chosen_token() {
        let lp = log_softmax(&LOGITS);
        let token = sampled("logprobs: 2\ntemperature: 0", &LOGITS, Some(3));
        assert_eq!(token.reported.value, token.logprob);
        assert_top(&token.reported, &[(1, lp[1]), (2, lp[2]), (3, lp[3])]);
        let token = sampled("logprobs: 0\ntemperature: 0", &LOGITS, None);
        assert_top(&token.reported, &[(1, lp[1])]);
        let yaml = "logprobs: 1\nlogprobs_mode: raw_logits\ntemperature: 0";
        let token = sampled(yaml, &LOGITS, None);
        assert_eq!(token.reported.value, 3.0);
        assert!((token.reported.prob - lp[1].exp()).abs() < 1e-6);
        assert_top(&token.reported, &[(1, 3.0)]);
        assert!(
            sampled("temperature: 0", &LOGITS, None)
                .reported
                .top
                .is_empty()
        );
    }

    /// Processed: after temperature (here 0.5) and filters (top_k 2 keeps ids 1 and 2), so
    /// the three asked for are the two kept; logits are the scaled ones.
    #[test]
    fn processed_modes_report_the_distribution_the_token_was_drawn_from() {
        let kept = log_softmax(&[6.0, 4.0]);
        let base = "logprobs: 3\ntemperature: 0.5\ntop_k: 2";
        let token = sampled(
            &format!("{base}\nlogprobs_mode: processed_logprobs"),
            &LOGITS,
            None,
        );
        assert!((token.reported.value - token.prob.ln()).abs() < 1e-5);
        assert!((token.reported.prob - token.prob).abs() < 1e-6);
        assert_top(&token.reported, &[(1, kept[0]), (2, kept[1])]);
        let token = sampled(
            &format!("{base}\nlogprobs_mode: processed_logits"),
            &LOGITS,
            None,
        );
        assert_top(&token.reported, &[(1, 6.0), (2, 4.0)]);
        // A branch forced a token the filters removed: JSON's floor for -inf, and last.
        let yaml = format!("{base}\nlogprobs_mode: processed_logprobs");
        let token = sampled(&yaml, &LOGITS, Some(0));
        assert_eq!(
            (token.reported.value, token.reported.prob),
            (REMOVED_FLOOR, 0.0)
        );
        assert_top(
            &token.reported,
            &[(1, kept[0]), (2, kept[1]), (0, REMOVED_FLOOR)],
        );
    }

    /// vLLM's greedy reports its processed numbers after the logit processors and penalties
    /// but before temperature and filters: the repetition penalty halves the prompt's id 1.
    #[test]
    fn processed_greedy_is_the_penalised_distribution_unfiltered() {
        let yaml = "logprobs: 4\nlogprobs_mode: processed_logprobs\ntemperature: 0\n\
                    repetition_penalty: 2.0\ntop_k: 1";
        let token = sampled(yaml, &LOGITS, None);
        let penalised = log_softmax(&[1.0, 1.5, 2.0, 0.5]);
        assert_eq!(token.id, 2);
        assert_eq!(token.prob, 1.0, "greedy keeps one token");
        assert!((token.reported.value - penalised[2]).abs() < 1e-6);
        let want: Vec<(u32, f32)> = [2, 1, 0, 3].map(|id| (id, penalised[id as usize])).into();
        assert_top(&token.reported, &want);
    }

    #[test]
    fn the_other_engines_chains_report_their_own_processed_distribution() {
        let yaml = "engine: llama.cpp\nlogprobs: 5\nlogprobs_mode: processed_logprobs\n\
                    top_k: 2\ntemperature: 2.0";
        let token = sampled(yaml, &LOGITS, None);
        let kept = log_softmax(&[1.5, 1.0]);
        assert!((token.reported.value - token.prob.ln()).abs() < 1e-5);
        assert_top(&token.reported, &[(1, kept[0]), (2, kept[1])]);
    }

    #[test]
    fn the_chain_step_list_decides_the_fused_path() {
        let fused = |yaml: &str| {
            let params = SamplingParams::from_yaml(yaml).unwrap();
            Sampler::new(&params)
                .unwrap()
                .fused
                .map(|f| (f.processors, f.greedy))
        };
        assert_eq!(fused("engine: vllm"), Some((6, false)));
        assert_eq!(fused("engine: vllm\ntemperature: 0"), Some((6, true)));
        // transformers' greedy argmax follows its own processors, in its own order.
        assert_eq!(
            fused("engine: transformers\ntemperature: 0"),
            Some((5, true))
        );
        assert_eq!(fused("engine: transformers"), None);
        assert_eq!(fused("engine: llama.cpp"), None);
        assert_eq!(fused("engine: llama.cpp\ntemperature: 0"), None);
    }
}
