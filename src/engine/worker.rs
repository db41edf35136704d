//! The worker thread that owns one model: requests in over a channel, events out.
//!
//! candle is blocking, so the model lives on its own thread and the caller never waits on it.
//! The latest request wins: a new run or a cancel interrupts the current run before its next
//! decode step, and runs queued behind it are skipped.

use super::backend::Backend;
use super::contain::contain;
use super::disagreement::{RowsRequest, Wanted, send, serve_bytes, serve_rows};
use super::edit;
use super::events::{Branch, Event, PromptToken, Request, RunId};
use super::events::{Edit, EditRequest};
use super::generate::{RunContext, generate};
use super::prompt::Prompt;
use super::replay::ReplayStore;
use super::runner::Runner;
use super::score::{Retokenized, ScoreRequest, Scoring, common_prefix, score_sequence};
use super::structured::Structured;
use super::trace::TraceRequest;
use crate::model::source::LoadProgress;
use crate::model::source::cancel::Cancel;
use crate::model::source::origin::ModelOrigin;
use crate::model::text::chat_template::{ChatTemplate, Message, ModelTemplates};
use crate::model::text::{Specials, text_bytes, token_text};
use crate::model::{Activations, memory};
use crate::params::SamplingParams;
use crate::response::provenance::{Kernel, ModelProvenance};
use crate::response::{CrossScore, Provenance, Trajectory};
use crate::sampling::StageTrace;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::thread::JoinHandle;
use tokenizers::Tokenizer;

/// A model ready to run, with what generation needs beside its forward pass.
pub struct LoadedModel {
    pub name: String,
    pub device: String,
    pub backend: Box<dyn Backend + Send>,
    /// Adds BOS (when the model wants one) through its post-processor.
    pub tokenizer: Tokenizer,
    pub eos_ids: Vec<u32>,
    /// The sampling settings the model ships with (generation_config.json, GGUF
    /// `general.sampling.*`), over samplab's defaults; `None` when they are not valid params.
    pub defaults: Option<SamplingParams>,
    /// What chat runs render with: the model's default template, or `--chat-template`'s.
    pub chat_template: Option<ChatTemplate>,
    /// Every template the model ships, for `--chat-template NAME`.
    pub templates: ModelTemplates,
    /// What the last run left for the next to replay.
    pub replay: ReplayStore,
    /// What loading found odd but accepted (see `ModelConfig::warnings`).
    pub warnings: Vec<String>,
    /// What its quantized products on the CPU do with activations; `None` on a GPU.
    pub activations: Option<Activations>,
    /// Its vocabulary for constraints and the last constraint compiled.
    pub structured: Structured,
    /// Every run records each token's stage trace (see [`Runner::record_traces`]).
    pub record_traces: bool,
    /// Where it came from, for the provenance of its runs.
    pub origin: ModelOrigin,
    /// Tokenizes prompts instead of `tokenizer`, where samplab's GGUF tokenizer would not give
    /// the ids the model was trained with (a pre-tokenizer it does not know): llama.cpp's.
    pub encoder: Option<Arc<dyn TextEncoder>>,
}

/// A tokenizer that only encodes, for prompts.
pub trait TextEncoder: Send + Sync {
    /// `text`'s ids, BOS (and EOS) added as the model wants where `add_special`, special-token
    /// text read as the control token where `parse_special`.
    fn encode(&self, text: &str, add_special: bool, parse_special: bool) -> Vec<u32>;
}

impl LoadedModel {
    /// What loading found odd, and a model whose templates are all named, which chat runs
    /// cannot use until one is chosen.
    fn load_warnings(&self) -> Vec<String> {
        let mut warnings = self.warnings.clone();
        if self.chat_template.is_none()
            && let Some(why) = self.templates.missing_default()
        {
            warnings.push(format!("{} {why}", self.name));
        }
        warnings
    }

