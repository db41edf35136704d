//! A served model as a [`Runner`]: each sample streams from its own request on a thread of its
//! own, and the chunks become the events a local run emits, in arrival order.

use super::http::{Client, Settings, is_timeout};
use super::params;
use super::server::{ServerInfo, discover};
use super::spec::RemoteSpec;
use super::sse::{Events, Sse};
use super::stream::{Chunk, Finish, Piece, parse_chunk};
use crate::engine::events::{Alternative, Event, PromptToken, Request, RunId, TokenEvent};
use crate::engine::events::{Edit, EditRequest};
use crate::engine::runner::Runner;
use crate::engine::score::ScoreRequest;
use crate::engine::trace::TraceRequest;
use crate::engine::worker::random_seed;
use crate::model::source::LoadProgress;
use crate::params::{Field, SamplingParams};
use crate::response::channels::{Channel, ChannelTracker};
use crate::response::provenance::ModelProvenance;
use crate::response::{
    CrossScore, Provenance, RunStats, SampleResponse, StopMatched, StopReason, Timings, TopLogprob,
    Trajectory,
};
use crate::sampling::{StageTrace, sample_seed};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

/// How often a run waiting on the server checks for a cancel.
const POLL: Duration = Duration::from_millis(50);

/// A model a server runs.
pub struct RemoteModel {
    client: Client,
    pub info: ServerInfo,
    /// Ids for token texts the server gives without ids, so that the playground can tell
    /// tokens apart; they are samplab's numbering, not the model's.
    pieces: HashMap<String, u32>,
    /// The parameters last announced as left out (`Event::Served`): the server's own at load,
    /// then each run's when they differ.
    announced: Vec<Field>,
}

/// Finds the model `spec` names on its server.
pub fn connect(
    spec: RemoteSpec,
    settings: Settings,
    progress: &mut dyn FnMut(LoadProgress),
) -> anyhow::Result<RemoteModel> {
    progress(LoadProgress::step(
        0.0,
        format!("asking {} for its models", spec.base),
    ));
    let client = Client::new(spec, settings);
    let info = discover(&client, client.spec.model.as_deref())?;
    progress(LoadProgress::step(
        1.0,
        format!("{} serves {}", info.kind.name(), info.model),
    ));
    let announced = params::ignored(info.kind);
    Ok(RemoteModel {
        client,
        info,
        pieces: HashMap::new(),
        announced,
    })
}

/// What a sample's thread hears from its stream.
enum Heard {
    Chunk(Chunk),
    /// `[DONE]`, or the end of the body.
    End,
    Failed(String),
}

/// One sample of a run, as its chunks arrive.
struct Slot {
    trajectory: Trajectory,
    ended: bool,
    /// Harmony's channels, where the server passes the format's tokens on in the text.
    channels: ChannelTracker,
    /// Whether the chunk being read is reasoning the server split from the answer.
    reasoning: bool,
    /// Whether the server has sent such reasoning: what follows is the answer.
    reasoned: bool,
}

impl Slot {
    /// Starts reading a chunk, of reasoning or not (reasoning passed over for want of
    /// logprobs still says that what follows is the answer).
    fn read(&mut self, chunk: &Chunk) {
        self.reasoning = chunk.reasoning;
        self.reasoned |= chunk.reasoning;
    }

    /// The channel of a token with text `text` in the chunk being read: reasoning the server
    /// split off is `analysis` and the answer after it `final`; otherwise harmony's own
    /// tokens in the text say.
    fn channel(&mut self, text: &str) -> Option<Channel> {
        let marked = self.channels.push(text, text);
        match (self.reasoning, marked) {
            (true, _) => Some(Channel::Analysis),
            (false, Some(channel)) => Some(channel),
            (false, None) => self.reasoned.then_some(Channel::Final),
        }
    }
}

impl RemoteModel {
    /// The server and the parameters it leaves out, as last announced.
    fn announcement(&self) -> Event {
        Event::Served {
            server: self.info.kind.name().to_owned(),
            ignored: self.announced.clone(),
        }
    }

