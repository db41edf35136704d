//! Export: samplab's parameters as code for vLLM, transformers, an OpenAI-compatible server,
//! llama.cpp and twinkle, so that a setting found in the playground can be reproduced elsewhere.
//!
//! Every knob is written out, even at its default: the other engines fill missing ones from the
//! model's `generation_config.json` or from defaults of their own (vLLM's `max_tokens=16`,
//! llama.cpp's `top_k=40`); twinkle, whose defaults are samplab's, is the exception. Whatever a
//! target cannot express exactly becomes a `#` comment in the output; nothing is dropped silently.
//!
//! Semantics checked against vLLM (`vllm/sampling_params.py`, `vllm/v1/sample/sampler.py`,
//! `vllm/v1/engine/parallel_sampling.py`, `vllm/v1/engine/detokenizer.py`), transformers
//! (`GenerationMixin._get_logits_processor`) and llama.cpp (`common/arg.cpp`,
//! `common/sampling.cpp`, `tools/completion/completion.cpp`).

use crate::engine::BackendKind;
use crate::model::text::chat_template::Message;
use crate::params::{Engine, Field, SamplingParams, TokenText};
use serde::Serialize;
use serde_json::{Value as Json, json};
use serde_yaml_ng::Value;

mod chat;
mod constraint;
mod fields;
mod twinkle;
pub use twinkle::to_twinkle;

/// The engines samplab writes code for, in the order the CLI lists them and the playground's
/// export dialog shows them; [`ExportFormat::spec`] holds each one's row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// Python using vLLM's offline `LLM` and `SamplingParams`.
    Vllm,
    /// Python using transformers' `generate()`.
    Transformers,
    /// A curl request to an OpenAI-compatible server (vLLM's): `/v1/completions`, or
    /// `/v1/chat/completions` for a conversation.
    Openai,
    /// A llama.cpp command line.
    #[value(alias = "llama.cpp", alias = "llama-cpp")]
    Llamacpp,
    /// Python building twinkle's `SamplingParams` and its `to_vllm` / `to_transformers` calls.
    Twinkle,
}

/// Writes one format's code.
pub type Writer = fn(&SamplingParams, &ExportContext) -> String;

/// One export format's row: what the dialog calls it and what writes it.
#[derive(Debug, Clone, Copy)]
pub struct FormatSpec {
    /// The export dialog's tab title.
    pub title: &'static str,
    pub write: Writer,
}

impl ExportFormat {
    /// The table of formats: a new format is a variant and its row here.
    pub fn spec(self) -> FormatSpec {
        let (title, write): (&'static str, Writer) = match self {
            ExportFormat::Vllm => ("vLLM", to_vllm),
            ExportFormat::Transformers => ("transformers", to_transformers),
            ExportFormat::Openai => ("OpenAI request", to_openai),
            ExportFormat::Llamacpp => ("llama.cpp", to_llama_cpp),
            ExportFormat::Twinkle => ("twinkle", to_twinkle),
        };
        FormatSpec { title, write }
    }

    /// Every format, in table order.
    pub fn all() -> &'static [ExportFormat] {
        <Self as clap::ValueEnum>::value_variants()
    }
}

/// What a snippet needs besides the parameters.
#[derive(Debug, Clone, Copy)]
pub struct ExportContext<'a> {
    pub prompt: &'a str,
    /// As given to `--model`: a Hub id, a model directory or a `.gguf` file.
    pub model: &'a str,
    /// A chat run's conversation (system message, earlier turns, then `prompt` as the last user
    /// message), which each target renders through the model's chat template; `None` for a
    /// raw prompt.
    pub messages: Option<&'a [Message]>,
    /// `--chat-template`: a Jinja file, or the name of one of the model's templates, that the
    /// conversation is rendered with instead of the model's default.
    pub chat_template: Option<&'a str>,
    /// The backend samplab ran the model on, named in the header; `None` where no model ran.
    pub backend: Option<BackendKind>,
}

