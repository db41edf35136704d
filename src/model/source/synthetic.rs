//! Random-weight GGUF models with the shapes of real ones, for benchmarks that must not
//! depend on a download (`samplab bench --synthetic smollm2-135m --qtype q8_0`).
//!
//! The file is self-contained: llama metadata, every tensor, and a minimal GPT-2-style
//! tokenizer (the 256 byte tokens, one merge, `<|endoftext|>`, filler control tokens).

use crate::model::error::ModelError;
use crate::model::formats::gguf_write::{self, TensorEntry};
use crate::model::formats::mxfp4;
use crate::model::kernels::QuantType;
use candle_core::quantized::{GgmlDType, QTensor, gguf_file};
use candle_core::{Device, Tensor};
use std::io::Write;
use std::path::Path;

/// The shape of a real model of one of the families `architecture` names.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntheticSpec {
    pub name: &'static str,
    /// `llama`, `qwen3` (per-head q/k norms), `qwen3moe` (the same, experts in every layer),
    /// `qwen35` (see `delta_net`), `gemma3` (per-head q/k norms, norms after attention and the
    /// feed-forward, a 512-position window on five layers of six) or `gpt-oss` (experts, biases,
    /// attention sinks, a 128-position window on every other layer, YaRN).
    pub architecture: &'static str,
    /// (count, used per token, each one's feed-forward size) for `qwen3moe` and `gpt-oss`.
    pub experts: Option<(usize, usize, usize)>,
    /// (key heads, value heads, head size) of the Gated DeltaNet layers of `qwen35`: three
    /// of every four layers; the fourth is gated attention over a quarter of each head.
    pub delta_net: Option<(usize, usize, usize)>,
    pub hidden_size: usize,
    pub num_layers: usize,
    pub num_heads: usize,
    pub num_kv_heads: usize,
    /// Each head's size where it is not `hidden_size / num_heads` (Gemma 3).
    pub head_dim: Option<usize>,
    pub intermediate_size: usize,
    pub vocab_size: usize,
    pub context_length: usize,
    pub rope_theta: f32,
    pub tie_word_embeddings: bool,
}

/// SmolLM2-135M's shapes, with an untied output matrix (the worst case for bandwidth).
pub const SMOLLM2_135M: SyntheticSpec = SyntheticSpec {
    name: "smollm2-135m",
    architecture: "llama",
    experts: None,
    delta_net: None,
    hidden_size: 576,
    num_layers: 30,
    num_heads: 9,
    num_kv_heads: 3,
    head_dim: None,
    intermediate_size: 1536,
    vocab_size: 49152,
    context_length: 8192,
    rope_theta: 100_000.0,
    tie_word_embeddings: false,
};

/// SmolLM2-1.7B's shapes (full multi-head attention), untied as above: the size where a
/// GPU's bandwidth shows.
pub const SMOLLM2_1_7B: SyntheticSpec = SyntheticSpec {
    name: "smollm2-1.7b",
    architecture: "llama",
    experts: None,
    delta_net: None,
    hidden_size: 2048,
    num_layers: 24,
    num_heads: 32,
    num_kv_heads: 32,
    head_dim: None,
    intermediate_size: 8192,
    vocab_size: 49152,
    context_length: 8192,
    rope_theta: 130_000.0,
    tie_word_embeddings: false,
};

/// A Qwen3 mixture of experts of 1.7B parameters, 0.3B of them active: 64 experts of which
/// each token takes 8, in 16 layers of Qwen3's attention (16 heads sharing 4 kv heads).
pub const QWEN3MOE_A0_3B: SyntheticSpec = SyntheticSpec {
    name: "qwen3moe-a0.3b",
    architecture: "qwen3moe",
    experts: Some((64, 8, 512)),
    delta_net: None,
    hidden_size: 1024,
    num_layers: 16,
    num_heads: 16,
    num_kv_heads: 4,
    head_dim: None,
    intermediate_size: 3072,
    vocab_size: 151_936,
    context_length: 32768,
    rope_theta: 1_000_000.0,
    tie_word_embeddings: false,
};

/// Gemma 3 270M's shapes: four 256-wide query heads sharing one kv head, a 262,144-token
/// vocabulary (tied, as Gemma's is).
pub const GEMMA3_270M: SyntheticSpec = SyntheticSpec {
    name: "gemma3-270m",
    architecture: "gemma3",
    experts: None,
    delta_net: None,
    hidden_size: 640,
    num_layers: 18,
    num_heads: 4,
    num_kv_heads: 1,
    head_dim: Some(256),
    intermediate_size: 2048,
    vocab_size: 262_144,
    context_length: 32768,
    rope_theta: 1_000_000.0,
    tie_word_embeddings: true,
};

/// Qwen3-4B's shapes: 128-wide heads (32 query heads over a 2560-wide model, 8 kv heads),
/// per-head q/k norms, a tied 151,936-token vocabulary. 2.5 GB in Q4_K_M.
pub const QWEN3_4B: SyntheticSpec = SyntheticSpec {
    name: "qwen3-4b",
    architecture: "qwen3",
    experts: None,
    delta_net: None,
    hidden_size: 2560,
    num_layers: 36,
    num_heads: 32,
    num_kv_heads: 8,
    head_dim: Some(128),
    intermediate_size: 9728,
    vocab_size: 151_936,
    context_length: 40960,
    rope_theta: 1_000_000.0,
    tie_word_embeddings: true,
};

/// Llama 3 8B's shapes: 32 heads sharing 8 kv heads, a 128,256-token untied vocabulary.
/// 4.9 GB in Q4_K_M.
pub const LLAMA3_8B: SyntheticSpec = SyntheticSpec {
    name: "llama3-8b",
    architecture: "llama",
    experts: None,
    delta_net: None,
    hidden_size: 4096,
    num_layers: 32,
    num_heads: 32,
    num_kv_heads: 8,
    head_dim: None,
    intermediate_size: 14336,
    vocab_size: 128_256,
    context_length: 8192,
    rope_theta: 500_000.0,
    tie_word_embeddings: false,
};

