//! Models already on this machine, offered by the playground's model picker: GGUF files and
//! model directories in a folder, and what the Hugging Face and ModelScope caches hold
//! (including models that Python tools downloaded).

use super::modelscope::{self, ModelScopeSettings};
use std::path::Path;

/// Something `--model` accepts, with how the picker shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub spec: String,
    pub label: String,
    /// Bytes on disk: the GGUF file, or the files of a model directory or cached snapshot.
    pub size: Option<u64>,
}

/// Candidates in `folder`, then in the HF cache at `hub_cache`, each list sorted.
pub fn discover(folder: &Path, hub_cache: &Path) -> Vec<Candidate> {
    let mut found = in_folder(folder);
    found.extend(in_hub_cache(hub_cache));
    found
}

/// `*.gguf` files and directories holding config.json, one level deep.
fn in_folder(folder: &Path) -> Vec<Candidate> {
    let mut found: Vec<Candidate> = entries(folder)
        .into_iter()
        .filter(|path| is_gguf(path) || path.join("config.json").is_file())
        .map(|path| Candidate {
            spec: path.display().to_string(),
            label: format!("{} (local)", file_name(&path)),
            size: Some(if path.is_dir() {
                entries(&path).iter().map(|f| file_size(f)).sum()
            } else {
                file_size(&path)
            }),
        })
        .collect();
    found.sort_by(|a, b| a.label.cmp(&b.label));
    found
}

/// Repositories cached as `models--org--name/snapshots/<revision>/`: a safetensors model
/// (config.json and *.safetensors) is offered as `org/name`, each GGUF file as
/// `org/name:file.gguf`, with their sizes. Snapshots hold only complete files (a download in
/// progress stays in `blobs/`), so what is offered loads without the network.
fn in_hub_cache(hub_cache: &Path) -> Vec<Candidate> {
    let mut found = Vec::new();
    for repo in entries(hub_cache) {
        let Some(id) = file_name(&repo)
            .strip_prefix("models--")
            .map(|id| id.replacen("--", "/", 1))
        else {
            continue;
        };
        // Each file by name, from the snapshot `refs/main` names when it has it.
        let main = std::fs::read_to_string(repo.join("refs/main")).unwrap_or_default();
        let mut snapshots = entries(&repo.join("snapshots"));
        snapshots.sort_by_key(|s| file_name(s) != main.trim());
        let mut files: Vec<(String, u64)> = Vec::new();
        for snapshot in snapshots {
            for file in entries(&snapshot) {
                let name = file_name(&file);
                let known = files.iter().any(|(n, _)| *n == name);
                if file.is_file() && !known && !super::sha256_cache::is_entry(&name) {
                    files.push((name, file_size(&file)));
                }
            }
        }
        found.extend(offer(&id, files, "HF cache"));
    }
    found.sort_by(|a, b| a.label.cmp(&b.label));
    found
}

/// Repositories in the ModelScope cache, in whichever folder the SDK (and so samplab) reads
/// each from: offered as `ms://org/name` and `ms://org/name:file.gguf`. Parts of downloads
/// under way (`*.incomplete`) and the SDK's own dotfiles are left out.
pub fn in_modelscope_cache(settings: &ModelScopeSettings) -> Vec<Candidate> {
    let models = settings.cache_dir.join("models");
    // `org--name` (the snapshot layout), and `org/name___` in older SDKs' folders.
    let mut ids: Vec<String> = entries(&models)
        .iter()
        .filter_map(|dir| {
            file_name(dir)
                .split_once("--")
                .map(|(o, n)| format!("{o}/{n}"))
        })
        .collect();
    for root in [models, settings.cache_dir.join("hub/models")] {
        for org in entries(&root).iter().filter(|d| d.is_dir()) {
            for repo in entries(org).iter().filter(|d| d.is_dir()) {
                let (org, name) = (file_name(org), file_name(repo));
                if !org.contains("--") && !org.starts_with('.') {
                    ids.push(format!("{org}/{}", name.replace("___", ".")));
                }
            }
        }
    }
    ids.sort();
    ids.dedup();
    let mut found = Vec::new();
    for id in ids {
        let mut files: Vec<(String, u64)> = entries(&settings.model_dir(&id))
            .iter()
            .map(|file| (file_name(file), file_size(file)))
            .filter(|(name, _)| {
                !name.starts_with('.')
                    && !name.ends_with(".incomplete")
                    && !super::sha256_cache::is_entry(name)
            })
            .collect();
        files.sort();
        found.extend(offer(
            &format!("{}{id}", modelscope::PREFIX),
            files,
            "ModelScope cache",
        ));
    }
    found.sort_by(|a, b| a.label.cmp(&b.label));
    found
}

/// What one cached repository `id` offers from its `files` (name, size): the safetensors
/// model when config.json and weights are there, and each GGUF file.
fn offer(id: &str, mut files: Vec<(String, u64)>, cache: &str) -> Vec<Candidate> {
    files.sort();
    let has = |suffix: &str| files.iter().any(|(f, _)| f.ends_with(suffix));
    let mut found = Vec::new();
    if has("config.json") && has(".safetensors") {
        let size = files
            .iter()
            .filter(|(f, _)| !f.ends_with(".gguf"))
            .map(|(_, size)| size)
            .sum();
        found.push(Candidate {
            label: format!("{id} ({cache})"),
            spec: id.to_owned(),
            size: Some(size),
        });
    }
    for (gguf, size) in files.iter().filter(|(f, _)| f.ends_with(".gguf")) {
        found.push(Candidate {
            spec: format!("{id}:{gguf}"),
            label: format!("{id}:{gguf} ({cache})"),
            size: Some(*size),
        });
    }
    found
}

/// The size of the file a path (or the symlink into `blobs/`) names; 0 when unreadable.
fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| if m.is_file() { m.len() } else { 0 })
}

/// The entries of a directory; none when it cannot be read (a missing cache is normal).
fn entries(dir: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .map(|read| read.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default()
}

fn is_gguf(path: &Path) -> bool {
    path.is_file() && path.extension().is_some_and(|e| e == "gguf")
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}
