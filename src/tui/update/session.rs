//! `S` saves the playground's whole state as a session file and `O` opens one (see
//! `tui::session` for the file): the path dialogs, what a session takes from the state and how
//! opening one puts it back, models and all.

use super::cancel_all;
use crate::presets::{Preset, PresetSource};
use crate::tui::action::Effect;
use crate::tui::branch_tree::{BranchNode, Tree};
use crate::tui::comparison::{ModelId, SetId};
use crate::tui::focus::Focus;
use crate::tui::overlays::save_prompt::{SavePrompt, Saving};
use crate::tui::session::{
    SavedBranch, SavedCursor, SavedModel, SavedParams, SavedParent, SavedSet, Session, VERSION,
};
use crate::tui::state::{Overlay, State};
use crate::tui::widgets::columns::Columns;
use crate::tui::widgets::params::ParamsState;
use crate::tui::widgets::prompt::PromptState;
use std::path::PathBuf;

/// `S` and `O`: asks for the session file's path, offering the one given last.
pub fn ask_path(state: &mut State, saving: Saving) {
    let offered = state.session_path.clone().unwrap_or_default();
    state.overlay = Some(Overlay::Save(SavePrompt::new(&offered, saving)));
}

/// Enter in the path dialog: saves to the path or opens it.
pub fn submit(state: &mut State, opening: bool) -> Vec<Effect> {
    let Some(Overlay::Save(prompt)) = &mut state.overlay else {
        return Vec::new();
    };
    if prompt.name().is_empty() {
        prompt.error = Some("type the session file's path, e.g. ~/story.session.yaml".into());
        return Vec::new();
    }
    let path = prompt.name().to_owned();
    state.session_path = Some(path.clone());
    let path = PathBuf::from(path);
    if opening {
        vec![Effect::OpenSession(path)]
    } else {
        save(state, path, false)
    }
}

/// Writes the session to `path`; an existing file only with `overwrite` (after a yes).
pub fn save(state: &State, path: PathBuf, overwrite: bool) -> Vec<Effect> {
    vec![Effect::SaveSession {
        path,
        text: capture(state).to_yaml(),
        overwrite,
    }]
}

/// Saved: the dialog closes and the status bar says where; not saved: the dialog says why.
pub fn saved(state: &mut State, result: Result<PathBuf, String>) {
    match result {
        Ok(path) => {
            if matches!(&state.overlay, Some(Overlay::Save(p)) if p.saving == Saving::Session) {
                state.overlay = None;
            }
            state
                .status
                .notify(format!("saved the session to {}", path.display()));
        }
        Err(e) => refuse(state, format!("cannot save the session: {e}")),
    }
}

/// The file was read: the session replaces the playground's models and state. Not read: the
/// dialog says why, and nothing changed.
pub fn opened(state: &mut State, result: Result<Box<Session>, String>) -> Vec<Effect> {
    let session = match result {
        Ok(session) => session,
        Err(e) => {
            refuse(state, e);
            return Vec::new();
        }
    };
    let mut effects = cancel_all(state);
    effects.extend(
        state
            .comparison
            .models
            .iter()
            .map(|m| Effect::RemoveEngine(m.id)),
    );
    let first = state.comparison.next_model_id;
    let ids = restore(state, *session, first);
    state.overlay = None;
    state.status.error = None;
    state.status.notify(format!(
        "opened the session: {} model(s) loading; its samples and branches run once they load",
        ids.len()
    ));
    effects.extend(ids.into_iter().filter_map(|id| {
        let slot = state.comparison.slot(id)?;
        Some(Effect::AddEngine {
            id,
            spec: slot.spec.clone(),
            backend: slot.backend,
        })
    }));
    effects
}

/// An error for the path dialog, or the status bar once it is closed.
fn refuse(state: &mut State, error: String) {
    match &mut state.overlay {
        Some(Overlay::Save(prompt)) if prompt.saving != Saving::Preset => {
            prompt.confirm = None;
            prompt.error = Some(error);
        }
        _ => state.status.report_error(error),
    }
}

