//! `samplab sweep`: one prompt run under every cell of a parameter grid with the same seeds, so
//! that cells differ by their parameters and not by fresh noise (coupled sampling: a cell's
//! samples share their prefix with a neighbour's until the parameters part them, and the
//! engine replays what it can). Each cell is reported with its parameters and statistics.

use super::counted;
use super::progress::LoadBar;
use super::sample::params_from_flags;
use clap::Args;
use samplab::engine::load::load_any;
use samplab::engine::{Conversation, Event, Prompt, Request, random_seed};
use samplab::model::device::DeviceChoice;
use samplab::model::source::{HubSettings, embedded};
use samplab::model::text::chat_template::Message;
use samplab::params::SamplingParams;
use samplab::params::sweep::{Axis, CellValues, GridError, cells, describe, parse_axis};
use samplab::response::RunStats;
use serde::Serialize;
use std::io::Write;
use std::process::ExitCode;

#[derive(Args)]
pub struct SweepArgs {
    /// The model, as `sample --model` takes it (one: a sweep compares parameters).
    #[arg(long, value_name = "MODEL", default_value = embedded::NAME)]
    model: String,
    /// Where the model runs, as `sample --device`.
    #[arg(long, value_name = "DEVICE", default_value = "auto")]
    device: DeviceChoice,
    #[command(flatten)]
    precision: super::ActivationsArg,
    #[command(flatten)]
    backend: super::BackendArg,
    /// The prompt text.
    #[arg(long)]
    prompt: String,
    /// Send the prompt as one user message through the model's chat template.
    #[arg(long)]
    chat: bool,
    #[command(flatten)]
    template: super::ChatTemplateArg,
    /// A preset every cell starts from; `--set` applies on top, then the cell's values.
    #[arg(long)]
    preset: Option<String>,
    /// A parameter every cell shares, as `sample --set`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// A parameter and its values, comma-separated (commas inside brackets or quotes stay):
    /// `--grid temperature=0.5,0.8,1.2 --grid top_p=0.9,1`. Several grids make every
    /// combination, the first one varying slowest.
    #[arg(long = "grid", value_name = "KEY=V1,V2,...", required = true)]
    grids: Vec<String>,
    /// Print `{"cells": [...]}` as JSON: each cell's grid values, whole parameters, statistics
    /// and first sample's text.
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// Print one CSV row per cell.
    #[arg(long)]
    csv: bool,
}

#[derive(Serialize)]
struct Cell {
    /// The grid's values of this cell, by key, as typed.
    grid: CellValues,
    params: SamplingParams,
    stats: Option<RunStats>,
    /// Sample 0's text, to read what the figures describe.
    first: String,
}

#[derive(Serialize)]
struct Sweep {
    model: String,
    prompt: String,
    seed: u64,
    axes: Vec<Axis>,
    cells: Vec<Cell>,
}

