//! llama.cpp's context as samplab's rows: one sequence id holds the prompt cache, each row of
//! the batch and each parked row holds one of its own, and the KV cache is unified so that a
//! row copied from the prompt shares its cells instead of copying them.

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::{DecodeError, LlamaStateSeqFlags, SeqState};
use std::sync::{Arc, Mutex, PoisonError, Weak};

/// The prompt cache's sequence.
pub const PROMPT: i32 = 0;

/// A token to run: at `pos` of sequence `seq`, its logits wanted or not.
#[derive(Debug, Clone, Copy)]
pub struct Item {
    pub token: u32,
    pub pos: usize,
    pub seq: i32,
    pub logits: bool,
}

/// Where a parked row's cached positions are: still in the context under its own sequence id,
/// or saved out of it when the context needed the room.
enum Home {
    Seq(i32),
    Saved(SeqState),
    /// Back in the batch, which owns its sequence now.
    Joined,
}

/// A parked row's positions; dropping it frees its sequence for the next row.
pub struct Parked {
    home: Mutex<Home>,
    released: Arc<Mutex<Vec<i32>>>,
}

impl Drop for Parked {
    fn drop(&mut self) {
        let home = self.home.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Home::Seq(seq) = home {
            lock(&self.released).push(*seq);
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The context, its model, and which sequence ids are free.
pub struct Sequences {
    // Field order matters: the context points into the model and is dropped first.
    context: LlamaContext<'static>,
    model: Arc<LlamaModel>,
    batch: LlamaBatch<'static>,
    batch_size: usize,
    vocab: usize,
    free: Vec<i32>,
    /// Sequences whose parked rows were dropped, to be cleared before reuse.
    released: Arc<Mutex<Vec<i32>>>,
    parked: Vec<Weak<Parked>>,
}

impl Sequences {
    /// `context` must have been made from `model` with `seq_max` sequences and batches of
    /// `batch_size` tokens.
    pub fn new(
        model: Arc<LlamaModel>,
        context: LlamaContext<'_>,
        seq_max: u32,
        batch_size: usize,
    ) -> Self {
        // SAFETY: the context borrows the model, which this struct owns through an `Arc` and
        // drops after the context (field order); the lifetime only stands for that borrow.
        let context: LlamaContext<'static> = unsafe { std::mem::transmute(context) };
        let vocab = usize::try_from(model.n_vocab()).unwrap_or(0);
        Self {
            context,
            batch: LlamaBatch::new(batch_size, 1),
            batch_size,
            vocab,
            free: (1..seq_max as i32).rev().collect(),
            released: Arc::default(),
            parked: Vec::new(),
            model,
        }
    }

    pub fn model(&self) -> &LlamaModel {
        &self.model
    }

    pub fn vocab(&self) -> usize {
        self.vocab
    }

    /// Cells in the context, shared by every sequence.
    pub fn cells(&self) -> usize {
        self.context.n_ctx() as usize
    }

    /// A sequence id of its own for a new row, saving parked rows out of the context when
    /// none is free.
    pub fn take(&mut self) -> anyhow::Result<i32> {
        self.reclaim();
        if self.free.is_empty() {
            self.save_parked()?;
        }
        self.free.pop().ok_or_else(|| {
            anyhow::anyhow!(
                "llama.cpp's context has no sequence left for another row: fewer samples, or \
                 fewer branches, would fit"
            )
        })
    }

    /// Gives a row's sequence back, its cells cleared.
    pub fn give_back(&mut self, seq: i32) {
        let _ = self
            .context
            .clear_kv_cache_seq(Some(seq as u32), None, None);
        self.free.push(seq);
    }

    /// Clears the sequences of dropped parked rows.
    fn reclaim(&mut self) {
        let released: Vec<i32> = std::mem::take(&mut *lock(&self.released));
        for seq in released {
            self.give_back(seq);
        }
        self.parked.retain(|p| p.strong_count() > 0);
    }

    /// Moves every parked row still in the context out to host memory, freeing its cells and
    /// its sequence id; it comes back when it joins a batch again.
    fn save_parked(&mut self) -> anyhow::Result<bool> {
        let mut saved = false;
        let parked: Vec<Arc<Parked>> = self.parked.iter().filter_map(Weak::upgrade).collect();
        for parked in parked {
            let mut home = lock(&parked.home);
            if let Home::Seq(seq) = *home {
                let state = self
                    .context
                    .state_seq_get(seq, LlamaStateSeqFlags::default())
                    .map_err(|e| anyhow::anyhow!("llama.cpp could not save a row: {e}"))?;
                *home = Home::Saved(state);
                drop(home);
                self.give_back(seq);
                saved = true;
            }
        }
        self.parked.clear();
        Ok(saved)
    }

    /// Parks the row in `seq`, which it keeps until it joins again or is dropped.
    pub fn park(&mut self, seq: i32) -> Arc<Parked> {
        let parked = Arc::new(Parked {
            home: Mutex::new(Home::Seq(seq)),
            released: Arc::clone(&self.released),
        });
        self.parked.push(Arc::downgrade(&parked));
        parked
    }

    /// A parked row back in a sequence: its own if it still has it (the row is taken out of
    /// `parked`), else a new one its saved state is restored into.
    pub fn unpark(&mut self, parked: &Parked) -> anyhow::Result<i32> {
        let mut home = lock(&parked.home);
        let seq = match std::mem::replace(&mut *home, Home::Joined) {
            Home::Seq(seq) => seq,
            Home::Saved(state) => {
                drop(home);
                let seq = self.take()?;
                self.context
                    .state_seq_set(&state, seq)
                    .map_err(|e| anyhow::anyhow!("llama.cpp could not restore a row: {e}"))?;
                seq
            }
            Home::Joined => anyhow::bail!("a parked row joined the batch twice"),
        };
        Ok(seq)
    }

    /// A copy of a parked row's first `len` positions in a new sequence.
    pub fn copy_parked(&mut self, parked: &Parked, len: usize) -> anyhow::Result<i32> {
        let source = match &*lock(&parked.home) {
            Home::Seq(seq) => Ok(*seq),
            Home::Saved(state) => Err(state.clone()),
            Home::Joined => anyhow::bail!("a row in the batch cannot be copied as parked"),
        };
        let seq = self.take()?;
        match source {
            Ok(source) => self.copy(source, seq, len),
            Err(state) => {
                self.context
                    .state_seq_set(&state, seq)
                    .map_err(|e| anyhow::anyhow!("llama.cpp could not restore a row: {e}"))?;
                self.cut(seq, len)?;
            }
        }
        Ok(seq)
    }

    /// Copies `source`'s first `len` positions into `dest` (cells shared, not duplicated).
    pub fn copy(&mut self, source: i32, dest: i32, len: usize) {
        let _ = self
            .context
            .copy_kv_cache_seq(source, dest, Some(0), Some(len as u32));
    }

    /// Copies the whole of `source` into `dest`: a recurrent state can only be copied whole.
    pub fn copy_whole(&mut self, source: i32, dest: i32) {
        let _ = self.context.copy_kv_cache_seq(source, dest, None, None);
    }

    /// Drops `seq`'s positions from `len` on; false where llama.cpp cannot (a recurrent state
    /// cut anywhere but its end).
    pub fn cut(&mut self, seq: i32, len: usize) -> anyhow::Result<()> {
        self.context
            .kv_cache_seq_rm(seq, Some(len as u32), None)
            .map_err(|_| anyhow::anyhow!("llama.cpp cannot cut this model's state back to {len}"))
    }

    /// Runs `items` through the model, in batches it can take; returns the logits of those
    /// that want them, in order.
    pub fn run(&mut self, items: &[Item]) -> anyhow::Result<Vec<Vec<f32>>> {
        self.reclaim();
        let mut logits = Vec::new();
        for chunk in items.chunks(self.batch_size) {
            self.batch.clear();
            for item in chunk {
                self.batch
                    .add(
                        LlamaToken::new(item.token as i32),
                        item.pos as i32,
                        &[item.seq],
                        item.logits,
                    )
                    .map_err(|e| anyhow::anyhow!("llama.cpp's batch: {e}"))?;
            }
            match self.context.decode(&mut self.batch) {
                Err(DecodeError::NoKvCacheSlot) if self.save_parked()? => {
                    self.context
                        .decode(&mut self.batch)
                        .map_err(|e| self.decode_error(e))?;
                }
                result => result.map_err(|e| self.decode_error(e))?,
            }
            for (i, item) in chunk.iter().enumerate() {
                if item.logits {
                    logits.push(self.context.get_logits_ith(i as i32).to_vec());
                }
            }
        }
        Ok(logits)
    }

    fn decode_error(&self, error: DecodeError) -> anyhow::Error {
        match error {
            DecodeError::NoKvCacheSlot => anyhow::anyhow!(
                "llama.cpp's context is full: its {} positions hold the prompt and every \
                 sample's tokens together; set SAMPLAB_LLAMA_CTX to more (up to the model's \
                 trained context), or run fewer or shorter samples",
                self.cells()
            ),
            other => anyhow::anyhow!("llama.cpp could not run the batch: {other}"),
        }
    }
}
