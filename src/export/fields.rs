//! The parameters beyond the classic five, per target: the keyword arguments and flags that
//! carry them, and a note for each one a target cannot take (never dropped silently).

use super::{py_float, py_list, py_str, py_value, sample_count, sh_value};
use crate::params::{Engine, Field, LogprobsMode, SamplingParams, possessive};
use crate::sampling::order_as_llama_cpp_stages;
use serde_yaml_ng::Value;

/// The fields the classic exports always handled, and `engine`, which the notes cover.
const CLASSIC: &[Field] = &[
    Field::MaxTokens,
    Field::Seed,
    Field::Stop,
    Field::IncludeStopStrInOutput,
    Field::Temperature,
    Field::TopK,
    Field::TopP,
    Field::MinP,
    Field::RepetitionPenalty,
    Field::NumSamples,
    Field::Logprobs,
    Field::PromptLogprobs,
    Field::Engine,
];

/// Notes for every field set away from its default that `target` has no place for, and for a
/// profile other than the target's own. An engine's export writes every field the params table
/// gives that engine (a test moves each one and checks); `None` is a target that takes the
/// classic fields only and samples as vLLM does (twinkle).
pub fn unexpressed(params: &SamplingParams, target: Option<Engine>, title: &str) -> Vec<String> {
    let defaults = SamplingParams::default();
    let mut notes = Vec::new();
    // vLLM's profile is samplab's default, whose differences each export already explains.
    if params.engine != Engine::Vllm && params.engine != target.unwrap_or(Engine::Vllm) {
        notes.push(format!(
            "samplab sampled with {} chain; {title} runs its own processors in its own order, \
             so the same numbers can keep other tokens (see docs/sampling.md).",
            possessive(params.engine.title())
        ));
    }
    for &field in Field::ALL {
        let value = params.get(field);
        let written = target.is_some_and(|engine| field.spec().exported_by().has(engine));
        if CLASSIC.contains(&field) || written || value == defaults.get(field) {
            continue;
        }
        notes.push(format!(
            "{} has no {title} equivalent and is left out.",
            shown(params, field)
        ));
    }
    notes
}

/// A field and its value as notes name them, on one line: `grammar="root ::= \"a\"\n…"`.
pub fn shown(params: &SamplingParams, field: Field) -> String {
    let value = serde_json::to_string(&params.get(field)).unwrap_or_default();
    format!("{}={value}", field.name())
}

/// `field`'s name in `engine`'s export, from the params table (every field an export writes by
/// name has one: a test checks).
pub fn name(field: Field, engine: Engine) -> &'static str {
    field.spec().names.in_engine(engine).unwrap_or(field.name())
}

/// `field`'s value as `engine` spells it (off in its own way).
pub fn value(params: &SamplingParams, field: Field, engine: Engine) -> Value {
    field.spec().value_for(engine, params.get(field))
}

/// `field` as `engine`'s keyword argument, its value a Python literal.
pub fn kwarg(params: &SamplingParams, field: Field, engine: Engine) -> (&'static str, String) {
    (name(field, engine), py_value(&value(params, field, engine)))
}

/// Whether `field` is set away from its default, off spelled one way.
fn moved(params: &SamplingParams, field: Field) -> bool {
    let defaults = SamplingParams::default();
    value(params, field, Engine::Vllm) != value(&defaults, field, Engine::Vllm)
}

/// The fields beyond the classic ones that `engine`'s export writes by name when they are moved
/// (and, for llama.cpp under its own profile, always), in table order; constraints have a
/// writer of their own.
fn extra(params: &SamplingParams, engine: Engine) -> impl Iterator<Item = Field> + '_ {
    let own = params.engine == engine;
    Field::ALL.iter().copied().filter(move |&field| {
        let spec = field.spec();
        !CLASSIC.contains(&field)
            && spec.names.in_engine(engine).is_some()
            && !matches!(field, Field::StructuredOutputs | Field::Grammar | Field::JsonSchema)
            // What samplab applied: a field outside the run's profile changed nothing.
            && spec.engines.has(params.engine)
            && (moved(params, field) || (own && engine == Engine::LlamaCpp))
    })
}

/// vLLM's fields by name and value, in the order its `SamplingParams` and its server's body
/// write them: the classic ones always, then the moved ones. The writers give `logprobs`,
/// `watch` and the constraint their own forms.
pub fn vllm_fields(params: &SamplingParams) -> Vec<(&'static str, Value)> {
    let vllm = Engine::Vllm;
    let stop = params.stop.clone().unwrap_or_default();
    let mut fields = vec![(
        name(Field::NumSamples, vllm),
        Value::from(sample_count(params)),
    )];
    fields.extend(
        [
            Field::Temperature,
            Field::TopK,
            Field::TopP,
            Field::MinP,
            Field::RepetitionPenalty,
            Field::MaxTokens,
            Field::Seed,
        ]
        .map(|field| (name(field, vllm), value(params, field, vllm))),
    );
    fields.extend([
        (name(Field::Stop, vllm), stop.strings().collect()),
        // vLLM takes the stops' token ids apart from their strings.
        ("stop_token_ids", stop.token_ids().collect()),
    ]);
    fields.extend(
        [
            Field::IncludeStopStrInOutput,
            Field::Logprobs,
            Field::PromptLogprobs,
        ]
        .map(|field| (name(field, vllm), value(params, field, vllm))),
    );
    fields.extend(
        extra(params, vllm)
            .filter(|&field| field != Field::Watch)
            .map(|field| (name(field, vllm), value(params, field, vllm))),
    );
    fields
}

