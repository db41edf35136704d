//! Models, in the order a run meets them: where a model comes from ([`source`]: files, the
//! Hub, the built-in samplab-tiny, synthetic benchmarks), how its files are read ([`formats`]:
//! GGUF, safetensors, config.json), how its text becomes tokens ([`text`]: tokenizers and
//! chat templates), what its layers compute ([`arch`], on the CPU [`kernels`]), and what a
//! sequence keeps between steps ([`state`]).
//!
//! A run prefills the shared prompt once into a [`Session`], forks it into one row per
//! sample, and decodes all rows in one batched forward per step. The model knows nothing
//! about sampling: it returns logits.

mod arch;
pub mod device;
pub mod error;
pub mod formats;
mod kernels;
pub mod memory;
pub mod source;
mod state;
pub mod text;

pub use arch::registry::Architecture;
pub use arch::{Model, OpenGguf, Session};
pub use error::ModelError;
pub use formats::config::{
    AttnTemperature, Experts, GenerationDefaults, LayerAttention, ModelConfig, RopeScaling,
};
pub use kernels::bandwidth;
pub use kernels::fused::RopeLayout;
pub(crate) use kernels::parallel;
pub use kernels::{Activations, ActivationsError};
pub use state::{Cuts, DEFAULT_REPLAY_BUDGET, Snapshots};
