//! Loading a model's tensors from GGUF (kept quantized) or safetensors (f32, f16 and bf16
//! kept as stored) into one in-memory form, so that the forward pass has a single code path.

use super::registry::{Gating, Part, QkNorm};
use crate::model::device::cpu_paths;
use crate::model::error::ModelError;
use crate::model::formats::config::{DeltaNetShape, Experts, ModelConfig};
use crate::model::formats::tensors::{
    GgufSource, GgufTables, HfSource, Source, Stored, require, split_rows,
};
use crate::model::kernels::dense::DenseMatrix;
use crate::model::kernels::{Activations, Arithmetic, QuantMatrix, QuantType};
use candle_core::quantized::QMatMul;
use candle_core::{DType, Device, Module, Tensor};
use std::fs::File;
use std::io::BufReader;
use std::path::Path;
use std::sync::Arc;

/// `x W^T + b`. On the CPU every matrix keeps its stored type: quantized, f32, f16 or bf16.
#[derive(Debug, Clone)]
pub(crate) struct Linear {
    weight: Matrix,
    bias: Option<Tensor>,
    /// The type the file stores, where it was widened to f32 at load because no product
    /// here runs it (MXFP4 off the CPU, or with candle's kernels).
    widened_from: Option<QuantType>,
}

#[derive(Debug, Clone)]
enum Matrix {
    Candle(QMatMul),
    /// A quantized matrix on the CPU in a format we have a kernel for: f32 or 16-bit
    /// activations (as loaded) against the exact dequantized weights, and several times
    /// faster than candle's.
    Ours(Arc<QuantMatrix>),
    /// f32, f16 or bf16 on the CPU: our batch-invariant product (a row's logits must not
    /// depend on the rows decoded beside it, or a re-run would differ from a fresh run).
    Dense(Arc<DenseMatrix>),
}

impl Linear {
    /// A float matrix on the CPU moves into our batch-invariant product. With `ours`, a
    /// quantized CPU matrix in a format we have a kernel for moves into our layout, to
    /// multiply with that arithmetic; `None` keeps candle's product, for comparisons. MXFP4,
    /// which candle cannot run, moves into ours on the CPU and is widened to f32 otherwise.
    /// candle's copy is freed unless shared, as a tied embedding is.
    fn new(
        weight: Stored,
        bias: Option<Tensor>,
        ours: Option<Arithmetic>,
    ) -> candle_core::Result<Self> {
        let weight = match weight {
            Stored::Candle(weight) => weight,
            Stored::Mxfp4(m) => {
                if let Some(arithmetic) = ours
                    && cpu_paths(&m.device)
                    && let Some(matrix) =
                        QuantMatrix::from_gguf(QuantType::Mxfp4, m.rows, m.cols, &m.data)?
                {
                    let weight = Matrix::Ours(Arc::new(matrix.with(arithmetic)));
                    return Ok(Self::built(weight, bias));
                }
                let widened = Self::new(Stored::Candle(m.widened()?), bias, ours)?;
                return Ok(Self {
                    widened_from: Some(QuantType::Mxfp4),
                    ..widened
                });
            }
        };
        if let QMatMul::QTensor(q) = &weight
            && cpu_paths(&q.device())
        {
            let (rows, cols) = q.shape().dims2()?;
            let data = q.data()?;
            if let Some(dense) = DenseMatrix::from_ggml(q.dtype(), rows, cols, &data)? {
                return Ok(Self::built(Matrix::Dense(Arc::new(dense)), bias));
            }
            if let Some(arithmetic) = ours
                && let Some(matrix) =
                    QuantMatrix::from_gguf(QuantType::Ggml(q.dtype()), rows, cols, &data)?
            {
                let weight = Matrix::Ours(Arc::new(matrix.with(arithmetic)));
                return Ok(Self::built(weight, bias));
            }
        }
        Ok(Self::built(Matrix::Candle(weight), bias))
    }

    fn built(weight: Matrix, bias: Option<Tensor>) -> Self {
        Self {
            weight,
            bias,
            widened_from: None,
        }
    }

    /// The weight type and the product that runs it, e.g. `("q4_1", "samplab avx512, f32
    /// activations")`.
    fn kernel(&self) -> (String, String) {
        let (dtype, kernel) = self.stored_kernel();
        match self.widened_from {
            Some(stored) => (
                stored.name(),
                format!("{kernel} (widened to {dtype} at load)"),
            ),
            None => (dtype, kernel),
        }
    }

