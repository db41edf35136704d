//! Where a run came from: what `samplab replay` needs beside the params and the prompt to run
//! it again (the model, checked by sha256, the device and the activations), and what tells
//! why a re-run differs (samplab's version, the chain's order, the kernels).

use super::Trajectory;
use crate::engine::backend_choice::BackendKind;
use crate::model::Activations;
pub use crate::model::source::origin::FileDigest;
use crate::params::{Engine, SamplingParams};
use serde::{Deserialize, Serialize};

/// The provenance of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provenance {
    /// The version of the samplab that ran it.
    pub samplab: String,
    pub model: ModelProvenance,
    /// Whose sampling ran (the params' `engine`).
    pub engine: Engine,
    /// The engine's stages by name, in the order they ran; absent for a served model, whose
    /// server runs its own.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub chain: Vec<String>,
    /// `cpu`, `cuda:0`, `metal:0`; for a served model, the server and where it is.
    pub device: String,
    /// Each weight type and the product that ran it; absent for a served model.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub kernels: Vec<Kernel>,
    /// What quantized products on the CPU did with activations (`16bit` or `exact`); absent on
    /// a GPU and for a served model.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub activations: Option<Activations>,
    /// Each trajectory's seed, in order: `seed + i` for sample `i`, a branch its sample's.
    pub seeds: Vec<u64>,
}

/// The model a run sampled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelProvenance {
    /// What `--model` says to load it again: an absolute path, a Hub id, samplab-tiny, or a
    /// served model's URL.
    pub source: String,
    /// The files it was read from, each with its size and sha256; absent for a served model.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub files: Vec<FileDigest>,
    /// A served model's server (`vLLM 0.11.0 at 127.0.0.1:8000`) and the model it named.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub server: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub served_model: Option<String>,
    /// The local backend whose forward pass made the logits (absent for a served model, and
    /// in files written before there were two: samplab's engine).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub backend: Option<BackendKind>,
}

/// A weight type and the product that runs it, as `samplab bench` lists them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Kernel {
    pub weight_type: String,
    /// `samplab avx512-vnni, 16-bit activations`, `candle, 8-bit activations`, …
    pub kernel: String,
}

impl From<(String, String)> for Kernel {
    fn from((weight_type, kernel): (String, String)) -> Self {
        Self {
            weight_type,
            kernel,
        }
    }
}

impl Provenance {
    /// The provenance of a run of `params` on `model`, on `device` through `kernels`, that
    /// made `trajectories`.
    pub fn of_run(
        model: ModelProvenance,
        device: String,
        kernels: Vec<Kernel>,
        activations: Option<Activations>,
        params: &SamplingParams,
        trajectories: &[Trajectory],
    ) -> Self {
        Self {
            samplab: env!("CARGO_PKG_VERSION").to_owned(),
            model,
            engine: params.engine,
            chain: crate::sampling::stage_names(params)
                .into_iter()
                .map(str::to_owned)
                .collect(),
            device,
            kernels,
            activations,
            seeds: trajectories.iter().map(|t| t.seed).collect(),
        }
    }
}

impl ModelProvenance {
    /// Why `here` (the files a model loaded now was read from) is not the model the run
    /// sampled, naming the first file that differs; `None` when every file has the run's
    /// sha256 (a renamed file is still the same model).
    pub fn mismatch(&self, here: &[FileDigest]) -> Option<String> {
        let same = |a: &FileDigest, b: &FileDigest| a.sha256.is_some() && a.sha256 == b.sha256;
        let named = |f: &FileDigest| {
            let sha = f
                .sha256
                .as_deref()
                .unwrap_or("unknown: the file could not be read");
            format!("{} (sha256 {sha}, {} bytes)", f.name, f.size)
        };
        if let Some(then) = self
            .files
            .iter()
            .find(|then| !here.iter().any(|now| same(then, now)))
        {
            return Some(match (&self.files[..], here) {
                _ if then.sha256.is_none() => format!(
                    "the results file has no sha256 of {}: it could not be read when the run \
                     was made, so the model cannot be checked",
                    then.name
                ),
                ([_], [now]) => format!(
                    "the run read {}, the model here is {}",
                    named(then),
                    named(now)
                ),
                _ => match here.iter().find(|now| now.name == then.name) {
                    Some(now) => format!(
                        "the run read {}, the model here has {}",
                        named(then),
                        named(now)
                    ),
                    None => format!("the run read {}, which the model here lacks", named(then)),
                },
            });
        }
        here.iter()
            .find(|now| !self.files.iter().any(|then| same(then, now)))
            .map(|extra| {
                format!(
                    "the model here has {}, which the run did not read",
                    named(extra)
                )
            })
    }
}

