//! `samplab export --format F [PRESET] [--set key=value]...`: the preset is found as `sample`
//! finds it (a built-in or saved name, or a file) and `--set` applies on top; the prompt is
//! taken as `sample` takes it, raw or as a conversation (`--chat`, `--messages`).

use super::prompt_input::{read_conversation, read_prompt_file};
use super::sample::params_from_flags;
use clap::Args;
use samplab::export::{ExportContext, ExportFormat, export};
use samplab::model::source::embedded;
use samplab::model::text::chat_template::Message;
use samplab::presets::MODEL_PRESET;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct ExportArgs {
    /// Target engine.
    #[arg(long, value_enum)]
    format: ExportFormat,
    /// A built-in or saved preset name, or a preset file (YAML or JSON); without one, vLLM's
    /// defaults. `--set` values apply on top.
    #[arg(value_name = "PRESET", conflicts_with = "preset_flag")]
    preset: Option<String>,
    /// The same as PRESET, spelled as `samplab sample` takes it.
    #[arg(long = "preset", value_name = "PRESET")]
    preset_flag: Option<String>,
    /// Any sampling parameter as key=value, value in YAML: `--set temperature=0 --set top_k=40`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// Prompt to put in the snippet.
    #[arg(long, default_value = "Once upon a time")]
    prompt: String,
    /// Read the prompt from a file instead (`-`: standard input), as `sample` reads it.
    #[arg(long, value_name = "PATH", conflicts_with = "prompt")]
    prompt_file: Option<PathBuf>,
    /// The prompt as one user message through the model's chat template: each target's chat
    /// form (vLLM `llm.chat`, transformers `apply_chat_template`, `/v1/chat/completions`,
    /// llama-server with `--jinja`).
    #[arg(long)]
    chat: bool,
    /// A conversation instead of one message, as `sample` takes it: a YAML (or JSON) list of
    /// `{role, content}`. Implies --chat.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["prompt", "prompt_file"])]
    messages: Option<PathBuf>,
    #[command(flatten)]
    template: super::ChatTemplateArg,
    /// Model to put in the snippet; samplab-tiny is written as its directory in the cache.
    #[arg(long, default_value = "HuggingFaceTB/SmolLM2-135M")]
    model: String,
}

pub fn run(args: ExportArgs) -> anyhow::Result<ExitCode> {
    let preset = args.preset.as_deref().or(args.preset_flag.as_deref());
    if preset == Some(MODEL_PRESET) {
        anyhow::bail!(
            "`{MODEL_PRESET}` (the model's own defaults) is known only once a model loads: \
             export a preset name or file, or give the values with --set"
        );
    }
    let params = params_from_flags(preset, &args.sets)?;
    // No other engine knows the built-in model by name: give them its files.
    let model = if embedded::is_embedded(&args.model) {
        embedded::materialise()?.display().to_string()
    } else {
        args.model
    };
    let mut prompt = args.prompt;
    if let Some(path) = &args.prompt_file {
        prompt = read_prompt_file(path)?;
    }
    let messages = match &args.messages {
        Some(path) => Some(read_conversation(path)?),
        None => (args.chat || args.template.choice().is_some())
            .then(|| vec![Message::new("user", &prompt)]),
    };
    let context = ExportContext {
        messages: messages.as_deref(),
        chat_template: args.template.choice(),
        ..ExportContext::raw(&prompt, &model)
    };
    // Written, not printed: a reader that has gone (`| head`) ends the command quietly.
    write!(
        std::io::stdout().lock(),
        "{}",
        export(args.format, &params, &context)
    )?;
    Ok(ExitCode::SUCCESS)
}
