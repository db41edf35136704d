//! `SampleResponse`: what one run returns, in samplab's own JSON shape (every field below), or
//! in twinkle's.

use crate::engine::events::TokenEvent;
use crate::model::text::chat_template::Message;
use crate::params::SamplingParams;
use crate::sampling::StageTrace;
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use std::borrow::Borrow;

pub mod alignment;
pub mod channels;
pub mod disagreement;
pub mod provenance;
pub mod results_file;
pub mod stats;
pub mod twinkle;

pub use disagreement::PerToken;
pub use provenance::Provenance;
pub use stats::{ConstraintStats, RunStats};

/// A watched token: the `watch` item as written (`" Yes"`, `#13`) and the token it names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Watched {
    pub name: String,
    pub id: u32,
    /// How many tokens the string makes when it is several: only the first is watched.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub first_of: Option<usize>,
}

/// The JSON layouts a run can be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ResponseShape {
    /// samplab's own SampleResponse: everything the run knows.
    #[default]
    Samplab,
    /// twinkle's SampleResponse: each sample as messages, per-sample lists beside them.
    Twinkle,
}

impl ResponseShape {
    /// Every shape, in the order the playground cycles them.
    pub fn all() -> &'static [ResponseShape] {
        <Self as clap::ValueEnum>::value_variants()
    }

    pub fn name(self) -> &'static str {
        match self {
            ResponseShape::Samplab => "samplab",
            ResponseShape::Twinkle => "twinkle",
        }
    }

    /// Pretty JSON of one response, or an array of them when models or parameter sets were
    /// compared: what `samplab sample --json` prints and the playground's `w` writes. `prompt`
    /// is the text the runs were given, which twinkle's shape holds as a message.
    pub fn json<R>(self, responses: &[R], prompt: &str) -> serde_json::Result<String>
    where
        R: Borrow<SampleResponse> + Serialize,
    {
        match self {
            ResponseShape::Samplab => one_or_array(responses),
            ResponseShape::Twinkle => {
                let shaped: Vec<twinkle::SampleResponse> = responses
                    .iter()
                    .map(|r| twinkle::SampleResponse::from_run(r.borrow(), prompt))
                    .collect();
                one_or_array(&shaped)
            }
        }
    }
}

/// Why a sample ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StopReason {
    /// max_tokens reached or the context window full.
    Length,
    /// EOS, a stop token id or a stop string.
    Stop,
    /// Cancelled by the user or superseded by a newer run.
    Abort,
    /// The model failed mid-run.
    Error,
    /// The tokens ended in a repeated pattern that `repetition_detection` looks for (vLLM's
    /// stop reason; its finish reason is `repetition`).
    #[serde(rename = "repetition_detected")]
    RepetitionDetected,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Length => "length",
            StopReason::Stop => "stop",
            StopReason::Abort => "abort",
            StopReason::Error => "error",
            StopReason::RepetitionDetected => "repetition_detected",
        }
    }
}

/// Why a sample ended, as the CLI's summaries and the playground's footers say it: `length`,
/// `stop "\n\n"` for a stop string, and for a stop token its own text when known
/// (`stop <|im_end|>`, `stop #13 "\n"` for one that is no special token), else its id.
pub fn stop_label(
    reason: StopReason,
    matched: Option<&StopMatched>,
    token_text: Option<&str>,
) -> String {
    match (reason, matched, token_text) {
        (StopReason::Stop, Some(StopMatched::Text(s)), _) => {
            format!("stop \"{}\"", s.escape_debug())
        }
        (StopReason::Stop, Some(StopMatched::Token(_)), Some(text))
            if text.starts_with('<') && text.ends_with('>') =>
        {
            format!("stop {text}")
        }
        (StopReason::Stop, Some(StopMatched::Token(id)), Some(text)) => {
            format!("stop #{id} \"{}\"", text.escape_debug())
        }
        (StopReason::Stop, Some(StopMatched::Token(id)), None) => format!("stop <token {id}>"),
        (reason, ..) => reason.as_str().to_owned(),
    }
}

/// What ended a sample with reason `stop`: a stop string, or a token id (EOS or listed in `stop`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum StopMatched {
    Text(String),
    Token(u32),
}

/// What a constraint (structured outputs) cut at one step.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConstraintStep {
    /// The share of the model's raw distribution the constraint refused.
    pub refused: f32,
    /// How many tokens it allowed; 1 means the token was forced.
    pub allowed: u32,
}

