//! Bad inputs give the right `ModelError`, never a panic.

use crate::common;

use candle_core::quantized::{GgmlDType, QTensor, gguf_file};
use candle_core::{Device, Tensor};
use samplab::model::{Model, ModelError};
use std::path::Path;

fn load(path: &Path) -> ModelError {
    Model::load(path, &Device::Cpu).expect_err("loading must fail")
}

/// A GGUF with llama-style metadata for `architecture` and one real tensor.
fn write_gguf(path: &Path, architecture: &str) {
    let arch = gguf_file::Value::String(architecture.to_owned());
    let embed = QTensor::quantize(
        &Tensor::zeros((64, 32), candle_core::DType::F32, &Device::Cpu).unwrap(),
        GgmlDType::F32,
    )
    .unwrap();
    let mut file = std::fs::File::create(path).unwrap();
    gguf_file::write(
        &mut file,
        &[("general.architecture", &arch)],
        &[("token_embd.weight", &embed)],
    )
    .unwrap();
}

#[test]
fn a_missing_file_is_not_found() {
    let err = load(Path::new("/nonexistent/model.gguf"));
    assert!(matches!(err, ModelError::NotFound(_)), "{err}");
}

#[test]
fn a_text_file_or_an_empty_file_is_not_gguf() {
    let dir = tempfile::tempdir().unwrap();
    for (name, content) in [("notes.gguf", "hello, world"), ("empty.gguf", "")] {
        let path = dir.path().join(name);
        std::fs::write(&path, content).unwrap();
        let err = load(&path);
        assert!(matches!(err, ModelError::NotGguf(_)), "{name}: {err}");
    }
}

#[test]
fn a_truncated_gguf_is_reported_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.gguf");
    write_gguf(&path, "llama");
    let bytes = std::fs::read(&path).unwrap();

    std::fs::write(&path, &bytes[..bytes.len() - 100]).unwrap();
    let err = load(&path);
    assert!(matches!(err, ModelError::Truncated { .. }), "{err}");

    // Cut inside the header: the metadata itself cannot be read.
    std::fs::write(&path, &bytes[..30]).unwrap();
    let err = load(&path);
    assert!(matches!(err, ModelError::Corrupt { .. }), "{err}");
}

#[test]
fn a_truncated_copy_of_the_test_model_is_reported_as_such() {
    let Some(model) = common::test_model() else {
        return;
    };
    let bytes = std::fs::read(model).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stories.gguf");
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let err = load(&path);
    assert!(matches!(err, ModelError::Truncated { .. }), "{err}");
}

#[test]
fn an_unsupported_gguf_architecture_names_the_supported_ones() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.gguf");
    write_gguf(&path, "gpt2");
    let err = load(&path);
    match &err {
        ModelError::UnsupportedArchitecture { name, .. } => assert_eq!(name, "gpt2"),
        other => panic!("expected UnsupportedArchitecture, got {other}"),
    }
    let message = err.to_string();
    assert!(
        message.contains("llama") && message.contains("qwen3"),
        "{message}"
    );
}

#[test]
fn a_gguf_without_the_llama_metadata_is_a_config_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.gguf");
    write_gguf(&path, "llama");
    let err = load(&path);
    assert!(
        matches!(&err, ModelError::Config { reason, .. } if reason.contains("llama.embedding_length")),
        "{err}"
    );
}

fn config_json(model_type: &str) -> String {
    serde_json::json!({
        "model_type": model_type,
        "hidden_size": 32,
        "intermediate_size": 48,
        "num_hidden_layers": 1,
        "num_attention_heads": 4,
        "vocab_size": 64,
        "max_position_embeddings": 64,
        "rms_norm_eps": 1e-6,
    })
    .to_string()
}

#[test]
fn hf_directory_errors() {
    let dir = tempfile::tempdir().unwrap();
    let err = load(dir.path());
    assert!(
        matches!(err, ModelError::NotFound(ref p) if p.ends_with("config.json")),
        "{err}"
    );

    std::fs::write(dir.path().join("config.json"), "{ not json").unwrap();
    let err = load(dir.path());
    assert!(matches!(err, ModelError::Config { .. }), "{err}");

    std::fs::write(dir.path().join("config.json"), config_json("gpt2")).unwrap();
    let err = load(dir.path());
    assert!(
        matches!(&err, ModelError::UnsupportedArchitecture { name, .. } if name == "gpt2"),
        "{err}"
    );

    std::fs::write(dir.path().join("config.json"), config_json("llama")).unwrap();
    let err = load(dir.path());
    assert!(matches!(err, ModelError::NoWeights(_)), "{err}");

    let weights = dir.path().join("model.safetensors");
    std::fs::write(&weights, b"\x08\x00\x00\x00\x00\x00\x00\x00garbage!").unwrap();
    let err = load(dir.path());
    assert!(matches!(err, ModelError::Corrupt { .. }), "{err}");

    let embed = Tensor::zeros((64, 32), candle_core::DType::F32, &Device::Cpu).unwrap();
    candle_core::safetensors::save(
        &std::collections::HashMap::from([("model.embed_tokens.weight", embed)]),
        &weights,
    )
    .unwrap();
    let err = load(dir.path());
    assert!(
        matches!(&err, ModelError::MissingTensor { name, .. } if name == "model.layers.0.self_attn.q_proj.weight"),
        "{err}"
    );

    let wrong = Tensor::zeros((64, 16), candle_core::DType::F32, &Device::Cpu).unwrap();
    candle_core::safetensors::save(
        &std::collections::HashMap::from([("model.embed_tokens.weight", wrong)]),
        &weights,
    )
    .unwrap();
    let err = load(dir.path());
    assert!(matches!(err, ModelError::TensorShape { .. }), "{err}");
}
