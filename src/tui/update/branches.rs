//! Branching from any token and step mode: each side keeps a tree of branches per sample, run
//! with the side's samples as forced paths (see `engine::Branch`), so that a branch stays in step
//! with its sample's seed stream and is replayed like any sample when a knob moves.
//!
//! A branch's column is sample `num_samples + j` of its side's run, `j` its place in the tree.

use super::edit_sample;
use crate::tui::action::{BranchAction, Effect};
use crate::tui::branch_tree::{BranchNode, NoUndo, Parent, Subtree, Tree, parent_of, run_index};
use crate::tui::comparison::{ModelId, SideId};
use crate::tui::focus::Focus;
use crate::tui::state::State;

pub fn update(state: &mut State, action: BranchAction) -> Vec<Effect> {
    if state.focus != Focus::Columns {
        return Vec::new();
    }
    let grows = matches!(
        action,
        BranchAction::Take | BranchAction::ToggleStep | BranchAction::Step | BranchAction::Edit
    );
    if grows && let Some(server) = served_at_cursor(state) {
        state.status.notify(format!(
            "this column's model is served by {server}, which gives no logits to branch or \
             step from: branch on a local model"
        ));
        return Vec::new();
    }
    match action {
        BranchAction::Pick(delta) => {
            pick(state, delta);
            Vec::new()
        }
        BranchAction::Take => take(state),
        BranchAction::ToggleStep => toggle_step(state),
        BranchAction::Step => step(state),
        BranchAction::Delete => delete(state),
        BranchAction::Undelete => undelete(state),
        BranchAction::Parent => {
            walk_to_parent(state);
            super::trace_cursor(state)
        }
        BranchAction::Child => {
            walk_to_child(state);
            super::trace_cursor(state)
        }
        BranchAction::Sibling(delta) => {
            walk_to_sibling(state, delta);
            super::trace_cursor(state)
        }
        BranchAction::Edit => edit_sample::open(state),
    }
}

/// The server of the cursor column's model, when a server runs it.
fn served_at_cursor(state: &State) -> Option<String> {
    let (column, _) = state.columns.cursor_token()?;
    let side = state.comparison.side(state.columns.columns[column].side)?;
    let slot = state.comparison.slot(side.model)?;
    slot.served.as_ref().map(|(server, _)| server.clone())
}

/// Moves the inspector's highlight over the alternatives of the cursor's token by one,
/// wrapping round the list. Unlit, the move starts from the token the sample took (in step
/// mode, the proposal), so that `]` lights the next alternative and `[` the previous one.
fn pick(state: &mut State, delta: i32) {
    let Some((column, token)) = state.columns.cursor_token() else {
        return;
    };
    let event = &state.columns.columns[column].tokens[token];
    let count = event.top.len();
    if count == 0 {
        return;
    }
    let from = state
        .columns
        .pick
        .or_else(|| event.top.iter().position(|a| a.id == event.id));
    let next = match from {
        Some(from) => (from as i64 + i64::from(delta)).rem_euclid(count as i64) as usize,
        // The taken token is not listed: it stands before the first and after the last.
        None if delta > 0 => 0,
        None => count - 1,
    };
    state.columns.pick = Some(next);
}

/// Enter: continue from the highlighted alternative in a new branch, or, on the token a step
/// proposed, take it in the proposal's place.
pub fn take(state: &mut State) -> Vec<Effect> {
    let Some((side, num_samples, index, token)) = super::cursor_place(state) else {
        return Vec::new();
    };
    let column = &state.columns.columns[state.columns.cursor_token().map_or(0, |(c, _)| c)];
    let event = &column.tokens[token];
    let Some(alternative) = state.columns.pick.and_then(|i| event.top.get(i)) else {
        state.status.notify(
            "pick an alternative in the inspector first ([ and ] move through them)".to_owned(),
        );
        return Vec::new();
    };
    let picked = alternative.id;
    let parent = parent_of(index, num_samples);
    let proposal = match parent {
        Parent::Branch(j) => {
            state.comparison.sides[side].tree.nodes[j].stepping && token + 1 == column.tokens.len()
        }
        Parent::Sample(_) => false,
    };
    if picked == event.id {
        if proposal {
            return step(state);
        }
        state
            .status
            .notify("that is the token the sample took: pick another one".to_owned());
        return Vec::new();
    }
    let mut path: Vec<u32> = column.tokens[..token].iter().map(|t| t.id).collect();
    path.push(picked);
    let tree = &mut state.comparison.sides[side].tree;
    let (sample, at) = match parent {
        // The step's proposal is replaced: stepping goes on after the pick.
        Parent::Branch(j) if proposal => {
            tree.nodes[j].path = path;
            (index, None)
        }
        _ => {
            tree.nodes.push(BranchNode {
                parent,
                at: token,
                path,
                stepping: false,
            });
            (num_samples + tree.nodes.len() as u32 - 1, Some(token))
        }
    };
    super::run_side(state, side, sample, at)
}

