//! Every export target's whole snippet for a range of settings, raw and in chat, against reviewed
//! copies in `tests/fixtures/export_snapshots/`: a change to any name, value or note shows up as
//! a diff to review. `SAMPLAB_UPDATE_SNAPSHOTS=1 cargo test --test suite export_snapshots`
//! rewrites the copies after a deliberate change.

use samplab::engine::BackendKind;
use samplab::export::{ExportContext, ExportFormat, export};
use samplab::model::text::chat_template::Message;
use samplab::params::SamplingParams;
use std::path::PathBuf;

/// (name, YAML): the defaults, each profile with its own knobs moved, greedy, and the fields
/// whose values need a form of their own in some target.
const SETTINGS: &[(&str, &str)] = &[
    ("defaults", ""),
    (
        "vllm-every-field",
        "temperature: 0.7\ntop_k: 0\ntop_p: 0.9\nmin_p: 0.05\nrepetition_penalty: 1.1\n\
         max_tokens: 64\nseed: 7\nstop: [\"\\n\\n\", 13]\ninclude_stop_str_in_output: true\n\
         num_samples: 4\nlogprobs: 5\nprompt_logprobs: 1\npresence_penalty: 0.5\n\
         frequency_penalty: -0.25\nmin_tokens: 3\nignore_eos: true\nlogit_bias: {13: -100, 42: 2.5}\n\
         bad_words: [\"darn\", \"heck\"]\nallowed_token_ids: [1, 2, 3, 13, 42]\nwatch: [\" Yes\", 13]\n\
         repetition_detection: {max_pattern_size: 8, min_count: 3}\nlogprobs_mode: processed_logprobs",
    ),
    (
        "llama-cpp-chain",
        "engine: llama.cpp\ntemperature: 0.8\ntop_k: 40\ntop_p: 0.95\nmin_p: 0.05\n\
         repetition_penalty: 1.1\nrepeat_last_n: 128\npresence_penalty: 0.1\ntypical_p: 0.9\n\
         top_n_sigma: 1.5\nxtc_probability: 0.5\nxtc_threshold: 0.2\ndry_multiplier: 0.8\n\
         dry_base: 2.0\ndry_allowed_length: 3\ndry_penalty_last_n: 256\n\
         dry_sequence_breakers: [\"\\n\", \"it's\"]\nmirostat: 2\nmirostat_tau: 4.5\n\
         mirostat_eta: 0.2\ndynatemp_range: 0.3\ndynatemp_exponent: 1.5\nmin_keep: 2\n\
         samplers: [top_k, temperature]\nmax_tokens: 32\nseed: 11\nlogit_bias: {5: 1.5}",
    ),
    (
        "transformers-own",
        "engine: transformers\ntemperature: 1.2\ntop_k: 50\ntypical_p: 0.8\ntop_h: 0.7\nmin_tokens: 2\n\
         bad_words: [\"x\"]\nlogit_bias: {7: -3}\nmax_tokens: 16\nseed: 5000000000",
    ),
    (
        "adaptive-p",
        "engine: llama.cpp\ntemperature: 0.9\nmin_p: 0.05\nadaptive_target: 0.25\n\
         adaptive_decay: 0.8\nseed: 3",
    ),
    (
        "greedy",
        "temperature: 0\nnum_samples: 3\nlogprobs: 0\ntop_k: 5\nstop: [\"The End\"]",
    ),
    (
        "constraint",
        "structured_outputs: {regex: \"[0-9]+\"}\nmax_tokens: 8",
    ),
];

const FORMATS: &[(&str, ExportFormat)] = &[
    ("vllm", ExportFormat::Vllm),
    ("transformers", ExportFormat::Transformers),
    ("openai", ExportFormat::Openai),
    ("llama-cpp", ExportFormat::Llamacpp),
    ("twinkle", ExportFormat::Twinkle),
];

fn snapshot_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/export_snapshots")
}

#[test]
fn every_export_equals_its_reviewed_snapshot() {
    let update = std::env::var_os("SAMPLAB_UPDATE_SNAPSHOTS").is_some();
    let messages = [
        Message::new("system", "Be brief."),
        Message::new("user", "Hi"),
        Message::new("assistant", "Hello!"),
        Message::new("user", "Tell me a story."),
    ];
    let raw = ExportContext::raw("Once upon a time", "stories260K.gguf");
    let chat = ExportContext {
        messages: Some(&messages),
        backend: Some(BackendKind::Samplab),
        ..ExportContext::raw("Tell me a story.", "HuggingFaceTB/SmolLM2-135M-Instruct")
    };
    let mut mismatched = Vec::new();
    for (setting, yaml) in SETTINGS {
        let params = SamplingParams::from_yaml(yaml).expect(setting);
        params.validate().expect(setting);
        for (format_name, format) in FORMATS {
            for (kind, ctx) in [("raw", &raw), ("chat", &chat)] {
                let name = format!("{setting}.{format_name}.{kind}.txt");
                let path = snapshot_dir().join(&name);
                let text = export(*format, &params, ctx);
                if update {
                    std::fs::create_dir_all(snapshot_dir()).unwrap();
                    std::fs::write(&path, &text).unwrap();
                    continue;
                }
                let expected = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                if text != expected {
                    mismatched.push(format!("--- {name}\n{text}"));
                }
            }
        }
    }
    assert!(
        mismatched.is_empty(),
        "{} snapshots differ (SAMPLAB_UPDATE_SNAPSHOTS=1 rewrites them after review):\n{}",
        mismatched.len(),
        mismatched.join("\n")
    );
}