/// Qwen3.5-0.8B's shapes: 24 layers, three of four Gated DeltaNet (16 key and 16 value heads
/// of 128), every fourth gated attention (8 heads of 256 sharing 2 kv heads, RoPE over 64 of
/// them), a tied 248,320-token vocabulary.
pub const QWEN35_0_8B: SyntheticSpec = SyntheticSpec {
    name: "qwen35-0.8b",
    architecture: "qwen35",
    experts: None,
    delta_net: Some((16, 16, 128)),
    hidden_size: 1024,
    num_layers: 24,
    num_heads: 8,
    num_kv_heads: 2,
    head_dim: Some(256),
    intermediate_size: 3584,
    vocab_size: 248_320,
    context_length: 262_144,
    rope_theta: 10_000_000.0,
    tie_word_embeddings: true,
};

/// Qwen3.5-4B's shapes: 32 layers, Gated DeltaNet with 16 key and 32 value heads of 128,
/// gated attention with 16 heads of 256 sharing 4 kv heads.
pub const QWEN35_4B: SyntheticSpec = SyntheticSpec {
    name: "qwen35-4b",
    architecture: "qwen35",
    experts: None,
    delta_net: Some((16, 32, 128)),
    hidden_size: 2560,
    num_layers: 32,
    num_heads: 16,
    num_kv_heads: 4,
    head_dim: Some(256),
    intermediate_size: 9216,
    vocab_size: 248_320,
    context_length: 262_144,
    rope_theta: 10_000_000.0,
    tie_word_embeddings: true,
};

/// gpt-oss-20b's layers (64 query heads of 64 sharing 8 kv heads over a 2880-wide model,
/// 2880-wide experts, biases, attention sinks, a 128-token window on every other layer, YaRN)
/// with 8 experts of which each token takes 4, where it has 32: 4.5 GB in `mxfp4_moe`.
pub const GPT_OSS_SMALL: SyntheticSpec = SyntheticSpec {
    name: "gpt-oss-small",
    architecture: "gpt-oss",
    experts: Some((8, 4, 2880)),
    delta_net: None,
    hidden_size: 2880,
    num_layers: 24,
    num_heads: 64,
    num_kv_heads: 8,
    head_dim: Some(64),
    intermediate_size: 2880,
    vocab_size: 201_088,
    context_length: 131_072,
    rope_theta: 150_000.0,
    tie_word_embeddings: false,
};

/// gpt-oss's window on its windowed layers, and its YaRN factor over the original context.
const GPT_OSS_WINDOW: usize = 128;
const GPT_OSS_YARN: (f32, usize) = (32.0, 4096);

/// The specs `--synthetic` accepts, by name.
pub const SYNTHETIC_SPECS: &[&SyntheticSpec] = &[
    &SMOLLM2_135M,
    &SMOLLM2_1_7B,
    &QWEN3_4B,
    &LLAMA3_8B,
    &QWEN3MOE_A0_3B,
    &GEMMA3_270M,
    &QWEN35_0_8B,
    &QWEN35_4B,
    &GPT_OSS_SMALL,
];

/// Every `FULL_ATTENTION_EVERY`-th layer of a synthetic `qwen35` attends; the rest recur.
const FULL_ATTENTION_EVERY: usize = 4;

fn recurrent_layer(spec: &SyntheticSpec, layer: usize) -> bool {
    spec.delta_net.is_some() && !(layer + 1).is_multiple_of(FULL_ATTENTION_EVERY)
}

pub fn synthetic_spec(name: &str) -> Result<&'static SyntheticSpec, ModelError> {
    SYNTHETIC_SPECS
        .iter()
        .copied()
        .find(|s| s.name == name)
        .ok_or_else(|| {
            let known: Vec<&str> = SYNTHETIC_SPECS.iter().map(|s| s.name).collect();
            ModelError::Usage(format!(
                "unknown synthetic model `{name}`; known: {}",
                known.join(", ")
            ))
        })
}

/// The weights' types: one for every matrix, or llama.cpp's Q4_K_M or MXFP4_MOE mix.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Quantization {
    Uniform(GgmlDType),
    /// Q4_K, with Q6_K for the output matrix and every `ffn_down`.
    Q4KM,
    /// The experts' stacks in MXFP4 and every other matrix, the output's and the embedding's
    /// too, in Q8_0 (gpt-oss's own files): only for a mixture of experts.
    Mxfp4Moe,
}

impl From<GgmlDType> for Quantization {
    fn from(dtype: GgmlDType) -> Self {
        Quantization::Uniform(dtype)
    }
}

impl Quantization {
    /// Whether `spec` can be written in this mix: `mxfp4_moe` needs experts.
    pub fn fits(self, spec: &SyntheticSpec) -> Result<(), ModelError> {
        if self != Quantization::Mxfp4Moe || spec.experts.is_some() {
            return Ok(());
        }
        let with_experts: Vec<&str> = SYNTHETIC_SPECS
            .iter()
            .filter(|s| s.experts.is_some())
            .map(|s| s.name)
            .collect();
        Err(ModelError::Usage(format!(
            "`mxfp4_moe` puts a mixture's experts in MXFP4, and `{}` has no experts; use it \
             with {}, or pick another --qtype",
            spec.name,
            with_experts.join(" or ")
        )))
    }

