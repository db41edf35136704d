//! The model picker's keys (`a`): adding a found or typed model to the comparison and removing
//! one, with its runs, columns and scores.

use crate::tui::action::{Effect, ListMove};
use crate::tui::comparison::ModelId;
use crate::tui::model_slot::{ModelSlot, ModelStatus};
use crate::tui::overlays::model_picker::{self, ModelPicker};
use crate::tui::state::{Overlay, State};
use crate::tui::update;

/// `a`: opens the picker and asks the loop what is on disk.
pub fn open(state: &mut State) -> Vec<Effect> {
    state.overlay = Some(Overlay::Models(ModelPicker::new()));
    vec![Effect::DiscoverModels]
}

/// Steps wrap round the loaded models and the candidates.
pub fn move_by(state: &mut State, by: ListMove) {
    let rows = state.comparison.models.len() + picker(state).map_or(0, |p| p.candidates.len());
    let page = model_picker::page_rows(state.size, rows);
    if let Some(Overlay::Models(picker)) = &mut state.overlay {
        picker.selected = by.apply(picker.selected, rows, page, true);
    }
}

/// Enter: the typed spec, else the selected candidate, joins the comparison, replacing the
/// models that failed to load; it loads on its own engine and runs the current parameters and
/// seeds once ready.
pub fn add(state: &mut State) -> Vec<Effect> {
    let loaded = state.comparison.models.len();
    let Some(Overlay::Models(picker)) = &mut state.overlay else {
        return Vec::new();
    };
    let typed = picker.input.text.trim().to_owned();
    let spec = if typed.is_empty() {
        match picker.selected.checked_sub(loaded) {
            Some(i) => picker.candidates.get(i).map(|c| c.spec.clone()),
            None => {
                picker.error = Some("already loaded: pick a model below, or type one".to_owned());
                return Vec::new();
            }
        }
    } else {
        Some(typed)
    };
    let Some(spec) = spec else {
        return Vec::new();
    };
    state.overlay = None;
    // The new model takes the place of those that failed to load: their failure is no longer
    // what the status bar, the sample area and the exit status should report.
    let failed: Vec<(ModelId, String)> = state
        .comparison
        .models
        .iter()
        .filter_map(|m| Some((m.id, m.load_error()?)))
        .collect();
    let mut effects = Vec::new();
    for (id, error) in failed {
        if state.status.error.as_ref() == Some(&error) {
            state.status.error = None;
        }
        effects.extend(drop_model(state, id));
    }
    let id = state.comparison.add_model(&spec);
    effects.push(Effect::AddEngine {
        id,
        spec,
        backend: None,
    });
    effects
}

/// Del on a loaded model: its runs stop, its columns and its scores go, its engine closes (a
/// download under way stops with it). On the last model, which stays, Del stops its download.
pub fn remove(state: &mut State) -> Vec<Effect> {
    let Some(selected) = picker(state).map(|p| p.selected) else {
        return Vec::new();
    };
    let Some(slot) = state.comparison.models.get(selected) else {
        return refuse(state, "only a loaded model (above the line) can be removed");
    };
    if state.comparison.models.len() == 1 {
        // The last model stays, but its download can stop: what arrived is kept to resume.
        if matches!(
            slot.status,
            ModelStatus::Loading {
                downloading: true,
                ..
            }
        ) {
            let (id, spec) = (slot.id, slot.spec.clone());
            state
                .status
                .notify(format!("cancelling the download of {spec}"));
            return vec![Effect::CancelLoad(id)];
        }
        return refuse(
            state,
            "the last model stays: add another before removing this one",
        );
    }
    let id = slot.id;
    let effects = drop_model(state, id);
    let loaded = state.comparison.models.len();
    if let Some(Overlay::Models(picker)) = &mut state.overlay {
        picker.selected = selected.min(loaded - 1);
        picker.error = None;
    }
    effects
}

/// Takes model `id` out of the comparison: its runs stop, its columns and its scores go, its
/// engine closes.
fn drop_model(state: &mut State, id: ModelId) -> Vec<Effect> {
    let name = state
        .comparison
        .slot(id)
        .and_then(ModelSlot::name)
        .map(str::to_owned);
    let mut effects = Vec::new();
    for index in state.comparison.side_ids().rev() {
        if state.comparison.sides[index].model != id {
            continue;
        }
        effects.extend(update::cancel_side(state, index));
        state.comparison.sides.remove(index.0);
        state.columns.remove_side(index);
    }
    if let Some(name) = name {
        for column in &mut state.columns.columns {
            column.cross.retain(|score| score.model != name);
        }
    }
    update::sweep::model_gone(state, id);
    state.comparison.models.retain(|m| m.id != id);
    state.columns.mark_divergence();
    effects.push(Effect::RemoveEngine(id));
    effects
}

fn refuse(state: &mut State, why: &str) -> Vec<Effect> {
    if let Some(Overlay::Models(picker)) = &mut state.overlay {
        picker.error = Some(why.to_owned());
    }
    Vec::new()
}

fn picker(state: &State) -> Option<&ModelPicker> {
    match &state.overlay {
        Some(Overlay::Models(picker)) => Some(picker),
        _ => None,
    }
}
