//! The parameters beyond the classic five, per target: the keyword arguments and flags that
//! carry them, and a note for each one a target cannot take (never dropped silently).

use super::{py_bool, py_float, py_list, py_str, sh_word};
use crate::params::{Engine, Field, SamplingParams, TokenText};
use crate::sampling::order_as_llama_cpp_stages;

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
            "samplab sampled with {}'s chain; {title} runs its own processors in its own order, \
             so the same numbers can keep other tokens (see docs/sampling.md).",
            params.engine.title()
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

/// vLLM keyword arguments for the fields beyond the classic ones that differ from the default.
pub fn vllm_kwargs(params: &SamplingParams) -> Vec<(&'static str, String)> {
    let mut kwargs = Vec::new();
    if params.presence_penalty != 0.0 {
        kwargs.push(("presence_penalty", py_float(params.presence_penalty)));
    }
    if params.frequency_penalty != 0.0 {
        kwargs.push(("frequency_penalty", py_float(params.frequency_penalty)));
    }
    if params.min_tokens > 0 {
        kwargs.push(("min_tokens", params.min_tokens.to_string()));
    }
    if params.ignore_eos {
        kwargs.push(("ignore_eos", py_bool(true)));
    }
    if let Some(bias) = &params.logit_bias {
        let entries: Vec<String> = bias
            .0
            .iter()
            .map(|(id, b)| format!("{id}: {}", py_float(*b)))
            .collect();
        kwargs.push(("logit_bias", format!("{{{}}}", entries.join(", "))));
    }
    if let Some(words) = &params.bad_words {
        kwargs.push(("bad_words", py_list(words.iter().map(|w| py_str(w)))));
    }
    if let Some(ids) = &params.allowed_token_ids {
        kwargs.push(("allowed_token_ids", py_list(ids)));
    }
    if let Some(watch) = params.watch.as_ref().filter(|w| !w.is_empty()) {
        // A string is watched by its first token, as samplab watches it.
        let ids = watch.0.iter().map(|item| match item {
            TokenText::Token(id) => id.to_string(),
            TokenText::Text(text) => format!(
                "llm.get_tokenizer().encode({}, add_special_tokens=False)[0]",
                py_str(text)
            ),
        });
        kwargs.push(("logprob_token_ids", py_list(ids)));
    }
    kwargs
}

/// transformers `generate()` keyword arguments for the fields it has beyond the classic ones.
pub fn transformers_kwargs(params: &SamplingParams) -> Vec<(&'static str, String)> {
    let mut kwargs = Vec::new();
    if params.min_tokens > 0 {
        kwargs.push(("min_new_tokens", params.min_tokens.to_string()));
    }
    if params.typical_p < 1.0 && !params.is_greedy() {
        kwargs.push(("typical_p", py_float(params.typical_p)));
    }
    if let Some(top_h) = params.top_h.filter(|_| !params.is_greedy()) {
        kwargs.push(("top_h", py_float(top_h)));
    }
    if let Some(bias) = &params.logit_bias {
        let entries: Vec<String> = bias
            .applied()
            .map(|(id, b)| format!("({id},): {}", py_float(b)))
            .collect();
        kwargs.push(("sequence_bias", format!("{{{}}}", entries.join(", "))));
    }
    if let Some(words) = &params.bad_words {
        let words = py_list(words.iter().map(|w| py_str(w)));
        kwargs.push((
            "bad_words_ids",
            format!("[tokenizer(w, add_special_tokens=False).input_ids for w in {words}]"),
        ));
    }
    kwargs
}

/// llama.cpp flags for the fields beyond the classic ones: the whole chain under the llama.cpp
/// profile (each flag written out, llama.cpp's defaults being its own), the penalties and
/// biases otherwise.
pub fn llama_cpp_flags(params: &SamplingParams) -> Vec<String> {
    let mut flags = Vec::new();
    let mut penalties = Vec::new();
    if params.presence_penalty != 0.0 || params.engine == Engine::LlamaCpp {
        penalties.push(format!("--presence-penalty {}", params.presence_penalty));
    }
    if params.frequency_penalty != 0.0 || params.engine == Engine::LlamaCpp {
        penalties.push(format!("--frequency-penalty {}", params.frequency_penalty));
    }
    if !penalties.is_empty() {
        flags.push(penalties.join(" "));
    }
    if params.engine == Engine::LlamaCpp {
        flags.push(format!(
            "--typical {} --top-nsigma {} --min-keep {}",
            params.typical_p, params.top_n_sigma, params.min_keep
        ));
        flags.push(format!(
            "--xtc-probability {} --xtc-threshold {}",
            params.xtc_probability, params.xtc_threshold
        ));
        let mut dry = format!(
            "--dry-multiplier {} --dry-base {} --dry-allowed-length {} --dry-penalty-last-n {}",
            params.dry_multiplier,
            params.dry_base,
            params.dry_allowed_length,
            params.dry_penalty_last_n
        );
        for breaker in &params.dry_sequence_breakers {
            dry.push_str(&format!(" --dry-sequence-breaker {}", sh_word(breaker)));
        }
        flags.push(dry);
        flags.push(format!(
            "--mirostat {} --mirostat-ent {} --mirostat-lr {}",
            params.mirostat, params.mirostat_tau, params.mirostat_eta
        ));
        flags.push(format!(
            "--dynatemp-range {} --dynatemp-exp {}",
            params.dynatemp_range, params.dynatemp_exponent
        ));
        // Only when on: older llama.cpp builds refuse the flags they do not know.
        if params.adaptive_p() {
            flags.push(format!(
                "--adaptive-target {} --adaptive-decay {}",
                params.adaptive_target, params.adaptive_decay
            ));
        }
    } else if params.typical_p < 1.0 && !params.is_greedy() {
        // transformers' typical_p, which the chain below runs last, as transformers does.
        flags.push(format!("--typical {}", params.typical_p));
    }
    if params.ignore_eos {
        flags.push("--ignore-eos".to_owned());
    }
    if let Some(bias) = &params.logit_bias {
        flags.push(
            bias.applied()
                .map(|(id, b)| format!("-l {id}{b:+}"))
                .collect::<Vec<_>>()
                .join(" "),
        );
    }
    flags
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