impl Provenance {
    /// What ran differently in `now` than in this run, one line each (`samplab 0.1.0 then,
    /// 0.2.0 now`): the likely reasons why a re-run parts from it.
    pub fn differences(&self, now: &Provenance) -> Vec<String> {
        let kernels = |p: &Provenance| {
            let rows: Vec<String> = p
                .kernels
                .iter()
                .map(|k| format!("{} {}", k.weight_type, k.kernel))
                .collect();
            rows.join("; ")
        };
        let activations = |p: &Provenance| p.activations.map_or("-".to_owned(), |a| a.to_string());
        let fields: [(&str, String, String); 5] = [
            ("samplab", self.samplab.clone(), now.samplab.clone()),
            ("device", self.device.clone(), now.device.clone()),
            ("activations", activations(self), activations(now)),
            ("kernels", kernels(self), kernels(now)),
            ("chain", self.chain.join(" → "), now.chain.join(" → ")),
        ];
        fields
            .into_iter()
            .filter(|(_, then, now)| then != now)
            .map(|(name, then, now)| format!("{name}: {then} then, {now} now"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, sha: &str) -> FileDigest {
        FileDigest {
            name: name.into(),
            size: 3,
            sha256: Some(sha.repeat(64)),
        }
    }

    fn model(files: Vec<FileDigest>) -> ModelProvenance {
        ModelProvenance {
            source: "/m".into(),
            files,
            server: None,
            served_model: None,
            backend: None,
        }
    }

    #[test]
    fn a_model_is_the_same_by_its_digests_not_its_names() {
        let run = model(vec![
            file("config.json", "a"),
            file("model.safetensors", "b"),
        ]);
        let renamed = [file("model.safetensors", "b"), file("settings.json", "a")];
        assert_eq!(run.mismatch(&renamed), None);
        let edited = [file("config.json", "c"), file("model.safetensors", "b")];
        let why = run.mismatch(&edited).unwrap();
        assert!(
            why.contains(&format!(
                "the run read config.json (sha256 {}",
                "a".repeat(64)
            )) && why.contains(&format!(
                "the model here has config.json (sha256 {}",
                "c".repeat(64)
            )),
            "{why}"
        );
        let more = [
            file("config.json", "a"),
            file("model.safetensors", "b"),
            file("chat_template.jinja", "d"),
        ];
        let why = run.mismatch(&more).unwrap();
        assert!(why.contains("has chat_template.jinja"), "{why}");
        let unread = model(vec![FileDigest {
            sha256: None,
            ..file("m.gguf", "a")
        }]);
        let why = unread.mismatch(&[file("m.gguf", "a")]).unwrap();
        assert!(why.contains("no sha256 of m.gguf"), "{why}");
    }

    #[test]
    fn differences_name_what_ran_otherwise() {
        let then = Provenance {
            samplab: "0.1.0".into(),
            model: model(vec![file("m.gguf", "a")]),
            engine: Engine::Vllm,
            chain: vec!["temperature".into(), "top_p".into()],
            device: "cpu".into(),
            kernels: vec![Kernel::from(("q4_k".to_owned(), "samplab avx2".to_owned()))],
            activations: Some(Activations::Exact),
            seeds: vec![1],
        };
        assert!(then.differences(&then).is_empty());
        let now = Provenance {
            samplab: "0.2.0".into(),
            kernels: vec![Kernel::from((
                "q4_k".to_owned(),
                "samplab avx512-vnni".to_owned(),
            ))],
            ..then.clone()
        };
        assert_eq!(
            then.differences(&now),
            [
                "samplab: 0.1.0 then, 0.2.0 now",
                "kernels: q4_k samplab avx2 then, q4_k samplab avx512-vnni now"
            ]
        );
    }
}
