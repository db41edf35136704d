//! `update` for the preset picker, the save prompt, the export dialog and theme switching:
//! pure like the rest, with file and terminal work handed to the loop as effects whose
//! outcomes come back as actions.

use super::action::{DialogAction, Effect, Outcome};
use super::conversation;
use super::export_dialog::{self, ExportDialog, Note};
use super::model_picker;
use super::preset_picker::{EntryKind, PresetPicker};
use super::run_shape::keep_run_shape;
use super::save_prompt::SavePrompt;
use super::state::{Overlay, State};
use super::themes::Cycled;
use super::update::params_changed;
use crate::params::SamplingParams;
use crate::preset_store::check_name;
use crate::presets::{Preset, PresetSource};
use crate::response::SampleResponse;

pub fn update(state: &mut State, action: DialogAction) -> Vec<Effect> {
    match action {
        DialogAction::OpenConversation => {
            conversation::open(state);
            Vec::new()
        }
        DialogAction::TurnsMove(delta) => {
            conversation::move_by(state, delta);
            Vec::new()
        }
        DialogAction::EditTurn => {
            conversation::edit(state);
            Vec::new()
        }
        DialogAction::AddTurn => conversation::add(state),
        DialogAction::DeleteTurn => conversation::delete(state),
        DialogAction::CycleRole => conversation::cycle_role(state),
        DialogAction::OpenPresets => {
            let picker = PresetPicker::new(&state.presets, &state.params.preset_name);
            state.overlay = Some(Overlay::Presets(picker));
            state
                .presets
                .store
                .clone()
                .map(Effect::ListPresets)
                .into_iter()
                .collect()
        }
        DialogAction::PickerMove(delta) => {
            if let Some(Overlay::Presets(picker)) = &mut state.overlay {
                picker.move_by(delta);
            }
            Vec::new()
        }
        DialogAction::LoadPreset => load_preset(state),
        DialogAction::OpenSave => open_save(state),
        DialogAction::SubmitName => submit_name(state),
        DialogAction::ConfirmOverwrite(yes) => confirm_overwrite(state, yes),
        DialogAction::OpenExport => {
            state.overlay = Some(Overlay::Export(ExportDialog::default()));
            Vec::new()
        }
        DialogAction::ExportCycle(delta) => {
            with_export(state, |d| d.cycle(delta));
            Vec::new()
        }
        DialogAction::ExportSelect(format) => {
            with_export(state, |d| d.select(format));
            Vec::new()
        }
        DialogAction::ExportScroll(delta) => {
            if let Some(Overlay::Export(dialog)) = &state.overlay {
                let lines = snippet_of(state, dialog).lines().count();
                with_export(state, |d| d.scroll_by(delta, lines));
            }
            Vec::new()
        }
        DialogAction::CopyExport => match &state.overlay {
            Some(Overlay::Export(dialog)) => vec![Effect::Copy(snippet_of(state, dialog))],
            _ => Vec::new(),
        },
        DialogAction::WriteResults => write_results(state),
        DialogAction::CycleResultsShape => {
            state.export.cycle_shape();
            // The last note spoke of a file in the old shape.
            with_export(state, |d| d.note = None);
            Vec::new()
        }
        DialogAction::OpenModels => model_picker::open(state),
        DialogAction::ModelsMove(delta) => {
            model_picker::move_by(state, delta);
            Vec::new()
        }
        DialogAction::AddModel => model_picker::add(state),
        DialogAction::RemoveModel => model_picker::remove(state),
    }
}

/// `t`: the next theme, named in the status bar until the next key; a broken theme file is a
/// stop of its own that says why and keeps the colours.
pub fn cycle_theme(state: &mut State) -> Vec<Effect> {
    match state.themes.cycle() {
        Cycled::Theme(name) => state.status.notify(format!("theme {name}")),
        Cycled::Broken(error) => {
            let error = format!(
                "{error}; fix the file and restart to use it (still on {})",
                state.themes.current().name
            );
            state.status.report_error(error);
        }
    }
    Vec::new()
}

pub fn outcome(state: &mut State, outcome: Outcome) -> Vec<Effect> {
    match outcome {
        Outcome::PresetsListed(listed) => {
            if let Some(Overlay::Presets(picker)) = &mut state.overlay {
                picker.add_user(listed, &state.params.preset_name);
            }
        }
        Outcome::PresetExists(name) => {
            if let Some(Overlay::SavePreset(prompt)) = &mut state.overlay {
                prompt.confirm = Some(name);
            }
        }
        Outcome::PresetSaved(Ok(preset)) => {
            // The saved params are the current ones (in canonical spelling): no re-run needed.
            if let PresetSource::File(path) = &preset.source {
                state.status.notify(format!("saved {}", path.display()));
            }
            let params = keep_run_shape(preset.params, &state.params.params);
            state.params.load_preset(Preset { params, ..preset });
            state.overlay = None;
        }
        Outcome::PresetSaved(Err(error)) => {
            if let Some(Overlay::SavePreset(prompt)) = &mut state.overlay {
                prompt.confirm = None;
                prompt.error = Some(error);
            }
        }
        Outcome::Copied(result) => with_export(state, |d| {
            d.note = Some(match result {
                Ok(()) => Note::Done(format!(
                    "copied the {} snippet to the clipboard (OSC 52)",
                    d.tab_name()
                )),
                Err(e) => Note::Failed(format!("cannot copy: {e}")),
            })
        }),
        Outcome::ModelsFound(candidates) => {
            if let Some(Overlay::Models(picker)) = &mut state.overlay {
                picker.found(candidates);
            }
        }
        Outcome::ResultsWritten(result) => with_export(state, |d| {
            d.note = Some(match result {
                Ok(path) => Note::Done(format!("wrote {}", path.display())),
                Err(e) => Note::Failed(format!("cannot write the results: {e}")),
            })
        }),
    }
    Vec::new()
}

