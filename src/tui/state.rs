//! The whole UI state, one field per domain; each domain lives in its widget's module.

use crate::engine::RunId;
use crate::tui::comparison::{Comparison, Side};
use crate::tui::focus::Focus;
use crate::tui::input::keymap::Mode;
use crate::tui::model_slot::ModelSlot;
use crate::tui::overlays::conversation::ConversationDialog;
use crate::tui::overlays::export_dialog::{ExportDialog, ExportSettings};
use crate::tui::overlays::help::HelpPage;
use crate::tui::overlays::model_picker::ModelPicker;
use crate::tui::overlays::preset_picker::{PresetPicker, PresetsState};
use crate::tui::overlays::sample_editor::SampleEditor;
use crate::tui::overlays::save_prompt::{SavePrompt, Saving};
use crate::tui::overlays::sweep_dialog::SweepDialog;
use crate::tui::overlays::sweep_grid::Sweep;
use crate::tui::theme::catalog::ThemeCatalog;
use crate::tui::widgets::columns::Columns;
use crate::tui::widgets::layout::Grid;
use crate::tui::widgets::params::ParamsState;
use crate::tui::widgets::prompt::{PromptScores, PromptState, SeenPrompt};
use crate::tui::widgets::status::StatusState;
use ratatui::layout::Rect;

/// Panels drawn over everything; they take input first.
#[derive(Debug, Clone, PartialEq)]
pub enum Overlay {
    Help(HelpPage),
    Presets(PresetPicker),
    /// The save prompt, for a preset or a results file.
    Save(SavePrompt),
    Export(ExportDialog),
    Models(ModelPicker),
    Messages,
    Stats,
    Conversation(ConversationDialog),
    /// A sample's text being edited, to go on from (edit and continue).
    EditSample(SampleEditor),
    /// The grid of a sweep being typed.
    SweepInput(SweepDialog),
    /// The grid view of the last sweep ([`State::sweep`]).
    Sweep,
}

/// Run ids, shared by all sides so that an id names one run of one side.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunState {
    pub last_id: RunId,
}

#[derive(Debug, Clone, PartialEq)]
pub struct State {
    pub focus: Focus,
    pub overlay: Option<Overlay>,
    pub prompt: PromptState,
    pub columns: Columns,
    pub status: StatusState,
    pub run: RunState,
    /// The models, parameter sets and sides compared.
    pub comparison: Comparison,
    /// The terminal size, so that sample text is wrapped at the width it will be drawn.
    pub size: Rect,
    pub presets: PresetsState,
    pub themes: ThemeCatalog,
    pub export: ExportSettings,
    /// The session file path given last to `S` or `O`, offered again.
    pub session_path: Option<String>,
    /// The last sweep, kept to show again until the next one.
    pub sweep: Option<Sweep>,
}

impl State {
    /// The sample columns as the view lays them out on this screen.
    pub fn grid(&self) -> Grid {
        Grid::on_screen(self.size, self.columns.columns.len())
    }

    /// Starts in the prompt box, so that the first keys typed are text rather than commands
    /// (Esc or Tab leave it), with a run owed as soon as the model is ready.
    pub fn new(prompt: &str, params: ParamsState, size: Rect) -> Self {
        Self {
            focus: Focus::Prompt,
            overlay: None,
            prompt: PromptState::new(prompt),
            columns: Columns::default(),
            status: StatusState::default(),
            run: RunState::default(),
            comparison: Comparison::new(params),
            size,
            presets: PresetsState::default(),
            themes: ThemeCatalog::default(),
            export: ExportSettings::default(),
            session_path: None,
            sweep: None,
        }
    }

    /// What failed and is still on screen, as quitting reports it: a model that could not load,
    /// else a run that failed and was not followed by another. The playground then exits
    /// non-zero.
    pub fn failure(&self) -> Option<String> {
        let model = self
            .comparison
            .models
            .iter()
            .find_map(ModelSlot::load_error);
        let run = || {
            let error = self
                .comparison
                .sides
                .iter()
                .find_map(|s| s.error.as_ref())?;
            Some(format!("the last run failed: {error}"))
        };
        model.or_else(run)
    }

