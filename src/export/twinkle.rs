//! twinkle's `SamplingParams` (`twinkle.data_format`), whose fields and defaults samplab's
//! parameters come from, with the `to_vllm` / `to_transformers` calls that turn it into each
//! engine's own parameters.
//!
//! Only fields that differ from twinkle's defaults are written: they are samplab's defaults, so
//! nothing is lost. Checked against twinkle's `data_format/sampling.py`: `to_vllm(*,
//! num_samples=1, logprobs=True, prompt_logprobs=0)` and `to_transformers(tokenizer=None)`.

use super::{
    ExportContext, comments, join_lines, py_bool, py_kwargs, py_list, py_str, py_value,
    sample_count, vllm_notes,
};
use crate::params::{Engine, Field, SamplingParams, TokenTexts};

/// Python building twinkle's `SamplingParams` and the engine parameters it converts to.
pub fn to_twinkle(params: &SamplingParams, ctx: &ExportContext) -> String {
    let mut notes = twinkle_notes(params);
    notes.extend(super::fields::unexpressed(params, None, "twinkle"));
    let mut lines = comments(
        ctx,
        "twinkle's SamplingParams with samplab's sampling parameters; fields at twinkle's \
         defaults (which are samplab's) are left out.",
        &notes,
    );
    lines.extend([
        "from transformers import AutoTokenizer".to_owned(),
        "from twinkle.data_format import SamplingParams".to_owned(),
        String::new(),
        format!("model_id = {}", py_str(ctx.model)),
    ]);
    let kwargs = constructor_kwargs(params);
    if kwargs.is_empty() {
        lines.push("params = SamplingParams()".to_owned());
    } else {
        lines.push("params = SamplingParams(".to_owned());
        lines.extend(py_kwargs(&kwargs));
        lines.push(")".to_owned());
    }
    lines.extend([
        format!(
            "vllm_params = params.to_vllm(num_samples={}, logprobs={}, prompt_logprobs={})",
            sample_count(params),
            py_bool(params.logprobs.is_some()),
            twinkle_prompt_logprobs(params)
        ),
        "tokenizer = AutoTokenizer.from_pretrained(model_id)".to_owned(),
        "gen_kwargs = params.to_transformers(tokenizer=tokenizer)".to_owned(),
    ]);
    join_lines(lines)
}

/// The constructor's keyword arguments, in the table's order (which is twinkle's), defaults
/// left out; `stop` in twinkle's form.
fn constructor_kwargs(params: &SamplingParams) -> Vec<(&'static str, String)> {
    let defaults = SamplingParams::default();
    Field::ALL
        .iter()
        .filter_map(|&field| {
            let name = field.spec().names.twinkle?;
            let value = field.spec().value_for(Engine::Vllm, params.get(field));
            if value == field.spec().value_for(Engine::Vllm, defaults.get(field)) {
                return None;
            }
            match field {
                Field::Stop => twinkle_stop(params),
                _ => Some(py_value(&value)),
            }
            .map(|value| (name, value))
        })
        .collect()
}

/// twinkle's `stop` is a list of strings or a list of token ids (it reads a list as ids when
/// its first item is an int), never both: with both, the strings are kept.
fn twinkle_stop(params: &SamplingParams) -> Option<String> {
    let stop = params.stop.as_ref().filter(|s| !s.is_empty())?;
    if stop.strings().next().is_some() {
        Some(py_list(stop.strings().map(py_str)))
    } else {
        Some(py_list(stop.token_ids()))
    }
}

/// `to_vllm` asks vLLM for prompt logprobs only when this is above 0.
fn twinkle_prompt_logprobs(params: &SamplingParams) -> u32 {
    params.prompt_logprobs.map_or(0, |n| n.max(1))
}

/// What twinkle's `SamplingParams` and its conversions cannot say, or say differently.
fn twinkle_notes(params: &SamplingParams) -> Vec<String> {
    let mut notes = Vec::new();
    if params.min_p > 0.0 {
        notes.push(format!(
            "twinkle's SamplingParams has no min_p, so min_p={} is left out: its runs keep \
             the tokens min_p would drop.",
            params.min_p
        ));
    }
    let stop = params.stop.clone().unwrap_or_default();
    notes.extend(stop_notes(params, &stop));
    if let Some(n) = params.logprobs.filter(|&n| n > 0) {
        notes.push(format!(
            "to_vllm(logprobs=True) returns the chosen token's logprob only; samplab's top {n} \
             alternatives per token have no twinkle setting."
        ));
    }
    if params.prompt_logprobs == Some(0) {
        notes.push(
            "to_vllm passes prompt_logprobs only when it is above 0, so samplab's 0 (the prompt \
             tokens' own logprobs) is asked as 1, which adds each position's top alternative."
                .to_owned(),
        );
    }
    if params.max_tokens.is_none() {
        notes.push(
            "max_tokens null: to_vllm leaves vLLM's default of 16 tokens and to_transformers \
             stops at 2048; samplab runs to EOS or the end of the context."
                .to_owned(),
        );
    }
    if params.num_samples > 1 && !params.is_greedy() {
        notes.push(format!(
            "to_transformers has no sample count: pass num_return_sequences={} to generate(); \
             its samples draw from one torch generator, samplab gives sample i seed+i.",
            params.num_samples
        ));
    }
    notes.extend(vllm_notes(params));
    notes
}

fn stop_notes(params: &SamplingParams, stop: &TokenTexts) -> Vec<String> {
    let mut notes = Vec::new();
    let has_strings = stop.strings().next().is_some();
    let ids: Vec<String> = stop.token_ids().map(|id| id.to_string()).collect();
    if has_strings && !ids.is_empty() {
        notes.push(format!(
            "twinkle's stop takes strings or token ids, not both, so the token ids [{}] are \
             left out.",
            ids.join(", ")
        ));
    }
    if has_strings {
        notes.push(
            "to_transformers stops on any one token of a stop string's encoding (added to \
             eos_token_id), not on the whole string as to_vllm and samplab do."
                .to_owned(),
        );
        if params.include_stop_str_in_output {
            notes.push(
                "twinkle's SamplingParams has no include_stop_str_in_output: its runs cut the \
                 stop string, samplab keeps it."
                    .to_owned(),
            );
        }
    }
    notes
}
