//! Keys are data: one table maps (mode, key) to an `Action`, and the help overlay and the
//! status-bar hints are generated from the same table, so they cannot drift apart.

use crate::export::ExportFormat;
use crate::tui::action::{Action, BranchAction, DialogAction, ListMove, SweepAction};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// A layer of bindings; several are active at once, most specific first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Keys that work everywhere, text editing included (no plain characters here).
    Global,
    /// Keys that work outside text editing (plain characters are commands there).
    Navigate,
    Prompt,
    Params,
    ParamEdit,
    Columns,
    Help,
    /// Keys every dialog shares.
    Dialog,
    Presets,
    PresetName,
    /// Typing the path of a session file to open.
    OpenPath,
    Confirm,
    Export,
    Models,
    Messages,
    Stats,
    Conversation,
    /// Typing a sweep's grid.
    SweepInput,
    /// The grid view of a sweep's cells.
    Sweep,
    /// Moving, deleting and clearing in text: the prompt box and the one-line fields (a
    /// value, a name, a model).
    TextField,
    /// Moving the selection of a list: the params, the pickers, the conversation.
    List,
}

impl Mode {
    /// Every mode, in the order help lists them.
    pub const ALL: [Mode; 21] = [
        Mode::Global,
        Mode::Navigate,
        Mode::Prompt,
        Mode::TextField,
        Mode::Params,
        Mode::List,
        Mode::ParamEdit,
        Mode::Columns,
        Mode::Help,
        Mode::Dialog,
        Mode::Presets,
        Mode::PresetName,
        Mode::OpenPath,
        Mode::Confirm,
        Mode::Export,
        Mode::Models,
        Mode::Messages,
        Mode::Stats,
        Mode::Conversation,
        Mode::SweepInput,
        Mode::Sweep,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Mode::Global => "everywhere",
            Mode::Navigate => "outside text",
            Mode::Prompt => "prompt",
            Mode::Params => "params",
            Mode::ParamEdit => "typing a value, a turn or a sample",
            Mode::Columns => "samples",
            Mode::Help => "help",
            Mode::Dialog => "any dialog",
            Mode::Presets => "preset picker",
            Mode::PresetName => "naming a preset or file",
            Mode::OpenPath => "opening a session",
            Mode::Confirm => "preset or file exists",
            Mode::Export => "export",
            Mode::Models => "model picker",
            Mode::Messages => "messages",
            Mode::Stats => "run statistics",
            Mode::Conversation => "conversation",
            Mode::SweepInput => "typing a sweep grid",
            Mode::Sweep => "sweep grid",
            Mode::TextField => "editing text",
            Mode::List => "in a list",
        }
    }

    /// Modes where unbound printable characters are typed, not ignored.
    pub fn takes_text(self) -> bool {
        matches!(
            self,
            Mode::Prompt
                | Mode::ParamEdit
                | Mode::PresetName
                | Mode::OpenPath
                | Mode::Models
                | Mode::TextField
                | Mode::SweepInput
        )
    }
}

/// A key with its modifiers, normalised so that `?` matches with or without Shift.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key {
    pub code: KeyCode,
    pub modifiers: KeyModifiers,
}

impl Key {
    pub const fn new(code: KeyCode, modifiers: KeyModifiers) -> Self {
        Self { code, modifiers }
    }

    pub const fn plain(code: KeyCode) -> Self {
        Self::new(code, KeyModifiers::NONE)
    }

    pub fn from_event(event: KeyEvent) -> Self {
        let mut modifiers =
            event.modifiers & (KeyModifiers::SHIFT | KeyModifiers::CONTROL | KeyModifiers::ALT);
        if matches!(event.code, KeyCode::Char(_) | KeyCode::BackTab) {
            modifiers.remove(KeyModifiers::SHIFT);
        }
        Self::new(event.code, modifiers)
    }

