//! Tiny random-weight GGUF files of two architectures that samplab's engine does not run and
//! llama.cpp does, for the llama.cpp backend's tests:
//!
//! - Gemma 2 ([`write_gemma2`]): heads wider than `hidden / heads`, a sliding window on every
//!   other layer (llama.cpp's default pattern for `gemma2`: layer 0 windowed, layer 1 not),
//!   norms after the attention and after the feed-forward, soft-capped attention scores and
//!   logits, the embedding tied to the output.
//! - LFM2 ([`write_lfm2`]): a hybrid, short-convolution layers (a recurrent state) around one
//!   attention layer with per-head q/k norms; llama.cpp tells them apart by
//!   `lfm2.attention.head_count_kv`, an array that is 0 on the convolution layers.
//!
//! Every tensor is F32 and every value comes from a fixed seed, and metadata and tensors are
//! written in a fixed order, so each call writes the same bytes. The vocabulary is the
//! synthetic models' GPT-2-style one ([`crate::common::TINY_LLAMA`]'s: the 256 byte tokens, one
//! merge, `<|endoftext|>` as BOS and EOS, control tokens up to 320), which both llama.cpp and
//! samplab's GGUF tokenizer read; the embedding has exactly one row per token.
//!
//! Shapes are given as llama.cpp's loader asks for them (`create_tensor(name, {ne0, ne1})`,
//! innermost first, as GGUF stores them) and reversed into candle's order when written.
//! llama.cpp refuses a file with a tensor it does not create ("wrong number of tensors"), so
//! each file holds exactly the tensors its architecture requires, no optional ones.

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use samplab::model::source::synthetic::{Noise, write_synthetic_gguf};
use std::io::Write;
use std::path::Path;

const HIDDEN: usize = 64;
const FFN: usize = 64;
/// Positions the models were "trained" on: llama.cpp's context is capped there, and the
/// backend's sequences share it, so it is roomy (keys and values are tiny at this width).
const CONTEXT: u32 = 4096;
const RMS_EPS: f32 = 1e-6;

/// Gemma 2's window: shorter than the tests' prompts, so that the windowed layer's mask cuts.
pub const GEMMA2_WINDOW: u32 = 16;

/// Writes a 2-layer Gemma 2 (hidden 64, 4 heads of 32 over 2 key/value heads, feed-forward 64,
/// vocabulary 320) at `path`.
///
/// llama.cpp (`src/models/gemma2.cpp`, `load_arch_hparams` / `load_arch_tensors`): the RMS
/// epsilon is required; the window, the soft-caps and the window pattern are optional
/// (defaults 4096, 50, 30, every other layer); the output matrix is the embedding, always.
pub fn write_gemma2(path: &Path) {
    const LAYERS: usize = 2;
    const HEADS: usize = 4;
    const KV_HEADS: usize = 2;
    const HEAD_DIM: usize = 32;
    let (q, kv) = (HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM);
    let mut gguf = Builder::new("gemma2", 0x6E33_2A11_9D4C_0E27);
    for (key, value) in [
        ("context_length", Value::U32(CONTEXT)),
        ("embedding_length", Value::U32(HIDDEN as u32)),
        ("block_count", Value::U32(LAYERS as u32)),
        ("feed_forward_length", Value::U32(FFN as u32)),
        ("attention.head_count", Value::U32(HEADS as u32)),
        ("attention.head_count_kv", Value::U32(KV_HEADS as u32)),
        ("attention.key_length", Value::U32(HEAD_DIM as u32)),
        ("attention.value_length", Value::U32(HEAD_DIM as u32)),
        ("attention.layer_norm_rms_epsilon", Value::F32(RMS_EPS)),
        ("attention.sliding_window", Value::U32(GEMMA2_WINDOW)),
        ("attn_logit_softcapping", Value::F32(50.0)),
        ("final_logit_softcapping", Value::F32(30.0)),
        ("rope.freq_base", Value::F32(10_000.0)),
    ] {
        gguf.key(key, value);
    }
    gguf.embedding();
    gguf.norm("output_norm.weight", HIDDEN);
    for i in 0..LAYERS {
        let blk = |name: &str| format!("blk.{i}.{name}.weight");
        gguf.norm(&blk("attn_norm"), HIDDEN);
        gguf.matrix(&blk("attn_q"), HIDDEN, q);
        gguf.matrix(&blk("attn_k"), HIDDEN, kv);
        gguf.matrix(&blk("attn_v"), HIDDEN, kv);
        gguf.matrix(&blk("attn_output"), q, HIDDEN);
        gguf.norm(&blk("post_attention_norm"), HIDDEN);
        gguf.norm(&blk("ffn_norm"), HIDDEN);
        gguf.matrix(&blk("ffn_gate"), HIDDEN, FFN);
        gguf.matrix(&blk("ffn_up"), HIDDEN, FFN);
        gguf.matrix(&blk("ffn_down"), FFN, HIDDEN);
        gguf.norm(&blk("post_ffw_norm"), HIDDEN);
    }
    gguf.write(path);
}

