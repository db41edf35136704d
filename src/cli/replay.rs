//! `samplab replay FILE`: runs each run of a results file again from the file's own prompt,
//! params, seeds, model (checked by sha256), device and activations, and says whether every
//! token came out the same. The exit status is diff's: 0 the same, 1 a difference (the first
//! one named), 2 a file that cannot be replayed.

use super::counted;
use super::progress::LoadBar;
use anyhow::Context;
use clap::Args;
use samplab::engine::BackendKind;
use samplab::engine::LoadedModel;
use samplab::engine::load::load_model_with;
use samplab::engine::reproduce::{
    Difference, first_difference, own_samples, request_of, sample_tokens,
};
use samplab::model::Activations;
use samplab::model::device::DeviceChoice;
use samplab::model::source::HubSettings;
use samplab::model::text::token_text;
use samplab::response::Provenance;
use samplab::response::results_file::{self, run_name};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// The exit status of a file that cannot be replayed, as diff and cmp say trouble.
pub const TROUBLE: u8 = 2;

#[derive(Args)]
pub struct ReplayArgs {
    /// A results file: what `samplab sample --json` printed, or the playground's `w` wrote.
    file: PathBuf,
    /// Load the model from here instead of where the file says it was (moved, or on another
    /// machine); its files must still have the sha256 the file names.
    #[arg(long, value_name = "MODEL")]
    model: Option<String>,
    /// Run on this device instead of the file's: cpu, cuda, cuda:N or metal (tokens may then
    /// differ, as other kernels round differently).
    #[arg(long, value_name = "DEVICE")]
    device: Option<DeviceChoice>,
    /// Run on this backend instead of the file's (samplab or llama.cpp; tokens may then
    /// differ, as llama.cpp rounds activations).
    #[arg(long, value_name = "BACKEND")]
    backend: Option<BackendKind>,
}

pub fn run(args: ReplayArgs) -> anyhow::Result<ExitCode> {
    let file = args.file.display().to_string();
    let runs = results_file::read(&args.file)?;
    results_file::require_provenance(&runs, &file)?;
    // Every run is checked before any model loads, so that a bad file fails at once.
    let requests = runs
        .iter()
        .enumerate()
        .map(|(i, run)| {
            request_of(run).map_err(|why| {
                anyhow::anyhow!(
                    "{} of {file} cannot be replayed: {why}",
                    run_name(i, runs.len())
                )
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut out = std::io::stdout().lock();
    let mut differs = false;
    for (i, (run, request)) in runs.iter().zip(&requests).enumerate() {
        let what = format!("{} of {file}", run_name(i, runs.len()));
        let Some(provenance) = &run.provenance else {
            anyhow::bail!("{what} has no `provenance`");
        };
        let mut model = load(&args, provenance).with_context(|| what.clone())?;
        if let Some(why) = provenance.model.mismatch(model.origin.files()) {
            anyhow::bail!(
                "{what} was not sampled by the model at {}: {why}; replay needs the very model \
                 the run used",
                model.origin.source
            );
        }
        let rerun = model
            .run(request, &mut || false, &mut |_| {})
            .with_context(|| format!("{what} failed to run again"))?;
        let samples = own_samples(run).len();
        let branches = run.trajectories.len() - samples;
        let left_out = match branches {
            0 => String::new(),
            n => format!(
                "; {} left out, as picks, not draws",
                counted(n, "branch", "branches")
            ),
        };
        writeln!(
            out,
            "{what} ({}, {}{left_out}):",
            run.model,
            counted(samples, "sample", "samples")
        )?;
        match first_difference(run, &rerun) {
            None => writeln!(
                out,
                "  every token equals: {} prompt and {} sampled",
                run.prompt_token_ids.len(),
                sample_tokens(run)
            )?,
            Some(difference) => {
                differs = true;
                writeln!(out, "  {}", describe(&difference, &model))?;
                if let Some(now) = &rerun.provenance {
                    for line in provenance.differences(now) {
                        writeln!(out, "  {line}")?;
                    }
                }
            }
        }
    }
    Ok(if differs {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The run's model, loaded as the file says it ran: `--model` and `--device` replace where
/// and on what.
fn load(args: &ReplayArgs, provenance: &Provenance) -> anyhow::Result<LoadedModel> {
    let source = args
        .model
        .clone()
        .unwrap_or_else(|| provenance.model.source.clone());
    let device = match args.device {
        Some(device) => device,
        None => provenance.device.parse().map_err(|e| {
            anyhow::anyhow!(
                "its provenance names the device `{}`: {e}",
                provenance.device
            )
        })?,
    };
    // Absent where the model has no quantized products on the CPU: either runs them alike.
    let activations = provenance.activations.unwrap_or(Activations::Exact);
    // Files from before there were two backends ran on samplab's engine.
    let backend = args
        .backend
        .or(provenance.model.backend)
        .unwrap_or(BackendKind::Samplab);
    let mut bar = LoadBar::new();
    let loaded = load_model_with(
        &source,
        &HubSettings::from_env(),
        device,
        activations,
        backend.into(),
        &mut |p| bar.show(&p),
    );
    bar.clear();
    loaded.map_err(|e| {
        let moved = match args.model {
            None => {
                "; if the model moved, pass --model with where it is now (its sha256 is checked)"
            }
            Some(_) => "",
        };
        anyhow::anyhow!("cannot load the run's model {source}: {e:#}{moved}")
    })
}

/// `sample 2 differs at token 17: the file has #1234 " the", the replay #5678 " a"`.
fn describe(difference: &Difference, model: &LoadedModel) -> String {
    let token = |id: Option<u32>| match id {
        Some(id) => format!(
            "#{id} \"{}\"",
            token_text(&model.tokenizer, id).escape_debug()
        ),
        None => "nothing (it ended)".to_owned(),
    };
    match difference {
        Difference::Prompt { at, file, rerun } => format!(
            "the prompt differs at token {at}: the file has {}, the replay {} (the prompt is \
             tokenized another way)",
            token(*file),
            token(*rerun)
        ),
        Difference::Seed {
            sample,
            file,
            rerun,
        } => format!("sample {sample}'s seed differs: {file} in the file, {rerun} in the replay"),
        Difference::Token {
            sample,
            at,
            file,
            rerun,
        } => format!(
            "sample {sample} differs at token {at}: the file has {}, the replay {}",
            token(*file),
            token(*rerun)
        ),
    }
}
