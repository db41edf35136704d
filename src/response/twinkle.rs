//! twinkle's `SampleResponse` (`twinkle.data_format`), the shape samplab's own grew from, so that
//! a twinkle user can load samplab's results unchanged (`samplab sample --json --shape twinkle`).
//!
//! twinkle keeps one list per trajectory beside the trajectories instead of inside them, holds
//! each sample as a conversation, and knows two stop reasons.

use super::{SampleResponse as Run, StopReason as RunStopReason};
use serde::Serialize;

/// One run in twinkle's shape: the i-th entry of every list belongs to the i-th trajectory.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SampleResponse {
    pub trajectories: Vec<Trajectory>,
    /// Raw logprob of each generated token; null unless the run asked for logprobs.
    pub logprobs: Option<Vec<Vec<f32>>>,
    /// The prompt's logprobs, the same list for every trajectory, without the first token
    /// (which has none); null unless the run asked for them.
    pub prompt_logprobs: Option<Vec<Vec<f32>>>,
    pub stop_reason: Option<Vec<StopReason>>,
}

/// One sample as a conversation: the prompt, then the sample.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Trajectory {
    pub messages: Vec<Message>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Message {
    pub role: Role,
    pub content: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
}

/// twinkle's two stop reasons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StopReason {
    Length,
    Stop,
}

impl From<RunStopReason> for StopReason {
    /// Only a natural end (EOS, a stop token or string) is `stop`; a sample cut short by the
    /// user, by an error or by `repetition_detection` is `length`, as twinkle's vLLM sampler
    /// maps every other finish.
    fn from(reason: RunStopReason) -> Self {
        match reason {
            RunStopReason::Stop => StopReason::Stop,
            RunStopReason::Length
            | RunStopReason::Abort
            | RunStopReason::Error
            | RunStopReason::RepetitionDetected => StopReason::Length,
        }
    }
}

impl SampleResponse {
    /// `run` in twinkle's shape. `prompt` is the text the run was given: twinkle holds it as
    /// the user's message whether samplab sent it raw or through the chat template, since
    /// twinkle's messages are what a template is applied to.
    pub fn from_run(run: &Run, prompt: &str) -> Self {
        let count = run.trajectories.len();
        let prompt_logprobs = run
            .params
            .prompt_logprobs
            .and(run.prompt_logprobs.as_ref())
            .map(|logprobs| {
                let known: Vec<f32> = logprobs.iter().flatten().copied().collect();
                vec![known; count]
            });
        Self {
            trajectories: run
                .trajectories
                .iter()
                .map(|t| Trajectory {
                    messages: vec![
                        Message {
                            role: Role::User,
                            content: prompt.to_owned(),
                        },
                        Message {
                            role: Role::Assistant,
                            content: t.text.clone(),
                        },
                    ],
                })
                .collect(),
            logprobs: run.params.logprobs.map(|_| {
                run.trajectories
                    .iter()
                    .map(|t| t.logprobs.clone())
                    .collect()
            }),
            prompt_logprobs,
            stop_reason: Some(
                run.trajectories
                    .iter()
                    .map(|t| t.stop_reason.into())
                    .collect(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::SamplingParams;
    use crate::response::{Timings, Trajectory as RunTrajectory};
    use serde_json::json;

    fn run(params: SamplingParams, reasons: &[RunStopReason]) -> Run {
        Run {
            model: "stories260K".into(),
            prompt: None,
            params,
            prompt_token_ids: vec![1, 403, 407],
            prompt_logprobs: Some(vec![None, Some(-2.5), Some(-0.5)]),
            prompt_top_logprobs: None,
            trajectories: reasons
                .iter()
                .enumerate()
                .map(|(i, &stop_reason)| RunTrajectory {
                    index: i as u32,
                    seed: 42 + i as u64,
                    token_ids: vec![432],
                    text: format!(" sample {i}"),
                    stop_reason,
                    stop_matched: None,
                    logprobs: vec![-0.25 * (i + 1) as f32],
                    top_logprobs: None,
                    reported_probs: None,
                    alternatives: None,
                    cross_scores: None,
                    branch: None,
                    constraint: None,
                    entropy: None,
                    kept_entropy: None,
                    watched: None,
                    trace: None,
                    channels: None,
                })
                .collect(),
            stats: None,
            watch: None,
            prompt_watched: None,
            timings: Timings::default(),
            provenance: None,
        }
    }

    #[test]
    fn lists_sit_beside_the_trajectories_one_entry_each() {
        let params = SamplingParams {
            logprobs: Some(0),
            prompt_logprobs: Some(0),
            ..SamplingParams::default()
        };
        let reasons = [RunStopReason::Stop, RunStopReason::Length];
        let value =
            serde_json::to_value(SampleResponse::from_run(&run(params, &reasons), "Once")).unwrap();
        assert_eq!(
            value,
            json!({
                "trajectories": [
                    {"messages": [
                        {"role": "user", "content": "Once"},
                        {"role": "assistant", "content": " sample 0"},
                    ]},
                    {"messages": [
                        {"role": "user", "content": "Once"},
                        {"role": "assistant", "content": " sample 1"},
                    ]},
                ],
                "logprobs": [[-0.25], [-0.5]],
                "prompt_logprobs": [[-2.5, -0.5], [-2.5, -0.5]],
                "stop_reason": ["stop", "length"],
            })
        );
    }

    #[test]
    fn logprobs_are_null_unless_asked_and_every_cut_short_sample_is_length() {
        let reasons = [
            RunStopReason::Abort,
            RunStopReason::Error,
            RunStopReason::RepetitionDetected,
        ];
        let value = serde_json::to_value(SampleResponse::from_run(
            &run(SamplingParams::default(), &reasons),
            "Once",
        ))
        .unwrap();
        assert_eq!(value["logprobs"], json!(null));
        assert_eq!(value["prompt_logprobs"], json!(null));
        assert_eq!(value["stop_reason"], json!(["length", "length", "length"]));
    }
}
