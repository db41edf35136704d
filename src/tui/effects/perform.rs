//! The effects that touch files or the terminal, performed by the loop and answered with an
//! `Outcome` for `update`, so that `update` itself stays pure.

use super::{clipboard, results_file};
use crate::engine::RunId;
use crate::model::source::HubSettings;
use crate::model::source::discover::discover;
use crate::params::SamplingParams;
use crate::preset_store::{PresetStore, SaveError};
use crate::tui::action::Outcome;
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

/// Writes into a new file when `path` is a directory (`~/` is the home directory), else to
/// `path` itself, replacing a file there only with `overwrite`.
pub fn write_results(
    path: &Path,
    overwrite: bool,
    run_id: RunId,
    json: serde_json::Result<String>,
) -> Outcome {
    let path = match (path.strip_prefix("~"), std::env::var_os("HOME")) {
        (Ok(rest), Some(home)) => Path::new(&home).join(rest),
        _ => path.to_owned(),
    };
    let json = match json {
        Ok(json) => json,
        Err(e) => return Outcome::ResultsWritten(Err(e.to_string())),
    };
    let written = if path.is_dir() {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        results_file::write(&path, run_id, now, &json)
    } else {
        match results_file::write_to(&path, overwrite, &json) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Outcome::ResultsExist(path);
            }
            written => written.map(|()| path),
        }
    };
    Outcome::ResultsWritten(written.map_err(|e| e.to_string()))
}

/// GGUF files and model directories where the playground was started, and the HF cache.
pub fn discover_models() -> Outcome {
    let here = std::env::current_dir().unwrap_or_default();
    let hub = HubSettings::from_env();
    Outcome::ModelsFound(discover(&here, &hub.cache_dir))
}
