//! Llama, Mistral, Qwen2 and Qwen3 on small random-weight checkpoints written here, against
//! a plain-loop reference: full causal attention recomputed for every position, no cache.

use candle_core::{DType, Device, Tensor};
use samplab::model::source::synthetic::Noise;
use samplab::model::{Architecture, Model, Session};
use std::collections::HashMap;
use std::path::Path;

#[derive(Clone)]
struct Spec {
    model_type: &'static str,
    hidden: usize,
    layers: usize,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    ffn: usize,
    vocab: usize,
    qkv_bias: bool,
    qk_norm: bool,
    tied: bool,
    /// The precision of the weights (norms, biases and embeddings included).
    dtype: DType,
    /// Store the `dtype`-rounded weights as f32.
    widened: bool,
    rope_theta: f64,
    /// (factor, low_freq_factor, high_freq_factor, original_max_position_embeddings)
    llama3_scaling: Option<(f64, f64, f64, usize)>,
    sliding_window: Option<usize>,
}

const EPS: f32 = 1e-6;
const MAX_POSITIONS: usize = 64;

fn llama() -> Spec {
    Spec {
        model_type: "llama",
        hidden: 32,
        layers: 2,
        heads: 4,
        kv_heads: 2,
        head_dim: 8,
        ffn: 48,
        vocab: 64,
        qkv_bias: false,
        qk_norm: false,
        tied: false,
        dtype: DType::F32,
        widened: false,
        rope_theta: 10_000.0,
        llama3_scaling: None,
        sliding_window: None,
    }
}

/// The checkpoint's weights as the model sees them (after any 16-bit rounding), by HF name.
type Weights = HashMap<String, Vec<f32>>;

fn write_checkpoint(spec: &Spec, dir: &Path) -> Weights {
    let mut noise = Noise(0x9E37_79B9_7F4A_7C15);
    let mut shapes: Vec<(String, Vec<usize>, f32)> = Vec::new();
    let mut add = |name: String, shape: Vec<usize>, scale: f32| shapes.push((name, shape, scale));
    let (h, q_dim, kv_dim) = (
        spec.hidden,
        spec.heads * spec.head_dim,
        spec.kv_heads * spec.head_dim,
    );
    add("model.embed_tokens.weight".into(), vec![spec.vocab, h], 1.0);
    for l in 0..spec.layers {
        let p = format!("model.layers.{l}");
        let proj = |fan_in: usize| 1.0 / (fan_in as f32).sqrt();
        add(
            format!("{p}.self_attn.q_proj.weight"),
            vec![q_dim, h],
            proj(h),
        );
        add(
            format!("{p}.self_attn.k_proj.weight"),
            vec![kv_dim, h],
            proj(h),
        );
        add(
            format!("{p}.self_attn.v_proj.weight"),
            vec![kv_dim, h],
            proj(h),
        );
        add(
            format!("{p}.self_attn.o_proj.weight"),
            vec![h, q_dim],
            proj(q_dim),
        );
        if spec.qkv_bias {
            add(format!("{p}.self_attn.q_proj.bias"), vec![q_dim], 0.5);
            add(format!("{p}.self_attn.k_proj.bias"), vec![kv_dim], 0.5);
            add(format!("{p}.self_attn.v_proj.bias"), vec![kv_dim], 0.5);
        }
        if spec.qk_norm {
            add(
                format!("{p}.self_attn.q_norm.weight"),
                vec![spec.head_dim],
                1.0,
            );
            add(
                format!("{p}.self_attn.k_norm.weight"),
                vec![spec.head_dim],
                1.0,
            );
        }
        add(
            format!("{p}.mlp.gate_proj.weight"),
            vec![spec.ffn, h],
            proj(h),
        );
        add(
            format!("{p}.mlp.up_proj.weight"),
            vec![spec.ffn, h],
            proj(h),
        );
        add(
            format!("{p}.mlp.down_proj.weight"),
            vec![h, spec.ffn],
            proj(spec.ffn),
        );
        add(format!("{p}.input_layernorm.weight"), vec![h], 1.0);
        add(format!("{p}.post_attention_layernorm.weight"), vec![h], 1.0);
    }
    add("model.norm.weight".into(), vec![h], 1.0);
    if !spec.tied {
        add(
            "lm_head.weight".into(),
            vec![spec.vocab, h],
            1.0 / (h as f32).sqrt(),
        );
    }

    let mut weights = Weights::new();
    let mut tensors = HashMap::new();
    for (name, shape, scale) in shapes {
        let n: usize = shape.iter().product();
        // Norm weights near 1, as trained ones are.
        let offset = if name.contains("norm") { 1.0 } else { 0.0 };
        let values: Vec<f32> = (0..n).map(|_| offset + scale * noise.uniform()).collect();
        let tensor = Tensor::from_vec(values, shape, &Device::Cpu).unwrap();
        let tensor = tensor.to_dtype(spec.dtype).unwrap();
        let tensor = if spec.widened {
            tensor.to_dtype(DType::F32).unwrap()
        } else {
            tensor
        };
        let seen = tensor.to_dtype(DType::F32).unwrap().flatten_all().unwrap();
        weights.insert(name.clone(), seen.to_vec1().unwrap());
        tensors.insert(name, tensor);
    }
    candle_core::safetensors::save(&tensors, dir.join("model.safetensors")).unwrap();

    let mut config = serde_json::json!({
        "model_type": spec.model_type,
        "hidden_size": spec.hidden,
        "intermediate_size": spec.ffn,
        "num_hidden_layers": spec.layers,
        "num_attention_heads": spec.heads,
        "num_key_value_heads": spec.kv_heads,
        "head_dim": spec.head_dim,
        "vocab_size": spec.vocab,
        "max_position_embeddings": MAX_POSITIONS,
        "rms_norm_eps": EPS,
        "rope_theta": spec.rope_theta,
        "tie_word_embeddings": spec.tied,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "torch_dtype": match spec.dtype {
            _ if spec.widened => "float32",
            DType::BF16 => "bfloat16",
            DType::F16 => "float16",
            _ => "float32",
        },
    });
    if let Some((factor, low, high, original)) = spec.llama3_scaling {
        config["rope_scaling"] = serde_json::json!({
            "rope_type": "llama3",
            "factor": factor,
            "low_freq_factor": low,
            "high_freq_factor": high,
            "original_max_position_embeddings": original,
        });
    }
    if let Some(window) = spec.sliding_window {
        config["sliding_window"] = window.into();
    }
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    weights
}

