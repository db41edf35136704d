//! `samplab sample`: one run through the engine worker, printed for people or programs.

use clap::Args;
use samplab::engine::load::load_model;
use samplab::engine::{Engine, Event, Request};
use samplab::model::source::HubSettings;
use samplab::params::SamplingParams;
use samplab::presets::{self, MODEL_PRESET};
use samplab::response::{SampleResponse, StopMatched, StopReason, Trajectory};
use std::io::{IsTerminal, Write};
use std::process::ExitCode;

#[derive(Args)]
pub struct SampleArgs {
    /// A .gguf file, a Hugging Face model directory, or a Hub id (`org/name`, `org/name:file.gguf`).
    #[arg(long)]
    model: String,
    /// The prompt text.
    #[arg(long)]
    prompt: String,
    /// Send the prompt as one user message through the model's chat template.
    #[arg(long)]
    chat: bool,
    /// A built-in preset name, a preset file, or `model` for the model's own generation
    /// defaults; `--set` values apply on top.
    #[arg(long)]
    preset: Option<String>,
    /// Any sampling parameter as key=value, value in YAML: `--set temperature=0 --set stop='["\n\n"]'`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// Print one SampleResponse as JSON.
    #[arg(long, conflicts_with = "jsonl")]
    json: bool,
    /// Stream one JSON event per line.
    #[arg(long)]
    jsonl: bool,
}

pub fn run(args: SampleArgs) -> anyhow::Result<ExitCode> {
    let model_defaults = args.preset.as_deref() == Some(MODEL_PRESET);
    // Checked before loading so that a typo costs no load time.
    let params = params_from_flags(
        args.preset.as_deref().filter(|_| !model_defaults),
        &args.sets,
    )?;
    let (events, mut inbox) = tokio::sync::mpsc::unbounded_channel();
    let spec = args.model.clone();
    let engine = Engine::spawn(
        move |progress| load_model(&spec, &HubSettings::from_env(), progress),
        move |event| {
            let _ = events.send(event);
        },
    );
    let request = |params| Request {
        run_id: 1,
        prompt: args.prompt.clone(),
        lane: 0,
        chat: args.chat,
        params,
    };
    let mut stream_plain = !args.json && !args.jsonl && params.num_samples == 1;
    if !model_defaults {
        engine.run(request(params));
    }
    let mut progress = ProgressLine::new();
    let mut stdout = std::io::stdout().lock();
    while let Some(event) = inbox.blocking_recv() {
        if args.jsonl {
            writeln!(stdout, "{}", serde_json::to_string(&event)?)?;
        }
        match event {
            Event::Loading {
                progress: p,
                message,
            } if !args.jsonl => progress.show(p, &message),
            Event::Loaded { defaults, .. } => {
                progress.clear();
                if model_defaults {
                    let defaults = defaults.ok_or_else(|| {
                        anyhow::anyhow!("{} ships no valid sampling defaults", args.model)
                    })?;
                    let params = apply_sets(defaults, &args.sets)?;
                    stream_plain &= params.num_samples == 1;
                    engine.run(request(params));
                }
            }
            Event::LoadFailed { message } => {
                progress.clear();
                anyhow::bail!("cannot load model {}: {message}", args.model);
            }
            Event::Started { .. } if stream_plain => write!(stdout, "{}", args.prompt)?,
            Event::Token { token, .. } if stream_plain => {
                write!(stdout, "{}", token.text)?;
                stdout.flush()?;
            }
            Event::Finished { tail, .. } if stream_plain => write!(stdout, "{tail}")?,
            Event::Done { response, .. } => {
                if args.json {
                    writeln!(stdout, "{}", serde_json::to_string_pretty(&response)?)?;
                } else if !args.jsonl {
                    print_plain(&mut stdout, &args.prompt, &response, stream_plain)?;
                }
                return Ok(ExitCode::SUCCESS);
            }
            Event::Error { message, .. } => anyhow::bail!("{message}"),
            _ => {}
        }
    }
    anyhow::bail!("the engine stopped without finishing the run")
}

/// The preset (or defaults) with each `--set` applied in order.
fn params_from_flags(preset: Option<&str>, sets: &[String]) -> anyhow::Result<SamplingParams> {
    let params = match preset {
        Some(name) => presets::resolve(name)?.params,
        None => SamplingParams::default(),
    };
    apply_sets(params, sets)
}

fn apply_sets(mut params: SamplingParams, sets: &[String]) -> anyhow::Result<SamplingParams> {
    for assignment in sets {
        params
            .set_assignment(assignment)
            .map_err(|e| anyhow::anyhow!("--set {assignment}: {e}"))?;
    }
    Ok(params)
}

fn print_plain(
    out: &mut impl Write,
    prompt: &str,
    response: &SampleResponse,
    streamed: bool,
) -> anyhow::Result<()> {
    for trajectory in &response.trajectories {
        if !streamed {
            writeln!(
                out,
                "── sample {} · seed {} ──",
                trajectory.index, trajectory.seed
            )?;
            write!(out, "{prompt}{}", trajectory.text)?;
        }
        writeln!(out, "\n── {} ──", summary(trajectory))?;
    }
    Ok(())
}

/// `stop "\n\n" · 37 tokens · mean logprob -1.234 · ppl 3.43`
fn summary(trajectory: &Trajectory) -> String {
    let reason = match (&trajectory.stop_reason, &trajectory.stop_matched) {
        (StopReason::Stop, Some(StopMatched::Text(text))) => format!("stop {text:?}"),
        (StopReason::Stop, Some(StopMatched::Token(id))) => format!("stop <token {id}>"),
        (reason, _) => reason.as_str().to_owned(),
    };
    let count = trajectory.logprobs.len();
    let mean = if count == 0 {
        0.0
    } else {
        trajectory
            .logprobs
            .iter()
            .map(|&l| f64::from(l))
            .sum::<f64>()
            / count as f64
    };
    format!(
        "{reason} · {count} tokens · mean logprob {mean:.3} · ppl {:.2}",
        (-mean).exp()
    )
}

/// A one-line progress bar on stderr, only when stderr is a terminal.
struct ProgressLine {
    visible: bool,
    enabled: bool,
}

impl ProgressLine {
    fn new() -> Self {
        Self {
            visible: false,
            enabled: std::io::stderr().is_terminal(),
        }
    }

    fn show(&mut self, fraction: f32, message: &str) {
        if !self.enabled {
            return;
        }
        let filled = (fraction.clamp(0.0, 1.0) * 30.0).round() as usize;
        eprint!(
            "\r\x1b[2K[{}{}] {:>3.0}% {message}",
            "#".repeat(filled),
            " ".repeat(30 - filled),
            fraction * 100.0
        );
        self.visible = true;
    }

    fn clear(&mut self) {
        if self.visible {
            eprint!("\r\x1b[2K");
            self.visible = false;
        }
    }
}
