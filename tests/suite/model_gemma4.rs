//! Gemma 4 on its random-weight fixture (tests/fixtures/archs/gemma4; its logits against
//! llama.cpp's are checked with the other families): the layer plan the file lists, its
//! tokenizer against llama.cpp's ids, layers that read other layers' keys in batches and cuts,
//! and what a malformed file is told.

use crate::model_families::{altered, folder, load_error, prompts, reference};
use candle_core::Device;
use candle_core::quantized::gguf_file::{self, Value};
use samplab::model::Model;
use samplab::model::memory::kv_bytes;
use samplab::model::text::gguf_tokenizer::tokenizer_from_gguf;
use std::path::Path;

fn model() -> Model {
    Model::load(&folder("gemma4").join("model.gguf"), &Device::Cpu).unwrap()
}

fn bits(logits: &[f32]) -> Vec<u32> {
    logits.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn the_file_lists_windowed_layers_head_sizes_and_the_layers_that_share_keys() {
    let model = model();
    let layers = &model.config().layers;
    let windowed: Vec<bool> = layers.iter().map(|l| l.window.is_some()).collect();
    assert_eq!(windowed, [true, true, true, false, true, false]);
    let shapes: Vec<(usize, usize)> = layers.iter().map(|l| (l.head_dim, l.kv_heads)).collect();
    assert_eq!(
        shapes,
        [(16, 1), (16, 1), (16, 1), (32, 2), (16, 1), (32, 2)]
    );
    let from: Vec<Option<usize>> = layers.iter().map(|l| l.kv_from).collect();
    assert_eq!(from, [None, None, None, None, Some(2), Some(3)]);
    // f32 keys and values of the four layers that keep their own, over 3 positions.
    assert_eq!(
        kv_bytes(model.config(), 3, model.snapshots()),
        3 * 2 * 4 * (3 * 16 + 2 * 32)
    );
    let mut session = model.session();
    let logits = session
        .prefill(&prompts(&reference("gemma4"))[0], true)
        .unwrap();
    assert_eq!(session.cache_bytes(), 15 * 2 * 4 * (3 * 16 + 2 * 32));
    let cap = model.config().final_logit_softcap.unwrap();
    assert!(logits.iter().flatten().all(|x| x.abs() < cap));
}

/// The prompt split into a prefill and single steps, rows forked from it, rows joined into a
/// batch and a run cut back: each gives a fresh run's logits to the bit, the layers that read
/// other layers' keys included.
#[test]
fn layers_reading_other_layers_keys_decode_in_batches_and_cut_back_as_fresh_runs() {
    let model = model();
    let prompt = prompts(&reference("gemma4"))[0].clone();
    let fresh: Vec<Vec<u32>> = model
        .session()
        .prefill(&prompt, true)
        .unwrap()
        .iter()
        .map(|l| bits(l))
        .collect();
    let mut stepped = model.session();
    stepped.prefill(&prompt[..5], false).unwrap();
    for (i, &token) in prompt.iter().enumerate().skip(5) {
        assert_eq!(bits(&stepped.decode_step(&[token]).unwrap()[0]), fresh[i]);
    }

    let next = [263u32, 10, 40];
    let alone = |t: u32| {
        let mut session = model.session();
        session.prefill(&prompt, false).unwrap();
        bits(&session.decode_step(&[t]).unwrap()[0])
    };
    let single: Vec<Vec<u32>> = next.iter().map(|&t| alone(t)).collect();
    let mut forked = model.session();
    forked.prefill(&prompt, false).unwrap();
    forked.fork(next.len()).unwrap();
    let rows: Vec<Vec<u32>> = forked
        .decode_step(&next)
        .unwrap()
        .iter()
        .map(|l| bits(l))
        .collect();
    assert_eq!(rows, single);

    let sources: Vec<_> = (0..2)
        .map(|_| {
            let mut s = model.session();
            s.prefill(&prompt, false).unwrap();
            s
        })
        .collect();
    let mut joined = samplab::model::Session::batch(&model);
    joined
        .extend(&sources.iter().collect::<Vec<_>>(), prompt.len())
        .unwrap();
    let rows: Vec<Vec<u32>> = joined
        .decode_step(&next[..2])
        .unwrap()
        .iter()
        .map(|l| bits(l))
        .collect();
    assert_eq!(rows, single[..2]);

    let mut cut = model.session();
    cut.prefill(&prompt, false).unwrap();
    cut.truncate(0).unwrap();
    let again: Vec<Vec<u32>> = cut
        .prefill(&prompt, true)
        .unwrap()
        .iter()
        .map(|l| bits(l))
        .collect();
    assert_eq!(again, fresh);
}

fn content(path: &Path) -> gguf_file::Content {
    gguf_file::Content::read(&mut std::fs::File::open(path).unwrap()).unwrap()
}

#[test]
fn its_tokenizer_gives_llama_cpps_ids_and_always_adds_bos() {
    let tokenizer = tokenizer_from_gguf(&content(&folder("gemma4").join("model.gguf"))).unwrap();
    assert!(tokenizer.add_bos);
    let cases = reference("gemma4")["tokenized"].as_array().unwrap().clone();
    assert_eq!(cases.len(), 4);
    for case in cases {
        let text = case[0].as_str().unwrap();
        let ids: Vec<u32> = serde_json::from_value(case[1].clone()).unwrap();
        assert_eq!(tokenizer.encode_prompt(text).unwrap(), ids, "{text:?}");
        assert_eq!(tokenizer.tokenizer.decode(&ids, true).unwrap(), text);
    }
    // llama.cpp adds BOS to a gemma4 vocabulary even where the file says not to.
    let dir = tempfile::tempdir().unwrap();
    let off = altered(
        "gemma4",
        dir.path(),
        &[("tokenizer.ggml.add_bos_token", Some(Value::Bool(false)))],
        "",
    );
    let tokenizer = tokenizer_from_gguf(&content(&off)).unwrap();
    assert_eq!(tokenizer.encode_prompt("the cat").unwrap()[0], 2);
}

#[test]
fn a_gemma4_file_with_a_missing_tensor_or_a_wrong_layer_list_says_which() {
    let dir = tempfile::tempdir().unwrap();
    let missing = [
        ("gemma4", "blk.2.inp_gate.weight"),
        ("gemma4", "blk.3.attn_k.weight"),
        ("gemma4", "per_layer_token_embd.weight"),
        ("gemma4moe", "blk.1.ffn_gate_inp.scale"),
        ("gemma4moe", "blk.4.pre_ffw_norm_2.weight"),
        ("gemma4moe", "blk.0.ffn_up_exps.weight"),
    ];
    for (fixture, name) in missing {
        let err = load_error(&altered(fixture, dir.path(), &[], name));
        assert!(err.contains(name) && err.contains("gemma4 model"), "{err}");
    }
    let pattern = "gemma4.attention.sliding_window_pattern";
    let kv_heads = "gemma4.attention.head_count_kv";
    let shared = "gemma4.attention.shared_kv_layers";
    let five = Value::Array(vec![Value::Bool(true); 5]);
    let cases: Vec<(&str, Option<Value>, &str)> = vec![
        (pattern, Some(five), "lists 5 layers, but the model has 6"),
        (pattern, None, "is missing"),
        (pattern, Some(Value::U32(6)), pattern),
        (
            kv_heads,
            Some(Value::Array(vec![Value::I32(1); 7])),
            "lists 7 layers",
        ),
        (
            kv_heads,
            Some(Value::Array(vec![Value::I32(3); 6])),
            "not a multiple of 3 kv heads",
        ),
        (shared, Some(Value::U32(5)), "at least two of the 6 layers"),
        // Layer 3 (global) would read layer 2's (windowed) keys.
        (
            shared,
            Some(Value::U32(3)),
            "layer 3 would reuse the keys of layer 2",
        ),
    ];
    for (key, value, says) in cases {
        let err = load_error(&altered("gemma4", dir.path(), &[(key, value)], ""));
        assert!(err.contains(key) && err.contains(says), "{key}: {err}");
    }
}

/// 26B-A4B's experts stored with gate and up in one tensor (`ffn_gate_up_exps`, as llama.cpp
/// also reads them: it gives this file the reference's logits exactly) run as stored apart.
#[test]
fn experts_with_gate_and_up_in_one_tensor_equal_experts_stored_apart() {
    let prompt = &prompts(&reference("gemma4moe"))[0];
    let logits = |file: &str| -> Vec<Vec<u32>> {
        let model = Model::load(&folder("gemma4moe").join(file), &Device::Cpu).unwrap();
        let out = model.session().prefill(prompt, true).unwrap();
        out.iter().map(|l| bits(l)).collect()
    };
    assert_eq!(logits("model.fused.gguf"), logits("model.gguf"));
}
