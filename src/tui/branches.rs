//! Branching from any token and step mode: each side keeps a tree of branches per sample, run
//! with the side's samples as forced paths (see `engine::Branch`), so that a branch stays in step
//! with its sample's seed stream and is replayed like any sample when a knob moves.
//!
//! A branch's column is sample `num_samples + j` of its side's run, `j` its place in the tree.

use super::action::{BranchAction, Effect, Focus};
use super::state::State;
use crate::engine::{Branch, Prompt};
use crate::params::SamplingParams;
use crate::response::BranchOrigin;

/// What a branch hangs from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parent {
    Sample(u32),
    /// Another branch, by its place in the tree (always an earlier one).
    Branch(usize),
}

/// One branch: where it parts from its parent and the tokens it is made to take.
#[derive(Debug, Clone, PartialEq)]
pub struct BranchNode {
    pub parent: Parent,
    /// The step where it parts: the picked token's, or where stepping began.
    pub at: usize,
    /// Its tokens from the first generated one: its parent's up to `at`, then the user's.
    pub path: Vec<u32>,
    /// Step mode: one token is sampled after the path, for the user to take or replace.
    pub stepping: bool,
}

/// A side's branches, in the order they were made.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tree {
    pub nodes: Vec<BranchNode>,
}

impl Tree {
    /// The sample whose seed stream branch `j` draws from.
    fn root(&self, j: usize) -> u32 {
        match self.nodes[j].parent {
            Parent::Sample(sample) => sample,
            Parent::Branch(k) => self.root(k),
        }
    }

    /// What the engine runs for the tree, after `num_samples` samples.
    pub fn requests(&self, num_samples: u32) -> Vec<Branch> {
        (0..self.nodes.len())
            .map(|j| {
                let node = &self.nodes[j];
                Branch {
                    sample: self.root(j),
                    origin: BranchOrigin {
                        parent: run_index(node.parent, num_samples),
                        at: u32::try_from(node.at).unwrap_or(u32::MAX),
                    },
                    path: node.path.clone(),
                    then: node.stepping.then_some(1),
                }
            })
            .collect()
    }

    /// Removes branch `j` and every branch under it; later branches move up.
    pub fn remove(&mut self, j: usize) {
        let mut gone = vec![false; self.nodes.len()];
        gone[j] = true;
        for k in j + 1..self.nodes.len() {
            if let Parent::Branch(p) = self.nodes[k].parent {
                gone[k] = gone[p];
            }
        }
        // Each kept branch's parent moves up by the removed branches before it.
        let shift: Vec<usize> = gone
            .iter()
            .scan(0, |removed, &g| {
                let before = *removed;
                *removed += usize::from(g);
                Some(before)
            })
            .collect();
        let mut flags = gone.iter();
        self.nodes
            .retain(|_| !flags.next().copied().unwrap_or(false));
        for node in &mut self.nodes {
            if let Parent::Branch(p) = &mut node.parent {
                *p -= shift[*p];
            }
        }
    }

    /// Drops the branches of samples a run no longer has; says how many went.
    pub fn prune(&mut self, num_samples: u32) -> usize {
        let before = self.nodes.len();
        while let Some(j) = (0..self.nodes.len()).find(|&j| self.root(j) >= num_samples) {
            self.remove(j);
        }
        before - self.nodes.len()
    }

    /// The branches hanging from `parent`, in the order made.
    fn children(&self, parent: Parent) -> impl Iterator<Item = usize> + '_ {
        (0..self.nodes.len()).filter(move |&j| self.nodes[j].parent == parent)
    }
}

/// The index in the run of a sample or branch.
fn run_index(parent: Parent, num_samples: u32) -> u32 {
    match parent {
        Parent::Sample(sample) => sample,
        Parent::Branch(j) => num_samples + u32::try_from(j).unwrap_or(u32::MAX - num_samples),
    }
}

/// A run's sample or branch from its index in the run.
fn parent_of(index: u32, num_samples: u32) -> Parent {
    match index.checked_sub(num_samples) {
        Some(j) => Parent::Branch(j as usize),
        None => Parent::Sample(index),
    }
}

