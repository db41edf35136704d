//! Models served elsewhere: any OpenAI-compatible endpoint (vLLM, llama.cpp's server,
//! llama-cpp-python, OpenAI), sampled through its streaming completions API and shown like a
//! local model (issue 12).
//!
//! `--model http://host:port/v1#name` names one. Each sample is its own request with seed
//! `seed + i`, so columns are reproducible where the server honours seeds; the requests stream
//! side by side and their chunks become the same events a local run emits.

pub mod http;
pub mod model;
pub mod params;
pub mod score;
pub mod server;
pub mod spec;
pub mod sse;
pub mod stream;

pub use model::{RemoteModel, connect};
pub use spec::RemoteSpec;
