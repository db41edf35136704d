//! Edit and continue: `E` opens the cursor's sample in an editor; Enter asks its model which
//! tokens the edited text is (`engine::edit`: the tokens whose text stayed are kept as sampled,
//! the rest is tokenized after them), and the answer becomes a branch forced along them, from
//! which the sample goes on with its own seed stream.

use super::{cursor_place, run_side};
use crate::engine::{Edit, EditRequest, RunId};
use crate::tui::action::Effect;
use crate::tui::branch_tree::{BranchNode, Parent, parent_of};
use crate::tui::comparison::{PendingEdit, SideId};
use crate::tui::overlays::sample_editor::SampleEditor;
use crate::tui::state::{Overlay, State};
use crate::tui::widgets::text::TextBuffer;

/// `E`: the cursor's sample in the editor, its text as sampled so far.
pub fn open(state: &mut State) -> Vec<Effect> {
    let Some((side, _, sample, _)) = cursor_place(state) else {
        return Vec::new();
    };
    let Some(column) = state.columns.index_of(side, sample) else {
        return Vec::new();
    };
    let column = &state.columns.columns[column];
    let tokens = column.tokens.iter().map(|t| t.id).collect();
    let editor = SampleEditor::new(side, sample, tokens, column.token_text());
    state.overlay = Some(Overlay::EditSample(editor));
    Vec::new()
}

/// The text being edited.
pub fn editor_mut(state: &mut State) -> Option<&mut TextBuffer> {
    match &mut state.overlay {
        Some(Overlay::EditSample(editor)) => Some(&mut editor.buffer),
        _ => None,
    }
}

/// Esc: the sample stays as it is. Whether a sample was being edited.
pub fn cancel(state: &mut State) -> bool {
    let editing = matches!(state.overlay, Some(Overlay::EditSample(_)));
    if editing {
        state.overlay = None;
    }
    editing
}

/// Enter: asks the sample's model for the edit's tokens. `None` when no sample is edited.
pub fn commit(state: &mut State) -> Option<Vec<Effect>> {
    let editor = match state.overlay.take() {
        Some(Overlay::EditSample(editor)) => editor,
        other => {
            state.overlay = other;
            return None;
        }
    };
    if editor.buffer.text == editor.original {
        state
            .status
            .notify("the text is as it was: nothing to continue from".to_owned());
        return Some(Vec::new());
    }
    let side = &state.comparison.sides[editor.side];
    let prompt: Option<Vec<u32>> = side
        .seen
        .as_ref()
        .and_then(|seen| seen.tokens.iter().map(|t| t.id).collect());
    let (Some(prompt), Some(params)) = (prompt, side.run_params.as_ref()) else {
        state.status.report_error(
            "cannot continue from the edit: the sample's run is gone (its prompt changed)"
                .to_owned(),
        );
        return Some(Vec::new());
    };
    let parent = parent_of(editor.sample, params.num_samples);
    let model = side.model;
    state.run.last_id += 1;
    let id = state.run.last_id;
    state.comparison.sides[editor.side].edit = Some(PendingEdit {
        id,
        parent,
        sample: editor.tokens.clone(),
    });
    state.status.notify("tokenizing the edit…".to_owned());
    Some(vec![Effect::Edit(
        model,
        EditRequest {
            id,
            prompt,
            sample: editor.tokens,
            text: editor.buffer.text,
        },
    )])
}

/// The model's answer to edit `id`: a new branch forced along the kept tokens and the edit's,
/// run at once with the cursor where it parts; or why not.
pub fn edited(state: &mut State, id: RunId, edit: Result<Edit, String>) -> Vec<Effect> {
    let Some(side) = state
        .comparison
        .sides
        .iter()
        .position(|s| s.edit.as_ref().is_some_and(|e| e.id == id))
        .map(SideId)
    else {
        return Vec::new();
    };
    let Some(pending) = state.comparison.sides[side].edit.take() else {
        return Vec::new();
    };
    let Edit { kept, ids } = match edit {
        Ok(edit) => edit,
        Err(why) => {
            state
                .status
                .report_error(format!("cannot continue from the edit: {why}"));
            return Vec::new();
        }
    };
    if ids.is_empty() {
        state.status.notify(
            "the edit only cut the text where a token ends: on its own seed stream the sample \
             would go on as it did; change a word, or cut inside one"
                .to_owned(),
        );
        return Vec::new();
    }
    let tree = &mut state.comparison.sides[side].tree;
    if let Parent::Branch(j) = pending.parent
        && j >= tree.nodes.len()
    {
        state
            .status
            .report_error("cannot continue from the edit: its branch was deleted".to_owned());
        return Vec::new();
    }
    let typed = ids.len();
    let mut path = pending.sample;
    path.truncate(kept);
    path.extend(ids);
    tree.nodes.push(BranchNode {
        parent: pending.parent,
        at: kept,
        path,
        stepping: false,
    });
    let j = tree.nodes.len() - 1;
    // The next run's sample count places the branch's column.
    let num_samples = state
        .comparison
        .set_params(state.comparison.sides[side].set)
        .params
        .num_samples;
    state.status.notify(format!(
        "#{}: {kept} token(s) kept, {typed} typed token(s) forced, then sampled",
        num_samples + j as u32
    ));
    run_side(state, side, num_samples + j as u32, Some(kept))
}