pub fn run(args: SweepArgs) -> anyhow::Result<ExitCode> {
    let mut base = params_from_flags(args.preset.as_deref(), &args.sets)?;
    let axes = args
        .grids
        .iter()
        .map(|grid| parse_axis(grid))
        .collect::<Result<Vec<_>, _>>()
        .map_err(flagged)?;
    let cells = cells(&base, &axes).map_err(flagged)?;
    // Every cell draws from the same seeds, also when none was given.
    let seed = *base.seed.get_or_insert_with(random_seed);

    let mut bar = LoadBar::new();
    args.backend.apply_verbose();
    let (device, activations) = (args.device, args.precision.activations);
    let mut runner = load_any(
        &args.model,
        &HubSettings::from_env(),
        device,
        activations,
        args.backend.backend.for_model(0),
        &mut |p| bar.show(&p),
    )?;
    runner.use_chat_template(args.template.choice())?;
    bar.clear();
    let (model, chat_template) = match runner.loaded() {
        Event::Loaded {
            model,
            chat_template,
            ..
        } => (model, chat_template),
        _ => (args.model.clone(), false),
    };
    let chat = args.chat || args.template.choice().is_some();
    let prompt = if chat && chat_template {
        Prompt::Chat(Conversation {
            messages: vec![Message::new("user", &args.prompt)],
            literal_specials: false,
        })
    } else {
        if chat {
            eprintln!(
                "samplab: warning: {model} has no chat template: it gets the prompt as raw text"
            );
        }
        Prompt::raw(&args.prompt)
    };

    // On stderr, so that the table, CSV or JSON on stdout stays whole; the seed is what runs
    // the sweep again (`--set seed=…`).
    let total = cells.len();
    eprintln!(
        "sweeping {} with seed {seed}",
        counted(total, "cell", "cells")
    );
    let mut done = Vec::with_capacity(total);
    for (i, (grid, params)) in cells.into_iter().enumerate() {
        let params = SamplingParams {
            seed: Some(seed),
            ..params
        };
        let request = Request {
            run_id: i as u64 + 1,
            prompt: prompt.clone(),
            lane: 0,
            params: params.clone(),
            branches: Vec::new(),
        };
        let response = runner
            .run(&request, &mut || false, &mut |_| {})
            .map_err(|e| anyhow::anyhow!("cell {}: {e:#}", describe(&grid)))?;
        eprintln!("cell {}/{total} done: {}", i + 1, describe(&grid));
        let first = response
            .trajectories
            .first()
            .map(|t| t.text.clone())
            .unwrap_or_default();
        done.push(Cell {
            grid,
            params,
            stats: response.stats,
            first,
        });
    }
    let sweep = Sweep {
        model,
        prompt: args.prompt,
        seed,
        axes,
        cells: done,
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        // Written as a string: serde_json's writer error hides a closed pipe from `main`.
        writeln!(out, "{}", serde_json::to_string_pretty(&sweep)?)?;
    } else {
        write_table(&mut out, &sweep, args.csv)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The grid's error as the CLI says it: one about a `--grid` names the flag.
fn flagged(error: GridError) -> anyhow::Error {
    if error.names_an_axis() {
        anyhow::anyhow!("--grid {error}")
    } else {
        anyhow::anyhow!("{error}")
    }
}

/// The cells as a table: the grid's keys, then the statistics; CSV (the first sample's text
/// quoted) or columns padded for reading.
fn write_table(out: &mut impl Write, sweep: &Sweep, csv: bool) -> std::io::Result<()> {
    let mut header: Vec<String> = sweep.axes.iter().map(|a| a.key.clone()).collect();
    header.extend(
        [
            "distinct_1",
            "distinct_2",
            "distinct_3",
            "length_mean",
            "mean_logprob",
            "identical",
            "stop_reasons",
            "first",
        ]
        .map(str::to_owned),
    );
    let figure = |x: Option<f64>| x.map_or("-".to_owned(), |x| format!("{x:.3}"));
    let mut rows = vec![header];
    for cell in &sweep.cells {
        let mut row: Vec<String> = cell.grid.values().map(|v| v.to_string()).collect();
        match &cell.stats {
            Some(s) => {
                let groups = s.identical.iter().filter(|g| g.len() > 1).count();
                let reasons: Vec<String> = s
                    .stop_reasons
                    .iter()
                    .map(|(r, n)| format!("{r}:{n}"))
                    .collect();
                row.extend([
                    figure(s.distinct_1),
                    figure(s.distinct_2),
                    figure(s.distinct_3),
                    format!("{:.1}", s.length.mean),
                    figure(s.mean_logprob),
                    groups.to_string(),
                    reasons.join(";"),
                ]);
            }
            None => row.extend(std::iter::repeat_n("-".to_owned(), 7)),
        }
        let first = cell.first.replace('\n', "\\n");
        row.push(if csv {
            format!("\"{}\"", first.replace('"', "\"\""))
        } else {
            first.chars().take(60).collect()
        });
        rows.push(row);
    }
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    for row in &rows {
        let line = if csv {
            row.join(",")
        } else {
            let cells: Vec<String> = row
                .iter()
                .zip(&widths)
                .map(|(cell, &w)| format!("{cell:<w$}"))
                .collect();
            cells.join("  ").trim_end().to_owned()
        };
        writeln!(out, "{line}")?;
    }
    Ok(())
}
