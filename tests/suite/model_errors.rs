//! Bad inputs give the right `ModelError`, never a panic.

use crate::common;
use samplab::model::device::DeviceChoice;

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

/// Issue 13: llama.cpp accepts bytes after the last tensor (a tensor's type flipped to a smaller
/// one leaves them); samplab loads such a file too, with a warning that reaches the user.
#[test]
fn bytes_after_the_last_tensor_load_with_a_warning() {
    let Some(model) = common::test_model() else {
        return;
    };
    let mut bytes = std::fs::read(&model).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stories.gguf");
    let clean = samplab::engine::load::load_model(
        model.to_str().unwrap(),
        &samplab::model::source::HubSettings::from_env(),
        DeviceChoice::Cpu,
        &mut |_| {},
    )
    .unwrap();
    assert!(clean.warnings.is_empty(), "{:?}", clean.warnings);
    bytes.extend(std::iter::repeat_n(0u8, 4096));
    std::fs::write(&path, &bytes).unwrap();
    let loaded = samplab::engine::load::load_model(
        path.to_str().unwrap(),
        &samplab::model::source::HubSettings::from_env(),
        DeviceChoice::Cpu,
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
    assert!(
        loaded.warnings[0].contains("4096 bytes after the last tensor"),
        "{}",
        loaded.warnings[0]
    );
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

/// Llama metadata for a one-layer model of hidden size 32 and vocabulary 64, with `changes`
/// replacing or adding keys.
fn llama_metadata(changes: &[(&str, gguf_file::Value)]) -> Vec<(String, gguf_file::Value)> {
    use gguf_file::Value::{F32, String as Text, U32};
    let mut metadata = vec![
        ("general.architecture".to_owned(), Text("llama".to_owned())),
        ("llama.embedding_length".to_owned(), U32(32)),
        ("llama.attention.head_count".to_owned(), U32(4)),
        ("llama.feed_forward_length".to_owned(), U32(48)),
        ("llama.block_count".to_owned(), U32(1)),
        ("llama.context_length".to_owned(), U32(64)),
        (
            "llama.attention.layer_norm_rms_epsilon".to_owned(),
            F32(1e-5),
        ),
    ];
    for (key, value) in changes {
        metadata.retain(|(k, _)| k != key);
        metadata.push(((*key).to_owned(), value.clone()));
    }
    metadata
}

fn f32_tensor(rows: usize, cols: usize) -> QTensor {
    let t = Tensor::zeros((rows, cols), candle_core::DType::F32, &Device::Cpu).unwrap();
    QTensor::quantize(&t, GgmlDType::F32).unwrap()
}

/// A GGUF with `metadata` and zero-filled F32 tensors of the given shapes.
fn gguf_bytes(
    metadata: &[(String, gguf_file::Value)],
    tensors: &[(&str, (usize, usize))],
) -> Vec<u8> {
    let tensors: Vec<(&str, QTensor)> = tensors
        .iter()
        .map(|(name, (r, c))| (*name, f32_tensor(*r, *c)))
        .collect();
    let metadata: Vec<(&str, &gguf_file::Value)> =
        metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, t)| (*n, t)).collect();
    let mut out = std::io::Cursor::new(Vec::new());
    gguf_file::write(&mut out, &metadata, &tensors).unwrap();
    out.into_inner()
}

/// Where tensor `name`'s table entry continues after its name: n_dims (u32), dims (u64
/// each, innermost first), type (u32), offset (u64).
fn after_name(bytes: &[u8], name: &str) -> usize {
    let at = bytes
        .windows(name.len())
        .position(|w| w == name.as_bytes())
        .expect("the tensor name is in the header");
    at + name.len()
}

fn load_bytes(bytes: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hostile.gguf");
    std::fs::write(&path, bytes).unwrap();
    load(&path).to_string()
}

const EMBED: (&str, (usize, usize)) = ("token_embd.weight", (64, 32));
const NORM: (&str, (usize, usize)) = ("output_norm.weight", (1, 32));