fn with_export(state: &mut State, change: impl FnOnce(&mut ExportDialog)) {
    if let Some(Overlay::Export(dialog)) = &mut state.overlay {
        change(dialog);
    }
}

/// What the export dialog shows, scrolls and copies.
pub(super) fn snippet_of(state: &State, dialog: &ExportDialog) -> String {
    export_dialog::snippet(
        dialog.format,
        &state.params.params,
        state.prompt.text(),
        &state.export.model_name(state.status.export_model()),
    )
}

/// Loads the picker's choice, keeping the run's shape where the preset leaves it open (see
/// `run_shape`). A broken file loads nothing.
fn load_preset(state: &mut State) -> Vec<Effect> {
    let Some(Overlay::Presets(picker)) = &mut state.overlay else {
        return Vec::new();
    };
    let Some(entry) = picker.chosen().cloned() else {
        return Vec::new();
    };
    let params = match entry.params {
        Ok(params) => keep_run_shape(params, &state.params.params),
        Err(_) => {
            picker.message = Some(format!(
                "nothing loaded: fix `{}` and open the picker again",
                entry.name
            ));
            return Vec::new();
        }
    };
    let before = state.params.params.clone();
    let source = match entry.kind {
        EntryKind::User(path) => PresetSource::File(path),
        EntryKind::BuiltIn | EntryKind::Model => PresetSource::BuiltIn,
    };
    state.params.load_preset(Preset {
        name: entry.name,
        params,
        source,
    });
    state.overlay = None;
    let changed = state.params.params != before;
    params_changed(state, changed)
}

/// Opens the name prompt, offering the current preset's name when it is the user's own.
fn open_save(state: &mut State) -> Vec<Effect> {
    let Some(store) = &state.presets.store else {
        state.status.notify(
            "cannot save: no config directory; set SAMPLAB_CONFIG_DIR to choose one".to_owned(),
        );
        return Vec::new();
    };
    let name = match &state.params.source {
        PresetSource::File(path) if store.holds(path) => state.params.preset_name.as_str(),
        _ => "",
    };
    state.overlay = Some(Overlay::SavePreset(SavePrompt::new(name)));
    Vec::new()
}

fn submit_name(state: &mut State) -> Vec<Effect> {
    let (Some(Overlay::SavePreset(prompt)), Some(store)) =
        (&mut state.overlay, &state.presets.store)
    else {
        return Vec::new();
    };
    let name = prompt.name().to_owned();
    if let Err(e) = check_name(&name) {
        prompt.error = Some(e.to_string());
        return Vec::new();
    }
    vec![Effect::SavePreset {
        store: store.clone(),
        name,
        params: to_save(state),
        overwrite: false,
    }]
}

fn confirm_overwrite(state: &mut State, yes: bool) -> Vec<Effect> {
    let (Some(Overlay::SavePreset(prompt)), Some(store)) =
        (&mut state.overlay, &state.presets.store)
    else {
        return Vec::new();
    };
    let Some(name) = prompt.confirm.take() else {
        return Vec::new();
    };
    if !yes {
        return Vec::new();
    }
    vec![Effect::SavePreset {
        store: store.clone(),
        name,
        params: to_save(state),
        overwrite: true,
    }]
}

/// The params as a preset file keeps them: without the seed the session drew for itself.
fn to_save(state: &State) -> SamplingParams {
    let mut params = state.params.params.clone();
    if params.seed.is_some() && params.seed == state.presets.drawn_seed {
        params.seed = None;
    }
    params
}

/// Every side's finished run, named after the first side's, in the chosen shape.
fn write_results(state: &mut State) -> Vec<Effect> {
    let responses: Vec<SampleResponse> = state
        .sides
        .iter()
        .filter_map(|side| side.response.as_deref().cloned())
        .collect();
    let run_id = state
        .sides
        .iter()
        .find(|s| s.response.is_some())
        .and_then(|s| s.current);
    match run_id {
        Some(run_id) => vec![Effect::WriteResults {
            dir: state.export.results_dir.clone(),
            run_id,
            responses,
            shape: state.export.shape,
            prompt: state.prompt.text().to_owned(),
        }],
        None => {
            with_export(state, |d| {
                d.note = Some(Note::Failed(
                    "no finished run yet: write again once the samples have ended".to_owned(),
                ))
            });
            Vec::new()
        }
    }
}
