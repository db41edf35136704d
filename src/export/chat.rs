//! How each target is asked what samplab was asked: raw text as it is, or a chat run's
//! conversation in the target's own chat form, so that the target renders it through the model's
//! chat template as samplab did (`llm.chat`, `apply_chat_template(..., add_generation_prompt=True)`,
//! `/v1/chat/completions`, llama-server with `--jinja`), instead of continuing the bare message.

use super::{ExportContext, py_str};
use crate::model::text::chat_template::{Message, TemplateChoice as Template};
use crate::params::SamplingParams;

/// The template a chat run chose, `None` for the model's default or a raw prompt.
pub fn template<'a>(ctx: &ExportContext<'a>) -> Option<Template<'a>> {
    ctx.chat_template
        .filter(|_| ctx.messages.is_some())
        .map(Template::of)
}

/// The note for a target that cannot take a template by name (all but transformers).
pub fn template_name_note(ctx: &ExportContext, target: &str) -> Option<String> {
    match template(ctx)? {
        Template::Name(name) => Some(format!(
            "{target} takes a chat template's text, not its name: give the model's `{name}` \
             template (GGUF tokenizer.chat_template.{name}, tokenizer_config.json) as a file."
        )),
        Template::File(_) => None,
    }
}

/// The Python lines that define the run's prompt: `prompt = "..."` for raw text, or
/// `messages = [...]`, one message a line, for a conversation (and the chosen template's text).
pub fn py_prompt(ctx: &ExportContext) -> Vec<String> {
    let Some(messages) = ctx.messages else {
        return vec![format!("prompt = {}", py_str(ctx.prompt))];
    };
    let mut lines = vec!["messages = [".to_owned()];
    lines.extend(messages.iter().map(|m| {
        format!(
            "    {{\"role\": {}, \"content\": {}}},",
            py_str(&m.role),
            py_str(&m.content)
        )
    }));
    lines.push("]".to_owned());
    if let Some(Template::File(path)) = template(ctx) {
        lines.push(format!(
            "with open({}, encoding=\"utf-8\") as f:\n    chat_template = f.read()",
            py_str(&path.to_string_lossy())
        ));
    }
    lines
}

/// vLLM's call: `llm.generate` continues raw text, `llm.chat` renders the conversation through
/// the model's template with the assistant's opening (its `add_generation_prompt=True` default).
pub fn vllm_call(ctx: &ExportContext) -> &'static str {
    match (ctx.messages, template(ctx)) {
        (None, _) => "outputs = llm.generate(prompt, params)",
        (Some(_), Some(Template::File(_))) => {
            "outputs = llm.chat(messages, params, chat_template=chat_template)"
        }
        (Some(_), _) => "outputs = llm.chat(messages, params)",
    }
}

/// transformers' inputs: the tokenized prompt (BOS added as the tokenizer wants), or the
/// conversation through `apply_chat_template`, which adds no second BOS and takes a template's
/// text or its name.
pub fn transformers_inputs(ctx: &ExportContext) -> String {
    if ctx.messages.is_none() {
        return "inputs = tokenizer(prompt, return_tensors=\"pt\").to(model.device)".to_owned();
    }
    let chosen = match template(ctx) {
        None => String::new(),
        Some(Template::File(_)) => " chat_template=chat_template,".to_owned(),
        Some(Template::Name(name)) => format!(" chat_template={},", py_str(name)),
    };
    format!(
        "inputs = tokenizer.apply_chat_template(\n    messages,{chosen} add_generation_prompt=True, \
         return_tensors=\"pt\", return_dict=True\n).to(model.device)"
    )
}

/// vLLM's server takes a template's text in the request (`chat_template`); read here, so the
/// request is whole.
pub fn openai_template(ctx: &ExportContext) -> Option<String> {
    match template(ctx)? {
        Template::File(path) => crate::regular_file::read_to_string(path).ok(),
        Template::Name(_) => None,
    }
}

/// llama-server's flag for a template file.
pub fn llama_server_template_flag(ctx: &ExportContext) -> Option<String> {
    match template(ctx)? {
        Template::File(path) => Some(format!(
            "--chat-template-file {}",
            super::sh_word(&path.to_string_lossy())
        )),
        Template::Name(_) => None,
    }
}

/// The OpenAI-compatible endpoint the request goes to: completions take the raw prompt, chat
/// completions the messages.
pub fn openai_endpoint(ctx: &ExportContext) -> &'static str {
    match ctx.messages {
        None => "/v1/completions",
        Some(_) => "/v1/chat/completions",
    }
}

/// The messages as JSON request bodies carry them.
pub fn json_messages(messages: &[Message]) -> serde_json::Value {
    serde_json::to_value(messages).expect("messages always serialise")
}

/// Where the header names the backend that computed the tuned run's probabilities.
pub fn backend_note(ctx: &ExportContext) -> Option<String> {
    use crate::engine::BackendKind;
    ctx.backend.map(|kind| match kind {
        BackendKind::Samplab => "Tuned in samplab on its own engine, which computes the exact \
                                 model; the target's forward pass may differ in the last digits."
            .to_owned(),
        BackendKind::LlamaCpp => {
            "Tuned in samplab on its llama.cpp backend (llama.cpp's forward pass, samplab's \
             sampling)."
                .to_owned()
        }
    })
}

/// A curl command posting `body` as JSON to `url`; the body travels in a quoted heredoc so that
/// it stays valid JSON, byte for byte, while the notes around it can be shell comments.
pub fn curl_post(url: &str, body: String) -> Vec<String> {
    vec![
        format!("curl -s {url} \\"),
        "  -H 'Content-Type: application/json' \\".to_owned(),
        "  --data-binary @- <<'JSON'".to_owned(),
        body,
        "JSON".to_owned(),
    ]
}

/// llama-server's chat request: the conversation, and what its command line cannot set for a
/// request (stop strings, logprobs); the sampling flags are the server's defaults.
pub fn llama_server_body(messages: &[Message], params: &SamplingParams) -> String {
    let mut body = serde_json::Map::new();
    body.insert("messages".to_owned(), json_messages(messages));
    let stop = params.stop.clone().unwrap_or_default();
    let strings: Vec<&str> = stop.strings().collect();
    if !strings.is_empty() {
        body.insert("stop".to_owned(), serde_json::json!(strings));
    }
    if let Some(n) = params.logprobs {
        body.insert("logprobs".to_owned(), serde_json::json!(true));
        body.insert("top_logprobs".to_owned(), serde_json::json!(n));
    }
    serde_json::to_string_pretty(&body).expect("the chat request always serialises")
}
