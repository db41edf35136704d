//! The engine's narrow boundary: `Request` in, `Event` out, every event tagged with its run.

use super::backend_choice::BackendKind;
use super::prompt::Prompt;
use crate::model::Activations;
use crate::model::source::hub::Transfer;
use crate::params::{Field, SamplingParams};
use crate::response::channels::Channel;
use crate::response::{
    BranchOrigin, ConstraintStep, CrossScore, SampleResponse, StopMatched, StopReason, TopLogprob,
};
use crate::sampling::StageTrace;
use serde::Serialize;

pub type RunId = u64;

/// One run: a prompt and the parameters to sample it with.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub run_id: RunId,
    pub prompt: Prompt,
    /// Runs in different lanes (parameter sets compared on one model) wait for each other; a
    /// new run interrupts only the one in its own lane.
    pub lane: u32,
    pub params: SamplingParams,
    /// Samples continued from a token the user picked; they come after the `num_samples`
    /// samples, branch `j` being sample `num_samples + j` of the run.
    pub branches: Vec<Branch>,
}

/// A sample that follows `path` (the user's choices, forced) and then samples on, drawing from
/// the seed stream of sample `sample` as that sample would: forcing a token still takes its
/// step's uniform, so the stream stays in step with the sample's own.
#[derive(Debug, Clone, PartialEq)]
pub struct Branch {
    /// The sample whose seed stream the branch draws from.
    pub sample: u32,
    /// Where it came from, as the response records it.
    pub origin: BranchOrigin,
    /// The tokens the branch starts with, forced in order from the first generated one.
    pub path: Vec<u32>,
    /// How many tokens to sample after the path: one at a time in step mode; `None` up to
    /// `max_tokens` (and never fewer than the path) like any sample.
    pub then: Option<u32>,
}

/// One generated token of one sample, as the UI shows and inspects it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TokenEvent {
    pub sample: u32,
    pub id: u32,
    /// Text that may be shown now: stop-string hold-back and UTF-8 completion already applied.
    pub text: String,
    /// Raw logprob (log_softmax of the model's logits).
    pub logprob: f32,
    /// Probability after penalties, temperature and filters; 0 if the token was filtered out.
    pub prob: f32,
    /// Its probability in the distribution `logprobs_mode` reports from: the model's own under
    /// the raw modes, the processed one (vLLM's, which greedy leaves unfiltered) under the
    /// processed modes.
    pub reported_prob: f32,
    /// 1-based rank by raw logprob.
    pub rank: u32,
    /// The best alternatives by raw logprob (at least `EVENT_ALTERNATIVES`, more when
    /// `logprobs` asks), then the chosen token if it is not among them, each with its processed
    /// probability.
    pub top: Vec<Alternative>,
    /// Entropy in nats of the raw distribution at this step; `None` from a served model.
    pub entropy: Option<f32>,
    /// The raw logprob of each watched token at this step, in `watch`'s order; empty without
    /// `watch` and from a served model.
    pub watched: Vec<f32>,
    /// What the run's constraint cut at this step; `None` without one, and from a served model.
    pub constraint: Option<ConstraintStep>,
    /// The harmony channel the token is written in (gpt-oss); `None` outside one.
    pub channel: Option<Channel>,
}

/// One token of the prompt as the model sees it, for the playground's token view.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PromptToken {
    /// `None` for a served model's raw prompt, which the server tokenizes: shown as one piece.
    pub id: Option<u32>,
    pub text: String,
    /// A special token (`<|im_start|>`, BOS): a control token, not text.
    pub special: bool,
}

/// One alternative at a position, for the inspector.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Alternative {
    pub id: u32,
    pub text: String,
    pub logprob: f32,
    pub prob: f32,
}

impl From<&Alternative> for TopLogprob {
    fn from(a: &Alternative) -> Self {
        TopLogprob(a.id, a.text.clone(), a.logprob)
    }
}

