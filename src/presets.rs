//! Presets: named `SamplingParams` stored as YAML with only the non-default keys.
//!
//! The built-ins in `presets/*.yaml` are compiled into the binary so that they exist on any
//! machine; a preset can also be any YAML file a user points at, or one the user saved into
//! their [`PresetStore`].

use crate::params::{ParamError, SamplingParams};
use crate::preset_store::PresetStore;
use std::path::{Path, PathBuf};

/// Where a preset came from, so the UI can say which file to fix.
#[derive(Debug, Clone, PartialEq)]
pub enum PresetSource {
    BuiltIn,
    File(PathBuf),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Preset {
    pub name: String,
    pub params: SamplingParams,
    pub source: PresetSource,
}

impl Preset {
    /// A preset that is not the user's file: a built-in, or the model's defaults.
    pub fn built_in(name: &str, params: SamplingParams) -> Self {
        Self {
            name: name.to_owned(),
            params,
            source: PresetSource::BuiltIn,
        }
    }
}

/// `--preset model`: the model's own sampling defaults, known only once it has loaded.
pub const MODEL_PRESET: &str = "model";

#[derive(Debug, thiserror::Error)]
pub enum PresetError {
    // The causes are named `error`, not `source`: thiserror would chain a `source` too, and
    // `{:#}` printed it twice.
    #[error("cannot read preset {path}: {error}")]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("preset {origin} is invalid: {error}")]
    Invalid { origin: String, error: ParamError },
    /// `user` lists the user's presets, or is empty when there is no preset directory.
    #[error("no preset named `{name}`: built-ins are {}{user}; or give a path to a .yaml file", builtin_names().join(", "))]
    NotFound { name: String, user: String },
}

const BUILTIN_FILES: [(&str, &str); 9] = [
    ("default", include_str!("../presets/default.yaml")),
    ("greedy", include_str!("../presets/greedy.yaml")),
    ("precise", include_str!("../presets/precise.yaml")),
    ("balanced", include_str!("../presets/balanced.yaml")),
    ("creative", include_str!("../presets/creative.yaml")),
    ("simple-1", include_str!("../presets/simple-1.yaml")),
    (
        "llama-precise",
        include_str!("../presets/llama-precise.yaml"),
    ),
    (
        "divine-intellect",
        include_str!("../presets/divine-intellect.yaml"),
    ),
    (
        "llamacpp-default",
        include_str!("../presets/llamacpp-default.yaml"),
    ),
];

pub fn builtin_names() -> Vec<&'static str> {
    BUILTIN_FILES.iter().map(|(name, _)| *name).collect()
}

/// Every built-in preset, in picker order.
pub fn builtins() -> Vec<Preset> {
    BUILTIN_FILES
        .iter()
        .map(|(name, text)| Preset {
            name: (*name).to_owned(),
            params: SamplingParams::from_yaml(text)
                .unwrap_or_else(|e| panic!("built-in preset {name} is invalid: {e}")),
            source: PresetSource::BuiltIn,
        })
        .collect()
}

/// A built-in by name, ignoring case and treating spaces and underscores as dashes
/// (so "LLaMA-Precise" and "Divine Intellect" find their files).
pub fn builtin(name: &str) -> Option<Preset> {
    let wanted = name.trim().to_lowercase().replace([' ', '_'], "-");
    builtins().into_iter().find(|p| p.name == wanted)
}

/// Reads and checks one preset file; its name is the file stem.
pub fn load_file(path: &Path) -> Result<Preset, PresetError> {
    let text = crate::regular_file::read_to_string(path).map_err(|error| PresetError::Read {
        path: path.to_owned(),
        error,
    })?;
    let params = SamplingParams::from_yaml(&text).map_err(|error| PresetError::Invalid {
        origin: path.display().to_string(),
        error,
    })?;
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    Ok(Preset {
        name,
        params,
        source: PresetSource::File(path.to_owned()),
    })
}

/// `--preset NAME|FILE`: an existing path wins, then a built-in, then a preset in `user`.
pub fn resolve(name_or_path: &str, user: Option<&PresetStore>) -> Result<Preset, PresetError> {
    let path = Path::new(name_or_path);
    if path.is_file() {
        return load_file(path);
    }
    if let Some(preset) = builtin(name_or_path) {
        return Ok(preset);
    }
    if let Some(found) = user.and_then(|store| store.find(name_or_path)) {
        return found;
    }
    // A path that names no file says so, rather than that no preset has that name.
    let looks_like_a_path = name_or_path.contains(std::path::MAIN_SEPARATOR)
        || name_or_path.contains('/')
        || path
            .extension()
            .is_some_and(|e| ["yaml", "yml", "json"].contains(&e.to_string_lossy().as_ref()));
    if looks_like_a_path {
        return load_file(path);
    }
    Err(PresetError::NotFound {
        name: name_or_path.to_owned(),
        user: user.map(user_presets_hint).unwrap_or_default(),
    })
}

