//! Random-weight GGUF models with the shapes of real ones, for benchmarks that must not
//! depend on a download (`samplab bench --synthetic smollm2-135m --qtype q8_0`).
//!
//! The file is self-contained: llama metadata, every tensor, and a minimal GPT-2-style
//! tokenizer (the 256 byte tokens, one merge, `<|endoftext|>`, filler control tokens).

use crate::model::error::ModelError;
use candle_core::quantized::{GgmlDType, QTensor, gguf_file};
use candle_core::{Device, Tensor};
use std::path::Path;

/// The shape of a llama-architecture model, or of a Qwen3 mixture of experts.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntheticSpec {
    pub name: &'static str,
    /// `llama`, `qwen3` (per-head q/k norms), `qwen3moe` (the same, experts in every layer),
    /// `qwen35` (see `delta_net`) or `gemma3`
    /// (per-head q/k norms, norms after attention and the feed-forward, a 512-position window
    /// on five layers of six).
    pub architecture: &'static str,
    /// (count, used per token, each one's feed-forward size) for `qwen3moe`.
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

/// The weights' types: one for every matrix, or llama.cpp's Q4_K_M mix.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Quantization {
    Uniform(GgmlDType),
    /// Q4_K, with Q6_K for the output matrix and every `ffn_down`.
    Q4KM,
}

impl From<GgmlDType> for Quantization {
    fn from(dtype: GgmlDType) -> Self {
        Quantization::Uniform(dtype)
    }
}

