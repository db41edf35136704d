//! The engine: a worker thread that owns a model and turns requests into streamed events.
//!
//! It never touches the terminal; the UI and the CLI meet it only at `Request` and `Event`.

pub mod backend;
pub mod events;
pub mod generate;
pub mod load;
pub mod worker;

pub use backend::Backend;
pub use events::{Alternative, Event, Request, RunId, TokenEvent};
pub use worker::{Engine, LoadedModel};