    /// The type of the matrix (or stack of experts' matrices) `name` of `dims`; `tied`: the
    /// embedding is the output matrix too, and is typed as one (as llama.cpp's quantizer does).
    fn for_matrix(self, name: &str, dims: &[usize], tied: bool) -> QuantType {
        let cols = *dims.last().expect("a matrix has columns");
        let output = name == "output.weight" || (tied && name == "token_embd.weight");
        let experts = dims.len() == 3;
        let wanted = match self {
            Quantization::Uniform(dtype) => dtype,
            Quantization::Q4KM if output || name.contains("ffn_down") => GgmlDType::Q6K,
            Quantization::Q4KM => GgmlDType::Q4K,
            Quantization::Mxfp4Moe if experts && cols.is_multiple_of(mxfp4::BLOCK) => {
                return QuantType::Mxfp4;
            }
            Quantization::Mxfp4Moe => GgmlDType::Q8_0,
        };
        QuantType::Ggml(fitting(wanted, cols))
    }
}

/// llama.cpp's quantizer's fallback for rows that are not a whole number of `dtype`'s
/// blocks (SmolLM2's 576 is not a multiple of 256): Q4_K becomes Q5_0, Q5_K Q5_1, and the
/// rest Q8_0, except Q2_K and Q3_K, which llama.cpp makes IQ4_NL and candle cannot write,
/// so Q4_0.
fn fitting(dtype: GgmlDType, cols: usize) -> GgmlDType {
    if cols.is_multiple_of(dtype.block_size()) {
        return dtype;
    }
    match dtype {
        GgmlDType::Q2K | GgmlDType::Q3K => GgmlDType::Q4_0,
        GgmlDType::Q4K => GgmlDType::Q5_0,
        GgmlDType::Q5K => GgmlDType::Q5_1,
        _ => GgmlDType::Q8_0,
    }
}

const QTYPES: &[(&str, Quantization)] = &[
    ("f32", Quantization::Uniform(GgmlDType::F32)),
    ("f16", Quantization::Uniform(GgmlDType::F16)),
    ("bf16", Quantization::Uniform(GgmlDType::BF16)),
    ("q4_0", Quantization::Uniform(GgmlDType::Q4_0)),
    ("q4_1", Quantization::Uniform(GgmlDType::Q4_1)),
    ("q5_0", Quantization::Uniform(GgmlDType::Q5_0)),
    ("q5_1", Quantization::Uniform(GgmlDType::Q5_1)),
    ("q8_0", Quantization::Uniform(GgmlDType::Q8_0)),
    ("q2_k", Quantization::Uniform(GgmlDType::Q2K)),
    ("q3_k", Quantization::Uniform(GgmlDType::Q3K)),
    ("q4_k", Quantization::Uniform(GgmlDType::Q4K)),
    ("q5_k", Quantization::Uniform(GgmlDType::Q5K)),
    ("q6_k", Quantization::Uniform(GgmlDType::Q6K)),
    ("q4_k_m", Quantization::Q4KM),
    ("mxfp4_moe", Quantization::Mxfp4Moe),
];

/// Weight types from their llama.cpp name (`q8_0`, `Q4_K`, `q4_k_m`…).
pub fn qtype_from_name(name: &str) -> Result<Quantization, ModelError> {
    let lower = name.to_ascii_lowercase();
    QTYPES
        .iter()
        .find(|(n, _)| *n == lower)
        .map(|(_, t)| *t)
        .ok_or_else(|| {
            let known: Vec<&str> = QTYPES.iter().map(|(n, _)| *n).collect();
            ModelError::Usage(format!(
                "unknown quantization `{name}`; known: {}",
                known.join(", ")
            ))
        })
}

/// Writes `spec` with uniform random weights (scaled by 1/sqrt(fan-in), so activations stay
/// in a realistic range) quantized to `qtype`. Matrices whose rows do not fit a type's
/// block fall back as llama.cpp's quantizer does (see [`fitting`]); norms, biases and
/// attention sinks stay f32 (norms 1, biases and sinks 0). The file is written atomically,
/// one tensor in memory at a time.
pub fn write_synthetic_gguf(
    path: &Path,
    spec: &SyntheticSpec,
    qtype: impl Into<Quantization>,
    seed: u64,
) -> Result<(), ModelError> {
    let qtype = qtype.into();
    qtype.fits(spec)?;
    let head_dim = spec.head_dim.unwrap_or(spec.hidden_size / spec.num_heads);
    let (tensors, fills) = plan(spec, qtype, head_dim, seed);
    let metadata = metadata(spec, head_dim);
    let mut noise = Noise(seed | 1);
    crate::atomic_file::write(path, true, |file| {
        let mut out = std::io::BufWriter::new(file);
        gguf_write::write(&mut out, &metadata, &tensors, |i, out| {
            write_values(&tensors[i], &fills[i], &mut noise, out)
        })
    })
    .map_err(|source| ModelError::Write {
        path: path.to_owned(),
        source,
    })
}

/// How a tensor's values are made.
enum Fill {
    /// Uniform in ±1/sqrt(row length), drawn in file order from the writer's one stream.
    Random,
    Constant(f32),
    Values(Vec<f32>),
}