/// Writes a 3-layer LFM2 (hidden 64, feed-forward 64, vocabulary 320) at `path`: short
/// convolutions (kernel 3) in layers 0 and 2, attention (4 heads of 16 over 2 key/value heads)
/// in layer 1.
///
/// llama.cpp (`src/models/lfm2.cpp`): `shortconv.l_cache` and the RMS epsilon are required; a
/// layer is a convolution where its `head_count_kv` is 0; no window key, so no window; the
/// final norm is named `token_embd_norm`; `output.weight` is optional (left out: tied).
pub fn write_lfm2(path: &Path) {
    write_lfm2_with_pre(path, None);
}

/// [`write_lfm2`] with `tokenizer.ggml.pre` set to `pre` (a vocabulary llama.cpp splits its own
/// way, such as GLM-4's `glm4`).
pub fn write_lfm2_with_pre(path: &Path, pre: Option<&str>) {
    const HEADS: usize = 4;
    /// Key/value heads of each layer; 0 makes it a short-convolution layer.
    const KV_HEADS: [usize; 3] = [0, 2, 0];
    /// The convolution's kernel width (LFM2's `conv_L_cache`).
    const L_CACHE: usize = 3;
    // The attention's q and output projections are `{hidden, hidden}`: heads span the width.
    let head_dim = HIDDEN / HEADS;
    let mut gguf = Builder::new("lfm2", 0x1F2E_3D4C_5B6A_7988);
    if let Some(pre) = pre {
        gguf.replace("tokenizer.ggml.pre", Value::String(pre.to_owned()));
    }
    let kv_heads = KV_HEADS.iter().map(|&n| Value::U32(n as u32)).collect();
    for (key, value) in [
        ("context_length", Value::U32(CONTEXT)),
        ("embedding_length", Value::U32(HIDDEN as u32)),
        ("block_count", Value::U32(KV_HEADS.len() as u32)),
        ("feed_forward_length", Value::U32(FFN as u32)),
        ("attention.head_count", Value::U32(HEADS as u32)),
        ("attention.head_count_kv", Value::Array(kv_heads)),
        ("attention.layer_norm_rms_epsilon", Value::F32(1e-5)),
        ("rope.freq_base", Value::F32(1_000_000.0)),
        ("shortconv.l_cache", Value::U32(L_CACHE as u32)),
    ] {
        gguf.key(key, value);
    }
    gguf.embedding();
    // LFM2's final norm: llama.cpp's LLM_TENSOR_OUTPUT_NORM_LFM2.
    gguf.norm("token_embd_norm.weight", HIDDEN);
    for (i, &kv_heads) in KV_HEADS.iter().enumerate() {
        let blk = |name: &str| format!("blk.{i}.{name}.weight");
        gguf.norm(&blk("attn_norm"), HIDDEN);
        if kv_heads == 0 {
            // `{l_cache, hidden}`: each channel's kernel along ne0, as ggml_ssm_conv reads it.
            gguf.random(&blk("shortconv.conv"), &[L_CACHE, HIDDEN], 0.5);
            // B, C and x, one after the other along ne1.
            gguf.matrix(&blk("shortconv.in_proj"), HIDDEN, 3 * HIDDEN);
            gguf.matrix(&blk("shortconv.out_proj"), HIDDEN, HIDDEN);
        } else {
            gguf.norm(&blk("attn_q_norm"), head_dim);
            gguf.norm(&blk("attn_k_norm"), head_dim);
            gguf.matrix(&blk("attn_q"), HIDDEN, HIDDEN);
            gguf.matrix(&blk("attn_k"), HIDDEN, kv_heads * head_dim);
            gguf.matrix(&blk("attn_v"), HIDDEN, kv_heads * head_dim);
            gguf.matrix(&blk("attn_output"), HIDDEN, HIDDEN);
        }
        gguf.norm(&blk("ffn_norm"), HIDDEN);
        gguf.matrix(&blk("ffn_gate"), HIDDEN, FFN);
        gguf.matrix(&blk("ffn_up"), HIDDEN, FFN);
        gguf.matrix(&blk("ffn_down"), FFN, HIDDEN);
    }
    gguf.write(path);
}

