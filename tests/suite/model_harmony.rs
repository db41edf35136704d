//! gpt-oss's harmony format end to end: the random-weight gpt-oss fixture given harmony's
//! special tokens, a few of its words and its chat template, prompted through the chat path and
//! made by a grammar to write its reasoning and then its answer, as gpt-oss replies.

use crate::common;

use candle_core::quantized::{GgmlDType, QTensor, gguf_file};
use candle_core::{Device, Tensor};
use samplab::engine::{Branch, Event, LoadedModel, Prompt, Request};
use samplab::model::device::DeviceChoice;
use samplab::model::text::chat_template::Message;
use samplab::params::SamplingParams;
use samplab::response::channels::Channel;
use samplab::response::{BranchOrigin, StopMatched, StopReason, Trajectory};
use std::path::{Path, PathBuf};

/// What the fixture's vocabulary lacks to speak harmony: its tokens (GGUF type 3, control) and
/// the words of its headers (type 1, normal); and SentencePiece's space, without which a space
/// falls back to the bytes of `▁` and decodes as that, as in llama.cpp.
const HARMONY_TOKENS: &[(&str, i32)] = &[
    ("<|start|>", 3),
    ("<|channel|>", 3),
    ("<|message|>", 3),
    ("<|end|>", 3),
    ("<|return|>", 3),
    ("<|call|>", 3),
    ("analysis", 1),
    ("final", 1),
    ("assistant", 1),
    ("commentary", 1),
    ("\u{2581}", 1),
];

/// The reasoning and the answer the grammar makes the model write.
const REASONING: &str = "the cat sat";
const ANSWER: &str = "a dog ran";

/// The gpt-oss fixture (tests/fixtures/archs/gpt-oss/model.gguf, left as it is) written into
/// `dir` with [`HARMONY_TOKENS`] after its own (each a new row of the embedding and of the
/// output matrix: an old row negated), `<|return|>` as its EOS as gpt-oss's files name it, the
/// harmony chat template, and room for that template's system message.
fn harmony_model(dir: &Path) -> PathBuf {
    let source = crate::model_families::folder("gpt-oss").join("model.gguf");
    let mut file = std::fs::File::open(&source).unwrap();
    let content = gguf_file::Content::read(&mut file).unwrap();
    let mut metadata = content.metadata.clone();
    let extend = |key: &str, more: Vec<gguf_file::Value>| {
        let Some(gguf_file::Value::Array(values)) = metadata.get(key) else {
            panic!("the fixture has `{key}`");
        };
        gguf_file::Value::Array(values.iter().cloned().chain(more).collect())
    };
    let tokens = extend(
        "tokenizer.ggml.tokens",
        HARMONY_TOKENS
            .iter()
            .map(|(text, _)| gguf_file::Value::String((*text).to_owned()))
            .collect(),
    );
    let types = extend(
        "tokenizer.ggml.token_type",
        HARMONY_TOKENS
            .iter()
            .map(|&(_, kind)| gguf_file::Value::I32(kind))
            .collect(),
    );
    let scores = extend(
        "tokenizer.ggml.scores",
        vec![gguf_file::Value::F32(0.0); HARMONY_TOKENS.len()],
    );
    let old_vocab = match &metadata["tokenizer.ggml.tokens"] {
        gguf_file::Value::Array(values) => values.len(),
        _ => unreachable!("`extend` read it as an array"),
    };
    let eos = old_vocab
        + HARMONY_TOKENS
            .iter()
            .position(|t| t.0 == "<|return|>")
            .unwrap();
    let template = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/chat_templates/templates/gpt_oss.jinja"),
    )
    .unwrap();
    for (key, value) in [
        ("tokenizer.ggml.tokens", tokens),
        ("tokenizer.ggml.token_type", types),
        ("tokenizer.ggml.scores", scores),
        (
            "tokenizer.ggml.eos_token_id",
            gguf_file::Value::U32(eos as u32),
        ),
        (
            "tokenizer.chat_template",
            gguf_file::Value::String(template),
        ),
        ("gpt-oss.context_length", gguf_file::Value::U32(1024)),
    ] {
        metadata.insert(key.to_owned(), value);
    }

    let new_rows: Vec<u32> = (0..HARMONY_TOKENS.len() as u32)
        .map(|i| (7 + 31 * i) % old_vocab as u32)
        .collect();
    let new_rows = Tensor::new(new_rows.as_slice(), &Device::Cpu).unwrap();
    let tensors: Vec<(String, QTensor)> = content
        .tensor_infos
        .keys()
        .map(|name| {
            let tensor = content.tensor(&mut file, name, &Device::Cpu).unwrap();
            if !matches!(name.as_str(), "token_embd.weight" | "output.weight") {
                return (name.clone(), tensor);
            }
            let rows = tensor.dequantize(&Device::Cpu).unwrap();
            let more = rows.index_select(&new_rows, 0).unwrap().neg().unwrap();
            let grown = Tensor::cat(&[&rows, &more], 0).unwrap();
            (
                name.clone(),
                QTensor::quantize(&grown, GgmlDType::F32).unwrap(),
            )
        })
        .collect();

    let path = dir.join("harmony.gguf");
    crate::common::write_gguf(&path, &metadata, &tensors);
    path
}

