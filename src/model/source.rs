//! What `--model` names: a GGUF file, a Hugging Face model directory, a Hub id, or the
//! built-in samplab-tiny.
//!
//! Hub ids resolve into the standard HF cache (`$HF_HOME/hub`), so models downloaded by Python
//! tools are reused and ours are reused by them. Offline, only the cache is consulted.

use super::embedded;
use hf_hub::api::Progress;
use hf_hub::api::sync::ApiBuilder;
use hf_hub::{Cache, Repo};
use std::path::{Path, PathBuf};

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
        "`{id}` is not in the Hugging Face cache at {cache} ({missing} missing) and HF_HUB_OFFLINE is set: run once online, or point --model at a local file"
    )]
    NotCached {
        id: String,
        cache: PathBuf,
        missing: String,
    },
    #[error(
        "cannot write the built-in model {name} into the cache: {source}; set XDG_CACHE_HOME to a writable directory, or pass --model",
        name = embedded::NAME
    )]
    Embedded { source: std::io::Error },
    #[error(
        "cannot download `{file}` of `{id}`: {message}. Check the id, your network, or HF_TOKEN for a gated model"
    )]
    Download {
        id: String,
        file: String,
        message: String,
    },
}

/// How to reach the Hub; `from_env` reads the variables Python's huggingface_hub reads.
#[derive(Debug, Clone)]
pub struct HubSettings {
    pub cache_dir: PathBuf,
    pub offline: bool,
    pub token: Option<String>,
}