    /// How help shows the key: `Shift+←`, `Ctrl+R`, `F5`, `q`.
    pub fn label(&self) -> String {
        let code = match self.code {
            KeyCode::Left => "←".to_owned(),
            KeyCode::Right => "→".to_owned(),
            KeyCode::Up => "↑".to_owned(),
            KeyCode::Down => "↓".to_owned(),
            KeyCode::Enter => "Enter".to_owned(),
            KeyCode::Esc => "Esc".to_owned(),
            KeyCode::Tab => "Tab".to_owned(),
            KeyCode::BackTab => "Shift+Tab".to_owned(),
            KeyCode::Backspace => "Backspace".to_owned(),
            KeyCode::Delete => "Del".to_owned(),
            KeyCode::Home => "Home".to_owned(),
            KeyCode::End => "End".to_owned(),
            KeyCode::PageUp => "PgUp".to_owned(),
            KeyCode::PageDown => "PgDn".to_owned(),
            KeyCode::F(n) => format!("F{n}"),
            KeyCode::Char(' ') => "Space".to_owned(),
            KeyCode::Char(c) if self.modifiers.contains(KeyModifiers::CONTROL) => {
                c.to_ascii_uppercase().to_string()
            }
            KeyCode::Char(c) => c.to_string(),
            other => format!("{other:?}"),
        };
        let mut label = String::new();
        if self.modifiers.contains(KeyModifiers::CONTROL) {
            label.push_str("Ctrl+");
        }
        if self.modifiers.contains(KeyModifiers::ALT) {
            label.push_str("Alt+");
        }
        if self.modifiers.contains(KeyModifiers::SHIFT) {
            label.push_str("Shift+");
        }
        label + &code
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Binding {
    pub mode: Mode,
    pub key: Key,
    pub action: Action,
    pub help: &'static str,
}

#[derive(Debug, Clone, PartialEq)]
pub struct KeyMap {
    pub bindings: Vec<Binding>,
}

impl Default for KeyMap {
    fn default() -> Self {
        use Action as A;
        use KeyCode as K;
        let ctrl = |c| Key::new(K::Char(c), KeyModifiers::CONTROL);
        let shift = |code| Key::new(code, KeyModifiers::SHIFT);
        let p = Key::plain;
        let c = |ch| Key::plain(K::Char(ch));
        let nudge = |steps, coarse| A::NudgeParam { steps, coarse };
        let dialog = A::Dialog;
        let branch = A::Branch;
        let sweep = A::Sweep;
        let sweep_move = |across, down| A::Sweep(SweepAction::Move { across, down });
        let tab = |format| A::Dialog(DialogAction::ExportSelect(format));
        let table = [
            (Mode::Global, ctrl('c'), A::Quit, "quit"),
            (Mode::Global, p(K::Tab), A::FocusNext, "next pane"),
            (Mode::Global, p(K::BackTab), A::FocusPrev, "previous pane"),
            (Mode::Global, p(K::F(5)), A::Rerun, "re-run now"),
            (Mode::Global, ctrl('r'), A::Rerun, "re-run now"),
            (Mode::Global, p(K::F(1)), A::OpenHelp, "help"),
            (Mode::Global, ctrl('t'), A::ToggleChat, "chat"),
            (Mode::Navigate, c('q'), A::Quit, "quit"),
            (Mode::Navigate, c('?'), A::OpenHelp, "help"),
            (Mode::Navigate, c('m'), A::ToggleChat, "chat"),
            (Mode::Navigate, c('o'), A::CyclePromptView, "prompt view"),
            (
                Mode::Navigate,
                c('c'),
                dialog(DialogAction::OpenConversation),
                "conversation",
            ),
            (
                Mode::Conversation,
                p(K::Enter),
                dialog(DialogAction::EditTurn),
                "edit",
            ),
            (
                Mode::Conversation,
                c('a'),
                dialog(DialogAction::AddTurn),
                "add",
            ),
            (
                Mode::Conversation,
                c('d'),
                dialog(DialogAction::DeleteTurn),
                "delete",
            ),
            (
                Mode::Conversation,
                p(K::Delete),
                dialog(DialogAction::DeleteTurn),
                "delete",
            ),
            (
                Mode::Conversation,
                c('r'),
                dialog(DialogAction::CycleRole),
                "role",
            ),
            (Mode::Navigate, c('R'), A::Regenerate, "regenerate"),
            (Mode::Navigate, c('b'), A::SwitchParamSet, "A/B"),
            (
                Mode::Navigate,
                c('p'),
                dialog(DialogAction::OpenPresets),
                "presets",
            ),
            (
                Mode::Navigate,
                c('s'),
                dialog(DialogAction::OpenSave),
                "save",
            ),
            (
                Mode::Navigate,
                c('e'),
                dialog(DialogAction::OpenExport),
                "export",
            ),
            (
                Mode::Navigate,
                c('w'),
                dialog(DialogAction::WriteResults),
                "save results",
            ),
            (
                Mode::Navigate,
                c('S'),
                dialog(DialogAction::SaveSession),
                "save session",
            ),
            (
                Mode::Navigate,
                c('O'),
                dialog(DialogAction::OpenSession),
                "open session",
            ),
            (Mode::Navigate, c('t'), A::CycleTheme, "next theme"),
            (Mode::Navigate, c('l'), A::OpenMessages, "messages"),
            (Mode::Messages, c('l'), A::CloseOverlay, "close"),
            (Mode::Navigate, c('i'), A::OpenStats, "run stats"),
            (Mode::Stats, c('i'), A::CloseOverlay, "close"),
            (
                Mode::Navigate,
                c('v'),
                A::ToggleWhitespace,
                "show whitespace",
            ),
            (
                Mode::Navigate,
                c('h'),
                A::ToggleReportedHeat,
                "colour by logprobs' p / kept p",
            ),
            (
                Mode::Navigate,
                c('k'),
                A::ToggleOtherHeat,
                "colour by the other's p",
            ),
            (Mode::Params, p(K::Left), nudge(-1, false), "nudge"),
            (Mode::Params, p(K::Right), nudge(1, false), "nudge"),
            (Mode::Params, shift(K::Left), nudge(-1, true), "coarse"),
            (Mode::Params, shift(K::Right), nudge(1, true), "coarse"),
            (Mode::Params, p(K::Enter), A::EditParam, "edit / toggle"),
            (Mode::Params, p(K::Backspace), A::ResetParam, "reset"),
            (Mode::Params, p(K::Delete), A::TurnOffParam, "off"),
            (Mode::Params, c('x'), A::TurnOffParam, "off"),
            (Mode::Params, c('r'), A::RollSeed, "roll seed"),
            (
                Mode::List,
                p(K::Up),
                A::Select(ListMove::Step(-1)),
                "select",
            ),
            (
                Mode::List,
                p(K::Down),
                A::Select(ListMove::Step(1)),
                "select",
            ),
            (
                Mode::List,
                p(K::PageUp),
                A::Select(ListMove::Page(-1)),
                "jump",
            ),
            (
                Mode::List,
                p(K::PageDown),
                A::Select(ListMove::Page(1)),
                "jump",
            ),
            (Mode::List, p(K::Home), A::Select(ListMove::First), "jump"),
            (Mode::List, p(K::End), A::Select(ListMove::Last), "jump"),
            (Mode::ParamEdit, p(K::Enter), A::CommitEdit, "apply"),
            (Mode::ParamEdit, p(K::Esc), A::CancelEdit, "cancel"),
            (Mode::ParamEdit, ctrl('j'), A::InsertNewline, "new line"),
            (Mode::TextField, p(K::Backspace), A::DeleteBack, "delete"),
            (Mode::TextField, p(K::Delete), A::DeleteForward, "delete"),
            (Mode::TextField, p(K::Left), A::CursorLeft, "move"),
            (Mode::TextField, p(K::Right), A::CursorRight, "move"),
            (Mode::TextField, p(K::Up), A::CursorUp, "move"),
            (Mode::TextField, p(K::Down), A::CursorDown, "move"),
            (Mode::TextField, p(K::Home), A::CursorHome, "move"),
            (Mode::TextField, p(K::End), A::CursorEnd, "move"),
            (Mode::Prompt, p(K::Enter), A::InsertNewline, "new line"),
            (Mode::Prompt, ctrl('z'), A::Undo, "undo"),
            (Mode::TextField, ctrl('u'), A::ClearText, "clear"),
            (Mode::Prompt, p(K::Esc), A::FocusNext, "leave"),
            (Mode::Columns, p(K::Left), A::StepToken(-1), "move"),
            (Mode::Columns, p(K::Right), A::StepToken(1), "move"),
            (Mode::Columns, p(K::Up), A::StepTokenRow(-1), "move"),
            (Mode::Columns, p(K::Down), A::StepTokenRow(1), "move"),
            (Mode::Columns, p(K::Home), A::FirstToken, "move"),
            (Mode::Columns, p(K::End), A::LastToken, "move"),
            (Mode::Columns, p(K::Tab), A::StepColumn(1), "column"),
            (Mode::Columns, p(K::BackTab), A::StepColumn(-1), "column"),
            (Mode::Columns, p(K::PageUp), A::PageColumn(-1), "scroll"),
            (Mode::Columns, p(K::PageDown), A::PageColumn(1), "scroll"),
            (
                Mode::Columns,
                c('['),
                branch(BranchAction::Pick(-1)),
                "branch",
            ),
            (
                Mode::Columns,
                c(']'),
                branch(BranchAction::Pick(1)),
                "branch",
            ),
            (
                Mode::Columns,
                p(K::Enter),
                branch(BranchAction::Take),
                "branch",
            ),
            // Shift+U, as vim takes back; placed here so that 80x24 help pairs it with `branch`.
            (
                Mode::Columns,
                c('U'),
                branch(BranchAction::Undelete),
                "undo",
            ),
            (
                Mode::Columns,
                c('z'),
                branch(BranchAction::ToggleStep),
                "step",
            ),
            (Mode::Columns, c(' '), branch(BranchAction::Step), "step"),
            (
                Mode::Columns,
                p(K::Delete),
                branch(BranchAction::Delete),
                "delete",
            ),
            (
                Mode::Columns,
                c('E'),
                branch(BranchAction::Edit),
                "edit, go on",
            ),
            (Mode::Columns, c('A'), A::AcceptReply, "accept reply"),
            (Mode::Columns, c('<'), A::SwipeReply(-1), "swipe reply"),
            (Mode::Columns, c('>'), A::SwipeReply(1), "swipe reply"),
            (Mode::Columns, c('u'), branch(BranchAction::Parent), "tree"),
            (Mode::Columns, c('d'), branch(BranchAction::Child), "tree"),
            (
                Mode::Columns,
                c(','),
                branch(BranchAction::Sibling(-1)),
                "tree",
            ),
            (
                Mode::Columns,
                c('.'),
                branch(BranchAction::Sibling(1)),
                "tree",
            ),
            (Mode::Columns, p(K::Esc), A::FocusPrev, "leave"),
            (Mode::Help, p(K::Esc), A::CloseOverlay, "close"),
            (Mode::Help, c('?'), A::CloseOverlay, "close"),
            (Mode::Help, c('q'), A::CloseOverlay, "close"),
            (Mode::Help, p(K::F(1)), A::CloseOverlay, "close"),
            (Mode::Help, ctrl('c'), A::Quit, "quit"),
            (Mode::Help, p(K::PageDown), A::TurnHelpPage(1), "more"),
            (Mode::Help, p(K::Right), A::TurnHelpPage(1), "more"),
            (Mode::Help, c(' '), A::TurnHelpPage(1), "more"),
            (Mode::Help, p(K::PageUp), A::TurnHelpPage(-1), "back"),
            (Mode::Help, p(K::Left), A::TurnHelpPage(-1), "back"),
            (
                Mode::Navigate,
                c('a'),
                dialog(DialogAction::OpenModels),
                "models",
            ),
            (Mode::Dialog, p(K::Esc), A::CloseOverlay, "close"),
            (
                Mode::Models,
                p(K::Enter),
                dialog(DialogAction::AddModel),
                "add",
            ),
            (
                Mode::Models,
                p(K::Delete),
                dialog(DialogAction::RemoveModel),
                "remove/cancel",
            ),
            (Mode::Dialog, ctrl('c'), A::Quit, "quit"),
            (
                Mode::Presets,
                p(K::Enter),
                dialog(DialogAction::LoadPreset),
                "load",
            ),
            (
                Mode::PresetName,
                p(K::Enter),
                dialog(DialogAction::SubmitName),
                "save",
            ),
            (
                Mode::OpenPath,
                p(K::Enter),
                dialog(DialogAction::SubmitName),
                "open",
            ),
            (
                Mode::Confirm,
                c('y'),
                dialog(DialogAction::ConfirmOverwrite(true)),
                "overwrite",
            ),
            (
                Mode::Confirm,
                c('n'),
                dialog(DialogAction::ConfirmOverwrite(false)),
                "change name",
            ),
            (
                Mode::Export,
                p(K::Left),
                dialog(DialogAction::ExportCycle(-1)),
                "exporter",
            ),
            (
                Mode::Export,
                p(K::Right),
                dialog(DialogAction::ExportCycle(1)),
                "exporter",
            ),
            (
                Mode::Export,
                p(K::Up),
                dialog(DialogAction::ExportScroll(-1)),
                "scroll",
            ),
            (
                Mode::Export,
                p(K::Down),
                dialog(DialogAction::ExportScroll(1)),
                "scroll",
            ),
            (
                Mode::Export,
                c('c'),
                dialog(DialogAction::CopyExport),
                "copy",
            ),
            (
                Mode::Export,
                p(K::Enter),
                dialog(DialogAction::CopyExport),
                "copy",
            ),
            (
                Mode::Export,
                c('w'),
                dialog(DialogAction::WriteResults),
                "save results",
            ),
            (
                Mode::Export,
                c('s'),
                dialog(DialogAction::CycleResultsShape),
                "results shape",
            ),
            (
                Mode::Navigate,
                c('g'),
                sweep(SweepAction::Open),
                "sweep grid",
            ),
            (
                Mode::SweepInput,
                p(K::Enter),
                sweep(SweepAction::Start),
                "run",
            ),
            (Mode::Sweep, p(K::Left), sweep_move(-1, 0), "move"),
            (Mode::Sweep, p(K::Right), sweep_move(1, 0), "move"),
            (Mode::Sweep, p(K::Up), sweep_move(0, -1), "move"),
            (Mode::Sweep, p(K::Down), sweep_move(0, 1), "move"),
            (Mode::Sweep, p(K::Home), sweep(SweepAction::First), "move"),
            (Mode::Sweep, p(K::End), sweep(SweepAction::Last), "move"),
            (
                Mode::Sweep,
                p(K::Enter),
                sweep(SweepAction::OpenCell),
                "open",
            ),
            (Mode::Sweep, c('n'), sweep(SweepAction::New), "new sweep"),
            (Mode::Sweep, c('g'), A::CloseOverlay, "close"),
        ];
        // 1, 2, … select the export dialog's tabs, one per format.
        let tabs = ExportFormat::all()
            .iter()
            .zip('1'..='9')
            .map(|(&format, digit)| (Mode::Export, c(digit), tab(format), "exporter"));
        Self {
            bindings: table
                .into_iter()
                .chain(tabs)
                .map(|(mode, key, action, help)| Binding {
                    mode,
                    key,
                    action,
                    help,
                })
                .collect(),
        }
    }
}

impl KeyMap {
    /// The action for `event` in the first of `modes` that binds it; in a text mode an unbound
    /// printable character is typed.
    pub fn action(&self, modes: &[Mode], event: KeyEvent) -> Option<Action> {
        let key = Key::from_event(event);
        let bound = modes.iter().find_map(|&mode| {
            self.bindings
                .iter()
                .find(|b| b.mode == mode && b.key == key)
                .map(|b| b.action.clone())
        });
        bound.or_else(|| match key.code {
            KeyCode::Char(c)
                if modes.first().is_some_and(|m| m.takes_text())
                    && !key
                        .modifiers
                        .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT) =>
            {
                Some(Action::InsertChar(c))
            }
            _ => None,
        })
    }

    /// Bindings of one mode as (keys, help), keys sharing a help text joined: `←/→ nudge`.
    pub fn describe(&self, mode: Mode) -> Vec<(String, &'static str)> {
        let mut rows: Vec<(String, &'static str)> = Vec::new();
        for b in self.bindings.iter().filter(|b| b.mode == mode) {
            match rows.iter_mut().find(|(_, help)| *help == b.help) {
                Some((keys, _)) => {
                    keys.push('/');
                    keys.push_str(&b.key.label());
                }
                None => rows.push((b.key.label(), b.help)),
            }
        }
        rows
    }

    /// The first key that triggers `action` in any of `modes`, for status-bar hints.
    pub fn key_for(&self, modes: &[Mode], action: &Action) -> Option<String> {
        modes.iter().find_map(|&mode| {
            self.bindings
                .iter()
                .find(|b| b.mode == mode && &b.action == action)
                .map(|b| b.key.label())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode, modifiers: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, modifiers)
    }

    #[test]
    fn the_most_specific_mode_wins_and_text_modes_type_characters() {
        let map = KeyMap::default();
        let q = key(KeyCode::Char('q'), KeyModifiers::NONE);
        let nav = [Mode::Params, Mode::Navigate, Mode::Global];
        assert_eq!(map.action(&nav, q), Some(Action::Quit));
        let text = [Mode::Prompt, Mode::TextField, Mode::Global];
        assert_eq!(map.action(&text, q), Some(Action::InsertChar('q')));
        let ctrl_c = key(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(map.action(&text, ctrl_c), Some(Action::Quit));
        let shifted = key(KeyCode::Char('?'), KeyModifiers::SHIFT);
        assert_eq!(map.action(&nav, shifted), Some(Action::OpenHelp));
        let coarse = key(KeyCode::Left, KeyModifiers::SHIFT);
        assert_eq!(
            map.action(&nav, coarse),
            Some(Action::NudgeParam {
                steps: -1,
                coarse: true
            })
        );
        assert_eq!(
            map.action(&nav, key(KeyCode::Char('z'), KeyModifiers::NONE)),
            None
        );
    }

    #[test]
    fn help_rows_join_keys_that_share_a_meaning() {
        let rows = KeyMap::default().describe(Mode::Params);
        assert!(rows.contains(&("←/→".to_owned(), "nudge")), "{rows:?}");
        assert!(rows.contains(&("Shift+←/Shift+→".to_owned(), "coarse")));
        let global = KeyMap::default().describe(Mode::Global);
        assert!(global.contains(&("F5/Ctrl+R".to_owned(), "re-run now")));
    }
}
