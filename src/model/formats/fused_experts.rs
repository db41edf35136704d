//! Checkpoints may keep a layer's experts in two fused tensors, `mlp.experts.gate_up_proj` and
//! `mlp.experts.down_proj`, laid out as the family's [`FusedExperts`] says. They are cut here
//! into the one-tensor-per-expert names the loader reads, as llama.cpp's converter cuts them
//! for GGUF:
//! - stacked (transformers 5's, Qwen3.5 MoE): expert `e`'s `[2 * size, hidden]` slice becomes
//!   `experts.{e}.gate_up_proj.weight`, which the loader splits into gate and up as it splits a
//!   GGUF's `ffn_gate_up_exps`; its `[hidden, size]` down slice `experts.{e}.down_proj.weight`.
//! - interleaved (gpt-oss): `gate_up_proj` `[experts, hidden, 2 * size]` (multiplied from the
//!   left, gate and up columns interleaved), `down_proj` `[experts, size, hidden]`, and a bias
//!   beside each, become `experts.{e}.gate_proj.weight` and so on; the attention sinks get their
//!   `.weight` suffix.

use crate::model::arch::registry::FusedExperts;
use candle_core::{Result, Tensor};
use std::collections::HashMap;

const GATE_UP: &str = ".mlp.experts.gate_up_proj";
const DOWN: &str = ".mlp.experts.down_proj";
const SINKS: &str = ".self_attn.sinks";

/// Rewrites `tensors` in place; `Err` names the fused tensor whose shape cannot be cut.
pub(crate) fn split(
    tensors: &mut HashMap<String, Tensor>,
    layout: FusedExperts,
) -> std::result::Result<(), String> {
    // OpenAI's own checkpoints keep the experts in MXFP4 blocks and scales.
    if let Some(name) = tensors
        .keys()
        .find(|n| layout == FusedExperts::Interleaved && n.ends_with("_blocks"))
    {
        return Err(format!(
            "tensor `{name}` holds MXFP4 experts, which samplab reads from GGUF files only; \
             load the model's GGUF, or a checkpoint with its experts dequantized (bf16)"
        ));
    }
    let fused: Vec<String> = tensors
        .keys()
        .filter(|n| match layout {
            FusedExperts::Stacked => n.ends_with(GATE_UP) || n.ends_with(DOWN),
            FusedExperts::Interleaved => {
                n.ends_with(SINKS)
                    || [GATE_UP, DOWN]
                        .iter()
                        .any(|s| n.ends_with(s) || n.ends_with(&format!("{s}_bias")))
            }
        })
        .cloned()
        .collect();
    for name in fused {
        let Some(tensor) = tensors.remove(&name) else {
            continue;
        };
        let cut = match layout {
            FusedExperts::Stacked => cut_stacked(&name, &tensor),
            FusedExperts::Interleaved => cut_interleaved(&name, &tensor),
        };
        let cut = cut.map_err(|e| {
            format!(
                "tensor `{name}` of shape {:?} cannot be cut into experts: {e}",
                tensor.dims()
            )
        })?;
        tensors.extend(cut);
    }
    Ok(())
}

/// `t`'s slices along its first axis, one per expert, under the loader's names. Each is a
/// copy: candle's `QTensor::quantize` reads a view's whole storage, not the view.
fn per_expert(layer: &str, proj: &str, suffix: &str, t: Tensor) -> Result<Vec<(String, Tensor)>> {
    (0..t.dim(0)?)
        .map(|e| {
            let name = format!("{layer}.mlp.experts.{e}.{proj}.{suffix}");
            Ok((name, t.get(e)?.force_contiguous()?))
        })
        .collect()
}

/// A stacked fused tensor's per-expert matrices, as they are.
fn cut_stacked(name: &str, tensor: &Tensor) -> Result<Vec<(String, Tensor)>> {
    tensor.dims3()?;
    let (layer, proj) = match name.strip_suffix(GATE_UP) {
        Some(layer) => (layer, "gate_up_proj"),
        None => (name.strip_suffix(DOWN).unwrap_or(name), "down_proj"),
    };
    per_expert(layer, proj, "weight", tensor.clone())
}

/// One interleaved fused tensor's per-expert pieces under their loader names.
fn cut_interleaved(name: &str, tensor: &Tensor) -> Result<Vec<(String, Tensor)>> {
    if let Some(layer) = name.strip_suffix(SINKS) {
        return Ok(vec![(format!("{layer}{SINKS}.weight"), tensor.clone())]);
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn counting(dims: &[usize]) -> Tensor {
        let n = dims.iter().product::<usize>();
        Tensor::arange(0f32, n as f32, &candle_core::Device::Cpu)
            .unwrap()
            .reshape(dims)
            .unwrap()
    }

    #[test]
    fn stacked_experts_are_cut_into_each_experts_matrices_unchanged() {
        let (gate_up, down) = (counting(&[3, 4, 2]), counting(&[3, 2, 2]));
        let mut tensors = HashMap::from([
            (format!("model.layers.1{GATE_UP}"), gate_up.clone()),
            (format!("model.layers.1{DOWN}"), down.clone()),
            ("model.layers.1.mlp.gate.weight".to_owned(), down.clone()),
        ]);
        split(&mut tensors, FusedExperts::Stacked).unwrap();
        assert_eq!(tensors.len(), 7);
        for e in 0..3 {
            for (proj, fused) in [("gate_up_proj", &gate_up), ("down_proj", &down)] {
                let name = format!("model.layers.1.mlp.experts.{e}.{proj}.weight");
                let got = tensors[&name].flatten_all().unwrap().to_vec1::<f32>();
                let want = fused
                    .get(e)
                    .unwrap()
                    .flatten_all()
                    .unwrap()
                    .to_vec1::<f32>();
                assert_eq!(got.unwrap(), want.unwrap(), "{name}");
            }
        }
        assert!(tensors.contains_key("model.layers.1.mlp.gate.weight"));
    }

    #[test]
    fn a_stacked_tensor_without_an_expert_axis_is_refused_by_name() {
        let mut tensors = HashMap::from([(format!("model.layers.0{GATE_UP}"), counting(&[4, 2]))]);
        let err = split(&mut tensors, FusedExperts::Stacked).unwrap_err();
        assert!(
            err.contains("model.layers.0.mlp.experts.gate_up_proj"),
            "{err}"
        );
        assert!(err.contains("[4, 2]"), "{err}");
    }
}
