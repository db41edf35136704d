//! The conversation dialog's keys (`c`): Enter edits a turn, `a` adds one after the selection,
//! `d` deletes it, `r` cycles its role; every change re-runs.

use super::params_changed;
use crate::model::text::chat_template::Message;
use crate::tui::action::{Effect, ListMove};
use crate::tui::overlays::conversation::{self, ConversationDialog};
use crate::tui::state::{Overlay, State};
use crate::tui::widgets::text::TextBuffer;

/// The roles `r` cycles through.
const ROLES: [&str; 3] = ["system", "user", "assistant"];

pub fn open(state: &mut State) {
    state.overlay = Some(Overlay::Conversation(ConversationDialog::default()));
}

/// Moves the selection, stopping at the first and last turn.
pub fn move_by(state: &mut State, by: ListMove) {
    let turns = state.prompt.history.len();
    let page = conversation::page_rows(state.size, turns);
    if let Some(dialog) = dialog_mut(state) {
        dialog.selected = by.apply(dialog.selected, turns, page, false);
    }
}

/// Enter: edit the selected turn's text.
pub fn edit(state: &mut State) {
    let Some(selected) = dialog_mut(state).map(|d| d.selected) else {
        return;
    };
    let Some(turn) = state.prompt.history.get(selected) else {
        return;
    };
    let buffer = TextBuffer::new(turn.content.clone());
    if let Some(dialog) = dialog_mut(state) {
        dialog.editor = Some(buffer);
    }
}

/// `a`: a new turn after the selection (the first one a system message; then each answers the
/// one before: an assistant after a user, a user after anything else), edited at once.
pub fn add(state: &mut State) -> Vec<Effect> {
    let Some(selected) = dialog_mut(state).map(|d| d.selected) else {
        return Vec::new();
    };
    let history = &mut state.prompt.history;
    let (at, role) = match history.get(selected) {
        None => (0, "system"),
        Some(turn) if turn.role == "user" => (selected + 1, "assistant"),
        Some(_) => (selected + 1, "user"),
    };
    history.insert(at, Message::new(role, ""));
    if let Some(dialog) = dialog_mut(state) {
        dialog.selected = at;
        dialog.editor = Some(TextBuffer::default());
    }
    params_changed(state, true)
}

/// `d`: deletes the selected turn.
pub fn delete(state: &mut State) -> Vec<Effect> {
    let Some(selected) = dialog_mut(state).map(|d| d.selected) else {
        return Vec::new();
    };
    if selected >= state.prompt.history.len() {
        return Vec::new();
    }
    state.prompt.history.remove(selected);
    let last = state.prompt.history.len().saturating_sub(1);
    if let Some(dialog) = dialog_mut(state) {
        dialog.selected = selected.min(last);
    }
    params_changed(state, true)
}

/// `r`: system → user → assistant → system for the selected turn.
pub fn cycle_role(state: &mut State) -> Vec<Effect> {
    let Some(selected) = dialog_mut(state).map(|d| d.selected) else {
        return Vec::new();
    };
    let Some(turn) = state.prompt.history.get_mut(selected) else {
        return Vec::new();
    };
    let next = ROLES
        .iter()
        .position(|&r| r == turn.role)
        .map_or(0, |i| (i + 1) % ROLES.len());
    turn.role = ROLES[next].to_owned();
    params_changed(state, true)
}

/// Enter while editing: the text becomes the turn's. `None` when no turn is being edited.
pub fn commit(state: &mut State) -> Option<Vec<Effect>> {
    let dialog = dialog_mut(state)?;
    let text = dialog.editor.take()?.text;
    let selected = dialog.selected;
    let turn = state.prompt.history.get_mut(selected)?;
    let changed = turn.content != text;
    turn.content = text;
    Some(params_changed(state, changed))
}

/// Esc while editing: the turn keeps its text. Whether a turn was being edited.
pub fn cancel(state: &mut State) -> bool {
    dialog_mut(state).is_some_and(|d| d.editor.take().is_some())
}

/// The text field of the turn being edited.
pub fn editor_mut(state: &mut State) -> Option<&mut TextBuffer> {
    dialog_mut(state)?.editor.as_mut()
}

fn dialog_mut(state: &mut State) -> Option<&mut ConversationDialog> {
    match &mut state.overlay {
        Some(Overlay::Conversation(dialog)) => Some(dialog),
        _ => None,
    }
}