    /// A raw prompt's ids, BOS added as the model wants, special-token text parsed.
    pub fn encode(&self, prompt: &str) -> anyhow::Result<Vec<u32>> {
        if let Some(encoder) = &self.encoder {
            return Ok(encoder.encode(prompt, true, true));
        }
        let encoding = self
            .tokenizer
            .encode(prompt, true)
            .map_err(|e| anyhow::anyhow!("cannot tokenize the prompt: {e}"))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// A raw prompt's ids with its special-token text kept as text.
    fn encode_literal_raw(&mut self, prompt: &str) -> anyhow::Result<Vec<u32>> {
        self.ids_of(prompt, true, true)
            .map_err(|e| anyhow::anyhow!("cannot tokenize the prompt: {e}"))
    }

    /// `text`'s ids with BOS added where `add_bos` (as the model wants it) and special-token
    /// text kept as text where `literal`, else read as the control token; the tokenizer's own
    /// setting is restored after.
    fn ids_of(&mut self, text: &str, add_bos: bool, literal: bool) -> tokenizers::Result<Vec<u32>> {
        if let Some(encoder) = &self.encoder {
            return Ok(encoder.encode(text, add_bos, !literal));
        }
        let own = self.tokenizer.get_encode_special_tokens();
        self.tokenizer.set_encode_special_tokens(literal);
        let encoding = self.tokenizer.encode(text, add_bos);
        self.tokenizer.set_encode_special_tokens(own);
        Ok(encoding?.get_ids().to_vec())
    }

    /// The token ids of a prompt as this model sees it, and, for a conversation, the text its
    /// chat template rendered.
    pub fn encode_prompt(&mut self, prompt: &Prompt) -> anyhow::Result<(Vec<u32>, Option<String>)> {
        match prompt {
            Prompt::Raw(text) => Ok((self.encode(text)?, None)),
            Prompt::Literal(text) => Ok((self.encode_literal_raw(text)?, None)),
            Prompt::Chat(conversation) => {
                let text = self.render_conversation(&conversation.messages)?;
                let ids = match conversation.last_user() {
                    Some(message) if conversation.literal_specials => {
                        self.encode_literal(&text, message)?
                    }
                    _ => self.encode_rendered(&text)?,
                };
                Ok((ids, Some(text)))
            }
        }
    }

    fn render_conversation(&self, messages: &[Message]) -> anyhow::Result<String> {
        let template = self.chat_template.as_ref().ok_or_else(|| {
            match self.templates.missing_default() {
                Some(why) => anyhow::anyhow!("{} {why}", self.name),
                None => anyhow::anyhow!(
                    "{} has no chat template: use the raw prompt, give one with --chat-template \
                     FILE, or use a model that ships one (GGUF `tokenizer.chat_template`, \
                     tokenizer_config.json `chat_template`)",
                    self.name
                ),
            }
        })?;
        Ok(template.render_messages(messages)?)
    }

    /// As in transformers' `apply_chat_template`, rendered text already holds BOS and the role
    /// markers, so nothing is added and special-token texts become their ids.
    fn encode_rendered(&mut self, text: &str) -> anyhow::Result<Vec<u32>> {
        self.ids_of(text, false, false)
            .map_err(|e| anyhow::anyhow!("cannot tokenize the chat prompt: {e}"))
    }

    /// A rendered chat prompt whose user `message` stays plain text: the template's own markers
    /// around it become control tokens, special-token text inside it does not.
    fn encode_literal(&mut self, text: &str, message: &str) -> anyhow::Result<Vec<u32>> {
        let Some(start) = text.rfind(message).filter(|_| !message.is_empty()) else {
            return self.encode_rendered(text);
        };
        let end = start + message.len();
        let mut ids = self.encode_rendered(&text[..start])?;
        let inner = self
            .ids_of(message, false, true)
            .map_err(|e| anyhow::anyhow!("cannot tokenize the chat prompt: {e}"))?;
        ids.extend(inner);
        ids.extend(self.encode_rendered(&text[end..])?);
        Ok(ids)
    }

    /// Text that is already a whole prompt, encoded as `how` says.
    fn encode_text(&mut self, text: &str, how: Encoding) -> anyhow::Result<Vec<u32>> {
        match how {
            Encoding::Rendered => self.encode_rendered(text),
            Encoding::Raw => self.encode(text),
            Encoding::Literal => self.encode_literal_raw(text),
        }
    }

    /// Each token's text, special tokens marked, as the playground's token view shows them.
    pub fn prompt_tokens(&self, ids: &[u32]) -> Vec<PromptToken> {
        let decoder = self.tokenizer.get_added_tokens_decoder();
        ids.iter()
            .map(|&id| PromptToken {
                id: Some(id),
                // As top_logprobs show it: a SentencePiece token keeps its leading space.
                text: token_text(&self.tokenizer, id),
                special: decoder.get(&id).is_some_and(|token| token.special),
            })
            .collect()
    }

    /// The texts of the tokenizer's special tokens, longest first (so that `<|im_end|>` is found
    /// before any shorter special inside it).
    pub fn special_tokens(&self) -> Vec<String> {
        let mut texts: Vec<String> = self
            .tokenizer
            .get_added_tokens_decoder()
            .into_values()
            .filter(|token| token.special && !token.content.is_empty())
            .map(|token| token.content)
            .collect();
        texts.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        texts.dedup();
        texts
    }

    /// Identifies the vocabulary: equal fingerprints mean token ids can be shared.
    pub fn vocab_fingerprint(&self) -> u64 {
        use std::hash::{DefaultHasher, Hash, Hasher};
        let mut vocab: Vec<(String, u32)> = self.tokenizer.get_vocab(true).into_iter().collect();
        vocab.sort_unstable_by_key(|&(_, id)| id);
        let mut hasher = DefaultHasher::new();
        vocab.hash(&mut hasher);
        hasher.finish()
    }

    /// What ran a run of `params` that made `trajectories`: this model's files (waiting for
    /// their digests if they are still being computed), device and kernels.
    pub fn provenance(
        &mut self,
        params: &SamplingParams,
        trajectories: &[Trajectory],
    ) -> Provenance {
        let model = ModelProvenance {
            source: self.origin.source.clone(),
            files: self.origin.files().to_vec(),
            server: None,
            served_model: None,
            backend: Some(self.backend.kind()),
        };
        let kernels = self
            .backend
            .kernels()
            .into_iter()
            .map(Kernel::from)
            .collect();
        Provenance::of_run(
            model,
            self.device.clone(),
            kernels,
            self.activations,
            params,
            trajectories,
        )
    }

    /// An edited sample's forced tokens (see [`super::edit`]).
    pub fn edit(&mut self, request: &EditRequest) -> anyhow::Result<Edit> {
        let (kept, at) = edit::kept(
            &self.tokenizer,
            &request.prompt,
            &request.sample,
            &request.text,
        );
        let rest = &request.text[at..];
        if rest.is_empty() {
            return Ok(Edit {
                kept,
                ids: Vec::new(),
            });
        }
        let candidates = edit::candidates(rest, |text| self.ids_of(text, false, true))?;
        let context = [&request.prompt[..], &request.sample[..kept]].concat();
        let ids = edit::reading_back(&self.tokenizer, &context, rest, candidates)?;
        Ok(Edit { kept, ids })
    }

    /// What each stage did at one step of the last run (see [`super::trace`]).
    pub fn trace(&self, request: &TraceRequest) -> anyhow::Result<Vec<StageTrace>> {
        super::trace::trace(
            &self.replay,
            &self.tokenizer,
            &self.eos_ids,
            self.backend.vocab_size(),
            self.structured.compiled(&request.params)?,
            request,
        )
    }

    /// Scores another run's samples (see [`super::score`]); `vocab` is our own fingerprint.
    pub fn score(
        &mut self,
        request: &ScoreRequest,
        vocab: u64,
        interrupted: &mut dyn FnMut() -> bool,
    ) -> anyhow::Result<Vec<CrossScore>> {
        let context = self.score_context(request, vocab)?;
        let mut scores = Vec::with_capacity(request.samples.len());
        for sample in &request.samples {
            if interrupted() {
                break;
            }
            let scoring = match &context.before {
                Before::Ids(prefix) => Scoring {
                    ids: [&prefix[..], &sample.token_ids[..]].concat(),
                    start: prefix.len(),
                    retokenized: None,
                },
                Before::Text {
                    text,
                    how,
                    ids: prefix,
                } => {
                    let ids = self.encode_text(&format!("{text}{}", sample.text), *how)?;
                    Scoring {
                        start: common_prefix(prefix, &ids),
                        retokenized: Some(Retokenized {
                            text: sample.text.clone(),
                            bytes: text_bytes(&self.tokenizer, &ids, Specials::Spelled),
                        }),
                        ids,
                    }
                }
            };
            let mut score = score_sequence(
                self.backend.as_mut(),
                &self.name,
                sample.index,
                &scoring,
                request.feed.as_ref(),
            )?;
            score.foreign_prompt = context.foreign;
            scores.push(score);
        }
        Ok(scores)
    }

    /// What the samples of `request` follow, as this model sees it: the same for every sample,
    /// so rendered and encoded once. A conversation is rendered by this model's own template;
    /// without one, the sampling model's rendering stands in (see [`ScoreContext::foreign`]).
    fn score_context(
        &mut self,
        request: &ScoreRequest,
        vocab: u64,
    ) -> anyhow::Result<ScoreContext> {
        let same_vocab = request.vocab == vocab;
        let own = match &request.prompt {
            Prompt::Chat(_) if self.chat_template.is_none() => None,
            prompt => Some(prompt),
        };
        let before = match own {
            // Our own token ids: the sampling model's prompt ids are ours too.
            Some(Prompt::Raw(_) | Prompt::Literal(_)) | None if same_vocab => {
                Before::Ids(request.prompt_token_ids.clone())
            }
            Some(prompt) if same_vocab => Before::Ids(self.encode_prompt(prompt)?.0),
            Some(prompt @ (Prompt::Raw(text) | Prompt::Literal(text))) => Before::Text {
                ids: self.encode_prompt(prompt)?.0,
                text: text.clone(),
                how: match prompt {
                    Prompt::Literal(_) => Encoding::Literal,
                    _ => Encoding::Raw,
                },
            },
            Some(prompt) => {
                let (ids, text) = self.encode_prompt(prompt)?;
                Before::Text {
                    ids,
                    text: text.unwrap_or_default(),
                    how: Encoding::Rendered,
                }
            }
            None => {
                let text = request.rendered.clone().ok_or_else(|| {
                    anyhow::anyhow!(
                        "{} has no chat template, and the run to score kept no rendered prompt",
                        self.name
                    )
                })?;
                Before::Text {
                    ids: self.encode_rendered(&text)?,
                    text,
                    how: Encoding::Rendered,
                }
            }
        };
        Ok(ScoreContext {
            before,
            foreign: own.is_none(),
        })
    }

    /// Runs one request to the end on this thread (for the CLI and tests).
    pub fn run(
        &mut self,
        request: &Request,
        interrupted: &mut dyn FnMut() -> bool,
        emit: &mut dyn FnMut(Event),
    ) -> anyhow::Result<crate::response::SampleResponse> {
        let (prompt_ids, rendered) = self.encode_prompt(&request.prompt)?;
        emit(Event::Prompted {
            run_id: request.run_id,
            rendered: rendered.clone(),
            tokens: self.prompt_tokens(&prompt_ids),
        });
        let seed = request.params.seed.unwrap_or_else(random_seed);
        let mut response = self.run_ids(
            request.run_id,
            prompt_ids,
            &request.params,
            &request.branches,
            seed,
            interrupted,
            emit,
        )?;
        response.prompt = Some(request.prompt.record(rendered));
        response.provenance = Some(self.provenance(&request.params, &response.trajectories));
        Ok(response)
    }

    /// Runs prompt token ids with a base seed, replaying what the last run kept.
    #[allow(clippy::too_many_arguments)] // a run's parts, as `generate` takes them
    pub fn run_ids(
        &mut self,
        run_id: RunId,
        prompt_ids: Vec<u32>,
        params: &SamplingParams,
        branches: &[Branch],
        seed: u64,
        interrupted: &mut dyn FnMut() -> bool,
        emit: &mut dyn FnMut(Event),
    ) -> anyhow::Result<crate::response::SampleResponse> {
        // The load-time check reserved one sequence; a run holds one per sample and branch.
        let most = params.max_tokens.map_or(usize::MAX, |n| n as usize);
        let longest_path = branches.iter().map(|b| b.path.len() + 1).max().unwrap_or(0);
        let positions = most
            .max(longest_path)
            .saturating_add(prompt_ids.len())
            .min(self.backend.context_length());
        let rows = u32::try_from(branches.len()).unwrap_or(u32::MAX);
        memory::check_run(
            &self.name,
            self.backend.state_bytes(positions),
            params.num_samples.saturating_add(rows),
            positions,
            self.backend.free_memory()?,
        )?;
        let constraint = self.structured.compile(
            params,
            &self.tokenizer,
            &self.eos_ids,
            self.backend.vocab_size(),
        )?;
        let ctx = RunContext {
            tokenizer: &self.tokenizer,
            eos_ids: &self.eos_ids,
            model_name: &self.name,
            constraint,
            record_traces: self.record_traces,
        };
        generate(
            self.backend.as_mut(),
            &mut self.replay,
            &ctx,
            run_id,
            prompt_ids,
            params,
            branches,
            seed,
            interrupted,
            emit,
        )
    }
}

impl Runner for LoadedModel {
    fn loaded(&self) -> Event {
        Event::Loaded {
            model: self.name.clone(),
            device: self.device.clone(),
            defaults: self.defaults.clone(),
            chat_template: self.chat_template.is_some(),
            vocab: self.vocab_fingerprint(),
            vocab_size: Some(self.backend.vocab_size()),
            special_tokens: self.special_tokens(),
            warnings: self.load_warnings(),
            activations: self.activations,
            backend: Some(self.backend.kind()),
        }
    }