#[test]
fn absurd_sizes_are_refused_naming_the_file_and_the_key() {
    let cases = [
        ("llama.block_count", 1u64 << 61, "layer count"),
        ("llama.block_count", 1 << 62, "layer count"),
        ("llama.block_count", 1_000_000_000, "layer count"),
        ("llama.embedding_length", 1 << 62, "hidden size"),
        ("llama.attention.key_length", 1 << 63, "head dim"),
    ];
    for (key, value, what) in cases {
        let metadata = llama_metadata(&[(key, gguf_file::Value::U64(value))]);
        let err = load_bytes(&gguf_bytes(&metadata, &[EMBED]));
        assert!(
            err.contains("hostile.gguf") && err.contains(what) && err.contains(&format!("`{key}`")),
            "{key}: {err}"
        );
    }
    // A layer count within bounds still ends at the first missing layer, not in an allocation.
    let metadata = llama_metadata(&[("llama.block_count", gguf_file::Value::U64(60_000))]);
    let err = load_bytes(&gguf_bytes(&metadata, &[EMBED]));
    assert!(
        err.contains("blk.0.attn_q.weight") && err.contains("missing"),
        "{err}"
    );
}

#[test]
fn a_zero_or_odd_alignment_is_refused_before_candle_divides_by_it() {
    for alignment in [0u32, 3] {
        let metadata = llama_metadata(&[("general.alignment", gguf_file::Value::U32(alignment))]);
        let err = load_bytes(&gguf_bytes(&metadata, &[EMBED]));
        assert!(
            err.contains("general.alignment") && err.contains("power of two"),
            "{alignment}: {err}"
        );
    }
}

#[test]
fn hostile_tensor_tables_are_refused_naming_the_tensor() {
    let good = gguf_bytes(&llama_metadata(&[]), &[EMBED, NORM]);
    let embed = after_name(&good, EMBED.0);
    let norm = after_name(&good, NORM.0);
    let patch = |at: usize, value: &[u8]| {
        let mut bytes = good.clone();
        bytes[at..at + value.len()].copy_from_slice(value);
        load_bytes(&bytes)
    };
    // Zero dimensions (config.rs read dims()[0] of the embedding): n_dims 0 and no dims.
    let rank0 = [&good[..embed], &0u32.to_le_bytes(), &good[embed + 4 + 16..]].concat();
    let cases = [
        ("no dimensions", load_bytes(&rank0)),
        // 2^32 x 2^32 elements wrap to 0 in 64 bits.
        (
            "too many elements",
            patch(
                embed + 4,
                &[(1u64 << 32).to_le_bytes(), (1u64 << 32).to_le_bytes()].concat(),
            ),
        ),
        // The norm moved onto the embedding's bytes.
        ("overlaps", patch(norm + 4 + 16 + 4, &0u64.to_le_bytes())),
        (
            "not a multiple of the alignment",
            patch(norm + 4 + 16 + 4, &8u64.to_le_bytes()),
        ),
        // The embedding's type flipped from F32 (0) to F16 (1): half the bytes it was written with.
        ("leaves a gap", patch(embed + 4 + 16, &1u32.to_le_bytes())),
    ];
    for (expected, err) in cases {
        assert!(err.contains(expected), "{expected}: {err}");
    }
    let mut twice = gguf_bytes(
        &llama_metadata(&[]),
        &[EMBED, ("token_embd.weighX", (64, 32))],
    );
    let renamed = after_name(&twice, "token_embd.weighX");
    twice[renamed - 1] = b't';
    let err = load_bytes(&twice);
    assert!(err.contains("`token_embd.weight` is listed twice"), "{err}");
}

