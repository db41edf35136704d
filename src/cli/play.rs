//! `samplab [--model M]`: the playground, with the preset and theme checked before the terminal
//! is taken. This is the edge that reads the environment (config dir, NO_COLOR).

use clap::Args;
use samplab::config;
use samplab::engine::Backends;
use samplab::model::device::DeviceChoice;
use samplab::model::source::embedded;
use samplab::params::SamplingParams;
use samplab::preset_store::{self, PresetStore};
use samplab::presets::{MODEL_PRESET, Preset, PresetSource};
use samplab::tui::{Ending, Playground, Theme, ThemeCatalog, session};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct PlayArgs {
    /// A .gguf file, a Hugging Face model directory, a Hub id (`org/name`, `org/name:file.gguf`),
    /// or samplab-tiny, the small story model built into samplab. Repeat it to compare models
    /// side by side on the same parameters and seeds.
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
    /// The prompt to start with; it can be edited in the playground.
    #[arg(long, default_value = "")]
    prompt: String,
    /// Send the prompt as one user message through the model's chat template (`m` switches).
    #[arg(long)]
    chat: bool,
    #[command(flatten)]
    template: super::ChatTemplateArg,
    /// A built-in or saved preset name, a preset file, or `model` for the model's own defaults.
    /// Give two to compare parameter sets (A/B) side by side; `b` switches which one is edited.
    #[arg(long = "preset", value_name = "PRESET")]
    presets: Vec<String>,
    /// A parameter's value over the preset's, written in YAML (`--set temperature=0.3`), on
    /// both sides of an A/B; shown as a change (`*`), so that reset goes back to the preset.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// A theme name (dark, light, high-contrast, viridis, no-color, or one of yours) or a theme
    /// file; `t` switches at run time.
    #[arg(long)]
    theme: Option<String>,
    /// A session file saved with `S` in the playground: its models, prompt, conversation,
    /// parameter sets and branches (run again as it opens).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["models", "prompt", "chat", "presets", "sets"])]
    session: Option<PathBuf>,
}

pub fn run(args: PlayArgs) -> anyhow::Result<ExitCode> {
    if args.presets.len() > 2 {
        anyhow::bail!(
            "--preset is given {} times: give one, or two to compare parameter sets (A/B)",
            args.presets.len()
        );
    }
    // A GPU the build lacks or the machine does not have is refused before the terminal is
    // taken, as a bad preset is.
    args.device.open()?;
    args.precision.activations.check()?;
    args.backend
        .backend
        .check_count(args.models.len())
        .map_err(anyhow::Error::msg)?;
    if args.backend.verbose {
        anyhow::bail!(
            "--verbose prints llama.cpp's log on stderr, which the playground draws on: there \
             its warnings are in the notices (`l`); use it with sample, sweep or bench"
        );
    }
    let store = PresetStore::user();
    let neutral = |name: &str| Preset {
        name: name.to_owned(),
        params: SamplingParams::default(),
        source: PresetSource::BuiltIn,
    };
    let resolve = |name: Option<&str>| match name {
        Some(MODEL_PRESET) => Ok(neutral(MODEL_PRESET)),
        Some(name) => preset_store::resolve(name, store.as_ref()),
        None => Ok(neutral("default")),
    };
    // A broken session is refused before the terminal is taken, as a bad preset is.
    let session = args.session.as_deref().map(session::read).transpose()?;
    let models = match &session {
        Some(session) => session.models.iter().map(|m| m.spec.clone()).collect(),
        None => args.models,
    };
    // A session's models load on the backends that ran them.
    let backends = match &session {
        Some(session) => Backends::from(
            session
                .models
                .iter()
                .enumerate()
                .map(|(i, m)| {
                    m.backend
                        .map_or(args.backend.backend.for_model(i), Into::into)
                })
                .collect::<Vec<_>>(),
        ),
        None => args.backend.backend.clone(),
    };
    let preset = resolve(args.presets.first().map(String::as_str))?;
    let second_preset = args
        .presets
        .get(1)
        .map(|name| resolve(Some(name)))
        .transpose()?;
    // The model's defaults replace the params once it has loaded, and would drop the changes.
    if !args.sets.is_empty() && args.presets.iter().any(|p| p == MODEL_PRESET) {
        anyhow::bail!(
            "--set cannot go with --preset {MODEL_PRESET} in the playground: the model's \
             defaults arrive after it loads and replace the parameters; change them there, or \
             use `samplab sample --preset {MODEL_PRESET} --set ...`"
        );
    }
    // A bad `--set` is refused before the terminal is taken, as `sample` refuses it.
    for preset in std::iter::once(&preset).chain(&second_preset) {
        super::sample::apply_sets(preset.params.clone(), &args.sets)?;
    }
    let themes_dir = config::config_dir().map(|dir| config::themes_dir(&dir));
    let (themes, theme_errors) = ThemeCatalog::load(
        args.theme.as_deref(),
        themes_dir.as_deref(),
        Theme::no_color_requested(),
    )?;
    let notice = (!theme_errors.is_empty()).then(|| {
        theme_errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    });
    let ending = samplab::tui::run(Playground {
        models,
        device: args.device,
        activations: args.precision.activations,
        backends,
        prompt: args.prompt,
        chat: args.chat || args.template.choice().is_some(),
        chat_template: args.template.chat_template,
        preset,
        second_preset,
        sets: args.sets,
        presets: store,
        themes,
        notice,
        session,
    })?;
    Ok(match ending {
        Ending::Quit => ExitCode::SUCCESS,
        Ending::Failed(why) => {
            eprintln!("samplab: {why}");
            ExitCode::FAILURE
        }
        // The shell's convention for a process ended by a signal.
        Ending::Signal(number) => ExitCode::from(u8::try_from(128 + number).unwrap_or(u8::MAX)),
    })
}
