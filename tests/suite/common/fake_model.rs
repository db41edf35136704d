//! A deterministic fake model whose logits depend on each row's whole history, so any row
//! mix-up in batching, joining or retiring changes the output; it counts the work it does.

use samplab::engine::{Backend, ParkedRow, Prefill, RowSource};
use std::time::Duration;

pub struct FakeModel {
    vocab: usize,
    context: usize,
    pub delay: Duration,
    prompt: Vec<u32>,
    batch: Vec<Vec<u32>>,
    /// Prompt positions run by prefills.
    pub prefilled: usize,
    /// Rows fed by decode steps.
    pub decoded: usize,
}

impl FakeModel {
    pub fn new(vocab: usize, context: usize) -> Self {
        Self {
            vocab,
            context,
            delay: Duration::ZERO,
            prompt: Vec::new(),
            batch: Vec::new(),
            prefilled: 0,
            decoded: 0,
        }
    }

    /// The logits after `history`: a hash of (history, candidate) per candidate.
    pub fn logits(&self, history: &[u32]) -> Vec<f32> {
        let mut h: u64 = 1469598103934665603;
        for &t in history {
            h = (h ^ u64::from(t)).wrapping_mul(1099511628211);
        }
        (0..self.vocab as u64)
            .map(|j| {
                let x = (h ^ j.wrapping_mul(0x9E3779B97F4A7C15)).wrapping_mul(0xBF58476D1CE4E5B9);
                ((x >> 40) % 1000) as f32 / 250.0
            })
            .collect()
    }
}

impl Backend for FakeModel {
    fn kind(&self) -> samplab::engine::BackendKind {
        samplab::engine::BackendKind::Samplab
    }

    fn vocab_size(&self) -> usize {
        self.vocab
    }
    fn weight_bytes(&self) -> u64 {
        0
    }
    fn context_length(&self) -> usize {
        self.context
    }
    fn prefill(&mut self, prompt: &[u32], logits_from: usize) -> anyhow::Result<Prefill> {
        let shared = self
            .prompt
            .iter()
            .zip(prompt)
            .take_while(|(a, b)| a == b)
            .count();
        let reused = shared.min(logits_from);
        self.prompt = prompt.to_vec();
        self.prefilled += prompt.len() - reused;
        Ok(Prefill {
            logits: (logits_from + 1..=prompt.len())
                .map(|end| self.logits(&prompt[..end]))
                .collect(),
            computed: prompt.len() - reused,
        })
    }
    fn join(&mut self, rows: Vec<RowSource>, len: usize) -> anyhow::Result<()> {
        assert!(
            self.batch.iter().all(|row| row.len() == len),
            "rows join at the batch's length"
        );
        for row in rows {
            let history = match row {
                RowSource::Prompt { then } => [self.prompt.as_slice(), &then].concat(),
                RowSource::Parked { row, then } => {
                    let mut history = row.into_inner::<Vec<u32>>().expect("a fake row");
                    history.truncate(len - then.len());
                    [history, then].concat()
                }
            };
            assert!(
                history.len() >= len,
                "a row holds the positions it joins at"
            );
            self.batch.push(history[..len].to_vec());
        }
        Ok(())
    }
    fn decode(&mut self, tokens: &[u32]) -> anyhow::Result<Vec<Vec<f32>>> {
        assert_eq!(tokens.len(), self.batch.len(), "one token per live row");
        std::thread::sleep(self.delay);
        self.decoded += tokens.len();
        let mut rows = Vec::new();
        for (row, &t) in self.batch.iter_mut().zip(tokens) {
            row.push(t);
        }
        for row in &self.batch {
            rows.push(self.logits(row));
        }
        Ok(rows)
    }
    fn retire(&mut self, keep: &[bool]) -> anyhow::Result<Vec<ParkedRow>> {
        assert_eq!(keep.len(), self.batch.len());
        let mut parked = Vec::new();
        let mut kept = Vec::new();
        for (row, &k) in std::mem::take(&mut self.batch).into_iter().zip(keep) {
            if k {
                kept.push(row);
            } else {
                let len = row.len();
                parked.push(ParkedRow::new(row, len, len * 4));
            }
        }
        self.batch = kept;
        Ok(parked)
    }
    fn fork(&self, row: &ParkedRow, len: usize) -> anyhow::Result<Option<ParkedRow>> {
        let history = row.inner::<Vec<u32>>().expect("a fake row");
        assert!(
            history.len() >= len,
            "a fork copies positions the row holds"
        );
        Ok(Some(ParkedRow::new(history[..len].to_vec(), len, len * 4)))
    }
    fn reset(&mut self) {
        self.prompt.clear();
        self.batch.clear();
    }
}
