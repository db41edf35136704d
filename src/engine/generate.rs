//! One run: a single prefill of the shared prompt, then N samples decoded as one batch.
//!
//! The model, the sampler and the stop logic stay apart: the backend turns tokens into
//! logits, the sampler turns logits into a token, and each sample's stop matcher decides
//! what text may be shown and when the sample ends.

use super::backend::{Backend, RowSource};
use super::events::{Alternative, Branch, Event, RunId, TokenEvent};
use super::replay::{PromptLogits, Record, ReplayStore};
use crate::model::text::token_text;
use crate::params::SamplingParams;
use crate::response::channels::ChannelTracker;
use crate::response::{
    RunStats, SampleResponse, StepTrace, StopMatched, StopReason, Timings, TopLogprob, Trajectory,
};
use crate::sampling::detokenizer::Detokenizer;
use crate::sampling::stop::StopMatcher;
use crate::sampling::{
    Constraint, SampleState, SampledToken, Sampler, TokenLists, TopToken, log_normalizer,
    sample_seed,
};
use rayon::prelude::*;
use std::sync::Arc;
use std::time::Instant;
use tokenizers::Tokenizer;

/// Alternatives every token event carries whatever `logprobs` asks, so that the inspector can
/// show them for any token; the response keeps only what was requested.
pub const EVENT_ALTERNATIVES: u32 = 10;

/// What a run needs from the loaded model besides its forward pass.
pub struct RunContext<'a> {
    pub tokenizer: &'a Tokenizer,
    pub eos_ids: &'a [u32],
    pub model_name: &'a str,
    /// The params' constraint compiled over this model's vocabulary, if they have one.
    pub constraint: Option<&'a Constraint>,
    /// Each trajectory records its tokens' stage traces (`Trajectory::trace`).
    pub record_traces: bool,
}

/// One sample's progress through the run.
struct Slot<'a> {
    /// The replay store's name for this sample's record (see [`record_key`]).
    key: u64,
    /// Tokens the sample must take, from its first on: a branch's path.
    forced: Vec<u32>,
    state: SampleState,
    detokenizer: Detokenizer<'a>,
    stops: StopMatcher,
    /// Which harmony channel each token is written in (gpt-oss).
    channels: ChannelTracker,
    trajectory: Trajectory,
    end: Option<(StopReason, Option<StopMatched>)>,
    /// Tokens sampled from kept logits, and from logits computed in this run.
    replayed: u32,
    decoded: u32,
}

/// Runs `prompt_ids` with `params` to the end, or until `interrupted` says to stop (checked
/// before every decode step, and every few replayed steps). Every token and stop is emitted as it happens; the returned response
/// holds the whole run. What `store` kept of the run before is replayed where it still holds
/// (see [`super::replay`]), and what this run computes is kept for the next.
#[allow(clippy::too_many_arguments)]
pub fn generate(
    backend: &mut dyn Backend,
    store: &mut ReplayStore,
    ctx: &RunContext,
    run_id: RunId,
    prompt_ids: Vec<u32>,
    params: &SamplingParams,
    branches: &[Branch],
    base_seed: u64,
    interrupted: &mut dyn FnMut() -> bool,
    emit: &mut dyn FnMut(Event),
) -> anyhow::Result<SampleResponse> {
    params.validate()?;
    let context_length = backend.context_length();
    if prompt_ids.is_empty() {
        anyhow::bail!("the prompt is empty and the model adds no BOS token: type some text");
    }
    if prompt_ids.len() >= context_length {
        anyhow::bail!(
            "the prompt has {} tokens but the model's context holds {context_length}: shorten it",
            prompt_ids.len()
        );
    }
    let mut run = Run {
        backend,
        store,
        ctx,
        run_id,
        params,
        branches,
        context_length,
        interrupted,
        emit,
    };
    let result = run.generate(prompt_ids, base_seed);
    if result.is_err() {
        // A run that failed half-way leaves caches that cannot be trusted.
        run.store.clear();
        run.backend.reset();
    }
    result
}

/// One run's borrowed surroundings.
struct Run<'r, 'c> {
    backend: &'r mut dyn Backend,
    store: &'r mut ReplayStore,
    ctx: &'r RunContext<'c>,
    run_id: RunId,
    params: &'r SamplingParams,
    branches: &'r [Branch],
    context_length: usize,
    interrupted: &'r mut dyn FnMut() -> bool,
    emit: &'r mut dyn FnMut(Event),
}

