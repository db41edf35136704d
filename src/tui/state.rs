//! The whole UI state, one field per domain; each domain lives in its widget's module.

use crate::engine::{Branch, Prompt, RunId};
use crate::params::SamplingParams;
use crate::response::SampleResponse;
use crate::tui::action::Focus;
use crate::tui::branch_tree::Tree;
use crate::tui::input::keymap::Mode;
use crate::tui::overlays::conversation::ConversationDialog;
use crate::tui::overlays::export_dialog::{ExportDialog, ExportSettings};
use crate::tui::overlays::model_picker::ModelPicker;
use crate::tui::overlays::preset_picker::{PresetPicker, PresetsState};
use crate::tui::overlays::save_prompt::SavePrompt;
use crate::tui::theme::catalog::ThemeCatalog;
use crate::tui::widgets::columns::{Columns, Mark, SideTitle};
use crate::tui::widgets::layout::Grid;
use crate::tui::widgets::params::ParamsState;
use crate::tui::widgets::prompt::{PromptScores, PromptState, SeenPrompt};
use crate::tui::widgets::status::{ModelSlot, ModelStatus, StatusState};
use ratatui::layout::Rect;

/// Panels drawn over everything; they take input first.
#[derive(Debug, Clone, PartialEq)]
pub enum Overlay {
    Help,
    Presets(PresetPicker),
    /// The save prompt, for a preset or a results file.
    Save(SavePrompt),
    Export(ExportDialog),
    Models(ModelPicker),
    Messages,
    Conversation(ConversationDialog),
}

/// Run ids, shared by all sides so that an id names one run of one side.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunState {
    pub last_id: RunId,
}

/// One model with one parameter set: a group of columns with its own run.
#[derive(Debug, Clone, PartialEq)]
pub struct Side {
    /// The model's id (see `ModelSlot::id`).
    pub model: usize,
    /// 0 for the first parameter set, 1 for the second (A/B).
    pub set: usize,
    /// The run whose events are shown; events of any other run are dropped.
    pub current: Option<RunId>,
    /// The current run is still producing events.
    pub active: bool,
    /// Something changed (or nothing ran yet): run once the debounce ends and the model is ready.
    pub pending: bool,
    /// The current run's result once it finished, for models that load later to score.
    pub response: Option<Box<SampleResponse>>,
    /// The parameters of the current run, which the inspector's traces replay.
    pub run_params: Option<SamplingParams>,
    /// What the current run was asked, which the other models score its samples after.
    pub run_prompt: Option<Prompt>,
    /// The run whose columns are on screen (the last one that started).
    pub shown: Option<RunId>,
    /// Why the current run failed.
    pub error: Option<String>,
    /// What the model saw of the prompt in the current run.
    pub seen: Option<SeenPrompt>,
    /// The branches the user made from this side's samples.
    pub tree: Tree,
    /// The branches the current run ran, which the inspector's traces replay.
    pub run_branches: Vec<Branch>,
    /// Where the cursor goes once the next run starts: a sample of it, and a token (`None`:
    /// the newest), after a branch was made or a step taken.
    pub follow: Option<(u32, Option<usize>)>,
}

impl Side {
    pub fn new(model: usize, set: usize) -> Self {
        Self {
            model,
            set,
            current: None,
            active: false,
            pending: true,
            response: None,
            run_params: None,
            run_prompt: None,
            shown: None,
            error: None,
            seen: None,
            tree: Tree::default(),
            run_branches: Vec::new(),
            follow: None,
        }
    }

    /// Whether the columns on screen are from the current run and what became of it.
    pub fn mark(&self) -> Mark {
        if self.error.is_some() {
            Mark::Failed
        } else if self.shown.is_some() && (self.pending || self.current != self.shown) {
            Mark::Stale
        } else {
            Mark::Current
        }
    }
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
    /// Every model × parameter set, in column order; one side when nothing is compared.
    pub sides: Vec<Side>,
    /// The parameter set not being edited, when two are compared (A/B); `params` holds the
    /// one being edited, which is set `editing_set`.
    pub other_set: Option<ParamsState>,
    pub editing_set: usize,
    /// The id the next model added at run time gets.
    pub next_model_id: usize,
    /// The terminal size, so that sample text is wrapped at the width it will be drawn.
    pub size: Rect,
    pub presets: PresetsState,
    pub themes: ThemeCatalog,
    pub export: ExportSettings,
}