fn rms_norm(x: &[f32], w: &[f32]) -> Vec<f32> {
    let mean = x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32;
    let scale = 1.0 / (mean + EPS).sqrt();
    x.iter().zip(w).map(|(v, w)| v * scale * w).collect()
}

/// `W x (+ b)` with `W` row-major `[rows, x.len()]`.
fn matvec(w: &[f32], x: &[f32], b: Option<&Vec<f32>>) -> Vec<f32> {
    let rows = w.len() / x.len();
    (0..rows)
        .map(|r| {
            let dot: f32 = w[r * x.len()..(r + 1) * x.len()]
                .iter()
                .zip(x)
                .map(|(a, b)| a * b)
                .sum();
            dot + b.map_or(0.0, |b| b[r])
        })
        .collect()
}

fn inv_freq(spec: &Spec) -> Vec<f64> {
    (0..spec.head_dim / 2)
        .map(|i| {
            let f = spec.rope_theta.powf(-2.0 * i as f64 / spec.head_dim as f64);
            let Some((factor, low, high, original)) = spec.llama3_scaling else {
                return f;
            };
            let wavelen = 2.0 * std::f64::consts::PI / f;
            let (low_wavelen, high_wavelen) = (original as f64 / low, original as f64 / high);
            if wavelen < high_wavelen {
                f
            } else if wavelen > low_wavelen {
                f / factor
            } else {
                let smooth = (original as f64 / wavelen - low) / (high - low);
                (1.0 - smooth) * f / factor + smooth * f
            }
        })
        .collect()
}

/// Half-split RoPE (transformers' `rotate_half`) of one head at position `pos`.
fn rope(head: &mut [f32], pos: usize, freqs: &[f64]) {
    let half = head.len() / 2;
    for (i, f) in freqs.iter().enumerate() {
        let angle = pos as f64 * f;
        let (cos, sin) = (angle.cos() as f32, angle.sin() as f32);
        let (a, b) = (head[i], head[i + half]);
        head[i] = a * cos - b * sin;
        head[i + half] = b * cos + a * sin;
    }
}

