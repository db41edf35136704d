//! What `--model` names: a GGUF file, a Hugging Face model directory, a Hub id, a ModelScope
//! id (`ms://org/name`), or the built-in samplab-tiny.
//!
//! Hub ids resolve into the standard HF cache (`$HF_HOME/hub`) and ModelScope ids into
//! ModelScope's (`$MODELSCOPE_CACHE`), so models downloaded by Python tools are reused and ours
//! are reused by them. Offline, only the cache is consulted.

pub mod cache;
pub mod cancel;
pub mod discover;
pub mod embedded;
pub mod hub;
pub mod modelscope;
mod modelscope_settings;
pub mod origin;
mod sha256;
mod sha256_cache;
pub mod synthetic;

use hub::{HubError, Transfer};
use modelscope::ModelScopeError;
use std::path::{Path, PathBuf};

pub use hub::HubSettings;

/// A model on local disk, ready to load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSource {
    Gguf(PathBuf),
    /// A directory with config.json, *.safetensors and tokenizer.json.
    HfDir(PathBuf),
}

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("model path {0} does not exist")]
    NotFound(PathBuf),
    #[error(
        "{0} is a directory without config.json; a Hugging Face model directory holds config.json, *.safetensors and tokenizer.json (or give a .gguf file)"
    )]
    NotAModelDir(PathBuf),
    #[error(
        "{0} is not a model: give a .gguf file, a Hugging Face model directory, or a Hub id like `org/name` or `org/name:file.gguf`"
    )]
    NotAModel(String),
    #[error(
        "`{0}` is not a ModelScope id: write `ms://org/name` for a safetensors repository or `ms://org/name:file.gguf` for one GGUF file of it"
    )]
    NotAModelScopeId(String),
    #[error(
        "`{id}` is not in the {site} cache at {cache} ({missing} missing) and HF_HUB_OFFLINE is set: run once online, or point --model at a local file"
    )]
    NotCached {
        id: String,
        site: &'static str,
        cache: PathBuf,
        missing: String,
    },
    #[error(
        "cannot write the built-in model {name} into the cache: {source}; set XDG_CACHE_HOME to a writable directory, or pass --model",
        name = embedded::NAME
    )]
    Embedded { source: std::io::Error },
    #[error(transparent)]
    Hub(#[from] HubError),
    #[error(transparent)]
    ModelScope(#[from] ModelScopeError),
    #[error(
        "the repository `{id}` has no config.json, so it is not a transformers model; for a GGUF \
         repository name the file too: `{id}:file.gguf`"
    )]
    NotATransformersRepo { id: String },
    #[error("`{file}` of `{id}` is not a valid shard index: {message}")]
    BadIndex {
        id: String,
        file: String,
        message: String,
    },
}

/// One step of finding and loading a model, as progress displays show it.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadProgress {
    /// Of the current step, in [0, 1].
    pub fraction: f32,
    pub message: String,
    /// The download under way, when the step is one.
    pub download: Option<Transfer>,
}

impl LoadProgress {
    pub fn step(fraction: f32, message: impl Into<String>) -> Self {
        Self {
            fraction,
            message: message.into(),
            download: None,
        }
    }

    /// `downloading model.gguf 1.2 GB / 4.0 GB · 12.3 MB/s · 5 min 0 s left`.
    pub fn download(transfer: &Transfer) -> Self {
        Self {
            fraction: transfer.fraction(),
            message: format!("downloading {} {}", transfer.file, transfer.figures()),
            download: Some(transfer.clone()),
        }
    }
}

/// Files of a safetensors model repository that loading reads when present.
const HF_OPTIONAL: [&str; 4] = [
    "generation_config.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
];

