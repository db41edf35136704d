//! `samplab export --format F FILE.yaml`.

use clap::Args;
use samplab::export::{ExportContext, ExportFormat, export};
use samplab::presets;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct ExportArgs {
    /// Target engine.
    #[arg(long, value_enum)]
    format: ExportFormat,
    /// Preset file (YAML or JSON) with the parameters.
    file: PathBuf,
    /// Prompt to put in the snippet.
    #[arg(long, default_value = "Once upon a time")]
    prompt: String,
    /// Model name to put in the snippet.
    #[arg(long, default_value = "HuggingFaceTB/SmolLM2-135M")]
    model: String,
}

pub fn run(args: ExportArgs) -> anyhow::Result<ExitCode> {
    let preset = presets::load_file(&args.file)?;
    let context = ExportContext {
        prompt: &args.prompt,
        model: &args.model,
    };
    print!("{}", export(args.format, &preset.params, &context));
    Ok(ExitCode::SUCCESS)
}