    /// The type of the matrix as held and the product that runs it.
    fn stored_kernel(&self) -> (String, String) {
        match &self.weight {
            Matrix::Ours(q) => (
                q.dtype().name(),
                format!("samplab {}", q.arithmetic().name()),
            ),
            Matrix::Candle(QMatMul::QTensor(q)) => {
                let dtype = QuantType::Ggml(q.dtype());
                (dtype.name(), "candle, 8-bit activations".to_owned())
            }
            Matrix::Candle(QMatMul::Tensor(t) | QMatMul::TensorF16(t)) => (
                format!("{:?}", t.dtype()).to_lowercase(),
                "candle matmul".to_owned(),
            ),
            Matrix::Dense(w) => (
                w.dtype_name().to_owned(),
                format!("samplab {}, batch invariant", w.dtype_name()),
            ),
        }
    }

    /// Bytes of the weight matrix as stored, quantized or not.
    fn bytes(&self) -> u64 {
        let bytes = match &self.weight {
            Matrix::Candle(QMatMul::QTensor(q)) => q.storage_size_in_bytes(),
            Matrix::Candle(QMatMul::Tensor(t) | QMatMul::TensorF16(t)) => {
                t.elem_count() * t.dtype().size_in_bytes()
            }
            Matrix::Ours(q) => q.storage_size_in_bytes(),
            Matrix::Dense(w) => w.storage_size_in_bytes(),
        };
        bytes as u64
    }

    /// Whether [`Linear::look_up`] can read rows: our products hold the matrix.
    fn holds_rows(&self) -> bool {
        matches!(self.weight, Matrix::Ours(_) | Matrix::Dense(_))
    }

    /// Rows `ids` of the matrix, for an embedding tied to it.
    fn look_up(&self, ids: &Tensor) -> candle_core::Result<Tensor> {
        let (rows, cols) = match &self.weight {
            Matrix::Ours(w) => w.shape(),
            Matrix::Dense(w) => w.shape(),
            Matrix::Candle(_) => candle_core::bail!("candle's matrices have their own lookup"),
        };
        let wanted = ids.flatten_all()?.to_vec1::<u32>()?;
        let mut values = vec![0f32; wanted.len() * cols];
        for (&id, out) in wanted.iter().zip(values.chunks_exact_mut(cols)) {
            let id = id as usize;
            if id >= rows {
                candle_core::bail!("embedding id {id} is out of range for {rows} rows");
            }
            match &self.weight {
                Matrix::Ours(w) => w.row(id, out),
                Matrix::Dense(w) => w.row(id, out),
                Matrix::Candle(_) => unreachable!("refused above"),
            }
        }
        let mut dims = ids.dims().to_vec();
        dims.push(cols);
        Tensor::from_vec(values, dims, ids.device())
    }

    pub(crate) fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let y = match &self.weight {
            Matrix::Candle(w) => w.forward(x)?,
            Matrix::Ours(w) => x.contiguous()?.apply_op1_no_bwd(w.as_ref())?,
            Matrix::Dense(w) => x.contiguous()?.apply_op1_no_bwd(w.as_ref())?,
        };
        match &self.bias {
            Some(b) => add_bias(y, b),
            None => Ok(y),
        }
    }
}

/// `y + bias` along the last axis. On the CPU a plain loop, not candle's add: the experts'
/// products run inside the barrier pool's loop, where candle's own split of a large add would
/// wait for the pool it runs in, for ever.
fn add_bias(y: Tensor, bias: &Tensor) -> candle_core::Result<Tensor> {
    let f32_cpu = |t: &Tensor| cpu_paths(t.device()) && t.dtype() == DType::F32;
    if !(f32_cpu(&y) && f32_cpu(bias)) {
        return y.broadcast_add(bias);
    }
    let bias = bias.flatten_all()?.to_vec1::<f32>()?;
    let (dims, device) = (y.dims().to_vec(), y.device().clone());
    if dims.last() != Some(&bias.len()) {
        candle_core::bail!("a bias of {} for outputs of shape {dims:?}", bias.len());
    }
    let mut values = y.flatten_all()?.to_vec1::<f32>()?;
    for row in values.chunks_exact_mut(bias.len()) {
        row.iter_mut().zip(&bias).for_each(|(v, b)| *v += b);
    }
    Tensor::from_vec(values, dims, &device)
}

#[derive(Debug)]
pub(crate) struct Layer {
    /// Norms of the block's input and of the attention's residual sum (all but OLMo 2).
    pub attn_norm: Option<Tensor>,
    pub mixer: Mixer,
    /// Norms of the attention's and the feed-forward's outputs (Gemma 3).
    pub post_attn_norm: Option<Tensor>,
    pub ffn_norm: Option<Tensor>,
    pub post_ffn_norm: Option<Tensor>,
    pub ffn: Ffn,
    /// The layer's output is multiplied by this one-element vector (Gemma 4).
    pub output_scale: Option<Tensor>,
    pub per_layer: Option<PerLayerGate>,
}

