//! Arbitrary and mutated bytes into every parser of a file a user or a download controls: GGUF
//! header and tensor table, tokenizer metadata, config.json, tokenizer.json, preset and theme
//! YAML, chat templates. Each may refuse its input but must not panic, hang or allocate without
//! bound. The seeds are the hostile cases of issue 13; the case counts keep each property to a
//! few seconds in a debug build.

use candle_core::quantized::gguf_file::{self, Content, Value, VersionedMagic};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use proptest::prelude::*;
use samplab::model::Model;
use samplab::model::text::chat_template::ChatTemplate;
use samplab::model::text::gguf_tokenizer::tokenizer_from_gguf;
use samplab::params::SamplingParams;
use samplab::tui::{Theme, parse_theme};
use std::collections::HashMap;

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// A valid one-layer llama GGUF header with two tensors, the seed the byte mutations start from.
fn seed_gguf() -> Vec<u8> {
    let u32v = Value::U32;
    let metadata = [
        ("general.architecture", Value::String("llama".into())),
        ("general.alignment", u32v(32)),
        ("llama.embedding_length", u32v(32)),
        ("llama.attention.head_count", u32v(4)),
        ("llama.feed_forward_length", u32v(48)),
        ("llama.block_count", u32v(1)),
        ("llama.context_length", u32v(64)),
        ("llama.attention.layer_norm_rms_epsilon", Value::F32(1e-5)),
        ("llama.rope.freq_base", Value::F32(10000.0)),
        (
            "tokenizer.ggml.tokens",
            Value::Array(vec![Value::String("a".into()); 3]),
        ),
    ];
    let tensor = |rows, cols| {
        let t = Tensor::zeros((rows, cols), candle_core::DType::F32, &Device::Cpu).unwrap();
        QTensor::quantize(&t, GgmlDType::F32).unwrap()
    };
    let (embed, norm) = (tensor(64, 32), tensor(1, 32));
    let metadata: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (*k, v)).collect();
    let mut out = std::io::Cursor::new(Vec::new());
    gguf_file::write(
        &mut out,
        &metadata,
        &[("token_embd.weight", &embed), ("output_norm.weight", &norm)],
    )
    .unwrap();
    out.into_inner()
}

/// Overwrites at positions inside the header (where the structure is), some with extreme
/// values: lengths of 2^61, zeros, all ones.
fn mutations() -> impl Strategy<Value = Vec<(usize, u8)>> {
    let byte = prop_oneof![Just(0u8), Just(0xff), Just(0x20), any::<u8>()];
    prop::collection::vec((0usize..700, byte), 1..6)
}

fn load_bytes(bytes: &[u8]) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fuzz.gguf");
    std::fs::write(&path, bytes).unwrap();
    let _ = Model::load(&path, &Device::Cpu);
}

proptest! {
    #![proptest_config(config(1000))]

    #[test]
    fn gguf_headers_and_tensor_tables(edits in mutations(), cut in prop::option::of(0usize..800)) {
        let mut bytes = seed_gguf();
        for (at, value) in edits {
            if let Some(b) = bytes.get_mut(at) {
                *b = value;
            }
        }
        if let Some(cut) = cut {
            bytes.truncate(cut);
        }
        load_bytes(&bytes);
    }

    #[test]
    fn gguf_arbitrary_bytes(tail in prop::collection::vec(any::<u8>(), 0..300)) {
        load_bytes(&[b"GGUF\x03\0\0\0".as_slice(), &tail].concat());
    }
}

/// Small metadata values of every kind, nested at most once.
fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        any::<u8>().prop_map(Value::U8),
        any::<i32>().prop_map(Value::I32),
        prop_oneof![Just(0u32), Just(1), Just(2), Just(u32::MAX), any::<u32>()]
            .prop_map(Value::U32),
        any::<i64>().prop_map(Value::I64),
        any::<f32>().prop_map(Value::F32),
        any::<bool>().prop_map(Value::Bool),
        "[a-c <>|▁\\x00-\\x1f]{0,4}".prop_map(Value::String),
    ];
    leaf.prop_recursive(1, 16, 8, |inner| {
        prop::collection::vec(inner, 0..8).prop_map(Value::Array)
    })
}