/// `; user presets in DIR are a, b` for a not-found message.
fn user_presets_hint(store: &PresetStore) -> String {
    // Names only: a broken or huge file must not slow down or break a message about another.
    let names = match store.files() {
        Ok(files) if files.is_empty() => "none yet".to_owned(),
        Ok(files) => {
            let mut names: Vec<String> = files.into_iter().map(|(name, _)| name).collect();
            names.dedup();
            names.join(", ")
        }
        Err(e) => format!("unreadable ({e})"),
    };
    format!("; user presets in {} are {names}", store.dir.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_parse_and_have_the_published_values() {
        let all = builtins();
        assert_eq!(all.len(), BUILTIN_FILES.len());
        assert_eq!(
            builtin("default").unwrap().params,
            SamplingParams::default()
        );
        assert!(builtin("greedy").unwrap().params.is_greedy());
        let check = |name: &str, t: f32, p: f32, rp: f32, k: i32| {
            let params = builtin(name).unwrap().params;
            assert_eq!(
                (
                    params.temperature,
                    params.top_p,
                    params.repetition_penalty,
                    params.top_k
                ),
                (t, p, rp, k),
                "{name}"
            );
        };
        check("simple-1", 0.7, 0.9, 1.15, 20);
        check("LLaMA-Precise", 0.7, 0.1, 1.18, 40);
        check("Divine Intellect", 1.31, 0.14, 1.17, 49);
    }

    #[test]
    fn resolve_reports_unknown_names_and_bad_files() {
        let message = resolve("no-such-preset", None).unwrap_err().to_string();
        assert!(
            message.contains("no-such-preset") && message.contains("balanced"),
            "{message}"
        );

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mine.yaml");
        std::fs::write(&path, "top_p: 2\n").unwrap();
        let message = resolve(path.to_str().unwrap(), None)
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("mine.yaml") && message.contains("`top_p`"),
            "{message}"
        );

        std::fs::write(&path, "top_p: 0.5\n").unwrap();
        let preset = resolve(path.to_str().unwrap(), None).unwrap();
        assert_eq!(preset.name, "mine");
        assert_eq!(preset.params.top_p, 0.5);
    }

    #[test]
    fn resolve_finds_user_presets_by_name_after_built_ins() {
        let dir = tempfile::tempdir().unwrap();
        let store = PresetStore::new(dir.path());
        let message = resolve("mine", Some(&store)).unwrap_err().to_string();
        assert!(
            message.contains("user presets in") && message.contains("none yet"),
            "{message}"
        );

        std::fs::write(dir.path().join("mine.yaml"), "min_p: 0.1\n").unwrap();
        std::fs::write(dir.path().join("greedy.yaml"), "temperature: 2\n").unwrap();
        let mine = resolve("mine", Some(&store)).unwrap();
        assert_eq!(mine.params.min_p, 0.1);
        assert_eq!(
            mine.source,
            PresetSource::File(dir.path().join("mine.yaml"))
        );
        assert!(resolve("greedy", Some(&store)).unwrap().params.is_greedy());
        assert!(
            resolve("mine", None).is_err(),
            "without a store there are no user presets"
        );
        let message = resolve("nope", Some(&store)).unwrap_err().to_string();
        assert!(message.contains("are greedy, mine"), "{message}");
        // A path to no file says that, not that no preset has that name.
        for missing in ["/missing/p.yaml", "mine.yaml", "sub/mine"] {
            let message = resolve(missing, Some(&store)).unwrap_err().to_string();
            assert!(
                message.contains("cannot read preset") && message.contains(missing),
                "{message}"
            );
        }
    }

    #[test]
    fn a_deep_or_tagged_user_preset_is_refused_and_still_named_in_hints() {
        let dir = tempfile::tempdir().unwrap();
        let store = PresetStore::new(dir.path());
        let deep = format!("stop: {}{}", "[".repeat(100_000), "]".repeat(100_000));
        std::fs::write(dir.path().join("deep.yaml"), deep).unwrap();
        std::fs::write(dir.path().join("tagged.yaml"), "temperature: !custom 5").unwrap();
        let start = std::time::Instant::now();
        let message = resolve("typo", Some(&store)).unwrap_err().to_string();
        assert!(message.contains("are deep, tagged"), "{message}");
        let deep = resolve("deep", Some(&store)).unwrap_err().to_string();
        assert!(
            deep.contains("deep.yaml") && deep.contains("nested deeper"),
            "{deep}"
        );
        let tagged = resolve("tagged", Some(&store)).unwrap_err().to_string();
        assert!(tagged.contains("`!custom` tags a value"), "{tagged}");
        let guard = std::time::Duration::from_secs(10);
        assert!(start.elapsed() < guard, "{:?}", start.elapsed());
    }
}
