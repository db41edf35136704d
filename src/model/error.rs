//! What can go wrong loading or running a model, said so that the user knows what to fix.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("model not found: {}", .0.display())]
    NotFound(PathBuf),
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{} is not a GGUF file (expected a .gguf file or a Hugging Face model directory with config.json)",
        .0.display()
    )]
    NotGguf(PathBuf),
    #[error("{} is truncated: its tensors need {needed} bytes but the file has {actual}; download it again", path.display())]
    Truncated {
        path: PathBuf,
        needed: u64,
        actual: u64,
    },
    #[error("{} is corrupt: {reason}", path.display())]
    Corrupt { path: PathBuf, reason: String },
    #[error("unsupported architecture `{name}`; supported: {supported}")]
    UnsupportedArchitecture { name: String, supported: String },
    #[error("{} has no safetensors weights (expected model.safetensors or model-*.safetensors)", .0.display())]
    NoWeights(PathBuf),
    #[error("invalid model config in {}: {reason}", path.display())]
    Config { path: PathBuf, reason: String },
    #[error("tensor `{name}` is missing from {}: a {family} model has one", path.display())]
    MissingTensor {
        path: PathBuf,
        name: String,
        family: &'static str,
    },
    #[error("tensor `{name}` in {} has shape {actual:?}; a {family} model's is {expected:?}", path.display())]
    TensorShape {
        path: PathBuf,
        name: String,
        family: &'static str,
        expected: Vec<usize>,
        actual: Vec<usize>,
    },
    #[error(
        "context full: {needed} positions needed, the model's context length is {context_length}"
    )]
    ContextFull {
        needed: usize,
        context_length: usize,
    },
    #[error("invalid call: {0}")]
    Usage(String),
    #[error(transparent)]
    Activations(#[from] super::ActivationsError),
    #[error(transparent)]
    Candle(candle_core::Error),
}

impl From<candle_core::Error> for ModelError {
    fn from(e: candle_core::Error) -> Self {
        ModelError::Candle(without_backtrace(e))
    }
}

/// candle attaches a backtrace when RUST_BACKTRACE is set; a user needs only the message.
pub fn without_backtrace(e: candle_core::Error) -> candle_core::Error {
    match e {
        candle_core::Error::WithBacktrace { inner, .. } => without_backtrace(*inner),
        other => other,
    }
}