fn id(model: &LoadedModel, text: &str) -> u32 {
    model
        .tokenizer
        .token_to_id(text)
        .unwrap_or_else(|| panic!("`{text}` is one token"))
}

/// The text of `ids`, special tokens left out.
fn text(model: &LoadedModel, ids: &[u32]) -> String {
    model.tokenizer.decode(ids, true).unwrap()
}

/// The format's tokens among `ids`, in order.
fn markup(model: &LoadedModel, ids: &[u32]) -> Vec<String> {
    let specials = model.tokenizer.get_added_tokens_decoder();
    ids.iter()
        .filter(|i| specials.get(i).is_some_and(|token| token.special))
        .map(|&i| samplab::model::text::token_text(&model.tokenizer, i))
        .collect()
}

/// A conversation renders through the file's harmony template, and each of the format's
/// tokens in it becomes that one control token, not its characters.
#[test]
fn a_harmony_chat_prompt_holds_the_format_tokens_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = common::load_at(&harmony_model(dir.path()), DeviceChoice::Cpu);
    let prompt = Prompt::chat(vec![Message::new("user", "the cat")]);
    let (ids, rendered) = model.encode_prompt(&prompt).unwrap();
    let rendered = rendered.expect("a conversation is rendered");
    assert!(
        rendered.starts_with("<|start|>system<|message|>")
            && rendered.ends_with("<|end|><|start|>assistant"),
        "{rendered:?}"
    );
    for special in ["<|start|>", "<|message|>", "<|end|>"] {
        let special_id = id(&model, special);
        let whole = ids.iter().filter(|&&i| i == special_id).count();
        assert_eq!(
            whole,
            rendered.matches(special).count(),
            "{special} in {rendered:?}"
        );
        assert!(whole >= 2, "{special}: {whole}");
    }
    let mut plain = rendered.clone();
    for special in ["<|start|>", "<|message|>", "<|end|>"] {
        plain = plain.replace(special, "");
    }
    assert_eq!(text(&model, &ids), plain, "nothing else is lost");
}