/// Resolves `--model`; `progress` hears of each download as it goes.
pub fn resolve(
    spec: &str,
    hub: &HubSettings,
    progress: &mut dyn FnMut(LoadProgress),
) -> Result<ModelSource, SourceError> {
    match named(spec)? {
        Named::Embedded => {
            let dir = embedded::materialise().map_err(|source| SourceError::Embedded { source })?;
            Ok(ModelSource::HfDir(dir))
        }
        Named::Local(source) => Ok(source),
        Named::Remote(repo, Some(file)) => Ok(ModelSource::Gguf(fetch(repo, file, hub, progress)?)),
        Named::Remote(repo, None) => {
            let config = fetch(repo, "config.json", hub, progress).map_err(|e| {
                if e.is_file_not_found() {
                    SourceError::NotATransformersRepo {
                        id: repo.to_string(),
                    }
                } else {
                    e
                }
            })?;
            fetch(repo, "tokenizer.json", hub, progress)?;
            for file in HF_OPTIONAL {
                fetch_optional(repo, file, hub, progress)?;
            }
            fetch_weights(repo, hub, progress)?;
            let dir = config.parent().map(Path::to_path_buf).unwrap_or_default();
            Ok(ModelSource::HfDir(dir))
        }
    }
}

/// What a `--model` spec names, found without loading or downloading anything.
enum Named<'a> {
    Embedded,
    Local(ModelSource),
    /// A repository id, with the GGUF file it picks.
    Remote(Repo<'a>, Option<&'a str>),
}

/// The sites whose repositories `--model` can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Site {
    HuggingFace,
    ModelScope,
}

/// Repository `id` (`org/name`) on `site`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Repo<'a> {
    site: Site,
    id: &'a str,
}

/// As the user writes it: `org/name` or `ms://org/name`.
impl std::fmt::Display for Repo<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.site {
            Site::HuggingFace => write!(f, "{}", self.id),
            Site::ModelScope => write!(f, "{}{}", modelscope::PREFIX, self.id),
        }
    }
}

impl SourceError {
    /// The repository exists but lacks the file.
    fn is_file_not_found(&self) -> bool {
        matches!(
            self,
            SourceError::Hub(HubError::FileNotFound { .. })
                | SourceError::ModelScope(ModelScopeError::FileNotFound { .. })
        )
    }
}

fn named(spec: &str) -> Result<Named<'_>, SourceError> {
    if embedded::is_embedded(spec) {
        return Ok(Named::Embedded);
    }
    if let Some(rest) = spec.strip_prefix(modelscope::PREFIX) {
        let (id, file) =
            parse_hub_id(rest).ok_or_else(|| SourceError::NotAModelScopeId(spec.to_owned()))?;
        let repo = Repo {
            site: Site::ModelScope,
            id,
        };
        return Ok(Named::Remote(repo, file));
    }
    let path = Path::new(spec);
    if path.exists() {
        return local(path).map(Named::Local);
    }
    match parse_hub_id(spec) {
        Some((id, file)) => {
            let repo = Repo {
                site: Site::HuggingFace,
                id,
            };
            Ok(Named::Remote(repo, file))
        }
        None if looks_like_path(spec) => Err(SourceError::NotFound(path.to_owned())),
        None => Err(SourceError::NotAModel(spec.to_owned())),
    }
}

/// Refuses a spec that can no longer name a model (a path gone, a directory that is no
/// model's) before anything is loaded; a repository id passes, as only its download can tell.
pub fn check_named(spec: &str) -> Result<(), SourceError> {
    named(spec).map(drop)
}

fn local(path: &Path) -> Result<ModelSource, SourceError> {
    if path.is_dir() {
        if path.join("config.json").is_file() {
            Ok(ModelSource::HfDir(path.to_owned()))
        } else {
            Err(SourceError::NotAModelDir(path.to_owned()))
        }
    } else {
        Ok(ModelSource::Gguf(path.to_owned()))
    }
}

fn looks_like_path(spec: &str) -> bool {
    spec.starts_with(['.', '/', '~'])
        || spec.ends_with(".gguf")
        || spec.matches('/').count() > 1
        || spec.contains('\\')
}

/// `org/name` or `org/name:file.gguf`; `None` when the text cannot be a Hub id.
fn parse_hub_id(spec: &str) -> Option<(&str, Option<&str>)> {
    let (id, file) = match spec.split_once(':') {
        Some((id, file)) if file.ends_with(".gguf") => (id, Some(file)),
        Some(_) => return None,
        None => (spec, None),
    };
    let (org, name) = id.split_once('/')?;
    let valid = |s: &str| {
        !s.is_empty()
            && !s.starts_with(['.', '-'])
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    };
    (valid(org) && valid(name)).then_some((id, file))
}

