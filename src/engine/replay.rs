//! What a run keeps so that the next one replays instead of recomputing.
//!
//! Sampling is coupled (one uniform per step from the sample's own seed), so after a parameter
//! change a sample usually picks the same tokens as before up to some step. The store keeps,
//! per sample (keyed by its seed, or for a branch by seed and branch: see
//! [`super::generate::record_key`]), the tokens of the last run, the logits each step was sampled from, and the
//! sample's keys and values; the next run with the same prompt samples the kept logits again
//! under its own parameters and history (penalties see the new history), and only from the
//! first step whose token changes does it decode, starting from the kept keys and values cut
//! there. Replaying the very logits a fresh run would compute makes the re-run equal to it.

use super::backend::{ParkedRow, RowSource};
use super::score::common_prefix;
use crate::model::DEFAULT_REPLAY_BUDGET;
use crate::model::memory::parse_size;
use crate::sampling::Normalizer;
use std::collections::HashMap;
use std::sync::Arc;

/// Names the budget for kept logits.
pub const BUDGET_VAR: &str = "SAMPLAB_REPLAY_BUDGET";

/// The logits of the prompt's positions from `from` on, shared by every sample of a run.
#[derive(Debug, Clone)]
pub(super) struct PromptLogits {
    pub(super) from: usize,
    pub(super) rows: Arc<Vec<Vec<f32>>>,
}

impl PromptLogits {
    /// The logits after the prompt's last token: step 0 of every sample.
    pub(super) fn last(&self) -> &[f32] {
        self.rows.last().map_or(&[], Vec::as_slice)
    }
}

/// One sample's last run.
#[derive(Default)]
pub(super) struct Record {
    /// The sample's tokens; `logits` and `kv` hold for them.
    tokens: Vec<u32>,
    /// `logits[j]` predicted `tokens[j + 1]` (it came after `tokens[..=j]`); the logits of
    /// step 0 are the prompt's.
    logits: Vec<KeptStep>,
    kv: Option<ParkedRow>,
    /// Positions of `kv` that still hold for `tokens` (the rest belong to tokens replaced
    /// since).
    kv_valid: usize,
}

/// One step's logits with their log_softmax normaliser and entropy, which replaying need not
/// compute again.
pub(super) struct KeptStep {
    pub logits: Vec<f32>,
    pub norm: Normalizer,
}

impl KeptStep {
    fn bytes(&self) -> usize {
        size_of_val(self.logits.as_slice()) + size_of::<Normalizer>()
    }
}

impl Record {
    /// The kept logits of step `step` (>= 1), valid when the sample's tokens so far are the
    /// record's (every earlier step went through [`Record::record`]).
    pub(super) fn step_logits(&self, step: usize) -> Option<&KeptStep> {
        (self.tokens.len() >= step)
            .then(|| self.logits.get(step - 1))
            .flatten()
    }

    /// Notes the token picked at `step` (earlier steps already noted). A token other than the
    /// kept one drops what followed it, and the keys and values from there on (`prompt_len`
    /// places steps in the cache). Returns the bytes of logits dropped.
    pub(super) fn record(&mut self, step: usize, id: u32, prompt_len: usize) -> usize {
        if self.tokens.get(step) == Some(&id) {
            return 0;
        }
        self.tokens.truncate(step);
        self.tokens.push(id);
        self.kv_valid = self.kv_valid.min(prompt_len + step);
        let dropped = self.logits.drain(step.min(self.logits.len())..);
        dropped.map(|kept| kept.bytes()).sum()
    }
}

/// The prompt's logits and every sample's last run, for one model; see the module docs.
pub struct ReplayStore {
    /// Bytes of logits (prompt rows and steps) the store may keep.
    budget: usize,
    used: usize,
    prompt_ids: Vec<u32>,
    prompt: Option<PromptLogits>,
    records: HashMap<u64, Record>,
    /// The keys of the run before, whose records stay while they may be asked for again.
    last_keys: Vec<u64>,
}

impl ReplayStore {
    pub fn new(budget: usize) -> Self {
        Self {
            budget,
            used: 0,
            prompt_ids: Vec::new(),
            prompt: None,
            records: HashMap::new(),
            last_keys: Vec::new(),
        }
    }

    /// The budget from `SAMPLAB_REPLAY_BUDGET` (e.g. `256M`, `0` to keep nothing), else 512 MiB.
    pub fn from_env() -> anyhow::Result<Self> {
        Ok(Self::new(budget(
            std::env::var(BUDGET_VAR).ok().as_deref(),
        )?))
    }

