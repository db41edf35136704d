//! Shared helpers for integration tests.

use samplab::model::device::DeviceChoice;
use std::path::PathBuf;
use std::process::{Command, Output};

pub mod chromium;
pub mod fake_hub;
pub mod fake_model;
pub mod fake_modelscope;
pub mod fake_openai;
pub mod tui;

/// The real `samplab` binary run with `args`, as a user runs it.
pub fn samplab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_samplab"))
        .args(args)
        .output()
        .expect("the samplab binary runs")
}

/// `samplab sample --json` after `prompt` on every model of `models` (compared, so each
/// sample is scored by the others), with `--set` values `sets`: one response per model.
pub fn compare(
    prompt: &str,
    models: &[&std::path::Path],
    sets: &[&str],
) -> Vec<samplab::response::SampleResponse> {
    let mut command = Command::new(env!("CARGO_BIN_EXE_samplab"));
    command.args(["sample", "--prompt", prompt, "--json"]);
    for model in models {
        command.arg("--model").arg(model);
    }
    for set in sets {
        command.args(["--set", set]);
    }
    let out = command.output().expect("the samplab binary runs");
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// samplab-tiny's files (config.json, model.safetensors, tokenizer.json…), as a repository
/// on a fake Hub or ModelScope.
pub fn tiny_safetensors() -> Vec<(String, Vec<u8>)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/samplab-tiny");
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

/// What a run of the binary wrote to stderr.
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The inspector's question about `sample` (a run's own sample, not a branch) at `step`: what
/// the chain did to `ids` there.
pub fn trace_request(
    sample: &samplab::response::Trajectory,
    step: usize,
    params: &samplab::params::SamplingParams,
    ids: Vec<u32>,
) -> samplab::engine::TraceRequest {
    samplab::engine::TraceRequest {
        run_id: 1,
        sample: sample.index,
        seed: sample.seed,
        branch: None,
        tokens: sample.token_ids[..=step].to_vec(),
        params: params.clone(),
        ids,
    }
}

/// The stories260K test model: `$SAMPLAB_TEST_MODEL`, or `../shared/models/stories260K/` beside the
/// repository. `None` skips the test, unless `SAMPLAB_REQUIRE_TEST_MODEL=1` (set by CI), which fails it.
pub fn test_model() -> Option<PathBuf> {
    shared_model("test", "SAMPLAB_TEST_MODEL", "stories260K/stories260K.gguf")
}

/// stories260K loaded as the engine loads it (tokenizer, replay store), or `None` to skip.
pub fn loaded_test_model() -> Option<samplab::engine::LoadedModel> {
    loaded_test_model_on(DeviceChoice::Cpu)
}

/// [`loaded_test_model`] on `device`.
pub fn loaded_test_model_on(device: DeviceChoice) -> Option<samplab::engine::LoadedModel> {
    Some(load_at(&test_model()?, device))
}

/// The real Gemma 3 270M loaded as the engine loads it, or `None` to skip (see [`gemma_model`]).
pub fn loaded_gemma() -> Option<samplab::engine::LoadedModel> {
    Some(load_at(&gemma_model()?, DeviceChoice::Cpu))
}

/// The real SmolLM2 Q4_1 loaded as the engine loads it, or `None` to skip (see [`real_model`]).
pub fn loaded_real_model() -> Option<samplab::engine::LoadedModel> {
    Some(load_at(&real_model()?, DeviceChoice::Cpu))
}

/// A random-weight family fixture (`tests/fixtures/archs/FAMILY/model.gguf`) loaded as the
/// engine loads it.
pub fn loaded_fixture(family: &str) -> samplab::engine::LoadedModel {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/archs")
        .join(family)
        .join("model.gguf");
    load_at(&path, DeviceChoice::Cpu)
}

/// The model file at `path` loaded as the engine loads it, offline.
pub fn load_at(path: &std::path::Path, device: DeviceChoice) -> samplab::engine::LoadedModel {
    let hub = samplab::model::source::HubSettings {
        offline: true,
        ..samplab::model::source::HubSettings::new(std::env::temp_dir())
    };
    let spec = path.to_str().expect("a UTF-8 path");
    samplab::engine::load::load_model(spec, &hub, device, &mut |_| {})
        .unwrap_or_else(|e| panic!("{spec} loads: {e:#}"))
}