/// The weights: one model.safetensors, or the shards an index names.
fn fetch_weights(
    repo: Repo,
    hub: &HubSettings,
    progress: &mut dyn FnMut(LoadProgress),
) -> Result<(), SourceError> {
    let index = "model.safetensors.index.json";
    let Some(index_path) = fetch_optional(repo, index, hub, progress)? else {
        fetch(repo, "model.safetensors", hub, progress)?;
        return Ok(());
    };
    let bad_index = |message: String| SourceError::BadIndex {
        id: repo.to_string(),
        file: index.to_owned(),
        message,
    };
    let text = std::fs::read_to_string(&index_path).map_err(|e| bad_index(e.to_string()))?;
    let parsed: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| bad_index(format!("not valid JSON: {e}")))?;
    let mut shards: Vec<&str> = parsed["weight_map"]
        .as_object()
        .map(|map| map.values().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    shards.sort_unstable();
    shards.dedup();
    for shard in shards {
        fetch(repo, shard, hub, progress)?;
    }
    Ok(())
}

/// One file of a repository: from its site's cache when present, downloaded otherwise;
/// `None` when offline and not cached.
fn fetch_from(
    repo: Repo,
    file: &str,
    hub: &HubSettings,
    progress: &mut dyn FnMut(LoadProgress),
) -> Result<Option<PathBuf>, SourceError> {
    let observe = &mut |transfer: &Transfer| progress(LoadProgress::download(transfer));
    Ok(match repo.site {
        Site::HuggingFace => hub::fetch(hub, repo.id, file, observe)?,
        Site::ModelScope => modelscope::fetch(hub, repo.id, file, observe)?,
    })
}

/// A file the model needs: offline and not cached, an error that says so.
fn fetch(
    repo: Repo,
    file: &str,
    hub: &HubSettings,
    progress: &mut dyn FnMut(LoadProgress),
) -> Result<PathBuf, SourceError> {
    fetch_from(repo, file, hub, progress)?.ok_or_else(|| {
        let (site, cache) = match repo.site {
            Site::HuggingFace => ("Hugging Face", hub.cache_dir.clone()),
            Site::ModelScope => ("ModelScope", hub.modelscope.cache_dir.clone()),
        };
        SourceError::NotCached {
            id: repo.to_string(),
            site,
            cache,
            missing: file.to_owned(),
        }
    })
}