impl Slot<'_> {
    /// The token the sample must take at `step`, if any.
    fn forced_at(&self, step: usize) -> Option<u32> {
        self.forced.get(step).copied()
    }
}

/// The replay store's key for a sample seeded `seed`: the seed itself for the run's own
/// samples, and for branch `branch` a mix of both. Keys must differ within a run (two slots
/// sharing a record would take each other's keys and values); across runs a key may name
/// another sequence, since a record is only replayed as far as its tokens agree.
pub fn record_key(seed: u64, branch: Option<usize>) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    match branch {
        None => seed,
        Some(j) => BuildHasherDefault::<DefaultHasher>::default().hash_one((seed, j)),
    }
}

/// Refuses branches that do not fit the run: the sample they follow, their parent, their
/// tokens and their length.
fn check_branches(
    branches: &[Branch],
    num_samples: u32,
    vocab_size: usize,
    room: usize,
) -> anyhow::Result<()> {
    for (j, branch) in branches.iter().enumerate() {
        let index = num_samples as usize + j;
        if branch.sample >= num_samples {
            anyhow::bail!(
                "branch {index} follows sample {} but the run has {num_samples} samples",
                branch.sample
            );
        }
        if branch.origin.parent as usize >= index {
            anyhow::bail!(
                "branch {index} names parent {}: a branch's parent comes before it",
                branch.origin.parent
            );
        }
        if let Some(&id) = branch.path.iter().find(|&&id| id as usize >= vocab_size) {
            anyhow::bail!(
                "branch {index} takes token {id} but the vocabulary has {vocab_size} tokens"
            );
        }
        if branch.path.len() >= room {
            anyhow::bail!(
                "branch {index} has {} tokens but the context leaves room for {} after the \
                 prompt",
                branch.path.len(),
                room.saturating_sub(1)
            );
        }
    }
    Ok(())
}