fn tokens() -> impl Strategy<Value = Value> {
    prop::collection::vec("[a-c ▁<>/s]{0,3}|<0x[0-9A-F]{2}>", 0..12)
        .prop_map(|ts| Value::Array(ts.into_iter().map(Value::String).collect()))
}

proptest! {
    #![proptest_config(config(1000))]

    #[test]
    fn gguf_tokenizer_metadata(
        model in prop_oneof![Just("llama"), Just("gpt2"), Just("bert")],
        tokens in tokens(),
        extra in prop::collection::vec((0usize..9, value()), 0..5),
        text in "[a-c <>▁\\n]{0,12}",
    ) {
        const KEYS: [&str; 9] = [
            "tokenizer.ggml.scores",
            "tokenizer.ggml.token_type",
            "tokenizer.ggml.merges",
            "tokenizer.ggml.bos_token_id",
            "tokenizer.ggml.eos_token_id",
            "tokenizer.ggml.unknown_token_id",
            "tokenizer.ggml.add_bos_token",
            "tokenizer.ggml.add_space_prefix",
            "tokenizer.ggml.pre",
        ];
        let mut metadata = HashMap::from([
            ("tokenizer.ggml.model".to_owned(), Value::String(model.into())),
            ("tokenizer.ggml.tokens".to_owned(), tokens),
        ]);
        for (key, value) in extra {
            metadata.insert(KEYS[key].to_owned(), value);
        }
        let content = Content {
            magic: VersionedMagic::GgufV3,
            metadata,
            tensor_infos: HashMap::new(),
            tensor_data_offset: 0,
        };
        if let Ok(tok) = tokenizer_from_gguf(&content)
            && let Ok(ids) = tok.encode_prompt(&text)
        {
            let _ = tok.tokenizer.decode(&ids, false);
        }
    }
}

/// JSON values that configs get wrong: extreme numbers, wrong types, nesting.
fn json() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::json;
    let leaf = prop_oneof![
        Just(json!(null)),
        Just(json!(0)),
        Just(json!(-1)),
        Just(json!(1u64 << 62)),
        Just(json!(u64::MAX)),
        Just(json!(1e39)),
        Just(json!(1e-30)),
        Just(json!(5)),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|x| json!(x)),
        "[a-z_]{0,8}".prop_map(|s| json!(s)),
    ];
    leaf.prop_recursive(2, 12, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::Array),
            prop::collection::hash_map("[a-z_]{1,8}|type|rope_type|factor", inner, 0..4)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(config(500))]

    #[test]
    fn hf_config_json(changes in prop::collection::vec((0usize..14, json()), 1..4)) {
        const KEYS: [&str; 14] = [
            "model_type", "hidden_size", "intermediate_size", "num_hidden_layers",
            "num_attention_heads", "num_key_value_heads", "head_dim", "vocab_size",
            "max_position_embeddings", "rms_norm_eps", "rope_theta", "rope_scaling",
            "sliding_window", "eos_token_id",
        ];
        let mut config = serde_json::json!({
            "model_type": "llama", "hidden_size": 32, "intermediate_size": 48,
            "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 64,
            "max_position_embeddings": 64, "rms_norm_eps": 1e-6,
        });
        for (key, value) in changes {
            config[KEYS[key]] = value;
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.json"), config.to_string()).unwrap();
        let _ = Model::load(dir.path(), &Device::Cpu);
        let _ = samplab::model::memory::estimate(
            dir.path(),
            &candle_core::Device::Cpu,
            samplab::model::DEFAULT_REPLAY_BUDGET,
        );
    }
}

/// samplab-tiny's tokenizer.json, the seed of its mutations.
fn tiny_tokenizer() -> serde_json::Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/models/samplab-tiny/tokenizer.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

proptest! {
    #![proptest_config(config(200))]

    #[test]
    fn tokenizer_json(
        changes in prop::collection::vec((0usize..6, json()), 1..3),
        text in "[a-z .!\\n]{0,16}",
    ) {
        const PATHS: [&str; 6] = [
            "/model/type", "/model/unk_token", "/model/byte_fallback",
            "/pre_tokenizer", "/decoder", "/post_processor",
        ];
        let mut tokenizer = tiny_tokenizer();
        for (path, value) in changes {
            if let Some(slot) = tokenizer.pointer_mut(PATHS[path]) {
                *slot = value;
            }
        }
        // Not an empty list, nor with specials skipped (which can empty it): tokenizers
        // 0.23.2's BPE decoder computes `len - 1` of it, an overflow panic in debug builds (a
        // wrap, harmless, in release; in samplab's engine a contained error either way).
        if let Ok(tok) = tokenizers::Tokenizer::from_bytes(tokenizer.to_string())
            && let Ok(encoding) = tok.encode(text, true)
            && !encoding.get_ids().is_empty()
        {
            let _ = tok.decode(encoding.get_ids(), false);
        }
    }
}