/// Every tensor of `spec`, in file order, with its type and values.
fn plan(
    spec: &SyntheticSpec,
    qtype: Quantization,
    head_dim: usize,
    seed: u64,
) -> (Vec<TensorEntry>, Vec<Fill>) {
    let (h, q, kv) = (
        spec.hidden_size,
        spec.num_heads * head_dim,
        spec.num_kv_heads * head_dim,
    );
    let mut tensors = Vec::new();
    let mut fills = Vec::new();
    let mut tensor = |name: String, dims: &[usize], dtype: QuantType, fill: Fill| {
        tensors.push(TensorEntry {
            name,
            dims: dims.to_vec(),
            dtype,
        });
        fills.push(fill);
    };
    // A matrix, or a stack of experts' matrices (`[count, rows, cols]`).
    let mut matrix = |name: String, dims: &[usize]| {
        // The router stays f32, as llama.cpp's quantizer leaves it.
        let dtype = if name.ends_with("ffn_gate_inp.weight") {
            QuantType::Ggml(GgmlDType::F32)
        } else {
            qtype.for_matrix(&name, dims, spec.tie_word_embeddings)
        };
        tensor(name, dims, dtype, Fill::Random);
    };
    // Norms, biases, sinks and the Gated DeltaNet's small tensors, after the matrices.
    let mut small: Vec<(String, Vec<usize>, Fill)> = vec![(
        "output_norm.weight".to_owned(),
        vec![h],
        Fill::Constant(1.0),
    )];
    let mut vector =
        |name: String, dims: &[usize], fill: Fill| small.push((name, dims.to_vec(), fill));
    let biases = spec.architecture == "gpt-oss";
    matrix("token_embd.weight".to_owned(), &[spec.vocab_size, h]);
    if !spec.tie_word_embeddings {
        matrix("output.weight".to_owned(), &[spec.vocab_size, h]);
    }
    let mut conv_noise = Noise(seed.wrapping_add(2) | 1);
    for i in 0..spec.num_layers {
        vector(
            format!("blk.{i}.attn_norm.weight"),
            &[h],
            Fill::Constant(1.0),
        );
        // Qwen3.5 and gpt-oss name the feed-forward's norm after the attention it follows.
        let ffn_norm = match spec.architecture {
            "qwen35" | "gpt-oss" => "post_attention_norm",
            _ => "ffn_norm",
        };
        vector(
            format!("blk.{i}.{ffn_norm}.weight"),
            &[h],
            Fill::Constant(1.0),
        );
        match spec.delta_net.filter(|_| recurrent_layer(spec, i)) {
            Some((k_heads, v_heads, dim)) => {
                let (channels, inner) = (2 * k_heads * dim + v_heads * dim, v_heads * dim);
                matrix(format!("blk.{i}.attn_qkv.weight"), &[channels, h]);
                matrix(format!("blk.{i}.attn_gate.weight"), &[inner, h]);
                matrix(format!("blk.{i}.ssm_beta.weight"), &[v_heads, h]);
                matrix(format!("blk.{i}.ssm_alpha.weight"), &[v_heads, h]);
                matrix(format!("blk.{i}.ssm_out.weight"), &[h, inner]);
                let conv = (0..channels * 4)
                    .map(|_| 0.5 * conv_noise.uniform())
                    .collect();
                vector(
                    format!("blk.{i}.ssm_conv1d.weight"),
                    &[channels, 4],
                    Fill::Values(conv),
                );
                vector(format!("blk.{i}.ssm_a"), &[v_heads], Fill::Constant(-0.5));
                vector(
                    format!("blk.{i}.ssm_dt.bias"),
                    &[v_heads],
                    Fill::Constant(0.0),
                );
                vector(
                    format!("blk.{i}.ssm_norm.weight"),
                    &[dim],
                    Fill::Constant(1.0),
                );
            }
            None => {
                // A gated attention's q projection holds each head's gate too.
                let q_rows = if spec.delta_net.is_some() { 2 * q } else { q };
                matrix(format!("blk.{i}.attn_q.weight"), &[q_rows, h]);
                matrix(format!("blk.{i}.attn_k.weight"), &[kv, h]);
                matrix(format!("blk.{i}.attn_v.weight"), &[kv, h]);
                matrix(format!("blk.{i}.attn_output.weight"), &[h, q]);
                if matches!(
                    spec.architecture,
                    "qwen3" | "qwen3moe" | "gemma3" | "qwen35"
                ) {
                    vector(
                        format!("blk.{i}.attn_q_norm.weight"),
                        &[head_dim],
                        Fill::Constant(1.0),
                    );
                    vector(
                        format!("blk.{i}.attn_k_norm.weight"),
                        &[head_dim],
                        Fill::Constant(1.0),
                    );
                }
                if spec.architecture == "gemma3" {
                    vector(
                        format!("blk.{i}.post_attention_norm.weight"),
                        &[h],
                        Fill::Constant(1.0),
                    );
                    vector(
                        format!("blk.{i}.post_ffw_norm.weight"),
                        &[h],
                        Fill::Constant(1.0),
                    );
                }
                if biases {
                    for (part, len) in [("q", q), ("k", kv), ("v", kv), ("output", h)] {
                        vector(
                            format!("blk.{i}.attn_{part}.bias"),
                            &[len],
                            Fill::Constant(0.0),
                        );
                    }
                    vector(
                        format!("blk.{i}.attn_sinks.weight"),
                        &[spec.num_heads],
                        Fill::Constant(0.0),
                    );
                }
            }
        }
        let ffn = spec.intermediate_size;
        match spec.experts {
            None => {
                matrix(format!("blk.{i}.ffn_gate.weight"), &[ffn, h]);
                matrix(format!("blk.{i}.ffn_up.weight"), &[ffn, h]);
                matrix(format!("blk.{i}.ffn_down.weight"), &[h, ffn]);
            }
            Some((count, _, size)) => {
                matrix(format!("blk.{i}.ffn_gate_inp.weight"), &[count, h]);
                matrix(format!("blk.{i}.ffn_gate_exps.weight"), &[count, size, h]);
                matrix(format!("blk.{i}.ffn_up_exps.weight"), &[count, size, h]);
                matrix(format!("blk.{i}.ffn_down_exps.weight"), &[count, h, size]);
                if biases {
                    for (part, dims) in [
                        ("gate_inp", vec![count]),
                        ("gate_exps", vec![count, size]),
                        ("up_exps", vec![count, size]),
                        ("down_exps", vec![count, h]),
                    ] {
                        vector(
                            format!("blk.{i}.ffn_{part}.bias"),
                            &dims,
                            Fill::Constant(0.0),
                        );
                    }
                }
            }
        }
    }
    for (name, dims, fill) in small {
        tensor(name, &dims, QuantType::Ggml(GgmlDType::F32), fill);
    }
    (tensors, fills)
}