    fn run(
        &mut self,
        request: &Request,
        interrupted: &mut dyn FnMut() -> bool,
        emit: &mut dyn FnMut(Event),
    ) -> anyhow::Result<crate::response::SampleResponse> {
        LoadedModel::run(self, request, interrupted, emit)
    }

    fn use_chat_template(&mut self, choice: Option<&str>) -> anyhow::Result<()> {
        let Some(choice) = choice else {
            return Ok(());
        };
        let template = self.templates.choose(choice).map_err(anyhow::Error::msg)?;
        // A template that cannot render one message fails now, not at the first chat run.
        template
            .render("Hi")
            .map_err(|e| anyhow::anyhow!("--chat-template `{choice}`: {e}"))?;
        self.chat_template = Some(template);
        Ok(())
    }

    fn score(
        &mut self,
        request: &ScoreRequest,
        vocab: u64,
        interrupted: &mut dyn FnMut() -> bool,
    ) -> anyhow::Result<Vec<CrossScore>> {
        LoadedModel::score(self, request, vocab, interrupted)
    }

    fn trace(&self, request: &TraceRequest) -> anyhow::Result<Vec<StageTrace>> {
        LoadedModel::trace(self, request)
    }

    fn rows(
        &mut self,
        request: &RowsRequest,
        interrupted: &mut dyn FnMut() -> bool,
    ) -> anyhow::Result<()> {
        match request.wanted {
            Wanted::Rows => serve_rows(self.backend.as_mut(), request, interrupted),
            Wanted::Bytes => {
                serve_bytes(&self.tokenizer, request, interrupted);
                Ok(())
            }
        }
    }