impl ConstraintStep {
    /// The constraint left one token: the model had no say.
    pub fn forced(&self) -> bool {
        self.allowed == 1
    }
}

/// One alternative at a position: `[token_id, text, logprob]` in JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopLogprob(pub u32, pub String, pub f32);

/// One sample of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trajectory {
    pub index: u32,
    pub seed: u64,
    pub token_ids: Vec<u32>,
    pub text: String,
    pub stop_reason: StopReason,
    pub stop_matched: Option<StopMatched>,
    /// Each generated token's number as `logprobs_mode` names it: by default its raw logprob
    /// (log_softmax of the model's logits).
    pub logprobs: Vec<f32>,
    /// Per generated token, the `logprobs` best alternatives by the same numbers, then the
    /// token itself if it is not among them, as vLLM returns them; present when `logprobs`
    /// was asked.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub top_logprobs: Option<Vec<Vec<TopLogprob>>>,
    /// Per generated token, its probability in the distribution `logprobs_mode` reports from,
    /// written when the mode reports logits, which are no probabilities (else it is the exp of
    /// `logprobs`): the colour a rendered page gives it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub reported_probs: Option<Vec<f32>>,
    /// Per generated token, the alternatives the playground's inspector lists (the best by raw
    /// logprob, then the chosen token when it is not among them), whatever `logprobs` asked:
    /// a results file keeps them so that `samplab render` can colour, name and inspect every
    /// token as the playground does. `top_logprobs` stays what `logprobs` asked for.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub alternatives: Option<Vec<Vec<TopLogprob>>>,
    /// Per generated token, the entropy (nats) of the raw distribution at that step; absent
    /// from a served model, which sends no whole distribution.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub entropy: Option<Vec<f32>>,
    /// The same of the processed distribution the token was drawn from (0 where one token was
    /// left).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub kept_entropy: Option<Vec<f32>>,
    /// Per watched token (the response's `watch`), its raw logprob at each generated token;
    /// absent without `watch`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub watched: Option<IndexMap<String, Vec<f32>>>,
    /// How likely the other models of a comparison find this sample; absent for one model.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cross_scores: Option<Vec<CrossScore>>,
    /// Where a branch came from; absent for the run's own samples.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub branch: Option<BranchOrigin>,
    /// Per generated token, what the run's constraint cut; absent without one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub constraint: Option<Vec<ConstraintStep>>,
    /// Per generated token, what each stage of the chain did to it and its alternatives;
    /// recorded only when asked (`samplab sample --trace`), for a page that shows it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub trace: Option<Vec<StepTrace>>,
    /// Per generated token, the harmony channel it is written in (gpt-oss: `analysis` or
    /// `final`; null for the format's own tokens); absent where no token was in a channel.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub channels: Option<Vec<Option<channels::Channel>>>,
}

/// One step traced through the chain: the tokens followed (the best alternatives by raw
/// logprob, the chosen one among them), and for the model and each stage that changed any of
/// them, every one's logit and probability, null once a stage cut it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepTrace {
    pub tokens: Vec<TopLogprob>,
    pub stages: Vec<StageTrace>,
}

impl Trajectory {
    /// Sample `index`, seeded `seed`, before its first token; it keeps alternatives when
    /// `logprobs` asks for them.
    pub fn empty(index: u32, seed: u64, logprobs: Option<u32>) -> Self {
        Self {
            index,
            seed,
            token_ids: Vec::new(),
            text: String::new(),
            stop_reason: StopReason::Length,
            stop_matched: None,
            logprobs: Vec::new(),
            top_logprobs: logprobs.map(|_| Vec::new()),
            reported_probs: None,
            alternatives: None,
            entropy: None,
            kept_entropy: None,
            watched: None,
            cross_scores: None,
            branch: None,
            constraint: None,
            trace: None,
            channels: None,
        }
    }

