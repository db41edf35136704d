//! GGUF weights of every supported type load, stay quantized in memory, and compute nearly
//! what the f32 weights compute.

use candle_core::Device;
use candle_core::quantized::{GgmlDType, gguf_file};
use samplab::model::Model;
use samplab::model::source::synthetic::{SyntheticSpec, write_synthetic_gguf};
use std::path::Path;

/// Rows of 256 so that the k-quants (Q4_K, Q6_K) apply to every matrix, not only q8_0.
const SPEC: SyntheticSpec = SyntheticSpec {
    name: "qtype-test",
    architecture: "llama",
    experts: None,
    delta_net: None,
    hidden_size: 256,
    num_layers: 2,
    num_heads: 4,
    num_kv_heads: 2,
    head_dim: None,
    intermediate_size: 512,
    vocab_size: 320,
    context_length: 64,
    rope_theta: 10_000.0,
    tie_word_embeddings: false,
};

fn logits(path: &Path) -> (Vec<Vec<f32>>, u64) {
    let model = Model::load(path, &Device::Cpu).unwrap();
    let rows = model
        .session()
        .prefill(&[1, 5, 9, 200, 17, 3, 88, 301], true)
        .unwrap();
    (rows, model.weight_bytes_per_step())
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| f64::from(x) * f64::from(y))
        .sum();
    let norm = |v: &[f32]| v.iter().map(|&x| f64::from(x).powi(2)).sum::<f64>().sqrt();
    dot / (norm(a) * norm(b))
}

#[test]
fn every_weight_type_loads_quantized_and_tracks_f32() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, dtype: GgmlDType| {
        let path = dir.path().join(format!("{name}.gguf"));
        write_synthetic_gguf(&path, &SPEC, dtype, 5).unwrap();
        path
    };
    let (reference, f32_bytes) = logits(&write("f32", GgmlDType::F32));
    // Bytes per weight of each type relative to f32, and the worst cosine similarity to f32
    // logits it may have (4-bit weights carry about 1/16 relative error per weight, 8-bit about
    // 1/256). Our kernels keep the file's bytes, f16 included, except the K formats' packed
    // scales, which become a byte each: per 256 values Q2_K takes 100 bytes where GGUF stores
    // 84, Q3_K 114 (110), Q4_K 148 (144), Q5_K 180 (176).
    let cases = [
        ("f16", GgmlDType::F16, 0.5, 0.9999),
        ("bf16", GgmlDType::BF16, 0.5, 0.999),
        ("q8_0", GgmlDType::Q8_0, 34.0 / 32.0 / 4.0, 0.999),
        ("q6_k", GgmlDType::Q6K, 210.0 / 256.0 / 4.0, 0.995),
        ("q4_k", GgmlDType::Q4K, 148.0 / 256.0 / 4.0, 0.98),
        ("q4_0", GgmlDType::Q4_0, 18.0 / 32.0 / 4.0, 0.98),
        ("q4_1", GgmlDType::Q4_1, 20.0 / 32.0 / 4.0, 0.98),
        ("q5_0", GgmlDType::Q5_0, 22.0 / 32.0 / 4.0, 0.99),
        ("q5_1", GgmlDType::Q5_1, 24.0 / 32.0 / 4.0, 0.99),
        ("q5_k", GgmlDType::Q5K, 180.0 / 256.0 / 4.0, 0.99),
        ("q3_k", GgmlDType::Q3K, 114.0 / 256.0 / 4.0, 0.9),
        ("q2_k", GgmlDType::Q2K, 100.0 / 256.0 / 4.0, 0.8),
    ];
    for (name, dtype, ratio, min_cosine) in cases {
        let path = write(name, dtype);
        let mut file = std::fs::File::open(&path).unwrap();
        let content = gguf_file::Content::read(&mut file).unwrap();
        assert_eq!(
            content.tensor_infos["blk.0.ffn_down.weight"].ggml_dtype, dtype,
            "{name}: the file holds the type asked for"
        );
        let (rows, bytes) = logits(&path);
        let expected = f32_bytes as f64 * ratio;
        assert!(
            (bytes as f64 - expected).abs() / expected < 0.01,
            "{name}: {bytes} bytes in memory, expected {expected} (weights stay quantized)"
        );
        for (position, (ours, exact)) in rows.iter().zip(&reference).enumerate() {
            let similarity = cosine(ours, exact);
            assert!(
                similarity > min_cosine,
                "{name} position {position}: cosine {similarity}"
            );
        }
    }
}
