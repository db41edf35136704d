//! Cross-scoring: how likely one model finds another's finished samples.
//!
//! With the same vocabulary the very token ids are teacher-forced (prompt and sample), so the
//! score is exactly comparable to the sampling model's own logprobs. With another vocabulary
//! the texts are tokenized again by the scoring model, and the result is marked as such: its
//! per-token mean is over a different number of tokens, and the sample's own tokens get the
//! figures of the byte spans the two tokenizations share (see [`crate::response::alignment`]).
//!
//! A conversation is framed by the scoring model's own chat template, as it would have been
//! had that model sampled it; a model without a template scores the samples after the
//! sampling model's rendering instead, and the score says so.

use super::backend::Backend;
use super::disagreement::{RowFeed, Rows, RowsRequest, Wanted};
use super::events::RunId;
use super::prompt::Prompt;
use crate::params::SamplingParams;
use crate::response::alignment::{Scored, align};
use crate::response::disagreement::{kl_divergence, rank_of};
use crate::response::{CrossScore, PerToken, SampleResponse, mean_and_perplexity};
use crate::sampling::Sampler;
use std::sync::mpsc::SyncSender;

/// The finished samples of one run, to be scored by another model.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoreRequest {
    /// The run that produced the samples; the scores come back under this id.
    pub run_id: RunId,
    /// The producing model's vocabulary fingerprint: equal to ours means the ids are ours too.
    pub vocab: u64,
    /// What the samples answer: the scoring model frames a conversation with its own template.
    pub prompt: Prompt,
    /// The producing model's rendering of a conversation, which a scoring model without a chat
    /// template scores the samples after.
    pub rendered: Option<String>,
    pub prompt_token_ids: Vec<u32>,
    pub samples: Vec<ScoreSample>,
    /// The sampling model's raw distributions, for KL per token, or with another vocabulary the
    /// bytes of its tokens (see [`super::disagreement`]); without it those figures are null.
    pub feed: Option<RowFeed>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ScoreSample {
    pub index: u32,
    pub text: String,
    pub token_ids: Vec<u32>,
}

impl ScoreRequest {
    pub fn new(run_id: RunId, vocab: u64, prompt: &Prompt, response: &SampleResponse) -> Self {
        Self {
            run_id,
            vocab,
            prompt: prompt.clone(),
            rendered: response.prompt.as_ref().and_then(|p| p.rendered.clone()),
            prompt_token_ids: response.prompt_token_ids.clone(),
            samples: response
                .trajectories
                .iter()
                .map(|t| ScoreSample {
                    index: t.index,
                    text: t.text.clone(),
                    token_ids: t.token_ids.clone(),
                })
                .collect(),
            feed: None,
        }
    }

    /// What a scorer whose vocabulary fingerprint is `scorer_vocab` needs of the sampling
    /// model: its distributions with the same vocabulary, its tokens' bytes with another.
    pub fn wanted_by(&self, scorer_vocab: u64) -> Wanted {
        if scorer_vocab == self.vocab {
            Wanted::Rows
        } else {
            Wanted::Bytes
        }
    }

    /// Asks the sampling model for the rows (or bytes) of the samples this request scores,
    /// into `to`.
    pub fn rows_request(&self, wanted: Wanted, to: SyncSender<Rows>) -> RowsRequest {
        RowsRequest {
            run_id: self.run_id,
            wanted,
            prompt_token_ids: self.prompt_token_ids.clone(),
            samples: self
                .samples
                .iter()
                .map(|s| (s.index, s.token_ids.clone()))
                .collect(),
            to,
        }
    }

    /// The same request with the sampling model's rows coming from `feed`.
    pub fn with_feed(self, feed: RowFeed) -> Self {
        Self {
            feed: Some(feed),
            ..self
        }
    }
}

/// A token sequence and where in it the sample starts.
pub struct Scoring {
    pub ids: Vec<u32>,
    pub start: usize,
    /// With another vocabulary: `ids` is this model's tokenization of the text.
    pub retokenized: Option<Retokenized>,
}