/// A tensor's values are made and quantized at most this many at a time (in whole rows), so
/// that a 600M-value embedding never sits in memory whole.
const CHUNK_VALUES: usize = 1 << 24;

/// `tensor`'s values, made by `fill` and quantized to its type, into `out`. Quantizing whole
/// rows at a time gives the bytes quantizing the whole tensor would.
fn write_values(
    tensor: &TensorEntry,
    fill: &Fill,
    noise: &mut Noise,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let cols = *tensor.dims.last().expect("every tensor has a dimension");
    let len: usize = tensor.dims.iter().product();
    let scale = 1.0 / (cols as f32).sqrt();
    let chunk = (CHUNK_VALUES / cols).max(1) * cols;
    for start in (0..len).step_by(chunk) {
        let n = chunk.min(len - start);
        let values: Vec<f32> = match fill {
            Fill::Random => (0..n).map(|_| scale * noise.uniform()).collect(),
            Fill::Constant(value) => vec![*value; n],
            Fill::Values(values) => values[start..start + n].to_vec(),
        };
        match tensor.dtype {
            QuantType::Mxfp4 => {
                let mut blocks = Vec::with_capacity(n / mxfp4::BLOCK * mxfp4::BLOCK_BYTES);
                mxfp4::quantize(&values, &mut blocks);
                out.write_all(&blocks)?;
            }
            QuantType::Ggml(dtype) => {
                let quantized = Tensor::from_vec(values, n, &Device::Cpu)
                    .and_then(|values| QTensor::quantize(&values, dtype))
                    .and_then(|quantized| Ok(quantized.data()?.into_owned()))
                    .map_err(std::io::Error::other)?;
                out.write_all(&quantized)?;
            }
        }
    }
    Ok(())
}

fn metadata(spec: &SyntheticSpec, head_dim: usize) -> Vec<(String, gguf_file::Value)> {
    use gguf_file::Value::{Array, F32, String as Str, U32};
    let u32 = |n: usize| U32(n as u32);
    let (tokens, merges) = tokenizer_vocab(spec.vocab_size);
    let eos = tokens
        .iter()
        .position(|t| t == END_OF_TEXT)
        .expect("the vocabulary holds <|endoftext|>");
    let token_types: Vec<gguf_file::Value> = (0..tokens.len())
        .map(|i| gguf_file::Value::I32(if i < 257 { 1 } else { 3 }))
        .collect();
    let arch = spec.architecture;
    let mut entries = vec![
        ("general.architecture".to_owned(), Str(arch.to_owned())),
        (
            "general.name".to_owned(),
            Str(format!("synthetic {}", spec.name)),
        ),
    ];
    let per_arch = [
        ("context_length", u32(spec.context_length)),
        ("embedding_length", u32(spec.hidden_size)),
        ("block_count", u32(spec.num_layers)),
        ("feed_forward_length", u32(spec.intermediate_size)),
        ("attention.head_count", u32(spec.num_heads)),
        ("attention.head_count_kv", u32(spec.num_kv_heads)),
        ("attention.layer_norm_rms_epsilon", F32(1e-5)),
        ("rope.freq_base", F32(spec.rope_theta)),
        ("rope.dimension_count", u32(rope_dims(spec, head_dim))),
        ("vocab_size", u32(spec.vocab_size)),
    ];
    entries.extend(
        per_arch
            .into_iter()
            .map(|(k, v)| (format!("{arch}.{k}"), v)),
    );
    if let Some(dim) = spec.head_dim {
        entries.push((format!("{arch}.attention.key_length"), u32(dim)));
        entries.push((format!("{arch}.attention.value_length"), u32(dim)));
    }
    if arch == "gemma3" {
        entries.push((format!("{arch}.attention.sliding_window"), u32(512)));
    }
    if arch == "gpt-oss" {
        // llama.cpp windows every other layer, from the first, as gpt-oss's files leave it to.
        let gpt_oss = [
            ("attention.sliding_window", u32(GPT_OSS_WINDOW)),
            ("rope.scaling.type", Str("yarn".to_owned())),
            ("rope.scaling.factor", F32(GPT_OSS_YARN.0)),
            ("rope.scaling.original_context_length", u32(GPT_OSS_YARN.1)),
        ];
        entries.extend(gpt_oss.into_iter().map(|(k, v)| (format!("{arch}.{k}"), v)));
    }
    if let Some((k_heads, v_heads, dim)) = spec.delta_net {
        // llama.cpp's names: the state size is the head size, the group count the key heads,
        // the time-step rank the value heads. Text rotates every section alike.
        let pairs = rope_dims(spec, head_dim) / 2;
        let third = pairs.div_ceil(3);
        let sections =
            [third, third, pairs - 2 * third, 0].map(|n| gguf_file::Value::I32(n as i32));
        let ssm = [
            ("ssm.conv_kernel", u32(4)),
            ("ssm.state_size", u32(dim)),
            ("ssm.group_count", u32(k_heads)),
            ("ssm.time_step_rank", u32(v_heads)),
            ("ssm.inner_size", u32(v_heads * dim)),
            ("full_attention_interval", u32(FULL_ATTENTION_EVERY)),
            ("rope.dimension_sections", Array(sections.to_vec())),
        ];
        entries.extend(ssm.into_iter().map(|(k, v)| (format!("{arch}.{k}"), v)));
    }
    if let Some((count, used, size)) = spec.experts {
        entries.push((format!("{arch}.expert_count"), u32(count)));
        entries.push((format!("{arch}.expert_used_count"), u32(used)));
        entries.push((format!("{arch}.expert_feed_forward_length"), u32(size)));
    }
    let tokenizer = [
        ("tokenizer.ggml.model", Str("gpt2".to_owned())),
        ("tokenizer.ggml.pre", Str("default".to_owned())),
        (
            "tokenizer.ggml.tokens",
            Array(tokens.into_iter().map(Str).collect()),
        ),
        ("tokenizer.ggml.token_type", Array(token_types)),
        (
            "tokenizer.ggml.merges",
            Array(merges.into_iter().map(Str).collect()),
        ),
        ("tokenizer.ggml.bos_token_id", u32(eos)),
        ("tokenizer.ggml.eos_token_id", u32(eos)),
    ];
    entries.extend(tokenizer.into_iter().map(|(k, v)| (k.to_owned(), v)));
    entries
}

