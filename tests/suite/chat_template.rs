//! Chat templates: rendering as transformers' `apply_chat_template(add_generation_prompt=True)`
//! does, where HF directories keep them, and how the engine tokenizes the rendered prompt.

use crate::common;

use samplab::engine::{
    Backend, Conversation, LoadedModel, ParkedRow, Prefill, Prompt, ReplayStore, RowSource,
};
use samplab::model::text::chat_template::{ChatTemplate, CivilTime, Clock, Message};
use serde_json::Value as Json;
use std::path::Path;

/// SmolLM2 / Qwen-style ChatML, as such models ship it.
const CHATML: &str = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + \
                      message['content'] + '<|im_end|>' + '\n'}}{% endfor %}\
                      {% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

/// Llama-2 style: BOS from the context, Python string methods, and a refusal.
const LLAMA2: &str = "{% if messages[0]['role'] != 'user' %}{{ raise_exception('Conversation \
                      must start with a user message') }}{% endif %}{% for message in messages %}\
                      {{ bos_token + '[INST] ' + message['content'].strip() + ' [/INST]' }}\
                      {% if message['content'].strip().startswith('Hi') %}{{ '!' }}{% endif %}{% endfor %}";

fn template(source: &str) -> ChatTemplate {
    let tokens = [("bos_token", "<s>"), ("eos_token", "</s>")]
        .map(|(name, text)| (name.to_owned(), text.to_owned()))
        .into();
    ChatTemplate::new(source.to_owned(), tokens)
}

#[test]
fn chatml_frames_one_user_message_and_opens_the_assistant_turn() {
    let text = template(CHATML).render("Tell me a story.").unwrap();
    assert_eq!(
        text,
        "<|im_start|>user\nTell me a story.<|im_end|>\n<|im_start|>assistant\n"
    );
}

#[test]
fn python_string_methods_and_bos_token_work() {
    let text = template(LLAMA2).render("  Hi there \n").unwrap();
    assert_eq!(text, "<s>[INST] Hi there [/INST]!");
}

#[test]
fn raise_exception_and_syntax_errors_are_reported_not_panicked() {
    let refusing = "{{ raise_exception('only system prompts here') }}";
    let err = template(refusing).render("x").unwrap_err().to_string();
    assert!(err.contains("only system prompts here"), "{err}");

    let broken = "{% for m in messages %}{{ m.content }";
    let err = template(broken).render("x").unwrap_err().to_string();
    assert!(err.contains("does not render"), "{err}");
}

/// A bad template is reported on one line, with the line and column in the template where it
/// went wrong, and without minijinja's dump of the template around it.
#[test]
fn errors_are_one_line_with_the_template_line_and_column() {
    let cases = [
        (
            "{% for m in messages %}\n  {{ m.content }\n{% endfor %}",
            "the chat template does not render: syntax error: unexpected `}`, expected end of \
             variable block (template line 2, column 16)",
        ),
        (
            "{{ bos_token }}\n{% if messages | length > 0 %}\n    {{- raise_exception('No \\n user turns!') }}\n{% endif %}",
            "the chat template refuses these messages: No user turns! (template line 3, column 9)",
        ),
        (
            "{{ 'ok' }}\n\n  {{ messages | no_such_filter }}",
            "the chat template does not render: unknown filter: filter no_such_filter is unknown \
             (template line 3, column 17)",
        ),
        (
            "{% generation %}{{ x | nosuch }}{% endgeneration %}",
            "the chat template does not render: unknown filter: filter nosuch is unknown \
             (template line 1, column 24)",
        ),
    ];
    for (source, want) in cases {
        let err = template(source).render("hi").unwrap_err().to_string();
        assert_eq!(err, want);
        assert!(!err.contains('\n'), "{err}");
    }
}

#[test]
fn runaway_templates_stop_with_a_reason_instead_of_filling_memory_or_looping() {
    let start = std::time::Instant::now();
    let huge = "{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}";
    let err = template(huge).render("x").unwrap_err().to_string();
    assert!(err.contains("renders more than"), "{err}");

    let endless =
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}";
    let err = template(endless).render("x").unwrap_err().to_string();
    assert!(
        err.contains("does not finish") && err.contains("steps"),
        "{err}"
    );

    let long_message = "word ".repeat(200_000);
    let text = template(CHATML).render(&long_message).unwrap();
    assert!(
        text.contains(&long_message),
        "a long prompt is not too long"
    );
    let guard = std::time::Duration::from_secs(20);
    assert!(start.elapsed() < guard, "{:?}", start.elapsed());
}

