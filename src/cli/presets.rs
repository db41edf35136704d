//! `samplab presets validate|list`.

use clap::Subcommand;
use samplab::params::SamplingParams;
use samplab::preset_store::PresetStore;
use samplab::presets;
use samplab::terminal_text::escape_controls;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Subcommand)]
pub enum PresetsCommand {
    /// Check preset files; exits non-zero and names the field when one is invalid.
    Validate {
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// List the built-in presets and the user's (.yaml and .json) with their values.
    List,
}

pub fn run(command: PresetsCommand) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    match command {
        PresetsCommand::Validate { files } => validate(&mut out, &files),
        PresetsCommand::List => {
            for preset in presets::builtins() {
                print_preset(&mut out, &preset.name, &preset.params)?;
            }
            let Some(store) = PresetStore::user() else {
                return Ok(ExitCode::SUCCESS);
            };
            let saved = store
                .list()
                .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", store.dir.display()))?;
            if !saved.is_empty() {
                writeln!(out, "\nsaved in {}:", store.dir.display())?;
            }
            for preset in saved {
                // A shadowed file is named by its file, which is all that tells it apart.
                let label = match (preset.note(), preset.path.file_name()) {
                    (Some(note), Some(file)) => format!("{} ({note})", file.to_string_lossy()),
                    _ => preset.name.clone(),
                };
                match &preset.params {
                    Ok(params) => print_preset(&mut out, &label, params)?,
                    Err(e) => writeln!(out, "{label}: error: {}", escape_controls(e))?,
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `name:` and its non-default keys, indented.
fn print_preset(out: &mut impl Write, name: &str, params: &SamplingParams) -> io::Result<()> {
    let yaml = params.to_yaml_non_default();
    writeln!(out, "{name}:\n  {}", yaml.trim_end().replace('\n', "\n  "))
}

/// Checks every file (not just up to the first bad one) so one run reports them all.
fn validate(out: &mut impl Write, files: &[PathBuf]) -> anyhow::Result<ExitCode> {
    let mut all_ok = true;
    for file in files {
        match presets::load_file(file) {
            Ok(_) => writeln!(out, "ok: {}", file.display())?,
            Err(e) => {
                all_ok = false;
                eprintln!("error: {}", escape_controls(&e.to_string()));
            }
        }
    }
    Ok(if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
