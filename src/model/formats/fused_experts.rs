//! gpt-oss checkpoints keep a layer's experts in a few fused tensors: `experts.gate_up_proj`
//! `[experts, hidden, 2 * size]` (multiplied from the left, gate and up columns interleaved),
//! `experts.down_proj` `[experts, size, hidden]`, and a bias beside each. They are cut here
//! into the one-tensor-per-expert names the loader reads, `experts.{e}.gate_proj.weight`, as
//! llama.cpp's converter cuts them for GGUF; the attention sinks get their `.weight` suffix.

use candle_core::{Result, Tensor};
use std::collections::HashMap;

const GATE_UP: &str = ".mlp.experts.gate_up_proj";
const DOWN: &str = ".mlp.experts.down_proj";
const SINKS: &str = ".self_attn.sinks";

/// Rewrites `tensors` in place; `Err` names the fused tensor whose shape cannot be cut.
pub(crate) fn split(tensors: &mut HashMap<String, Tensor>) -> std::result::Result<(), String> {
    // OpenAI's own checkpoints keep the experts in MXFP4 blocks and scales.
    if let Some(name) = tensors.keys().find(|n| n.ends_with("_blocks")) {
        return Err(format!(
            "tensor `{name}` holds MXFP4 experts, which samplab reads from GGUF files only; \
             load the model's GGUF, or a checkpoint with its experts dequantized (bf16)"
        ));
    }
    let fused: Vec<String> = tensors
        .keys()
        .filter(|n| {
            n.ends_with(SINKS)
                || [GATE_UP, DOWN]
                    .iter()
                    .any(|s| n.ends_with(s) || n.ends_with(&format!("{s}_bias")))
        })
        .cloned()
        .collect();
    for name in fused {
        let Some(tensor) = tensors.remove(&name) else {
            continue;
        };
        let cut = cut(&name, &tensor).map_err(|e| {
            format!(
                "tensor `{name}` of shape {:?} cannot be cut into experts: {e}",
                tensor.dims()
            )
        })?;
        tensors.extend(cut);
    }
    Ok(())
}

/// One fused tensor's per-expert pieces under their loader names.
fn cut(name: &str, tensor: &Tensor) -> Result<Vec<(String, Tensor)>> {
    if let Some(layer) = name.strip_suffix(SINKS) {
        return Ok(vec![(format!("{layer}{SINKS}.weight"), tensor.clone())]);
    }
    let per_expert = |layer: &str, proj: &str, suffix: &str, t: Tensor| -> Result<Vec<_>> {
        (0..t.dim(0)?)
            .map(|e| {
                let name = format!("{layer}.mlp.experts.{e}.{proj}.{suffix}");
                Ok((name, t.get(e)?.contiguous()?))
            })
            .collect()
    };
    // Gate at even positions of the fused axis, up at odd ones.
    let deinterleave = |t: &Tensor| -> Result<(Tensor, Tensor)> {
        let mut dims = t.dims().to_vec();
        let last = dims.pop().unwrap_or(0);
        if !last.is_multiple_of(2) {
            candle_core::bail!("its last axis ({last}) is not gate and up interleaved");
        }
        dims.extend([last / 2, 2]);
        let pairs = t.contiguous()?.reshape(dims)?;
        let at = pairs.rank() - 1;
        Ok((
            pairs.narrow(at, 0, 1)?.squeeze(at)?,
            pairs.narrow(at, 1, 1)?.squeeze(at)?,
        ))
    };
    let mut out = Vec::new();
    if let Some(layer) = name.strip_suffix(GATE_UP) {
        tensor.dims3()?;
        let (gate, up) = deinterleave(tensor)?;
        out.extend(per_expert(
            layer,
            "gate_proj",
            "weight",
            gate.transpose(1, 2)?,
        )?);
        out.extend(per_expert(layer, "up_proj", "weight", up.transpose(1, 2)?)?);
    } else if let Some(layer) = name.strip_suffix(&format!("{GATE_UP}_bias")) {
        tensor.dims2()?;
        let (gate, up) = deinterleave(tensor)?;
        out.extend(per_expert(layer, "gate_proj", "bias", gate)?);
        out.extend(per_expert(layer, "up_proj", "bias", up)?);
    } else if let Some(layer) = name.strip_suffix(DOWN) {
        tensor.dims3()?;
        out.extend(per_expert(
            layer,
            "down_proj",
            "weight",
            tensor.transpose(1, 2)?,
        )?);
    } else if let Some(layer) = name.strip_suffix(&format!("{DOWN}_bias")) {
        tensor.dims2()?;
        out.extend(per_expert(layer, "down_proj", "bias", tensor.clone())?);
    }
    Ok(out)
}