    /// Some model's last run got no tokens from the prompt (it is empty and the model adds no
    /// BOS token): nothing to sample from until a prompt is typed.
    pub fn awaits_prompt(&self) -> bool {
        self.comparison
            .sides
            .iter()
            .any(|side| !side.active && side.seen.as_ref().is_some_and(SeenPrompt::is_empty))
    }

    /// What the model of the cursor's side (the first side before any column) saw of the
    /// prompt, for the prompt box's rendered and token views.
    pub fn seen_prompt(&self) -> Option<&SeenPrompt> {
        self.prompt_side()?.seen.as_ref()
    }

    /// The side whose view of the prompt the prompt box shows.
    fn prompt_side(&self) -> Option<&Side> {
        self.comparison
            .side(self.columns.cursor_side().unwrap_or_default())
    }

    /// The scores of [`State::seen_prompt`]'s tokens: from the same side's last finished run,
    /// when it asked for prompt_logprobs and ran that very prompt.
    pub fn prompt_scores(&self) -> Option<PromptScores<'_>> {
        let side = self.prompt_side()?;
        let (seen, response) = (side.seen.as_ref()?, side.response.as_ref()?);
        let same = response.prompt_token_ids.len() == seen.tokens.len()
            && response
                .prompt_token_ids
                .iter()
                .zip(&seen.tokens)
                .all(|(&id, token)| Some(id) == token.id);
        same.then_some(PromptScores {
            logprobs: response.prompt_logprobs.as_deref()?,
            top: response.prompt_top_logprobs.as_deref(),
        })
    }

    /// The key-map layers that apply now, most specific first.
    pub fn modes(&self) -> Vec<Mode> {
        match &self.overlay {
            Some(Overlay::Help(_)) => return vec![Mode::Help],
            Some(Overlay::Messages) => return vec![Mode::Messages, Mode::Dialog],
            Some(Overlay::Stats) => return vec![Mode::Stats, Mode::Dialog],
            Some(Overlay::Presets(_)) => return vec![Mode::Presets, Mode::List, Mode::Dialog],
            Some(Overlay::Save(prompt)) if prompt.confirm.is_some() => {
                return vec![Mode::Confirm, Mode::Dialog];
            }
            Some(Overlay::Save(SavePrompt {
                saving: Saving::OpenSession,
                ..
            })) => {
                return vec![Mode::OpenPath, Mode::TextField, Mode::Dialog];
            }
            Some(Overlay::Save(_)) => {
                return vec![Mode::PresetName, Mode::TextField, Mode::Dialog];
            }
            Some(Overlay::Export(_)) => return vec![Mode::Export, Mode::Dialog],
            Some(Overlay::Models(_)) => {
                return vec![Mode::Models, Mode::List, Mode::TextField, Mode::Dialog];
            }
            Some(Overlay::Conversation(dialog)) if dialog.editor.is_some() => {
                return vec![Mode::ParamEdit, Mode::TextField, Mode::Dialog];
            }
            Some(Overlay::Conversation(_)) => {
                return vec![Mode::Conversation, Mode::List, Mode::Dialog];
            }
            Some(Overlay::EditSample(_)) => {
                return vec![Mode::ParamEdit, Mode::TextField, Mode::Dialog];
            }
            Some(Overlay::SweepInput(_)) => {
                return vec![Mode::SweepInput, Mode::TextField, Mode::Dialog];
            }
            Some(Overlay::Sweep) => return vec![Mode::Sweep, Mode::Dialog],
            None => {}
        }
        if self.comparison.params.editor.is_some() {
            return vec![Mode::ParamEdit, Mode::TextField, Mode::Global];
        }
        match self.focus {
            Focus::Prompt => vec![Mode::Prompt, Mode::TextField, Mode::Global],
            Focus::Params => vec![Mode::Params, Mode::List, Mode::Navigate, Mode::Global],
            Focus::Columns => vec![Mode::Columns, Mode::Navigate, Mode::Global],
        }
    }
}
