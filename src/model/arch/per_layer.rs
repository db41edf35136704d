//! Per-layer embeddings (Gemma 4's E2B and E4B): besides its embedding, each token gets a
//! small one per layer, which every layer gates in after its feed-forward.

use super::weights::{PerLayerGate, PerLayerInputs};
use crate::model::formats::config::ModelConfig;
use candle_core::{Result, Tensor};

/// Every layer's input for tokens `ids` (`[rows, len]`) whose scaled embeddings are `x`:
/// `[rows, len, layers, size]`, the table's row (scaled by `sqrt(size)`) plus the normed
/// projection of `x` (scaled by `1 / sqrt(hidden)`), the sum scaled by `1 / sqrt(2)`.
pub(super) fn inputs(
    weights: &PerLayerInputs,
    ids: &Tensor,
    x: &Tensor,
    config: &ModelConfig,
) -> Result<Tensor> {
    let (rows, len) = ids.dims2()?;
    let size = weights.norm.dim(0)?;
    let shape = (rows, len, config.num_layers, size);
    let looked_up = (weights.table.embedding(ids)?.reshape(shape)? * (size as f64).sqrt())?;
    let projected = (weights.model_proj.forward(x)? / (config.hidden_size as f64).sqrt())?;
    let projected = candle_nn::ops::rms_norm(
        &projected.reshape(shape)?,
        &weights.norm,
        config.rms_norm_eps as f32,
    )?;
    (projected + looked_up)? * std::f64::consts::FRAC_1_SQRT_2
}

/// `x` after layer `layer` mixed in its input from [`inputs`].
pub(super) fn mix(
    gate: &PerLayerGate,
    x: &Tensor,
    inputs: &Tensor,
    layer: usize,
    eps: f32,
) -> Result<Tensor> {
    let input = inputs.narrow(2, layer, 1)?.squeeze(2)?;
    let gated = (gate.gate.forward(x)?.gelu()? * input)?;
    let out = candle_nn::ops::rms_norm(&gate.proj.forward(&gated)?, &gate.norm, eps)?;
    x + out
}
