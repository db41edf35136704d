//! `samplab sample`: one run through the engine worker per model, printed for people or
//! programs; with several models, each one's samples are scored by the others.

use super::counted;
use super::progress::LoadBar;
use super::prompt_input::{read_conversation, read_prompt_file};
use clap::Args;
use samplab::engine::disagreement::row_channel;
use samplab::engine::load::load_any;
use samplab::engine::{
    Conversation, Engine, Event, Prompt, Request, RunId, Runner, ScoreRequest, TokenEvent,
    random_seed,
};
use samplab::model::device::DeviceChoice;
use samplab::model::source::embedded;
use samplab::model::source::{HubSettings, LoadProgress};
use samplab::model::text::chat_template::Message;
use samplab::params::{Field, LogprobsMode, SamplingParams};
use samplab::preset_store::{self, PresetStore};
use samplab::presets::MODEL_PRESET;
use samplab::response::{
    CrossScore, PerToken, ResponseShape, SampleResponse, Trajectory, mean_and_perplexity,
    stop_label,
};
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::mpsc::Receiver;

#[derive(Args)]
pub struct SampleArgs {
    /// A .gguf file, a Hugging Face model directory, a Hub id (`org/name`, `org/name:file.gguf`),
    /// or samplab-tiny, the small story model built into samplab (the default).
    /// Repeat it to compare models: each runs the same parameters and seeds, and every sample
    /// is also scored by the other models.
    #[arg(long = "model", value_name = "MODEL", default_value = embedded::NAME)]
    models: Vec<String>,
    /// Where the models run: cpu, cuda, cuda:N or metal (default: the first GPU this build
    /// supports and the machine has, else the CPU).
    #[arg(long, value_name = "DEVICE", default_value = "auto")]
    device: DeviceChoice,
    #[command(flatten)]
    precision: super::ActivationsArg,
    #[command(flatten)]
    backend: super::BackendArg,
    /// The prompt text (with --messages: the last user message, for plain output only).
    #[arg(
        long,
        required_unless_present_any = ["messages", "prompt_file"],
        default_value = ""
    )]
    prompt: String,
    /// Read the prompt from a file instead (`-`: standard input), UTF-8 text as it is but for
    /// one newline at its end, which editors add (as llama.cpp's -f drops it).
    #[arg(long, value_name = "PATH", conflicts_with = "prompt")]
    prompt_file: Option<PathBuf>,
    /// Send the prompt as one user message through the model's chat template; a model without
    /// one gets the raw prompt, with a warning.
    #[arg(long)]
    chat: bool,
    #[command(flatten)]
    template: super::ChatTemplateArg,
    /// Special-token text in the prompt (`<|im_end|>`) stays plain text instead of becoming the
    /// control token: in a raw prompt (which vLLM, transformers and llama-server parse) and,
    /// with --chat, in the user's message.
    #[arg(long)]
    literal_specials: bool,
    /// A conversation for the chat template instead of one message: a YAML (or JSON) list of
    /// `{role, content}`, e.g. a system message and earlier turns. Implies --chat. With several
    /// models each renders it with its own template, and scores the others' samples after
    /// that rendering.
    #[arg(long, value_name = "FILE")]
    messages: Option<PathBuf>,
    /// A built-in preset name, a preset file, or `model` for the model's own generation
    /// defaults; `--set` values apply on top.
    #[arg(long)]
    preset: Option<String>,
    /// Any sampling parameter as key=value, value in YAML: `--set temperature=0 --set stop='["\n\n"]'`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// Print one SampleResponse as JSON (an array of them, in `--model` order, for several models).
    #[arg(long, conflicts_with = "jsonl")]
    json: bool,
    /// The layout of `--json`: samplab's own SampleResponse, or twinkle's (each sample as
    /// messages; logprobs, prompt logprobs and stop reasons as one list per sample).
    #[arg(
        long,
        value_enum,
        default_value_t,
        requires = "json",
        conflicts_with = "jsonl"
    )]
    shape: ResponseShape,
    /// Stream one JSON event per line.
    #[arg(long)]
    jsonl: bool,
    /// Record in `--json` what each stage of the chain did to every token and its best
    /// alternatives (each trajectory's `trace`), as the playground's inspector shows it, for
    /// `samplab render` to show; local models only, in samplab's shape. It samples each step's
    /// chain twice.
    #[arg(long, requires = "json")]
    trace: bool,
}