/// What a session file keeps of the state.
pub fn capture(state: &State) -> Session {
    let comparison = &state.comparison;
    let model_index = |id: ModelId| comparison.models.iter().position(|m| m.id == id);
    let set = |params: &ParamsState| SavedSet {
        preset: params.preset_name.clone(),
        preset_file: match &params.source {
            PresetSource::File(path) => Some(path.clone()),
            PresetSource::BuiltIn => None,
        },
        preset_params: SavedParams(params.baseline.clone()),
        params: SavedParams(params.params.clone()),
    };
    let mut sets = vec![set(comparison.set_params(SetId::A))];
    if comparison.other_set.is_some() {
        sets.push(set(comparison.set_params(SetId::B)));
    }
    let branches = comparison
        .sides
        .iter()
        .filter_map(|side| Some((model_index(side.model)?, side)))
        .flat_map(|(model, side)| {
            side.tree.nodes.iter().map(move |node| SavedBranch {
                model,
                set: side.set,
                parent: SavedParent(node.parent),
                at: node.at,
                path: node.path.clone(),
                stepping: node.stepping,
            })
        })
        .collect();
    let on_screen = state.columns.cursor_token().and_then(|(column, token)| {
        let column = &state.columns.columns[column];
        Some((comparison.side(column.side)?, column.sample, token))
    });
    // Before a run has started (a session just opened), where the cursor is going.
    let pending = || {
        comparison.sides.iter().find_map(|side| match side.follow {
            Some((sample, Some(token))) => Some((side, sample, token)),
            _ => None,
        })
    };
    let cursor = on_screen
        .or_else(pending)
        .and_then(|(side, sample, token)| {
            Some(SavedCursor {
                model: model_index(side.model)?,
                set: side.set,
                sample,
                token,
            })
        });
    Session {
        version: VERSION,
        models: comparison
            .models
            .iter()
            .map(|m| SavedModel {
                spec: m.spec.clone(),
                chat: m.chat,
                backend: m.backend,
            })
            .collect(),
        prompt: state.prompt.text().to_owned(),
        literal_specials: state.prompt.literal_specials,
        conversation: state.prompt.history.clone(),
        sets,
        editing: comparison.editing_set,
        branches,
        focus: state.focus,
        cursor,
    }
}

/// Puts a checked session into the state, its models numbered from `first` and owed a run
/// (engines are the caller's to start); returns their ids.
pub fn restore(state: &mut State, session: Session, first: ModelId) -> Vec<ModelId> {
    let params = |set: SetId| {
        let saved = session.set(set);
        let source = match &saved.preset_file {
            Some(path) => PresetSource::File(path.clone()),
            None => PresetSource::BuiltIn,
        };
        let preset = Preset {
            name: saved.preset.clone(),
            params: saved.preset_params.0.clone(),
            source,
        };
        // The seed roller only matters for the next roll; the session's seed seeds it.
        let mut state = ParamsState::new(preset, saved.params.0.seed.unwrap_or_default());
        state.params = saved.params.0.clone();
        state
    };
    let a = params(SetId::A);
    let b = (session.sets.len() > 1).then(|| params(SetId::B));
    let (editing, other) = match (session.editing, b) {
        (SetId::B, Some(b)) => (b, Some(a)),
        (_, b) => (a, b),
    };
    let comparison = &mut state.comparison;
    comparison.params = editing;
    let specs: Vec<String> = session.models.iter().map(|m| m.spec.clone()).collect();
    let ids = comparison.compare_from(first, &specs, other);
    comparison.editing_set = session.editing;
    for (slot, saved) in comparison.models.iter_mut().zip(&session.models) {
        slot.chat = saved.chat;
        slot.backend = saved.backend;
    }
    let side_of = |model: usize, set: SetId| {
        comparison
            .sides
            .iter()
            .position(|s| Some(s.model) == ids.get(model).copied() && s.set == set)
    };
    let placed: Vec<(usize, BranchNode)> = session
        .branches
        .iter()
        .filter_map(|b| {
            let node = BranchNode {
                parent: b.parent.0,
                at: b.at,
                path: b.path.clone(),
                stepping: b.stepping,
            };
            Some((side_of(b.model, b.set)?, node))
        })
        .collect();
    let follow = session
        .cursor
        .filter(|_| session.focus == Focus::Columns)
        .and_then(|c| Some((side_of(c.model, c.set)?, c.sample, c.token)));
    for (index, side) in comparison.sides.iter_mut().enumerate() {
        side.tree = Tree::default();
        side.tree.nodes = placed
            .iter()
            .filter(|(s, _)| *s == index)
            .map(|(_, node)| node.clone())
            .collect();
    }
    if let Some((index, sample, token)) = follow {
        comparison.sides[index].follow = Some((sample, Some(token)));
    }
    state.prompt = PromptState {
        literal_specials: session.literal_specials,
        history: session.conversation,
        ..PromptState::new(&session.prompt)
    };
    state.columns = Columns::default();
    state.focus = session.focus;
    ids
}
