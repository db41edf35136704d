//! Which local backend runs a model: `--backend samplab|llama.cpp|auto`, one for every model or
//! a comma-separated list with one per `--model`.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The backend that computed a run's logits: named in provenance, `loaded` events, column
/// titles, `bench` and exports, so that no number is taken for another backend's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BackendKind {
    /// samplab's own engine: exact, batch-invariant.
    #[serde(rename = "samplab")]
    Samplab,
    /// llama.cpp linked in (feature `llama-cpp`): every architecture it runs, its GPU backends.
    #[serde(rename = "llama.cpp")]
    LlamaCpp,
}

impl BackendKind {
    pub fn name(self) -> &'static str {
        match self {
            Self::Samplab => "samplab",
            Self::LlamaCpp => "llama.cpp",
        }
    }
}

impl FromStr for BackendKind {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text.parse()? {
            BackendChoice::Only(kind) => Ok(kind),
            BackendChoice::Auto => Err("name one backend here: samplab or llama.cpp".to_owned()),
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What `--backend` asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendChoice {
    /// samplab's engine where it runs the architecture, else llama.cpp, with a notice.
    #[default]
    Auto,
    Only(BackendKind),
}

impl FromStr for BackendChoice {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Self::Auto),
            "samplab" => Ok(Self::Only(BackendKind::Samplab)),
            "llama.cpp" | "llamacpp" | "llama-cpp" => Ok(Self::Only(BackendKind::LlamaCpp)),
            other => Err(format!(
                "`{other}` is not a backend: write samplab, llama.cpp or auto"
            )),
        }
    }
}

impl fmt::Display for BackendChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Auto => f.write_str("auto"),
            Self::Only(kind) => kind.fmt(f),
        }
    }
}

impl From<BackendKind> for BackendChoice {
    fn from(kind: BackendKind) -> Self {
        Self::Only(kind)
    }
}

/// `--backend` as given: one choice for every model, or one per `--model` in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backends(Vec<BackendChoice>);

impl Default for Backends {
    fn default() -> Self {
        Self(vec![BackendChoice::Auto])
    }
}

impl Backends {
    /// The choice for the `index`-th model: its own, or the last one given (a single value
    /// applies to every model, those the playground picks later included).
    pub fn for_model(&self, index: usize) -> BackendChoice {
        let last = self.0.last().copied().unwrap_or_default();
        self.0.get(index).copied().unwrap_or(last)
    }

    /// A list longer than the models it is for is a mistake worth saying.
    pub fn check_count(&self, models: usize) -> Result<(), String> {
        match self.0.len() > models.max(1) {
            true => Err(format!(
                "--backend names {} backends for {} model(s): give one for every model, or one \
                 per --model",
                self.0.len(),
                models.max(1)
            )),
            false => Ok(()),
        }
    }
}

impl From<Vec<BackendChoice>> for Backends {
    fn from(choices: Vec<BackendChoice>) -> Self {
        match choices.is_empty() {
            true => Self::default(),
            false => Self(choices),
        }
    }
}

impl FromStr for Backends {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        text.split(',')
            .map(str::parse)
            .collect::<Result<Vec<_>, _>>()
            .map(Self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_gives_each_model_its_own_and_the_last_to_the_rest() {
        let backends: Backends = "samplab,llama.cpp".parse().unwrap();
        assert_eq!(backends.for_model(0), BackendKind::Samplab.into());
        assert_eq!(backends.for_model(1), BackendKind::LlamaCpp.into());
        assert_eq!(backends.for_model(2), BackendKind::LlamaCpp.into());
        assert_eq!(Backends::default().for_model(3), BackendChoice::Auto);
        assert!(backends.check_count(1).is_err());
        assert!(backends.check_count(2).is_ok());
    }

    #[test]
    fn names_are_read_in_any_spelling_llama_cpp_users_write_and_others_refused() {
        for name in ["llama.cpp", "llamacpp", "LLAMA-CPP"] {
            assert_eq!(
                name.parse::<BackendChoice>(),
                Ok(BackendKind::LlamaCpp.into())
            );
        }
        let err = "vllm".parse::<BackendChoice>().unwrap_err();
        assert!(err.contains("samplab, llama.cpp or auto"), "{err}");
        assert_eq!(
            serde_json::to_string(&BackendKind::LlamaCpp).unwrap(),
            "\"llama.cpp\""
        );
    }
}