/// Dimensions of each head RoPE rotates: a quarter for Qwen3.5, all elsewhere.
fn rope_dims(spec: &SyntheticSpec, head_dim: usize) -> usize {
    match spec.delta_net {
        Some(_) => head_dim / 4,
        None => head_dim,
    }
}

const END_OF_TEXT: &str = "<|endoftext|>";

/// The 256 byte tokens in GPT-2's printable byte encoding, the merge "Ġ t", the end of
/// text, then control tokens up to `vocab_size`.
fn tokenizer_vocab(vocab_size: usize) -> (Vec<String>, Vec<String>) {
    let mut tokens: Vec<String> = (0..=255u8).map(|b| gpt2_byte_char(b).to_string()).collect();
    let space = gpt2_byte_char(b' ');
    tokens.push(format!("{space}t"));
    tokens.push(END_OF_TEXT.to_owned());
    let extra = vocab_size.saturating_sub(tokens.len());
    tokens.extend((0..extra).map(|i| format!("<|extra_{i}|>")));
    (tokens, vec![format!("{space} t")])
}

/// GPT-2's byte-to-character map: printable Latin-1 bytes stand for themselves, the others
/// are shifted to U+0100 and up, in byte order.
fn gpt2_byte_char(byte: u8) -> char {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    if printable(byte) {
        return char::from(byte);
    }
    let shifted = (0..byte).filter(|&b| !printable(b)).count() as u32;
    char::from_u32(256 + shifted).expect("U+0100..U+0143 are characters")
}

/// xorshift64: uniform values in [-1, 1), fast enough for 10^8 weights; tests use it to
/// write their own random checkpoints.
pub struct Noise(pub u64);

impl Noise {
    pub fn uniform(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_map_is_gpt2s() {
        assert_eq!(gpt2_byte_char(b'A'), 'A');
        assert_eq!(gpt2_byte_char(b' '), 'Ġ');
        assert_eq!(gpt2_byte_char(b'\n'), 'Ċ');
        assert_eq!(gpt2_byte_char(0xAD), '\u{143}');
        let distinct: std::collections::HashSet<char> = (0..=255u8).map(gpt2_byte_char).collect();
        assert_eq!(distinct.len(), 256);
    }

    #[test]
    fn qtype_names() {
        assert_eq!(qtype_from_name("Q8_0").unwrap(), GgmlDType::Q8_0.into());
        assert_eq!(qtype_from_name("q4_k").unwrap(), GgmlDType::Q4K.into());
        assert_eq!(qtype_from_name("Q4_K_M").unwrap(), Quantization::Q4KM);
        assert!(qtype_from_name("q9").is_err());
    }

    /// llama.cpp's Q4_K_M on SmolLM2's shapes: 576-wide rows fall back from Q4_K to Q5_0
    /// and from Q6_K to Q8_0; the 1536-wide `ffn_down` rows take Q6_K; a tied embedding is
    /// typed as the output matrix.
    #[test]
    fn q4_k_m_mixes_types_as_llama_cpp_does() {
        let mix = Quantization::Q4KM;
        let untied = |name, cols| mix.for_matrix(name, &[64, cols], false);
        let ggml = QuantType::Ggml;
        assert_eq!(untied("blk.0.ffn_down.weight", 1536), ggml(GgmlDType::Q6K));
        assert_eq!(untied("blk.0.ffn_up.weight", 576), ggml(GgmlDType::Q5_0));
        assert_eq!(untied("blk.0.ffn_up.weight", 512), ggml(GgmlDType::Q4K));
        assert_eq!(untied("output.weight", 576), ggml(GgmlDType::Q8_0));
        assert_eq!(untied("output.weight", 768), ggml(GgmlDType::Q6K));
        assert_eq!(untied("token_embd.weight", 768), ggml(GgmlDType::Q4K));
        assert_eq!(
            mix.for_matrix("token_embd.weight", &[64, 768], true),
            ggml(GgmlDType::Q6K)
        );
    }

    /// llama.cpp's MXFP4_MOE: stacks of experts in MXFP4, every other matrix in Q8_0, the
    /// output and embedding too.
    #[test]
    fn mxfp4_moe_puts_experts_in_mxfp4_and_the_rest_in_q8_0() {
        let mix = qtype_from_name("MXFP4_MOE").unwrap();
        assert_eq!(mix, Quantization::Mxfp4Moe);
        let experts = mix.for_matrix("blk.0.ffn_down_exps.weight", &[8, 2880, 2880], false);
        assert_eq!(experts, QuantType::Mxfp4);
        for name in ["blk.0.attn_q.weight", "output.weight", "token_embd.weight"] {
            let dtype = mix.for_matrix(name, &[4096, 2880], false);
            assert_eq!(dtype, QuantType::Ggml(GgmlDType::Q8_0), "{name}");
        }
    }

    const TINY: SyntheticSpec = SyntheticSpec {
        name: "tiny",
        architecture: "llama",
        experts: None,
        delta_net: None,
        hidden_size: 64,
        num_layers: 2,
        num_heads: 4,
        num_kv_heads: 2,
        head_dim: None,
        intermediate_size: 96,
        vocab_size: 300,
        context_length: 128,
        rope_theta: 10_000.0,
        tie_word_embeddings: true,
    };

    #[test]
    fn a_small_synthetic_model_loads_and_runs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tiny.gguf");
        write_synthetic_gguf(&path, &TINY, GgmlDType::Q4_0, 7).unwrap();
        let model = crate::model::Model::load(&path, &Device::Cpu).unwrap();
        assert_eq!(model.config().vocab_size, 300);
        assert!(model.config().tie_word_embeddings);
        let logits = model.session().prefill(&[1, 2, 3], false).unwrap();
        assert_eq!(logits[0].len(), 300);
        assert!(logits[0].iter().all(|l| l.is_finite()));
    }