/// Before a side runs again: its branches stay with the same prompt and seed (they were made on
/// its samples' text), and go with the samples a smaller `num_samples` drops. Says what went.
pub fn keep_for_run(
    tree: &mut Tree,
    last: Option<(&Prompt, &SamplingParams)>,
    prompt: &Prompt,
    params: &SamplingParams,
) -> Option<String> {
    if tree.nodes.is_empty() {
        return None;
    }
    let why = match last {
        Some((p, _)) if p != prompt => Some("the prompt changed"),
        Some((_, before)) if before.seed != params.seed => Some("the seed changed"),
        _ => None,
    };
    if let Some(why) = why {
        let n = tree.nodes.len();
        tree.nodes.clear();
        return Some(format!("{n} branch(es) cleared: {why}"));
    }
    let dropped = tree.prune(params.num_samples);
    (dropped > 0).then(|| {
        format!(
            "{dropped} branch(es) cleared: their sample is gone with num_samples {}",
            params.num_samples
        )
    })
}

/// The cursor's column as a side, its run's sample count and its index in the run.
fn cursor_place(state: &State) -> Option<(usize, u32, u32, usize)> {
    let (column, token) = state.columns.cursor_token()?;
    let c = &state.columns.columns[column];
    let num_samples = state.sides.get(c.side)?.run_params.as_ref()?.num_samples;
    Some((c.side, num_samples, c.sample, token))
}

pub fn update(state: &mut State, action: BranchAction) -> Vec<Effect> {
    if state.focus != Focus::Columns {
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
        BranchAction::Parent => {
            walk_to_parent(state);
            super::update::trace_cursor(state)
        }
        BranchAction::Child => {
            walk_to_child(state);
            super::update::trace_cursor(state)
        }
        BranchAction::Sibling(delta) => {
            walk_to_sibling(state, delta);
            super::update::trace_cursor(state)
        }
    }
}

/// Moves the inspector's highlight over the alternatives of the cursor's token; it starts on
/// the token the sample took.
fn pick(state: &mut State, delta: i32) {
    let Some((column, token)) = state.columns.cursor_token() else {
        return;
    };
    let event = &state.columns.columns[column].tokens[token];
    let last = event.top.len().saturating_sub(1);
    let from = state
        .columns
        .pick
        .or_else(|| event.top.iter().position(|a| a.id == event.id))
        .unwrap_or(0);
    state.columns.pick = Some(from.saturating_add_signed(delta as isize).min(last));
}

