//! `samplab --model M`: the playground, with the preset checked before the terminal is taken.

use clap::Args;
use samplab::params::SamplingParams;
use samplab::presets::{self, MODEL_PRESET, Preset, PresetSource};
use std::process::ExitCode;

#[derive(Args)]
pub struct PlayArgs {
    /// A .gguf file, a Hugging Face model directory, or a Hub id (`org/name`, `org/name:file.gguf`).
    #[arg(long)]
    model: Option<String>,
    /// The prompt to start with; it can be edited in the playground.
    #[arg(long, default_value = "")]
    prompt: String,
    /// Send the prompt as one user message through the model's chat template (`m` switches).
    #[arg(long)]
    chat: bool,
    /// A built-in preset name, a preset file, or `model` for the model's own defaults.
    #[arg(long)]
    preset: Option<String>,
}

pub fn run(args: PlayArgs) -> anyhow::Result<ExitCode> {
    let Some(model) = args.model else {
        eprintln!(
            "samplab: --model is required for now, e.g. `samplab --model path/to/model.gguf` \
             (a .gguf file, a Hugging Face model directory or a Hub id); \
             see `samplab --help` for the subcommands"
        );
        return Ok(ExitCode::from(2));
    };
    let neutral = |name: &str| Preset {
        name: name.to_owned(),
        params: SamplingParams::default(),
        source: PresetSource::BuiltIn,
    };
    let preset = match args.preset.as_deref() {
        Some(MODEL_PRESET) => neutral(MODEL_PRESET),
        Some(name) => presets::resolve(name)?,
        None => neutral("default"),
    };
    samplab::tui::run(&model, &args.prompt, args.chat, preset)?;
    Ok(ExitCode::SUCCESS)
}
