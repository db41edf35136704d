//! `update` for the preset picker, the save prompt, the export dialog and theme switching:
//! pure like the rest, with file and terminal work handed to the loop as effects whose
//! outcomes come back as actions.

use super::chat_mode;
use super::conversation;
use super::model_picker;
use super::params_changed;
use super::run_shape::load_over;
use super::session;
use crate::engine::{Prompt, RunId};
use crate::export::{ExportContext, export};
use crate::params::SamplingParams;
use crate::preset_store::check_name;
use crate::presets::{Preset, PresetSource};
use crate::response::SampleResponse;
use crate::tui::action::{DialogAction, Effect, Outcome};
use crate::tui::comparison::SideId;
use crate::tui::overlays::export_dialog::{ExportDialog, Note};
use crate::tui::overlays::preset_picker::{EntryKind, PresetPicker};
use crate::tui::overlays::save_prompt::{SavePrompt, Saving};
use crate::tui::state::{Overlay, State};
use crate::tui::theme::catalog::Cycled;
use std::path::PathBuf;

pub fn update(state: &mut State, action: DialogAction) -> Vec<Effect> {
    match action {
        DialogAction::OpenConversation => {
            conversation::open(state);
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
            let picker = PresetPicker::new(&state.presets, &state.comparison.params.preset_name);
            state.overlay = Some(Overlay::Presets(picker));
            state
                .presets
                .store
                .clone()
                .map(Effect::ListPresets)
                .into_iter()
                .collect()
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
        DialogAction::WriteResults => ask_results_path(state),
        DialogAction::CycleResultsShape => {
            state.export.cycle_shape();
            // The last note spoke of a file in the old shape.
            with_export(state, |d| d.note = None);
            Vec::new()
        }
        DialogAction::SaveSession => {
            session::ask_path(state, Saving::Session);
            Vec::new()
        }
        DialogAction::OpenSession => {
            session::ask_path(state, Saving::OpenSession);
            Vec::new()
        }
        DialogAction::OpenModels => model_picker::open(state),
        DialogAction::AddModel => model_picker::add(state),
        DialogAction::RemoveModel => model_picker::remove(state),
    }
}

/// What a broken theme's error ends its first part with, so that the next theme takes it away.
const THEME_FIX: &str = "fix the file and restart to use it";

/// `t`: the next theme, named in the status bar until the next key; a broken theme file is a
/// stop of its own that says why and keeps the colours, until `t` moves on.
pub fn cycle_theme(state: &mut State) -> Vec<Effect> {
    match state.themes.cycle() {
        Cycled::Theme(name) => {
            if state
                .status
                .error
                .as_deref()
                .is_some_and(|e| e.contains(THEME_FIX))
            {
                state.status.error = None;
            }
            state.status.notify(format!("theme {name}"));
        }
        Cycled::Broken(error) => {
            let error = format!(
                "{error}; {THEME_FIX} (still on {})",
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
                picker.add_user(listed, &state.comparison.params.preset_name);
            }
        }
        Outcome::PresetExists(name) => {
            if let Some(Overlay::Save(prompt)) = &mut state.overlay {
                prompt.confirm = Some(name);
            }
        }
        Outcome::PresetSaved(Ok(preset)) => {
            // The saved params are the current ones (in canonical spelling, without a seed the
            // session drew): no re-run needed.
            if let PresetSource::File(path) = &preset.source {
                state.status.notify(format!("saved {}", path.display()));
            }
            let mut params = preset.params;
            params.seed = params.seed.or(state.comparison.params.params.seed);
            state
                .comparison
                .params
                .load_preset(Preset { params, ..preset });
            state.overlay = None;
        }
        Outcome::PresetSaved(Err(error)) => {
            if let Some(Overlay::Save(prompt)) = &mut state.overlay {
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
        Outcome::ResultsWritten(result) => results_written(state, result),
        Outcome::ResultsExist(path) | Outcome::SessionExists(path) => {
            if let Some(Overlay::Save(prompt)) = &mut state.overlay {
                prompt.confirm = Some(path.display().to_string());
            }
        }
        Outcome::SessionSaved(result) => session::saved(state, result),
        Outcome::SessionOpened(result) => return session::opened(state, result),
    }
    Vec::new()
}

/// Written: the status bar says where, as for a saved session, and so does the export dialog
/// when `w` was pressed in it (it comes back). Not written: the path prompt says why, for
/// another try. (Closed meanwhile: the status bar says it.)
fn results_written(state: &mut State, result: Result<PathBuf, String>) {
    let asked_from = match &state.overlay {
        Some(Overlay::Save(SavePrompt {
            saving: Saving::Results(dialog),
            ..
        })) => Some(dialog.clone()),
        _ => None,
    };
    match (result, asked_from) {
        (Ok(path), asked_from) => {
            state
                .status
                .notify(format!("wrote the results to {}", path.display()));
            if let Some(from) = asked_from {
                state.overlay = from.map(|dialog| {
                    let note = Some(Note::Done(format!("wrote {}", path.display())));
                    Overlay::Export(ExportDialog { note, ..dialog })
                });
            }
        }
        (Err(e), Some(_)) => {
            if let Some(Overlay::Save(prompt)) = &mut state.overlay {
                prompt.error = Some(format!("cannot write the results: {e}"));
            }
        }
        (Err(e), None) => state
            .status
            .report_error(format!("cannot write the results: {e}")),
    }
}

fn with_export(state: &mut State, change: impl FnOnce(&mut ExportDialog)) {
    if let Some(Overlay::Export(dialog)) = &mut state.overlay {
        change(dialog);
    }
}

/// What the export dialog shows, scrolls and copies: the first model's prompt as it is asked
/// (the conversation in chat mode), on the backend that ran it.
pub(crate) fn snippet_of(state: &State, dialog: &ExportDialog) -> String {
    let first = state.comparison.models.first();
    let prompt = match first {
        Some(slot) => chat_mode::prompt_for(state, slot.id),
        None => Prompt::raw(state.prompt.text()),
    };
    let model = state.export.model_name(state.comparison.export_model());
    let context = ExportContext {
        messages: prompt.is_chat().then(|| prompt.messages()),
        chat_template: state.export.chat_template.as_deref(),
        backend: first.and_then(|slot| slot.backend),
        ..ExportContext::raw(prompt.text(), &model)
    };
    export(dialog.format, &state.comparison.params.params, &context)
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
        Ok(params) => load_over(params, &state.comparison.params.params),
        Err(_) => {
            picker.message = Some(format!(
                "nothing loaded: fix `{}` and open the picker again",
                entry.name
            ));
            return Vec::new();
        }
    };
    let before = state.comparison.params.params.clone();
    let source = match entry.kind {
        EntryKind::User(path) => PresetSource::File(path),
        EntryKind::BuiltIn | EntryKind::Model => PresetSource::BuiltIn,
    };
    state.comparison.params.load_preset(Preset {
        name: entry.name,
        params,
        source,
    });
    state.overlay = None;
    let changed = state.comparison.params.params != before;
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
    let name = match &state.comparison.params.source {
        PresetSource::File(path) if store.holds(path) => {
            state.comparison.params.preset_name.as_str()
        }
        _ => "",
    };
    state.overlay = Some(Overlay::Save(SavePrompt::preset(name)));
    Vec::new()
}

fn submit_name(state: &mut State) -> Vec<Effect> {
    match &state.overlay {
        Some(Overlay::Save(SavePrompt {
            saving: Saving::Session,
            ..
        })) => return session::submit(state, false),
        Some(Overlay::Save(SavePrompt {
            saving: Saving::OpenSession,
            ..
        })) => return session::submit(state, true),
        _ => {}
    }
    if let Some(Overlay::Save(prompt)) = &mut state.overlay
        && let Saving::Results(_) = prompt.saving
    {
        if prompt.name().is_empty() {
            prompt.error = Some("type a file path, or a directory for a new file there".into());
            return Vec::new();
        }
        let path = prompt.name().to_owned();
        state.export.last_path = Some(path.clone());
        return write_results(state, PathBuf::from(path), false);
    }
    let (Some(Overlay::Save(prompt)), Some(store)) = (&mut state.overlay, &state.presets.store)
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
    let Some(Overlay::Save(prompt)) = &mut state.overlay else {
        return Vec::new();
    };
    let Some(name) = prompt.confirm.take() else {
        return Vec::new();
    };
    if !yes {
        return Vec::new();
    }
    match prompt.saving {
        Saving::Results(_) => return write_results(state, PathBuf::from(name), true),
        Saving::Session => return session::save(state, PathBuf::from(name), true),
        Saving::Preset | Saving::OpenSession => {}
    }
    let Some(store) = &state.presets.store else {
        return Vec::new();
    };
    vec![Effect::SavePreset {
        store: store.clone(),
        name,
        params: to_save(state),
        overwrite: true,
    }]
}

/// The params as a preset file keeps them: without the seed the session drew for itself.
fn to_save(state: &State) -> SamplingParams {
    let mut params = state.comparison.params.params.clone();
    if params.seed.is_some() && params.seed == state.presets.drawn_seed {
        params.seed = None;
    }
    params
}

/// `w`, in the playground or its export dialog: asks where to write the last finished run,
/// offering the path given last, else the results directory (where a new file is named after
/// the run); without a finished run, says so instead.
fn ask_results_path(state: &mut State) -> Vec<Effect> {
    if finished_run(state).is_none() {
        match &mut state.overlay {
            Some(Overlay::Export(dialog)) => {
                dialog.note = Some(Note::Failed(NO_FINISHED_RUN.to_owned()));
            }
            _ => state.status.notify(NO_FINISHED_RUN.to_owned()),
        }
        return Vec::new();
    }
    let from = match state.overlay.take() {
        Some(Overlay::Export(dialog)) => Some(dialog),
        None => None,
        // The key map offers `w` nowhere else.
        other => {
            state.overlay = other;
            return Vec::new();
        }
    };
    let offered = state.export.last_path.clone().unwrap_or_else(|| {
        let mut dir = state.export.results_dir.display().to_string();
        if !dir.ends_with(std::path::MAIN_SEPARATOR) {
            dir.push(std::path::MAIN_SEPARATOR);
        }
        dir
    });
    state.overlay = Some(Overlay::Save(SavePrompt::results(&offered, from)));
    Vec::new()
}

const NO_FINISHED_RUN: &str = "no finished run yet: write again once the samples have ended";

/// The run `w` writes: the first side with a finished one names it.
fn finished_run(state: &State) -> Option<RunId> {
    state
        .comparison
        .sides
        .iter()
        .find(|s| s.response.is_some())
        .and_then(|s| s.current)
}

/// Every side's finished run, in the chosen shape, to `path`.
fn write_results(state: &mut State, path: PathBuf, overwrite: bool) -> Vec<Effect> {
    let Some(run_id) = finished_run(state) else {
        if let Some(Overlay::Save(prompt)) = &mut state.overlay {
            prompt.error = Some(NO_FINISHED_RUN.to_owned());
        }
        return Vec::new();
    };
    let responses: Vec<SampleResponse> = state
        .comparison
        .sides
        .iter()
        .enumerate()
        .filter_map(|(side, s)| Some(as_written(state, SideId(side), s.response.as_deref()?)))
        .collect();
    vec![Effect::WriteResults {
        path,
        overwrite,
        run_id,
        responses,
        shape: state.export.shape,
        prompt: state.prompt.text().to_owned(),
    }]
}

/// A side's finished run as `w` writes it: with every token's alternatives, which its columns
/// hold whatever `logprobs` asked, so that `samplab render` shows the run as the playground did.
fn as_written(state: &State, side: SideId, response: &SampleResponse) -> SampleResponse {
    let mut response = response.clone();
    for t in &mut response.trajectories {
        if let Some(column) = state.columns.index_of(side, t.index) {
            t.keep_alternatives(&state.columns.columns[column].tokens);
        }
    }
    response
}
