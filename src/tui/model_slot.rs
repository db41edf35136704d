//! The models loaded (or loading) in the playground: each one's engine, status and what its
//! last run reported.

use crate::engine::BackendKind;
use crate::params::Field;

/// Names a model's engine for good: events carry it, and it stays valid when models before it
/// are removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ModelId(pub usize);

#[derive(Debug, Clone, PartialEq)]
pub enum ModelStatus {
    /// `downloading`: the load is fetching a file, which the model picker's Del can cancel.
    Loading {
        progress: f32,
        message: String,
        downloading: bool,
    },
    Ready {
        name: String,
        device: String,
    },
    Failed(String),
}

/// One loaded (or loading) model and how its last run went.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSlot {
    /// Names the model's engine for good (see `ModelId`).
    pub id: ModelId,
    /// As given to `--model` or the model picker.
    pub spec: String,
    pub status: ModelStatus,
    pub prefill_ms: Option<f64>,
    pub tok_per_s: Option<f64>,
    /// The model has a chat template.
    pub chat_available: bool,
    /// The model gets the prompt through its chat template (see `chat_mode`).
    pub chat: bool,
    /// The vocabulary fingerprint from `Event::Loaded`, sent along with samples to be scored.
    pub vocab: u64,
    /// The model's special-token texts, marked where a chat message contains them.
    pub special_tokens: Vec<String>,
    /// For a served model, its server and the parameters the server has no place for.
    pub served: Option<(String, Vec<Field>)>,
    /// The local backend that loaded it (`None` while loading, and for a served model), which
    /// a saved session keeps.
    pub backend: Option<BackendKind>,
}

impl Default for ModelSlot {
    fn default() -> Self {
        Self {
            id: ModelId(0),
            spec: String::new(),
            status: ModelStatus::Loading {
                progress: 0.0,
                message: "starting".to_owned(),
                downloading: false,
            },
            prefill_ms: None,
            tok_per_s: None,
            chat_available: false,
            chat: false,
            vocab: 0,
            special_tokens: Vec::new(),
            served: None,
            backend: None,
        }
    }
}

impl ModelSlot {
    pub fn ready(&self) -> bool {
        matches!(self.status, ModelStatus::Ready { .. })
    }

    pub fn name(&self) -> Option<&str> {
        match &self.status {
            ModelStatus::Ready { name, .. } => Some(name),
            _ => None,
        }
    }

    /// Why the model could not load, as the status bar and the exit report say it.
    pub fn load_error(&self) -> Option<String> {
        match &self.status {
            ModelStatus::Failed(why) => Some(format!("cannot load model {}: {why}", self.spec)),
            _ => None,
        }
    }
}