    /// Keeps the alternatives of each token from this sample's token `events` (see
    /// `alternatives`); events that spell other tokens than the trajectory's keep nothing, so
    /// that no token is shown with another's alternatives, and a sample without tokens has
    /// none to keep.
    pub fn keep_alternatives<'e>(&mut self, events: impl IntoIterator<Item = &'e TokenEvent>) {
        let (ids, alternatives): (Vec<u32>, Vec<Vec<TopLogprob>>) = events
            .into_iter()
            .map(|event| (event.id, event.top.iter().map(TopLogprob::from).collect()))
            .unzip();
        self.alternatives = (!ids.is_empty() && ids == self.token_ids).then_some(alternatives);
    }

    /// Each generated token's probability in the distribution its `logprobs` come from:
    /// `reported_probs` where written, else the exp of `logprobs`.
    pub fn reported_probs(&self) -> Vec<f32> {
        match &self.reported_probs {
            Some(probs) => probs.clone(),
            None => self.logprobs.iter().map(|l| l.exp()).collect(),
        }
    }

    /// Drops the channels where no token was in one: only a harmony reply, or a server's
    /// split-off reasoning, says which channel its tokens are in.
    pub fn without_empty_channels(mut self) -> Self {
        if self
            .channels
            .as_ref()
            .is_some_and(|c| c.iter().all(Option::is_none))
        {
            self.channels = None;
        }
        self
    }
}

/// A branch's place in its sample's tree: it follows trajectory `parent` up to token `at`,
/// where it took another token (or, in step mode, where stepping began).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BranchOrigin {
    pub parent: u32,
    pub at: u32,
}

/// Pretty JSON of the one item, or of them all as an array.
fn one_or_array<T: Serialize>(responses: &[T]) -> serde_json::Result<String> {
    match responses {
        [one] => serde_json::to_string_pretty(one),
        several => serde_json::to_string_pretty(several),
    }
}

/// The mean logprob of `tokens` tokens whose logprobs sum to `sum`, and its perplexity;
/// (0, 1) for no tokens.
pub fn mean_and_perplexity(sum: f64, tokens: usize) -> (f64, f64) {
    let mean = if tokens == 0 {
        0.0
    } else {
        sum / tokens as f64
    };
    (mean, (-mean).exp())
}

/// One sample's likelihood under another model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CrossScore {
    /// The scoring model.
    pub model: String,
    pub sample: u32,
    /// Tokens scored: the sample's own, or the scoring model's tokenization of its text.
    pub tokens: usize,
    /// Mean raw logprob per scored token; 0 for an empty sample.
    pub mean_logprob: f64,
    pub perplexity: f64,
    /// The text was tokenized again because the vocabularies differ.
    pub retokenized: bool,
    /// The scoring model has no chat template: it scored the sample after the sampling model's
    /// rendering of the conversation, not after its own.
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub foreign_prompt: bool,
    /// Each token under the scoring model (see [`disagreement`]); absent from scorers that do
    /// not compute it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub per_token: Option<PerToken>,
}

impl CrossScore {
    /// The perplexity as a column's footer shows it: `8.10`, then `*` when the text was
    /// tokenized again and `†` when it was scored after the sampling model's chat template.
    pub fn perplexity_label(&self) -> String {
        let retokenized = if self.retokenized { "*" } else { "" };
        let foreign = if self.foreign_prompt { "†" } else { "" };
        format!("{:.2}{retokenized}{foreign}", self.perplexity)
    }
}

/// How long the run took.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Timings {
    pub prefill_ms: f64,
    pub decode_ms: f64,
    /// Tokens decoded (not replayed) by all samples divided by the decode time.
    pub decode_tok_per_s: f64,
    /// Prompt positions run through the model; the rest came from the prompt cache.
    #[serde(default)]
    pub prefill_tokens: usize,
    /// Tokens sampled from the logits the run before kept.
    #[serde(default)]
    pub tokens_replayed: u32,
    /// Tokens sampled from logits computed by this run.
    #[serde(default)]
    pub tokens_decoded: u32,
}

/// The text a run was asked about, as a results file keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptText {
    /// The raw prompt, or in chat mode the last user message.
    pub text: String,
    pub chat: bool,
    /// In chat mode, the whole conversation the template got (system message, earlier turns,
    /// the last user message).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub messages: Vec<Message>,
    /// What the chat template made of the conversation: what the model saw.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rendered: Option<String>,
    /// Special-token text in the prompt (or the last user message) stayed plain text
    /// (`--literal-specials`).
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub literal_specials: bool,
}