/// Everything the engine tells its user, in order; `--jsonl` prints each as one line.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[allow(clippy::large_enum_variant)] // a few events per run: boxing the params saves nothing
pub enum Event {
    /// Model loading progress in [0, 1] with a short description.
    Loading {
        progress: f32,
        message: String,
        /// Bytes, total and rate of a download under way.
        #[serde(skip_serializing_if = "Option::is_none")]
        download: Option<Transfer>,
    },
    /// The model is ready; `defaults` are its own sampling settings, offered as a preset.
    Loaded {
        model: String,
        device: String,
        defaults: Option<SamplingParams>,
        /// Whether the model has a chat template, so that chat mode can be offered.
        chat_template: bool,
        /// The vocabulary's fingerprint (a hash, not a size), passed along with samples sent to
        /// another model for scoring, so that it can tell whether the token ids are its own.
        /// Written as 16 hex digits named for what it is: as a JSON number named `vocab` it
        /// read as a garbage vocabulary size, and lost bits in parsers that read f64.
        #[serde(rename = "vocab_fingerprint", serialize_with = "hex")]
        vocab: u64,
        /// Tokens in the vocabulary: where top_k stops mattering; `None` from a served model,
        /// which does not say.
        vocab_size: Option<usize>,
        /// The text of each special token (`<|im_end|>`), which the playground marks where the
        /// user typed it into a chat message.
        special_tokens: Vec<String>,
        /// What loading found odd but accepted, as llama.cpp accepts it.
        warnings: Vec<String>,
        /// What the quantized CPU products do with activations (`16bit` or `exact`, `auto`
        /// resolved): the probabilities shown are that path's. `None` on a GPU or a server.
        #[serde(skip_serializing_if = "Option::is_none")]
        activations: Option<Activations>,
        /// The local backend that runs it; `None` for a served model.
        #[serde(skip_serializing_if = "Option::is_none")]
        backend: Option<BackendKind>,
    },
    /// Right after `Loaded`, for a model a server runs: the server, and the parameters it has
    /// no place for (shown as not applied, never dropped silently); again before a run that
    /// leaves out others as it sets them (a kind of constraint, token-id stops), or no longer.
    Served {
        server: String,
        #[serde(serialize_with = "field_names")]
        ignored: Vec<Field>,
    },
    /// The model could not be loaded; the message says what to do.
    LoadFailed {
        message: String,
    },
    /// What the model sees, before it runs: the chat template's rendering (none for a raw
    /// prompt) and the prompt's tokens.
    Prompted {
        run_id: RunId,
        rendered: Option<String>,
        tokens: Vec<PromptToken>,
    },
    Started {
        run_id: RunId,
        prompt_token_ids: Vec<u32>,
        /// The seed of each sample (`seed + i`), shown so a random seed can be reused.
        seeds: Vec<u64>,
        prefill_ms: f64,
        /// Prompt positions run through the model; the rest came from the prompt cache.
        prefill_tokens: usize,
    },
    Token {
        run_id: RunId,
        #[serde(flatten)]
        token: TokenEvent,
    },
    Finished {
        run_id: RunId,
        sample: u32,
        reason: StopReason,
        matched: Option<StopMatched>,
        /// The stop token's own text (`<|im_end|>`, `</s>`) when a token ended the sample.
        stop_token: Option<String>,
        /// Text held back for a stop string that never completed, shown now that the sample ended.
        tail: String,
        /// Tokens sampled again from the logits the run before kept, and from logits computed
        /// by this run.
        replayed: u32,
        decoded: u32,
    },
    /// The run ended (also when aborted); the full result.
    Done {
        run_id: RunId,
        response: Box<SampleResponse>,
    },
    Error {
        run_id: RunId,
        message: String,
    },
    /// Another model's run `run_id`, scored by this model.
    Scored {
        run_id: RunId,
        scores: Vec<CrossScore>,
    },
    ScoreFailed {
        run_id: RunId,
        message: String,
    },
    /// The forced tokens of an edited sample (see [`super::edit`]), or why there are none.
    Edited {
        id: RunId,
        edit: Result<Edit, String>,
    },
    /// What each stage of the chain did at step `step` of sample `sample` (see
    /// [`super::trace`]), or why that cannot be shown.
    Traced {
        run_id: RunId,
        sample: u32,
        step: usize,
        trace: Result<Vec<StageTrace>, String>,
    },
}

fn field_names<S: serde::Serializer>(fields: &[Field], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_seq(fields.iter().map(|f| f.name()))
}

fn hex<S: serde::Serializer>(value: &u64, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&format!("{value:016x}"))
}

impl Event {
    /// The run this event belongs to; `None` for model events.
    pub fn run_id(&self) -> Option<RunId> {
        match self {
            Event::Loading { .. }
            | Event::Loaded { .. }
            | Event::Served { .. }
            | Event::LoadFailed { .. }
            | Event::Edited { .. } => None,
            Event::Prompted { run_id, .. }
            | Event::Started { run_id, .. }
            | Event::Token { run_id, .. }
            | Event::Finished { run_id, .. }
            | Event::Done { run_id, .. }
            | Event::Error { run_id, .. }
            | Event::Scored { run_id, .. }
            | Event::ScoreFailed { run_id, .. }
            | Event::Traced { run_id, .. } => Some(*run_id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loaded_writes_the_vocabulary_fingerprint_as_hex_under_its_name() {
        let loaded = Event::Loaded {
            model: "m".into(),
            device: "cpu".into(),
            defaults: None,
            chat_template: false,
            vocab: 4039322147505346497,
            vocab_size: Some(49152),
            special_tokens: Vec::new(),
            warnings: Vec::new(),
            activations: Some(Activations::SixteenBit),
            backend: Some(BackendKind::LlamaCpp),
        };
        let json = serde_json::to_value(&loaded).unwrap();
        assert_eq!(json["activations"], "16bit");
        assert_eq!(json["backend"], "llama.cpp");
        assert_eq!(json["vocab_fingerprint"], "380e8e17876c97c1");
        assert_eq!(json["vocab_size"], 49152);
        assert!(json.get("vocab").is_none(), "{json}");
    }
}

/// Ask for an edited sample's forced tokens; answered with `Event::Edited`.
#[derive(Debug, Clone, PartialEq)]
pub struct EditRequest {
    /// Names the answer; drawn from the run ids, so no run or other edit has it.
    pub id: RunId,
    /// The prompt's ids as the model saw them: they decide how the sample's first token reads.
    pub prompt: Vec<u32>,
    /// The sample's tokens when the user began to edit it.
    pub sample: Vec<u32>,
    /// The sample's text as edited.
    pub text: String,
}

/// What an edited sample's branch is forced along: the sample's first `kept` tokens, then `ids`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Edit {
    pub kept: usize,
    pub ids: Vec<u32>,
}
