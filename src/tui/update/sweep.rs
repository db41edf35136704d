//! A sweep in the playground: the grid typed in the sweep dialog (the syntax of
//! `samplab sweep --grid`, several axes on one line), every cell run with the current
//! parameters as the base and the current seed, one after another through the first model's
//! engine as ordinary runs in a lane of their own (so they neither interrupt nor are
//! interrupted by the runs on screen), and the grid view of their figures. A served model
//! sweeps too, a cell at a time like the CLI, unless an axis is a parameter its server ignores. Opening a cell makes
//! its parameters the current ones and re-runs: the columns need each token's alternatives
//! and probabilities as the run streams them, which a finished response does not keep; the
//! re-run equals the cell (same parameters, prompt and seeds), and the engine replays what it
//! kept from the sweep's last cells.

use super::{chat_mode, mark_all_pending, start_pending};
use crate::engine::{Event, Request, RunId};
use crate::params::sweep::{Axis, cells, parse_grid};
use crate::tui::action::{Effect, SweepAction};
use crate::tui::comparison::ModelId;
use crate::tui::overlays::sweep_dialog::SweepDialog;
use crate::tui::overlays::sweep_grid::{Sweep, SweepCell};
use crate::tui::state::{Overlay, State};

/// The engine lane of a sweep's runs; the parameter sets' runs take lanes 0 and 1.
pub const SWEEP_LANE: u32 = 2;

pub fn update(state: &mut State, action: SweepAction) -> Vec<Effect> {
    match action {
        SweepAction::Open if state.sweep.is_some() => state.overlay = Some(Overlay::Sweep),
        SweepAction::Open | SweepAction::New => {
            let text = state.sweep.as_ref().map_or("", |s| s.text.as_str());
            state.overlay = Some(Overlay::SweepInput(SweepDialog::new(text)));
        }
        SweepAction::Start => return start(state),
        SweepAction::Move { across, down } => with_sweep(state, |s| s.step(across, down)),
        SweepAction::First => with_sweep(state, |s| s.selected = 0),
        SweepAction::Last => with_sweep(state, |s| s.selected = s.cells.len().saturating_sub(1)),
        SweepAction::OpenCell => return open_cell(state),
    }
    Vec::new()
}

fn with_sweep(state: &mut State, change: impl FnOnce(&mut Sweep)) {
    if let (Some(Overlay::Sweep), Some(sweep)) = (&state.overlay, &mut state.sweep) {
        change(sweep);
    }
}

/// The model a sweep runs on: the first side's of the parameter set being edited.
fn sweep_model(state: &State) -> Option<ModelId> {
    let set = state.comparison.editing_set;
    state
        .comparison
        .sides
        .iter()
        .find(|side| side.set == set)
        .map(|side| side.model)
}

/// What every cell starts from, as the dialog says it.
pub fn describe_base(state: &State) -> String {
    let model = sweep_model(state)
        .and_then(|m| state.comparison.slot(m))
        .and_then(|slot| slot.name())
        .unwrap_or("the model, once loaded");
    let seed = state
        .comparison
        .params
        .params
        .seed
        .map_or("no seed".to_owned(), |s| format!("seed {s}"));
    format!("each cell: the current params, {seed}, on {model}, one after another")
}

/// Checks the typed grid and starts its first cell, stopping a sweep still running; a bad grid
/// keeps the dialog open with the reason.
fn start(state: &mut State) -> Vec<Effect> {
    let Some(Overlay::SweepInput(dialog)) = &state.overlay else {
        return Vec::new();
    };
    let text = dialog.buffer.text.trim().to_owned();
    let base = &state.comparison.params.params;
    let model = sweep_model(state).filter(|&m| state.comparison.is_ready(m));
    let planned = match (base.seed, model) {
        (None, _) => Err(
            "the seed is off: set one (or roll one with r in the params) so that \
                          the cells share it"
                .to_owned(),
        ),
        (_, None) => Err("the model is not ready yet: sweep once it has loaded".to_owned()),
        (Some(_), Some(model)) => parse_grid(&text)
            .and_then(|axes| Ok((cells(base, &axes)?, axes, model)))
            .map_err(|e| e.to_string())
            .and_then(|planned| served_applies(state, model, &planned.1).map(|()| planned)),
    };
    let (cells, axes, model) = match planned {
        Ok(planned) => planned,
        Err(error) => {
            if let Some(Overlay::SweepInput(dialog)) = &mut state.overlay {
                dialog.error = Some(error);
            }
            return Vec::new();
        }
    };
    let mut effects: Vec<Effect> = cancel(state).into_iter().collect();
    state.sweep = Some(Sweep {
        text,
        axes,
        cells: cells
            .into_iter()
            .map(|(values, params)| SweepCell {
                values,
                params,
                outcome: None,
            })
            .collect(),
        model,
        prompt: chat_mode::prompt_for(state, model),
        running: None,
        selected: 0,
    });
    state.overlay = Some(Overlay::Sweep);
    effects.extend(run_next(state));
    effects
}

