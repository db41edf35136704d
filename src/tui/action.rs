//! The vocabulary of the loop: what the user (or the engine) wants, and what `update` asks the
//! loop to do in return.

use crate::engine::{BackendKind, EditRequest, Event, Request, RunId, ScoreRequest, TraceRequest};
use crate::export::ExportFormat;
use crate::model::source::discover::Candidate;
use crate::params::SamplingParams;
use crate::preset_store::{PresetStore, UserPreset};
use crate::presets::Preset;
use crate::response::{ResponseShape, SampleResponse};
use crate::tui::comparison::ModelId;
use crate::tui::session::Session;
use std::path::PathBuf;

/// A move of a list's selection (parameters, presets, models, turns): ↑/↓ step, PgUp/PgDn
/// page, Home/End go to the ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListMove {
    Step(i32),
    Page(i32),
    First,
    Last,
}

impl ListMove {
    /// Where selection `at` goes in a list of `len` rows, `page` of them shown. Steps wrap
    /// round the ends when `wrap`; pages and Home/End stop there.
    pub fn apply(self, at: usize, len: usize, page: usize, wrap: bool) -> usize {
        let Some(last) = len.checked_sub(1) else {
            return 0;
        };
        let by = |delta: i64| (at as i64).saturating_add(delta).clamp(0, last as i64) as usize;
        match self {
            ListMove::First => 0,
            ListMove::Last => last,
            ListMove::Step(delta) if wrap => {
                (at as i64 + i64::from(delta)).rem_euclid(len as i64) as usize
            }
            ListMove::Step(delta) => by(i64::from(delta)),
            ListMove::Page(pages) => by(i64::from(pages) * page.max(1) as i64),
        }
    }
}

/// User intent or outside news; the only input `update` knows.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Quit,
    FocusNext,
    FocusPrev,
    OpenHelp,
    /// Show the help's next (or previous) page, round the ends.
    TurnHelpPage(i32),
    /// Every error and notice of the session, newest first.
    OpenMessages,
    /// The statistics of each side's newest run.
    OpenStats,
    CloseOverlay,
    /// Re-run now, skipping the debounce.
    Rerun,
    /// Move the selection of the list that has the keys: the open picker's or dialog's, else
    /// the parameters'.
    Select(ListMove),
    /// Move the selected parameter by `steps`; `coarse` takes the field's big step.
    NudgeParam {
        steps: i32,
        coarse: bool,
    },
    ResetParam,
    /// Switch the selected parameter off (null for optional fields, the neutral value otherwise).
    TurnOffParam,
    RollSeed,
    /// Switch the prompt between raw text and the last user message of a conversation in each
    /// model's chat template: raw → chat → (when the message holds special-token text) chat with
    /// that text kept as text → raw; for every model, or with the samples focused the model of
    /// the cursor's column (see `chat_mode`).
    ToggleChat,
    /// The cursor's sample becomes the assistant's turn of the conversation (chat mode).
    AcceptReply,
    /// The previous or next sample of the cursor's side, as the candidate reply.
    SwipeReply(i32),
    /// The last turn again on new seeds (after an accepted reply: that reply taken back).
    Regenerate,
    /// The prompt box shows the text as typed, as the chat template rendered it, or its tokens.
    CyclePromptView,
    /// Enter on a parameter: toggle a bool, otherwise open the inline editor.
    EditParam,
    CommitEdit,
    CancelEdit,
    InsertChar(char),
    InsertNewline,
    Paste(String),
    DeleteBack,
    DeleteForward,
    /// Empty the text being edited (the prompt, a value, a name).
    ClearText,
    /// Take back the prompt's last edit.
    Undo,
    CursorLeft,
    CursorRight,
    CursorUp,
    CursorDown,
    CursorHome,
    CursorEnd,
    Resize {
        width: u16,
        height: u16,
    },
    /// Move the token cursor by this many tokens within its column.
    StepToken(i32),
    /// Move the token cursor this many rows, to the token nearest the same cell.
    StepTokenRow(i32),
    FirstToken,
    /// The newest token, followed as more arrive.
    LastToken,
    /// The next (or previous) column; past either end the focus moves on to the next pane.
    StepColumn(i32),
    /// Scroll the cursor's column by whole views, the cursor moving along.
    PageColumn(i32),
    /// Draw spaces, tabs and newlines in the columns as `·`, `→` and `↵`.
    ToggleWhitespace,
    /// Colour tokens by the probability the logprobs report (`logprobs_mode`) instead of the
    /// one they were drawn with.
    ToggleReportedHeat,
    /// Colour tokens by the other compared model's probability of them, or back to kept p.
    ToggleOtherHeat,
    /// The left button pressed (or dragged) over a cell.
    Click {
        x: u16,
        y: u16,
    },
    /// The wheel over a cell; positive `lines` scroll down.
    Wheel {
        x: u16,
        y: u16,
        lines: i32,
    },
    /// The debounce after the last change has elapsed.
    DebounceElapsed,
    /// News from the engine of model `.0`.
    Engine(ModelId, Event),
    /// Edit the other parameter set, when two are compared.
    SwitchParamSet,
    /// Switch to the next theme.
    CycleTheme,
    /// The preset picker, the save prompt and the export dialog.
    Dialog(DialogAction),
    /// Branching from a token and step mode, with the samples focused.
    Branch(BranchAction),
    /// What the loop found when it performed an effect on files or the terminal.
    Outcome(Outcome),
    /// The sweep dialog and the grid view of its cells (see `update::sweep`).
    Sweep(SweepAction),
}