impl HubSettings {
    /// HF_HOME (else ~/.cache/huggingface), HF_HUB_OFFLINE, HF_TOKEN (else the cached token file).
    pub fn from_env() -> Self {
        let cache = Cache::from_env();
        let offline = std::env::var("HF_HUB_OFFLINE").is_ok_and(|v| {
            matches!(
                v.trim().to_lowercase().as_str(),
                "1" | "true" | "yes" | "on"
            )
        });
        let token = std::env::var("HF_TOKEN")
            .ok()
            .filter(|t| !t.is_empty())
            .or_else(|| cache.token());
        HubSettings {
            cache_dir: cache.path().clone(),
            offline,
            token,
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

/// Resolves `--model`. `progress` gets (fraction, message) while files download.
pub fn resolve(
    spec: &str,
    hub: &HubSettings,
    progress: &mut dyn FnMut(f32, &str),
) -> Result<ModelSource, SourceError> {
    if embedded::is_embedded(spec) {
        let dir = embedded::materialise().map_err(|source| SourceError::Embedded { source })?;
        return Ok(ModelSource::HfDir(dir));
    }
    let path = Path::new(spec);
    if path.exists() {
        return local(path);
    }
    match parse_hub_id(spec) {
        Some((id, Some(file))) => Ok(ModelSource::Gguf(fetch(id, file, hub, progress)?)),
        Some((id, None)) => {
            let config = fetch(id, "config.json", hub, progress)?;
            fetch(id, "tokenizer.json", hub, progress)?;
            for file in HF_OPTIONAL {
                // Absent optional files are normal; any other failure shows up when loading.
                let _ = fetch(id, file, hub, progress);
            }
            fetch_weights(id, hub, progress)?;
            let dir = config.parent().map(Path::to_path_buf).unwrap_or_default();
            Ok(ModelSource::HfDir(dir))
        }
        None if looks_like_path(spec) => Err(SourceError::NotFound(path.to_owned())),
        None => Err(SourceError::NotAModel(spec.to_owned())),
    }
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
    id: &str,
    hub: &HubSettings,
    progress: &mut dyn FnMut(f32, &str),
) -> Result<(), SourceError> {
    let index = "model.safetensors.index.json";
    let Ok(index_path) = fetch(id, index, hub, progress) else {
        fetch(id, "model.safetensors", hub, progress)?;
        return Ok(());
    };
    let text = std::fs::read_to_string(&index_path).map_err(|e| SourceError::Download {
        id: id.to_owned(),
        file: index.to_owned(),
        message: e.to_string(),
    })?;
    let parsed: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| SourceError::Download {
            id: id.to_owned(),
            file: index.to_owned(),
            message: format!("not valid JSON: {e}"),
        })?;
    let mut shards: Vec<&str> = parsed["weight_map"]
        .as_object()
        .map(|map| map.values().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    shards.sort_unstable();
    shards.dedup();
    for shard in shards {
        fetch(id, shard, hub, progress)?;
    }
    Ok(())
}

/// One file of a Hub repo: from the cache when present, downloaded otherwise.
fn fetch(
    id: &str,
    file: &str,
    hub: &HubSettings,
    progress: &mut dyn FnMut(f32, &str),
) -> Result<PathBuf, SourceError> {
    let cache = Cache::new(hub.cache_dir.clone());
    if let Some(path) = cache.repo(Repo::model(id.to_owned())).get(file) {
        return Ok(path);
    }
    if hub.offline {
        return Err(SourceError::NotCached {
            id: id.to_owned(),
            cache: hub.cache_dir.clone(),
            missing: file.to_owned(),
        });
    }
    let download_error = |message: String| SourceError::Download {
        id: id.to_owned(),
        file: file.to_owned(),
        message,
    };
    let api = ApiBuilder::from_cache(cache)
        .with_token(hub.token.clone())
        .with_progress(false)
        .build()
        .map_err(|e| download_error(e.to_string()))?;
    api.model(id.to_owned())
        .download_with_progress(file, DownloadProgress::new(progress))
        .map_err(|e| download_error(e.to_string()))
}

/// Adapts hf-hub's byte counts to samplab's (fraction, message) progress.
struct DownloadProgress<'a> {
    report: &'a mut dyn FnMut(f32, &str),
    file: String,
    total: usize,
    done: usize,
}

impl<'a> DownloadProgress<'a> {
    fn new(report: &'a mut dyn FnMut(f32, &str)) -> Self {
        Self {
            report,
            file: String::new(),
            total: 0,
            done: 0,
        }
    }
}

impl Progress for DownloadProgress<'_> {
    fn init(&mut self, size: usize, filename: &str) {
        self.file = filename.to_owned();
        self.total = size;
        self.done = 0;
        (self.report)(0.0, &format!("downloading {filename}"));
    }

    fn update(&mut self, size: usize) {
        self.done += size;
        let fraction = if self.total == 0 {
            0.0
        } else {
            self.done as f32 / self.total as f32
        };
        let message = format!(
            "downloading {} ({:.1} / {:.1} MB)",
            self.file,
            self.done as f64 / 1e6,
            self.total as f64 / 1e6
        );
        (self.report)(fraction, &message);
    }

    fn finish(&mut self) {
        (self.report)(1.0, &format!("downloaded {}", self.file));
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
            cache_dir: home.path().join("hub"),
            offline: true,
            token: None,
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
        let mut progress = |_: f32, _: &str| calls += 1;
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
        let err = resolve("org/tiny", &hub, &mut |_, _| {}).unwrap_err();
        let message = err.to_string();
        assert!(matches!(err, SourceError::NotCached { .. }), "{message}");
        assert!(message.contains("tokenizer.json"), "{message}");
        assert!(message.contains("HF_HUB_OFFLINE"), "{message}");
    }

    #[test]
    fn local_paths_are_classified() {
        let dir = tempfile::tempdir().unwrap();
        let hub = HubSettings {
            cache_dir: dir.path().join("hub"),
            offline: true,
            token: None,
        };
        let gguf = dir.path().join("m.gguf");
        std::fs::write(&gguf, "x").unwrap();
        let spec = gguf.to_str().unwrap();
        assert_eq!(
            resolve(spec, &hub, &mut |_, _| {}).unwrap(),
            ModelSource::Gguf(gguf.clone())
        );
        let err = resolve(dir.path().to_str().unwrap(), &hub, &mut |_, _| {}).unwrap_err();
        assert!(matches!(err, SourceError::NotAModelDir(_)), "{err}");
        std::fs::write(dir.path().join("config.json"), "{}").unwrap();
        assert_eq!(
            resolve(dir.path().to_str().unwrap(), &hub, &mut |_, _| {}).unwrap(),
            ModelSource::HfDir(dir.path().to_owned())
        );
        let missing = dir.path().join("nope.gguf");
        let err = resolve(missing.to_str().unwrap(), &hub, &mut |_, _| {}).unwrap_err();
        assert!(matches!(err, SourceError::NotFound(_)), "{err}");
        let err = resolve("just-a-word", &hub, &mut |_, _| {}).unwrap_err();
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
}