    /// The server and where it is, as the status bar names the device.
    fn place(&self) -> String {
        let host = self
            .client
            .spec
            .base
            .split("://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .unwrap_or(&self.client.spec.base);
        match &self.info.version {
            Some(version) => format!("{} {version} at {host}", self.info.kind.name()),
            None => format!("{} at {host}", self.info.kind.name()),
        }
    }

    /// A run's provenance: the server and the model it named; the chain, kernels and weights
    /// are the server's, which it does not tell.
    fn provenance(&self, params: &SamplingParams, trajectories: &[Trajectory]) -> Provenance {
        let model = ModelProvenance {
            source: format!("{}#{}", self.client.spec.base, self.info.model),
            files: Vec::new(),
            server: Some(self.place()),
            served_model: Some(self.info.model.clone()),
            backend: None,
        };
        Provenance {
            chain: Vec::new(),
            ..Provenance::of_run(model, self.place(), Vec::new(), None, params, trajectories)
        }
    }

    fn id_of(&mut self, piece_id: Option<u32>, text: &str) -> u32 {
        if let Some(id) = piece_id {
            return id;
        }
        let next = self.pieces.len() as u32;
        *self.pieces.entry(text.to_owned()).or_insert(next)
    }

    /// Starts one streaming request per sample, each on its own thread, or one after another
    /// on one thread for a server that serves one request at a time (llama-cpp-python drops a
    /// stream when the next request comes); they stop at the next chunk once `cancel` is set,
    /// which closes their connections.
    fn start(
        &self,
        request: &Request,
        seed: u64,
        cancel: &Arc<AtomicBool>,
    ) -> mpsc::Receiver<(u32, Heard)> {
        let (heard, receiver) = mpsc::channel();
        let endpoint = if request.prompt.is_chat() {
            "chat/completions"
        } else {
            "completions"
        };
        let url = self.client.spec.url(endpoint);
        let bodies: Vec<(u32, serde_json::Value)> = (0..request.params.num_samples)
            .map(|i| {
                let body = params::body(
                    self.info.kind,
                    &self.info.model,
                    &request.prompt,
                    &request.params,
                    sample_seed(seed, i),
                );
                (i, body)
            })
            .collect();
        let queues: Vec<Vec<(u32, serde_json::Value)>> = if self.info.kind.one_at_a_time() {
            vec![bodies]
        } else {
            bodies.into_iter().map(|one| vec![one]).collect()
        };
        for queue in queues {
            let first = queue.first().map_or(0, |(i, _)| *i);
            let (client, url, to_run, cancel) = (
                self.client.clone(),
                url.clone(),
                heard.clone(),
                Arc::clone(cancel),
            );
            let spawned = std::thread::Builder::new()
                .name("samplab-remote".into())
                .spawn(move || {
                    for (i, body) in queue {
                        if cancel.load(Ordering::Relaxed) {
                            return;
                        }
                        stream_sample(&client, &url, &body, i, &to_run, &cancel);
                    }
                });
            if let Err(e) = spawned {
                let _ = heard.send((first, Heard::Failed(format!("cannot start a thread: {e}"))));
            }
        }
        receiver
    }

    /// A chunk's tokens as events, into the sample's trajectory.
    fn accept(
        &mut self,
        slot: &mut Slot,
        piece: Piece,
        logprobs: Option<u32>,
        run_id: RunId,
        emit: &mut dyn FnMut(Event),
    ) {
        let id = self.id_of(piece.id, &piece.text);
        let channel = slot.channel(&piece.text);
        let mut top: Vec<Alternative> = piece
            .top
            .iter()
            .map(|(alt_id, text, logprob)| Alternative {
                id: self.id_of(*alt_id, text),
                text: text.clone(),
                logprob: *logprob,
                prob: logprob.exp(),
            })
            .collect();
        let rank = top
            .iter()
            .position(|a| a.id == id)
            .map_or(top.len() + 1, |r| r + 1);
        if !top.iter().any(|a| a.id == id) {
            top.push(Alternative {
                id,
                text: piece.text.clone(),
                logprob: piece.logprob,
                prob: piece.logprob.exp(),
            });
        }
        let trajectory = &mut slot.trajectory;
        trajectory.token_ids.push(id);
        trajectory.text.push_str(&piece.text);
        trajectory.logprobs.push(piece.logprob);
        if let Some(channels) = &mut trajectory.channels {
            channels.push(channel);
        }
        if let (Some(tops), Some(n)) = (&mut trajectory.top_logprobs, logprobs) {
            tops.push(top.iter().take(n as usize).map(TopLogprob::from).collect());
        }
        emit(Event::Token {
            run_id,
            token: TokenEvent {
                sample: trajectory.index,
                id,
                text: piece.text,
                logprob: piece.logprob,
                // A server reports raw logprobs only: the processed probability is unknown.
                prob: piece.logprob.exp(),
                reported_prob: piece.logprob.exp(),
                rank: rank as u32,
                top,
                entropy: None,
                watched: Vec::new(),
                constraint: None,
                channel,
            },
        });
    }
}

/// Ends a sample with `reason`.
fn finish(
    slot: &mut Slot,
    reason: StopReason,
    matched: Option<StopMatched>,
    run_id: RunId,
    emit: &mut dyn FnMut(Event),
) {
    if slot.ended {
        return;
    }
    slot.ended = true;
    slot.trajectory.stop_reason = reason;
    slot.trajectory.stop_matched = matched.clone();
    emit(Event::Finished {
        run_id,
        sample: slot.trajectory.index,
        reason,
        matched,
        stop_token: None,
        tail: String::new(),
        replayed: 0,
        decoded: slot.trajectory.token_ids.len() as u32,
    });
}

/// One sample's request, its stream read event by event and passed on.
fn stream_sample(
    client: &Client,
    url: &str,
    body: &serde_json::Value,
    sample: u32,
    heard: &Sender<(u32, Heard)>,
    cancel: &AtomicBool,
) {
    let send = |what: Heard| heard.send((sample, what)).is_ok();
    let reader = match client.post_stream(url, body) {
        Ok(reader) => reader,
        Err(e) => {
            send(Heard::Failed(format!("{e:#}")));
            return;
        }
    };
    let mut events = Events::new(reader);
    loop {
        if cancel.load(Ordering::Relaxed) {
            return;
        }
        let heard = match events.next_event() {
            Ok(Some(Sse::Data(data))) => match serde_json::from_str(&data) {
                Ok(json) => match parse_chunk(&json) {
                    Ok(chunk) => Heard::Chunk(chunk),
                    Err(message) => Heard::Failed(message),
                },
                Err(e) => Heard::Failed(format!(
                    "the server's stream is malformed: a chunk is not JSON ({e}): {}",
                    data.chars().take(120).collect::<String>()
                )),
            },
            Ok(Some(Sse::Done) | None) => Heard::End,
            Err(e) if is_timeout(Some(e.kind())) => Heard::Failed(client.timed_out().to_string()),
            Err(e) => Heard::Failed(format!("the stream from {} broke: {e}", client.spec.base)),
        };
        let last = !matches!(heard, Heard::Chunk(_));
        if !send(heard) || last {
            return;
        }
    }
}

impl Runner for RemoteModel {
    fn loaded(&self) -> Event {
        use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
        Event::Loaded {
            model: self.info.name(),
            device: self.place(),
            defaults: None,
            // The server renders conversations with its own template.
            chat_template: true,
            // Its token ids are its own (or samplab's numbering): shared with no other model.
            vocab: BuildHasherDefault::<DefaultHasher>::default()
                .hash_one((&self.client.spec.base, &self.info.model)),
            vocab_size: None,
            activations: None,
            backend: None,
            special_tokens: Vec::new(),
            warnings: vec![format!(
                "{} gives {}; samplab cannot show the probability after its filters",
                self.info.kind.name(),
                self.info.kind.logprobs_are()
            )],
        }
    }