    fn record_traces(&mut self) -> anyhow::Result<()> {
        self.record_traces = true;
        Ok(())
    }

    fn edit(&mut self, request: &EditRequest) -> anyhow::Result<Edit> {
        LoadedModel::edit(self, request)
    }

    /// After a panic in the middle of a run the caches may hold half a step: start afresh.
    fn recover(&mut self, panic: String) -> anyhow::Error {
        self.backend.reset();
        self.replay.clear();
        anyhow::anyhow!("{panic}")
    }
}

/// What a sample is scored after.
enum Before {
    /// Token ids in this model's vocabulary; the sample's own ids follow.
    Ids(Vec<u32>),
    /// Text with its ids; the sample's text follows, and the whole is tokenized again, `how`
    /// the text was.
    Text {
        text: String,
        how: Encoding,
        ids: Vec<u32>,
    },
}

/// How a whole prompt's text becomes ids.
#[derive(Debug, Clone, Copy)]
enum Encoding {
    /// A chat rendering: special-token text parsed, nothing added.
    Rendered,
    /// Raw text: BOS added as the model wants, special-token text parsed.
    Raw,
    /// Raw text with its special-token text kept as text.
    Literal,
}

struct ScoreContext {
    before: Before,
    /// This model has no chat template, so a conversation is scored after the sampling
    /// model's rendering of it.
    foreign: bool,
}

/// A seed for runs that asked for none: short enough to read and type back.
pub fn random_seed() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now()) % 1_000_000
}