    /// A mixture of experts writes as llama.cpp lays one out (stacked expert tensors, an f32
    /// router, per-head norms) and loads as Qwen3 MoE; its bytes per token count the chosen
    /// experts only.
    #[test]
    fn a_small_synthetic_mixture_of_experts_loads_and_runs() {
        let moe = SyntheticSpec {
            name: "tiny-moe",
            architecture: "qwen3moe",
            experts: Some((8, 2, 64)),
            ..TINY
        };
        let dir = tempfile::tempdir().unwrap();
        let (dense_path, moe_path) = (dir.path().join("dense.gguf"), dir.path().join("moe.gguf"));
        write_synthetic_gguf(&dense_path, &TINY, GgmlDType::Q8_0, 7).unwrap();
        write_synthetic_gguf(&moe_path, &moe, GgmlDType::Q8_0, 7).unwrap();
        let model = crate::model::Model::load(&moe_path, &Device::Cpu).unwrap();
        let experts = model.config().experts.expect("experts");
        assert_eq!(
            (experts.count, experts.used, experts.intermediate_size),
            (8, 2, 64)
        );
        let logits = model.session().prefill(&[1, 2, 3], false).unwrap();
        assert!(logits[0].iter().all(|l| l.is_finite()));
        // Two of eight 64-wide experts read per token, against one 96-wide feed-forward.
        let dense = crate::model::Model::load(&dense_path, &Device::Cpu).unwrap();
        let per_layer = |m: &crate::model::Model| m.weight_bytes_per_step() as f64;
        assert!(
            per_layer(&model) > per_layer(&dense),
            "the router and 2 x 64 > 96"
        );
        let all_experts = 2.0 * 3.0 * 8.0 * 64.0 * 64.0 * 34.0 / 32.0;
        assert!(per_layer(&model) < per_layer(&dense) + all_experts / 2.0);
    }