/// A file the repository may lack: `None` when it does (or when offline and not cached).
fn fetch_optional(
    repo: Repo,
    file: &str,
    hub: &HubSettings,
    progress: &mut dyn FnMut(LoadProgress),
) -> Result<Option<PathBuf>, SourceError> {
    match fetch_from(repo, file, hub, progress) {
        Err(SourceError::Hub(HubError::NotFound { .. })) => Ok(None),
        Err(e) if e.is_file_not_found() => Ok(None),
        found => found,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lays out a repo the way huggingface_hub does: refs/main names a snapshot of files.
    fn fake_cache(files: &[&str]) -> (tempfile::TempDir, HubSettings) {
        let home = tempfile::tempdir().unwrap();
        let repo = home.path().join("hub/models--org--tiny");
        std::fs::create_dir_all(repo.join("refs")).unwrap();
        std::fs::write(repo.join("refs/main"), "abc123").unwrap();
        let snapshot = repo.join("snapshots/abc123");
        std::fs::create_dir_all(&snapshot).unwrap();
        for file in files {
            std::fs::write(snapshot.join(file), "{}").unwrap();
        }
        let hub = HubSettings {
            offline: true,
            ..HubSettings::new(home.path().join("hub"))
        };
        (home, hub)
    }

    #[test]
    fn hub_id_resolves_from_the_cache_offline() {
        let (home, hub) = fake_cache(&[
            "config.json",
            "tokenizer.json",
            "model.safetensors",
            "tiny.Q8_0.gguf",
        ]);
        let snapshot = home.path().join("hub/models--org--tiny/snapshots/abc123");
        let mut calls = 0;
        let mut progress = |_: LoadProgress| calls += 1;
        assert_eq!(
            resolve("org/tiny", &hub, &mut progress).unwrap(),
            ModelSource::HfDir(snapshot.clone())
        );
        assert_eq!(
            resolve("org/tiny:tiny.Q8_0.gguf", &hub, &mut progress).unwrap(),
            ModelSource::Gguf(snapshot.join("tiny.Q8_0.gguf"))
        );
        assert_eq!(calls, 0, "nothing downloads from a full cache");
    }

    #[test]
    fn offline_cache_miss_names_the_missing_file() {
        let (_home, hub) = fake_cache(&["config.json"]);
        let err = resolve("org/tiny", &hub, &mut |_| {}).unwrap_err();
        let message = err.to_string();
        assert!(matches!(err, SourceError::NotCached { .. }), "{message}");
        assert!(message.contains("tokenizer.json"), "{message}");
        assert!(message.contains("HF_HUB_OFFLINE"), "{message}");
    }

    #[test]
    fn local_paths_are_classified() {
        let dir = tempfile::tempdir().unwrap();
        let hub = HubSettings {
            offline: true,
            ..HubSettings::new(dir.path().join("hub"))
        };
        let gguf = dir.path().join("m.gguf");
        std::fs::write(&gguf, "x").unwrap();
        let spec = gguf.to_str().unwrap();
        assert_eq!(
            resolve(spec, &hub, &mut |_| {}).unwrap(),
            ModelSource::Gguf(gguf.clone())
        );
        let err = resolve(dir.path().to_str().unwrap(), &hub, &mut |_| {}).unwrap_err();
        assert!(matches!(err, SourceError::NotAModelDir(_)), "{err}");
        std::fs::write(dir.path().join("config.json"), "{}").unwrap();
        assert_eq!(
            resolve(dir.path().to_str().unwrap(), &hub, &mut |_| {}).unwrap(),
            ModelSource::HfDir(dir.path().to_owned())
        );
        let missing = dir.path().join("nope.gguf");
        let err = resolve(missing.to_str().unwrap(), &hub, &mut |_| {}).unwrap_err();
        assert!(matches!(err, SourceError::NotFound(_)), "{err}");
        let err = resolve("just-a-word", &hub, &mut |_| {}).unwrap_err();
        assert!(matches!(err, SourceError::NotAModel(_)), "{err}");
    }

    #[test]
    fn hub_ids_are_parsed_strictly() {
        assert_eq!(parse_hub_id("org/name"), Some(("org/name", None)));
        assert_eq!(
            parse_hub_id("org/name:f.gguf"),
            Some(("org/name", Some("f.gguf")))
        );
        assert_eq!(parse_hub_id("org/name:f.bin"), None);
        assert_eq!(parse_hub_id("org/"), None);
        assert_eq!(parse_hub_id("a/b/c"), None);
        assert_eq!(parse_hub_id("org/na me"), None);
    }

    #[test]
    fn modelscope_ids_are_named_as_twinkle_writes_them() {
        let Ok(Named::Remote(repo, file)) = named("ms://Qwen/Qwen3.5-4B:q4.gguf") else {
            panic!("a ModelScope id with its file");
        };
        assert_eq!(
            (repo.site, repo.id, file),
            (Site::ModelScope, "Qwen/Qwen3.5-4B", Some("q4.gguf"))
        );
        assert_eq!(repo.to_string(), "ms://Qwen/Qwen3.5-4B");
        // A session or preset naming one passes the check before loading.
        assert!(check_named("ms://Qwen/Qwen3.5-4B").is_ok());
        for bad in ["ms://Qwen", "ms://a/b/c", "ms://org/name:f.bin", "ms://"] {
            let err = check_named(bad).unwrap_err();
            assert!(
                matches!(err, SourceError::NotAModelScopeId(_)),
                "{bad}: {err}"
            );
        }
    }
}