#[allow(clippy::large_enum_variant)] // one per request: boxing the params saves nothing
enum Command {
    Run(Request),
    Cancel(RunId),
    Score(ScoreRequest),
    Rows(RowsRequest),
    Trace(TraceRequest),
    Edit(EditRequest),
}

/// Work waiting for the model: at most one run per lane (the newest), then scores.
#[derive(Default)]
struct Queue {
    runs: Vec<Request>,
    /// Scores and the rows other models score with, in the order asked (see
    /// [`super::disagreement`] for why one queue).
    scores: VecDeque<Job>,
    /// Only the newest: the inspector asks again as its cursor moves.
    trace: Option<TraceRequest>,
    edits: VecDeque<EditRequest>,
}

#[allow(clippy::large_enum_variant)] // one per request
enum Job {
    Run(Request),
    Score(ScoreRequest),
    Rows(RowsRequest),
    Trace(TraceRequest),
    Edit(EditRequest),
}

impl Job {
    /// The run the job is or belongs to (an edit's own id): a cancel of it stops the job.
    fn run_id(&self) -> RunId {
        match self {
            Job::Run(request) => request.run_id,
            Job::Score(request) => request.run_id,
            Job::Rows(request) => request.run_id,
            Job::Trace(request) => request.run_id,
            Job::Edit(request) => request.id,
        }
    }
}