    /// A Gemma 3 shape loads as Gemma 3: heads wider than hidden / heads, a window on five
    /// layers of six.
    #[test]
    fn a_small_synthetic_gemma3_loads_and_runs() {
        let gemma = SyntheticSpec {
            name: "tiny-gemma3",
            architecture: "gemma3",
            head_dim: Some(32),
            num_layers: 7,
            ..TINY
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gemma.gguf");
        write_synthetic_gguf(&path, &gemma, GgmlDType::Q8_0, 7).unwrap();
        let model = crate::model::Model::load(&path, &Device::Cpu).unwrap();
        let config = model.config();
        assert_eq!(config.architecture, crate::model::Architecture::Gemma3);
        assert_eq!(config.head_dim, 32);
        let windows: Vec<Option<usize>> = config.layers.iter().map(|l| l.window).collect();
        assert_eq!(
            windows,
            [
                Some(512),
                Some(512),
                Some(512),
                Some(512),
                Some(512),
                None,
                Some(512)
            ]
        );
        let logits = model.session().prefill(&[1, 2, 3], false).unwrap();
        assert!(logits[0].iter().all(|l| l.is_finite()));
    }

    /// A dense Qwen3 shape (heads wider than hidden / heads, per-head norms, a tied Q4_K_M
    /// embedding of Q6_K) loads as Qwen3.
    #[test]
    fn a_small_synthetic_qwen3_loads_and_runs() {
        let qwen3 = SyntheticSpec {
            name: "tiny-qwen3",
            architecture: "qwen3",
            head_dim: Some(32),
            hidden_size: 256,
            intermediate_size: 256,
            ..TINY
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("qwen3.gguf");
        write_synthetic_gguf(&path, &qwen3, Quantization::Q4KM, 7).unwrap();
        let content = gguf_file::Content::read(&mut std::fs::File::open(&path).unwrap()).unwrap();
        let embedding = &content.tensor_infos["token_embd.weight"];
        assert_eq!(embedding.ggml_dtype, GgmlDType::Q6K);
        assert!(!content.tensor_infos.contains_key("output.weight"));
        let model = crate::model::Model::load(&path, &Device::Cpu).unwrap();
        let config = model.config();
        assert_eq!(config.architecture, crate::model::Architecture::Qwen3);
        assert_eq!(config.head_dim, 32);
        let logits = model.session().prefill(&[1, 2, 3], false).unwrap();
        assert!(logits[0].iter().all(|l| l.is_finite()));
    }

    /// A synthetic Qwen3.5 writes three Gated DeltaNet layers of every four, and loads so.
    #[test]
    fn a_small_synthetic_qwen35_loads_and_runs() {
        let qwen35 = SyntheticSpec {
            name: "tiny-qwen35",
            architecture: "qwen35",
            delta_net: Some((2, 4, 32)),
            head_dim: Some(64),
            hidden_size: 256,
            intermediate_size: 256,
            num_layers: 4,
            ..TINY
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("qwen35.gguf");
        write_synthetic_gguf(&path, &qwen35, Quantization::Q4KM, 7).unwrap();
        let model = crate::model::Model::load(&path, &Device::Cpu).unwrap();
        let config = model.config();
        assert_eq!(config.architecture, crate::model::Architecture::Qwen35);
        let recurrent: Vec<bool> = config.layers.iter().map(|l| l.recurrent).collect();
        assert_eq!(recurrent, [true, true, true, false]);
        assert_eq!(config.rope_dims, 16);
        let logits = model.session().prefill(&[1, 2, 3], false).unwrap();
        assert!(logits[0].iter().all(|l| l.is_finite()));
    }

    /// Our q8_0 kernel quantizes activations to 8 bits where candle's does too, but their
    /// roundings differ (candle converts scales per block, sums in another order), so logits
    /// agree closely rather than exactly.
    #[test]
    fn q8_0_logits_match_candles_product() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tiny.gguf");
        write_synthetic_gguf(&path, &TINY, GgmlDType::Q8_0, 11).unwrap();
        let ours = crate::model::Model::load(&path, &Device::Cpu).unwrap();
        let candles = crate::model::Model::load_with_candle_kernels(&path, &Device::Cpu).unwrap();
        let prompt: Vec<u32> = (0..40).map(|i| (i * 37 % 300) as u32).collect();
        let a = ours.session().prefill(&prompt, true).unwrap();
        let b = candles.session().prefill(&prompt, true).unwrap();
        assert_eq!(a.len(), prompt.len());
        let argmax = |row: &[f32]| {
            (0..row.len())
                .max_by(|&i, &j| row[i].total_cmp(&row[j]))
                .unwrap()
        };
        let same = a
            .iter()
            .zip(&b)
            .filter(|(a, b)| argmax(a) == argmax(b))
            .count();
        assert!(
            same >= prompt.len() * 9 / 10,
            "argmax agrees on {same} of {}",
            prompt.len()
        );
        for (a, b) in a.iter().zip(&b) {
            let spread = b.iter().fold(0f32, |m, v| m.max(v.abs()));
            for (x, y) in a.iter().zip(b) {
                assert!(
                    (x - y).abs() <= 0.02 * spread,
                    "{x} vs {y} (largest {spread})"
                );
            }
        }
    }

    const TINY_GPT_OSS: SyntheticSpec = SyntheticSpec {
        name: "tiny-gpt-oss",
        architecture: "gpt-oss",
        experts: Some((4, 2, 64)),
        head_dim: Some(16),
        num_layers: 3,
        tie_word_embeddings: false,
        ..TINY
    };

    /// A gpt-oss shape in MXFP4_MOE loads as gpt-oss: MXFP4 experts in our kernel, Q8_0
    /// attention with biases and sinks, the window on the first and third layers, YaRN.
    #[test]
    fn a_small_synthetic_gpt_oss_in_mxfp4_moe_loads_and_runs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gpt-oss.gguf");
        write_synthetic_gguf(&path, &TINY_GPT_OSS, Quantization::Mxfp4Moe, 7).unwrap();
        let (tables, _, _) = crate::model::formats::tensors::open_gguf(&path).unwrap();
        let expert_stacks = ["gate", "up", "down"].map(|m| format!("blk.2.ffn_{m}_exps.weight"));
        for name in &expert_stacks {
            assert!(tables.mxfp4.get(name).is_some(), "{name} is MXFP4");
        }
        let infos = &tables.content.tensor_infos;
        assert_eq!(infos["blk.0.attn_q.weight"].ggml_dtype, GgmlDType::Q8_0);
        assert_eq!(infos["output.weight"].ggml_dtype, GgmlDType::Q8_0);
        assert_eq!(
            infos["blk.1.ffn_gate_inp.weight"].ggml_dtype,
            GgmlDType::F32
        );
        assert_eq!(infos["blk.1.attn_sinks.weight"].shape.dims(), [4]);
        assert_eq!(infos["blk.1.ffn_up_exps.bias"].shape.dims(), [4, 64]);
        assert_eq!(tables.mxfp4.values(), 3 * 3 * 4 * 64 * 64);

        let model = crate::model::Model::load(&path, &Device::Cpu).unwrap();
        let config = model.config();
        assert_eq!(config.architecture, crate::model::Architecture::GptOss);
        assert_eq!(config.head_dim, 16);
        let windows: Vec<Option<usize>> = config.layers.iter().map(|l| l.window).collect();
        assert_eq!(windows, [Some(128), None, Some(128)]);
        assert!(matches!(
            config.rope_scaling,
            Some(crate::model::formats::config::RopeScaling::Yarn {
                factor: 32.0,
                original_context: 4096,
                ..
            })
        ));
        assert!(
            model.kernels().iter().any(|(dtype, _)| dtype == "mxfp4"),
            "{:?}",
            model.kernels()
        );
        let logits = model.session().prefill(&[1, 2, 3], false).unwrap();
        assert_eq!(logits[0].len(), 300);
        assert!(logits[0].iter().all(|l| l.is_finite()));
    }

    /// MXFP4_MOE on a model without experts is refused before any file is made, naming the
    /// shapes it fits.
    #[test]
    fn mxfp4_moe_without_experts_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dense.gguf");
        let error = write_synthetic_gguf(&path, &TINY, Quantization::Mxfp4Moe, 7).unwrap_err();
        let message = error.to_string();
        assert!(message.contains("`tiny` has no experts"), "{message}");
        assert!(message.contains("gpt-oss-small"), "{message}");
        assert!(!path.exists());
    }
}
