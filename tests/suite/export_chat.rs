//! Exports of a chat run: each target gets the conversation in its own chat form, and renders
//! it to the prompt samplab's model saw. Checked from outside on the real binary and the real
//! SmolLM2 file: the Python snippets run against stand-ins for vLLM and transformers that render
//! with llama-cpp-python's Jinja renderer (tests/fixtures/export_stubs), and the two HTTP
//! requests go to llama-cpp-python's real server, whose prompt must count samplab's tokens.

use crate::remote::LlamaServer;
use samplab::export::{ExportContext, to_llama_cpp, to_openai, to_transformers, to_vllm};
use samplab::model::text::chat_template::Message;
use samplab::params::SamplingParams;
use serde_json::{Value, json};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

fn conversation() -> Vec<Message> {
    vec![
        Message::new("system", "Answer in one word."),
        Message::new("user", "Hi"),
        Message::new("assistant", "Hello!"),
        Message::new("user", "Name a \"bright\" colour."),
    ]
}

fn chat_context(messages: &[Message]) -> ExportContext<'_> {
    ExportContext {
        messages: Some(messages),
        ..ExportContext::raw("Name a \"bright\" colour.", "m.gguf")
    }
}

fn params() -> SamplingParams {
    SamplingParams::from_yaml(
        "temperature: 0.7\nmax_tokens: 16\nseed: 3\nstop: [\"\\n\\n\"]\nlogprobs: 2",
    )
    .unwrap()
}

/// The JSON between the snippet's `<<'JSON'` and `JSON` lines.
fn heredoc_body(snippet: &str) -> Value {
    let start = snippet.find("<<'JSON'\n").expect("a heredoc") + "<<'JSON'\n".len();
    let end = start
        + snippet[start..]
            .find("\nJSON\n")
            .expect("the heredoc's end");
    serde_json::from_str(&snippet[start..end]).expect("the body is JSON")
}

#[test]
fn a_conversation_takes_each_targets_chat_form() {
    let messages = conversation();
    let ctx = chat_context(&messages);
    let params = params();

    let vllm = to_vllm(&params, &ctx);
    assert!(
        vllm.contains("outputs = llm.chat(messages, params)\n"),
        "{vllm}"
    );
    assert!(!vllm.contains("llm.generate"), "{vllm}");
    assert!(
        vllm.contains(
            "messages = [\n    {\"role\": \"system\", \"content\": \"Answer in one word.\"},\n"
        ),
        "{vllm}"
    );

    let transformers = to_transformers(&params, &ctx);
    assert!(
        transformers
            .contains("tokenizer.apply_chat_template(\n    messages, add_generation_prompt=True,"),
        "{transformers}"
    );
    assert!(!transformers.contains("tokenizer(prompt"), "{transformers}");

    let openai = to_openai(&params, &ctx);
    assert!(
        openai.contains("localhost:8000/v1/chat/completions"),
        "{openai}"
    );
    let body = heredoc_body(&openai);
    assert_eq!(body["messages"], json!(messages));
    assert!(body.get("prompt").is_none(), "{body}");
    // Chat completions take whether, and how many alternatives apart.
    assert_eq!(
        (&body["logprobs"], &body["top_logprobs"]),
        (&json!(true), &json!(2))
    );

    let llama = to_llama_cpp(&params, &ctx);
    assert!(llama.contains("llama-server -m m.gguf --jinja"), "{llama}");
    assert!(
        !llama.contains("-no-cnv") && !llama.contains(" -p "),
        "{llama}"
    );
    let request = heredoc_body(&llama);
    assert_eq!(request["messages"], json!(messages));
    assert_eq!(
        request["stop"],
        json!(["\n\n"]),
        "stop strings go in the request"
    );
    assert!(!llama.contains("-r $'\\n\\n'"), "{llama}");
}

#[test]
fn a_raw_prompt_keeps_each_targets_completion_form() {
    let ctx = ExportContext::raw("Once", "m.gguf");
    let params = params();
    assert!(to_vllm(&params, &ctx).contains("llm.generate(prompt, params)"));
    let openai = to_openai(&params, &ctx);
    assert!(
        openai.contains("localhost:8000/v1/completions "),
        "{openai}"
    );
    assert_eq!(heredoc_body(&openai)["logprobs"], json!(2));
    assert!(to_llama_cpp(&params, &ctx).contains("llama-completion -m m.gguf -no-cnv"));
}

#[test]
fn the_snippet_names_the_backend_the_run_was_tuned_on() {
    use samplab::engine::BackendKind;
    let on = |backend| ExportContext {
        backend,
        ..ExportContext::raw("Once", "m.gguf")
    };
    let params = params();
    assert!(to_vllm(&params, &on(Some(BackendKind::LlamaCpp))).contains("its llama.cpp backend"));
    assert!(to_vllm(&params, &on(Some(BackendKind::Samplab))).contains("on its own engine"));
    let none = to_vllm(&params, &on(None));
    assert!(!none.contains("Tuned in samplab"), "{none}");
}

/// What the real binary prints for `args`, which must succeed.
fn stdout_of(args: &[&str]) -> String {
    let out = crate::common::samplab(args);
    assert!(
        out.status.success(),
        "samplab {args:?}: {}",
        crate::common::stderr(&out)
    );
    crate::common::stdout(&out)
}