/// The real SmolLM2-135M-Instruct Q4_1 file: `$SAMPLAB_REAL_MODEL`, or
/// `../shared/models/smollm2-135m-instruct/` beside the repository; skipped when absent
/// unless `SAMPLAB_REQUIRE_TEST_MODEL=1`, as [`test_model`].
pub fn real_model() -> Option<PathBuf> {
    shared_model(
        "real",
        "SAMPLAB_REAL_MODEL",
        "smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf",
    )
}

/// The real Gemma 3 270M Q4_K_M: `$SAMPLAB_GEMMA_MODEL`, or where `scripts/fetch-gemma.sh`
/// puts it (`~/.cache/samplab/gemma3-270m/`); skipped when absent unless
/// `SAMPLAB_REQUIRE_TEST_MODEL=1`, as [`test_model`].
pub fn gemma_model() -> Option<PathBuf> {
    let default = std::env::var_os("HOME").map(|home| {
        PathBuf::from(home).join(".cache/samplab/gemma3-270m/gemma-3-270m-q4_k_m.gguf")
    });
    model_at(
        "Gemma 3",
        "SAMPLAB_GEMMA_MODEL",
        default,
        "gemma-3-270m-q4_k_m.gguf (scripts/fetch-gemma.sh fetches it)",
    )
}

/// A model file at `$var`, else at `file` under `../shared/models/`; what `SAMPLAB_REQUIRE_TEST_MODEL`
/// makes of a missing one is described at [`test_model`].
fn shared_model(what: &str, var: &str, file: &str) -> Option<PathBuf> {
    let shared = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/models")
        .join(file);
    model_at(
        what,
        var,
        Some(shared),
        file.rsplit('/').next().unwrap_or(file),
    )
}

/// `$var`, else `default`: the file, or `None` (said) to skip, or a panic where
/// `SAMPLAB_REQUIRE_TEST_MODEL=1`.
fn model_at(what: &str, var: &str, default: Option<PathBuf>, name: &str) -> Option<PathBuf> {
    let path = std::env::var_os(var)
        .map(PathBuf::from)
        .or(default)
        .unwrap_or_default();
    if path.is_file() {
        return Some(path);
    }
    if std::env::var("SAMPLAB_REQUIRE_TEST_MODEL").is_ok_and(|v| v == "1") {
        panic!(
            "{what} model not found at {}; set {var} to {name}",
            path.display()
        );
    }
    eprintln!("skipping: {what} model not found at {}", path.display());
    None
}

/// The Python that has llama-cpp-python with its server (`pip install
/// 'llama-cpp-python[server]'`), named by `$SAMPLAB_LLAMA_SERVER_PYTHON`, which `.ci/run` sets
/// after installing it; `None` (said) skips the test, except in CI.
pub fn llama_cpp_python() -> Option<std::ffi::OsString> {
    const VAR: &str = "SAMPLAB_LLAMA_SERVER_PYTHON";
    let python = std::env::var_os(VAR);
    if python.is_none() {
        assert!(
            std::env::var("SAMPLAB_REQUIRE_TEST_MODEL").as_deref() != Ok("1"),
            "{VAR} is not set; CI must install llama-cpp-python[server] and set it"
        );
        eprintln!("skipping: {VAR} is not set (a Python with llama-cpp-python)");
    }
    python
}

/// llama.cpp's output on the test model (reference.json beside it).
pub fn reference() -> Option<serde_json::Value> {
    let model = test_model()?;
    let text = std::fs::read_to_string(model.with_file_name("reference.json"))
        .expect("reference.json lies beside the test model");
    Some(serde_json::from_str(&text).expect("reference.json is JSON"))
}

/// The mean of a sample's logprobs, as a cross-score reports it.
pub fn mean_logprob(logprobs: &[f32]) -> f64 {
    logprobs.iter().map(|&l| f64::from(l)).sum::<f64>() / logprobs.len() as f64
}

pub fn log_softmax(logits: &[f32]) -> Vec<f32> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let log_sum = logits.iter().map(|&l| (l - max).exp()).sum::<f32>().ln() + max;
    logits.iter().map(|&l| l - log_sum).collect()
}

