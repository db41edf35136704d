//! The vocabulary of the loop: what the user (or the engine) wants, and what `update` asks the
//! loop to do in return.

use crate::engine::{Event, Request, RunId};

/// Which pane takes keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Focus {
    Prompt,
    Params,
    Columns,
}

impl Focus {
    const ORDER: [Focus; 3] = [Focus::Prompt, Focus::Params, Focus::Columns];

    pub fn cycled(self, forward: bool) -> Focus {
        let i = Self::ORDER.iter().position(|&f| f == self).unwrap_or(0);
        let n = Self::ORDER.len();
        Self::ORDER[if forward {
            (i + 1) % n
        } else {
            (i + n - 1) % n
        }]
    }
}

/// User intent or outside news; the only input `update` knows.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Quit,
    FocusNext,
    FocusPrev,
    OpenHelp,
    CloseOverlay,
    /// Re-run now, skipping the debounce.
    Rerun,
    SelectParam(i32),
    /// Move the selected parameter by `steps`; `coarse` takes the field's big step.
    NudgeParam {
        steps: i32,
        coarse: bool,
    },
    ResetParam,
    /// Switch the selected parameter off (null for optional fields, the neutral value otherwise).
    TurnOffParam,
    RollSeed,
    /// Switch the prompt between raw text and one user message in the model's chat template.
    ToggleChat,
    /// Enter on a parameter: toggle a bool, otherwise open the inline editor.
    EditParam,
    CommitEdit,
    CancelEdit,
    InsertChar(char),
    InsertNewline,
    Paste(String),
    DeleteBack,
    DeleteForward,
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
    /// The debounce after the last change has elapsed.
    DebounceElapsed,
    Engine(Event),
}

/// Work for the loop; `update` itself never touches the engine, the clock or the terminal.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    Run(Request),
    Cancel(RunId),
    /// (Re)start the debounce timer; `DebounceElapsed` comes back when it fires.
    ScheduleRun,
    Quit,
}
