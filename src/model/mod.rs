//! Models: where they come from ([`source`], the built-in [`embedded`] one), how GGUF
//! vocabularies tokenize ([`gguf_tokenizer`]), and our own llama-family forward pass on candle:
//! Llama 2/3, TinyLlama, SmolLM, Mistral, Qwen2/2.5 and Qwen3, from a GGUF file (weights stay
//! quantized) or a Hugging Face directory (safetensors, run in f32).
//!
//! A run prefills the shared prompt once into a [`Session`], forks it into one row per
//! sample, and decodes all rows in one batched forward per step. The model knows nothing
//! about sampling: it returns logits.

mod attention;
pub mod cache;
pub mod chat_template;
pub mod config;
mod dense_kernel;
pub mod device;
pub mod discover;
pub mod embedded;
pub mod error;
mod fused;
mod gguf_checks;
pub mod gguf_tokenizer;
pub mod hub;
mod kernels;
mod kv_cache;
mod llama;
pub mod memory;
pub(crate) mod parallel;
mod prefetch;
mod rope;
pub mod source;
pub mod synthetic;
mod weights;

pub use config::{Architecture, GenerationDefaults, ModelConfig, RopeLayout, RopeScaling};
pub use error::ModelError;
pub use kernels::{Activations, ActivationsError};
pub use llama::{Model, OpenGguf, Session};
