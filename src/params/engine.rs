//! Engine profiles: whose processors, order and formulas a run follows, and llama.cpp's stage
//! names for `samplers`.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The engine whose sampling a run reproduces (`engine:` in YAML).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum Engine {
    /// vLLM's v1 sampler: logit processors, penalties, temperature, min_p, top_k, top_p.
    #[default]
    #[serde(rename = "vllm")]
    Vllm,
    /// transformers' `generate()`: processors, then temperature, top_k, top_p, min_p, typical_p.
    #[serde(rename = "transformers")]
    Transformers,
    /// llama.cpp's sampler chain, temperature last unless `samplers` says otherwise.
    #[serde(rename = "llama.cpp", alias = "llamacpp", alias = "llama-cpp")]
    LlamaCpp,
}

impl Engine {
    pub const ALL: [Engine; 3] = [Engine::Vllm, Engine::Transformers, Engine::LlamaCpp];

    /// The name YAML and `--set` take.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Vllm => "vllm",
            Engine::Transformers => "transformers",
            Engine::LlamaCpp => "llama.cpp",
        }
    }

    /// The name people write it with.
    pub fn title(self) -> &'static str {
        match self {
            Engine::Vllm => "vLLM",
            Engine::Transformers => "transformers",
            Engine::LlamaCpp => "llama.cpp",
        }
    }

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The engines that have a parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Engines(u8);

impl Engines {
    pub const ALL: Engines = Engines(0b111);
    pub const VLLM: Engines = Engines(1 << Engine::Vllm as u8);
    pub const TRANSFORMERS: Engines = Engines(1 << Engine::Transformers as u8);
    pub const LLAMA_CPP: Engines = Engines(1 << Engine::LlamaCpp as u8);

    pub const fn with(self, other: Engines) -> Engines {
        Engines(self.0 | other.0)
    }

    pub fn has(self, engine: Engine) -> bool {
        self.0 & engine.bit() != 0
    }

    /// "llama.cpp has it", "vLLM and llama.cpp have it": for messages.
    pub fn having_it(self) -> String {
        let verb = if self.0.count_ones() == 1 {
            "has"
        } else {
            "have"
        };
        format!("{} {verb} it", self.titles())
    }

    /// The engines' titles, for messages: "vLLM and llama.cpp".
    pub fn titles(self) -> String {
        let names: Vec<&str> = Engine::ALL
            .into_iter()
            .filter(|&e| self.has(e))
            .map(Engine::title)
            .collect();
        match names.split_last() {
            Some((last, [])) => (*last).to_owned(),
            Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
            None => String::new(),
        }
    }
}

/// One stage of llama.cpp's chain, as its `--samplers` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    Penalties,
    Dry,
    TopNSigma,
    TopK,
    #[serde(rename = "typ_p", alias = "typical_p", alias = "typical")]
    TypicalP,
    TopP,
    MinP,
    Xtc,
    #[serde(alias = "temp")]
    Temperature,
    /// adaptive-p draws the token, so llama.cpp runs it last wherever the list names it.
    #[serde(rename = "adaptive_p", alias = "adaptive-p")]
    AdaptiveP,
}

/// A `samplers` order: a list of stage names, or llama.cpp's own `--samplers` text with the
/// names joined by `;` (`top_k;temperature`), which samplab's llama.cpp export writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Stages(pub Vec<Stage>);

impl std::ops::Deref for Stages {
    type Target = [Stage];
    fn deref(&self) -> &[Stage] {
        &self.0
    }
}

impl<'de> Deserialize<'de> for Stages {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        use serde_yaml_ng::{Value, from_value};
        let names = match Value::deserialize(deserializer)? {
            Value::String(text) => text
                .split(';')
                .map(|name| Value::String(name.trim().to_owned()))
                .collect(),
            other => other,
        };
        from_value(names).map(Stages).map_err(D::Error::custom)
    }
}

impl Stage {
    /// llama.cpp's default order (`common_params_sampling::samplers`).
    pub const LLAMA_CPP_DEFAULT: [Stage; 9] = [
        Stage::Penalties,
        Stage::Dry,
        Stage::TopNSigma,
        Stage::TopK,
        Stage::TypicalP,
        Stage::TopP,
        Stage::MinP,
        Stage::Xtc,
        Stage::Temperature,
    ];

    /// The name `--samplers` takes.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Penalties => "penalties",
            Stage::Dry => "dry",
            Stage::TopNSigma => "top_n_sigma",
            Stage::TopK => "top_k",
            Stage::TypicalP => "typ_p",
            Stage::TopP => "top_p",
            Stage::MinP => "min_p",
            Stage::Xtc => "xtc",
            Stage::Temperature => "temperature",
            Stage::AdaptiveP => "adaptive_p",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_yaml() {
        for engine in Engine::ALL {
            let yaml = serde_yaml_ng::to_string(&engine).unwrap();
            assert_eq!(yaml.trim(), engine.name());
            assert_eq!(serde_yaml_ng::from_str::<Engine>(&yaml).unwrap(), engine);
        }
        for stage in Stage::LLAMA_CPP_DEFAULT {
            let yaml = serde_yaml_ng::to_string(&stage).unwrap();
            assert_eq!(yaml.trim(), stage.name());
        }
        assert_eq!(
            serde_yaml_ng::from_str::<Stage>("temp").unwrap(),
            Stage::Temperature
        );
        let adaptive = serde_yaml_ng::to_string(&Stage::AdaptiveP).unwrap();
        assert_eq!(adaptive.trim(), Stage::AdaptiveP.name());
        assert_eq!(
            serde_yaml_ng::from_str::<Stage>("adaptive-p").unwrap(),
            Stage::AdaptiveP
        );
    }

    #[test]
    fn a_samplers_order_is_a_list_or_llama_cpps_own_text() {
        let text: Stages = serde_yaml_ng::from_str("\"top_k; typ_p;temp\"").unwrap();
        let list: Stages = serde_yaml_ng::from_str("[top_k, typical_p, temperature]").unwrap();
        assert_eq!(text, list);
        assert_eq!(&*text, [Stage::TopK, Stage::TypicalP, Stage::Temperature]);
        let err = serde_yaml_ng::from_str::<Stages>("\"top_k;nucleus\"").unwrap_err();
        assert!(err.to_string().contains("nucleus"), "{err}");
    }

    #[test]
    fn engine_sets_list_their_titles() {
        assert_eq!(
            Engines::VLLM.with(Engines::LLAMA_CPP).titles(),
            "vLLM and llama.cpp"
        );
        assert!(Engines::ALL.has(Engine::Transformers));
        assert_eq!(Engines::LLAMA_CPP.having_it(), "llama.cpp has it");
        assert_eq!(
            Engines::VLLM.with(Engines::TRANSFORMERS).having_it(),
            "vLLM and transformers have it"
        );
        assert!(!Engines::VLLM.has(Engine::LlamaCpp));
    }
}