/// What mixes positions in a layer: attention over the cached keys, or a recurrent state.
#[derive(Debug)]
pub(crate) enum Mixer {
    Attention(Attention),
    DeltaNet(DeltaNet),
}

impl Mixer {
    fn matrices(&self) -> Vec<&Linear> {
        match self {
            Mixer::Attention(a) => [Some(&a.q), a.k.as_ref(), a.v.as_ref(), Some(&a.o)]
                .into_iter()
                .flatten()
                .collect(),
            Mixer::DeltaNet(d) => d.matrices().to_vec(),
        }
    }
}

#[derive(Debug)]
pub(crate) struct Attention {
    /// With a gated attention, each head's query then its gate.
    pub q: Linear,
    /// None in a layer that reads an earlier layer's keys (Gemma 4).
    pub k: Option<Linear>,
    /// None where the keys serve as values too (Gemma 4's `attention_k_eq_v`), or the layer
    /// reads an earlier layer's.
    pub v: Option<Linear>,
    pub o: Linear,
    /// Per-head norms, applied to q and k before RoPE (Qwen3, Gemma 3).
    pub q_norm: Option<Tensor>,
    pub k_norm: Option<Tensor>,
    /// Each query head's sink logit (gpt-oss).
    pub sinks: Option<Vec<f32>>,
}

/// How a layer mixes in its per-layer embedding (Gemma 4's E2B, E4B): `x + norm(proj(
/// gelu(gate(x)) * embedding))`.
#[derive(Debug)]
pub(crate) struct PerLayerGate {
    pub gate: Linear,
    pub proj: Linear,
    pub norm: Tensor,
}

/// Every layer's per-layer embedding of a token: a table looked up by id, plus a projection
/// of the token's (scaled) embedding, normed.
#[derive(Debug)]
pub(crate) struct PerLayerInputs {
    pub table: QMatMul,
    pub model_proj: Linear,
    pub norm: Tensor,
}

/// A layer's feed-forward: one, or a mixture of experts.
#[derive(Debug)]
pub(crate) enum Ffn {
    Dense {
        gate: Linear,
        up: Linear,
        down: Linear,
    },
    Experts(Moe),
    Beside(Box<Beside>),
}

