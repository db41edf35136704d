//! What the worker thread drives: a model loaded into this process, or one a server runs.
//! Both answer the same requests with the same events, so the CLI and the playground treat
//! them alike.

use super::disagreement::RowsRequest;
use super::events::{Edit, EditRequest};
use super::events::{Event, Request};
use super::score::ScoreRequest;
use super::trace::TraceRequest;
use crate::response::{CrossScore, SampleResponse};
use crate::sampling::StageTrace;

pub trait Runner: Send {
    /// The `Event::Loaded` that announces the model, sent once it is ready.
    fn loaded(&self) -> Event;

    /// The `Event::Served` that follows `Loaded` for a model a server runs.
    fn served(&self) -> Option<Event> {
        None
    }

    /// Runs one request to its end (or until `interrupted` says to stop), emitting its events.
    fn run(
        &mut self,
        request: &Request,
        interrupted: &mut dyn FnMut() -> bool,
        emit: &mut dyn FnMut(Event),
    ) -> anyhow::Result<SampleResponse>;

    /// Scores another model's samples; `vocab` is this model's fingerprint (its `Loaded`
    /// event's), which tells whether their token ids are ours.
    fn score(
        &mut self,
        request: &ScoreRequest,
        vocab: u64,
        interrupted: &mut dyn FnMut() -> bool,
    ) -> anyhow::Result<Vec<CrossScore>>;

    /// Sends the raw distributions of the samples of `request` (or their tokens' bytes) to the
    /// model scoring them (see [`super::disagreement`]); a served model has neither to give.
    fn rows(
        &mut self,
        _request: &RowsRequest,
        _interrupted: &mut dyn FnMut() -> bool,
    ) -> anyhow::Result<()> {
        anyhow::bail!("a served model gives neither full distributions nor its tokens' bytes")
    }

    /// Renders conversations with the chat template `--chat-template` names (a Jinja file, or
    /// one of the model's named templates) instead of the model's default; `None` keeps it. A
    /// served model's server renders with its own, so it refuses a choice.
    fn use_chat_template(&mut self, choice: Option<&str>) -> anyhow::Result<()> {
        match choice {
            None => Ok(()),
            Some(_) => anyhow::bail!(
                "--chat-template applies to models loaded here: a served model's server renders \
                 conversations with its own template (vLLM: `vllm serve --chat-template FILE`)"
            ),
        }
    }

    /// What each stage of the chain did at one step of the last run.
    fn trace(&self, request: &TraceRequest) -> anyhow::Result<Vec<StageTrace>>;

    /// From now on every run records each token's stage trace in its trajectories
    /// (`Trajectory::trace`), for a page that shows them; a served model has no logits to
    /// trace and refuses.
    fn record_traces(&mut self) -> anyhow::Result<()>;

    /// An edited sample's forced tokens (see `engine::edit`).
    fn edit(&mut self, request: &EditRequest) -> anyhow::Result<Edit>;

    /// After a panic in the middle of a job: whatever state it left is dropped.
    fn recover(&mut self, panic: String) -> anyhow::Error;
}

impl<R: Runner + ?Sized> Runner for Box<R> {
    fn loaded(&self) -> Event {
        (**self).loaded()
    }

    fn served(&self) -> Option<Event> {
        (**self).served()
    }

    fn run(
        &mut self,
        request: &Request,
        interrupted: &mut dyn FnMut() -> bool,
        emit: &mut dyn FnMut(Event),
    ) -> anyhow::Result<SampleResponse> {
        (**self).run(request, interrupted, emit)
    }

    fn score(
        &mut self,
        request: &ScoreRequest,
        vocab: u64,
        interrupted: &mut dyn FnMut() -> bool,
    ) -> anyhow::Result<Vec<CrossScore>> {
        (**self).score(request, vocab, interrupted)
    }

    fn rows(
        &mut self,
        request: &RowsRequest,
        interrupted: &mut dyn FnMut() -> bool,
    ) -> anyhow::Result<()> {
        (**self).rows(request, interrupted)
    }

    fn trace(&self, request: &TraceRequest) -> anyhow::Result<Vec<StageTrace>> {
        (**self).trace(request)
    }

    fn record_traces(&mut self) -> anyhow::Result<()> {
        (**self).record_traces()
    }

    fn use_chat_template(&mut self, choice: Option<&str>) -> anyhow::Result<()> {
        (**self).use_chat_template(choice)
    }

    fn edit(&mut self, request: &EditRequest) -> anyhow::Result<Edit> {
        (**self).edit(request)
    }

    fn recover(&mut self, panic: String) -> anyhow::Error {
        (**self).recover(panic)
    }
}