    /// Bytes of logits it may keep.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Bytes of logits kept now.
    pub fn used(&self) -> usize {
        self.used
    }

    /// Forgets everything (after a failed run, whose state cannot be trusted).
    pub fn clear(&mut self) {
        *self = Self::new(self.budget);
    }

    /// Starts a run of `prompt` with samples keyed `keys`: another prompt forgets everything;
    /// records of keys in neither this run nor the one before are dropped.
    pub(super) fn begin(&mut self, prompt: &[u32], keys: &[u64]) {
        if self.prompt_ids != prompt {
            self.clear();
            self.prompt_ids = prompt.to_vec();
        }
        let keep = |key: &u64| keys.contains(key) || self.last_keys.contains(key);
        let dropped: Vec<u64> = self.records.keys().copied().filter(|k| !keep(k)).collect();
        for key in dropped {
            self.drop_record(key);
        }
        self.last_keys = keys.to_vec();
    }

    /// The prompt's logits from position `from` on (at least the last), if kept.
    pub(super) fn prompt_logits(&self, from: usize) -> Option<PromptLogits> {
        self.prompt.clone().filter(|p| p.from <= from)
    }

    /// Keeps the prompt's logits if the budget allows, replacing those kept before.
    pub(super) fn keep_prompt_logits(&mut self, logits: PromptLogits) {
        let old = self.prompt.take().map_or(0, |p| rows_bytes(&p.rows));
        self.used -= old;
        let bytes = rows_bytes(&logits.rows);
        if self.used + bytes <= self.budget {
            self.used += bytes;
            self.prompt = Some(logits);
        }
    }

    /// Takes the record of the sample keyed `key` out of the store (an empty one if none),
    /// so that samples can be replayed side by side; [`ReplayStore::check_in`] returns it.
    pub(super) fn check_out(&mut self, key: u64) -> Record {
        self.records.remove(&key).unwrap_or_default()
    }

    /// Returns a record taken out, with the bytes of logits it dropped meanwhile.
    pub(super) fn check_in(&mut self, key: u64, record: Record, dropped: usize) {
        self.used -= dropped;
        self.records.insert(key, record);
    }

    /// Notes the token the sample keyed `key` picked at `step` (see [`Record::record`]).
    pub(super) fn record(&mut self, key: u64, step: usize, id: u32, prompt_len: usize) {
        let dropped = self
            .records
            .entry(key)
            .or_default()
            .record(step, id, prompt_len);
        self.used -= dropped;
    }

    /// Keeps the logits computed for step `step` (>= 1) of the sample keyed `key`, with their
    /// log_softmax normaliser, if every
    /// step before it is kept and the budget allows: past the budget the earliest steps stay.
    pub(super) fn keep_step_logits(
        &mut self,
        key: u64,
        step: usize,
        logits: Vec<f32>,
        norm: Normalizer,
    ) {
        let Some(record) = self.records.get_mut(&key) else {
            return;
        };
        let kept = KeptStep { logits, norm };
        if record.logits.len() + 1 == step && self.used + kept.bytes() <= self.budget {
            self.used += kept.bytes();
            record.logits.push(kept);
        }
    }

    /// Where the sample keyed `key`, with `tokens` so far, continues: it feeds its last token
    /// at `prompt_len + tokens.len() - 1`, from its own kept keys and values cut there, or
    /// from the prompt's with its earlier tokens run again (where none are kept, or they
    /// cannot be cut back that far). Its later tokens are then its own, not the kept ones.
    pub(super) fn resume(&mut self, key: u64, tokens: &[u32], prompt_len: usize) -> RowSource {
        let position = prompt_len + tokens.len() - 1;
        let record = self.records.entry(key).or_default();
        record.tokens.truncate(tokens.len());
        // The latest position the kept row can be cut back to (a recurrent state's snapshot),
        // if it lies past the prompt: the tokens from there on run again.
        let valid = record.kv_valid.min(position);
        let kv = record
            .kv
            .take()
            .map(|row| (row.nearest_cut(valid), row))
            .filter(|(cut, _)| *cut == position || *cut > prompt_len);
        record.kv_valid = 0;
        match kv {
            Some((cut, row)) => RowSource::Parked {
                row,
                then: tokens[cut - prompt_len..tokens.len() - 1].to_vec(),
            },
            None => RowSource::Prompt {
                then: tokens[..tokens.len() - 1].to_vec(),
            },
        }
    }