/// vLLM's engine arguments among the parameters, as (name, value), where they differ from
/// vLLM's default: `logprobs_mode` is the engine's, not a request's.
fn vllm_engine_args(params: &SamplingParams) -> Option<(&'static str, &'static str)> {
    let mode = params.logprobs_mode;
    (mode != LogprobsMode::default()).then(|| ("logprobs_mode", mode.name()))
}

/// The engine arguments as `LLM(...)` keyword arguments, each after a comma.
pub fn vllm_engine_kwargs(params: &SamplingParams) -> String {
    vllm_engine_args(params)
        .map(|(name, value)| format!(", {name}={}", py_str(value)))
        .unwrap_or_default()
}

/// The engine arguments as `vllm serve` flags, each after a space.
pub fn vllm_serve_flags(params: &SamplingParams) -> String {
    vllm_engine_args(params)
        .map(|(name, value)| format!(" --{} {value}", name.replace('_', "-")))
        .unwrap_or_default()
}

/// transformers `generate()` keyword arguments for the fields it has beyond the classic ones:
/// biases and banned words in its own forms, warpers only when it samples.
pub fn transformers_kwargs(params: &SamplingParams) -> Vec<(&'static str, String)> {
    let engine = Engine::Transformers;
    extra(params, engine)
        // Greedy decoding runs no warper.
        .filter(|&field| !(params.is_greedy() && matches!(field, Field::TypicalP | Field::TopH)))
        .map(|field| {
            let value = match field {
                Field::LogitBias => {
                    let bias = params.logit_bias.iter().flat_map(|bias| bias.applied());
                    let entries: Vec<String> = bias
                        .map(|(id, b)| format!("({id},): {}", py_float(b)))
                        .collect();
                    format!("{{{}}}", entries.join(", "))
                }
                Field::BadWords => {
                    let words = params.bad_words.iter().flatten().map(|w| py_str(w));
                    format!(
                        "[tokenizer(w, add_special_tokens=False).input_ids for w in {}]",
                        py_list(words)
                    )
                }
                field => py_value(&value(params, field, engine)),
            };
            (name(field, engine), value)
        })
        .collect()
}

/// llama.cpp's flags for the fields beyond the classic ones: the whole chain
/// under the llama.cpp profile (each flag written out, llama.cpp's defaults being its own),
/// what samplab applied otherwise.
pub fn llama_cpp_flags(params: &SamplingParams) -> impl Iterator<Item = String> + '_ {
    let engine = Engine::LlamaCpp;
    extra(params, engine)
        .filter(|&field| !matches!(field, Field::Samplers | Field::RepeatLastN))
        // Only when on: older llama.cpp builds refuse the flags they do not know.
        .filter(|&field| {
            params.adaptive_p() || !matches!(field, Field::AdaptiveTarget | Field::AdaptiveDecay)
        })
        .filter_map(move |field| {
            let flag = name(field, engine);
            match (field, value(params, field, engine)) {
                (Field::LogitBias, _) => params.logit_bias.as_ref().map(|bias| {
                    bias.applied()
                        .map(|(id, b)| format!("{flag} {id}{b:+}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                }),
                (_, Value::Bool(on)) => on.then(|| flag.to_owned()),
                // A list is the flag once per item.
                (_, Value::Sequence(items)) => Some(
                    items
                        .iter()
                        .map(|item| format!("{flag} {}", sh_value(item)))
                        .collect::<Vec<_>>()
                        .join(" "),
                ),
                (_, value) => Some(format!("{flag} {}", sh_value(&value))),
            }
        })
}

/// Flags joined into lines of about 72 columns, so that a long command stays readable.
pub fn packed(flags: impl Iterator<Item = String>) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for flag in flags {
        match lines.last_mut() {
            Some(line) if line.len() + 1 + flag.len() <= 72 => {
                line.push(' ');
                line.push_str(&flag);
            }
            _ => lines.push(flag),
        }
    }
    lines
}

/// The `--samplers` list and `--repeat-last-n` window: the profile's own under llama.cpp, else
/// the profile's order and vLLM's and transformers' whole-context penalty.
pub fn llama_cpp_chain(params: &SamplingParams) -> (String, i32) {
    let (order, repeat_last_n) = match params.engine {
        Engine::LlamaCpp => (params.llama_cpp_order(), params.repeat_last_n),
        engine => (order_as_llama_cpp_stages(engine), -1),
    };
    let names: Vec<&str> = order.iter().map(|s| s.name()).collect();
    (names.join(";"), repeat_last_n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_is_classic_or_has_a_target_or_a_note() {
        let odd = SamplingParams::from_yaml(
            "engine: llama.cpp\ndry_multiplier: 0.8\ntypical_p: 0.9\npresence_penalty: 0.5",
        )
        .unwrap();
        let vllm = unexpressed(&odd, Some(Engine::Vllm), "vLLM");
        assert!(vllm[0].contains("llama.cpp's chain"), "{vllm:?}");
        assert!(
            vllm.iter().any(|n| n.contains("dry_multiplier=0.8")),
            "{vllm:?}"
        );
        assert!(vllm.iter().any(|n| n.contains("typical_p=0.9")), "{vllm:?}");
        assert!(
            !vllm.iter().any(|n| n.contains("presence_penalty")),
            "{vllm:?}"
        );
        assert!(unexpressed(&odd, Some(Engine::LlamaCpp), "llama.cpp").is_empty());
        assert!(unexpressed(&odd, None, "twinkle").len() == 4);
    }
}
