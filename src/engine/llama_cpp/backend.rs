//! [`Backend`] on llama.cpp: the prompt cache is one sequence cut where the next prompt
//! differs; the batch's rows are sequences of one `llama_batch`; parked rows keep their
//! sequences (or, when the context needs the room, their saved states).
//!
//! A recurrent or hybrid model's state cannot be cut back inside a sequence: its rows are cut
//! only at their ends, and a shorter prefix is run again from the start, so that every re-run
//! still equals a fresh run.

use super::sequences::{Item, PROMPT, Parked, Sequences};
use crate::engine::backend::{Backend, ParkedRow, Prefill, RowSource};
use crate::engine::backend_choice::BackendKind;
use crate::engine::score::common_prefix;
use crate::model::Cuts;
use std::cell::RefCell;
use std::sync::Arc;

/// A parked row of this backend.
struct Row(Arc<Parked>);

/// A row in the batch: its sequence and how many positions it holds.
#[derive(Debug, Clone, Copy)]
struct Live {
    seq: i32,
    positions: usize,
}

pub struct LlamaCppBackend {
    /// `fork` copies a sequence from `&self`.
    seqs: RefCell<Sequences>,
    /// The tokens whose positions the prompt sequence holds.
    prompt_ids: Vec<u32>,
    rows: Vec<Live>,
    /// Its state is cut only at a sequence's end (recurrent and hybrid models).
    recurrent: bool,
    /// Bytes of keys and values one position takes, for the replay budget.
    bytes_per_position: usize,
    weight_bytes: u64,
    kernels: Vec<(String, String)>,
}

impl LlamaCppBackend {
    pub(super) fn new(
        seqs: Sequences,
        recurrent: bool,
        bytes_per_position: usize,
        kernels: Vec<(String, String)>,
    ) -> Self {
        let weight_bytes = seqs.model().size();
        Self {
            seqs: RefCell::new(seqs),
            prompt_ids: Vec::new(),
            rows: Vec::new(),
            recurrent,
            bytes_per_position,
            weight_bytes,
            kernels,
        }
    }

    fn cuts(&self, positions: usize) -> Cuts {
        match self.recurrent {
            true => Cuts::at(positions, Vec::new()),
            false => Cuts::from(0),
        }
    }

    /// A new sequence holding the prompt's first `start` positions.
    fn row_from_prompt(&mut self, start: usize) -> anyhow::Result<(i32, Vec<Item>)> {
        let held = self.prompt_ids.len();
        if start > held {
            anyhow::bail!("the prompt cache holds {held} positions, not the {start} a row needs");
        }
        let seqs = self.seqs.get_mut();
        let seq = seqs.take()?;
        if !self.recurrent {
            seqs.copy(PROMPT, seq, start);
            return Ok((seq, Vec::new()));
        }
        if start == held {
            seqs.copy_whole(PROMPT, seq);
            return Ok((seq, Vec::new()));
        }
        // A recurrent state holds only the prompt's end: run the shorter prefix again.
        let items = run_on(seq, 0, &self.prompt_ids[..start], false);
        Ok((seq, items))
    }
}

/// Where a row of `len` positions whose last `then` tokens are its own starts them.
fn start_of(len: usize, then: &[u32]) -> anyhow::Result<usize> {
    len.checked_sub(then.len())
        .ok_or_else(|| anyhow::anyhow!("a row of {len} positions cannot hold {}", then.len()))
}

/// `tokens` as items of `seq` from position `from`, none wanting logits unless `last` says
/// the last one does.
fn run_on(seq: i32, from: usize, tokens: &[u32], last: bool) -> Vec<Item> {
    let n = tokens.len();
    tokens
        .iter()
        .enumerate()
        .map(|(i, &token)| Item {
            token,
            pos: from + i,
            seq,
            logits: last && i + 1 == n,
        })
        .collect()
}

