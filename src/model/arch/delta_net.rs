//! A Gated DeltaNet layer (Qwen3.5's linear attention): in place of keys and values of every
//! position, each value head keeps one `head_dim x head_dim` state matrix that decays and takes
//! a delta-rule update per token, read out by the query.
//!
//! The recurrence runs token by token, each row and head on its own, so a row's result does not
//! depend on how its prompt was split or which rows decode beside it. The projections run
//! through the usual matrix products; the rest is here, on the CPU's f32.

use super::weights::{Linear, load_linear};
use crate::model::arch::registry::Part;
use crate::model::error::ModelError;
use crate::model::formats::config::{DeltaNetShape, ModelConfig};
use crate::model::formats::tensors::{Source, require};
use crate::model::kernels::Arithmetic;
use crate::model::state::Snapshots;
use crate::model::state::recurrent::{RecurrentLayer, Row};
use candle_core::Tensor;
use rayon::prelude::*;

#[derive(Debug)]
pub(crate) struct DeltaNet {
    shape: DeltaNetShape,
    /// q, k and v of every head, before the convolution.
    qkv: Linear,
    /// The output gate `z`, one value per value channel.
    gate: Linear,
    /// β's and the decay's inputs, one per value head.
    beta: Linear,
    alpha: Linear,
    /// `[channels, kernel]`: each channel's own filter, oldest input first.
    conv: Vec<f32>,
    dt_bias: Vec<f32>,
    /// The decay rate per value head, `-exp(A_log)` (negative).
    a: Vec<f32>,
    /// Each head's output norm, `[head_dim]`.
    norm: Vec<f32>,
    out: Linear,
    eps: f32,
}

impl DeltaNet {
    pub(crate) fn load<S: Source>(
        source: &mut S,
        layer: usize,
        config: &ModelConfig,
        shape: DeltaNetShape,
        ours: Option<Arithmetic>,
    ) -> Result<Self, ModelError> {
        let h = config.hidden_size;
        let (channels, inner) = (shape.conv_channels(), shape.v_heads * shape.head_dim);
        let mut linear = |part: Part, rows: usize, cols: usize| {
            load_linear(source, layer, part, (rows, cols), ours)
        };
        let qkv = linear(Part::Qkv, channels, h)?;
        let gate = linear(Part::SsmGate, inner, h)?;
        let beta = linear(Part::SsmBeta, shape.v_heads, h)?;
        let alpha = linear(Part::SsmAlpha, shape.v_heads, h)?;
        let out = linear(Part::SsmOut, h, inner)?;
        let mut small = |part: Part, suffix: &str, dims: &[usize]| {
            let name = source.name(Some(layer), part, suffix);
            let t = require(source, &name, |s, n| s.tensor(n, dims))?;
            Ok::<_, ModelError>(t.flatten_all()?.to_vec1::<f32>()?)
        };
        Ok(Self {
            conv: small(Part::SsmConv, "weight", &[channels, shape.conv_kernel])?,
            dt_bias: small(Part::SsmDt, "bias", &[shape.v_heads])?,
            a: small(Part::SsmA, "", &[shape.v_heads])?,
            norm: small(Part::SsmNorm, "weight", &[shape.head_dim])?,
            shape,
            qkv,
            gate,
            beta,
            alpha,
            out,
            eps: config.rms_norm_eps as f32,
        })
    }

    pub(crate) fn matrices(&self) -> [&Linear; 5] {
        [&self.qkv, &self.gate, &self.beta, &self.alpha, &self.out]
    }

    /// `x` (`[rows, len, hidden]`, normed) through the layer, after the `start` positions its
    /// state holds.
    pub(crate) fn forward(
        &self,
        x: &Tensor,
        state: &mut RecurrentLayer,
        start: usize,
    ) -> candle_core::Result<Tensor> {
        let (rows, len, _) = x.dims3()?;
        let flat = |t: Tensor| t.flatten_all()?.to_vec1::<f32>();
        let qkv = flat(self.qkv.forward(x)?)?;
        let z = flat(self.gate.forward(x)?)?;
        let beta = flat(self.beta.forward(x)?)?;
        let alpha = flat(self.alpha.forward(x)?)?;
        let s = self.shape;
        let (channels, heads, dim) = (s.conv_channels(), s.v_heads, s.head_dim);
        let inner = heads * dim;
        let policy = state.policy();
        let row_states = state.rows_mut();
        if row_states.len() != rows {
            candle_core::bail!(
                "a recurrent state of {} rows for {rows} rows",
                row_states.len()
            );
        }
        let mut out = vec![0f32; rows * len * inner];
        row_states
            .par_iter_mut()
            .zip(out.par_chunks_mut(len * inner))
            .enumerate()
            .for_each(|(r, (row, out))| {
                let span = r * len..(r + 1) * len;
                let inputs = Inputs {
                    qkv: &qkv[span.start * channels..span.end * channels],
                    z: &z[span.start * inner..span.end * inner],
                    beta: &beta[span.start * heads..span.end * heads],
                    alpha: &alpha[span.start * heads..span.end * heads],
                };
                self.run_row(row, &inputs, out, start, policy);
            });
        let out = Tensor::from_vec(out, (rows, len, inner), x.device())?;
        self.out.forward(&out)
    }