/// Logits after every position of `ids`.
fn reference(spec: &Spec, w: &Weights, ids: &[u32]) -> Vec<Vec<f32>> {
    let (h, hd) = (spec.hidden, spec.head_dim);
    let freqs = inv_freq(spec);
    let embed = &w["model.embed_tokens.weight"];
    let mut xs: Vec<Vec<f32>> = ids
        .iter()
        .map(|&id| embed[id as usize * h..(id as usize + 1) * h].to_vec())
        .collect();
    for l in 0..spec.layers {
        let p = |n: &str| format!("model.layers.{l}.{n}");
        let get = |n: &str| &w[&p(n)];
        let bias = |n: &str| w.get(&p(n));
        let mut qs = Vec::new();
        let mut ks = Vec::new();
        let mut vs = Vec::new();
        for (pos, x) in xs.iter().enumerate() {
            let n = rms_norm(x, get("input_layernorm.weight"));
            let mut q = matvec(
                get("self_attn.q_proj.weight"),
                &n,
                bias("self_attn.q_proj.bias"),
            );
            let mut k = matvec(
                get("self_attn.k_proj.weight"),
                &n,
                bias("self_attn.k_proj.bias"),
            );
            let v = matvec(
                get("self_attn.v_proj.weight"),
                &n,
                bias("self_attn.v_proj.bias"),
            );
            for (t, norm) in [
                (&mut q, "self_attn.q_norm.weight"),
                (&mut k, "self_attn.k_norm.weight"),
            ] {
                for head in t.chunks_mut(hd) {
                    if spec.qk_norm {
                        let normed = rms_norm(head, get(norm));
                        head.copy_from_slice(&normed);
                    }
                    rope(head, pos, &freqs);
                }
            }
            qs.push(q);
            ks.push(k);
            vs.push(v);
        }
        for (pos, x) in xs.iter_mut().enumerate() {
            let mut attn = vec![0.0f32; spec.heads * hd];
            for head in 0..spec.heads {
                let kv = head / (spec.heads / spec.kv_heads);
                let q = &qs[pos][head * hd..(head + 1) * hd];
                let scores: Vec<f32> = (0..=pos)
                    .map(|j| {
                        let k = &ks[j][kv * hd..(kv + 1) * hd];
                        q.iter().zip(k).map(|(a, b)| a * b).sum::<f32>() / (hd as f32).sqrt()
                    })
                    .collect();
                let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let exps: Vec<f32> = scores.iter().map(|s| (s - max).exp()).collect();
                let sum: f32 = exps.iter().sum();
                for (j, e) in exps.iter().enumerate() {
                    for d in 0..hd {
                        attn[head * hd + d] += e / sum * vs[j][kv * hd + d];
                    }
                }
            }
            let o = matvec(get("self_attn.o_proj.weight"), &attn, None);
            x.iter_mut().zip(&o).for_each(|(x, o)| *x += o);
            let n = rms_norm(x, get("post_attention_layernorm.weight"));
            let gate = matvec(get("mlp.gate_proj.weight"), &n, None);
            let up = matvec(get("mlp.up_proj.weight"), &n, None);
            let act: Vec<f32> = gate
                .iter()
                .zip(&up)
                .map(|(g, u)| g / (1.0 + (-g).exp()) * u)
                .collect();
            let down = matvec(get("mlp.down_proj.weight"), &act, None);
            x.iter_mut().zip(&down).for_each(|(x, d)| *x += d);
        }
    }
    let head = w.get("lm_head.weight").unwrap_or(embed);
    xs.iter()
        .map(|x| matvec(head, &rms_norm(x, &w["model.norm.weight"]), None))
        .collect()
}

fn assert_close(actual: &[f32], expected: &[f32], what: &str) {
    assert_eq!(actual.len(), expected.len(), "{what}: vocabulary size");
    let worst = actual
        .iter()
        .zip(expected)
        .map(|(a, e)| (a - e).abs())
        .fold(0.0f32, f32::max);
    assert!(worst < 1e-4, "{what}: logits differ by {worst}");
}

/// Prefill (every position) and a forked batch of three rows with different continuations
/// must equal the reference on each row's whole sequence.
fn check(spec: &Spec) -> Model {
    let dir = tempfile::tempdir().unwrap();
    let weights = write_checkpoint(spec, dir.path());
    let model = Model::load(dir.path(), &Device::Cpu).unwrap();
    let prompt = [1u32, 17, 42, 5, 63, 8];
    let mut session = model.session();
    let logits = session.prefill(&prompt, true).unwrap();
    for (i, (row, expected)) in logits
        .iter()
        .zip(reference(spec, &weights, &prompt))
        .enumerate()
    {
        assert_close(
            row,
            &expected,
            &format!("{} prompt position {i}", spec.model_type),
        );
    }
    let continuations: [[u32; 5]; 3] =
        [[3, 9, 27, 61, 50], [60, 2, 2, 7, 11], [33, 34, 35, 36, 37]];
    session.fork(3).unwrap();
    for step in 0..5 {
        let tokens: Vec<u32> = continuations.iter().map(|c| c[step]).collect();
        let rows = session.decode_step(&tokens).unwrap();
        for (r, row) in rows.iter().enumerate() {
            let sequence: Vec<u32> = prompt
                .iter()
                .chain(&continuations[r][..=step])
                .copied()
                .collect();
            let expected = reference(spec, &weights, &sequence);
            assert_close(
                row,
                expected.last().unwrap(),
                &format!("{} row {r} step {step}", spec.model_type),
            );
        }
    }
    model
}

