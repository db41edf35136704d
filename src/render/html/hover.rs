//! What the page's hover shows of each token, as JSON for its script: the token's logprob and
//! entropy, its alternatives, the watched tokens at its step and, where the file recorded it,
//! the chain's trace told as the playground's inspector tells it. Numbers are rounded to what
//! the page prints, which keeps a long run's page small.

use crate::response::{SampleResponse, StepTrace, Trajectory};
use crate::sampling::StageTrace;
use indexmap::IndexMap;
use serde::Serialize;
use std::collections::BTreeMap;

/// One run's tokens for the hover.
#[derive(Debug, Serialize)]
pub struct RunData<'a> {
    /// The text of every token id the file names one for (the alternatives', the traces').
    pub vocab: BTreeMap<u32, &'a str>,
    /// What the samples' `logprobs` are (`raw logprob`, …: the run's `logprobs_mode`).
    reports: &'static str,
    pub samples: Vec<SampleData<'a>>,
}

/// One token's alternatives as `[id, logprob]`, best first.
type Alternatives = Vec<(u32, Option<f64>)>;

/// One trajectory's tokens, each list in token order.
#[derive(Debug, Serialize)]
pub struct SampleData<'a> {
    ids: &'a [u32],
    logprobs: Vec<Option<f64>>,
    /// Per token, its probability in the distribution its logprobs come from.
    probs: Vec<Option<f64>>,
    /// Per token, its alternatives: the playground's (which hold `top_logprobs` and more),
    /// else those `logprobs` asked for; absent from a file with neither.
    alternatives: Option<Vec<Alternatives>>,
    entropy: Option<Vec<Option<f64>>>,
    kept_entropy: Option<Vec<Option<f64>>>,
    watched: Option<IndexMap<&'a str, Vec<Option<f64>>>>,
    /// Per token, what the chain did; absent when the file recorded no trace.
    chain: Option<Vec<Chain<'a>>>,
}

/// One step's trace as the inspector says it.
#[derive(Debug, Serialize)]
pub struct Chain<'a> {
    /// The chosen token's probability after the model and each stage that acted; null where
    /// a stage cut it (a token a branch forced).
    chosen: Vec<(&'a str, Option<f64>)>,
    /// Every other traced token that a stage shifted or cut, and what befell it.
    fates: Vec<(&'a str, Vec<String>)>,
}

impl<'a> RunData<'a> {
    pub fn of(response: &'a SampleResponse) -> Self {
        let mut vocab = BTreeMap::new();
        for t in &response.trajectories {
            let alternatives = t
                .top_logprobs
                .iter()
                .chain(&t.alternatives)
                .flatten()
                .flatten();
            let traced = t.trace.iter().flatten().flat_map(|step| &step.tokens);
            for top in alternatives.chain(traced) {
                vocab.entry(top.0).or_insert(top.1.as_str());
            }
        }
        let samples = response.trajectories.iter().map(SampleData::of).collect();
        Self {
            vocab,
            reports: response.params.logprobs_mode.number_name(),
            samples,
        }
    }

    /// The text of every token of `trajectory`, where the file has them all.
    pub fn token_texts(&self, trajectory: &Trajectory) -> Option<Vec<&'a str>> {
        trajectory
            .token_ids
            .iter()
            .map(|id| self.vocab.get(id).copied())
            .collect()
    }
}

impl<'a> SampleData<'a> {
    fn of(t: &'a Trajectory) -> Self {
        Self {
            ids: &t.token_ids,
            logprobs: rounded(&t.logprobs),
            probs: rounded(&t.reported_probs()),
            alternatives: t
                .alternatives
                .as_ref()
                .or(t.top_logprobs.as_ref())
                .map(|tops| {
                    tops.iter()
                        .map(|top| top.iter().map(|a| (a.0, round(a.2))).collect())
                        .collect()
                }),
            entropy: t.entropy.as_deref().map(rounded),
            kept_entropy: t.kept_entropy.as_deref().map(rounded),
            watched: t.watched.as_ref().map(|watched| {
                watched
                    .iter()
                    .map(|(name, series)| (name.as_str(), rounded(series)))
                    .collect()
            }),
            chain: t.trace.as_ref().map(|steps| {
                steps
                    .iter()
                    .zip(&t.token_ids)
                    .map(|(step, &id)| Chain::of(step, id))
                    .collect()
            }),
        }
    }
}

impl<'a> Chain<'a> {
    fn of(step: &'a StepTrace, chosen: u32) -> Self {
        let index = step.tokens.iter().position(|t| t.0 == chosen);
        let chosen = match index {
            Some(index) => StageTrace::acting(&step.stages)
                .map(|stage| {
                    let p = stage.tokens.get(index).copied().flatten();
                    (&*stage.stage, p.and_then(|(_, p)| round(p)))
                })
                .collect(),
            None => Vec::new(),
        };
        let fates = step
            .tokens
            .iter()
            .enumerate()
            .filter(|&(i, _)| Some(i) != index)
            .map(|(i, token)| (token.1.as_str(), StageTrace::fate(&step.stages, i)))
            .filter(|(_, fate)| !fate.is_empty())
            .collect();
        Self { chosen, fates }
    }
}

/// To the thousandth, which the page shows; `None` (null) for what is not a number.
fn round(x: f32) -> Option<f64> {
    x.is_finite()
        .then(|| (f64::from(x) * 1000.0).round() / 1000.0)
}

fn rounded(values: &[f32]) -> Vec<Option<f64>> {
    values.iter().map(|&x| round(x)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::response::TopLogprob;

    #[test]
    fn a_traced_step_reads_as_the_inspector_reads_it() {
        let step = StepTrace {
            tokens: vec![
                TopLogprob(7, " a".into(), -0.5),
                TopLogprob(3, " b".into(), -1.0),
                TopLogprob(9, " c".into(), -2.0),
            ],
            stages: vec![
                StageTrace::new(
                    "model",
                    vec![Some((2.0, 0.5)), Some((1.0, 0.3)), Some((0.1, 0.2))],
                ),
                StageTrace::new(
                    "DRY",
                    vec![Some((2.0, 0.6)), Some((-1.1, 0.05)), Some((0.1, 0.35))],
                ),
                StageTrace::new("top_p", vec![Some((2.0, 0.63157)), None, Some((0.1, 0.37))]),
            ],
        };
        let chain = Chain::of(&step, 3);
        assert_eq!(
            chain.chosen,
            [("model", Some(0.3)), ("DRY", Some(0.05)), ("top_p", None)]
        );
        assert!(chain.fates.is_empty(), "the others went through untouched");
        let chain = Chain::of(&step, 7);
        assert_eq!(chain.chosen[2], ("top_p", Some(0.632)));
        assert_eq!(
            chain.fates,
            [(
                " b",
                vec!["DRY -2.10".to_owned(), "cut by top_p".to_owned()]
            )]
        );
    }

    #[test]
    fn numbers_are_rounded_and_what_is_no_number_is_null() {
        assert_eq!(
            rounded(&[-0.123_456, f32::NEG_INFINITY]),
            [Some(-0.123), None]
        );
    }
}