    /// One row's tokens in order, each output `[heads * dim]` into `out`.
    fn run_row(
        &self,
        row: &mut Row,
        inputs: &Inputs,
        out: &mut [f32],
        start: usize,
        policy: Snapshots,
    ) {
        let s = self.shape;
        let (channels, heads, dim) = (s.conv_channels(), s.v_heads, s.head_dim);
        let key_span = s.k_heads * dim;
        let scale = 1.0 / (dim as f32).sqrt();
        let mut mixed = vec![0f32; channels];
        let mut delta = vec![0f32; dim];
        for (t, out) in out.chunks_exact_mut(heads * dim).enumerate() {
            let input = &inputs.qkv[t * channels..(t + 1) * channels];
            self.convolve(&mut row.now.conv, input, &mut mixed);
            let (q, rest) = mixed.split_at_mut(key_span);
            let (k, v) = rest.split_at_mut(key_span);
            for head in q.chunks_exact_mut(dim).chain(k.chunks_exact_mut(dim)) {
                l2_normalize(head, self.eps);
            }
            for h in 0..heads {
                let kh = s.k_head(h);
                let (q, k) = (&q[kh * dim..(kh + 1) * dim], &k[kh * dim..(kh + 1) * dim]);
                let v = &v[h * dim..(h + 1) * dim];
                let beta = sigmoid(inputs.beta[t * heads + h]);
                let decay =
                    (softplus(inputs.alpha[t * heads + h] + self.dt_bias[h]) * self.a[h]).exp();
                let matrix = &mut row.now.matrix[h * dim * dim..(h + 1) * dim * dim];
                let o = &mut out[h * dim..(h + 1) * dim];
                for (j, m) in matrix.chunks_exact_mut(dim).enumerate() {
                    m.iter_mut().for_each(|x| *x *= decay);
                    delta[j] = (v[j] - dot(m, k)) * beta;
                    m.iter_mut().zip(k).for_each(|(x, &kk)| *x += delta[j] * kk);
                    o[j] = dot(m, q) * scale;
                }
                let z = &inputs.z[t * heads * dim + h * dim..t * heads * dim + (h + 1) * dim];
                self.gated_norm(o, z);
            }
            row.reached(start + t + 1, policy);
        }
    }

    /// The causal convolution of one position: `window` (the last `kernel - 1` inputs, oldest
    /// first) then `input`, each channel through its own filter and SiLU, into `mixed`; the
    /// window moves on by `input`.
    fn convolve(&self, window: &mut [f32], input: &[f32], mixed: &mut [f32]) {
        let channels = input.len();
        let kernel = self.shape.conv_kernel;
        for (c, m) in mixed.iter_mut().enumerate() {
            let filter = &self.conv[c * kernel..(c + 1) * kernel];
            let mut sum = 0f32;
            for (i, w) in filter[..kernel - 1].iter().enumerate() {
                sum += window[i * channels + c] * w;
            }
            sum += input[c] * filter[kernel - 1];
            *m = silu(sum);
        }
        window.copy_within(channels.., 0);
        let last = window.len() - channels;
        window[last..].copy_from_slice(input);
    }

    /// `rms_norm(o) * silu(z)`, in place.
    fn gated_norm(&self, o: &mut [f32], z: &[f32]) {
        let mean = o.iter().map(|x| x * x).sum::<f32>() / o.len() as f32;
        let inv = 1.0 / (mean + self.eps).sqrt();
        for ((x, w), &g) in o.iter_mut().zip(&self.norm).zip(z) {
            *x = *x * inv * w * silu(g);
        }
    }
}

/// One row's projections over its positions.
struct Inputs<'a> {
    qkv: &'a [f32],
    z: &'a [f32],
    beta: &'a [f32],
    alpha: &'a [f32],
}

/// `x / sqrt(sum(x²) + eps)`, llama.cpp's L2 norm of the heads.
fn l2_normalize(x: &mut [f32], eps: f32) {
    let sum: f32 = x.iter().map(|v| v * v).sum();
    let inv = 1.0 / (sum + eps).sqrt();
    x.iter_mut().for_each(|v| *v *= inv);
}

/// A dot product in eight lanes, so that it vectorises.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            lanes[i] += x[i] * y[i];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

fn silu(x: f32) -> f32 {
    x * sigmoid(x)
}

/// `ln(1 + e^x)`, as ggml computes it (linear past 20).
fn softplus(x: f32) -> f32 {
    if x > 20.0 { x } else { x.exp().ln_1p() }
}