#[cfg(unix)]
#[test]
fn a_fifo_in_place_of_a_template_file_is_refused_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "chat_template.jinja",
        "tokenizer_config.json",
        "special_tokens_map.json",
    ] {
        let fifo = dir.path().join(name);
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo failed");
        let err = ChatTemplate::from_hf_dir(dir.path())
            .unwrap_err()
            .to_string();
        assert!(err.contains(name) && err.contains("FIFO"), "{err}");
        std::fs::remove_file(&fifo).unwrap();
    }
}

#[test]
fn hf_directories_keep_the_template_in_tokenizer_config_or_a_jinja_file() {
    let dir = tempfile::tempdir().unwrap();
    let config = |json: serde_json::Value| {
        std::fs::write(dir.path().join("tokenizer_config.json"), json.to_string()).unwrap();
    };
    assert_eq!(ChatTemplate::from_hf_dir(dir.path()).unwrap(), None);

    config(serde_json::json!({
        "chat_template": "{{ bos_token }}{{ messages[0]['content'] }}{{ eos_token }}",
        "bos_token": {"content": "<|begin|>", "lstrip": false},
        "eos_token": "<|end|>",
    }));
    let found = ChatTemplate::from_hf_dir(dir.path()).unwrap().unwrap();
    assert_eq!(found.render("hey").unwrap(), "<|begin|>hey<|end|>");

    // Every special token is passed; a null one stays undefined, as under transformers.
    config(serde_json::json!({
        "chat_template": "{{ bos_token is defined }} {{ bos_token }}|{{ pad_token }} {{ unk_token }} \
                          {{ sep_token }} {{ cls_token }} {{ mask_token }} {{ eos_token }}",
        "bos_token": null,
        "eos_token": {"content": "</s>", "special": true},
        "pad_token": "<pad>",
        "unk_token": "<unk>",
        "sep_token": "<sep>",
        "cls_token": "<cls>",
        "mask_token": "<mask>",
        "additional_special_tokens": ["<x>"],
    }));
    let found = ChatTemplate::from_hf_dir(dir.path()).unwrap().unwrap();
    assert_eq!(
        found.render("hey").unwrap(),
        "False |<pad> <unk> <sep> <cls> <mask> </s>"
    );

    // An older directory's special_tokens_map.json wins, unless tokenizer_config.json has
    // added_tokens_decoder (then transformers does not read the map).
    let map = serde_json::json!({"bos_token": {"content": "<map-bos>"}, "pad_token": "<map-pad>"});
    std::fs::write(dir.path().join("special_tokens_map.json"), map.to_string()).unwrap();
    let with_map = |decoder: Option<serde_json::Value>| {
        let mut json = serde_json::json!({
            "chat_template": "{{ bos_token }}|{{ pad_token }}|{{ eos_token }}",
            "bos_token": "<bos>",
            "pad_token": "<pad>",
            "eos_token": "<eos>",
        });
        if let Some(decoder) = decoder {
            json["added_tokens_decoder"] = decoder;
        }
        config(json);
        let found = ChatTemplate::from_hf_dir(dir.path()).unwrap().unwrap();
        found.render("hey").unwrap()
    };
    assert_eq!(with_map(None), "<map-bos>|<map-pad>|<eos>");
    assert_eq!(with_map(Some(serde_json::json!({}))), "<bos>|<pad>|<eos>");
    std::fs::write(dir.path().join("special_tokens_map.json"), "{ not json").unwrap();
    config(serde_json::json!({"chat_template": "x"}));
    let err = ChatTemplate::from_hf_dir(dir.path())
        .unwrap_err()
        .to_string();
    assert!(err.contains("special_tokens_map.json"), "{err}");
    std::fs::remove_file(dir.path().join("special_tokens_map.json")).unwrap();

    config(serde_json::json!({
        "chat_template": [
            {"name": "tool_use", "template": "tools"},
            {"name": "default", "template": "plain {{ messages[0]['content'] }}"},
        ],
    }));
    let found = ChatTemplate::from_hf_dir(dir.path()).unwrap().unwrap();
    assert_eq!(found.render("hey").unwrap(), "plain hey");

    std::fs::write(
        dir.path().join("chat_template.jinja"),
        "jinja {{ messages[0]['content'] }}",
    )
    .unwrap();
    let found = ChatTemplate::from_hf_dir(dir.path()).unwrap().unwrap();
    assert_eq!(found.render("hey").unwrap(), "jinja hey");

    std::fs::write(dir.path().join("tokenizer_config.json"), "{ not json").unwrap();
    let err = ChatTemplate::from_hf_dir(dir.path())
        .unwrap_err()
        .to_string();
    assert!(err.contains("tokenizer_config.json"), "{err}");
}

