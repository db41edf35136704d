//! Reading model files: GGUF headers (checked beyond what candle checks), the hyper-parameters
//! of GGUF metadata and config.json, and the tensors of GGUF and safetensors files.

pub mod config;
mod fused_experts;
pub(crate) mod gguf_checks;
pub(crate) mod gguf_write;
pub(crate) mod mxfp4;
pub(crate) mod tensors;