impl Backend for LlamaCppBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::LlamaCpp
    }

    fn vocab_size(&self) -> usize {
        self.seqs.borrow().vocab()
    }

    fn weight_bytes(&self) -> u64 {
        self.weight_bytes
    }

    fn kernels(&self) -> Vec<(String, String)> {
        self.kernels.clone()
    }

    fn context_length(&self) -> usize {
        self.seqs.borrow().cells()
    }

    fn state_bytes(&self, positions: usize) -> u64 {
        (positions * self.bytes_per_position) as u64
    }

    fn prefill(&mut self, prompt: &[u32], logits_from: usize) -> anyhow::Result<Prefill> {
        let held = self.prompt_ids.len();
        let mut reused = common_prefix(&self.prompt_ids, prompt).min(logits_from);
        if reused < held {
            let seqs = self.seqs.get_mut();
            if self.recurrent || seqs.cut(PROMPT, reused).is_err() {
                seqs.cut(PROMPT, 0)?;
                reused = 0;
            }
        }
        self.prompt_ids.truncate(reused);
        let rest = &prompt[reused..];
        if rest.is_empty() {
            return Ok(Prefill::default());
        }
        let items: Vec<Item> = rest
            .iter()
            .enumerate()
            .map(|(i, &token)| Item {
                token,
                pos: reused + i,
                seq: PROMPT,
                logits: reused + i >= logits_from,
            })
            .collect();
        let logits = match self.seqs.get_mut().run(&items) {
            Ok(logits) => logits,
            Err(e) => {
                let _ = self.seqs.get_mut().cut(PROMPT, 0);
                self.prompt_ids.clear();
                return Err(e);
            }
        };
        self.prompt_ids.extend_from_slice(rest);
        Ok(Prefill {
            logits,
            computed: rest.len(),
        })
    }

    fn join(&mut self, rows: Vec<RowSource>, len: usize) -> anyhow::Result<()> {
        let mut joined = Vec::with_capacity(rows.len());
        let mut items = Vec::new();
        for row in rows {
            let (seq, start, then) = match row {
                RowSource::Prompt { then } => {
                    let start = start_of(len, &then)?;
                    let (seq, recompute) = self.row_from_prompt(start)?;
                    items.extend(recompute);
                    (seq, start, then)
                }
                RowSource::Parked { row, then } => {
                    let Row(parked) = row
                        .into_inner()
                        .ok_or_else(|| anyhow::anyhow!("a parked row of another backend"))?;
                    let start = start_of(len, &then)?;
                    let seqs = self.seqs.get_mut();
                    let seq = seqs.unpark(&parked)?;
                    seqs.cut(seq, start)?;
                    (seq, start, then)
                }
            };
            items.extend(run_on(seq, start, &then, false));
            joined.push(Live {
                seq,
                positions: len,
            });
        }
        if let Err(e) = self.seqs.get_mut().run(&items) {
            for live in joined {
                self.seqs.get_mut().give_back(live.seq);
            }
            return Err(e);
        }
        self.rows.extend(joined);
        Ok(())
    }

    fn decode(&mut self, tokens: &[u32]) -> anyhow::Result<Vec<Vec<f32>>> {
        if tokens.len() != self.rows.len() {
            anyhow::bail!(
                "{} tokens for a batch of {} rows",
                tokens.len(),
                self.rows.len()
            );
        }
        let items: Vec<Item> = self
            .rows
            .iter()
            .zip(tokens)
            .map(|(row, &token)| Item {
                token,
                pos: row.positions,
                seq: row.seq,
                logits: true,
            })
            .collect();
        let logits = self.seqs.get_mut().run(&items)?;
        for row in &mut self.rows {
            row.positions += 1;
        }
        Ok(logits)
    }

    fn retire(&mut self, keep: &[bool]) -> anyhow::Result<Vec<ParkedRow>> {
        if keep.len() != self.rows.len() {
            anyhow::bail!(
                "{} flags for a batch of {} rows",
                keep.len(),
                self.rows.len()
            );
        }
        let mut parked = Vec::new();
        let mut kept = Vec::new();
        for (live, &keep) in self.rows.iter().zip(keep) {
            if keep {
                kept.push(*live);
                continue;
            }
            let row = Row(self.seqs.get_mut().park(live.seq));
            let bytes = live.positions * self.bytes_per_position;
            parked.push(
                ParkedRow::new(row, live.positions, bytes).with_cuts(self.cuts(live.positions)),
            );
        }
        self.rows = kept;
        Ok(parked)
    }

    fn fork(&self, row: &ParkedRow, len: usize) -> anyhow::Result<Option<ParkedRow>> {
        let Some(Row(parent)) = row.inner::<Row>() else {
            return Ok(None);
        };
        let len = row.nearest_cut(len);
        if len == 0 {
            return Ok(None);
        }
        let mut seqs = self.seqs.borrow_mut();
        let seq = seqs.copy_parked(parent, len)?;
        let copy = Row(seqs.park(seq));
        let bytes = len * self.bytes_per_position;
        Ok(Some(
            ParkedRow::new(copy, len, bytes).with_cuts(self.cuts(len)),
        ))
    }

    fn reset(&mut self) {
        let rows = std::mem::take(&mut self.rows);
        let seqs = self.seqs.get_mut();
        for live in rows {
            seqs.give_back(live.seq);
        }
        let _ = seqs.cut(PROMPT, 0);
        self.prompt_ids.clear();
    }
}
