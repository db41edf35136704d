//! Cross-scoring: how likely one model finds another's finished samples.
//!
//! With the same vocabulary the very token ids are teacher-forced (prompt and sample), so the
//! score is exactly comparable to the sampling model's own logprobs. With another vocabulary
//! the texts are tokenized again by the scoring model, and the result is marked as such: its
//! per-token mean is over a different number of tokens.
//!
//! A conversation is framed by the scoring model's own chat template, as it would have been
//! had that model sampled it; a model without a template scores the samples after the
//! sampling model's rendering instead, and the score says so.

use super::backend::Backend;
use super::events::RunId;
use super::prompt::Prompt;
use crate::params::SamplingParams;
use crate::response::{CrossScore, SampleResponse, mean_and_perplexity};
use crate::sampling::Sampler;

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
        }
    }
}

/// A token sequence and where in it the sample starts.
pub struct Scoring {
    pub ids: Vec<u32>,
    pub start: usize,
    pub retokenized: bool,
}

/// Scores one sequence: the raw logprob of every token from `start` on, given those before it,
/// from a single prefill over the whole sequence.
pub fn score_sequence(
    backend: &mut dyn Backend,
    model: &str,
    sample: u32,
    scoring: &Scoring,
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
    let mut sum = 0.0f64;
    if tokens > 0 {
        sum = sum_logprobs(backend, ids, start)?;
    }
    let (mean_logprob, perplexity) = mean_and_perplexity(sum, tokens);
    Ok(CrossScore {
        model: model.to_owned(),
        sample,
        tokens,
        mean_logprob,
        perplexity,
        retokenized: *retokenized,
        foreign_prompt: false,
    })
}

/// The summed logprobs of `ids[start..]`, teacher-forced in one prefill.
fn sum_logprobs(backend: &mut dyn Backend, ids: &[u32], start: usize) -> anyhow::Result<f64> {
    // Only the positions past the prompt cache's shared prefix (the prompt) are run.
    let rows = backend.prefill(ids, start - 1)?.logits;
    let mut sampler = Sampler::new(&SamplingParams::default())?;
    let mut sum = 0.0f64;
    for position in start..ids.len() {
        let logits = rows.get(position - start).ok_or_else(|| {
            anyhow::anyhow!(
                "the model returned {} logit rows for {} tokens",
                rows.len(),
                ids.len()
            )
        })?;
        sum += f64::from(sampler.score(logits, ids[position], 0)?.logprob);
    }
    Ok(sum)
}

/// The length of the shared beginning of two sequences: where a re-tokenized sample starts
/// (a token merged across the prompt's end counts as the sample's), and where two samples
/// sharing a seed part.
pub fn common_prefix<T: PartialEq>(a: &[T], b: &[T]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}