impl<'a> ExportContext<'a> {
    /// A raw prompt for `model`, with no run behind it.
    pub const fn raw(prompt: &'a str, model: &'a str) -> Self {
        Self {
            prompt,
            model,
            messages: None,
            chat_template: None,
            backend: None,
        }
    }
}

/// The one entry point for the CLI and the TUI. `params` should be validated.
pub fn export(format: ExportFormat, params: &SamplingParams, ctx: &ExportContext) -> String {
    (format.spec().write)(params, ctx)
}

/// vLLM's class for `repetition_detection` in its offline API.
const REPETITION_DETECTION_CLASS: &str = "RepetitionDetectionParams";

/// Python for vLLM's offline API: `SamplingParams(...)` and `llm.generate(prompt, params)`.
pub fn to_vllm(params: &SamplingParams, ctx: &ExportContext) -> String {
    let mut notes = vllm_notes(params);
    notes.extend(fields::unexpressed(params, Some(Engine::Vllm), "vLLM"));
    notes.extend(chat::template_name_note(ctx, "vLLM's llm.chat"));
    let mut lines = comments(
        ctx,
        "vLLM offline inference with samplab's sampling parameters.",
        &notes,
    );
    let constraint = constraint::vllm_kwarg(params);
    lines.push("from vllm import LLM, SamplingParams".to_owned());
    let classes: Vec<&str> = (constraint.as_ref().map(|_| constraint::VLLM_CLASS))
        .into_iter()
        .chain(
            params
                .repetition_detection
                .map(|_| REPETITION_DETECTION_CLASS),
        )
        .collect();
    if !classes.is_empty() {
        lines.push(format!(
            "from vllm.sampling_params import {}",
            classes.join(", ")
        ));
    }
    lines.extend([
        String::new(),
        format!(
            "llm = LLM(model={}{})",
            py_str(ctx.model),
            fields::vllm_engine_kwargs(params)
        ),
    ]);
    lines.extend(chat::py_prompt(ctx));
    lines.push("params = SamplingParams(".to_owned());
    let repetition = fields::name(Field::RepetitionDetection, Engine::Vllm);
    let mut kwargs: Vec<(&str, String)> = fields::vllm_fields(params)
        .iter()
        .map(|(name, value)| match value {
            // vLLM's offline API takes its own class, where its server takes the mapping.
            Value::Mapping(entries) if *name == repetition => {
                let args: Vec<String> = entries
                    .iter()
                    .filter_map(|(key, value)| {
                        Some(format!("{}={}", key.as_str()?, py_value(value)))
                    })
                    .collect();
                (
                    *name,
                    format!("{REPETITION_DETECTION_CLASS}({})", args.join(", ")),
                )
            }
            value => (*name, py_value(value)),
        })
        .collect();
    if let Some(watch) = params.watch.as_ref().filter(|w| !w.is_empty()) {
        // A string is watched by its first token, as samplab watches it.
        let ids = watch.0.iter().map(|item| match item {
            TokenText::Token(id) => id.to_string(),
            TokenText::Text(text) => format!(
                "llm.get_tokenizer().encode({}, add_special_tokens=False)[0]",
                py_str(text)
            ),
        });
        kwargs.push((fields::name(Field::Watch, Engine::Vllm), py_list(ids)));
    }
    kwargs.extend(constraint);
    lines.extend(py_kwargs(&kwargs));
    lines.extend(
        [
            ")",
            chat::vllm_call(ctx),
            "for sample in outputs[0].outputs:",
            "    print(sample.text)",
        ]
        .map(str::to_owned),
    );
    join_lines(lines)
}