/// Enter: continue from the highlighted alternative in a new branch, or, on the token a step
/// proposed, take it in the proposal's place.
pub fn take(state: &mut State) -> Vec<Effect> {
    let Some((side, num_samples, index, token)) = cursor_place(state) else {
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
            state.sides[side].tree.nodes[j].stepping && token + 1 == column.tokens.len()
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
    let tree = &mut state.sides[side].tree;
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
    run_side(state, side, sample, at)
}

/// `z`: step mode for the cursor's column from its cursor token on (a new branch that takes one
/// token at a time); on a stepping branch, back to sampling up to max_tokens.
fn toggle_step(state: &mut State) -> Vec<Effect> {
    let Some((side, num_samples, index, token)) = cursor_place(state) else {
        return Vec::new();
    };
    let tree = &mut state.sides[side].tree;
    if let Parent::Branch(j) = parent_of(index, num_samples)
        && tree.nodes[j].stepping
    {
        tree.nodes[j].stepping = false;
        return run_side(state, side, index, None);
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
    run_side(state, side, sample, None)
}

/// Space on a stepping branch: take the token the sampler proposed and propose the next.
fn step(state: &mut State) -> Vec<Effect> {
    let Some((side, num_samples, index, _)) = cursor_place(state) else {
        return Vec::new();
    };
    let stepping = match parent_of(index, num_samples) {
        Parent::Branch(j) => state.sides[side].tree.nodes[j].stepping.then_some(j),
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
    if tokens.len() <= state.sides[side].tree.nodes[j].path.len() {
        // The proposal has not come yet.
        return Vec::new();
    }
    state.sides[side].tree.nodes[j].path = tokens;
    run_side(state, side, index, None)
}

/// Deletes the cursor's branch and those under it; the cursor goes to its parent.
fn delete(state: &mut State) -> Vec<Effect> {
    let Some((side, num_samples, index, _)) = cursor_place(state) else {
        return Vec::new();
    };
    let Parent::Branch(j) = parent_of(index, num_samples) else {
        state
            .status
            .notify("only branches can be deleted: this is one of the run's samples".to_owned());
        return Vec::new();
    };
    let node = &state.sides[side].tree.nodes[j];
    let (parent, at) = (node.parent, node.at);
    // The parent's index in the run does not move: it comes before the removed branch.
    state.sides[side].tree.remove(j);
    run_side(state, side, run_index(parent, num_samples), Some(at))
}

/// Runs `side` again at once (its tree changed) and puts the cursor on `sample`'s `token`
/// (`None`: its newest) once the run starts.
fn run_side(state: &mut State, side: usize, sample: u32, token: Option<usize>) -> Vec<Effect> {
    state.columns.pick = None;
    state.sides[side].follow = Some((sample, token));
    state.sides[side].pending = true;
    super::update::start_pending(state)
}

/// `u`: to the parent, on the token where the branch parts from it.
fn walk_to_parent(state: &mut State) {
    let Some((side, num_samples, index, _)) = cursor_place(state) else {
        return;
    };
    let Parent::Branch(j) = parent_of(index, num_samples) else {
        state
            .status
            .notify("a sample of the run: it has no parent".to_owned());
        return;
    };
    let node = &state.sides[side].tree.nodes[j];
    let (parent, at) = (run_index(node.parent, num_samples), node.at);
    go_to(state, side, parent, at);
}

/// `d`: to the first branch made from this column, on the token where it parts.
fn walk_to_child(state: &mut State) {
    let Some((side, num_samples, index, _)) = cursor_place(state) else {
        return;
    };
    let tree = &state.sides[side].tree;
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
    let Some((side, num_samples, index, _)) = cursor_place(state) else {
        return;
    };
    let Parent::Branch(j) = parent_of(index, num_samples) else {
        state
            .status
            .notify("a sample of the run: its siblings are the columns beside it".to_owned());
        return;
    };
    let tree = &state.sides[side].tree;
    let siblings: Vec<usize> = tree.children(tree.nodes[j].parent).collect();
    let Some(at) = siblings.iter().position(|&k| k == j) else {
        return;
    };
    let next =
        siblings[(at as isize + delta as isize).rem_euclid(siblings.len() as isize) as usize];
    let token = tree.nodes[next].at;
    go_to(state, side, num_samples + next as u32, token);
}

fn go_to(state: &mut State, side: usize, sample: u32, token: usize) {
    if let Some(column) = state.columns.index_of(side, sample) {
        let grid = state.grid();
        state.columns.pick = None;
        state.columns.select(column, Some(token), &grid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(parent: Parent) -> BranchNode {
        BranchNode {
            parent,
            at: 1,
            path: vec![1, 2],
            stepping: false,
        }
    }

    #[test]
    fn removing_a_branch_takes_its_subtree_and_renumbers_the_rest() {
        let mut tree = Tree {
            nodes: vec![
                node(Parent::Sample(0)),
                node(Parent::Branch(0)),
                node(Parent::Sample(1)),
                node(Parent::Branch(1)),
                node(Parent::Branch(2)),
            ],
        };
        tree.remove(1);
        let parents: Vec<Parent> = tree.nodes.iter().map(|n| n.parent).collect();
        assert_eq!(
            parents,
            [Parent::Sample(0), Parent::Sample(1), Parent::Branch(1)]
        );
        let requests = tree.requests(2);
        let roots: Vec<(u32, u32)> = requests
            .iter()
            .map(|b| (b.sample, b.origin.parent))
            .collect();
        assert_eq!(roots, [(0, 0), (1, 1), (1, 3)]);
    }

    #[test]
    fn a_smaller_run_drops_the_branches_of_its_missing_samples() {
        let mut tree = Tree {
            nodes: vec![
                node(Parent::Sample(3)),
                node(Parent::Sample(0)),
                node(Parent::Branch(0)),
            ],
        };
        assert_eq!(tree.prune(2), 2);
        assert_eq!(tree.nodes, [node(Parent::Sample(0))]);
    }
}