impl Queue {
    fn push(&mut self, command: Command) {
        match command {
            Command::Run(request) => {
                self.runs.retain(|queued| queued.lane != request.lane);
                self.runs.push(request);
            }
            Command::Cancel(id) => {
                self.runs.retain(|queued| queued.run_id != id);
                self.scores.retain(|queued| queued.run_id() != id);
            }
            Command::Score(request) => self.scores.push_back(Job::Score(request)),
            Command::Rows(request) => self.scores.push_back(Job::Rows(request)),
            Command::Trace(request) => self.trace = Some(request),
            Command::Edit(request) => self.edits.push_back(request),
        }
    }

    /// An edit first: the user waits on it, and it takes a moment; then runs, which are what
    /// the user is watching; then the inspector's trace.
    fn pop(&mut self) -> Option<Job> {
        if let Some(edit) = self.edits.pop_front() {
            Some(Job::Edit(edit))
        } else if !self.runs.is_empty() {
            Some(Job::Run(self.runs.remove(0)))
        } else if let Some(trace) = self.trace.take() {
            Some(Job::Trace(trace))
        } else {
            self.scores.pop_front()
        }
    }

    fn has_run_in(&self, lane: u32) -> bool {
        self.runs.iter().any(|queued| queued.lane == lane)
    }
}

/// Handle to the worker thread; dropping it stops the worker, and joins it unless it is still
/// loading: quitting must not wait for a load, which is cancelled where it can be (a download).
pub struct Engine {
    commands: Option<Sender<Command>>,
    thread: Option<JoinHandle<()>>,
    loading: Arc<AtomicBool>,
    /// Stops the load's download, if it has one.
    load_cancel: Option<Cancel>,
}

