//! samplab's parameters as each server takes them: one table of JSON names per server, the
//! request body built from it, and the parameters a server has no place for, which the
//! playground marks as not applied instead of dropping them silently.
//!
//! Every parameter a server takes is sent, defaults included: llama-cpp-python's own defaults
//! (top_k 40, min_p 0.05, repeat_penalty 1.1) would otherwise apply where samplab shows none.

use super::server::ServerKind;
use crate::engine::{Conversation, Prompt};
use crate::params::{
    Engine, Field, LlamaCppConstraint, LogprobsMode, SamplingParams, StructuredOutputs, TokenText,
};
use serde_json::{Map, Value, json};

/// The most alternatives per token samplab asks for: OpenAI's top_logprobs cap and vLLM's
/// max_logprobs default.
pub const MAX_ALTERNATIVES: u32 = 20;

/// Alternatives asked for whatever `logprobs` says, so that the inspector has some.
const INSPECTOR_ALTERNATIVES: u32 = 5;

/// The fields a request carries in a form of its own, which [`body`] builds: one request per
/// sample, its own seed, stop strings apart from stop ids, the constraint in the server's
/// shape (see [`constraint_on`]); `watch`, `engine` and `prompt_logprobs` are never sent (see
/// [`applies`]).
const OWN_FORM: &[Field] = &[
    Field::MaxTokens,
    Field::Seed,
    Field::Stop,
    Field::NumSamples,
    Field::Logprobs,
    Field::Watch,
    Field::PromptLogprobs,
    Field::LogitBias,
    Field::StructuredOutputs,
    Field::Grammar,
    Field::JsonSchema,
    Field::Engine,
];

/// `field`'s JSON name on `kind`, from the params table.
fn name_on(kind: ServerKind, field: Field) -> Option<&'static str> {
    let served = field.spec().names;
    match kind {
        ServerKind::OpenAi => served.openai,
        ServerKind::Vllm => served.vllm,
        ServerKind::LlamaServer => served.llama_server,
        ServerKind::LlamaCppPython => served.llama_cpp_python,
    }
}

/// The parameters set away from their defaults that `kind` has no place for, asked with
/// `prompt`.
pub fn not_applied(kind: ServerKind, params: &SamplingParams, prompt: &Prompt) -> Vec<Field> {
    let defaults = SamplingParams::default();
    Field::ALL
        .iter()
        .copied()
        .filter(|&field| params.get(field) != defaults.get(field))
        .filter(|&field| !applies(kind, field, params, is_chat(prompt)))
        .collect()
}

/// Whether `kind` takes `field` as `params` set it, in a chat request or not.
fn applies(kind: ServerKind, field: Field, params: &SamplingParams, chat: bool) -> bool {
    match field {
        Field::MaxTokens | Field::Seed | Field::NumSamples | Field::Logprobs => true,
        Field::LogitBias => true,
        Field::Stop => stop_ids(params).is_empty() || kind == ServerKind::Vllm,
        // Each server takes some kinds of constraint; the run has one at most.
        Field::StructuredOutputs | Field::Grammar | Field::JsonSchema => params
            .constraint()
            .is_none_or(|(_, constraint)| constraint_on(kind, &constraint, chat).is_some()),
        // vLLM could return them, but samplab does not read them from a stream yet.
        Field::PromptLogprobs | Field::Watch => false,
        // Which engine's semantics samplab follows; a server follows its own.
        Field::Engine => false,
        // Servers report the model's raw logprobs (vLLM's default mode); another mode is an
        // argument the server was started with, which no request can change.
        Field::LogprobsMode => params.logprobs_mode == LogprobsMode::default(),
        field => name_on(kind, field).is_some(),
    }
}

/// The parameters `kind` has no place for whatever their value: token-id stops and
/// constraints aside (a server takes some of them), what [`not_applied`] lists once they are
/// set.
pub fn ignored(kind: ServerKind) -> Vec<Field> {
    let defaults = SamplingParams::default();
    Field::ALL
        .iter()
        .copied()
        .filter(|&field| field != Field::Stop && !applies(kind, field, &defaults, false))
        .collect()
}

