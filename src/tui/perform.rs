//! The effects that touch files or the terminal, performed by the loop and answered with an
//! `Outcome` for `update`, so that `update` itself stays pure.

use super::action::Outcome;
use super::{clipboard, results_file};
use crate::engine::RunId;
use crate::model::discover::discover;
use crate::model::source::HubSettings;
use crate::params::SamplingParams;
use crate::preset_store::{PresetStore, SaveError};
use std::io::Write;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

pub fn list_presets(store: &PresetStore) -> Outcome {
    Outcome::PresetsListed(
        store
            .list()
            .map_err(|e| format!("{}: {e}", store.dir.display())),
    )
}

pub fn save_preset(
    store: &PresetStore,
    name: &str,
    params: &SamplingParams,
    overwrite: bool,
) -> Outcome {
    match store.save(name, params, overwrite) {
        Ok(preset) => Outcome::PresetSaved(Ok(preset)),
        Err(SaveError::Exists { name, .. }) => Outcome::PresetExists(name),
        Err(e) => Outcome::PresetSaved(Err(e.to_string())),
    }
}

pub fn copy(out: &mut dyn Write, text: &str) -> Outcome {
    Outcome::Copied(clipboard::copy(out, text).map_err(|e| e.to_string()))
}

pub fn write_results(dir: &Path, run_id: RunId, json: serde_json::Result<String>) -> Outcome {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    Outcome::ResultsWritten(
        json.map_err(std::io::Error::other)
            .and_then(|json| results_file::write(dir, run_id, now, &json))
            .map_err(|e| e.to_string()),
    )
}

/// GGUF files and model directories where the playground was started, and the HF cache.
pub fn discover_models() -> Outcome {
    let here = std::env::current_dir().unwrap_or_default();
    let hub = HubSettings::from_env();
    Outcome::ModelsFound(discover(&here, &hub.cache_dir))
}
