//! The whole UI state, one field per domain; each domain lives in its widget's module.

use super::action::Focus;
use super::columns::Columns;
use super::export_dialog::{ExportDialog, ExportSettings};
use super::keymap::Mode;
use super::params::ParamsState;
use super::preset_picker::{PresetPicker, PresetsState};
use super::prompt::PromptState;
use super::save_prompt::SavePrompt;
use super::status::StatusState;
use super::themes::ThemeCatalog;
use crate::engine::RunId;
use crate::response::SampleResponse;
use ratatui::layout::Rect;

/// Panels drawn over everything; they take input first.
#[derive(Debug, Clone, PartialEq)]
pub enum Overlay {
    Help,
    Presets(PresetPicker),
    SavePreset(SavePrompt),
    Export(ExportDialog),
}

/// Which run is on screen and whether a new one is owed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunState {
    pub last_id: RunId,
    /// The run whose events are shown; events of any other run are dropped.
    pub current: Option<RunId>,
    /// The current run is still producing events.
    pub active: bool,
    /// Something changed (or nothing ran yet): run once the debounce ends and the model is ready.
    pub pending: bool,
    /// The stop token ids of the current run, to tell `<eos>` from a listed stop token.
    pub stop_ids: Vec<u32>,
    /// The result of the last run that finished, with its id, for the export dialog to save.
    pub last_response: Option<(RunId, Box<SampleResponse>)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct State {
    pub focus: Focus,
    pub overlay: Option<Overlay>,
    pub prompt: PromptState,
    pub params: ParamsState,
    pub columns: Columns,
    pub status: StatusState,
    pub run: RunState,
    /// The terminal size, so that sample text is wrapped at the width it will be drawn.
    pub size: Rect,
    pub presets: PresetsState,
    pub themes: ThemeCatalog,
    pub export: ExportSettings,
}

impl State {
    /// Starts on the params, where most keys go (and `q` quits rather than typing), with a run
    /// owed as soon as the model is ready.
    pub fn new(prompt: &str, params: ParamsState, size: Rect) -> Self {
        Self {
            focus: Focus::Params,
            overlay: None,
            prompt: PromptState::new(prompt),
            params,
            columns: Columns::default(),
            status: StatusState::default(),
            run: RunState {
                pending: true,
                ..RunState::default()
            },
            size,
            presets: PresetsState::default(),
            themes: ThemeCatalog::default(),
            export: ExportSettings::default(),
        }
    }

    /// The key-map layers that apply now, most specific first.
    pub fn modes(&self) -> Vec<Mode> {
        match &self.overlay {
            Some(Overlay::Help) => return vec![Mode::Help],
            Some(Overlay::Presets(_)) => return vec![Mode::Presets, Mode::Dialog],
            Some(Overlay::SavePreset(prompt)) if prompt.confirm.is_some() => {
                return vec![Mode::Confirm, Mode::Dialog];
            }
            Some(Overlay::SavePreset(_)) => return vec![Mode::PresetName, Mode::Dialog],
            Some(Overlay::Export(_)) => return vec![Mode::Export, Mode::Dialog],
            None => {}
        }
        if self.params.editor.is_some() {
            return vec![Mode::ParamEdit, Mode::Global];
        }
        match self.focus {
            Focus::Prompt => vec![Mode::Prompt, Mode::Global],
            Focus::Params => vec![Mode::Params, Mode::Navigate, Mode::Global],
            Focus::Columns => vec![Mode::Columns, Mode::Navigate, Mode::Global],
        }
    }
}