/// A Gated DeltaNet layer's weights (Qwen3.5); its forward pass is in `delta_net`.
#[derive(Debug)]
pub(crate) struct DeltaNet {
    pub(crate) shape: DeltaNetShape,
    /// q, k and v of every head, before the convolution.
    pub(crate) qkv: Linear,
    /// The output gate `z`, one value per value channel.
    pub(crate) gate: Linear,
    /// β's and the decay's inputs, one per value head.
    pub(crate) beta: Linear,
    pub(crate) alpha: Linear,
    /// `[kernel, channels]`: each channel's own filter, oldest input first, the channels' taps
    /// side by side (turned at load from the file's `[channels, kernel]`), so that a
    /// position's convolution runs along the channels.
    pub(crate) conv: Vec<f32>,
    pub(crate) dt_bias: Vec<f32>,
    /// The decay rate per value head, `-exp(A_log)` (negative).
    pub(crate) a: Vec<f32>,
    /// Each head's output norm, `[head_dim]`.
    pub(crate) norm: Vec<f32>,
    pub(crate) out: Linear,
    pub(crate) eps: f32,
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
        let conv_name = source.name(Some(layer), Part::SsmConv, "weight");
        let conv = require(source, &conv_name, |s, n| {
            s.conv_kernel(n, channels, shape.conv_kernel)
        })?;
        let conv = conv.t()?.flatten_all()?.to_vec1::<f32>()?;
        let a_name = source.name(Some(layer), Part::SsmA, "");
        let a = require(source, &a_name, |s, n| s.decay_rates(n, shape.v_heads))?;
        let a = a.to_vec1::<f32>()?;
        let mut small = |part: Part, suffix: &str, dims: &[usize]| {
            let name = source.name(Some(layer), part, suffix);
            let t = require(source, &name, |s, n| s.tensor(n, dims))?;
            Ok::<_, ModelError>(t.flatten_all()?.to_vec1::<f32>()?)
        };
        Ok(Self {
            conv,
            dt_bias: small(Part::SsmDt, "", &[shape.v_heads])?,
            a,
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
}

/// A mixture of experts: the router's logits choose `used` experts for each token.
#[derive(Debug)]
pub(crate) struct Moe {
    pub router: Linear,
    pub gate: Vec<Linear>,
    pub up: Vec<Linear>,
    pub down: Vec<Linear>,
    pub used: usize,
    pub gating: Gating,
    /// Each expert's output is multiplied by its scale (Gemma 4).
    pub scales: Option<Vec<f32>>,
    /// An expert every token takes beside its chosen ones (Qwen3.5 MoE).
    pub shared: Option<SharedExpert>,
}

/// A feed-forward every token runs, weighed by the sigmoid of `x . router`.
#[derive(Debug)]
pub(crate) struct SharedExpert {
    pub router: Tensor,
    pub gate: Linear,
    pub up: Linear,
    pub down: Linear,
}

/// Experts beside a dense feed-forward (Gemma 4's 26B-A4B): `post_dense(dense(x)) +
/// post_experts(experts(pre_experts(x)))`, the router reading `x` RMS-normed, divided by
/// `sqrt(hidden)` and scaled by `router_scale`.
#[derive(Debug)]
pub(crate) struct Beside {
    /// An [`Ffn::Dense`].
    pub dense: Ffn,
    pub post_dense_norm: Tensor,
    pub experts: Moe,
    pub router_scale: Tensor,
    pub pre_experts_norm: Tensor,
    pub post_experts_norm: Tensor,
}

impl Ffn {
    fn moe(&self) -> Option<&Moe> {
        match self {
            Ffn::Dense { .. } => None,
            Ffn::Experts(moe) => Some(moe),
            Ffn::Beside(beside) => Some(&beside.experts),
        }
    }

    fn experts(&self) -> impl Iterator<Item = &Linear> {
        self.moe()
            .map(|moe| moe.gate.iter().chain(&moe.up).chain(&moe.down))
            .into_iter()
            .flatten()
    }

    /// The matrices every token reads: a dense feed-forward's three, the router (and a shared
    /// expert's), or both.
    fn shared(&self) -> Vec<&Linear> {
        match self {
            Ffn::Dense { gate, up, down } => vec![gate, up, down],
            Ffn::Experts(moe) => {
                let shared = moe.shared.iter().flat_map(|s| [&s.gate, &s.up, &s.down]);
                std::iter::once(&moe.router).chain(shared).collect()
            }
            Ffn::Beside(beside) => {
                let mut shared = beside.dense.shared();
                shared.push(&beside.experts.router);
                shared
            }
        }
    }

    /// The share of the experts' bytes one token reads: `used` of them.
    fn expert_share(&self) -> f64 {
        self.moe()
            .map_or(0.0, |moe| moe.used as f64 / moe.gate.len() as f64)
    }
}

/// Where token embeddings are looked up.
#[derive(Debug)]
pub(crate) enum Embedding {
    /// Their own (possibly quantized) matrix, in candle.
    Table(QMatMul),
    /// The rows of the tied output matrix, which one of our products holds: one copy of
    /// the matrix serves both.
    Output,
}

#[derive(Debug)]
pub(crate) struct Weights {
    embed: Embedding,
    pub layers: Vec<Layer>,
    pub norm: Tensor,
    pub output: Linear,
    /// The output projection is the embedding matrix (configured so, or none was stored).
    pub tied_output: bool,
    /// GGUF `rope_freqs.weight` (Llama 3.1 RoPE scaling baked in by convert), or the
    /// LongRoPE factors that serve the model's context (Phi-3).
    pub rope_freqs: Option<Vec<f32>>,
    pub per_layer_inputs: Option<PerLayerInputs>,
}

impl Weights {
    /// The embeddings of token ids `[rows, len]`: `[rows, len, hidden]`.
    pub(crate) fn embed(&self, ids: &Tensor) -> candle_core::Result<Tensor> {
        match &self.embed {
            Embedding::Table(table) => table.embedding(ids),
            Embedding::Output => self.output.look_up(ids),
        }
    }

    /// Bytes of matrices one token reads in a decode step: every layer's (of a mixture of
    /// experts, the share its chosen experts take) and the output projection (the embedding
    /// is only looked up row by row).
    pub(crate) fn bytes_per_step(&self) -> u64 {
        let shared: u64 = self.shared_matrices().map(Linear::bytes).sum();
        let experts: f64 = self
            .layers
            .iter()
            .map(|l| l.ffn.experts().map(Linear::bytes).sum::<u64>() as f64 * l.ffn.expert_share())
            .sum();
        shared + experts as u64
    }

    /// Whether every matrix runs through our products (none through candle's).
    pub(crate) fn all_ours(&self) -> bool {
        self.matrices().all(Linear::holds_rows)
    }

    fn matrices(&self) -> impl Iterator<Item = &Linear> {
        self.shared_matrices()
            .chain(self.layers.iter().flat_map(|l| l.ffn.experts()))
    }

    /// Every matrix but the experts'.
    fn shared_matrices(&self) -> impl Iterator<Item = &Linear> {
        self.layers
            .iter()
            .flat_map(|l| {
                let gates = l.per_layer.iter().flat_map(|p| [&p.gate, &p.proj]);
                l.mixer
                    .matrices()
                    .into_iter()
                    .chain(l.ffn.shared())
                    .chain(gates)
            })
            .chain(self.per_layer_inputs.iter().map(|p| &p.model_proj))
            .chain([&self.output])
    }

    /// Each weight type of the matrices and the kernel that runs it, once each.
    pub(crate) fn kernels(&self) -> Vec<(String, String)> {
        let mut kernels: Vec<(String, String)> = self.matrices().map(Linear::kernel).collect();
        kernels.sort();
        kernels.dedup();
        kernels
    }

    /// What our quantized products do with activations, where any matrix runs through them
    /// (all of a model's share one arithmetic).
    pub(crate) fn activations(&self) -> Option<Activations> {
        self.matrices().find_map(|linear| match &linear.weight {
            Matrix::Ours(q) => Some(q.arithmetic().activations()),
            _ => None,
        })
    }
}

impl Weights {
    /// `ours`: quantized matrices on the CPU run through our kernels, with that arithmetic
    /// (see [`Linear::new`]).
    pub(crate) fn load_gguf(
        tables: &GgufTables,
        reader: BufReader<File>,
        config: &ModelConfig,
        path: &Path,
        device: &Device,
        ours: Option<Arithmetic>,
    ) -> Result<Self, ModelError> {
        let mut source =
            GgufSource::new(tables, reader, path, device, config.architecture.family());
        Self::load(&mut source, config, ours)
    }

    /// Loads every `*.safetensors` file of a Hugging Face model directory.
    pub(crate) fn load_hf(
        dir: &Path,
        config: &ModelConfig,
        device: &Device,
    ) -> Result<Self, ModelError> {
        let mut source = HfSource::read(dir, device, config.architecture.family())?;
        Self::load(&mut source, config, Some(Arithmetic::exact()))
    }
    fn load<S: Source>(
        source: &mut S,
        config: &ModelConfig,
        ours: Option<Arithmetic>,
    ) -> Result<Self, ModelError> {
        let h = config.hidden_size;
        let ffn_size = config.intermediate_size;
        let embed_name = source.name(None, Part::Embed, "weight");
        let embed = require(source, &embed_name, |s, n| {
            s.matrix(n, (config.vocab_size, h))
        })?;
        let output_name = source.name(None, Part::Output, "weight");
        let (output, tied_output) = match source.matrix(&output_name, (config.vocab_size, h))? {
            Some(weight) if !config.tie_word_embeddings => (weight, false),
            _ => (embed.clone(), true),
        };
        // Not reserved up front: a header may claim 2^61 layers; the first missing one ends it.
        let family = config.architecture.family();
        let mut layers = Vec::new();
        for i in 0..config.num_layers {
            let linear = |source: &mut S, part: Part, shape: (usize, usize)| {
                load_linear(source, i, part, shape, ours)
            };
            let mixer = match config.delta_net.filter(|_| config.layers[i].recurrent) {
                Some(shape) => Mixer::DeltaNet(DeltaNet::load(source, i, config, shape, ours)?),
                None => Mixer::Attention(load_attention(source, i, config, ours)?),
            };
            let fused_gate_up = if family.fused_gate_up {
                let name = source.name(Some(i), Part::Up, "weight");
                let mut pair = require(source, &name, |s, _| {
                    load_stacked(s, i, Part::Up, &[ffn_size, ffn_size], h, ours)
                })?;
                pair.pop().zip(pair.pop())
            } else {
                None
            };
            let dense = |source: &mut S, fused_gate_up: Option<(Linear, Linear)>| {
                let (up, gate) = match fused_gate_up {
                    Some(pair) => pair,
                    None => (
                        linear(source, Part::Up, (ffn_size, h))?,
                        linear(source, Part::Gate, (ffn_size, h))?,
                    ),
                };
                let down = linear(source, Part::Down, (h, ffn_size))?;
                Ok::<_, ModelError>(Ffn::Dense { gate, up, down })
            };
            let ffn = match config.experts {
                None => dense(source, fused_gate_up)?,
                Some(experts) if family.experts_beside_dense => {
                    let dense = dense(source, fused_gate_up)?;
                    let experts = load_experts(source, i, experts, h, ours)?;
                    let mut norm = |part: Part, suffix: &str, len: usize| {
                        let name = source.name(Some(i), part, suffix);
                        require(source, &name, |s, n| s.norm(n, len))
                    };
                    Ffn::Beside(Box::new(Beside {
                        dense,
                        post_dense_norm: norm(Part::PostDenseNorm, "weight", h)?,
                        router_scale: norm(Part::RouterScale, "scale", h)?,
                        pre_experts_norm: norm(Part::PreExpertsNorm, "weight", h)?,
                        post_experts_norm: norm(Part::PostExpertsNorm, "weight", h)?,
                        experts,
                    }))
                }
                Some(experts) => Ffn::Experts(load_experts(source, i, experts, h, ours)?),
            };
            let mut norm = |part: Part, len: usize| {
                let name = source.name(Some(i), part, "weight");
                require(source, &name, |s, n| s.norm(n, len))
            };
            let (attn_norm, ffn_norm) = if family.pre_norms {
                (
                    Some(norm(Part::AttnNorm, h)?),
                    Some(norm(Part::FfnNorm, h)?),
                )
            } else {
                (None, None)
            };
            let (post_attn_norm, post_ffn_norm) = if family.post_norms {
                (
                    Some(norm(Part::PostAttnNorm, h)?),
                    Some(norm(Part::PostFfnNorm, h)?),
                )
            } else {
                (None, None)
            };
            let per_layer_norm = match config.per_layer_input {
                Some(_) => Some(norm(Part::PerLayerPostNorm, h)?),
                None => None,
            };
            let per_layer = match (config.per_layer_input, per_layer_norm) {
                (Some(size), Some(norm)) => Some(PerLayerGate {
                    gate: linear(source, Part::PerLayerGate, (size, h))?,
                    proj: linear(source, Part::PerLayerProj, (h, size))?,
                    norm,
                }),
                _ => None,
            };
            let scale_name = source.name(Some(i), Part::OutputScale, "weight");
            let output_scale = source.vector(&scale_name, 1)?;
            layers.push(Layer {
                attn_norm,
                mixer,
                post_attn_norm,
                ffn_norm,
                post_ffn_norm,
                ffn,
                output_scale,
                per_layer,
            });
        }
        let norm_name = source.name(None, Part::Norm, "weight");
        let norm = require(source, &norm_name, |s, n| s.norm(n, h))?;
        // Divisors of RoPE's frequencies: Llama 3.1's, or LongRoPE's long ones for a context
        // beyond the original one and its short ones for any other, as llama.cpp chooses.
        let long = config
            .rope_original_context
            .is_some_and(|original| config.context_length > original);
        let factors = [
            Part::RopeFreqs,
            if long {
                Part::RopeFactorsLong
            } else {
                Part::RopeFactorsShort
            },
        ];
        let mut rope_freqs = None;
        for part in factors {
            let name = source.name(None, part, "weight");
            if let Some(t) = source.vector(&name, config.rope_dims / 2)? {
                rope_freqs = Some(t.to_vec1::<f32>()?);
                break;
            }
        }
        let per_layer_inputs = match config.per_layer_input {
            Some(size) => {
                let all = size * config.num_layers;
                let table_name = source.name(None, Part::PerLayerEmbed, "weight");
                let proj_name = source.name(None, Part::PerLayerModelProj, "weight");
                let norm_name = source.name(None, Part::PerLayerProjNorm, "weight");
                Some(PerLayerInputs {
                    table: require(source, &table_name, |s, n| {
                        s.matrix(n, (config.vocab_size, all))
                    })?
                    .into_candle()?,
                    model_proj: Linear::new(
                        require(source, &proj_name, |s, n| s.matrix(n, (all, h)))?,
                        None,
                        ours,
                    )?,
                    norm: require(source, &norm_name, |s, n| s.norm(n, size))?,
                })
            }
            None => None,
        };
        let output = Linear::new(output, None, ours)?;
        // A tied matrix in our layout serves the lookups too, and candle's copy is dropped.
        let embed = if tied_output && output.holds_rows() {
            Embedding::Output
        } else {
            Embedding::Table(embed.into_candle()?)
        };
        Ok(Self {
            embed,
            layers,
            norm,
            output,
            tied_output,
            rope_freqs,
            per_layer_inputs,
        })
    }
}

/// Layer `layer`'s attention: q, k, v and o (or q, k and v stacked), and q's and k's norms.
fn load_attention<S: Source>(
    source: &mut S,
    layer: usize,
    config: &ModelConfig,
    ours: Option<Arithmetic>,
) -> Result<Attention, ModelError> {
    let family = config.architecture.family();
    let plan = config.layers[layer];
    let (h, kv) = (config.hidden_size, plan.kv_heads * plan.head_dim);
    let q_dim = config.num_heads * plan.head_dim;
    // A gated attention's q projection yields each head's gate beside its query.
    let q_rows = if family.gated_attention {
        2 * q_dim
    } else {
        q_dim
    };
    let (q, k, v) = match load_stacked(source, layer, Part::Qkv, &[q_rows, kv, kv], h, ours)? {
        Some(mut qkv) => {
            let (v, k) = (qkv.pop(), qkv.pop());
            (qkv.pop(), k, v)
        }
        None => (None, None, None),
    };
    // A layer that reads an earlier layer's keys has none of its own (Gemma 4).
    let own_kv = plan.kv_from.is_none();
    let (q, k, v, o) = (
        q.map_or_else(
            || load_linear(source, layer, Part::Q, (q_rows, h), ours),
            Ok,
        )?,
        match k {
            Some(k) => Some(k),
            None if own_kv => Some(load_linear(source, layer, Part::K, (kv, h), ours)?),
            None => None,
        },
        match v {
            Some(v) => Some(v),
            // Gemma 4 reads its keys as values where a layer has no v.
            None if own_kv && family.v_norm => {
                optional_linear(source, layer, Part::V, (kv, h), ours)?
            }
            None if own_kv => Some(load_linear(source, layer, Part::V, (kv, h), ours)?),
            None => None,
        },
        load_linear(source, layer, Part::O, (h, q_dim), ours)?,
    );
    let mut norm = |part: Part, len: usize| {
        let name = source.name(Some(layer), part, "weight");
        require(source, &name, |s, n| s.norm(n, len))
    };
    let (q_norm, k_norm) = match family.qk_norm {
        QkNorm::None => (None, None),
        QkNorm::PerHead => (
            Some(norm(Part::QNorm, plan.head_dim)?),
            own_kv
                .then(|| norm(Part::KNorm, plan.head_dim))
                .transpose()?,
        ),
        QkNorm::Whole => (
            Some(norm(Part::QNorm, q_dim)?),
            Some(norm(Part::KNorm, kv)?),
        ),
    };
    let sinks = if family.sinks {
        let name = source.name(Some(layer), Part::Sinks, "weight");
        let sinks = require(source, &name, |s, n| s.vector(n, config.num_heads))?;
        Some(sinks.to_vec1::<f32>()?)
    } else {
        None
    };
    Ok(Attention {
        sinks,
        q,
        k,
        v,
        o,
        q_norm,
        k_norm,
    })
}

/// Layer `layer`'s shared expert, where the file has one: its gate vector and feed-forward
/// (of the file's shared size, else the model's feed-forward size).
fn load_shared_expert<S: Source>(
    source: &mut S,
    layer: usize,
    experts: Experts,
    h: usize,
    ours: Option<Arithmetic>,
) -> Result<Option<SharedExpert>, ModelError> {
    let router_name = source.name(Some(layer), Part::SharedRouter, "weight");
    let Some(router) = source.shared_expert_gate(&router_name, h)? else {
        return Ok(None);
    };
    let size = experts.shared_size.unwrap_or(experts.intermediate_size);
    Ok(Some(SharedExpert {
        router,
        gate: load_linear(source, layer, Part::SharedGate, (size, h), ours)?,
        up: load_linear(source, layer, Part::SharedUp, (size, h), ours)?,
        down: load_linear(source, layer, Part::SharedDown, (h, size), ours)?,
    }))
}

/// Layer `layer`'s matrix `part` of `shape`, with its bias if the file has one.
pub(crate) fn load_linear(
    source: &mut impl Source,
    layer: usize,
    part: Part,
    shape: (usize, usize),
    ours: Option<Arithmetic>,
) -> Result<Linear, ModelError> {
    let name = source.name(Some(layer), part, "weight");
    let weight = require(source, &name, |s, n| s.matrix(n, shape))?;
    let bias_name = source.name(Some(layer), part, "bias");
    let bias = source.vector(&bias_name, shape.0)?;
    Ok(Linear::new(weight, bias, ours)?)
}

/// Layer `layer`'s mixture of experts, with each expert's output scale where the file has
/// them (Gemma 4).
fn load_experts<S: Source>(
    source: &mut S,
    layer: usize,
    experts: Experts,
    h: usize,
    ours: Option<Arithmetic>,
) -> Result<Moe, ModelError> {
    let router = load_linear(source, layer, Part::Router, (experts.count, h), ours)?;
    let size = experts.intermediate_size;
    let matrices = |source: &mut S, part: Part, shape: (usize, usize)| {
        let found = source.experts(layer, part, experts.count, shape)?;
        let name = source.name(Some(layer), part, "weight");
        let found = found.ok_or_else(|| ModelError::MissingTensor {
            path: source.path().to_owned(),
            name,
            family: source.family().name,
        })?;
        let biases = source.expert_biases(layer, part, experts.count, shape.0)?;
        let mut biases = biases.map(Vec::into_iter);
        found
            .into_iter()
            .map(|m| {
                let bias = biases.as_mut().and_then(Iterator::next);
                Linear::new(m, bias, ours).map_err(ModelError::from)
            })
            .collect::<Result<Vec<_>, _>>()
    };
    // Gate and up stacked in one tensor per expert, gate's rows first, or apart.
    let (gate, up) =
        match source.experts(layer, Part::GateUpExperts, experts.count, (2 * size, h))? {
            Some(fused) => {
                let (mut gate, mut up) = (Vec::new(), Vec::new());
                for matrix in fused {
                    let mut halves = split_rows(matrix, &[size, size])?.into_iter();
                    for (half, into) in halves.by_ref().zip([&mut gate, &mut up]) {
                        into.push(Linear::new(half, None, ours)?);
                    }
                }
                (gate, up)
            }
            None => (
                matrices(source, Part::GateExperts, (size, h))?,
                matrices(source, Part::UpExperts, (size, h))?,
            ),
        };
    let down = matrices(source, Part::DownExperts, (h, size))?;
    let scales_name = source.name(Some(layer), Part::ExpertScales, "scale");
    let scales = match source.vector(&scales_name, experts.count)? {
        Some(t) => Some(t.to_dtype(candle_core::DType::F32)?.to_vec1::<f32>()?),
        None => None,
    };
    Ok(Moe {
        router,
        gate,
        up,
        down,
        used: experts.used,
        gating: source.family().gating,
        scales,
        shared: load_shared_expert(source, layer, experts, h, ours)?,
    })
}

/// Layer `layer`'s matrix `part` of `shape` where the file has it.
fn optional_linear(
    source: &mut impl Source,
    layer: usize,
    part: Part,
    shape: (usize, usize),
    ours: Option<Arithmetic>,
) -> Result<Option<Linear>, ModelError> {
    let name = source.name(Some(layer), part, "weight");
    match source.matrix(&name, shape)? {
        Some(weight) => Ok(Some(Linear::new(weight, None, ours)?)),
        None => Ok(None),
    }
}

/// Layer `layer`'s matrix `part` that stacks matrices of `rows` rows each (and its bias, if
/// any), cut into them; `None` where the file keeps them apart.
fn load_stacked(
    source: &mut impl Source,
    layer: usize,
    part: Part,
    rows: &[usize],
    cols: usize,
    ours: Option<Arithmetic>,
) -> Result<Option<Vec<Linear>>, ModelError> {
    let total = rows.iter().sum();
    let name = source.name(Some(layer), part, "weight");
    let Some(weight) = source.matrix(&name, (total, cols))? else {
        return Ok(None);
    };
    let bias_name = source.name(Some(layer), part, "bias");
    let bias = source.vector(&bias_name, total)?;
    let mut start = 0;
    let mut parts = Vec::new();
    for (weight, &n) in split_rows(weight, rows)?.into_iter().zip(rows) {
        let bias = bias.as_ref().map(|b| b.narrow(0, start, n)).transpose()?;
        start += n;
        parts.push(Linear::new(weight, bias, ours)?);
    }
    Ok(Some(parts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::kernels::parallel::for_each_range;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn a_biased_product_inside_the_pools_loop_finishes_with_the_bias_added() {
        // 300 x 256 outputs: more than candle splits an add over its pool for.
        let (rows, cols, outs) = (300, 8, 256);
        let values = |n: usize| {
            (0..n)
                .map(|i| (i % 17) as f32 * 0.25 - 2.0)
                .collect::<Vec<_>>()
        };
        let weight = Tensor::from_vec(values(outs * cols), (outs, cols), &Device::Cpu).unwrap();
        let bias = Tensor::from_vec(values(outs), outs, &Device::Cpu).unwrap();
        let x = Tensor::from_vec(values(rows * cols), (rows, cols), &Device::Cpu).unwrap();
        let expected = x
            .matmul(&weight.t().unwrap())
            .unwrap()
            .broadcast_add(&bias)
            .unwrap();
        let stored = Stored::Candle(QMatMul::Tensor(weight));
        let linear = Linear::new(stored, Some(bias), None).unwrap();
        let (sent, received) = mpsc::channel();
        std::thread::spawn(move || {
            let outputs = std::sync::Mutex::new(Vec::new());
            for_each_range(8, |range| {
                for _ in range {
                    let y = linear.forward(&x).and_then(|y| y.to_vec2::<f32>());
                    outputs.lock().unwrap().push(y);
                }
            });
            let _ = sent.send(outputs.into_inner().unwrap());
        });
        let outputs = received
            .recv_timeout(Duration::from_secs(300))
            .expect("a biased product inside the pool's loop never finished");
        assert_eq!(outputs.len(), 8);
        let expected = expected.to_vec2::<f32>().unwrap();
        for y in outputs {
            let y = y.unwrap();
            for (got, want) in y.iter().flatten().zip(expected.iter().flatten()) {
                assert!((got - want).abs() < 1e-4, "{got} vs {want}");
            }
        }
    }
}