/// Keys of a sweep: typing its grid, and moving through its cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SweepAction {
    /// The grid view of the last sweep, or the dialog when there is none yet.
    Open,
    /// The dialog, offering the last sweep's grid to change.
    New,
    /// Run every cell of the typed grid.
    Start,
    /// Move the selected cell `across` columns and `down` rows of the grid view.
    Move {
        across: i32,
        down: i32,
    },
    First,
    Last,
    /// The selected cell becomes the current run: its parameters, re-run on its seeds.
    OpenCell,
}

/// Keys of the branch tree (see `branches`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BranchAction {
    /// Move the inspector's highlight over the cursor token's alternatives.
    Pick(i32),
    /// Continue from the highlighted alternative in a new branch (in step mode, on the
    /// proposed token: take it instead).
    Take,
    /// Step the cursor's column one token at a time from the cursor on, or stop stepping.
    ToggleStep,
    /// In step mode: take the proposed token and propose the next.
    Step,
    /// Delete the cursor's branch and the branches under it.
    Delete,
    /// Bring back what the last `Delete` on the cursor's side took, while nothing else changed
    /// its branches.
    Undelete,
    /// To the branch's parent, where it parts from it.
    Parent,
    /// To the first branch made from the cursor's column.
    Child,
    /// To the previous or next branch of the same parent.
    Sibling(i32),
    /// Edit the cursor's sample, to go on from the edit in a new branch.
    Edit,
}

/// Keys of the dialogs; each one acts only while its dialog is open.
#[derive(Debug, Clone, PartialEq)]
pub enum DialogAction {
    OpenPresets,
    /// Load the preset under the picker's selection.
    LoadPreset,
    /// Ask for a name to save the params under.
    OpenSave,
    /// Save under the typed name or path; an existing preset or file is overwritten only
    /// after a yes.
    SubmitName,
    /// The answer to "overwrite?".
    ConfirmOverwrite(bool),
    OpenExport,
    /// The next (or previous) exporter tab.
    ExportCycle(i32),
    ExportSelect(ExportFormat),
    ExportScroll(i32),
    /// Copy the shown snippet to the clipboard.
    CopyExport,
    /// Ask where to write the last finished run as SampleResponse JSON.
    WriteResults,
    /// The next JSON shape `WriteResults` writes (samplab's, twinkle's).
    CycleResultsShape,
    /// Ask where to save the whole playground as a session file.
    SaveSession,
    /// Ask which session file to open in place of the playground's state.
    OpenSession,
    /// The model picker: the models compared, and others to add.
    OpenModels,
    /// Add the typed or selected model.
    AddModel,
    /// Remove the selected loaded model.
    RemoveModel,
    /// The conversation: a system message and earlier turns before the prompt.
    OpenConversation,
    /// Edit the selected turn's text.
    EditTurn,
    /// A new turn after the selected one.
    AddTurn,
    DeleteTurn,
    /// The selected turn's next role (system, user, assistant).
    CycleRole,
}