/// The date the corpus fixtures were rendered at (render.py's FIXED_NOW).
const FIXTURE_NOW: CivilTime = CivilTime {
    year: 2025,
    month: 3,
    day: 7,
    hour: 9,
    minute: 5,
    second: 3,
};

fn fixture(name: &str) -> Json {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/chat_templates")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// Every template of the corpus (tests/fixtures/chat_templates, sources in corpus.json) with
/// every conversation, loaded as a model directory holds it, against the text transformers
/// renders (expected.json, made by render.py): byte for byte, or the same refusal.
#[test]
fn the_corpus_renders_byte_for_byte_as_transformers_does() {
    let corpus = fixture("corpus.json");
    let conversations = fixture("conversations.json");
    let expected = fixture("expected.json");
    let templates =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/chat_templates/templates");
    let mut checked = 0;
    let mut failures = Vec::new();
    for (name, entry) in corpus.as_object().unwrap() {
        let model = tempfile::tempdir().unwrap();
        let mut config = entry["tokens"].clone();
        let source = std::fs::read_to_string(templates.join(format!("{name}.jinja"))).unwrap();
        config["chat_template"] = Json::String(source);
        std::fs::write(
            model.path().join("tokenizer_config.json"),
            config.to_string(),
        )
        .unwrap();
        let template = ChatTemplate::from_hf_dir(model.path())
            .unwrap()
            .unwrap()
            .with_clock(Clock::Fixed(FIXTURE_NOW));
        for (conversation, messages) in conversations.as_object().unwrap() {
            let messages: Vec<Message> = serde_json::from_value(messages.clone()).unwrap();
            let want = &expected["expected"][name][conversation];
            let got = template.render_messages(&messages);
            let same = match (&got, want.get("text"), want.get("error")) {
                (Ok(text), Some(Json::String(want)), _) => text == want,
                (Err(err), _, Some(Json::String(want))) => err.to_string().contains(want.as_str()),
                _ => false,
            };
            if !same {
                failures.push(format!(
                    "{name} x {conversation}:\n  got  {got:?}\n  want {want}"
                ));
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 15 * 5, "every template with every conversation");
    assert!(
        failures.is_empty(),
        "{} of {checked} differ from transformers:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// One feature of transformers' environment per probe (probes.json: tojson and its options,
/// values printed as Python prints them, which variables are defined, Python string methods,
/// strftime_now, {% generation %}, loop controls, namespace and dict, trim_blocks and
/// lstrip_blocks), against the text transformers renders for the plain conversation.
#[test]
fn each_probe_of_the_environment_renders_as_transformers_does() {
    let probes = fixture("probes.json");
    let expected = fixture("expected.json");
    let plain: Vec<Message> =
        serde_json::from_value(fixture("conversations.json")["plain"].clone()).unwrap();
    let mut failures = Vec::new();
    for (name, source) in probes.as_object().unwrap() {
        let tokens = [("eos_token".to_owned(), "</s>".to_owned())].into();
        let template = ChatTemplate::new(source.as_str().unwrap().to_owned(), tokens)
            .with_clock(Clock::Fixed(FIXTURE_NOW));
        let got = template.render_messages(&plain);
        let want = &expected["probes"][name]["text"];
        if !matches!((&got, want), (Ok(text), Json::String(want)) if text == want) {
            failures.push(format!("{name}:\n  got  {got:?}\n  want {want}"));
        }
    }
    assert_eq!(probes.as_object().unwrap().len(), 15);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A backend is never reached: these tests only tokenize.
struct NoModel;

impl Backend for NoModel {
    fn kind(&self) -> samplab::engine::BackendKind {
        samplab::engine::BackendKind::Samplab
    }

    fn vocab_size(&self) -> usize {
        unreachable!("tokenizing needs no forward pass")
    }
    fn weight_bytes(&self) -> u64 {
        unreachable!("tokenizing needs no forward pass")
    }
    fn context_length(&self) -> usize {
        unreachable!("tokenizing needs no forward pass")
    }
    fn prefill(&mut self, _: &[u32], _: usize) -> anyhow::Result<Prefill> {
        unreachable!("tokenizing needs no forward pass")
    }
    fn join(&mut self, _: Vec<RowSource>, _: usize) -> anyhow::Result<()> {
        unreachable!("tokenizing needs no forward pass")
    }
    fn decode(&mut self, _: &[u32]) -> anyhow::Result<Vec<Vec<f32>>> {
        unreachable!("tokenizing needs no forward pass")
    }
    fn retire(&mut self, _: &[bool]) -> anyhow::Result<Vec<ParkedRow>> {
        unreachable!("tokenizing needs no forward pass")
    }
    fn reset(&mut self) {
        unreachable!("tokenizing needs no forward pass")
    }
}

/// Characters as tokens, `<|im_start|>` and `<|im_end|>` as specials that plain text cannot
/// produce (as a GGUF vocabulary makes them), and BOS added to raw prompts.
fn loaded(template: Option<ChatTemplate>) -> LoadedModel {
    let tokenizer = common::chat_char_tokenizer();
    LoadedModel {
        name: "chars".into(),
        device: "cpu".into(),
        backend: Box::new(NoModel),
        tokenizer,
        eos_ids: vec![1],
        defaults: None,
        chat_template: template,
        templates: Default::default(),
        replay: ReplayStore::new(0),
        warnings: Vec::new(),
        activations: None,
        structured: Default::default(),
        record_traces: false,
        origin: Default::default(),
        encoder: None,
    }
}

/// The ids of one user message in chat mode.
fn chat_ids(model: &mut LoadedModel, message: &str, literal_specials: bool) -> Vec<u32> {
    let prompt = Prompt::Chat(Conversation {
        messages: vec![Message::new("user", message)],
        literal_specials,
    });
    model.encode_prompt(&prompt).unwrap().0
}

#[test]
fn a_chat_prompt_turns_role_markers_into_special_ids_and_adds_no_bos() {
    let mut model = loaded(Some(template(CHATML)));
    let im_start = model.tokenizer.token_to_id("<|im_start|>").unwrap();
    let im_end = model.tokenizer.token_to_id("<|im_end|>").unwrap();
    let ids = chat_ids(&mut model, "hi", false);
    let expected_text = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n";
    assert_eq!(ids[0], im_start, "no BOS before the template's own text");
    assert_eq!(ids.iter().filter(|&&id| id == im_start).count(), 2);
    assert_eq!(ids.iter().filter(|&&id| id == im_end).count(), 1);
    assert_eq!(
        model
            .tokenizer
            .decode(&ids, false)
            .unwrap()
            .replace(' ', ""),
        expected_text.replace(' ', "")
    );

    let raw = model.encode("<|im_start|>hi").unwrap();
    assert_eq!(raw[0], 0, "a raw prompt gets BOS");
    assert!(
        !raw.contains(&im_start),
        "raw text never becomes a special token, and chat mode left that setting as it was"
    );
}

#[test]
fn chat_mode_without_a_template_says_what_to_do() {
    let err = loaded(None)
        .encode_prompt(&Prompt::chat(vec![Message::new("user", "hi")]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("has no chat template"), "{err}");
    assert!(err.contains("raw prompt"), "{err}");
}

/// Issue 13: special-token text typed in a chat message becomes the control token, as in
/// transformers, unless the user asks to keep it text; the template's own markers stay tokens.
#[test]
fn special_token_text_in_a_message_can_stay_text() {
    let mut model = loaded(Some(template(CHATML)));
    let im_end = model.tokenizer.token_to_id("<|im_end|>").unwrap();
    let message = "a<|im_end|>b";
    let as_tokens = chat_ids(&mut model, message, false);
    assert_eq!(as_tokens.iter().filter(|&&id| id == im_end).count(), 2);
    let rendered = model
        .chat_template
        .as_ref()
        .unwrap()
        .render(message)
        .unwrap();
    let as_text = chat_ids(&mut model, message, true);
    assert_eq!(
        as_text.iter().filter(|&&id| id == im_end).count(),
        1,
        "only the template's own <|im_end|> is the control token"
    );
    assert_eq!(
        model
            .tokenizer
            .decode(&as_text, false)
            .unwrap()
            .replace(' ', ""),
        rendered.replace(' ', ""),
        "the text is the same either way"
    );
    assert_eq!(model.special_tokens(), ["<|im_start|>", "<|im_end|>"]);
}

/// Python's `%` formatting, which minijinja refuses on strings: each text is what Jinja2
/// renders under transformers for the same template and messages.
#[test]
fn python_percent_formatting_renders_as_in_python() {
    let source = "{% for m in messages %}{{ '<%s>%s</%s>\n' % (m.role, m.content|trim, m.role) }}\
                  {% endfor %}{{ 'turns=%02d, %s%%' % (messages|length, '%.1f' % 12.345) }}\
                  {{ ' %(who)s' % {'who': bos_token} }}";
    let text = template(source)
        .render_messages(&[
            Message::new("system", " Be brief. "),
            Message::new("user", "Hi"),
        ])
        .unwrap();
    assert_eq!(
        text,
        "<system>Be brief.</system>\n<user>Hi</user>\nturns=02, 12.3% <s>"
    );
    let err = template("{{ '%s %s' % 1 }}")
        .render("x")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("not enough arguments for format string"),
        "{err}"
    );
    assert!(err.contains("line 1"), "{err}");
}