impl Engine {
    /// Starts the worker, which first loads the model with `load` (reporting progress as
    /// events); every event goes to `emit`, on the worker's thread.
    pub fn spawn<L, R, E>(load: L, emit: E) -> Engine
    where
        L: FnOnce(&mut dyn FnMut(LoadProgress)) -> anyhow::Result<R> + Send + 'static,
        R: Runner + 'static,
        E: FnMut(Event) + Send + 'static,
    {
        let (commands, inbox) = mpsc::channel();
        let loading = Arc::new(AtomicBool::new(true));
        let loading_flag = Arc::clone(&loading);
        let load = move |progress: &mut dyn FnMut(LoadProgress)| {
            let model = load(progress);
            loading_flag.store(false, Ordering::Release);
            model
        };
        let thread = std::thread::Builder::new()
            .name("samplab-engine".into())
            .spawn(move || worker(load, inbox, emit))
            .expect("the OS can start a thread");
        Engine {
            commands: Some(commands),
            thread: Some(thread),
            loading,
            load_cancel: None,
        }
    }

    /// `cancel` is the one the load's download checks (`HubSettings::cancel`): `cancel_load`
    /// and dropping the engine set it.
    pub fn with_load_cancel(mut self, cancel: Cancel) -> Self {
        self.load_cancel = Some(cancel);
        self
    }

    /// Stops a download under way; the load then fails with `Event::LoadFailed` saying so.
    pub fn cancel_load(&self) {
        if let Some(cancel) = &self.load_cancel
            && self.loading.load(Ordering::Acquire)
        {
            cancel.cancel();
        }
    }

    /// Starts `request`, interrupting the run in its lane; runs in other lanes finish first.
    pub fn run(&self, request: Request) {
        self.send(Command::Run(request));
    }

    pub fn cancel(&self, run_id: RunId) {
        self.send(Command::Cancel(run_id));
    }

    /// Scores another model's samples once no run is waiting; answered with `Event::Scored`.
    pub fn score(&self, request: ScoreRequest) {
        self.send(Command::Score(request));
    }

    /// Sends the raw distributions of this model's samples to another model that scores them
    /// (see [`super::disagreement`]), in turn with the scores queued before.
    pub fn rows(&self, request: RowsRequest) {
        self.send(Command::Rows(request));
    }

    /// Traces one step through the chain once no run is waiting; answered with
    /// `Event::Traced`. A newer request replaces one still waiting.
    pub fn trace(&self, request: TraceRequest) {
        self.send(Command::Trace(request));
    }

    /// Finds an edited sample's forced tokens before anything else; answered with
    /// `Event::Edited`.
    pub fn edit(&self, request: EditRequest) {
        self.send(Command::Edit(request));
    }