#[test]
fn a_huge_metadata_array_is_refused_before_it_is_held_in_memory() {
    let bytes = vec![gguf_file::Value::U8(0); 3 << 20];
    let metadata = llama_metadata(&[("general.junk", gguf_file::Value::Array(bytes))]);
    let gguf = gguf_bytes(&metadata, &[EMBED]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("junk.gguf");
    std::fs::write(&path, &gguf).unwrap();
    // 3 MiB of bytes would be 96 MiB of values; the file (3 MiB) plus 64 MiB is the limit.
    let err = load(&path).to_string();
    assert!(
        err.contains("general.junk") && err.contains("in memory"),
        "{err}"
    );
}

#[test]
fn rope_and_norm_figures_outside_any_trained_model_are_refused() {
    use gguf_file::Value::{F32, String as Text};
    let cases = [
        ("llama.rope.freq_base", F32(f32::INFINITY), "rope theta"),
        ("llama.rope.freq_base", F32(1e-30), "rope theta"),
        ("llama.rope.freq_base", F32(f32::NAN), "rope theta"),
        (
            "llama.attention.layer_norm_rms_epsilon",
            F32(-1.0),
            "epsilon",
        ),
    ];
    for (key, value, expected) in cases {
        let err = load_bytes(&gguf_bytes(&llama_metadata(&[(key, value)]), &[EMBED]));
        assert!(err.contains(expected), "{key}: {err}");
    }
    let linear = llama_metadata(&[
        ("llama.rope.scaling.type", Text("linear".to_owned())),
        ("llama.rope.scaling.factor", F32(0.0)),
    ]);
    let err = load_bytes(&gguf_bytes(&linear, &[EMBED]));
    assert!(err.contains("factor 0"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let mut config: serde_json::Value = serde_json::from_str(&config_json("llama")).unwrap();
    for (key, value, expected) in [
        ("rope_scaling", serde_json::json!(5), "rope_scaling is 5"),
        ("rope_theta", serde_json::json!(1e39), "rope theta"),
        ("rope_theta", serde_json::json!(1e-30), "rope theta"),
    ] {
        let mut changed = config.clone();
        changed[key] = value;
        std::fs::write(dir.path().join("config.json"), changed.to_string()).unwrap();
        let err = load(dir.path()).to_string();
        assert!(err.contains(expected), "{key}: {err}");
    }
    config["num_hidden_layers"] = serde_json::json!(1u64 << 62);
    std::fs::write(dir.path().join("config.json"), config.to_string()).unwrap();
    let embed = Tensor::zeros((64, 32), candle_core::DType::F32, &Device::Cpu).unwrap();
    let tensors = std::collections::HashMap::from([("model.embed_tokens.weight", embed)]);
    candle_core::safetensors::save(&tensors, dir.path().join("model.safetensors")).unwrap();
    let err = samplab::model::memory::estimate(dir.path(), &candle_core::Device::Cpu, 0)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("config.json") && err.contains("`num_hidden_layers`"),
        "{err}"
    );
    let err = load(dir.path()).to_string();
    assert!(
        err.contains("config.json") && err.contains("`num_hidden_layers`"),
        "{err}"
    );
}

#[test]
fn the_same_tensor_in_two_shards_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.json"), config_json("llama")).unwrap();
    let embed = Tensor::zeros((64, 32), candle_core::DType::F32, &Device::Cpu).unwrap();
    for shard in ["model-00001.safetensors", "model-00002.safetensors"] {
        let tensors =
            std::collections::HashMap::from([("model.embed_tokens.weight", embed.clone())]);
        candle_core::safetensors::save(&tensors, dir.path().join(shard)).unwrap();
    }
    let err = load(dir.path()).to_string();
    assert!(
        err.contains("model-00002") && err.contains("also in") && err.contains("model-00001"),
        "{err}"
    );
}

#[cfg(unix)]
#[test]
fn fifos_in_place_of_model_files_are_refused_not_waited_on() {
    let mkfifo = |path: &Path| {
        let made = std::process::Command::new("mkfifo").arg(path).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo failed");
    };
    let dir = tempfile::tempdir().unwrap();
    let gguf = dir.path().join("x.gguf");
    mkfifo(&gguf);
    let err = load(&gguf).to_string();
    assert!(err.contains("x.gguf") && err.contains("FIFO"), "{err}");

    let hf = dir.path().join("hf");
    std::fs::create_dir(&hf).unwrap();
    mkfifo(&hf.join("config.json"));
    let err = load(&hf).to_string();
    assert!(err.contains("config.json") && err.contains("FIFO"), "{err}");
    std::fs::remove_file(hf.join("config.json")).unwrap();
    std::fs::write(hf.join("config.json"), config_json("llama")).unwrap();
    mkfifo(&hf.join("model.safetensors"));
    let err = load(&hf).to_string();
    assert!(
        err.contains("model.safetensors") && err.contains("FIFO"),
        "{err}"
    );
    let err = samplab::model::memory::estimate(&hf, &candle_core::Device::Cpu, 0)
        .unwrap_err()
        .to_string();
    assert!(err.contains("FIFO"), "{err}");
}

/// samplab-tiny's files copied into a directory of its own, to break one of them.
fn tiny_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/samplab-tiny");
    for entry in std::fs::read_dir(source).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
    }
    dir
}

