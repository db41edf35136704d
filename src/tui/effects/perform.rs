//! The effects that touch files or the terminal, performed by the loop and answered with an
//! `Outcome` for `update`, so that `update` itself stays pure.

use super::{clipboard, results_file};
use crate::atomic_file;
use crate::engine::RunId;
use crate::model::source::HubSettings;
use crate::model::source::discover::{discover, in_modelscope_cache};
use crate::params::SamplingParams;
use crate::preset_store::{PresetStore, SaveError};
use crate::tui::action::Outcome;
use crate::tui::session;
use std::io::Write;
use std::path::{Path, PathBuf};
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
    let path = at_home(path);
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

/// `path` with a leading `~` read as the home directory, as a shell would.
fn at_home(path: &Path) -> PathBuf {
    match (path.strip_prefix("~"), std::env::var_os("HOME")) {
        (Ok(rest), Some(home)) => Path::new(&home).join(rest),
        _ => path.to_owned(),
    }
}

/// Writes a session file, replacing one there only with `overwrite`.
pub fn save_session(path: &Path, text: &str, overwrite: bool) -> Outcome {
    let path = at_home(path);
    match atomic_file::write(&path, overwrite, |f| f.write_all(text.as_bytes())) {
        Ok(()) => Outcome::SessionSaved(Ok(path)),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Outcome::SessionExists(path),
        Err(e) => Outcome::SessionSaved(Err(e.to_string())),
    }
}

pub fn open_session(path: &Path) -> Outcome {
    Outcome::SessionOpened(
        session::read(&at_home(path))
            .map(Box::new)
            .map_err(|e| e.to_string()),
    )
}

/// GGUF files and model directories where the playground was started, and the HF and
/// ModelScope caches.
pub fn discover_models() -> Outcome {
    let here = std::env::current_dir().unwrap_or_default();
    let hub = HubSettings::from_env();
    let mut found = discover(&here, &hub.cache_dir);
    found.extend(in_modelscope_cache(&hub.modelscope));
    Outcome::ModelsFound(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_written_whole_replaced_only_when_asked_and_a_missing_directory_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.yaml");
        assert_eq!(
            save_session(&path, "version: 1\n", false),
            Outcome::SessionSaved(Ok(path.clone()))
        );
        assert_eq!(
            save_session(&path, "version: 2\n", false),
            Outcome::SessionExists(path.clone())
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "version: 1\n");
        save_session(&path, "version: 2\n", true);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "version: 2\n");

        let missing = dir.path().join("nowhere");
        let Outcome::SessionSaved(Err(error)) = save_session(&missing.join("s.yaml"), "", false)
        else {
            panic!("a missing directory fails");
        };
        assert!(
            error.contains(&format!(
                "the directory {} does not exist",
                missing.display()
            )),
            "{error}"
        );
    }
}
