//! The training loop: random story-aligned windows, AdamW with warmup and cosine decay.

use crate::model::TinyLlama;
use candle_core::{Device, Tensor};
use candle_nn::{AdamW, Optimizer, ParamsAdamW};
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{Rng, SeedableRng};
use std::time::Instant;

/// Tokenized stories back to back, each `BOS story EOS`, with where each one starts.
pub struct TokenStream {
    tokens: Vec<u32>,
    starts: Vec<usize>,
}

impl TokenStream {
    pub fn new(stories: impl IntoIterator<Item = Vec<u32>>) -> Self {
        let mut tokens = Vec::new();
        let mut starts = Vec::new();
        for story in stories {
            starts.push(tokens.len());
            tokens.extend(story);
        }
        Self { tokens, starts }
    }

    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Starts of the stories followed by at least `len` tokens: windows begin at a BOS, at
    /// position 0, as a prompt does.
    fn window_starts(&self, len: usize) -> Vec<usize> {
        self.starts
            .iter()
            .copied()
            .filter(|&s| s + len <= self.tokens.len())
            .collect()
    }

    fn batch(&self, starts: &[usize], len: usize, device: &Device) -> candle_core::Result<Tensor> {
        let ids: Vec<u32> = starts
            .iter()
            .flat_map(|&s| self.tokens[s..s + len].iter().copied())
            .collect();
        Tensor::from_vec(ids, (starts.len(), len), device)
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    pub steps: usize,
    pub warmup: usize,
    pub peak_lr: f64,
    pub final_lr: f64,
    pub batch: usize,
    pub weight_decay: f64,
}

impl Schedule {
    /// Linear warmup, then cosine decay from `peak_lr` to `final_lr`.
    fn lr(&self, step: usize) -> f64 {
        if step < self.warmup {
            return self.peak_lr * (step + 1) as f64 / self.warmup as f64;
        }
        let progress = (step - self.warmup) as f64 / (self.steps - self.warmup).max(1) as f64;
        let cosine = 0.5 * (1.0 + (std::f64::consts::PI * progress).cos());
        self.final_lr + (self.peak_lr - self.final_lr) * cosine
    }
}

/// Trains `model` on windows of `context + 1` tokens drawn with `seed`; prints progress.
pub fn train(
    model: &TinyLlama,
    data: &TokenStream,
    context: usize,
    schedule: &Schedule,
    seed: u64,
    device: &Device,
) -> anyhow::Result<()> {
    let starts = data.window_starts(context + 1);
    anyhow::ensure!(!starts.is_empty(), "no story window of {context} tokens");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut optimizer = AdamW::new(
        model.vars(),
        ParamsAdamW {
            lr: schedule.lr(0),
            weight_decay: schedule.weight_decay,
            ..ParamsAdamW::default()
        },
    )?;
    let began = Instant::now();
    let mut window_began = Instant::now();
    let mut window_tokens = 0;
    for step in 0..schedule.steps {
        let picked: Vec<usize> = (0..schedule.batch)
            .map(|_| starts[(rng.next_u64() % starts.len() as u64) as usize])
            .collect();
        let batch = data.batch(&picked, context + 1, device)?;
        optimizer.set_learning_rate(schedule.lr(step));
        let loss = model.loss(&batch)?;
        optimizer.backward_step(&loss)?;
        window_tokens += schedule.batch * context;
        if step % 10 == 0 || step + 1 == schedule.steps {
            let seconds = window_began.elapsed().as_secs_f64();
            println!(
                "step {step:>5}/{} · loss {:.4} · lr {:.2e} · {:.0} tok/s · {:.0} s",
                schedule.steps,
                loss.to_scalar::<f32>()?,
                schedule.lr(step),
                window_tokens as f64 / seconds,
                began.elapsed().as_secs_f64(),
            );
            window_began = Instant::now();
            window_tokens = 0;
        }
    }
    Ok(())
}

/// Mean next-token loss (nats per token) over every story window of `data`.
pub fn mean_loss(
    model: &TinyLlama,
    data: &TokenStream,
    context: usize,
    batch: usize,
    device: &Device,
) -> anyhow::Result<f64> {
    let starts = data.window_starts(context + 1);
    anyhow::ensure!(!starts.is_empty(), "no held-out window of {context} tokens");
    let mut total = 0.0;
    for chunk in starts.chunks(batch) {
        let loss = model.loss(&data.batch(chunk, context + 1, device)?)?;
        total += f64::from(loss.to_scalar::<f32>()?) * chunk.len() as f64;
    }
    Ok(total / starts.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warmup_rises_then_cosine_falls_to_the_final_rate() {
        let schedule = Schedule {
            steps: 100,
            warmup: 10,
            peak_lr: 1e-2,
            final_lr: 1e-3,
            batch: 1,
            weight_decay: 0.0,
        };
        assert!(schedule.lr(0) < schedule.lr(5));
        assert!((schedule.lr(9) - 1e-2).abs() < 1e-12);
        assert!(schedule.lr(50) < schedule.lr(20));
        assert!((schedule.lr(100) - 1e-3).abs() < 1e-12);
    }

    #[test]
    fn windows_start_at_stories_that_have_room() {
        let data = TokenStream::new([vec![1, 5, 6, 2], vec![1, 7, 2], vec![1, 2]]);
        assert_eq!(data.window_starts(2), [0, 4, 7]);
        assert_eq!(data.window_starts(5), [0, 4]);
        assert_eq!(data.window_starts(6), [0]);
        let batch = data.batch(&[4], 5, &Device::Cpu).unwrap();
        assert_eq!(batch.to_vec2::<u32>().unwrap(), [[1, 7, 2, 1, 2]]);
    }
}