/// Runs a Python snippet against the stand-in engines; what they report it renders.
fn rendered_by_snippet(python: &std::ffi::OsStr, snippet: &str) -> String {
    let stubs = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/export_stubs");
    let mut child = Command::new(python)
        .arg("-")
        .env("PYTHONPATH", &stubs)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(snippet.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("RENDERED "))
        .unwrap_or_else(|| {
            panic!(
                "the snippet rendered no conversation:\n{snippet}\n{stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    serde_json::from_str(line).unwrap()
}

/// The goal from outside: `samplab export --messages` for every target gives the
/// prompt that `samplab sample --messages` rendered and tokenized, on the real SmolLM2.
#[test]
fn every_chat_export_renders_the_prompt_samplab_ran() {
    let Some(python) = crate::common::llama_cpp_python() else {
        return;
    };
    let Some((server, model)) = LlamaServer::start() else {
        return;
    };
    let model = model.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let conversation_file = dir.path().join("conversation.yaml");
    std::fs::write(
        &conversation_file,
        serde_yaml_ng::to_string(&conversation()).unwrap(),
    )
    .unwrap();
    let messages = conversation_file.to_str().unwrap();

    let ran: Value = serde_json::from_str(&stdout_of(&[
        "sample",
        "--model",
        model,
        "--messages",
        messages,
        "--json",
        "--set",
        "max_tokens=1",
    ]))
    .unwrap();
    let samplab_rendered = ran["prompt"]["rendered"]
        .as_str()
        .expect("a rendered prompt");
    let samplab_tokens = ran["prompt_token_ids"].as_array().unwrap().len();

    let export = |format: &str| {
        stdout_of(&[
            "export",
            "--format",
            format,
            "--messages",
            messages,
            "--model",
            model,
        ])
    };
    for format in ["vllm", "transformers"] {
        let snippet = export(format);
        assert_eq!(
            rendered_by_snippet(&python, &snippet),
            samplab_rendered,
            "{format}'s snippet renders another prompt:\n{snippet}"
        );
    }

    for format in ["openai", "llamacpp"] {
        let snippet = export(format);
        let mut body = heredoc_body(&snippet);
        // One token is enough to see the prompt the server built; the OpenAI export is written
        // for vLLM, whose top_k off (-1) llama-cpp-python refuses (its off is 0).
        body["max_tokens"] = json!(1);
        if body["top_k"] == json!(-1) {
            body["top_k"] = json!(0);
        }
        let response = ureq::post(&format!("{}/chat/completions", server.base))
            .set("Content-Type", "application/json")
            .send_string(&body.to_string())
            .unwrap_or_else(|e| panic!("{format}'s request failed: {e}\n{snippet}"));
        let answer: Value = serde_json::from_reader(response.into_reader()).unwrap();
        assert_eq!(
            answer["usage"]["prompt_tokens"].as_u64(),
            Some(samplab_tokens as u64),
            "{format}'s request gives the server another prompt:\n{snippet}\n{answer}"
        );
    }

    // `--chat --prompt` is the conversation of one user message.
    let one = stdout_of(&[
        "export", "--format", "vllm", "--chat", "--prompt", "Hi", "--model", model,
    ]);
    assert!(
        one.contains("messages = [\n    {\"role\": \"user\", \"content\": \"Hi\"},\n]\n"),
        "{one}"
    );
}

/// The playground's `e` in chat mode exports the conversation the first model was asked (the
/// earlier turns, then the prompt), and names the backend that model loaded on.
#[test]
fn the_export_dialog_in_chat_mode_exports_the_conversation_and_the_backend() {
    use crate::common::tui::state_sized;
    use samplab::engine::{BackendKind, Event};
    use samplab::tui::{Action, DialogAction, Effect, ModelId, update};
    let mut s = state_sized(160, 45);
    s.comparison.compare(&["org/instruct".into()], None);
    let mut loaded = crate::common::tui::loaded_with_template(true);
    if let Event::Loaded { backend, .. } = &mut loaded {
        *backend = Some(BackendKind::LlamaCpp);
    }
    update(&mut s, Action::Engine(ModelId(0), loaded));
    s.prompt.history = vec![Message::new("system", "Be brief.")];
    let copy = |s: &mut samplab::tui::State| {
        update(s, Action::Dialog(DialogAction::OpenExport));
        let effects = update(s, Action::Dialog(DialogAction::CopyExport));
        update(s, Action::CloseOverlay);
        match &effects[..] {
            [Effect::Copy(text)] => text.clone(),
            other => panic!("no snippet copied: {other:?}"),
        }
    };
    let raw = copy(&mut s);
    assert!(raw.contains("llm.generate(prompt, params)"), "{raw}");
    assert!(raw.contains("its llama.cpp backend"), "{raw}");

    update(&mut s, Action::ToggleChat);
    let chat = copy(&mut s);
    let prompt = s.prompt.text().to_owned();
    assert!(
        chat.contains("outputs = llm.chat(messages, params)"),
        "{chat}"
    );
    assert!(
        chat.contains(&format!(
            "messages = [\n    {{\"role\": \"system\", \"content\": \"Be brief.\"}},\n    \
             {{\"role\": \"user\", \"content\": {prompt:?}}},\n]"
        )),
        "{chat}"
    );
}