/// `z`: step mode for the cursor's column from its cursor token on (a new branch that takes one
/// token at a time); on a stepping branch, back to sampling up to max_tokens.
fn toggle_step(state: &mut State) -> Vec<Effect> {
    let Some((side, num_samples, index, token)) = super::cursor_place(state) else {
        return Vec::new();
    };
    let tree = &mut state.comparison.sides[side].tree;
    if let Parent::Branch(j) = parent_of(index, num_samples)
        && tree.nodes[j].stepping
    {
        tree.nodes[j].stepping = false;
        return super::run_side(state, side, index, None);
    }
    let column = &state.columns.columns[state.columns.cursor_token().map_or(0, |(c, _)| c)];
    let path: Vec<u32> = column.tokens[..=token].iter().map(|t| t.id).collect();
    tree.nodes.push(BranchNode {
        parent: parent_of(index, num_samples),
        at: token + 1,
        path,
        stepping: true,
    });
    let sample = num_samples + tree.nodes.len() as u32 - 1;
    super::run_side(state, side, sample, None)
}

/// Space on a stepping branch: take the token the sampler proposed and propose the next.
fn step(state: &mut State) -> Vec<Effect> {
    let Some((side, num_samples, index, _)) = super::cursor_place(state) else {
        return Vec::new();
    };
    let stepping = match parent_of(index, num_samples) {
        Parent::Branch(j) => state.comparison.sides[side].tree.nodes[j]
            .stepping
            .then_some(j),
        Parent::Sample(_) => None,
    };
    let Some(j) = stepping else {
        state
            .status
            .notify("not stepping: z steps this sample one token at a time".to_owned());
        return Vec::new();
    };
    let Some(column) = state.columns.index_of(side, index) else {
        return Vec::new();
    };
    let column = &state.columns.columns[column];
    if column
        .finish
        .as_deref()
        .is_some_and(|f| f.starts_with("stop"))
    {
        state
            .status
            .notify("the sample has stopped: nothing more to step".to_owned());
        return Vec::new();
    }
    let tokens: Vec<u32> = column.tokens.iter().map(|t| t.id).collect();
    if tokens.len() <= state.comparison.sides[side].tree.nodes[j].path.len() {
        // The proposal has not come yet.
        return Vec::new();
    }
    state.comparison.sides[side].tree.nodes[j].path = tokens;
    super::run_side(state, side, index, None)
}

/// Deletes the cursor's branch and those under it, saying what went and how to bring it back;
/// the cursor goes to its parent.
fn delete(state: &mut State) -> Vec<Effect> {
    let Some((side, num_samples, index, _)) = super::cursor_place(state) else {
        return Vec::new();
    };
    let Parent::Branch(j) = parent_of(index, num_samples) else {
        state
            .status
            .notify("only branches can be deleted: this is one of the run's samples".to_owned());
        return Vec::new();
    };
    let node = &state.comparison.sides[side].tree.nodes[j];
    let (parent, at) = (node.parent, node.at);
    // The parent's index in the run does not move: it comes before the removed branch.
    let taken = state.comparison.sides[side].tree.delete(j);
    state.status.notify(format!(
        "removed {} · U brings {} back",
        subtree_text(taken, num_samples),
        if taken.descendants == 0 { "it" } else { "them" }
    ));
    super::run_side(state, side, run_index(parent, num_samples), Some(at))
}

