//! The training graph of samplab-tiny: the llama forward of `samplab::model`, written only
//! with ops that have a backward pass. candle's fused `rms_norm`, `rope` and
//! `softmax_last_dim` have none, so this graph composes them from primitives; the trained
//! weights are then checked to give the same logits through the inference path.

use candle_core::{D, Device, Result, Tensor, Var};
use candle_nn::ops::{rms_norm_slow, softmax};
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{Rng, SeedableRng};
use std::collections::HashMap;
use std::path::Path;

/// The hyper-parameters config.json records.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub vocab: usize,
    pub hidden: usize,
    pub layers: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub ffn: usize,
    pub context: usize,
    pub rope_theta: f32,
    pub eps: f64,
}

impl Shape {
    pub fn head_dim(&self) -> usize {
        self.hidden / self.heads
    }

    fn kv_dim(&self) -> usize {
        self.kv_heads * self.head_dim()
    }
}

struct Layer {
    attn_norm: Var,
    q: Var,
    k: Var,
    v: Var,
    o: Var,
    ffn_norm: Var,
    gate: Var,
    up: Var,
    down: Var,
}

/// A llama with tied embeddings whose parameters are candle `Var`s named as in transformers.
pub struct TinyLlama {
    shape: Shape,
    embed: Var,
    layers: Vec<Layer>,
    norm: Var,
    /// Every parameter under its Hugging Face name, for the optimizer and for saving.
    named: Vec<(String, Var)>,
}

impl TinyLlama {
    /// Normal(0, `std`) matrices, the residual projections scaled down by depth (GPT-2's
    /// scheme), unit norms; drawn from ChaCha8 so that a seed gives the same model anywhere.
    pub fn new(shape: Shape, seed: u64, std: f64, device: &Device) -> Result<Self> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut named = Vec::new();
        let mut param = |name: String, dims: &[usize], std: Option<f64>| -> Result<Var> {
            let count: usize = dims.iter().product();
            let values: Vec<f32> = match std {
                Some(std) => (0..count)
                    .map(|_| (normal(&mut rng) * std) as f32)
                    .collect(),
                None => vec![1.0; count],
            };
            let var = Var::from_tensor(&Tensor::from_vec(values, dims, device)?)?;
            named.push((name, var.clone()));
            Ok(var)
        };
        let (h, q_dim, kv, ffn) = (shape.hidden, shape.hidden, shape.kv_dim(), shape.ffn);
        let residual = Some(std / (2.0 * shape.layers as f64).sqrt());
        let std = Some(std);
        let embed = param("model.embed_tokens.weight".into(), &[shape.vocab, h], std)?;
        let mut layers = Vec::with_capacity(shape.layers);
        for i in 0..shape.layers {
            let name = |part: &str| format!("model.layers.{i}.{part}.weight");
            layers.push(Layer {
                attn_norm: param(name("input_layernorm"), &[h], None)?,
                q: param(name("self_attn.q_proj"), &[q_dim, h], std)?,
                k: param(name("self_attn.k_proj"), &[kv, h], std)?,
                v: param(name("self_attn.v_proj"), &[kv, h], std)?,
                o: param(name("self_attn.o_proj"), &[h, q_dim], residual)?,
                ffn_norm: param(name("post_attention_layernorm"), &[h], None)?,
                gate: param(name("mlp.gate_proj"), &[ffn, h], std)?,
                up: param(name("mlp.up_proj"), &[ffn, h], std)?,
                down: param(name("mlp.down_proj"), &[h, ffn], residual)?,
            });
        }
        let norm = param("model.norm.weight".into(), &[h], None)?;
        Ok(Self {
            shape,
            embed,
            layers,
            norm,
            named,
        })
    }

    pub fn vars(&self) -> Vec<Var> {
        self.named.iter().map(|(_, v)| v.clone()).collect()
    }

    pub fn parameter_count(&self) -> usize {
        self.named.iter().map(|(_, v)| v.elem_count()).sum()
    }

    /// Writes the parameters as model.safetensors would hold them (f32, HF names, no lm_head).
    pub fn save(&self, path: &Path) -> Result<()> {
        let tensors: HashMap<String, Tensor> = self
            .named
            .iter()
            .map(|(name, var)| (name.clone(), var.as_tensor().clone()))
            .collect();
        candle_core::safetensors::save(&tensors, path)
    }

    /// Logits `[batch * len, vocab]` for token ids `[batch, len]`.
    pub fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        let (batch, len) = ids.dims2()?;
        let device = ids.device();
        let (cos, sin) = rotary_tables(&self.shape, len, device)?;
        let mask = causal_mask(len, device)?;
        let eps = self.shape.eps as f32;
        let mut x = self.embed.index_select(&ids.flatten_all()?, 0)?;
        for layer in &self.layers {
            let normed = rms_norm_slow(&x, &layer.attn_norm, eps)?;
            let attn = self.attention(layer, &normed, batch, len, &cos, &sin, &mask)?;
            x = (x + attn)?;
            let normed = rms_norm_slow(&x, &layer.ffn_norm, eps)?;
            let gate = linear(&normed, &layer.gate)?.silu()?;
            x = (&x + linear(&(gate * linear(&normed, &layer.up)?)?, &layer.down)?)?;
        }
        linear(&rms_norm_slow(&x, &self.norm, eps)?, &self.embed)
    }

    /// Mean next-token cross-entropy of `[batch, len + 1]` windows.
    pub fn loss(&self, windows: &Tensor) -> Result<Tensor> {
        let len = windows.dim(1)? - 1;
        let inputs = windows.narrow(1, 0, len)?;
        let targets = windows.narrow(1, 1, len)?.flatten_all()?;
        candle_nn::loss::cross_entropy(&self.forward(&inputs)?, &targets)
    }

    #[allow(clippy::too_many_arguments)]
    fn attention(
        &self,
        layer: &Layer,
        x: &Tensor,
        batch: usize,
        len: usize,
        cos: &Tensor,
        sin: &Tensor,
        mask: &Tensor,
    ) -> Result<Tensor> {
        let s = &self.shape;
        let d = s.head_dim();
        let heads = |w: &Var, n: usize| -> Result<Tensor> {
            linear(x, w)?
                .reshape((batch, len, n, d))?
                .transpose(1, 2)?
                .contiguous()
        };
        let q = rotate(&heads(&layer.q, s.heads)?, cos, sin)?;
        let group = s.heads / s.kv_heads;
        let k = repeat_kv(&rotate(&heads(&layer.k, s.kv_heads)?, cos, sin)?, group)?;
        let v = repeat_kv(&heads(&layer.v, s.kv_heads)?, group)?;
        let scores = (q.matmul(&k.t()?)? * (1.0 / (d as f64).sqrt()))?.broadcast_add(mask)?;
        let out = softmax(&scores, D::Minus1)?
            .matmul(&v)?
            .transpose(1, 2)?
            .reshape((batch * len, s.heads * d))?;
        linear(&out, &layer.o)
    }
}

