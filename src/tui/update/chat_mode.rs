//! Chat mode per model: each model gets the prompt either through its own chat template (with
//! the conversation's earlier turns) or as raw text. `m` switches every model, or, with the
//! samples focused, only the model of the cursor's column, so that a chat model and a base
//! model can be compared each in its own mode. A model that cannot take chat says so.

use super::params_changed;
use crate::engine::{Conversation, Prompt};
use crate::model::text::chat_template::Message;
use crate::tui::action::Effect;
use crate::tui::comparison::ModelId;
use crate::tui::focus::Focus;
use crate::tui::model_slot::ModelSlot;
use crate::tui::state::State;
use crate::tui::widgets::prompt::ChatModes;

/// `m`: raw → chat → raw, for the models it applies to; when the prompt holds special-token
/// text: raw → chat → chat with that text kept as text → raw with it kept as text → raw.
pub fn toggle(state: &mut State) -> Vec<Effect> {
    let targets = targets(state);
    let targets_chat = |state: &State| targets.iter().any(|&id| slot_chat(state, id));
    let chat = targets_chat(state);
    let typed = state
        .comparison
        .special_tokens()
        .iter()
        .any(|s| state.prompt.text().contains(s));
    match (chat, state.prompt.literal_specials) {
        (false, true) => state.prompt.literal_specials = false,
        (false, false) => {
            let mut refused = Vec::new();
            for &id in &targets {
                let Some(slot) = state.comparison.slot_mut(id) else {
                    continue;
                };
                // A model still loading is asked for chat; its load says if it cannot.
                if slot.ready() && !slot.chat_available {
                    refused.push(no_template(slot));
                } else {
                    slot.chat = true;
                }
            }
            if !targets_chat(state) {
                // Nothing changes: that is an error.
                state.status.report_error(refused.join("; "));
                return Vec::new();
            }
            for message in refused {
                state.status.notify(message);
            }
        }
        (true, false) if typed => state.prompt.literal_specials = true,
        (true, literal) => {
            for &id in &targets {
                if let Some(slot) = state.comparison.slot_mut(id) {
                    slot.chat = false;
                }
            }
            state.prompt.literal_specials = literal && typed;
        }
    }
    params_changed(state, true)
}

/// A model has loaded: chat asked for before it loaded is dropped, with a message, when it has
/// no template.
pub fn loaded(state: &mut State, model: ModelId) {
    if let Some(slot) = state.comparison.slot_mut(model)
        && slot.chat
        && !slot.chat_available
    {
        slot.chat = false;
        let message = no_template(slot);
        state.status.report_error(message);
    }
}

/// What model `model` is asked: the conversation (earlier turns, then the prompt as the last
/// user message) in chat mode, else the prompt as raw text.
pub fn prompt_for(state: &State, model: ModelId) -> Prompt {
    let text = state.prompt.text();
    if !slot_chat(state, model) {
        return Prompt::raw_with(text, state.prompt.literal_specials);
    }
    let mut messages = state.prompt.history.clone();
    messages.push(Message::new("user", text));
    Prompt::Chat(Conversation {
        messages,
        literal_specials: state.prompt.literal_specials,
    })
}

pub fn modes(state: &State) -> ChatModes {
    let models = &state.comparison.models;
    let chat = models.iter().any(|m| m.chat);
    ChatModes {
        chat,
        available: models.iter().any(|m| m.chat_available),
        raw: models
            .iter()
            .filter(|m| chat && !m.chat)
            .map(|m| m.name().unwrap_or(&m.spec).to_owned())
            .collect(),
        missing: models.iter().any(|m| m.ready()) && !models.iter().any(|m| m.chat_available),
    }
}

fn slot_chat(state: &State, model: ModelId) -> bool {
    state.comparison.slot(model).is_some_and(|slot| slot.chat)
}

/// The models `m` switches: the cursor column's with the samples focused, else all.
fn targets(state: &State) -> Vec<ModelId> {
    let side = state
        .columns
        .cursor_side()
        .filter(|_| state.focus == Focus::Columns && state.comparison.sides.len() > 1);
    match side.and_then(|side| state.comparison.side(side)) {
        Some(side) => vec![side.model],
        None => state.comparison.models.iter().map(|m| m.id).collect(),
    }
}

fn no_template(slot: &ModelSlot) -> String {
    let name = slot.name().unwrap_or(&slot.spec);
    format!("{name} has no chat template: it gets the prompt as raw text")
}