/// YAML-ish text built from the pieces that break parsers: nesting, tags, anchors, escapes.
fn yaml_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("temperature: "),
        Just("stop: "),
        Just("border: "),
        Just("heatmap:\n"),
        Just("- "),
        Just("  "),
        Just("["),
        Just("]"),
        Just("{"),
        Just("}"),
        Just(", "),
        Just("!!binary aGVsbG8="),
        Just("!custom "),
        Just("!!python/object:os.system "),
        Just("&a "),
        Just("*a "),
        Just("<<: *a\n"),
        Just("\"\\e[2J\""),
        Just("'q'"),
        Just("0.7"),
        Just("1e400"),
        Just("-1"),
        Just("~"),
        Just("\n"),
        Just("# c\n"),
        Just("fg: red"),
        Just("at: 0.5"),
        Just("\x1b]0;x\x07"),
        Just("? "),
        Just(": "),
    ];
    prop::collection::vec(piece, 0..40).prop_map(|pieces| pieces.concat())
}

proptest! {
    #![proptest_config(config(1000))]

    #[test]
    fn preset_yaml(text in yaml_text()) {
        let _ = SamplingParams::from_yaml(&text);
    }

    #[test]
    fn theme_yaml(text in yaml_text()) {
        let _ = parse_theme(&text, "fuzz.yaml", &Theme::dark());
    }

    #[test]
    fn arbitrary_yaml_bytes(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let text = String::from_utf8_lossy(&bytes);
        let _ = SamplingParams::from_yaml(&text);
        let _ = parse_theme(&text, "fuzz.yaml", &Theme::dark());
    }
}

#[test]
fn deep_yaml_seeds_are_refused_quickly() {
    let start = std::time::Instant::now();
    for deep in [
        format!("stop: {}{}", "[".repeat(100_000), "]".repeat(100_000)),
        format!("{}x", "- ".repeat(100_000)),
        format!("border: {}", "{a: ".repeat(50_000)),
    ] {
        assert!(SamplingParams::from_yaml(&deep).is_err());
        assert!(parse_theme(&deep, "deep.yaml", &Theme::dark()).is_err());
    }
    assert!(
        start.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
}

/// Jinja built from statements, loops, filters and the context's names.
fn template_source() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("{% for m in messages %}"),
        Just("{% endfor %}"),
        Just("{% for i in range(100000) %}"),
        Just("{{ m['content'] }}"),
        Just("{{ m.role }}"),
        Just("{{ bos_token }}"),
        Just("{% if add_generation_prompt %}"),
        Just("{% endif %}"),
        Just("{% else %}"),
        Just("{{ 'x' * 100000 }}"),
        Just("{{ messages[0]['content'].strip() }}"),
        Just("{{ raise_exception('no') }}"),
        Just("{% set ns = namespace(a=1) %}"),
        Just("{{ ns.a }}"),
        Just("{{ (messages|length) // 0 }}"),
        Just("{{ 1 / 0 }}"),
        Just("{{ messages[99] }}"),
        Just("{{ '%s' % 1 }}"),
        Just("{{ x.y.z }}"),
        Just("text"),
        Just("{%"),
        Just("}}"),
        Just("{{ range(9999999999)|list }}"),
        Just("{{ messages|tojson }}"),
        Just("{% break %}"),
        Just("{{ 'a'.split('') }}"),
    ];
    prop::collection::vec(piece, 0..12).prop_map(|pieces| pieces.concat())
}

proptest! {
    #![proptest_config(config(300))]

    #[test]
    fn chat_template_rendering(source in template_source(), message in "[a-z <|>]{0,12}") {
        let tokens = [("bos_token".to_owned(), "<s>".to_owned())].into();
        let template = ChatTemplate::new(source, tokens);
        let _ = template.render(&message);
    }
}
