//! The sampling model's raw distributions, handed to the model that scores its samples so that
//! the scorer can compute KL per token (see [`crate::response::disagreement`]).
//!
//! KL(A‖B) = Σ p_A log p_A − Σ p_A log p_B: the second sum needs both full rows in one place,
//! and a run's rows are far too big to gather (8 samples × 256 tokens of Gemma's 262,144-token
//! vocabulary are 2 GB). So the sampling model's worker recomputes its rows one sample at a
//! time, teacher-forcing the very ids it sampled (one prefill after the cached prompt), and
//! sends each over a channel that holds one sample; the scoring worker takes them in order as
//! it teacher-forces the same sample itself. At most three of the sampling model's samples
//! are alive (one being computed, one waiting, one being compared) beside the scorer's own
//! rows of the sample it compares, whatever the run's size; the sender waits while the scorer
//! is behind, and gives up when the scorer drops the request.
//!
//! The two requests (rows here, the score there) are queued together on the two workers, each
//! behind the scores queued before it, so one worker's rows never wait on the other's. A run
//! asked of the sampling model meanwhile goes first: its rows give up, and the KL of the
//! (by then stale) samples is null with the reason.
//!
//! A model with another vocabulary cannot use the rows; it asks the same way for the bytes each
//! sampled token stands for instead, to line its own tokenization up with the sample's (see
//! [`crate::response::alignment`]). Those only the sampling model's tokenizer knows.

use super::backend::Backend;
use super::events::RunId;
use crate::model::text::{Specials, text_bytes};
use std::fmt;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokenizers::Tokenizer;

/// What the scorer needs of each sample: the rows with one vocabulary, the bytes with two.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wanted {
    Rows,
    Bytes,
}

/// One sample's rows or bytes, as [`Wanted`].
pub struct SampleRows {
    pub index: u32,
    pub facts: Facts,
}

pub enum Facts {
    /// The raw logits: `rows[j]` is the distribution token `j` was sampled from.
    Rows(Vec<Vec<f32>>),
    /// The bytes token `j` adds to the sample's text (none for a special token).
    Bytes(Vec<Vec<u8>>),
}

/// A sample's rows, or why the sampling model cannot give them.
pub type Rows = Result<SampleRows, String>;

/// Asks the sampling model for the rows (or bytes) of its samples, in order, into `to`.
pub struct RowsRequest {
    /// The run whose samples these are (a cancel of it stops the rows).
    pub run_id: RunId,
    pub wanted: Wanted,
    pub prompt_token_ids: Vec<u32>,
    /// Each sample's index and token ids.
    pub samples: Vec<(u32, Vec<u32>)>,
    pub to: SyncSender<Rows>,
}

impl fmt::Debug for RowsRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RowsRequest")
            .field("run_id", &self.run_id)
            .field("wanted", &self.wanted)
            .field("samples", &self.samples.len())
            .finish_non_exhaustive()
    }
}

/// The scorer's end: the sampling model's rows as they come.
#[derive(Clone)]
pub struct RowFeed(Arc<Mutex<Feed>>);

struct Feed {
    from: Receiver<Rows>,
    /// Why the rows stopped coming, once they did: the answer for every later sample too.
    failed: Option<String>,
}

/// A score request is compared by what it asks; two feeds are the same only if they are one.
impl PartialEq for RowFeed {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl fmt::Debug for RowFeed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RowFeed")
    }
}

/// A channel that holds one sample's rows.
pub fn row_channel() -> (SyncSender<Rows>, RowFeed) {
    let (to, from) = sync_channel(1);
    let feed = Feed { from, failed: None };
    (to, RowFeed(Arc::new(Mutex::new(feed))))
}

impl RowFeed {
    /// The rows of sample `index`, which the sampling model sends in the order of its samples;
    /// or why there are none.
    pub fn rows_of(&self, index: u32) -> Result<Vec<Vec<f32>>, String> {
        match self.facts_of(index)? {
            Facts::Rows(rows) => Ok(rows),
            Facts::Bytes(_) => Err("the sampling model sent bytes, not distributions".to_owned()),
        }
    }

    /// The bytes of each token of sample `index` (see [`Wanted::Bytes`]), or why there are none.
    pub fn bytes_of(&self, index: u32) -> Result<Vec<Vec<u8>>, String> {
        match self.facts_of(index)? {
            Facts::Bytes(bytes) => Ok(bytes),
            Facts::Rows(_) => Err("the sampling model sent distributions, not bytes".to_owned()),
        }
    }

    fn facts_of(&self, index: u32) -> Result<Facts, String> {
        let mut feed = self
            .0
            .lock()
            .map_err(|_| "the sampling model's rows were lost".to_owned())?;
        if let Some(why) = &feed.failed {
            return Err(why.clone());
        }
        loop {
            let why = match feed.from.recv() {
                Ok(Ok(rows)) if rows.index == index => return Ok(rows.facts),
                // A sample the scorer skipped (it had nothing to score).
                Ok(Ok(rows)) if rows.index < index => continue,
                Ok(Ok(_)) => return Err(format!("nothing came for sample {index}")),
                Ok(Err(why)) => why,
                Err(_) => "the sampling model stopped before giving its distributions (a newer \
                           run went first, or it failed)"
                    .to_owned(),
            };
            feed.failed = Some(why.clone());
            return Err(why);
        }
    }
}

/// Sends the rows of each sample of `request`, recomputed by teacher forcing; stops quietly
/// when the scorer has gone or `interrupted` says so.
pub fn serve_rows(
    backend: &mut dyn Backend,
    request: &RowsRequest,
    interrupted: &mut dyn FnMut() -> bool,
) -> anyhow::Result<()> {
    let prompt = &request.prompt_token_ids;
    if prompt.is_empty() {
        anyhow::bail!("the run has no prompt tokens to recompute its distributions after");
    }
    for (index, tokens) in &request.samples {
        let ids = [&prompt[..], &tokens[..]].concat();
        let context = backend.context_length();
        if ids.len() > context {
            anyhow::bail!(
                "sample {index} has {} tokens with its prompt, more than the context of {context}",
                ids.len()
            );
        }
        let mut rows = backend.prefill(&ids, prompt.len() - 1)?.logits;
        rows.truncate(tokens.len());
        if !send(
            &request.to,
            Ok(SampleRows {
                index: *index,
                facts: Facts::Rows(rows),
            }),
            interrupted,
        ) {
            break;
        }
    }
    Ok(())
}

/// Sends the bytes of each sampled token of `request` (special tokens none, as the text is
/// decoded without them); stops quietly when the scorer has gone.
pub fn serve_bytes(
    tokenizer: &Tokenizer,
    request: &RowsRequest,
    interrupted: &mut dyn FnMut() -> bool,
) {
    for (index, tokens) in &request.samples {
        let bytes = text_bytes(tokenizer, tokens, Specials::Skipped);
        let sample = SampleRows {
            index: *index,
            facts: Facts::Bytes(bytes),
        };
        if !send(&request.to, Ok(sample), interrupted) {
            break;
        }
    }
}

/// Sends `rows` once the channel has room; false when the scorer has gone or the job was
/// interrupted meanwhile.
pub fn send(to: &SyncSender<Rows>, rows: Rows, interrupted: &mut dyn FnMut() -> bool) -> bool {
    let mut rows = rows;
    loop {
        match to.try_send(rows) {
            Ok(()) => return true,
            Err(TrySendError::Disconnected(_)) => return false,
            Err(TrySendError::Full(back)) => {
                if interrupted() {
                    return false;
                }
                rows = back;
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    }
}