    fn send(&self, command: Command) {
        if let Some(commands) = &self.commands {
            // A worker that has exited has already reported why; nothing more to tell.
            let _ = commands.send(command);
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.commands.take();
        self.cancel_load();
        if let Some(thread) = self.thread.take()
            && !self.loading.load(Ordering::Acquire)
        {
            let _ = thread.join();
        }
    }
}

fn worker<L, R, E>(load: L, inbox: Receiver<Command>, mut emit: E)
where
    L: FnOnce(&mut dyn FnMut(LoadProgress)) -> anyhow::Result<R>,
    R: Runner,
    E: FnMut(Event),
{
    let loaded = contain(|| {
        load(&mut |step: LoadProgress| {
            emit(Event::Loading {
                progress: step.fraction,
                message: step.message,
                download: step.download,
            })
        })
    })
    .unwrap_or_else(|panic| Err(anyhow::anyhow!("loading failed: {panic}")));
    let mut model = match loaded {
        Ok(model) => model,
        Err(e) => {
            let message = format!("{e:#}");
            emit(Event::LoadFailed {
                message: message.clone(),
            });
            for command in inbox {
                match command {
                    Command::Run(request) => emit(Event::Error {
                        run_id: request.run_id,
                        message: format!("no model loaded: {message}"),
                    }),
                    Command::Score(request) => emit(Event::ScoreFailed {
                        run_id: request.run_id,
                        message: format!("no model loaded: {message}"),
                    }),
                    Command::Rows(request) => {
                        let _ = request.to.send(Err(format!("no model loaded: {message}")));
                    }
                    Command::Trace(request) => emit(Event::Traced {
                        run_id: request.run_id,
                        sample: request.sample,
                        step: request.step(),
                        trace: Err(format!("no model loaded: {message}")),
                    }),
                    Command::Edit(request) => emit(Event::Edited {
                        id: request.id,
                        edit: Err(format!("no model loaded: {message}")),
                    }),
                    Command::Cancel(_) => {}
                }
            }
            return;
        }
    };
    let loaded = model.loaded();
    let vocab = match &loaded {
        Event::Loaded { vocab, .. } => *vocab,
        _ => 0,
    };
    emit(loaded);
    if let Some(served) = model.served() {
        emit(served);
    }

    let mut queue = Queue::default();
    loop {
        let job = match queue.pop() {
            Some(job) => job,
            None => match inbox.recv() {
                Ok(command) => {
                    queue.push(command);
                    continue;
                }
                Err(_) => return,
            },
        };
        let run_id = job.run_id();
        let lane = match &job {
            Job::Run(request) => Some(request.lane),
            _ => None,
        };
        let mut disconnected = false;
        // Rows wait on another model's scorer: a run the user asked for meanwhile goes first.
        let yields_to_runs = matches!(job, Job::Rows(_));
        // Stops a run when its lane has a newer one; stops either job when it is cancelled.
        let mut interrupted = || {
            let mut stop = false;
            loop {
                match inbox.try_recv() {
                    Ok(Command::Cancel(id)) if id == run_id => stop = true,
                    Ok(command) => queue.push(command),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        disconnected = true;
                        return true;
                    }
                }
            }
            stop || lane.is_some_and(|lane| queue.has_run_in(lane))
                || (yields_to_runs && !queue.runs.is_empty())
        };
        match job {
            Job::Run(request) => {
                let ran = contain(|| {
                    super::contain::panic_for_tests("run");
                    model.run(&request, &mut interrupted, &mut |e| emit(e))
                });
                match ran.unwrap_or_else(|panic| Err(model.recover(panic))) {
                    Ok(response) => emit(Event::Done {
                        run_id,
                        response: Box::new(response),
                    }),
                    Err(e) => emit(Event::Error {
                        run_id,
                        message: format!("{e:#}"),
                    }),
                }
            }
            Job::Trace(request) => {
                let traced = contain(|| model.trace(&request));
                let trace = traced
                    .unwrap_or_else(|panic| Err(model.recover(panic)))
                    .map_err(|e| format!("{e:#}"));
                emit(Event::Traced {
                    run_id,
                    sample: request.sample,
                    step: request.step(),
                    trace,
                });
            }
            Job::Edit(request) => {
                let edited = contain(|| model.edit(&request));
                let edit = edited
                    .unwrap_or_else(|panic| Err(model.recover(panic)))
                    .map_err(|e| format!("{e:#}"));
                emit(Event::Edited { id: run_id, edit });
            }
            Job::Score(request) => {
                let scored = contain(|| model.score(&request, vocab, &mut interrupted));
                match scored.unwrap_or_else(|panic| Err(model.recover(panic))) {
                    Ok(scores) => emit(Event::Scored { run_id, scores }),
                    Err(e) => emit(Event::ScoreFailed {
                        run_id,
                        message: format!("{e:#}"),
                    }),
                }
            }
            Job::Rows(request) => {
                let served = contain(|| model.rows(&request, &mut interrupted));
                if let Err(e) = served.unwrap_or_else(|panic| Err(model.recover(panic))) {
                    // The scorer reports it as the reason its KL is null.
                    send(&request.to, Err(format!("{e:#}")), &mut interrupted);
                }
            }
        }
        if disconnected {
            return;
        }
    }
}