/// What a run on `kind` leaves out: [`ignored`] and [`not_applied`] together, in the table's
/// order; the playground marks these, so a run that leaves out more (or less) than the server
/// announced says so again.
pub fn left_out(kind: ServerKind, params: &SamplingParams, prompt: &Prompt) -> Vec<Field> {
    let never = ignored(kind);
    let now = not_applied(kind, params, prompt);
    Field::ALL
        .iter()
        .copied()
        .filter(|field| never.contains(field) || now.contains(field))
        .collect()
}

fn is_chat(prompt: &Prompt) -> bool {
    matches!(prompt, Prompt::Chat(_))
}

/// The constraint as `kind` takes it, as (body field, value); `None` where it has no place
/// for this kind. vLLM takes every kind as `structured_outputs`; OpenAI a JSON schema or any
/// JSON object as `response_format`; llama.cpp's server GBNF as `grammar` (a choice made
/// GBNF) and schemas as `json_schema`; llama-cpp-python's server the same GBNF as `grammar`,
/// and a schema only in a chat request, as `response_format` with a `schema`
/// (`CreateCompletionRequest` has no `response_format`).
fn constraint_on(
    kind: ServerKind,
    constraint: &StructuredOutputs,
    chat: bool,
) -> Option<(&'static str, Value)> {
    match kind {
        ServerKind::Vllm => Some(("structured_outputs", json!(constraint))),
        ServerKind::OpenAi => Some(("response_format", constraint.response_format()?)),
        ServerKind::LlamaServer => Some(match constraint.to_llama_cpp()? {
            LlamaCppConstraint::Grammar(gbnf) => ("grammar", json!(gbnf)),
            LlamaCppConstraint::JsonSchema(schema) => ("json_schema", schema),
        }),
        ServerKind::LlamaCppPython => match constraint.to_llama_cpp()? {
            LlamaCppConstraint::Grammar(gbnf) => Some(("grammar", json!(gbnf))),
            LlamaCppConstraint::JsonSchema(schema) => chat.then(|| {
                (
                    "response_format",
                    json!({"type": "json_object", "schema": schema}),
                )
            }),
        },
    }
}

/// The token ids among the stops.
fn stop_ids(params: &SamplingParams) -> Vec<u32> {
    let stop = params.stop.as_ref().map_or(&[][..], |s| s.0.as_slice());
    stop.iter()
        .filter_map(|item| match item {
            TokenText::Token(id) => Some(*id),
            TokenText::Text(_) => None,
        })
        .collect()
}

/// How many alternatives to ask for per token: what `logprobs` asks, and a few for the
/// inspector, up to the servers' cap.
pub fn alternatives(params: &SamplingParams) -> u32 {
    params
        .logprobs
        .unwrap_or(0)
        .clamp(INSPECTOR_ALTERNATIVES, MAX_ALTERNATIVES)
}