/// A served model runs a sweep like any run, but an axis its server ignores would make every
/// cell the same: refused by name.
fn served_applies(state: &State, model: ModelId, axes: &[Axis]) -> Result<(), String> {
    let Some((server, ignored)) = state.comparison.slot(model).and_then(|s| s.served.as_ref())
    else {
        return Ok(());
    };
    match axes
        .iter()
        .find(|axis| ignored.iter().any(|field| field.name() == axis.key))
    {
        Some(axis) => Err(format!(
            "{server} does not apply `{}`: every cell would be the same; sweep what it applies",
            axis.key
        )),
        None => Ok(()),
    }
}

/// Stops the sweep's run in flight, if any.
fn cancel(state: &mut State) -> Option<Effect> {
    let sweep = state.sweep.as_mut()?;
    Some(Effect::Cancel(sweep.model, sweep.running.take()?))
}

/// Model `id` is leaving the playground: a sweep on it ends, its waiting cells saying why, so
/// that the grid does not wait on an engine that is gone.
pub fn model_gone(state: &mut State, id: ModelId) {
    let Some(sweep) = state.sweep.as_mut().filter(|s| s.model == id) else {
        return;
    };
    if sweep.next_cell().is_none() {
        return;
    }
    sweep.running = None;
    let why = "not run: the sweep's model was removed";
    for cell in sweep.cells.iter_mut().filter(|c| c.outcome.is_none()) {
        cell.outcome = Some(Err(why.to_owned()));
    }
    state
        .status
        .notify("the sweep stopped: its model was removed".to_owned());
}

/// Asks the engine for the next cell's run, if a cell waits for one.
fn run_next(state: &mut State) -> Option<Effect> {
    let sweep = state.sweep.as_mut()?;
    let params = sweep.cells[sweep.next_cell()?].params.clone();
    state.run.last_id += 1;
    let run_id = state.run.last_id;
    sweep.running = Some(run_id);
    Some(Effect::Run(
        sweep.model,
        Request {
            run_id,
            prompt: sweep.prompt.clone(),
            lane: SWEEP_LANE,
            params,
            branches: Vec::new(),
        },
    ))
}

/// Whether `event` of `model` belongs to the sweep's run in flight, which [`event`] takes.
pub fn owns(state: &State, model: ModelId, run_id: Option<RunId>) -> bool {
    state
        .sweep
        .as_ref()
        .is_some_and(|s| s.model == model && s.running.is_some() && s.running == run_id)
}

/// A cell's run ended (finished or failed): its outcome is kept and the next cell starts. The
/// tokens streaming meanwhile are not drawn: the grid shows cells, not samples.
pub fn event(state: &mut State, event: Event) -> Vec<Effect> {
    let outcome = match event {
        Event::Done { response, .. } => Ok(response),
        Event::Error { message, .. } => Err(message),
        _ => return Vec::new(),
    };
    let Some(sweep) = state.sweep.as_mut() else {
        return Vec::new();
    };
    sweep.running = None;
    if let Some(index) = sweep.next_cell() {
        sweep.cells[index].outcome = Some(outcome);
    }
    run_next(state).into_iter().collect()
}

/// The selected cell as the current run: its parameters, re-run now on every side.
fn open_cell(state: &mut State) -> Vec<Effect> {
    let Some(sweep) = state
        .sweep
        .as_ref()
        .filter(|_| state.overlay == Some(Overlay::Sweep))
    else {
        return Vec::new();
    };
    let Some(cell) = sweep.cells.get(sweep.selected) else {
        return Vec::new();
    };
    let (params, prompt) = (cell.params.clone(), sweep.prompt.clone());
    let prompt_changed = chat_mode::prompt_for(state, sweep.model) != prompt;
    state.comparison.params.set_params(params);
    state.overlay = None;
    if prompt_changed {
        state.status.notify(
            "the prompt changed since the sweep: the cell's parameters run on the prompt as it \
             is now"
                .to_owned(),
        );
    }
    mark_all_pending(state);
    start_pending(state)
}