/// A sample's text as this model tokenized it again.
pub struct Retokenized {
    /// The sample's text, which `ids` end with.
    pub text: String,
    /// The bytes each of `ids` stands for.
    pub bytes: Vec<Vec<u8>>,
}

/// Scores one sequence: the raw logprob of every token from `start` on, given those before it,
/// from a single prefill over the whole sequence. With the sample's own ids (one vocabulary)
/// each token's figures come too, and its KL where `feed` gives the sampling model's rows;
/// with another, each token's figures where `feed` gives the bytes of the sample's tokens.
pub fn score_sequence(
    backend: &mut dyn Backend,
    model: &str,
    sample: u32,
    scoring: &Scoring,
    feed: Option<&RowFeed>,
) -> anyhow::Result<CrossScore> {
    let Scoring {
        ids,
        start,
        retokenized,
    } = scoring;
    let context = backend.context_length();
    if ids.len() > context {
        anyhow::bail!(
            "sample {sample} has {} tokens with its prompt, more than the scoring model's context \
             of {context}",
            ids.len()
        );
    }
    // The first token has nothing before it to be scored on.
    let start = (*start).max(1);
    let tokens = ids.len().saturating_sub(start);
    let mut figures = Figures::default();
    if tokens > 0 {
        figures = token_figures(backend, ids, start, retokenized.is_none())?;
    }
    let sum = figures.logprobs.iter().map(|&l| f64::from(l)).sum::<f64>();
    let (mean_logprob, perplexity) = mean_and_perplexity(sum, tokens);
    let per_token = match retokenized {
        Some(retokenized) => {
            let own = match feed {
                None => Err("the sampling model's tokens were not asked for".to_owned()),
                Some(feed) => feed.bytes_of(sample),
            };
            across_vocabularies(own, retokenized, start, &figures)
        }
        None => {
            let kl = match feed {
                None => Err("the sampling model's distributions were not asked for".to_owned()),
                Some(feed) => feed
                    .rows_of(sample)
                    .and_then(|own| kl_per_token(&own, &figures.rows)),
            };
            let (kl, null_reason) = match kl {
                Ok(kl) => (Some(kl), None),
                Err(reason) => (None, Some(format!("no KL: {reason}"))),
            };
            PerToken {
                logprobs: Some(figures.logprobs.into_iter().map(Some).collect()),
                ranks: Some(figures.ranks.into_iter().map(Some).collect()),
                kl,
                covers: None,
                null_reason,
            }
        }
    };
    Ok(CrossScore {
        model: model.to_owned(),
        sample,
        tokens,
        mean_logprob,
        perplexity,
        retokenized: retokenized.is_some(),
        foreign_prompt: false,
        per_token: Some(per_token),
    })
}