    /// Keeps the keys and values of a sample that left the batch.
    pub(super) fn park(&mut self, key: u64, row: ParkedRow) {
        let record = self.records.entry(key).or_default();
        record.kv_valid = row.positions();
        record.kv = Some(row);
    }

    /// The prompt and the logits of every step of the sample keyed `key` up to the last of
    /// `tokens`, when its record still holds those tokens and every step is kept.
    pub(super) fn kept_steps(&self, key: u64, tokens: &[u32]) -> Option<(&[u32], Vec<&[f32]>)> {
        let record = self.records.get(&key)?;
        if tokens.is_empty() || !record.tokens.starts_with(tokens) {
            return None;
        }
        let first = self.prompt.as_ref().map(PromptLogits::last)?;
        let mut steps = vec![first];
        for step in 1..tokens.len() {
            steps.push(record.step_logits(step)?.logits.as_slice());
        }
        Some((&self.prompt_ids, steps))
    }

    /// Starts the record of a branch met for the first time (`key` has none) from the record
    /// of this run's `donors` that shares the longest start with its `path`: the logits of the
    /// shared steps (they depend on those tokens only) and, through `fork`, a copy of the
    /// donor's keys and values for them. The branch then replays its path up to its first own
    /// token and decodes only from there. Nothing is done when no donor shares a step, or the
    /// budget has no room for the copied logits.
    pub(super) fn seed_branch(
        &mut self,
        key: u64,
        path: &[u32],
        donors: &[u64],
        prompt_len: usize,
        fork: &mut dyn FnMut(&ParkedRow, usize) -> anyhow::Result<Option<ParkedRow>>,
    ) -> anyhow::Result<()> {
        if self.records.contains_key(&key) {
            return Ok(());
        }
        let shared = |record: &Record| {
            let kept_kv = record
                .kv
                .as_ref()
                .map_or(0, |_| record.kv_valid.saturating_sub(prompt_len));
            common_prefix(&record.tokens, path)
                .min(record.logits.len())
                .min(kept_kv)
        };
        let best = donors
            .iter()
            .filter_map(|donor| self.records.get(donor))
            .map(|record| (shared(record), record))
            .max_by_key(|(steps, _)| *steps);
        let Some((steps, donor)) = best.filter(|(steps, _)| *steps > 0) else {
            return Ok(());
        };
        let logits: Vec<KeptStep> = donor.logits[..steps]
            .iter()
            .map(|kept| KeptStep {
                logits: kept.logits.clone(),
                norm: kept.norm,
            })
            .collect();
        let bytes: usize = logits.iter().map(KeptStep::bytes).sum();
        if self.used + bytes > self.budget {
            return Ok(());
        }
        let Some(kv) = donor.kv.as_ref() else {
            return Ok(());
        };
        // Where the donor's keys and values cannot be copied, the branch runs its shared steps
        // again from the prompt's when it first decodes.
        let kv = fork(kv, prompt_len + steps)?;
        let kv_valid = kv.as_ref().map_or(0, ParkedRow::positions);
        self.used += bytes;
        self.records.insert(
            key,
            Record {
                tokens: path[..steps].to_vec(),
                logits,
                kv,
                kv_valid,
            },
        );
        Ok(())
    }

    fn drop_record(&mut self, key: u64) {
        if let Some(record) = self.records.remove(&key) {
            self.used -= record.logits.iter().map(KeptStep::bytes).sum::<usize>();
        }
    }
}

/// The budget a `SAMPLAB_REPLAY_BUDGET` value names; the default without one.
fn budget(value: Option<&str>) -> anyhow::Result<usize> {
    let Some(value) = value else {
        return Ok(DEFAULT_REPLAY_BUDGET);
    };
    let bytes = parse_size(value).ok_or_else(|| {
        anyhow::anyhow!(
            "{BUDGET_VAR}={value} is not a size: write bytes or a number with K, M or G, \
             e.g. 512M or 1.5G"
        )
    })?;
    Ok(usize::try_from(bytes).unwrap_or(usize::MAX))
}

fn rows_bytes(rows: &[Vec<f32>]) -> usize {
    rows.iter().map(|row| row.len() * size_of::<f32>()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_a_size() {
        assert_eq!(budget(None).unwrap(), DEFAULT_REPLAY_BUDGET);
        assert_eq!(budget(Some("0")).unwrap(), 0);
        assert_eq!(budget(Some("1.5K")).unwrap(), 1536);
        let err = budget(Some("lots")).unwrap_err().to_string();
        assert!(
            err.contains("SAMPLAB_REPLAY_BUDGET=lots") && err.contains("512M"),
            "{err}"
        );
    }
}
