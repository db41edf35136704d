//! The chat loop: in chat mode a run's samples are candidate replies. `<` and `>` swipe between
//! those of the cursor's side (samples and branches alike), `A` accepts the cursor's as the
//! assistant's turn (the conversation the run answered, then the reply, becomes the history and
//! the prompt box empties for the next user turn), and `R` regenerates: the last turn again on
//! new seeds.

use super::{cancel_all, chat_mode, mark_all_pending, navigate, rerun, roll_seeds};
use crate::engine::Prompt;
use crate::model::text::chat_template::Message;
use crate::tui::action::Effect;
use crate::tui::focus::Focus;
use crate::tui::state::State;
use crate::tui::widgets::columns::Columns;
use crate::tui::widgets::prompt::PromptView;
use crate::tui::widgets::text::TextBuffer;

/// The cursor column's sample as the reply `A` would accept: its name (`#2`, `reply 2 of 4`)
/// and text; `None` unless its model runs the conversation through a chat template.
pub fn candidate(state: &State) -> Option<(String, String)> {
    let (column, _) = state.columns.cursor_token()?;
    let column = &state.columns.columns[column];
    let side = state.comparison.side(column.side)?;
    if !side.run_prompt.as_ref().is_some_and(Prompt::is_chat) {
        return None;
    }
    let replies: Vec<u32> = state
        .columns
        .columns
        .iter()
        .filter(|c| c.side == column.side)
        .map(|c| c.sample)
        .collect();
    let place = replies.iter().position(|&s| s == column.sample)? + 1;
    let name = format!("#{} (reply {place} of {})", column.sample, replies.len());
    Some((name, column.token_text()))
}

/// `A`: the cursor's sample becomes the assistant's turn after the conversation its run
/// answered; the prompt box empties for the next user turn, which runs as it is typed.
pub fn accept(state: &mut State) -> Vec<Effect> {
    let Some((column, _)) = state.columns.cursor_token() else {
        return Vec::new();
    };
    let column = &state.columns.columns[column];
    let Some(side) = state.comparison.side(column.side) else {
        return Vec::new();
    };
    let Some(slot) = state.comparison.slot(side.model) else {
        return Vec::new();
    };
    let name = slot.name().unwrap_or(&slot.spec).to_owned();
    let messages = match &side.run_prompt {
        Some(Prompt::Chat(conversation)) => conversation.messages.clone(),
        _ if !slot.chat_available => {
            state.status.report_error(format!(
                "{name} has no chat template: its samples go on from raw text, with no turns \
                 to take; E edits a sample and goes on from it instead"
            ));
            return Vec::new();
        }
        _ => {
            state.status.notify(format!(
                "{name} got the prompt as raw text: m switches it to chat, then accept a reply"
            ));
            return Vec::new();
        }
    };
    if column.finish.is_none() {
        state
            .status
            .notify("the reply is still coming: accept it once it has ended".to_owned());
        return Vec::new();
    }
    let reply = column.token_text();
    let sample = column.sample;
    state.prompt.history = messages;
    state.prompt.history.push(Message::new("assistant", &reply));
    state.prompt.view = PromptView::Typed;
    state.prompt.edit(TextBuffer::clear);
    state.focus = Focus::Prompt;
    let turns = state.prompt.history.len();
    state.status.notify(format!(
        "#{sample} is the assistant's turn ({turns} turns): type the next user turn"
    ));
    // The columns answered the conversation before this turn: stale until the next is typed.
    mark_all_pending(state);
    cancel_all(state)
}

/// `<` and `>`: the previous or next candidate reply of the cursor's side, round the ends.
pub fn swipe(state: &mut State, delta: i32) -> Vec<Effect> {
    let Some(side) = state.columns.cursor_side() else {
        return Vec::new();
    };
    let replies: Vec<usize> = (0..state.columns.columns.len())
        .filter(|&c| state.columns.columns[c].side == side)
        .collect();
    let at = replies
        .iter()
        .position(|&c| c == state.columns.cursor.column)
        .unwrap_or(0);
    let next = replies[(at as i64 + i64::from(delta)).rem_euclid(replies.len() as i64) as usize];
    let effects = navigate(state, |columns: &mut Columns, grid| {
        columns.select(next, None, grid)
    });
    if let Some((name, _)) = candidate(state) {
        state.status.notify(format!("reply {name}: A takes it"));
    }
    effects
}

/// `R`: the last turn again on new seeds. After a reply was accepted and before the next user
/// turn is typed, the reply and the user turn it answered are taken back (the user turn into
/// the prompt box) and asked again; otherwise the prompt on screen is.
pub fn regenerate(state: &mut State) -> Vec<Effect> {
    let chat = chat_mode::modes(state).chat;
    let history = &state.prompt.history;
    let answered = state.prompt.text().is_empty()
        && history.len() >= 2
        && history[history.len() - 1].role == "assistant"
        && history[history.len() - 2].role == "user";
    if chat && answered {
        state.prompt.history.pop();
        let user = state.prompt.history.pop().map(|m| m.content);
        state.prompt.view = PromptView::Typed;
        state.prompt.edit(|buffer| {
            *buffer = TextBuffer::new(user.unwrap_or_default());
            true
        });
        state
            .status
            .notify("took back the reply: the user turn again, on new seeds".to_owned());
    }
    roll_seeds(state);
    rerun(state)
}