/// Python for transformers: `generate()` keyword arguments plus seeding and decoding.
pub fn to_transformers(params: &SamplingParams, ctx: &ExportContext) -> String {
    let stop = params.stop.clone().unwrap_or_default();
    let stop_ids: Vec<u32> = stop.token_ids().collect();
    let has_stop_strings = stop.strings().next().is_some();
    // `set_seed` also seeds numpy, which refuses seeds of 2**32 and above.
    let torch_seed = params.seed.filter(|&s| s > u64::from(u32::MAX));

    let mut notes = transformers_notes(params);
    notes.extend(constraint::transformers_note(params));
    notes.extend(fields::unexpressed(
        params,
        Some(Engine::Transformers),
        "transformers",
    ));
    let mut lines = comments(
        ctx,
        "transformers generate() with samplab's sampling parameters; every knob is passed \
         because the model's generation_config.json supplies any that are left out.",
        &notes,
    );
    if torch_seed.is_some() {
        lines.push("import torch".to_owned());
    }
    let set_seed = if params.seed.is_some() && torch_seed.is_none() {
        ", set_seed"
    } else {
        ""
    };
    lines.extend([
        format!("from transformers import AutoModelForCausalLM, AutoTokenizer{set_seed}"),
        String::new(),
        format!("model_id = {}", py_str(ctx.model)),
    ]);
    lines.extend(chat::py_prompt(ctx));
    lines.extend([
        "tokenizer = AutoTokenizer.from_pretrained(model_id)".to_owned(),
        "model = AutoModelForCausalLM.from_pretrained(model_id)".to_owned(),
        chat::transformers_inputs(ctx),
    ]);
    match (params.seed, torch_seed) {
        (_, Some(seed)) => lines.push(format!("torch.manual_seed({seed})")),
        (Some(seed), None) => lines.push(format!("set_seed({seed})")),
        (None, None) => {}
    }
    if !stop_ids.is_empty() {
        lines.extend([
            "# eos_token_id replaces the model's end-of-sequence ids, so they are kept.".to_owned(),
            "eos_ids = model.generation_config.eos_token_id".to_owned(),
            "eos_ids = [eos_ids] if isinstance(eos_ids, int) else list(eos_ids or [])".to_owned(),
        ]);
    }

    let engine = Engine::Transformers;
    let mut kwargs = vec![("do_sample", py_bool(!params.is_greedy()))];
    if !params.is_greedy() {
        kwargs.extend(
            [Field::Temperature, Field::TopK, Field::TopP, Field::MinP]
                .map(|field| fields::kwarg(params, field, engine)),
        );
    }
    kwargs.push(fields::kwarg(params, Field::RepetitionPenalty, engine));
    kwargs.extend(fields::transformers_kwargs(params));
    kwargs.push(match params.max_tokens {
        Some(_) => fields::kwarg(params, Field::MaxTokens, engine),
        None => (
            "max_length",
            "model.config.max_position_embeddings".to_owned(),
        ),
    });
    kwargs.push((
        fields::name(Field::NumSamples, engine),
        sample_count(params).to_string(),
    ));
    if has_stop_strings {
        kwargs.push((
            fields::name(Field::Stop, engine),
            py_list(stop.strings().map(py_str)),
        ));
        kwargs.push(("tokenizer", "tokenizer".to_owned()));
    }
    if !stop_ids.is_empty() {
        kwargs.push(("eos_token_id", format!("eos_ids + {}", py_list(stop_ids))));
    }
    if params.logprobs.is_some() {
        kwargs.extend([
            ("output_scores", py_bool(true)),
            ("output_logits", py_bool(true)),
            ("return_dict_in_generate", py_bool(true)),
        ]);
    }
    lines.push("output = model.generate(".to_owned());
    lines.push("    **inputs,".to_owned());
    lines.extend(py_kwargs(&kwargs));
    lines.push(")".to_owned());
    let sequences = if params.logprobs.is_some() {
        "output.sequences"
    } else {
        "output"
    };
    lines.extend([
        "prompt_len = inputs[\"input_ids\"].shape[1]".to_owned(),
        format!("for sequence in {sequences}:"),
        "    print(tokenizer.decode(sequence[prompt_len:], skip_special_tokens=True))".to_owned(),
    ]);
    join_lines(lines)
}