impl Quantization {
    /// The type of the matrix `name` whose rows hold `cols` values; `tied`: the embedding is
    /// the output matrix too, and is typed as one (as llama.cpp's quantizer does).
    fn for_matrix(self, name: &str, cols: usize, tied: bool) -> GgmlDType {
        let output = name == "output.weight" || (tied && name == "token_embd.weight");
        let wanted = match self {
            Quantization::Uniform(dtype) => dtype,
            Quantization::Q4KM if output || name.contains("ffn_down") => GgmlDType::Q6K,
            Quantization::Q4KM => GgmlDType::Q4K,
        };
        fitting(wanted, cols)
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
/// block fall back as llama.cpp's quantizer does (see [`fitting`]); norms stay f32.
pub fn write_synthetic_gguf(
    path: &Path,
    spec: &SyntheticSpec,
    qtype: impl Into<Quantization>,
    seed: u64,
) -> Result<(), ModelError> {
    let qtype = qtype.into();
    let head_dim = spec.head_dim.unwrap_or(spec.hidden_size / spec.num_heads);
    let (h, q, kv) = (
        spec.hidden_size,
        spec.num_heads * head_dim,
        spec.num_kv_heads * head_dim,
    );
    let mut noise = Noise(seed | 1);
    let mut tensors: Vec<(String, QTensor)> = Vec::new();
    // A matrix, or a stack of experts' matrices (`[count, rows, cols]`).
    let mut matrix = |name: String, dims: &[usize]| -> Result<(), ModelError> {
        let cols = *dims.last().expect("a matrix has columns");
        let scale = 1.0 / (cols as f32).sqrt();
        let len: usize = dims.iter().product();
        let values: Vec<f32> = (0..len).map(|_| scale * noise.uniform()).collect();
        let tensor = Tensor::from_vec(values, dims, &Device::Cpu)?;
        // The router stays f32, as llama.cpp's quantizer leaves it.
        let dtype = if name.ends_with("ffn_gate_inp.weight") {
            GgmlDType::F32
        } else {
            qtype.for_matrix(&name, cols, spec.tie_word_embeddings)
        };
        tensors.push((name, QTensor::quantize(&tensor, dtype)?));
        Ok(())
    };
    matrix("token_embd.weight".to_owned(), &[spec.vocab_size, h])?;
    if !spec.tie_word_embeddings {
        matrix("output.weight".to_owned(), &[spec.vocab_size, h])?;
    }
    // Gated DeltaNet layers' small f32 tensors: (name, values, dims).
    let mut small: Vec<(String, Vec<f32>, Vec<usize>)> = Vec::new();
    let mut conv_noise = Noise(seed.wrapping_add(2) | 1);
    for i in 0..spec.num_layers {
        match spec.delta_net.filter(|_| recurrent_layer(spec, i)) {
            Some((k_heads, v_heads, dim)) => {
                let (channels, inner) = (2 * k_heads * dim + v_heads * dim, v_heads * dim);
                matrix(format!("blk.{i}.attn_qkv.weight"), &[channels, h])?;
                matrix(format!("blk.{i}.attn_gate.weight"), &[inner, h])?;
                matrix(format!("blk.{i}.ssm_beta.weight"), &[v_heads, h])?;
                matrix(format!("blk.{i}.ssm_alpha.weight"), &[v_heads, h])?;
                matrix(format!("blk.{i}.ssm_out.weight"), &[h, inner])?;
                let conv = (0..channels * 4)
                    .map(|_| 0.5 * conv_noise.uniform())
                    .collect();
                small.push((
                    format!("blk.{i}.ssm_conv1d.weight"),
                    conv,
                    vec![channels, 4],
                ));
                small.push((format!("blk.{i}.ssm_a"), vec![-0.5; v_heads], vec![v_heads]));
                small.push((
                    format!("blk.{i}.ssm_dt.bias"),
                    vec![0.0; v_heads],
                    vec![v_heads],
                ));
                small.push((
                    format!("blk.{i}.ssm_norm.weight"),
                    vec![1.0; dim],
                    vec![dim],
                ));
            }
            None => {
                // A gated attention's q projection holds each head's gate too.
                let q_rows = if spec.delta_net.is_some() { 2 * q } else { q };
                matrix(format!("blk.{i}.attn_q.weight"), &[q_rows, h])?;
                matrix(format!("blk.{i}.attn_k.weight"), &[kv, h])?;
                matrix(format!("blk.{i}.attn_v.weight"), &[kv, h])?;
                matrix(format!("blk.{i}.attn_output.weight"), &[h, q])?;
            }
        }
        let ffn = spec.intermediate_size;
        match spec.experts {
            None => {
                matrix(format!("blk.{i}.ffn_gate.weight"), &[ffn, h])?;
                matrix(format!("blk.{i}.ffn_up.weight"), &[ffn, h])?;
                matrix(format!("blk.{i}.ffn_down.weight"), &[h, ffn])?;
            }
            Some((count, _, size)) => {
                matrix(format!("blk.{i}.ffn_gate_inp.weight"), &[count, h])?;
                matrix(format!("blk.{i}.ffn_gate_exps.weight"), &[count, size, h])?;
                matrix(format!("blk.{i}.ffn_up_exps.weight"), &[count, size, h])?;
                matrix(format!("blk.{i}.ffn_down_exps.weight"), &[count, h, size])?;
            }
        }
    }
    let ones = QTensor::quantize(
        &Tensor::ones(h, candle_core::DType::F32, &Device::Cpu)?,
        GgmlDType::F32,
    )?;
    let head_ones = QTensor::quantize(
        &Tensor::ones(head_dim, candle_core::DType::F32, &Device::Cpu)?,
        GgmlDType::F32,
    )?;
    let mut norms = vec!["output_norm.weight".to_owned()];
    let mut head_norms = Vec::new();
    for i in 0..spec.num_layers {
        norms.push(format!("blk.{i}.attn_norm.weight"));
        // Qwen3.5 names the feed-forward's norm after the attention it follows.
        norms.push(match spec.architecture {
            "qwen35" => format!("blk.{i}.post_attention_norm.weight"),
            _ => format!("blk.{i}.ffn_norm.weight"),
        });
        if recurrent_layer(spec, i) {
            continue;
        }
        if matches!(
            spec.architecture,
            "qwen3" | "qwen3moe" | "gemma3" | "qwen35"
        ) {
            head_norms.push(format!("blk.{i}.attn_q_norm.weight"));
            head_norms.push(format!("blk.{i}.attn_k_norm.weight"));
        }
        if spec.architecture == "gemma3" {
            norms.push(format!("blk.{i}.post_attention_norm.weight"));
            norms.push(format!("blk.{i}.post_ffw_norm.weight"));
        }
    }

    let metadata = metadata(spec, head_dim);
    let metadata: Vec<(&str, &gguf_file::Value)> =
        metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut all: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
    all.extend(norms.iter().map(|n| (n.as_str(), &ones)));
    all.extend(head_norms.iter().map(|n| (n.as_str(), &head_ones)));
    let small: Vec<(String, QTensor)> = small
        .into_iter()
        .map(|(name, values, dims)| {
            let tensor = Tensor::from_vec(values, dims, &Device::Cpu)?;
            Ok((name, QTensor::quantize(&tensor, GgmlDType::F32)?))
        })
        .collect::<Result<_, ModelError>>()?;
    all.extend(small.iter().map(|(n, t)| (n.as_str(), t)));
    let file = std::fs::File::create(path).map_err(|source| ModelError::Io {
        path: path.to_owned(),
        source,
    })?;
    let mut writer = std::io::BufWriter::new(file);
    gguf_file::write(&mut writer, &metadata, &all)?;
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
        let untied = |name, cols| mix.for_matrix(name, cols, false);
        assert_eq!(untied("blk.0.ffn_down.weight", 1536), GgmlDType::Q6K);
        assert_eq!(untied("blk.0.ffn_up.weight", 576), GgmlDType::Q5_0);
        assert_eq!(untied("blk.0.ffn_up.weight", 512), GgmlDType::Q4K);
        assert_eq!(untied("output.weight", 576), GgmlDType::Q8_0);
        assert_eq!(untied("output.weight", 768), GgmlDType::Q6K);
        assert_eq!(untied("token_embd.weight", 768), GgmlDType::Q4K);
        assert_eq!(
            mix.for_matrix("token_embd.weight", 768, true),
            GgmlDType::Q6K
        );
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
}