fn load_engine(dir: &Path) -> String {
    let hub = samplab::model::source::HubSettings {
        offline: true,
        ..samplab::model::source::HubSettings::new(std::env::temp_dir())
    };
    let spec = dir.to_str().unwrap();
    match samplab::engine::load::load_model(spec, &hub, DeviceChoice::Cpu, &mut |_| {}) {
        Ok(_) => panic!("loading {spec} must fail"),
        Err(e) => format!("{e:#}"),
    }
}

#[test]
fn a_tokenizer_json_with_ids_beyond_the_vocabulary_is_refused() {
    let dir = tiny_copy();
    let path = dir.path().join("tokenizer.json");
    let mut tokenizer: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let extra = serde_json::json!({
        "id": 1500, "content": "<extra>", "single_word": false, "lstrip": false,
        "rstrip": false, "normalized": false, "special": true
    });
    tokenizer["added_tokens"]
        .as_array_mut()
        .unwrap()
        .push(extra);
    std::fs::write(&path, tokenizer.to_string()).unwrap();
    let err = load_engine(dir.path());
    assert!(
        err.contains("tokenizer.json") && err.contains("1025 tokens") && err.contains("has 1024"),
        "{err}"
    );
}

#[cfg(unix)]
#[test]
fn a_fifo_as_tokenizer_json_is_refused_not_waited_on() {
    let dir = tiny_copy();
    let path = dir.path().join("tokenizer.json");
    std::fs::remove_file(&path).unwrap();
    let made = std::process::Command::new("mkfifo").arg(&path).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo failed");
    let err = load_engine(dir.path());
    assert!(
        err.contains("tokenizer.json") && err.contains("FIFO"),
        "{err}"
    );
}

#[test]
fn a_gguf_whose_tokenizer_is_smaller_than_its_vocabulary_is_refused() {
    let Some(model) = common::test_model() else {
        return;
    };
    let mut reader = std::fs::File::open(&model).unwrap();
    let content = gguf_file::Content::read(&mut reader).unwrap();
    let tensors: Vec<(String, QTensor)> = content
        .tensor_infos
        .keys()
        .map(|name| {
            let t = content.tensor(&mut reader, name, &Device::Cpu).unwrap();
            (name.clone(), t)
        })
        .collect();
    let mut metadata = content.metadata.clone();
    for key in [
        "tokenizer.ggml.tokens",
        "tokenizer.ggml.scores",
        "tokenizer.ggml.token_type",
    ] {
        if let Some(gguf_file::Value::Array(values)) = metadata.get_mut(key) {
            values.truncate(400);
        }
    }
    let metadata: Vec<(&str, &gguf_file::Value)> =
        metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("short-vocab.gguf");
    let mut file = std::fs::File::create(&path).unwrap();
    gguf_file::write(&mut file, &metadata, &tensors).unwrap();
    let err = load_engine(&path);
    assert!(
        err.contains("short-vocab.gguf") && err.contains("400 tokens") && err.contains("has 512"),
        "{err}"
    );
}

#[test]
fn llama3_rope_scaling_with_equal_frequency_bounds_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut config: serde_json::Value = serde_json::from_str(&config_json("llama")).unwrap();
    config["rope_scaling"] = serde_json::json!({
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 1.0, "original_max_position_embeddings": 8192
    });
    std::fs::write(dir.path().join("config.json"), config.to_string()).unwrap();
    let err = load(dir.path()).to_string();
    assert!(err.contains("high_freq_factor"), "{err}");
}