/// The figures of the sample's own tokens, whose bytes are `own`, from this model's `figures`
/// of its tokenization `ids[start..]` of the text (see [`crate::response::alignment`]).
///
/// This model's tokens are placed by bytes from the text's end, since the text ends the
/// sequence; the first one may begin inside the prompt (merged across its end), and then counts
/// as the sample's from byte 0. The sample's tokens are placed from the text's start, as far as
/// they spell it: past a stop string that cut the text (or text the sampling model's decoder
/// wrote otherwise than its tokens' bytes), a token has no figures.
fn across_vocabularies(
    own: Result<Vec<Vec<u8>>, String>,
    retokenized: &Retokenized,
    start: usize,
    figures: &Figures,
) -> PerToken {
    const DIFFERENT: &str = "the vocabularies differ, so KL (which needs one) is null";
    let own = match own {
        Ok(own) => own,
        Err(reason) => {
            return PerToken::unavailable(format!(
                "{DIFFERENT}, and the sampling model's tokens cannot be lined up with this \
                 model's: {reason}"
            ));
        }
    };
    let text = retokenized.text.as_bytes();
    let theirs = retokenized.bytes.get(start..).unwrap_or_default();
    let spelled_by_scorer: Vec<u8> = theirs.concat();
    let Some(offset) = spelled_by_scorer
        .ends_with(text)
        .then(|| spelled_by_scorer.len() - text.len())
    else {
        return PerToken::unavailable(format!(
            "{DIFFERENT}, and this model's tokens do not spell the sample's text back"
        ));
    };
    let mut end = 0;
    let scorer: Vec<Scored> = theirs
        .iter()
        .zip(figures.logprobs.iter().zip(&figures.ranks))
        .map(|(bytes, (&logprob, &rank))| {
            end += bytes.len();
            Scored {
                end: end.saturating_sub(offset),
                logprob,
                rank,
            }
        })
        .collect();
    let spelled = common_prefix(&own.concat(), text);
    let lengths: Vec<usize> = own.iter().map(Vec::len).collect();
    let own_bytes: usize = lengths.iter().sum();
    let aligned = align(&lengths, spelled, &scorer);
    let mut reason = format!(
        "{DIFFERENT}; each logprob is of the bytes of the `covers` tokens ending with it, from \
         this model's own tokens over them, null inside such a group and for a token of no \
         text; a rank only where the token is one of this model's"
    );
    if spelled < text.len() || own_bytes > spelled {
        reason.push_str(&format!(
            "; tokens past byte {spelled} of the text are null: the sample's tokens spell \
             {own_bytes} bytes, its text has {} (a stop string cut it, or it was decoded \
             otherwise)",
            text.len()
        ));
    }
    PerToken {
        logprobs: Some(aligned.logprobs),
        ranks: Some(aligned.ranks),
        kl: None,
        covers: Some(aligned.covers),
        null_reason: Some(reason),
    }
}

/// Each scored token's raw logprob and rank, and with `keep` the rows they came from.
#[derive(Default)]
struct Figures {
    logprobs: Vec<f32>,
    ranks: Vec<u32>,
    rows: Vec<Vec<f32>>,
}

/// The figures of `ids[start..]`, teacher-forced in one prefill.
fn token_figures(
    backend: &mut dyn Backend,
    ids: &[u32],
    start: usize,
    keep: bool,
) -> anyhow::Result<Figures> {
    // Only the positions past the prompt cache's shared prefix (the prompt) are run.
    let mut rows = backend.prefill(ids, start - 1)?.logits;
    let mut sampler = Sampler::new(&SamplingParams::default())?;
    let mut figures = Figures::default();
    for position in start..ids.len() {
        let logits = rows.get(position - start).ok_or_else(|| {
            anyhow::anyhow!(
                "the model returned {} logit rows for {} tokens",
                rows.len(),
                ids.len()
            )
        })?;
        let id = ids[position];
        figures.logprobs.push(sampler.score(logits, id, 0)?.logprob);
        figures.ranks.push(
            rank_of(logits, id)
                .ok_or_else(|| anyhow::anyhow!("token {id} is not in the vocabulary"))?,
        );
    }
    if keep {
        rows.truncate(ids.len() - start);
        figures.rows = rows;
    }
    Ok(figures)
}

/// KL per token of the sampling model's rows `own` from the scoring model's `other`.
fn kl_per_token(own: &[Vec<f32>], other: &[Vec<f32>]) -> Result<Vec<f64>, String> {
    if own.len() != other.len() {
        return Err(format!(
            "the sampling model gave {} distributions for {} tokens",
            own.len(),
            other.len()
        ));
    }
    own.iter()
        .zip(other)
        .map(|(a, b)| {
            if a.len() == b.len() {
                Ok(kl_divergence(a, b))
            } else {
                Err(format!(
                    "distributions of {} and {} tokens",
                    a.len(),
                    b.len()
                ))
            }
        })
        .collect()
}

/// The length of the shared beginning of two sequences: where a re-tokenized sample starts
/// (a token merged across the prompt's end counts as the sample's), and where two samples
/// sharing a seed part.
pub fn common_prefix<T: PartialEq>(a: &[T], b: &[T]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}
