//! Presets: named `SamplingParams` stored as YAML with only the non-default keys.
//!
//! The built-ins in `presets/*.yaml` are compiled into the binary so that they exist on any
//! machine; a preset can also be any YAML file a user points at, or one the user saved into
//! their presets directory.

use crate::params::{ParamError, SamplingParams};
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
    /// `hint` suggests the nearest name, or is empty when none is near.
    #[error("no preset named `{name}`{hint}: built-ins are {}{user}; or give a path to a .yaml file", builtin_names().join(", "))]
    NotFound {
        name: String,
        hint: String,
        user: String,
    },
}

const BUILTIN_FILES: [(&str, &str); 11] = [
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
    ("adaptive-p", include_str!("../presets/adaptive-p.yaml")),
    ("top-h", include_str!("../presets/top-h.yaml")),
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
}
