//! Writes a trained model in the Hugging Face layout, so that samplab loads it like any Hub
//! model and transformers could load it too.

use crate::model::{Shape, TinyLlama};
use crate::tokenizer::{BOS_ID, EOS_ID};
use serde_json::json;
use std::path::Path;
use tokenizers::Tokenizer;

/// Sampling defaults shipped in generation_config.json (`--preset model` picks them up).
const TEMPERATURE: f64 = 0.8;
const TOP_P: f64 = 0.95;

/// config.json, generation_config.json, model.safetensors and tokenizer.json in `dir`.
pub fn write_model_dir(
    dir: &Path,
    shape: &Shape,
    model: &TinyLlama,
    tokenizer: &Tokenizer,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    write_config(dir, shape)?;
    write_json(
        &dir.join("generation_config.json"),
        &json!({
            "bos_token_id": BOS_ID,
            "eos_token_id": EOS_ID,
            "do_sample": true,
            "temperature": TEMPERATURE,
            "top_p": TOP_P,
        }),
    )?;
    model.save(&dir.join("model.safetensors"))?;
    tokenizer
        .save(dir.join("tokenizer.json"), false)
        .map_err(anyhow::Error::msg)?;
    Ok(())
}

/// A standard `LlamaForCausalLM` config with tied embeddings.
pub fn write_config(dir: &Path, shape: &Shape) -> anyhow::Result<()> {
    write_json(
        &dir.join("config.json"),
        &json!({
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "hidden_size": shape.hidden,
            "intermediate_size": shape.ffn,
            "num_hidden_layers": shape.layers,
            "num_attention_heads": shape.heads,
            "num_key_value_heads": shape.kv_heads,
            "head_dim": shape.head_dim(),
            "vocab_size": shape.vocab,
            "max_position_embeddings": shape.context,
            "rms_norm_eps": shape.eps,
            "rope_theta": shape.rope_theta,
            "rope_scaling": null,
            "hidden_act": "silu",
            "attention_bias": false,
            "mlp_bias": false,
            "tie_word_embeddings": true,
            "bos_token_id": BOS_ID,
            "eos_token_id": EOS_ID,
            "torch_dtype": "float32",
        }),
    )
}

fn write_json(path: &Path, value: &serde_json::Value) -> anyhow::Result<()> {
    std::fs::write(path, serde_json::to_string_pretty(value)? + "\n")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Tensor};

    /// GQA, several layers and large weights, so that a wrong head order, RoPE layout or norm
    /// shows in the logits.
    const SHAPE: Shape = Shape {
        vocab: 40,
        hidden: 32,
        layers: 2,
        heads: 4,
        kv_heads: 2,
        ffn: 48,
        context: 16,
        rope_theta: 10_000.0,
        eps: 1e-5,
    };

    #[test]
    fn the_training_graph_and_the_inference_path_give_the_same_logits() {
        let device = Device::Cpu;
        let model = TinyLlama::new(SHAPE, 3, 0.3, &device).unwrap();
        let dir = tempfile::tempdir().unwrap();
        write_config(dir.path(), &SHAPE).unwrap();
        model.save(&dir.path().join("model.safetensors")).unwrap();
        let loaded = samplab::model::Model::load(dir.path(), &device).unwrap();
        assert!(loaded.config().tie_word_embeddings);
        assert_eq!(loaded.config().eos_token_ids, [EOS_ID]);

        let ids: Vec<u32> = (0..12).map(|i| (i * 7 + 1) % SHAPE.vocab as u32).collect();
        let input = Tensor::new(ids.as_slice(), &device)
            .unwrap()
            .unsqueeze(0)
            .unwrap();
        let trained = model.forward(&input).unwrap().to_vec2::<f32>().unwrap();
        let inferred = loaded.session().prefill(&ids, true).unwrap();
        let spread = trained[5].iter().fold(0f32, |m, x| m.max(x.abs()));
        assert!(spread > 0.5, "logits too flat to compare: {spread}");
        for (position, (a, b)) in trained.iter().zip(&inferred).enumerate() {
            for (x, y) in a.iter().zip(b) {
                assert!((x - y).abs() < 1e-4, "position {position}: {x} vs {y}");
            }
        }
    }
}