#[test]
fn llama_with_gqa_and_llama3_rope_scaling() {
    let spec = Spec {
        rope_theta: 500_000.0,
        // original context 16 so that every branch of the scaling is taken at head dim 8.
        llama3_scaling: Some((8.0, 1.0, 4.0, 16)),
        ..llama()
    };
    let model = check(&spec);
    let c = model.config();
    assert_eq!(c.architecture, Architecture::Llama);
    assert_eq!(
        (c.bos_token_id, c.eos_token_ids.as_slice()),
        (Some(1), &[2][..])
    );
    assert!(!c.tie_word_embeddings);
}

#[test]
fn llama_with_tied_bf16_weights() {
    let model = check(&Spec {
        tied: true,
        dtype: DType::BF16,
        ..llama()
    });
    assert!(model.config().tie_word_embeddings);
}

/// f16 and bf16 checkpoints stay 16-bit in memory: half the weight bytes of the same model
/// in f32, and exactly the logits of that f32 model with its weights rounded to 16 bits.
#[test]
fn sixteen_bit_weights_take_half_the_bytes_and_give_the_rounded_f32_models_logits() {
    use samplab::model::memory::estimate;
    for (dtype, name, tied) in [(DType::F16, "f16", false), (DType::BF16, "bf16", true)] {
        let spec = Spec {
            dtype,
            tied,
            ..llama()
        };
        let (half_dir, wide_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        write_checkpoint(&spec, half_dir.path());
        let widened = Spec {
            widened: true,
            ..spec
        };
        write_checkpoint(&widened, wide_dir.path());
        let half = Model::load(half_dir.path(), &Device::Cpu).unwrap();
        let wide = Model::load(wide_dir.path(), &Device::Cpu).unwrap();

        let kernel = (name.to_owned(), format!("samplab {name}, batch invariant"));
        assert_eq!(half.kernels(), vec![kernel], "{name}");
        assert_eq!(
            2 * half.weight_bytes_per_step(),
            wide.weight_bytes_per_step(),
            "{name}"
        );
        let bytes =
            |dir: &tempfile::TempDir| estimate(dir.path(), &Device::Cpu, 0).unwrap().weights;
        assert_eq!(2 * bytes(&half_dir), bytes(&wide_dir), "{name}");

        let prompt = [1u32, 17, 42, 5, 63, 8];
        let (mut half, mut wide) = (half.session(), wide.session());
        let prefill = |s: &mut Session<&Model>| s.prefill(&prompt, true).unwrap();
        assert_eq!(prefill(&mut half), prefill(&mut wide), "{name} prefill");
        half.fork(2).unwrap();
        wide.fork(2).unwrap();
        for step in [[3, 60], [9, 2]] {
            let decode = |s: &mut Session<&Model>| s.decode_step(&step).unwrap();
            assert_eq!(decode(&mut half), decode(&mut wide), "{name} decode");
        }
    }
}

#[test]
fn mistral_window_limits_the_context() {
    let model = check(&Spec {
        model_type: "mistral",
        sliding_window: Some(32),
        ..llama()
    });
    assert_eq!(model.config().architecture, Architecture::Mistral);
    assert_eq!(model.context_length(), 32);
}

#[test]
fn qwen2_with_qkv_bias() {
    check(&Spec {
        model_type: "qwen2",
        qkv_bias: true,
        kv_heads: 1,
        rope_theta: 1_000_000.0,
        ..llama()
    });
}

#[test]
fn qwen3_with_qk_norm_wide_heads_and_tied_bf16_weights() {
    check(&Spec {
        model_type: "qwen3",
        qk_norm: true,
        head_dim: 16,
        tied: true,
        dtype: DType::BF16,
        ..llama()
    });
}

#[test]
fn generation_config_gives_eos_ids_and_model_defaults() {
    let dir = tempfile::tempdir().unwrap();
    write_checkpoint(&llama(), dir.path());
    std::fs::write(
        dir.path().join("generation_config.json"),
        r#"{"bos_token_id": 1, "eos_token_id": [7, 2], "do_sample": true,
            "temperature": 0.6, "top_p": 0.9, "top_k": 20, "repetition_penalty": 1.05,
            "max_new_tokens": 256}"#,
    )
    .unwrap();
    let model = Model::load(dir.path(), &Device::Cpu).unwrap();
    let c = model.config();
    assert_eq!(c.eos_token_ids, vec![7, 2]);
    let params = c.generation.sampling_params().unwrap();
    assert_eq!(params.temperature, 0.6);
    assert_eq!(params.top_p, 0.9);
    assert_eq!(params.top_k, 20);
    assert_eq!(params.repetition_penalty, 1.05);
    assert_eq!(params.max_tokens, Some(256));

    let greedy = samplab::model::GenerationDefaults {
        do_sample: Some(false),
        temperature: Some(0.7),
        ..Default::default()
    };
    assert!(greedy.sampling_params().unwrap().is_greedy());
    let invalid = samplab::model::GenerationDefaults {
        top_p: Some(1.5),
        ..Default::default()
    };
    assert!(invalid.sampling_params().is_err());
}