/// `U`: puts back the branches the last Del took from the cursor's side, as they were; the
/// cursor goes to the restored branch, where it parts from its parent.
fn undelete(state: &mut State) -> Vec<Effect> {
    let Some(side) = state.columns.cursor_side() else {
        return Vec::new();
    };
    let Some(restored) = state
        .comparison
        .sides
        .get_mut(side.0)
        .map(|s| s.tree.undelete())
    else {
        return Vec::new();
    };
    let taken = match restored {
        Ok(taken) => taken,
        Err(NoUndo::NothingDeleted) => {
            state.status.notify(
                "no deleted branch to bring back here: U undoes the last Del on a branch"
                    .to_owned(),
            );
            return Vec::new();
        }
        Err(NoUndo::ChangedSince) => {
            state
                .status
                .notify("cannot undo the deletion: branches were made or stepped since".to_owned());
            return Vec::new();
        }
    };
    // The next run's sample count, which places the branch's column.
    let num_samples = state
        .comparison
        .set_params(state.comparison.sides[side].set)
        .params
        .num_samples;
    state
        .status
        .notify(format!("brought back {}", subtree_text(taken, num_samples)));
    let at = state.comparison.sides[side].tree.nodes[taken.branch].at;
    super::run_side(state, side, num_samples + taken.branch as u32, Some(at))
}

/// `branch #5 and its 2 descendants`, the branch named as its column is.
fn subtree_text(subtree: Subtree, num_samples: u32) -> String {
    let name = run_index(Parent::Branch(subtree.branch), num_samples);
    match subtree.descendants {
        0 => format!("branch #{name}"),
        1 => format!("branch #{name} and its descendant"),
        n => format!("branch #{name} and its {n} descendants"),
    }
}

/// Model `model` has loaded with `vocab_size` tokens: a side's branches that take a token it
/// lacks (a session file made on another model, or edited) are dropped, saying which, before
/// they run; the engine would refuse the whole run.
pub(super) fn drop_foreign(state: &mut State, model: ModelId, vocab_size: usize) {
    let name = state
        .comparison
        .slot(model)
        .and_then(|s| s.name())
        .unwrap_or("the model")
        .to_owned();
    for side in state
        .comparison
        .sides
        .iter_mut()
        .filter(|s| s.model == model)
    {
        let Some((j, id)) = side.tree.token_beyond(vocab_size) else {
            continue;
        };
        let n = side.tree.nodes.len();
        side.tree = Tree::default();
        state.status.report_error(format!(
            "{n} branch(es) of set {} dropped: branch {j} takes token {id}, but {name}'s              vocabulary has {vocab_size} tokens (ids 0..{vocab_size})",
            side.set.letter()
        ));
    }
}

/// `u`: to the parent, on the token where the branch parts from it.
fn walk_to_parent(state: &mut State) {
    let Some((side, num_samples, index, _)) = super::cursor_place(state) else {
        return;
    };
    let Parent::Branch(j) = parent_of(index, num_samples) else {
        state
            .status
            .notify("a sample of the run: it has no parent".to_owned());
        return;
    };
    let node = &state.comparison.sides[side].tree.nodes[j];
    let (parent, at) = (run_index(node.parent, num_samples), node.at);
    go_to(state, side, parent, at);
}

/// `d`: to the first branch made from this column, on the token where it parts.
fn walk_to_child(state: &mut State) {
    let Some((side, num_samples, index, _)) = super::cursor_place(state) else {
        return;
    };
    let tree = &state.comparison.sides[side].tree;
    let Some(child) = tree.children(parent_of(index, num_samples)).next() else {
        state
            .status
            .notify("no branch starts from this column: Enter on an alternative makes one".into());
        return;
    };
    let at = tree.nodes[child].at;
    go_to(state, side, num_samples + child as u32, at);
}

/// `,` and `.`: to the previous or next branch of the same parent.
fn walk_to_sibling(state: &mut State, delta: i32) {
    let Some((side, num_samples, index, _)) = super::cursor_place(state) else {
        return;
    };
    let Parent::Branch(j) = parent_of(index, num_samples) else {
        state
            .status
            .notify("a sample of the run: its siblings are the columns beside it".to_owned());
        return;
    };
    let tree = &state.comparison.sides[side].tree;
    let siblings: Vec<usize> = tree.children(tree.nodes[j].parent).collect();
    let Some(at) = siblings.iter().position(|&k| k == j) else {
        return;
    };
    let next =
        siblings[(at as isize + delta as isize).rem_euclid(siblings.len() as isize) as usize];
    let token = tree.nodes[next].at;
    go_to(state, side, num_samples + next as u32, token);
}

fn go_to(state: &mut State, side: SideId, sample: u32, token: usize) {
    if let Some(column) = state.columns.index_of(side, sample) {
        let grid = state.grid();
        state.columns.pick = None;
        state.columns.select(column, Some(token), &grid);
    }
}
