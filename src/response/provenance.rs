//! Where a run came from: what `samplab replay` needs beside the params and the prompt to run
//! it again (the model, checked by sha256, the device and the activations), and what tells
//! why a re-run differs (samplab's version, the chain's order, the kernels).

use super::Trajectory;
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
