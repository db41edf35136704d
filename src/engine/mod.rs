//! The engine: a worker thread that owns a model and turns requests into streamed events.
//!
//! It never touches the terminal; the UI and the CLI meet it only at `Request` and `Event`.

pub mod backend;
pub mod backend_choice;
pub mod contain;
pub mod disagreement;
pub mod edit;
pub mod events;
pub mod generate;
pub mod llama_cpp;
pub mod load;
pub mod prompt;
pub mod remote;
pub mod replay;
pub mod reproduce;
pub mod runner;
pub mod score;
pub mod structured;
pub mod trace;
pub mod watch;
pub mod worker;

pub use backend::{Backend, ParkedRow, Prefill, RowSource};
pub use backend_choice::{BackendChoice, BackendKind, Backends};
pub use events::{
    Alternative, Branch, Edit, EditRequest, Event, PromptToken, Request, RunId, TokenEvent,
};
pub use prompt::{Conversation, Prompt};
pub use replay::ReplayStore;
pub use runner::Runner;
pub use score::{ScoreRequest, ScoreSample};
pub use trace::TraceRequest;
pub use worker::{Engine, LoadedModel, TextEncoder, random_seed};