/// A loaded model's worker.
struct Worker {
    spec: String,
    /// The model's name as the engine reports it (`Loaded`, responses, cross-scores).
    name: String,
    engine: Engine,
    inbox: Receiver<Event>,
    vocab: u64,
    defaults: Option<SamplingParams>,
    /// The model has a chat template.
    chat_template: bool,
}

/// A model that has run: its worker stays up to score the other models' samples.
struct Finished {
    worker: Worker,
    /// What the model was asked: the other models score its samples after the same.
    prompt: Prompt,
    response: SampleResponse,
    /// The text of the token that stopped each sample, by sample, where one did.
    stop_tokens: HashMap<u32, String>,
}

pub fn run(mut args: SampleArgs) -> anyhow::Result<ExitCode> {
    if args.trace && args.shape == ResponseShape::Twinkle {
        anyhow::bail!("--trace records what twinkle's shape has no place for: leave out --shape");
    }
    args.backend
        .backend
        .check_count(args.models.len())
        .map_err(anyhow::Error::msg)?;
    args.backend.apply_verbose();
    args.chat |= args.template.choice().is_some();
    let model_defaults = args.preset.as_deref() == Some(MODEL_PRESET);
    // Checked before loading so that a typo costs no load time.
    let params = params_from_flags(
        args.preset.as_deref().filter(|_| !model_defaults),
        &args.sets,
    )?;
    if let Some(path) = &args.prompt_file {
        args.prompt = read_prompt_file(path)?;
    }
    let conversation = match &args.messages {
        Some(path) => read_conversation(path)?,
        None => Vec::new(),
    };
    // What plain output and twinkle's shape show as the prompt: the conversation's last user
    // message, unless --prompt says otherwise.
    if args.prompt.is_empty()
        && let Some(last) = conversation.iter().rev().find(|m| m.role == "user")
    {
        args.prompt = last.content.clone();
    }
    let mut stdout = std::io::stdout().lock();
    // Every model loads before any runs, so that a bad `--model` fails at once. One after the
    // other, so that each memory check sees the models already loaded.
    let mut workers = Vec::new();
    for spec in &args.models {
        workers.push(load(spec, workers.len(), &args, &mut stdout)?);
    }
    // Before any run, so that a model that cannot take the conversation fails at once too.
    let prompts = workers
        .iter()
        .map(|worker| prompt_for(worker, &args, &conversation))
        .collect::<anyhow::Result<Vec<_>>>()?;
    // Compared models sample with the same seeds, also when none was given.
    let seed = (args.models.len() > 1).then(random_seed);
    let mut finished = Vec::new();
    for (i, (worker, prompt)) in workers.into_iter().zip(prompts).enumerate() {
        let mut params = if model_defaults {
            let defaults = worker.defaults.clone().ok_or_else(|| {
                anyhow::anyhow!("{} ships no valid sampling defaults", worker.spec)
            })?;
            apply_sets(defaults, &args.sets)?
        } else {
            params.clone()
        };
        if params.seed.is_none() {
            params.seed = seed;
        }
        finished.push(run_model(
            worker,
            &args,
            prompt,
            i as RunId + 1,
            params,
            &mut stdout,
        )?);
    }
    if finished.len() > 1 {
        cross_score(&mut finished)?;
    }
    let responses: Vec<&SampleResponse> = finished.iter().map(|f| &f.response).collect();
    if args.json {
        writeln!(stdout, "{}", args.shape.json(&responses, &args.prompt)?)?;
    } else if !args.jsonl {
        let streamed = streams_plain(&args, &responses[0].params);
        for run in &finished {
            if args.models.len() > 1 {
                writeln!(stdout, "══ {} ══", run.response.model)?;
            }
            print_plain(
                &mut stdout,
                echoed(&run.prompt, &args.prompt),
                run,
                streamed,
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One sample streams as plain text while it is generated; several are printed at the end.
fn streams_plain(args: &SampleArgs, params: &SamplingParams) -> bool {
    !args.json && !args.jsonl && args.models.len() == 1 && params.num_samples == 1
}

/// Starts a worker for `spec` and waits until its model is loaded.
fn load(
    spec: &str,
    index: usize,
    args: &SampleArgs,
    stdout: &mut impl Write,
) -> anyhow::Result<Worker> {
    let (events, inbox) = std::sync::mpsc::channel();
    let owned_spec = spec.to_owned();
    let (device, activations, trace) = (args.device, args.precision.activations, args.trace);
    let template = args.template.chat_template.clone();
    let backend = args.backend.backend.for_model(index);
    let hub = HubSettings::from_env();
    let cancel = hub.cancel.clone();
    let engine = Engine::spawn(
        move |progress| {
            let mut model = load_any(&owned_spec, &hub, device, activations, backend, progress)?;
            model.use_chat_template(template.as_deref())?;
            if trace {
                model.record_traces()?;
            }
            Ok(model)
        },
        move |event| {
            let _ = events.send(event);
        },
    )
    .with_load_cancel(cancel);
    let mut progress = LoadBar::new();
    while let Ok(event) = inbox.recv() {
        if args.jsonl {
            writeln!(stdout, "{}", jsonl_line(spec, &event)?)?;
        }
        match event {
            Event::Loading {
                progress: fraction,
                message,
                download,
            } if !args.jsonl => progress.show(&LoadProgress {
                fraction,
                message,
                download,
            }),
            Event::Loaded {
                model,
                defaults,
                vocab,
                warnings,
                chat_template,
                ..
            } => {
                progress.clear();
                for warning in warnings {
                    eprintln!(
                        "samplab: warning: {}",
                        samplab::terminal_text::escape_controls(&warning)
                    );
                }
                return Ok(Worker {
                    spec: spec.to_owned(),
                    name: model,
                    engine,
                    inbox,
                    vocab,
                    defaults,
                    chat_template,
                });
            }
            Event::LoadFailed { message } => {
                progress.clear();
                anyhow::bail!("cannot load model {spec}: {message}");
            }
            _ => {}
        }
    }
    anyhow::bail!("the engine of {spec} stopped while loading")
}

/// Runs the prompt on a loaded model.
fn run_model(
    worker: Worker,
    args: &SampleArgs,
    prompt: Prompt,
    run_id: RunId,
    params: SamplingParams,
    stdout: &mut impl Write,
) -> anyhow::Result<Finished> {
    let stream_plain = streams_plain(args, &params);
    let set: Vec<Field> = Field::ALL
        .iter()
        .copied()
        .filter(|&f| params.get(f) != SamplingParams::default().get(f))
        .collect();
    worker.engine.run(Request {
        run_id,
        prompt: prompt.clone(),
        lane: 0,
        params,
        branches: Vec::new(),
    });
    let mut stop_tokens = HashMap::new();
    let mut tokens: HashMap<u32, Vec<TokenEvent>> = HashMap::new();
    let mut warned: Vec<Field> = Vec::new();
    while let Ok(event) = worker.inbox.recv() {
        if args.jsonl {
            writeln!(stdout, "{}", jsonl_line(&worker.name, &event)?)?;
        }
        if let Event::Finished {
            sample,
            stop_token: Some(text),
            ..
        } = &event
        {
            stop_tokens.insert(*sample, text.clone());
        }
        if let Event::Token { token, .. } = &event {
            tokens.entry(token.sample).or_default().push(token.clone());
        }
        match event {
            // A served model's server names the parameters it has no place for.
            Event::Served { server, ignored } => {
                // Said again before the run when the run leaves out more: warned once each.
                let lost: Vec<&str> = set
                    .iter()
                    .filter(|f| ignored.contains(f) && !warned.contains(*f))
                    .map(|f| f.name())
                    .collect();
                warned.extend(ignored);
                if !lost.is_empty() {
                    eprintln!(
                        "samplab: warning: {server} has no place for {}: not applied to {}",
                        lost.join(", "),
                        worker.spec
                    );
                }
            }
            Event::Started { .. } if stream_plain => {
                write!(stdout, "{}", echoed(&prompt, &args.prompt))?
            }
            Event::Token { token, .. } if stream_plain => {
                write!(stdout, "{}", token.text)?;
                stdout.flush()?;
            }
            Event::Finished { tail, .. } if stream_plain => write!(stdout, "{tail}")?,
            Event::Done { mut response, .. } => {
                // A results file keeps every token's alternatives, for `samplab render`.
                for t in &mut response.trajectories {
                    t.keep_alternatives(tokens.get(&t.index).into_iter().flatten());
                }
                return Ok(Finished {
                    worker,
                    prompt,
                    response: *response,
                    stop_tokens,
                });
            }
            Event::Error { message, .. } => anyhow::bail!("{}: {message}", worker.spec),
            _ => {}
        }
    }
    anyhow::bail!(
        "the engine of {} stopped without finishing the run",
        worker.spec
    )
}

/// What `worker`'s model is asked: the conversation of `--messages`, the prompt as one user
/// message with `--chat` (or as raw text, with a warning, when the model has no chat template),
/// else the raw prompt.
fn prompt_for(
    worker: &Worker,
    args: &SampleArgs,
    conversation: &[Message],
) -> anyhow::Result<Prompt> {
    if !conversation.is_empty() {
        if !worker.chat_template {
            anyhow::bail!(
                "{} has no chat template to render the conversation of --messages: give a chat \
                 model, or its text with --prompt",
                worker.spec
            );
        }
        return Ok(Prompt::chat(conversation.to_vec()));
    }
    if !args.chat {
        return Ok(Prompt::raw_with(&args.prompt, args.literal_specials));
    }
    if !worker.chat_template {
        eprintln!(
            "samplab: warning: {} has no chat template: it gets the prompt as raw text",
            worker.spec
        );
        return Ok(Prompt::raw_with(&args.prompt, args.literal_specials));
    }
    Ok(Prompt::Chat(Conversation {
        messages: vec![Message::new("user", &args.prompt)],
        literal_specials: args.literal_specials,
    }))
}

/// Every model's samples scored by every other model, written into the trajectories.
fn cross_score(finished: &mut [Finished]) -> anyhow::Result<()> {
    for source in 0..finished.len() {
        let request = ScoreRequest::new(
            source as RunId + 1,
            finished[source].worker.vocab,
            &finished[source].prompt,
            &finished[source].response,
        );
        for scorer in (0..finished.len()).filter(|&s| s != source) {
            // The sampling model sends its distributions for KL per token with one vocabulary,
            // its tokens' bytes for lining the tokenizations up with two.
            let wanted = request.wanted_by(finished[scorer].worker.vocab);
            let (to, feed) = row_channel();
            finished[source]
                .worker
                .engine
                .rows(request.rows_request(wanted, to));
            finished[scorer]
                .worker
                .engine
                .score(request.clone().with_feed(feed));
            let scores = match wait_for_scores(&finished[scorer])? {
                Ok(scores) => scores,
                Err(message) => {
                    // A model that cannot score (a served one) leaves its scores out.
                    eprintln!(
                        "samplab: warning: {} cannot score {}'s samples: {}",
                        finished[scorer].worker.spec,
                        finished[source].worker.spec,
                        samplab::terminal_text::escape_controls(&message)
                    );
                    continue;
                }
            };
            for score in scores {
                finished[source].response.add_cross_score(score);
            }
        }
    }
    Ok(())
}

/// The scorer's scores, or why it could not score; an error when its engine stopped.
fn wait_for_scores(scorer: &Finished) -> anyhow::Result<Result<Vec<CrossScore>, String>> {
    while let Ok(event) = scorer.worker.inbox.recv() {
        match event {
            Event::Scored { scores, .. } => return Ok(Ok(scores)),
            Event::ScoreFailed { message, .. } => return Ok(Err(message)),
            _ => {}
        }
    }
    anyhow::bail!(
        "the engine of {} stopped while scoring",
        scorer.response.model
    )
}

/// One `--jsonl` line: the event with the model it is about, so that the lines of several models
/// can be told apart. `model` is the name the engine reports once loaded (as `loaded` and the
/// responses name it), the `--model` value before; `loaded` names it itself.
fn jsonl_line(model: &str, event: &Event) -> serde_json::Result<String> {
    #[derive(serde::Serialize)]
    struct Line<'a> {
        model: &'a str,
        #[serde(flatten)]
        event: &'a Event,
    }
    match event {
        Event::Loaded { .. } => serde_json::to_string(event),
        _ => serde_json::to_string(&Line { model, event }),
    }
}

/// The preset (or defaults) with each `--set` applied in order.
pub(crate) fn params_from_flags(
    preset: Option<&str>,
    sets: &[String],
) -> anyhow::Result<SamplingParams> {
    let params = match preset {
        Some(name) => preset_store::resolve(name, PresetStore::user().as_ref())?.params,
        None => SamplingParams::default(),
    };
    apply_sets(params, sets)
}

pub(crate) fn apply_sets(
    mut params: SamplingParams,
    sets: &[String],
) -> anyhow::Result<SamplingParams> {
    for assignment in sets {
        params
            .set_assignment(assignment)
            .map_err(|e| anyhow::anyhow!("--set {assignment}: {e}"))?;
    }
    Ok(params)
}

/// What plain output prints before a sample's text: a raw prompt, which the text continues;
/// nothing before a chat reply, which is a message of its own and not the prompt's end.
fn echoed<'a>(prompt: &Prompt, text: &'a str) -> &'a str {
    match prompt {
        Prompt::Chat(_) => "",
        Prompt::Raw(_) | Prompt::Literal(_) => text,
    }
}

/// `prompt` is what [`echoed`] prints before each sample's text.
fn print_plain(
    out: &mut impl Write,
    prompt: &str,
    run: &Finished,
    streamed: bool,
) -> anyhow::Result<()> {
    for trajectory in &run.response.trajectories {
        if !streamed {
            writeln!(
                out,
                "── sample {} · seed {} ──",
                trajectory.index, trajectory.seed
            )?;
            write!(out, "{prompt}{}", trajectory.text)?;
        }
        let stop_token = run.stop_tokens.get(&trajectory.index);
        let mode = run.response.params.logprobs_mode;
        writeln!(out, "\n── {} ──", summary(trajectory, stop_token, mode))?;
        for score in trajectory.cross_scores.iter().flatten() {
            writeln!(
                out,
                "   under {}: mean logprob {:.3} · ppl {:.2} over {}{}{}{}",
                score.model,
                score.mean_logprob,
                score.perplexity,
                counted(score.tokens, "token", "tokens"),
                mean_kl(score.per_token.as_ref()),
                if score.retokenized {
                    " (text tokenized again)"
                } else {
                    ""
                },
                if score.foreign_prompt {
                    " (after the sampling model's chat template: it has none)"
                } else {
                    ""
                }
            )?;
        }
    }
    Ok(())
}

/// ` · mean KL 0.123 nats` where every token of the sample has its KL from the other model.
fn mean_kl(per_token: Option<&PerToken>) -> String {
    match per_token.and_then(|p| p.kl.as_ref()) {
        Some(kl) if !kl.is_empty() => {
            format!(
                " · mean KL {:.3} nats",
                kl.iter().sum::<f64>() / kl.len() as f64
            )
        }
        _ => String::new(),
    }
}

/// `stop "\n\n" · 37 tokens · mean raw logprob -1.234 · ppl 3.43`, the stop as the
/// playground's footer says it (`stop <|im_end|>` with the stop token's text), the mean of the
/// numbers `mode` reports, and a perplexity only where they are logprobs.
fn summary(trajectory: &Trajectory, stop_token: Option<&String>, mode: LogprobsMode) -> String {
    let reason = stop_label(
        trajectory.stop_reason,
        trajectory.stop_matched.as_ref(),
        stop_token.map(String::as_str),
    );
    let count = trajectory.logprobs.len();
    let sum = trajectory.logprobs.iter().map(|&l| f64::from(l)).sum();
    let (mean, ppl) = mean_and_perplexity(sum, count);
    let tokens = counted(count, "token", "tokens");
    let name = mode.number_name();
    match mode.logits() {
        true => format!("{reason} · {tokens} · mean {name} {mean:.3}"),
        false => format!("{reason} · {tokens} · mean {name} {mean:.3} · ppl {ppl:.2}"),
    }
}