/// The result of an effect that touched the outside world, with errors as messages to show.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)] // one per dialog: boxing the params saves nothing
pub enum Outcome {
    PresetsListed(Result<Vec<UserPreset>, String>),
    PresetSaved(Result<Preset, String>),
    /// Saving without overwriting found this preset on disk.
    PresetExists(String),
    Copied(Result<(), String>),
    ResultsWritten(Result<PathBuf, String>),
    /// Writing without overwriting found this file.
    ResultsExist(PathBuf),
    /// Models on disk for the model picker.
    ModelsFound(Vec<Candidate>),
    SessionSaved(Result<PathBuf, String>),
    /// Saving without overwriting found this file.
    SessionExists(PathBuf),
    /// A session file read and checked, or why not.
    SessionOpened(Result<Box<Session>, String>),
}

/// Work for the loop; `update` itself never touches the engine, the clock or the terminal.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Start a run on model `.0`.
    Run(ModelId, Request),
    Cancel(ModelId, RunId),
    /// Ask model `.0` how likely it finds another model's samples.
    Score(ModelId, ScoreRequest),
    /// Ask model `.0` what each stage of the chain did at one step (the inspector).
    Trace(ModelId, TraceRequest),
    /// Ask model `.0` for an edited sample's tokens; answered with `Event::Edited`.
    Edit(ModelId, EditRequest),
    /// (Re)start the debounce timer; `DebounceElapsed` comes back when it fires.
    ScheduleRun,
    Quit,
    /// Read the user presets; answered with `Outcome::PresetsListed`.
    ListPresets(PresetStore),
    /// Answered with `Outcome::PresetSaved` or `Outcome::PresetExists`.
    SavePreset {
        store: PresetStore,
        name: String,
        params: SamplingParams,
        overwrite: bool,
    },
    /// Look for models on disk; answered with `Outcome::ModelsFound`.
    DiscoverModels,
    /// Start an engine for model `id` loading `spec` (on `backend`, else as `--backend` says);
    /// its events come tagged with `id`.
    AddEngine {
        id: ModelId,
        spec: String,
        backend: Option<BackendKind>,
    },
    /// Close model `id`'s engine.
    RemoveEngine(ModelId),
    /// Stop model `id`'s download; its load then fails saying so.
    CancelLoad(ModelId),
    /// Put text on the clipboard (OSC 52); answered with `Outcome::Copied`.
    Copy(String),
    /// Write `responses` (one per side, run on `prompt`) as JSON in `shape` to `path`, or to
    /// a new file in it when it is a directory; answered with `Outcome::ResultsWritten`, or
    /// `Outcome::ResultsExist` when the file exists and `overwrite` is false.
    WriteResults {
        path: PathBuf,
        overwrite: bool,
        run_id: RunId,
        responses: Vec<SampleResponse>,
        shape: ResponseShape,
        prompt: String,
    },
    /// Write a session file's `text` to `path`; answered with `Outcome::SessionSaved`, or
    /// `Outcome::SessionExists` when the file exists and `overwrite` is false.
    SaveSession {
        path: PathBuf,
        text: String,
        overwrite: bool,
    },
    /// Read and check the session file at `path`; answered with `Outcome::SessionOpened`.
    OpenSession(PathBuf),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_moves_step_page_and_jump_within_the_list() {
        use ListMove::*;
        assert_eq!(Step(1).apply(4, 5, 3, false), 4, "stops at the end");
        assert_eq!(Step(1).apply(4, 5, 3, true), 0, "or wraps round");
        assert_eq!(Step(-1).apply(0, 5, 3, true), 4);
        assert_eq!(Page(1).apply(0, 10, 4, true), 4, "pages never wrap");
        assert_eq!(Page(1).apply(8, 10, 4, true), 9);
        assert_eq!(Page(-1).apply(2, 10, 4, false), 0);
        assert_eq!(
            Page(1).apply(0, 10, 0, false),
            1,
            "a page is a row at least"
        );
        assert_eq!(
            (First.apply(7, 10, 4, true), Last.apply(0, 10, 4, true)),
            (0, 9)
        );
        assert_eq!(Last.apply(0, 0, 4, true), 0, "an empty list");
    }
}