/// The first index of the largest logit.
pub fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &l) in logits.iter().enumerate() {
        if l > logits[best] {
            best = i;
        }
    }
    best as u32
}

/// A JSON array of token ids.
pub fn ids(value: &serde_json::Value) -> Vec<u32> {
    value
        .as_array()
        .expect("an array")
        .iter()
        .map(|v| v.as_u64().expect("an id") as u32)
        .collect()
}

/// A JSON array of numbers and nulls.
pub fn floats(value: &serde_json::Value) -> Vec<Option<f64>> {
    value
        .as_array()
        .expect("an array")
        .iter()
        .map(|v| v.as_f64())
        .collect()
}

/// Lower-case letters, a few signs, space and newline as tokens after `<s>` and `</s>`, and
/// `<|im_start|>` and `<|im_end|>` as specials that plain text cannot produce (as a GGUF
/// vocabulary makes them): chat templates render into it one character a token.
pub fn chat_char_tokenizer() -> tokenizers::Tokenizer {
    let mut pieces = vec!["<s>", "</s>"];
    let chars: Vec<String> = "abcdefghijklmnopqrstuvwxyz|<>_ \n"
        .chars()
        .map(String::from)
        .collect();
    pieces.extend(chars.iter().map(String::as_str));
    let mut tokenizer = piece_tokenizer(&pieces);
    tokenizer
        .add_special_tokens([
            tokenizers::AddedToken::from("<|im_start|>", true),
            tokenizers::AddedToken::from("<|im_end|>", true),
        ])
        .unwrap();
    tokenizer.set_encode_special_tokens(true);
    tokenizer
}

/// A tokenizer whose tokens are exactly `pieces` (ids by position, no merges), with `pieces[0]`
/// the BOS added to every encoding and a decoder that joins pieces as they are.
pub fn piece_tokenizer(pieces: &[&str]) -> tokenizers::Tokenizer {
    use tokenizers::decoders::fuse::Fuse;
    use tokenizers::models::bpe::{BPE, Vocab};
    use tokenizers::processors::template::TemplateProcessing;
    let vocab: Vocab = pieces
        .iter()
        .enumerate()
        .map(|(i, t)| (t.to_string(), i as u32))
        .collect();
    let bpe = BPE::builder()
        .vocab_and_merges(vocab, vec![])
        .build()
        .unwrap();
    let mut tokenizer = tokenizers::Tokenizer::new(bpe);
    tokenizer.with_decoder(Some(Fuse::new()));
    let bos = TemplateProcessing::builder()
        .try_single(format!("{} $A", pieces[0]))
        .unwrap()
        .special_tokens(vec![(pieces[0], 0)])
        .build()
        .unwrap();
    tokenizer.with_post_processor(Some(bos));
    tokenizer
}

/// A random-weight llama small enough to write in a test, with a GPT-2-style byte vocabulary
/// unlike stories260K's; files written with different seeds share that vocabulary (it does not
/// depend on the weights) but not their distributions.
pub const TINY_LLAMA: samplab::model::source::synthetic::SyntheticSpec =
    samplab::model::source::synthetic::SyntheticSpec {
        name: "tiny",
        architecture: "llama",
        experts: None,
        delta_net: None,
        hidden_size: 64,
        num_layers: 2,
        num_heads: 4,
        num_kv_heads: 2,
        head_dim: None,
        intermediate_size: 128,
        vocab_size: 320,
        context_length: 256,
        rope_theta: 10_000.0,
        tie_word_embeddings: true,
    };

/// Writes a GGUF file of `metadata` (a file's own, altered) and `tensors` at `path`.
pub fn write_gguf(
    path: &std::path::Path,
    metadata: &std::collections::HashMap<String, candle_core::quantized::gguf_file::Value>,
    tensors: &[(String, candle_core::quantized::QTensor)],
) {
    let metadata: Vec<_> = metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let tensors: Vec<_> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    candle_core::quantized::gguf_file::write(
        &mut std::fs::File::create(path).unwrap(),
        &metadata,
        &tensors,
    )
    .unwrap();
}