/// A GGUF file being put together: its metadata and tensors in the order they are added.
struct Builder {
    arch: &'static str,
    metadata: Vec<(String, Value)>,
    tensors: Vec<(String, QTensor)>,
    noise: Noise,
    /// Tokens of the vocabulary: the embedding's rows.
    vocab: usize,
}

impl Builder {
    fn new(arch: &'static str, seed: u64) -> Self {
        let tokenizer = tokenizer_metadata();
        let vocab = match tokenizer
            .iter()
            .find(|(key, _)| key == "tokenizer.ggml.tokens")
        {
            Some((_, Value::Array(tokens))) => tokens.len(),
            _ => panic!("the synthetic vocabulary lists its tokens"),
        };
        let mut metadata = vec![
            (
                "general.architecture".to_owned(),
                Value::String(arch.to_owned()),
            ),
            (
                "general.name".to_owned(),
                Value::String(format!("samplab test {arch}")),
            ),
        ];
        metadata.extend(tokenizer);
        Self {
            arch,
            metadata,
            tensors: Vec::new(),
            // xorshift stays at 0 from 0.
            noise: Noise(seed | 1),
            vocab,
        }
    }

    /// Sets the key named `key` whole, in its place if there is one.
    fn replace(&mut self, key: &str, value: Value) {
        match self.metadata.iter_mut().find(|(k, _)| k == key) {
            Some((_, old)) => *old = value,
            None => self.metadata.push((key.to_owned(), value)),
        }
    }

    /// `{arch}.{key}`.
    fn key(&mut self, key: &str, value: Value) {
        self.metadata.push((format!("{}.{key}", self.arch), value));
    }

    /// `values` as an F32 tensor of GGUF dimensions `dims` (ne0 first).
    fn tensor(&mut self, name: &str, dims: &[usize], values: Vec<f32>) {
        let shape: Vec<usize> = dims.iter().rev().copied().collect();
        let tensor = Tensor::from_vec(values, shape, &Device::Cpu).unwrap();
        let tensor = QTensor::quantize(&tensor, GgmlDType::F32).unwrap();
        self.tensors.push((name.to_owned(), tensor));
    }

    /// Uniform values in ±`scale`.
    fn random(&mut self, name: &str, dims: &[usize], scale: f32) {
        let n: usize = dims.iter().product();
        let values: Vec<f32> = (0..n).map(|_| scale * self.noise.uniform()).collect();
        self.tensor(name, dims, values);
    }

    /// A projection from `inputs` to `outputs` (GGUF `{inputs, outputs}`), scaled by
    /// 1/sqrt(inputs) so that activations keep their size.
    fn matrix(&mut self, name: &str, inputs: usize, outputs: usize) {
        self.random(name, &[inputs, outputs], 1.0 / (inputs as f32).sqrt());
    }

    /// An RMS norm's weights near 1 (llama.cpp multiplies by them as stored; Gemma's files
    /// store 1 + w already).
    fn norm(&mut self, name: &str, len: usize) {
        let values: Vec<f32> = (0..len).map(|_| 1.0 + 0.1 * self.noise.uniform()).collect();
        self.tensor(name, &[len], values);
    }

    /// `token_embd.weight`, `{hidden, vocab}`: large enough (±0.5) that the tied output gives
    /// logits a few units apart, a peaked but far from one-hot distribution.
    fn embedding(&mut self) {
        let vocab = self.vocab;
        self.random("token_embd.weight", &[HIDDEN, vocab], 0.5);
    }

    fn write(self, path: &Path) {
        let metadata: Vec<(&str, &Value)> = self
            .metadata
            .iter()
            .map(|(key, value)| (key.as_str(), value))
            .collect();
        let tensors: Vec<(&str, &QTensor)> = self
            .tensors
            .iter()
            .map(|(name, tensor)| (name.as_str(), tensor))
            .collect();
        let mut file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
        gguf_file::write(&mut file, &metadata, &tensors).unwrap();
        file.flush().unwrap();
    }
}

/// The `tokenizer.*` keys of the synthetic tiny llama ([`crate::common::TINY_LLAMA`]), read
/// back from a file written for the purpose, sorted by key.
fn tokenizer_metadata() -> Vec<(String, Value)> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vocabulary.gguf");
    write_synthetic_gguf(&path, &crate::common::TINY_LLAMA, GgmlDType::F32, 1).unwrap();
    let content = gguf_file::Content::read(&mut std::fs::File::open(&path).unwrap()).unwrap();
    let mut entries: Vec<(String, Value)> = content
        .metadata
        .into_iter()
        .filter(|(key, _)| key.starts_with("tokenizer."))
        .collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    entries
}