/// The result of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SampleResponse {
    pub model: String,
    /// The prompt as typed and, in chat mode, as the template rendered it; `None` for runs
    /// given token ids.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub prompt: Option<PromptText>,
    pub params: SamplingParams,
    pub prompt_token_ids: Vec<u32>,
    /// Raw logprob of each prompt token given those before it; the first is always null.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub prompt_logprobs: Option<Vec<Option<f32>>>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub prompt_top_logprobs: Option<Vec<Option<Vec<TopLogprob>>>>,
    /// The tokens `watch` named, as the model's tokenizer read them; absent without `watch`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub watch: Option<Vec<Watched>>,
    /// Per watched token, its raw logprob at each prompt position (none at the first), when
    /// `prompt_logprobs` asks.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub prompt_watched: Option<IndexMap<String, Vec<Option<f32>>>>,
    pub trajectories: Vec<Trajectory>,
    /// The run's samples together (see [`RunStats`]).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub stats: Option<RunStats>,
    pub timings: Timings,
    /// What ran the run (see [`Provenance`]); absent from runs given token ids, and from
    /// files of a samplab older than provenance.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub provenance: Option<Provenance>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_shape_matches_the_design() {
        let response = SampleResponse {
            model: "stories260K".into(),
            prompt: None,
            params: SamplingParams::default(),
            prompt_token_ids: vec![1, 403],
            prompt_logprobs: Some(vec![None, Some(-0.25)]),
            prompt_top_logprobs: None,
            trajectories: vec![Trajectory {
                index: 0,
                seed: 42,
                token_ids: vec![432, 2],
                text: ", there".into(),
                stop_reason: StopReason::Stop,
                stop_matched: Some(StopMatched::Token(2)),
                logprobs: vec![-0.5, -1.0],
                top_logprobs: Some(vec![vec![TopLogprob(432, ",".into(), -0.5)]]),
                reported_probs: None,
                alternatives: None,
                entropy: Some(vec![1.25, 0.5]),
                kept_entropy: Some(vec![0.75, 0.0]),
                watched: None,
                cross_scores: None,
                branch: None,
                constraint: None,
                trace: None,
                channels: None,
            }],
            stats: None,
            watch: None,
            prompt_watched: None,
            timings: Timings::default(),
            provenance: None,
        };
        let value = serde_json::to_value(&response).unwrap();
        assert_eq!(value["prompt_logprobs"], json!([null, -0.25]));
        let t = &value["trajectories"][0];
        assert_eq!(t["stop_reason"], json!("stop"));
        assert_eq!(t["stop_matched"], json!(2));
        assert_eq!(t["top_logprobs"][0][0], json!([432, ",", -0.5]));
        assert_eq!(t["seed"], json!(42));
        assert_eq!(t["entropy"], json!([1.25, 0.5]));
        let back: SampleResponse = serde_json::from_value(value).unwrap();
        assert_eq!(back, response);
    }

    /// vLLM's stop reason for `repetition_detection`, in JSON and in the footers alike.
    #[test]
    fn repetition_detected_is_its_own_stop_reason() {
        let reason = StopReason::RepetitionDetected;
        let json = serde_json::to_value(reason).unwrap();
        assert_eq!(json, json!("repetition_detected"));
        assert_eq!(serde_json::from_value::<StopReason>(json).unwrap(), reason);
        assert_eq!(stop_label(reason, None, None), "repetition_detected");
    }

    #[test]
    fn alternatives_are_kept_only_for_the_tokens_they_were_sent_with() {
        use crate::engine::events::Alternative;
        let event = |id: u32, top: &[(u32, &str)]| TokenEvent {
            sample: 0,
            id,
            text: String::new(),
            logprob: -0.5,
            prob: 0.6,
            reported_prob: 0.6,
            rank: 1,
            top: top
                .iter()
                .map(|&(id, text)| Alternative {
                    id,
                    text: text.into(),
                    logprob: -0.5,
                    prob: 0.6,
                })
                .collect(),
            entropy: None,
            watched: Vec::new(),
            constraint: None,
            channel: None,
        };
        let mut t = Trajectory {
            token_ids: vec![7, 2],
            ..Trajectory::empty(0, 1, None)
        };
        let events = [event(7, &[(7, " a"), (9, " b")]), event(2, &[(2, "</s>")])];
        t.keep_alternatives(&events);
        let kept = t
            .alternatives
            .as_ref()
            .expect("the events spell the tokens");
        assert_eq!(
            kept[0],
            [
                TopLogprob(7, " a".into(), -0.5),
                TopLogprob(9, " b".into(), -0.5)
            ]
        );
        assert_eq!(kept[1], [TopLogprob(2, "</s>".into(), -0.5)]);
        t.keep_alternatives(&events[..1]);
        assert_eq!(t.alternatives, None, "one token short: nothing kept");
    }

    #[test]
    fn stop_matched_text_is_a_string() {
        let value = serde_json::to_value(StopMatched::Text("\n\n".into())).unwrap();
        assert_eq!(value, json!("\n\n"));
    }
}
