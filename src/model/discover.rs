//! Models already on this machine, offered by the playground's model picker: GGUF files and
//! model directories in a folder, and what the Hugging Face cache holds (including models
//! that Python tools downloaded).

use std::path::Path;

/// Something `--model` accepts, with how the picker shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub spec: String,
    pub label: String,
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
        })
        .collect();
    found.sort_by(|a, b| a.label.cmp(&b.label));
    found
}

/// Repositories cached as `models--org--name/snapshots/<revision>/`: a safetensors model is
/// offered as `org/name`, each GGUF file as `org/name:file.gguf`.
fn in_hub_cache(hub_cache: &Path) -> Vec<Candidate> {
    let mut found = Vec::new();
    for repo in entries(hub_cache) {
        let Some(id) = file_name(&repo)
            .strip_prefix("models--")
            .map(|id| id.replacen("--", "/", 1))
        else {
            continue;
        };
        let mut files: Vec<String> = entries(&repo.join("snapshots"))
            .iter()
            .flat_map(|snapshot| entries(snapshot))
            .map(|file| file_name(&file))
            .collect();
        files.sort();
        files.dedup();
        if files.iter().any(|f| f == "config.json") {
            found.push(Candidate {
                label: format!("{id} (HF cache)"),
                spec: id.clone(),
            });
        }
        for gguf in files.iter().filter(|f| f.ends_with(".gguf")) {
            found.push(Candidate {
                spec: format!("{id}:{gguf}"),
                label: format!("{id}:{gguf} (HF cache)"),
            });
        }
    }
    found.sort_by(|a, b| a.label.cmp(&b.label));
    found
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