    fn served(&self) -> Option<Event> {
        Some(self.announcement())
    }

    fn run(
        &mut self,
        request: &Request,
        interrupted: &mut dyn FnMut() -> bool,
        emit: &mut dyn FnMut(Event),
    ) -> anyhow::Result<SampleResponse> {
        let params = &request.params;
        params.validate()?;
        if !request.branches.is_empty() {
            anyhow::bail!(
                "{} is served: branching needs the model's logits at every step, which a server \
                 does not give; branch on a local model",
                self.info.name()
            );
        }
        if let crate::engine::Prompt::Literal(_) = request.prompt {
            anyhow::bail!(
                "{} reads special-token text in a raw prompt as its control tokens, and cannot \
                 be asked to keep it as text: let samplab parse it too, or use a local model",
                self.info.name()
            );
        }
        // A constraint of a kind the server lacks, or token-id stops, are left out of this run
        // only: said before it, as the load's announcement was.
        let left_out = params::left_out(self.info.kind, params, &request.prompt);
        if left_out != self.announced {
            self.announced = left_out;
            emit(self.announcement());
        }
        let run_id = request.run_id;
        let seed = params.seed.unwrap_or_else(random_seed);
        let seeds: Vec<u64> = (0..params.num_samples)
            .map(|i| sample_seed(seed, i))
            .collect();
        emit(Event::Prompted {
            run_id,
            rendered: None,
            tokens: match &request.prompt {
                // The server tokenizes: the prompt is shown as one piece.
                crate::engine::Prompt::Raw(text) | crate::engine::Prompt::Literal(text) => {
                    vec![PromptToken {
                        id: None,
                        text: text.clone(),
                        special: false,
                    }]
                }
                crate::engine::Prompt::Chat(_) => Vec::new(),
            },
        });
        let cancel = Arc::new(AtomicBool::new(false));
        let start = Instant::now();
        let heard = self.start(request, seed, &cancel);
        let mut slots: Vec<Slot> = seeds
            .iter()
            .enumerate()
            .map(|(i, &seed)| Slot {
                trajectory: Trajectory {
                    channels: Some(Vec::new()),
                    ..Trajectory::empty(i as u32, seed, params.logprobs)
                },
                ended: false,
                channels: ChannelTracker::default(),
                reasoning: false,
                reasoned: false,
            })
            .collect();
        let mut first_token: Option<Duration> = None;
        let mut failure: Option<String> = None;
        while slots.iter().any(|s| !s.ended) {
            if interrupted() {
                cancel.store(true, Ordering::Relaxed);
                for slot in slots.iter_mut() {
                    finish(slot, StopReason::Abort, None, run_id, emit);
                }
                break;
            }
            let (sample, what) = match heard.recv_timeout(POLL) {
                Ok(heard) => heard,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => break,
            };
            let slot = &mut slots[sample as usize];
            match what {
                Heard::Chunk(chunk) => {
                    if first_token.is_none() && !chunk.pieces.is_empty() {
                        first_token = Some(start.elapsed());
                        emit(Event::Started {
                            run_id,
                            prompt_token_ids: Vec::new(),
                            seeds: seeds.clone(),
                            prefill_ms: start.elapsed().as_secs_f64() * 1e3,
                            prefill_tokens: 0,
                        });
                    }
                    slot.read(&chunk);
                    for piece in chunk.pieces {
                        self.accept(slot, piece, params.logprobs, run_id, emit);
                    }
                    match chunk.finish {
                        None => {}
                        Some(Finish::Length) => {
                            finish(slot, StopReason::Length, None, run_id, emit)
                        }
                        Some(Finish::Stop(matched)) => {
                            finish(slot, StopReason::Stop, matched, run_id, emit)
                        }
                        Some(Finish::Repetition) => {
                            finish(slot, StopReason::RepetitionDetected, None, run_id, emit)
                        }
                        Some(Finish::Other(reason)) => {
                            failure.get_or_insert(format!(
                                "the server ended sample {sample} with finish_reason `{reason}`"
                            ));
                            finish(slot, StopReason::Error, None, run_id, emit);
                        }
                    }
                }
                Heard::End if slot.ended => {}
                Heard::End => {
                    failure.get_or_insert(format!(
                        "the stream of sample {sample} ended before the server said why: the \
                         connection was cut"
                    ));
                    finish(slot, StopReason::Error, None, run_id, emit);
                }
                Heard::Failed(message) => {
                    failure.get_or_insert(message);
                    finish(slot, StopReason::Error, None, run_id, emit);
                }
            }
        }
        cancel.store(true, Ordering::Relaxed);
        if let Some(message) = failure {
            anyhow::bail!(message);
        }
        let elapsed = start.elapsed();
        let prefill = first_token.unwrap_or(elapsed);
        let decode_ms = (elapsed - prefill).as_secs_f64() * 1e3;
        let decoded: u32 = slots
            .iter()
            .map(|s| s.trajectory.token_ids.len() as u32)
            .sum();
        let trajectories: Vec<Trajectory> = slots
            .into_iter()
            .map(|s| s.trajectory.without_empty_channels())
            .collect();
        let stats = RunStats::of(&trajectories);
        let provenance = self.provenance(params, &trajectories);
        Ok(SampleResponse {
            model: self.info.name(),
            prompt: Some(request.prompt.record(None)),
            params: params.clone(),
            prompt_token_ids: Vec::new(),
            prompt_logprobs: None,
            prompt_top_logprobs: None,
            watch: None,
            prompt_watched: None,
            trajectories,
            stats,
            timings: Timings {
                prefill_ms: prefill.as_secs_f64() * 1e3,
                decode_ms,
                decode_tok_per_s: if decode_ms > 0.0 {
                    f64::from(decoded) / (decode_ms / 1e3)
                } else {
                    0.0
                },
                prefill_tokens: 0,
                tokens_replayed: 0,
                tokens_decoded: decoded,
            },
            provenance: Some(provenance),
        })
    }

    fn score(
        &mut self,
        request: &ScoreRequest,
        _vocab: u64,
        interrupted: &mut dyn FnMut() -> bool,
    ) -> anyhow::Result<Vec<CrossScore>> {
        super::score::score(&self.client, &self.info, request, interrupted)
    }

    fn trace(&self, _request: &TraceRequest) -> anyhow::Result<Vec<StageTrace>> {
        anyhow::bail!(
            "{} gives no logits, so the chain's stages cannot be traced",
            self.info.kind.name()
        )
    }

    fn record_traces(&mut self) -> anyhow::Result<()> {
        anyhow::bail!(
            "{} is served: --trace needs the model's logits at every step, which a server does \
             not give; trace on a local model",
            self.info.name()
        )
    }

    fn edit(&mut self, _request: &EditRequest) -> anyhow::Result<Edit> {
        anyhow::bail!(
            "{} gives no logits to continue an edited sample from: edit on a local model",
            self.info.kind.name()
        )
    }

    fn recover(&mut self, panic: String) -> anyhow::Error {
        anyhow::anyhow!("{panic}")
    }
}