impl State {
    /// The sample columns as the view lays them out on this screen.
    pub fn grid(&self) -> Grid {
        Grid::on_screen(self.size, self.columns.columns.len())
    }

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
            run: RunState::default(),
            sides: vec![Side::new(0, 0)],
            other_set: None,
            editing_set: 0,
            next_model_id: 1,
            size,
            presets: PresetsState::default(),
            themes: ThemeCatalog::default(),
            export: ExportSettings::default(),
        }
    }

    /// Compares the models `specs` (ids 0, 1, …), each with the current params and, when
    /// given, a second parameter set: one side per (model, set), models first.
    pub fn compare(&mut self, specs: &[String], second_set: Option<ParamsState>) {
        self.other_set = second_set;
        self.editing_set = 0;
        self.status.models.clear();
        self.sides.clear();
        self.next_model_id = 0;
        for spec in specs {
            self.add_model(spec);
        }
    }

    /// A new model slot with its sides (one per parameter set), owed a run; returns its id.
    /// It joins in chat mode when a model is in it (its load says if it has no template).
    pub fn add_model(&mut self, spec: &str) -> usize {
        let id = self.next_model_id;
        self.next_model_id += 1;
        let chat = self.status.models.iter().any(|m| m.chat);
        self.status.models.push(ModelSlot {
            id,
            spec: spec.to_owned(),
            chat,
            ..ModelSlot::default()
        });
        let sets = if self.other_set.is_some() { 2 } else { 1 };
        self.sides.extend((0..sets).map(|set| Side::new(id, set)));
        id
    }

    /// The parameters of set `set`.
    pub fn set_params(&self, set: usize) -> &ParamsState {
        match &self.other_set {
            Some(other) if set != self.editing_set => other,
            _ => &self.params,
        }
    }

    /// How each side's columns are titled, derived from the models and sets as they are now;
    /// empty when only one side is shown.
    pub fn side_titles(&self) -> Vec<SideTitle> {
        if self.sides.len() < 2 {
            return Vec::new();
        }
        self.sides
            .iter()
            .map(|side| {
                let slot = self.status.slot(side.model);
                let mut names = Vec::new();
                if self.status.models.len() > 1 {
                    names.push(slot.and_then(ModelSlot::name).unwrap_or("model").to_owned());
                }
                if self.other_set.is_some() {
                    let letter = if side.set == 0 { 'A' } else { 'B' };
                    let preset = &self.set_params(side.set).preset_name;
                    names.push(format!("{letter}:{preset}"));
                }
                let label = names.join(" ");
                let mut header = label.clone();
                if let Some(ModelStatus::Ready { device, .. }) = slot.map(|s| &s.status) {
                    header.push_str(&format!(" · {device}"));
                }
                if let Some(rate) = slot.and_then(|s| s.tok_per_s) {
                    header.push_str(&format!(" · {rate:.0} tok/s"));
                }
                SideTitle { label, header }
            })
            .collect()
    }

    /// What failed and is still on screen, as quitting reports it: a model that could not load,
    /// else a run that failed and was not followed by another. The playground then exits
    /// non-zero.
    pub fn failure(&self) -> Option<String> {
        let model = self.status.models.iter().find_map(|m| match &m.status {
            ModelStatus::Failed(why) => Some(format!("cannot load model {}: {why}", m.spec)),
            _ => None,
        });
        let run = || {
            let error = self.sides.iter().find_map(|s| s.error.as_ref())?;
            Some(format!("the last run failed: {error}"))
        };
        model.or_else(run)
    }

    /// What the model of the cursor's side (the first side before any column) saw of the
    /// prompt, for the prompt box's rendered and token views.
    pub fn seen_prompt(&self) -> Option<&SeenPrompt> {
        self.prompt_side()?.seen.as_ref()
    }

    /// The side whose view of the prompt the prompt box shows.
    fn prompt_side(&self) -> Option<&Side> {
        self.sides.get(self.columns.cursor_side().unwrap_or(0))
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
                .all(|(&id, token)| id == token.id);
        same.then_some(PromptScores {
            logprobs: response.prompt_logprobs.as_deref()?,
            top: response.prompt_top_logprobs.as_deref(),
        })
    }

    /// Each side's mark, in side order.
    pub fn side_marks(&self) -> Vec<Mark> {
        self.sides.iter().map(Side::mark).collect()
    }

    /// The key-map layers that apply now, most specific first.
    pub fn modes(&self) -> Vec<Mode> {
        match &self.overlay {
            Some(Overlay::Help) => return vec![Mode::Help],
            Some(Overlay::Messages) => return vec![Mode::Messages, Mode::Dialog],
            Some(Overlay::Presets(_)) => return vec![Mode::Presets, Mode::Dialog],
            Some(Overlay::Save(prompt)) if prompt.confirm.is_some() => {
                return vec![Mode::Confirm, Mode::Dialog];
            }
            Some(Overlay::Save(_)) => {
                return vec![Mode::PresetName, Mode::TextField, Mode::Dialog];
            }
            Some(Overlay::Export(_)) => return vec![Mode::Export, Mode::Dialog],
            Some(Overlay::Models(_)) => {
                return vec![Mode::Models, Mode::TextField, Mode::Dialog];
            }
            Some(Overlay::Conversation(dialog)) if dialog.editor.is_some() => {
                return vec![Mode::ParamEdit, Mode::TextField, Mode::Dialog];
            }
            Some(Overlay::Conversation(_)) => return vec![Mode::Conversation, Mode::Dialog],
            None => {}
        }
        if self.params.editor.is_some() {
            return vec![Mode::ParamEdit, Mode::TextField, Mode::Global];
        }
        match self.focus {
            Focus::Prompt => vec![Mode::Prompt, Mode::Global],
            Focus::Params => vec![Mode::Params, Mode::Navigate, Mode::Global],
            Focus::Columns => vec![Mode::Columns, Mode::Navigate, Mode::Global],
        }
    }
}