/// `x W^T` for `x` of `[rows, in]` and a weight `[out, in]` as transformers stores it.
fn linear(x: &Tensor, weight: &Tensor) -> Result<Tensor> {
    x.matmul(&weight.t()?)
}

/// cos and sin `[len, head_dim]` for positions `0..len`, each half-table repeated so that it
/// lines up with both halves of a head (the `rotate_half` layout of Hugging Face weights).
/// Computed in f32 from f32 frequencies, as the inference path does.
fn rotary_tables(shape: &Shape, len: usize, device: &Device) -> Result<(Tensor, Tensor)> {
    let d = shape.head_dim();
    let base = f64::from(shape.rope_theta);
    let inv_freq: Vec<f32> = (0..d / 2)
        .map(|i| base.powf(-2.0 * i as f64 / d as f64) as f32)
        .collect();
    let angles: Vec<f32> = (0..len)
        .flat_map(|pos| inv_freq.iter().map(move |f| pos as f32 * f))
        .collect();
    let angles = Tensor::from_vec(angles, (len, d / 2), device)?;
    let twice = |t: Tensor| Tensor::cat(&[&t, &t], D::Minus1);
    Ok((twice(angles.cos()?)?, twice(angles.sin()?)?))
}

/// RoPE on `[batch, heads, len, head_dim]`: pairs are (x_i, x_{i + d/2}).
fn rotate(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
    let half = x.dim(D::Minus1)? / 2;
    let first = x.narrow(D::Minus1, 0, half)?;
    let second = x.narrow(D::Minus1, half, half)?;
    let rotated = Tensor::cat(&[&second.neg()?, &first], D::Minus1)?;
    x.broadcast_mul(cos)? + rotated.broadcast_mul(sin)?
}

/// Each key/value head repeated for the `group` query heads that share it, in the order the
/// inference path groups them (query head `j` reads kv head `j / group`).
fn repeat_kv(x: &Tensor, group: usize) -> Result<Tensor> {
    if group == 1 {
        return Ok(x.clone());
    }
    let (batch, kv, len, d) = x.dims4()?;
    x.unsqueeze(2)?
        .expand((batch, kv, group, len, d))?
        .reshape((batch, kv * group, len, d))
}

/// `[len, len]`: 0 where a position may attend, -inf for later positions.
fn causal_mask(len: usize, device: &Device) -> Result<Tensor> {
    let mask: Vec<f32> = (0..len)
        .flat_map(|i| (0..len).map(move |j| if j > i { f32::NEG_INFINITY } else { 0.0 }))
        .collect();
    Tensor::from_vec(mask, (len, len), device)
}

/// A standard normal draw (Box-Muller) from two uniforms built from raw bits.
fn normal(rng: &mut ChaCha8Rng) -> f64 {
    let uniform =
        |rng: &mut ChaCha8Rng| ((rng.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    let (u1, u2) = (uniform(rng), uniform(rng));
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}
