//! `samplab presets validate|list`.

use clap::Subcommand;
use samplab::presets;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Subcommand)]
pub enum PresetsCommand {
    /// Check preset files; exits non-zero and names the field when one is invalid.
    Validate {
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// List the built-in presets with their values.
    List,
}

pub fn run(command: PresetsCommand) -> anyhow::Result<ExitCode> {
    match command {
        PresetsCommand::Validate { files } => Ok(validate(&files)),
        PresetsCommand::List => {
            for preset in presets::builtins() {
                let yaml = preset.params.to_yaml_non_default();
                println!(
                    "{}:\n  {}",
                    preset.name,
                    yaml.trim_end().replace('\n', "\n  ")
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Checks every file (not just up to the first bad one) so one run reports them all.
fn validate(files: &[PathBuf]) -> ExitCode {
    let mut all_ok = true;
    for file in files {
        match presets::load_file(file) {
            Ok(_) => println!("ok: {}", file.display()),
            Err(e) => {
                all_ok = false;
                eprintln!("error: {e}");
            }
        }
    }
    if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