/// The JSON body of `POST /v1/completions` (a raw prompt) or `/v1/chat/completions` (a
/// conversation) for vLLM's OpenAI-compatible server, pretty-printed, its fields in the order a
/// reader expects.
pub fn openai_body(params: &SamplingParams, ctx: &ExportContext) -> String {
    let mut body: Vec<(&str, Json)> = vec![("model", json!(ctx.model))];
    match ctx.messages {
        None => body.push(("prompt", json!(ctx.prompt))),
        Some(messages) => body.push(("messages", chat::json_messages(messages))),
    }
    body.extend(chat::openai_template(ctx).map(|template| ("chat_template", json!(template))));
    let logprobs = fields::name(Field::Logprobs, Engine::Vllm);
    for (name, value) in fields::vllm_fields(params) {
        let value = serde_json::to_value(&value).unwrap_or(Json::Null);
        if name == logprobs && ctx.messages.is_some() {
            // Chat completions take whether, with the count in `top_logprobs`.
            body.push((name, json!(!value.is_null())));
            if !value.is_null() {
                body.push(("top_logprobs", value));
            }
        } else {
            body.push((name, value));
        }
    }
    let watched: Vec<u32> = params.watch.iter().flat_map(|w| w.token_ids()).collect();
    if !watched.is_empty() {
        body.push((fields::name(Field::Watch, Engine::Vllm), json!(watched)));
    }
    let (response_format, structured_outputs) = constraint::openai_fields(params);
    body.extend(response_format.map(|format| ("response_format", format)));
    body.extend(structured_outputs.map(|constraint| ("structured_outputs", constraint)));
    serde_json::to_string_pretty(&InOrder(body)).expect("the completions body always serialises")
}

/// A JSON object whose fields keep the order they were given in.
struct InOrder<'a>(Vec<(&'a str, Json)>);

