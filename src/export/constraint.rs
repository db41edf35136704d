//! The run's constraint (structured outputs) per target: vLLM's `StructuredOutputsParams`, an
//! OpenAI-compatible body's `response_format` or `structured_outputs`, llama.cpp's
//! `--grammar` / `--json-schema`, and a note wherever a target has no place for it.

use super::{fields, py_json, py_list, py_str, sh_word};
use crate::params::{LlamaCppConstraint, SamplingParams, StructuredOutputs};
use serde_json::Value as Json;

/// The class `structured_outputs=` needs imported, only then.
pub const VLLM_CLASS: &str = "StructuredOutputsParams";

/// vLLM's `structured_outputs=StructuredOutputsParams(…)`: llama.cpp's `grammar` is its
/// `grammar` (vLLM reads GBNF) and `json_schema` its `json`.
pub fn vllm_kwarg(params: &SamplingParams) -> Option<(&'static str, String)> {
    let (_, constraint) = params.constraint()?;
    let value = match &constraint {
        StructuredOutputs::Json(schema) => py_json(&schema.0),
        StructuredOutputs::Regex(text) | StructuredOutputs::Grammar(text) => py_str(text),
        StructuredOutputs::Choice(choice) => py_list(choice.iter().map(|c| py_str(c))),
        StructuredOutputs::JsonObject => "True".to_owned(),
    };
    Some((
        "structured_outputs",
        format!("StructuredOutputsParams({}={value})", constraint.kind()),
    ))
}

/// transformers' `generate()` has no constraint of its own: the nearest is a logits processor.
pub fn transformers_note(params: &SamplingParams) -> Option<String> {
    let (shown, _) = named(params)?;
    Some(format!(
        "transformers has no structured outputs: {shown} needs a constraining logits \
         processor passed as generate(logits_processor=[...]), such as outlines' or one built \
         on llguidance (samplab masks after transformers' own processors)."
    ))
}

/// The OpenAI-compatible body's `response_format` and `structured_outputs`, one at most:
/// OpenAI's `response_format` where it has one (a JSON schema, any JSON object), else vLLM's
/// `structured_outputs`.
pub fn openai_fields(params: &SamplingParams) -> (Option<Json>, Option<Json>) {
    let Some((_, constraint)) = params.constraint() else {
        return (None, None);
    };
    match constraint.response_format() {
        Some(format) => (Some(format), None),
        None => (None, Some(serde_json::json!(constraint))),
    }
}

/// Said when the body carries vLLM's `structured_outputs`.
pub fn openai_note(params: &SamplingParams) -> Option<String> {
    openai_fields(params).1.map(|_| {
        "structured_outputs is a vLLM extension: OpenAI's own API constrains output only \
         through response_format (a JSON schema or any JSON object)."
            .to_owned()
    })
}

/// llama.cpp's flag for the constraint, its GBNF or schema as one shell word.
pub fn llama_cpp_flag(params: &SamplingParams) -> Option<String> {
    let (_, constraint) = params.constraint()?;
    Some(match constraint.to_llama_cpp()? {
        LlamaCppConstraint::Grammar(gbnf) => format!("--grammar {}", sh_word(&gbnf)),
        LlamaCppConstraint::JsonSchema(schema) => {
            format!("--json-schema {}", sh_word(&schema.to_string()))
        }
    })
}

/// Said for a regex or a Lark grammar, which llama.cpp has no flag for.
pub fn llama_cpp_note(params: &SamplingParams) -> Option<String> {
    let (shown, constraint) = named(params)?;
    let what = match &constraint {
        StructuredOutputs::Regex(_) => "a regex",
        _ => "a Lark grammar",
    };
    constraint.to_llama_cpp().is_none().then(|| {
        format!(
            "{shown} is left out: llama.cpp takes GBNF (--grammar) and JSON schemas \
             (--json-schema), not {what} (only a build with llguidance reads Lark, as a \
             %llguidance grammar)."
        )
    })
}

/// The constraint, and its field and value as notes name them.
fn named(params: &SamplingParams) -> Option<(String, StructuredOutputs)> {
    let (field, constraint) = params.constraint()?;
    Some((fields::shown(params, field), constraint))
}