impl<'c> Run<'_, 'c> {
    fn generate(&mut self, prompt_ids: Vec<u32>, base_seed: u64) -> anyhow::Result<SampleResponse> {
        let params = self.params;
        let vocab_size = self.backend.vocab_size();
        params.check_token_ids(vocab_size)?;
        let watch = super::watch::resolve(self.ctx.tokenizer, params)?;
        let mut sampler = Sampler::new(params)?
            .with_alternatives(EVENT_ALTERNATIVES)
            .with_traces(self.ctx.record_traces)
            .with_tokens(TokenLists {
                watched: watch.iter().flatten().map(|w| w.id).collect(),
                ..TokenLists::new(self.ctx.tokenizer, self.ctx.eos_ids, params)
            });
        check_branches(
            self.branches,
            params.num_samples,
            vocab_size,
            self.context_length - prompt_ids.len(),
        )?;
        let fresh = SampleState::new(base_seed, 0, &[], 0).constrained(self.ctx.constraint);
        for (j, branch) in self.branches.iter().enumerate() {
            let allowed = fresh.constraint_allows(&branch.path);
            if let Some(&id) = branch.path.get(allowed) {
                anyhow::bail!(
                    "branch {} takes {:?} (token {id}) at step {}, which the run's constraint \
                     (structured outputs) does not allow there: pick one of the tokens it allows",
                    params.num_samples as usize + j,
                    token_text(self.ctx.tokenizer, id),
                    allowed + 1,
                );
            }
        }
        // Each slot: the sample whose seed stream it draws from, and its branch, if it is one.
        let slots_of: Vec<(u32, Option<usize>)> = (0..params.num_samples)
            .map(|i| (i, None))
            .chain(
                self.branches
                    .iter()
                    .enumerate()
                    .map(|(j, b)| (b.sample, Some(j))),
            )
            .collect();
        let seeds: Vec<u64> = slots_of
            .iter()
            .map(|&(sample, _)| sample_seed(base_seed, sample))
            .collect();
        let keys: Vec<u64> = slots_of
            .iter()
            .zip(&seeds)
            .map(|(&(_, branch), &seed)| record_key(seed, branch))
            .collect();
        self.store.begin(&prompt_ids, &keys);
        let samples = params.num_samples as usize;
        for (j, branch) in self.branches.iter().enumerate() {
            // A new branch starts from what the samples (and branches) before it kept.
            let backend = &*self.backend;
            self.store.seed_branch(
                keys[samples + j],
                &branch.path,
                &keys[..samples + j],
                prompt_ids.len(),
                &mut |row, len| backend.fork(row, len),
            )?;
        }

        let prefill_start = Instant::now();
        let (prompt_logits, prefill_tokens) = self.prompt_logits(&prompt_ids)?;
        let prefill_ms = prefill_start.elapsed().as_secs_f64() * 1e3;
        let (prompt_logprobs, prompt_top_logprobs) = match params.prompt_logprobs {
            Some(top_n) => {
                let (logprobs, tops) = score_prompt(
                    &mut sampler,
                    self.ctx,
                    &prompt_ids,
                    &prompt_logits.rows,
                    top_n,
                )?;
                (Some(logprobs), Some(tops))
            }
            None => (None, None),
        };
        let prompt_watched = match (&watch, params.prompt_logprobs) {
            (Some(watch), Some(_)) => {
                let rows = &prompt_logits.rows[..prompt_ids.len() - 1];
                Some(super::watch::along_prompt(rows, watch)?)
            }
            _ => None,
        };
        (self.emit)(Event::Started {
            run_id: self.run_id,
            prompt_token_ids: prompt_ids.clone(),
            seeds: seeds.clone(),
            prefill_ms,
            prefill_tokens,
        });

        let mut slots: Vec<Slot> = slots_of
            .iter()
            .enumerate()
            .map(|(index, &(sample, branch))| {
                let branch = branch.map(|j| &self.branches[j]);
                let stops = match branch {
                    Some(branch) => {
                        StopMatcher::new(&branch_params(params, branch), self.ctx.eos_ids)
                    }
                    None => StopMatcher::new(params, self.ctx.eos_ids),
                };
                Slot {
                    key: keys[index],
                    forced: branch.map(|b| b.path.clone()).unwrap_or_default(),
                    state: SampleState::new(base_seed, sample, &prompt_ids, vocab_size)
                        .constrained(self.ctx.constraint),
                    detokenizer: Detokenizer::new(self.ctx.tokenizer, &prompt_ids),
                    stops,
                    channels: ChannelTracker::default(),
                    trajectory: Trajectory {
                        branch: branch.map(|b| b.origin),
                        channels: Some(Vec::new()),
                        entropy: Some(Vec::new()),
                        kept_entropy: Some(Vec::new()),
                        watched: watch.as_deref().map(super::watch::series),
                        constraint: self.ctx.constraint.map(|_| Vec::new()),
                        reported_probs: params.logprobs_mode.logits().then(Vec::new),
                        trace: self.ctx.record_traces.then(Vec::new),
                        ..Trajectory::empty(index as u32, seeds[index], params.logprobs)
                    },
                    end: None,
                    replayed: 0,
                    decoded: 0,
                }
            })
            .collect();

        let decode_start = Instant::now();
        let from_prefill = prefill_tokens > 0;
        let waiting = self.replay(
            &sampler,
            &mut slots,
            prompt_ids.len(),
            prompt_logits.last(),
            from_prefill,
        )?;
        self.decode(&mut sampler, &mut slots, waiting, &prompt_ids)?;
        let decode_ms = decode_start.elapsed().as_secs_f64() * 1e3;

        let replayed: u32 = slots.iter().map(|s| s.replayed).sum();
        let decoded: u32 = slots.iter().map(|s| s.decoded).sum();
        let trajectories: Vec<Trajectory> = slots
            .into_iter()
            .map(|slot| slot.trajectory.without_empty_channels())
            .collect();
        let stats = RunStats::of(&trajectories);
        Ok(SampleResponse {
            model: self.ctx.model_name.to_owned(),
            prompt: None,
            params: params.clone(),
            prompt_token_ids: prompt_ids,
            prompt_logprobs,
            prompt_top_logprobs,
            watch,
            prompt_watched,
            trajectories,
            stats,
            timings: Timings {
                prefill_ms,
                decode_ms,
                decode_tok_per_s: if decode_ms > 0.0 {
                    f64::from(decoded) / (decode_ms / 1e3)
                } else {
                    0.0
                },
                prefill_tokens,
                tokens_replayed: replayed,
                tokens_decoded: decoded,
            },
            provenance: None,
        })
    }

    /// The prompt's logits (every position's with `prompt_logprobs`, else the last), kept from
    /// the run before or computed from the longest prefix the prompt cache holds; and how many
    /// positions were computed.
    fn prompt_logits(&mut self, prompt_ids: &[u32]) -> anyhow::Result<(PromptLogits, usize)> {
        let from = if self.params.prompt_logprobs.is_some() {
            0
        } else {
            prompt_ids.len() - 1
        };
        if let Some(kept) = self.store.prompt_logits(from) {
            return Ok((kept, 0));
        }
        let prefill = self.backend.prefill(prompt_ids, from)?;
        if prefill.logits.is_empty() {
            anyhow::bail!("the model returned no logits for the prompt");
        }
        let logits = PromptLogits {
            from,
            rows: Arc::new(prefill.logits),
        };
        self.store.keep_prompt_logits(logits.clone());
        Ok((logits, prefill.computed))
    }

    /// Samples every slot as far as kept logits reach (step 0 from the prompt's logits, which
    /// count as decoded when `from_prefill`), the samples side by side on the thread pool in
    /// rounds of `REPLAY_ROUND` steps, checking for a cancel between rounds. Returns the
    /// unfinished slots with the position at which each feeds its last token.
    fn replay(
        &mut self,
        sampler: &Sampler,
        slots: &mut [Slot<'c>],
        prompt_len: usize,
        first: &[f32],
        from_prefill: bool,
    ) -> anyhow::Result<Vec<(usize, usize)>> {
        let mut lanes: Vec<Lane> = slots
            .iter()
            .map(|slot| Lane {
                record: self.store.check_out(slot.key),
                sampler: sampler.clone(),
                dropped: 0,
                waits_at: None,
                events: Vec::new(),
            })
            .collect();
        let context = StepContext {
            ctx: self.ctx,
            prompt_len,
            context_length: self.context_length,
            run_id: self.run_id,
        };
        let mut result = Ok(());
        loop {
            let round: anyhow::Result<()> = slots
                .par_iter_mut()
                .zip(lanes.par_iter_mut())
                .try_for_each(|(slot, lane)| lane.replay(slot, &context, first, from_prefill));
            for lane in &mut lanes {
                lane.events.drain(..).for_each(&mut *self.emit);
            }
            let busy = slots
                .iter()
                .zip(&lanes)
                .any(|(slot, lane)| slot.end.is_none() && lane.waits_at.is_none());
            if round.is_err() || !busy {
                result = round;
                break;
            }
            if (self.interrupted)() {
                self.abort(slots.iter_mut().filter(|s| s.end.is_none()));
                lanes.iter_mut().for_each(|lane| lane.waits_at = None);
                break;
            }
        }
        for (slot, lane) in slots.iter().zip(lanes.iter_mut()) {
            let record = std::mem::take(&mut lane.record);
            self.store.check_in(slot.key, record, lane.dropped);
        }
        result?;
        Ok(lanes
            .iter()
            .enumerate()
            .filter_map(|(i, lane)| lane.waits_at.map(|at| (at, i)))
            .filter(|&(_, i)| slots[i].end.is_none())
            .collect())
    }

    /// Decodes the `waiting` slots to their ends, one batch whose rows all feed the same
    /// position: it starts at the earliest position a slot waits at, and each slot joins when
    /// the batch reaches its own.
    fn decode(
        &mut self,
        sampler: &mut Sampler,
        slots: &mut [Slot<'c>],
        mut waiting: Vec<(usize, usize)>,
        prompt_ids: &[u32],
    ) -> anyhow::Result<()> {
        let prompt_len = prompt_ids.len();
        let mut live: Vec<usize> = Vec::new();
        let mut position = 0;
        loop {
            if live.is_empty() {
                match waiting.iter().map(|&(at, _)| at).min() {
                    Some(at) => position = at,
                    None => return Ok(()),
                }
            }
            let (joining, later): (Vec<_>, Vec<_>) =
                waiting.into_iter().partition(|&(at, _)| at == position);
            waiting = later;
            self.join(slots, &joining, prompt_ids, position)?;
            live.extend(joining.iter().map(|&(_, i)| i));

            if (self.interrupted)() {
                // Live rows keep their keys and values; waiting ones never gave theirs up.
                self.park(slots, &mut live, |_| false)?;
                self.abort(slots.iter_mut().filter(|s| s.end.is_none()));
                return Ok(());
            }
            let tokens: Vec<u32> = live
                .iter()
                .map(|&i| {
                    *slots[i]
                        .trajectory
                        .token_ids
                        .last()
                        .expect("a waiting sample has a token")
                })
                .collect();
            let rows = self.decode_preparing(&tokens, slots, &live)?;
            position += 1;
            for (&i, logits) in live.iter().zip(rows) {
                let slot = &mut slots[i];
                let step = slot.trajectory.token_ids.len();
                let forced = slot.forced_at(step);
                let norm = log_normalizer(&logits)?;
                let token = sampler.sample_or_force(&logits, norm, &mut slot.state, forced)?;
                slot.decoded += 1;
                self.store.keep_step_logits(slot.key, step, logits, norm);
                self.store.record(slot.key, step, token.id, prompt_len);
                self.accept(slot, token, prompt_len);
            }
            self.park(slots, &mut live, |slot| slot.end.is_none())?;
        }
    }

    /// The batch's forward pass; meanwhile another thread computes the constraint's masks for
    /// the `live` slots' next step, so that a constrained step costs the sampler only the mask's
    /// application.
    fn decode_preparing(
        &mut self,
        tokens: &[u32],
        slots: &mut [Slot<'c>],
        live: &[usize],
    ) -> anyhow::Result<Vec<Vec<f32>>> {
        if self.ctx.constraint.is_none() {
            return self.backend.decode(tokens);
        }
        let mut states: Vec<&mut SampleState> = slots
            .iter_mut()
            .enumerate()
            .filter(|(i, _)| live.contains(i))
            .map(|(_, slot)| &mut slot.state)
            .collect();
        std::thread::scope(|scope| {
            // A failure stays in the parser; the sampler reports it at the step.
            scope.spawn(move || {
                states.iter_mut().for_each(|state| {
                    let _ = state.prepare_constraint();
                })
            });
            self.backend.decode(tokens)
        })
    }

    /// Brings the `joining` slots into the batch at `position`.
    fn join(
        &mut self,
        slots: &[Slot],
        joining: &[(usize, usize)],
        prompt_ids: &[u32],
        position: usize,
    ) -> anyhow::Result<()> {
        if joining.is_empty() {
            return Ok(());
        }
        let mut rows = Vec::with_capacity(joining.len());
        for &(_, i) in joining {
            let slot = &slots[i];
            let tokens = &slot.trajectory.token_ids;
            rows.push(self.store.resume(slot.key, tokens, prompt_ids.len()));
        }
        if rows
            .iter()
            .any(|row| matches!(row, RowSource::Prompt { .. }))
        {
            // The prompt cache may hold another sequence since (a model scoring others).
            self.backend.prefill(prompt_ids, prompt_ids.len())?;
        }
        self.backend.join(rows, position)
    }

    /// Takes the live slots for which `stay` is false out of the batch, keeping their keys and
    /// values for the next run.
    fn park(
        &mut self,
        slots: &[Slot],
        live: &mut Vec<usize>,
        stay: impl Fn(&Slot) -> bool,
    ) -> anyhow::Result<()> {
        let keep: Vec<bool> = live.iter().map(|&i| stay(&slots[i])).collect();
        if keep.iter().all(|&k| k) {
            return Ok(());
        }
        let parked = self.backend.retire(&keep)?;
        let leaving = live
            .iter()
            .zip(&keep)
            .filter(|(_, k)| !**k)
            .map(|(&i, _)| i);
        for (i, row) in leaving.zip(parked) {
            self.store.park(slots[i].key, row);
        }
        let mut flags = keep.iter();
        live.retain(|_| *flags.next().expect("one flag per live row"));
        Ok(())
    }

    fn abort<'s>(&mut self, slots: impl Iterator<Item = &'s mut Slot<'c>>)
    where
        'c: 's,
    {
        for slot in slots {
            finish(
                slot,
                (StopReason::Abort, None, None),
                self.run_id,
                self.emit,
            );
        }
    }

    /// Records a sampled token (see [`accept`]).
    fn accept(&mut self, slot: &mut Slot, token: SampledToken, prompt_len: usize) {
        accept(
            slot,
            token,
            self.ctx,
            prompt_len,
            self.context_length,
            self.run_id,
            self.emit,
        );
    }
}

/// Steps a replaying sample takes between checks for a cancel.
const REPLAY_ROUND: usize = 32;

/// What [`accept`] needs of a run, shareable between threads.
struct StepContext<'r, 'c> {
    ctx: &'r RunContext<'c>,
    prompt_len: usize,
    context_length: usize,
    run_id: RunId,
}

/// One sample replaying on its own: its record taken out of the store, its own sampler
/// (scratch buffers), and the events it made this round.
struct Lane {
    record: Record,
    sampler: Sampler,
    /// Bytes of kept logits the record dropped.
    dropped: usize,
    /// The position at which the sample feeds its last token, once its kept steps ran out.
    waits_at: Option<usize>,
    events: Vec<Event>,
}

impl Lane {
    /// Up to `REPLAY_ROUND` steps of `slot` from kept logits.
    fn replay(
        &mut self,
        slot: &mut Slot,
        context: &StepContext,
        first: &[f32],
        from_prefill: bool,
    ) -> anyhow::Result<()> {
        for _ in 0..REPLAY_ROUND {
            if slot.end.is_some() || self.waits_at.is_some() {
                break;
            }
            let step = slot.trajectory.token_ids.len();
            let forced = slot.forced_at(step);
            let token = if step == 0 {
                let norm = log_normalizer(first)?;
                self.sampler
                    .sample_or_force(first, norm, &mut slot.state, forced)?
            } else {
                match self.record.step_logits(step) {
                    Some(kept) => {
                        let (logits, norm) = (&kept.logits, kept.norm);
                        self.sampler
                            .sample_or_force(logits, norm, &mut slot.state, forced)?
                    }
                    None => {
                        self.waits_at = Some(context.prompt_len + step - 1);
                        break;
                    }
                }
            };
            if step == 0 && from_prefill {
                slot.decoded += 1;
            } else {
                slot.replayed += 1;
            }
            self.dropped += self.record.record(step, token.id, context.prompt_len);
            let events = &mut self.events;
            accept(
                slot,
                token,
                context.ctx,
                context.prompt_len,
                context.context_length,
                context.run_id,
                &mut |event| events.push(event),
            );
        }
        Ok(())
    }
}

/// A branch's stops: its path always runs in full, then `then` tokens or `max_tokens`.
fn branch_params(params: &SamplingParams, branch: &Branch) -> SamplingParams {
    let path = u32::try_from(branch.path.len()).unwrap_or(u32::MAX);
    let max_tokens = match branch.then {
        Some(then) => Some(path.saturating_add(then)),
        None => params.max_tokens.map(|most| most.max(path)),
    };
    SamplingParams {
        max_tokens,
        ..params.clone()
    }
}

/// Per prompt position, its top alternatives (none for the first token).
type PromptTops = Vec<Option<Vec<TopLogprob>>>;

/// Raw logprob of each prompt token given the ones before it (the first has none).
fn score_prompt(
    sampler: &mut Sampler,
    ctx: &RunContext,
    prompt_ids: &[u32],
    rows: &[Vec<f32>],
    top_n: u32,
) -> anyhow::Result<(Vec<Option<f32>>, PromptTops)> {
    let mut logprobs = vec![None];
    let mut tops = vec![None];
    for (logits, &id) in rows.iter().zip(&prompt_ids[1..]) {
        let scored = sampler.score(logits, id, top_n)?;
        logprobs.push(Some(scored.logprob));
        tops.push(Some(
            scored
                .top
                .iter()
                .map(|t| TopLogprob(t.id, token_text(ctx.tokenizer, t.id), t.logprob))
                .collect(),
        ));
    }
    Ok((logprobs, tops))
}

/// Records a sampled token, emits what may be shown, and ends the sample when a stop or the
/// length limit says so. The event gets every alternative; the trajectory what `logprobs` and
/// `logprobs_mode` ask.
fn accept(
    slot: &mut Slot,
    token: SampledToken,
    ctx: &RunContext,
    prompt_len: usize,
    context_length: usize,
    run_id: RunId,
    emit: &mut dyn FnMut(Event),
) {
    let delta = slot.detokenizer.push(token.id);
    let channel = slot
        .channels
        .push(&token_text(ctx.tokenizer, token.id), &delta);
    let trajectory = &mut slot.trajectory;
    trajectory.token_ids.push(token.id);
    if let Some(channels) = &mut trajectory.channels {
        channels.push(channel);
    }
    trajectory.logprobs.push(token.reported.value);
    if let Some(probs) = &mut trajectory.reported_probs {
        probs.push(token.reported.prob);
    }
    if let (Some(raw), Some(kept)) = (&mut trajectory.entropy, &mut trajectory.kept_entropy) {
        raw.push(token.entropy);
        kept.push(token.kept_entropy);
    }
    if let (Some(steps), Some(step)) = (&mut trajectory.constraint, token.constraint) {
        steps.push(step);
    }
    for (series, &logprob) in trajectory
        .watched
        .iter_mut()
        .flat_map(|w| w.values_mut())
        .zip(&token.watched)
    {
        series.push(logprob);
    }
    let alternatives: Vec<Alternative> = token
        .top
        .iter()
        .map(|t: &TopToken| Alternative {
            id: t.id,
            text: token_text(ctx.tokenizer, t.id),
            logprob: t.logprob,
            prob: t.prob,
        })
        .collect();
    if let Some(tops) = &mut trajectory.top_logprobs {
        let top = token.reported.top.iter();
        tops.push(
            top.map(|&(id, value)| TopLogprob(id, token_text(ctx.tokenizer, id), value))
                .collect(),
        );
    }
    if let (Some(traces), Some(stages)) = (&mut trajectory.trace, token.trace) {
        traces.push(StepTrace {
            tokens: alternatives.iter().map(TopLogprob::from).collect(),
            stages,
        });
    }
    let step = slot
        .stops
        .step(token.id, &delta, trajectory.token_ids.len());
    trajectory.text.push_str(&step.emit);
    emit(Event::Token {
        run_id,
        token: TokenEvent {
            sample: trajectory.index,
            id: token.id,
            text: step.emit,
            logprob: token.logprob,
            prob: token.prob,
            reported_prob: token.reported.prob,
            rank: token.rank,
            top: alternatives,
            entropy: Some(token.entropy),
            watched: token.watched,
            constraint: token.constraint,
            channel,
        },
    });
    match step.finished {
        Some((reason, matched)) => {
            let stop_token = match &matched {
                Some(StopMatched::Token(id)) => Some(token_text(ctx.tokenizer, *id)),
                _ => None,
            };
            finish(slot, (reason, matched, stop_token), run_id, emit);
        }
        // The constraint is complete and allows nothing more (a choice spelled out, a JSON
        // document closed): the sample has said all it may.
        None if slot.state.constraint_finished() => {
            finish(slot, (StopReason::Stop, None, None), run_id, emit);
        }
        None if prompt_len + slot.trajectory.token_ids.len() >= context_length => {
            finish(slot, (StopReason::Length, None, None), run_id, emit);
        }
        None if slot.stops.repeats(&slot.trajectory.token_ids) => {
            finish(
                slot,
                (StopReason::RepetitionDetected, None, None),
                run_id,
                emit,
            );
        }
        None => {}
    }
}

/// Ends a sample, showing any text still held back for a stop string that never completed.
/// `end` is the reason, what matched and the text of a stop token that did.
fn finish(
    slot: &mut Slot,
    end: (StopReason, Option<StopMatched>, Option<String>),
    run_id: RunId,
    emit: &mut dyn FnMut(Event),
) {
    let (reason, matched, stop_token) = end;
    if slot.end.is_some() {
        return;
    }
    let tail = if reason == StopReason::Stop {
        String::new()
    } else {
        slot.stops.flush()
    };
    slot.trajectory.text.push_str(&tail);
    slot.trajectory.stop_reason = reason;
    slot.trajectory.stop_matched = matched.clone();
    slot.end = Some((reason, matched.clone()));
    emit(Event::Finished {
        run_id,
        sample: slot.trajectory.index,
        reason,
        matched,
        stop_token,
        tail,
        replayed: slot.replayed,
        decoded: slot.decoded,
    });
}