/// Two samples, made by a grammar to write harmony's reasoning and then its answer, with the
/// headers' words written as text (which this vocabulary spells byte by byte) and then named
/// by token id (whole words, as gpt-oss's own vocabulary has them): the reasoning is
/// `analysis`, the answer `final`, the format's tokens and headers neither, in the response
/// and in every Token event; `<|end|>` closes the reasoning without ending the sample, which
/// `<|return|>` ends as its EOS. A rerun, replayed from the first, says the same, and so does a
/// branch forced along a sample into its answer.
#[test]
fn a_harmony_reply_tells_its_reasoning_from_its_answer_and_ends_at_return() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = common::load_at(&harmony_model(dir.path()), DeviceChoice::Cpu);
    let (end, ret, call) = (
        id(&model, "<|end|>"),
        id(&model, "<|return|>"),
        id(&model, "<|call|>"),
    );
    assert!(
        model.eos_ids.contains(&ret) && model.eos_ids.contains(&call),
        "{:?}",
        model.eos_ids
    );
    assert!(!model.eos_ids.contains(&end), "{:?}", model.eos_ids);
    // A grammar allows every EOS where one may come: the bias leaves `<|return|>` the only one.
    let other_ends: Vec<String> = model
        .eos_ids
        .iter()
        .filter(|&&i| i != ret)
        .map(|i| format!("{i}: -100"))
        .collect();
    for by_id in [false, true] {
        let header = |word: &str| match by_id {
            true => format!("<[{}]>", id(&model, word)),
            false => format!("\"{word}\""),
        };
        let grammar = format!(
            "start: <|channel|> {} <|message|> \"{REASONING}\" <|end|> <|start|> {} <|channel|> \
             {} <|message|> \"{ANSWER}\" <|return|>",
            header("analysis"),
            header("assistant"),
            header("final"),
        );
        let params = SamplingParams::from_yaml(&format!(
            "{{num_samples: 2, max_tokens: 96, seed: 3, logit_bias: {{{}}}, \
             structured_outputs: {{grammar: '{grammar}'}}}}",
            other_ends.join(", ")
        ))
        .unwrap();
        let request = Request {
            run_id: 1,
            prompt: Prompt::chat(vec![Message::new("user", "the cat")]),
            lane: 0,
            params,
            branches: Vec::new(),
        };
        let mut runs = Vec::new();
        for _ in 0..2 {
            let mut events = Vec::new();
            let response = model
                .run(&request, &mut || false, &mut |e| events.push(e))
                .unwrap();
            for t in &response.trajectories {
                let channels = t.channels.as_ref().expect("a harmony reply has channels");
                assert_eq!(channels.len(), t.token_ids.len());
                let of = |want: Option<Channel>| -> Vec<u32> {
                    (t.token_ids.iter().zip(channels))
                        .filter(|(_, c)| **c == want)
                        .map(|(&i, _)| i)
                        .collect()
                };
                assert_eq!(text(&model, &of(Some(Channel::Analysis))), REASONING);
                assert_eq!(text(&model, &of(Some(Channel::Final))), ANSWER);
                assert_eq!(text(&model, &of(None)), "analysisassistantfinal");
                let format_tokens = [
                    "<|channel|>",
                    "<|message|>",
                    "<|end|>",
                    "<|start|>",
                    "<|channel|>",
                    "<|message|>",
                    "<|return|>",
                ];
                assert_eq!(markup(&model, &t.token_ids), format_tokens);
                assert_eq!(markup(&model, &of(None)), format_tokens);
                assert!(of(Some(Channel::Commentary)).is_empty());
                assert_eq!(t.token_ids.contains(&id(&model, "analysis")), by_id);
                assert!(t.token_ids.contains(&end));
                assert_eq!(t.token_ids.last(), Some(&ret));
                assert_eq!(t.stop_reason, StopReason::Stop);
                assert_eq!(t.stop_matched, Some(StopMatched::Token(ret)));
                assert_eq!(event_channels(&events, t), *channels);
            }
            runs.push(response.trajectories);
        }
        assert_eq!(runs[0], runs[1], "the replayed rerun equals the first run");

        // A branch forced along sample 0 into its answer's header goes on as sample 0 did.
        let first = &runs[0][0];
        let start = id(&model, "<|start|>");
        let at = first.token_ids.iter().position(|&i| i == start).unwrap() + 1;
        let branch = Branch {
            sample: 0,
            origin: BranchOrigin {
                parent: 0,
                at: at as u32,
            },
            path: first.token_ids[..at].to_vec(),
            then: None,
        };
        let branched = model
            .run(
                &Request {
                    branches: vec![branch],
                    ..request.clone()
                },
                &mut || false,
                &mut |_| {},
            )
            .unwrap();
        let b = &branched.trajectories[2];
        assert_eq!(
            b.branch,
            Some(BranchOrigin {
                parent: 0,
                at: at as u32
            })
        );
        assert_eq!(
            (&b.token_ids, &b.channels),
            (&first.token_ids, &first.channels)
        );
    }
}

/// The channels the Token events of `trajectory`'s sample carried, in order.
fn event_channels(events: &[Event], trajectory: &Trajectory) -> Vec<Option<Channel>> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Token { token, .. } if token.sample == trajectory.index => Some(token.channel),
            _ => None,
        })
        .collect()
}