/// The request body for one sample, seeded `seed`, streamed: `/completions` for raw text,
/// `/chat/completions` for a conversation.
pub fn body(
    kind: ServerKind,
    model: &str,
    prompt: &Prompt,
    params: &SamplingParams,
    seed: u64,
) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("stream".into(), json!(true));
    body.insert("n".into(), json!(1));
    body.insert("seed".into(), json!(seed));
    body.insert("max_tokens".into(), json!(params.max_tokens));
    let top = alternatives(params);
    match prompt {
        // A served model parses special-token text itself; `run` refuses a literal prompt.
        Prompt::Raw(text) | Prompt::Literal(text) => {
            body.insert("prompt".into(), json!(text));
            body.insert("logprobs".into(), json!(top));
        }
        Prompt::Chat(conversation) => {
            body.insert("messages".into(), messages(conversation));
            body.insert("logprobs".into(), json!(true));
            body.insert("top_logprobs".into(), json!(top));
        }
    }
    // The engine whose spelling of off the server reads (llama-cpp-python refuses top_k -1).
    let engine = match kind {
        ServerKind::LlamaServer | ServerKind::LlamaCppPython => Engine::LlamaCpp,
        ServerKind::OpenAi | ServerKind::Vllm => Engine::Vllm,
    };
    for &field in Field::ALL.iter().filter(|f| !OWN_FORM.contains(f)) {
        if let Some(name) = name_on(kind, field) {
            let value = field.spec().value_for(engine, params.get(field));
            if !value.is_null() {
                let value = serde_json::to_value(value).unwrap_or(Value::Null);
                body.insert(name.into(), value);
            }
        }
    }
    // llama.cpp's server runs adaptive-p only when `samplers` names it.
    if kind == ServerKind::LlamaServer && params.adaptive_p() {
        let order: Vec<&str> = params.llama_cpp_order().iter().map(|s| s.name()).collect();
        body.insert("samplers".into(), json!(order));
    }
    let stop = params.stop.as_ref().map_or(&[][..], |s| s.0.as_slice());
    let texts: Vec<&str> = stop
        .iter()
        .filter_map(|item| match item {
            TokenText::Text(text) => Some(text.as_str()),
            TokenText::Token(_) => None,
        })
        .collect();
    if !texts.is_empty() {
        body.insert("stop".into(), json!(texts));
    }
    if let Some(bias) = &params.logit_bias {
        let bias: Map<String, Value> = bias
            .0
            .iter()
            .map(|(id, b)| (id.to_string(), json!(b)))
            .collect();
        body.insert("logit_bias".into(), Value::Object(bias));
    }
    if let Some((_, constraint)) = params.constraint()
        && let Some((name, value)) = constraint_on(kind, &constraint, is_chat(prompt))
    {
        body.insert(name.into(), value);
    }
    if kind == ServerKind::Vllm {
        let ids = stop_ids(params);
        if !ids.is_empty() {
            body.insert("stop_token_ids".into(), json!(ids));
        }
    }
    Value::Object(body)
}