impl Serialize for InOrder<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, value) in &self.0 {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

/// A curl command posting [`openai_body`] to the endpoint of the prompt's kind.
pub fn to_openai(params: &SamplingParams, ctx: &ExportContext) -> String {
    let mut notes = vec![
        "top_k, min_p, repetition_penalty, stop_token_ids, include_stop_str_in_output and \
         prompt_logprobs are vLLM extensions: OpenAI's own API rejects them and has no equivalent."
            .to_owned(),
    ];
    notes.extend(constraint::openai_note(params));
    notes.extend(chat::template_name_note(ctx, "vLLM's server"));
    notes.extend(vllm_notes(params));
    notes.extend(fields::unexpressed(
        params,
        Some(Engine::Vllm),
        "vLLM's server",
    ));
    if let Some(watch) = &params.watch
        && watch.strings().next().is_some()
    {
        notes.push(format!(
            "logprob_token_ids takes token ids: the watched strings {} need their first token's id \
             from the model's tokenizer.",
            watch
                .strings()
                .map(|s| format!("{s:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if let Some(seed) = params.seed.filter(|&s| s > i64::MAX as u64) {
        notes.push(format!(
            "vLLM's server takes seeds up to {} only; seed {seed} is rejected.",
            i64::MAX
        ));
    }
    let endpoint = chat::openai_endpoint(ctx);
    let mut lines = comments(
        ctx,
        &format!(
            "POST {endpoint} to a vLLM server (vllm serve MODEL{}); every field is sent \
             because the server fills missing ones from the model's generation_config.json.",
            fields::vllm_serve_flags(params)
        ),
        &notes,
    );
    lines.extend(chat::curl_post(
        &format!("http://localhost:8000{endpoint}"),
        openai_body(params, ctx),
    ));
    join_lines(lines)
}

/// llama.cpp's plain-completion command, with the sampler chain pinned to samplab's order.
pub fn to_llama_cpp(params: &SamplingParams, ctx: &ExportContext) -> String {
    let greedy = params.is_greedy();
    // llama.cpp seeds are 32-bit and u32::MAX asks for a random one.
    let seed = params.seed.filter(|&s| s < u64::from(u32::MAX));
    let stop = params.stop.clone().unwrap_or_default();

    let own = params.engine == Engine::LlamaCpp;
    let mut notes = fields::unexpressed(params, Some(Engine::LlamaCpp), "llama.cpp");
    notes.extend(chat::template_name_note(ctx, "llama-server"));
    notes.extend(constraint::llama_cpp_note(params));
    if !own {
        notes.push(
            "--samplers runs the chain in samplab's order; llama.cpp's default \
             (penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature) applies \
             temperature last."
                .to_owned(),
        );
    }
    if !own && (params.presence_penalty != 0.0 || params.frequency_penalty != 0.0) {
        notes.push(
            "llama.cpp counts presence and frequency over the penalty window, prompt included; \
             vLLM over the generated tokens only."
                .to_owned(),
        );
    }
    if !own && params.repetition_penalty != 1.0 {
        notes.push(
            "--repeat-last-n -1 penalises over the whole context, prompt included, like samplab; \
             llama.cpp's default window is the last 64 tokens."
                .to_owned(),
        );
    }
    if !own && !greedy && params.top_k_limit().is_some() {
        notes.push(
            "llama.cpp's top-k keeps exactly k tokens; samplab also keeps tokens tied with the k-th."
                .to_owned(),
        );
    }
    let chat = ctx.messages.is_some();
    if stop.strings().next().is_some() {
        notes.push(if chat {
            let keep = if params.include_stop_str_in_output {
                " (samplab keeps it)"
            } else {
                ""
            };
            format!("llama-server stops at a stop string in the reply and leaves it out{keep}.")
        } else {
            let cut = if params.include_stop_str_in_output {
                ""
            } else {
                " (samplab cuts it)"
            };
            format!(
                "-r stops only when a stop string (matched on prompt and output alike) ends \
                 within the last 2 bytes of the text, or is one token and was just generated; \
                 the stop text stays in the output{cut}."
            )
        });
    }
    let stop_ids: Vec<String> = stop.token_ids().map(|id| id.to_string()).collect();
    if !stop_ids.is_empty() {
        notes.push(format!(
            "llama.cpp has no flag for stop token ids, so [{}] will not stop this run.",
            stop_ids.join(", ")
        ));
    }
    let unexported_logprobs = [
        ("logprobs", params.logprobs.filter(|_| !chat)),
        ("prompt_logprobs", params.prompt_logprobs),
    ];
    for (field, value) in unexported_logprobs {
        if let Some(n) = value {
            notes.push(format!(
                "{field}={n} is not exported: llama-completion prints no probabilities \
                 (llama-server's /completion returns them with n_probs)."
            ));
        }
    }
    if let (Some(wanted), None) = (params.seed, seed) {
        notes.push(format!(
            "llama.cpp seeds are 32-bit and {} means random, so seed {wanted} cannot be passed.",
            u32::MAX
        ));
    }
    if params.num_samples > 1 {
        let (program, run, again, seed_field) = match chat {
            true => ("llama-server", "request", "send it", "\"seed\": "),
            false => ("llama-completion", "run", "run it", "-s "),
        };
        let how = if greedy {
            format!("; greedy decoding makes all samples identical, so one {run} gives them all")
        } else {
            let seeds = seed
                .map(|s| format!(", with {seed_field}{s}+i for sample i"))
                .unwrap_or_default();
            format!(": {again} {} times{seeds}", params.num_samples)
        };
        notes.push(format!(
            "{program} has no flag for {} samples, it makes one per {run}{how}.",
            params.num_samples
        ));
    }
    if !greedy {
        notes.push(rng_note("llama.cpp"));
    }
    if !ctx.model.ends_with(".gguf") {
        notes.push(
            "llama.cpp loads GGUF files only: convert the model or point -m at a .gguf file."
                .to_owned(),
        );
    }

    let (samplers, repeat_last_n) = fields::llama_cpp_chain(params);
    let program = match chat {
        // --jinja renders the conversation with the model's own template, as samplab does.
        true => std::iter::once(format!("llama-server -m {} --jinja", sh_word(ctx.model)))
            .chain(chat::llama_server_template_flag(ctx))
            .collect::<Vec<_>>()
            .join(" "),
        false => format!(
            "llama-completion -m {} -no-cnv --no-escape --no-display-prompt",
            sh_word(ctx.model)
        ),
    };
    let flag = |field| fields::name(field, Engine::LlamaCpp);
    let classic = [
        Field::Temperature,
        Field::TopK,
        Field::TopP,
        Field::MinP,
        Field::RepetitionPenalty,
    ]
    .map(|field| {
        let value = match field {
            Field::Temperature if greedy => "0".to_owned(),
            field => sh_value(&fields::value(params, field, Engine::LlamaCpp)),
        };
        format!("{} {value}", flag(field))
    });
    let window = format!("{} {repeat_last_n}", flag(Field::RepeatLastN));
    let mut groups = vec![
        program,
        format!("{} {}", flag(Field::Samplers), sh_word(&samplers)),
    ];
    groups.extend(fields::packed(
        classic
            .into_iter()
            .chain([window])
            .chain(fields::llama_cpp_flags(params))
            .chain(constraint::llama_cpp_flag(params)),
    ));
    let mut length = match params.max_tokens {
        Some(n) => format!("{} {n}", flag(Field::MaxTokens)),
        // -c 0 takes the model's own context, where samplab's runs end too.
        None => format!("{} -1 -c 0", flag(Field::MaxTokens)),
    };
    if let Some(seed) = seed {
        length.push_str(&format!(" {} {seed}", flag(Field::Seed)));
    }
    groups.push(length);
    let Some(messages) = ctx.messages else {
        groups.extend(
            stop.strings()
                .map(|s| format!("{} {}", flag(Field::Stop), sh_word(s))),
        );
        groups.push(format!("-p {}", sh_word(ctx.prompt)));
        let mut lines = comments(
            ctx,
            "llama.cpp: llama-completion (llama-cli in older builds); llama-server takes the same \
             sampling flags.",
            &notes,
        );
        lines.push(groups.join(" \\\n  "));
        return join_lines(lines);
    };
    let mut lines = comments(
        ctx,
        "llama.cpp: llama-server with the sampling flags as the defaults of every request, \
         then the conversation as a chat request, which --jinja renders with the model's template.",
        &notes,
    );
    lines.push(groups.join(" \\\n  "));
    lines.push("# Once the server listens, from another shell:".to_owned());
    lines.extend(chat::curl_post(
        &format!("http://localhost:8080{}", chat::openai_endpoint(ctx)),
        chat::llama_server_body(messages, params),
    ));
    join_lines(lines)
}

/// What vLLM's `SamplingParams` and its server do differently from samplab.
fn vllm_notes(params: &SamplingParams) -> Vec<String> {
    let mut notes = Vec::new();
    let t = params.temperature;
    if params.is_greedy() {
        if params.num_samples > 1 {
            notes.push(format!(
                "Greedy decoding makes all {} samples identical and vLLM rejects n > 1 at \
                 temperature 0, so n=1.",
                params.num_samples
            ));
        }
    } else {
        if t < 0.01 {
            notes.push(format!(
                "vLLM raises temperatures below 0.01 to 0.01, so {t} samples as 0.01."
            ));
        }
        if t > 2.0 {
            notes.push(format!("vLLM rejects temperatures above 2, such as {t}."));
        }
        notes.push(rng_note("vLLM"));
    }
    notes
}

/// What transformers' `generate()` does differently from samplab.
fn transformers_notes(params: &SamplingParams) -> Vec<String> {
    let mut notes = Vec::new();
    let stop = params.stop.clone().unwrap_or_default();
    let keep = params.include_stop_str_in_output;
    if stop.strings().next().is_some() {
        let cut = if keep {
            "right after"
        } else {
            "at the start of"
        };
        notes.push(format!(
            "stop_strings ends generation after the token that completes a stop string and keeps \
             all of that token's text: cut the text {cut} the first stop string, as samplab does."
        ));
    }
    if stop.token_ids().next().is_some() {
        let samplab = if keep { "keeps" } else { "drops" };
        notes.push(format!(
            "Stop token ids end generation as EOS ids do, but the token stays in the output and \
             skip_special_tokens drops its text only for special tokens (samplab {samplab} it)."
        ));
    }
    if params.is_greedy() {
        if params.num_samples > 1 {
            notes.push(format!(
                "Greedy decoding makes all {} samples identical and generate() refuses \
                 num_return_sequences > 1 without sampling, so 1.",
                params.num_samples
            ));
        }
    } else {
        if params.min_p > 0.0 && params.top_p < 1.0 && params.engine != Engine::Transformers {
            notes.push(
                "transformers applies min_p after top_k and top_p (samplab: before them), so \
                 top_p also counts the mass of tokens min_p removes and may keep another set."
                    .to_owned(),
            );
        }
        notes.push(
            "All samples draw from one torch generator seeded once; samplab gives sample i its \
             own seed+i."
                .to_owned(),
        );
        notes.push(rng_note("transformers"));
    }
    if params.seed.is_some_and(|s| s > u64::from(u32::MAX)) {
        notes.push(
            "set_seed also seeds numpy, which takes seeds below 2**32 only, so torch.manual_seed \
             seeds torch alone."
                .to_owned(),
        );
    }
    if params.max_tokens.is_none() {
        notes.push(
            "max_tokens null: generate() would stop at 20 tokens, so the limit is the model's \
             context."
                .to_owned(),
        );
    }
    if let Some(n) = params.logprobs {
        let alternatives = if n > 0 {
            format!("; torch.topk gives the top {n} alternatives")
        } else {
            String::new()
        };
        notes.push(format!(
            "output.logits holds each step's raw logits (log_softmax gives samplab's logprobs), \
             output.scores the processed ones{alternatives}."
        ));
    }
    if params.prompt_logprobs.is_some() {
        notes.push(
            "generate() does not score the prompt: prompt logprobs are \
             log_softmax(model(**inputs).logits)."
                .to_owned(),
        );
    }
    notes
}

/// Every engine has its own random generator (samplab's is ChaCha8, design §2).
fn rng_note(engine: &str) -> String {
    format!(
        "Random draws in {engine} differ from samplab's, so only greedy output matches \
         samplab's token for token."
    )
}

/// Samples to ask for: engines refuse several greedy samples, which would all be the same.
fn sample_count(params: &SamplingParams) -> u32 {
    if params.is_greedy() {
        1
    } else {
        params.num_samples
    }
}

/// The snippet's header comment: what it is, the backend the run was tuned on, then the notes.
fn comments(ctx: &ExportContext, header: &str, notes: &[String]) -> Vec<String> {
    let backend = chat::backend_note(ctx);
    std::iter::once(header)
        .chain(backend.as_deref())
        .chain(notes.iter().map(String::as_str))
        .map(|line| format!("# {line}"))
        .collect()
}

fn join_lines(lines: Vec<String>) -> String {
    let mut text = lines.join("\n");
    text.push('\n');
    text
}

fn py_kwargs(kwargs: &[(&str, String)]) -> Vec<String> {
    kwargs
        .iter()
        .map(|(name, value)| format!("    {name}={value},"))
        .collect()
}

/// A Python `str` literal: Python reads the escapes of GBNF's string literals alike.
fn py_str(text: &str) -> String {
    crate::params::quoted(text)
}

/// A float in shortest round-trip form, always with a decimal point so Python reads a float.
fn py_float(value: impl ToString) -> String {
    let text = value.to_string();
    if text.contains('.') {
        text
    } else {
        text + ".0"
    }
}

/// A value (a parameter's, or JSON through [`py_json`]) as the Python literal that reads back
/// as it (`true` as `True`, `null` as `None`, a mapping's number keys as numbers), on one line.
fn py_value(value: &Value) -> String {
    match value {
        Value::Null => "None".to_owned(),
        Value::Bool(b) => py_bool(*b),
        Value::Number(n) => match n.as_f64() {
            Some(x) if n.is_f64() => py_float(x),
            _ => n.to_string(),
        },
        Value::String(text) => py_str(text),
        Value::Sequence(items) => py_list(items.iter().map(py_value)),
        Value::Mapping(entries) => {
            let entries: Vec<String> = entries
                .iter()
                .map(|(key, value)| format!("{}: {}", py_value(key), py_value(value)))
                .collect();
            format!("{{{}}}", entries.join(", "))
        }
        Value::Tagged(tagged) => py_value(&tagged.value),
    }
}

/// A JSON value as the Python literal that reads back as it.
fn py_json(value: &Json) -> String {
    py_value(&serde_yaml_ng::to_value(value).unwrap_or(Value::Null))
}

/// A parameter's value as one shell word: numbers as llama.cpp prints them (`1`, `0.95`).
fn sh_value(value: &Value) -> String {
    match value {
        Value::Number(n) => match n.as_f64() {
            Some(x) if n.is_f64() => (x as f32).to_string(),
            _ => n.to_string(),
        },
        Value::String(text) => sh_word(text),
        other => sh_word(&serde_json::to_string(other).unwrap_or_default()),
    }
}

fn py_bool(value: bool) -> String {
    if value { "True" } else { "False" }.to_owned()
}

fn py_list<T: ToString>(items: impl IntoIterator<Item = T>) -> String {
    let items: Vec<String> = items.into_iter().map(|item| item.to_string()).collect();
    format!("[{}]", items.join(", "))
}

/// One shell word that bash reads back as exactly `text`: bare when harmless, single-quoted
/// otherwise, and ANSI-C quoted (`$'...'`) when it holds ASCII control characters, so that a
/// newline cannot break the command's line layout.
fn sh_word(text: &str) -> String {
    let harmless = |c: char| {
        c.is_ascii_alphanumeric()
            || matches!(c, '_' | '-' | '.' | '/' | ':' | ',' | '+' | '=' | '@' | '%')
    };
    if !text.is_empty() && text.chars().all(harmless) {
        return text.to_owned();
    }
    if !text.chars().any(|c| c.is_ascii_control()) {
        return format!("'{}'", text.replace('\'', r"'\''"));
    }
    let mut word = String::from("$'");
    for c in text.chars() {
        match c {
            '\\' => word.push_str(r"\\"),
            '\'' => word.push_str(r"\'"),
            '\n' => word.push_str(r"\n"),
            '\r' => word.push_str(r"\r"),
            '\t' => word.push_str(r"\t"),
            c if c.is_ascii_control() => word.push_str(&format!("\\x{:02x}", u32::from(c))),
            c => word.push(c),
        }
    }
    word.push('\'');
    word
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_strings_escape_only_what_they_must() {
        assert_eq!(py_str("plain"), r#""plain""#);
        assert_eq!(py_str("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(py_str("it's"), r#""it's""#);
        assert_eq!(py_str("\n\r\t\u{1b}\u{7f}"), r#""\n\r\t\x1b\x7f""#);
        assert_eq!(py_str("café ✓"), "\"café ✓\"");
    }

    #[test]
    fn json_becomes_the_python_literal_that_reads_back_as_it() {
        let schema = serde_json::json!({"a": [true, false, null, 1.5, -2, "x\n\"y\""], "b": {}});
        assert_eq!(
            py_json(&schema),
            r#"{"a": [True, False, None, 1.5, -2, "x\n\"y\""], "b": {}}"#
        );
    }

    #[test]
    fn python_floats_are_shortest_and_look_like_floats() {
        assert_eq!(py_float(0.7), "0.7");
        assert_eq!(py_float(1.1), "1.1");
        assert_eq!(py_float(1.0), "1.0");
        assert_eq!(py_float(0.0), "0.0");
        assert_eq!(py_float(1e-5), "0.00001");
    }

    #[test]
    fn shell_words_use_the_lightest_safe_quoting() {
        assert_eq!(sh_word("model.gguf"), "model.gguf");
        assert_eq!(sh_word(""), "''");
        assert_eq!(sh_word("a b;c"), "'a b;c'");
        assert_eq!(sh_word("it's"), r"'it'\''s'");
        assert_eq!(sh_word("a\nb's\\"), r"$'a\nb\'s\\'");
        assert_eq!(sh_word("\u{1b}[0m"), r"$'\x1b[0m'");
        assert_eq!(sh_word("✓\n"), r"$'✓\n'");
    }
}