/// A conversation as the OpenAI APIs take it: `[{role, content}, …]`.
pub fn messages(conversation: &Conversation) -> Value {
    conversation
        .messages
        .iter()
        .map(|m| json!({"role": m.role, "content": m.content}))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(yaml: &str) -> SamplingParams {
        SamplingParams::from_yaml(yaml).unwrap()
    }

    #[test]
    fn each_server_gets_its_own_names_and_llama_cpp_pythons_defaults_are_overridden() {
        let p = params("temperature: 0.7\ntop_k: -1\nrepetition_penalty: 1.0\nmax_tokens: 8");
        let raw = Prompt::raw("Once");
        let python = body(ServerKind::LlamaCppPython, "m", &raw, &p, 5);
        assert_eq!(python["repeat_penalty"], json!(1.0));
        assert_eq!(python["top_k"], json!(0), "llama.cpp's off");
        assert_eq!(python["min_p"], json!(0.0));
        assert_eq!(python["seed"], json!(5));
        assert_eq!(
            python["logprobs"],
            json!(5),
            "alternatives for the inspector"
        );
        let vllm = body(ServerKind::Vllm, "m", &raw, &p, 5);
        assert_eq!(vllm["repetition_penalty"], json!(1.0));
        let openai = body(ServerKind::OpenAi, "m", &raw, &p, 5);
        assert!(openai.get("top_k").is_none() && openai.get("repetition_penalty").is_none());
        assert_eq!(openai["max_tokens"], json!(8));
        let chat = body(
            ServerKind::OpenAi,
            "m",
            &Prompt::chat(vec![crate::model::text::chat_template::Message::new(
                "user", "Hi",
            )]),
            &params("logprobs: 20"),
            1,
        );
        assert_eq!(chat["messages"], json!([{"role": "user", "content": "Hi"}]));
        assert_eq!(
            (chat["logprobs"].clone(), chat["top_logprobs"].clone()),
            (json!(true), json!(20))
        );
    }

    /// Each kind of constraint on each server, in a raw and a chat request: the body fields
    /// it is sent in (OpenAI, vLLM, llama.cpp's server, llama-cpp-python), or null where the
    /// server has no place for it and lists it as not applied.
    #[test]
    fn each_server_gets_the_constraint_in_its_own_names_or_lists_it_not_applied() {
        let gbnf = r#"root ::= "a" | "b""#;
        let schema = json!({"type": "object", "required": ["name"]});
        let strict = json!({"response_format": {"type": "json_schema", "json_schema":
            {"name": "samplab", "schema": schema, "strict": true}}});
        let object = json!({"type": "object"});
        let cases: [(&str, bool, [Value; 4]); 10] = [
            (
                "structured_outputs: {regex: '[0-9]+'}",
                false,
                [
                    Value::Null,
                    json!({"structured_outputs": {"regex": "[0-9]+"}}),
                    Value::Null,
                    Value::Null,
                ],
            ),
            (
                "structured_outputs: {choice: [a, b]}",
                false,
                [
                    Value::Null,
                    json!({"structured_outputs": {"choice": ["a", "b"]}}),
                    json!({"grammar": gbnf}),
                    json!({"grammar": gbnf}),
                ],
            ),
            (
                "structured_outputs: {grammar: 'root ::= \"a\" | \"b\"'}",
                false,
                [
                    Value::Null,
                    json!({"structured_outputs": {"grammar": gbnf}}),
                    json!({"grammar": gbnf}),
                    json!({"grammar": gbnf}),
                ],
            ),
            (
                "structured_outputs: {grammar: 'start: \"a\"'}",
                false,
                [
                    Value::Null,
                    json!({"structured_outputs": {"grammar": "start: \"a\""}}),
                    Value::Null,
                    Value::Null,
                ],
            ),
            (
                "structured_outputs: {json: {type: object, required: [name]}}",
                false,
                [
                    strict.clone(),
                    json!({"structured_outputs": {"json": schema}}),
                    json!({"json_schema": schema}),
                    Value::Null,
                ],
            ),
            (
                "structured_outputs: {json: {type: object, required: [name]}}",
                true,
                [
                    strict.clone(),
                    json!({"structured_outputs": {"json": schema}}),
                    json!({"json_schema": schema}),
                    json!({"response_format": {"type": "json_object", "schema": schema}}),
                ],
            ),
            (
                "structured_outputs: {json_object: true}",
                false,
                [
                    json!({"response_format": {"type": "json_object"}}),
                    json!({"structured_outputs": {"json_object": true}}),
                    json!({"json_schema": object}),
                    Value::Null,
                ],
            ),
            (
                "structured_outputs: {json_object: true}",
                true,
                [
                    json!({"response_format": {"type": "json_object"}}),
                    json!({"structured_outputs": {"json_object": true}}),
                    json!({"json_schema": object}),
                    json!({"response_format": {"type": "json_object", "schema": object}}),
                ],
            ),
            (
                "engine: llama.cpp\ngrammar: 'root ::= \"a\" | \"b\"'",
                false,
                [
                    Value::Null,
                    json!({"structured_outputs": {"grammar": gbnf}}),
                    json!({"grammar": gbnf}),
                    json!({"grammar": gbnf}),
                ],
            ),
            (
                "engine: llama.cpp\njson_schema: {type: object, required: [name]}",
                true,
                [
                    strict,
                    json!({"structured_outputs": {"json": schema}}),
                    json!({"json_schema": schema}),
                    json!({"response_format": {"type": "json_object", "schema": schema}}),
                ],
            ),
        ];
        let kinds = [
            ServerKind::OpenAi,
            ServerKind::Vllm,
            ServerKind::LlamaServer,
            ServerKind::LlamaCppPython,
        ];
        for (yaml, chat, expected) in cases {
            let p = params(yaml);
            let (field, _) = p.constraint().unwrap();
            let prompt = match chat {
                true => Prompt::chat(vec![crate::model::text::chat_template::Message::new(
                    "user", "Hi",
                )]),
                false => Prompt::raw("Once"),
            };
            for (kind, expected) in kinds.into_iter().zip(expected) {
                let body = body(kind, "m", &prompt, &p, 1);
                let sent: Map<String, Value> = [
                    "structured_outputs",
                    "response_format",
                    "grammar",
                    "json_schema",
                ]
                .into_iter()
                .filter_map(|name| Some((name.to_owned(), body.get(name)?.clone())))
                .collect();
                let lost = not_applied(kind, &p, &prompt).contains(&field);
                let shown = format!("{yaml} (chat {chat}) on {}", kind.name());
                match expected {
                    Value::Null => {
                        assert!(sent.is_empty(), "{shown}: {sent:?}");
                        assert!(lost, "{shown}: not listed as not applied");
                        assert!(left_out(kind, &p, &prompt).contains(&field));
                    }
                    expected => {
                        assert_eq!(Value::Object(sent), expected, "{shown}");
                        assert!(!lost, "{shown}: listed as not applied");
                    }
                }
            }
        }
        // None of them is left out before it is set.
        for kind in kinds {
            let never = ignored(kind);
            for field in [Field::StructuredOutputs, Field::Grammar, Field::JsonSchema] {
                assert!(!never.contains(&field), "{field:?} on {}", kind.name());
            }
        }
    }

    /// adaptive-p on llama.cpp's server: its two numbers, and `samplers` naming it (llama.cpp's
    /// default order does not); llama-cpp-python's server has no adaptive-p.
    #[test]
    fn adaptive_p_asks_llama_cpps_server_to_run_it() {
        let p = params("engine: llama.cpp\nadaptive_target: 0.4\nadaptive_decay: 0.8");
        let raw = Prompt::raw("Once");
        let server = body(ServerKind::LlamaServer, "m", &raw, &p, 1);
        assert_eq!(server["adaptive_target"], json!(0.4));
        assert_eq!(server["adaptive_decay"], json!(0.8));
        let samplers = server["samplers"].as_array().unwrap();
        assert_eq!(samplers.first(), Some(&json!("penalties")));
        assert_eq!(samplers.last(), Some(&json!("adaptive_p")));
        let off = body(
            ServerKind::LlamaServer,
            "m",
            &raw,
            &params("engine: llama.cpp"),
            1,
        );
        assert!(off.get("samplers").is_none(), "the server's own order");
        assert_eq!(
            not_applied(ServerKind::LlamaCppPython, &p, &raw),
            [Field::Engine, Field::AdaptiveTarget, Field::AdaptiveDecay]
        );
    }

    #[test]
    fn parameters_a_server_has_no_place_for_are_listed() {
        let p = params(
            "engine: llama.cpp\ntop_k: 5\nmin_p: 0.1\nxtc_probability: 0.5\nstop: [\"x\", 13]",
        );
        let raw = Prompt::raw("Once");
        let names = |kind| -> Vec<&str> {
            not_applied(kind, &p, &raw)
                .iter()
                .map(|f| f.name())
                .collect()
        };
        assert_eq!(
            names(ServerKind::OpenAi),
            ["stop", "top_k", "min_p", "engine", "xtc_probability"]
        );
        assert_eq!(names(ServerKind::Vllm), ["engine", "xtc_probability"]);
        assert_eq!(names(ServerKind::LlamaServer), ["stop", "engine"]);
        assert!(not_applied(ServerKind::OpenAi, &SamplingParams::default(), &raw).is_empty());
        assert_eq!(
            not_applied(ServerKind::Vllm, &params("engine: llama.cpp"), &raw),
            [Field::Engine]
        );
        // vLLM's server takes repetition_detection in the request, logprobs_mode not at all.
        let vllm = params(
            "repetition_detection: {max_pattern_size: 4, min_count: 3}\n\
             logprobs_mode: processed_logits",
        );
        assert_eq!(
            not_applied(ServerKind::Vllm, &vllm, &raw),
            [Field::LogprobsMode]
        );
        let sent = body(ServerKind::Vllm, "m", &raw, &vllm, 1);
        assert_eq!(sent["repetition_detection"]["min_count"], json!(3));
        assert_eq!(
            not_applied(ServerKind::LlamaServer, &vllm, &raw),
            [Field::LogprobsMode, Field::RepetitionDetection]
        );
        assert!(!ignored(ServerKind::LlamaServer).contains(&Field::LogprobsMode));
    }
}
