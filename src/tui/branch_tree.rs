//! A side's branch tree: the branches made from its samples' tokens, each by its parent and the
//! path it is forced along, and the requests that run them after the side's samples.

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
    /// The user's last deletion, kept so that one key can take it back.
    deleted: Option<Deletion>,
}

/// A deletion to undo: the branches before it and after it. It is undone only while the tree is
/// still as it left it, since a later change may hang on the renumbered branches.
#[derive(Debug, Clone, PartialEq)]
struct Deletion {
    before: Vec<BranchNode>,
    after: Vec<BranchNode>,
    taken: Subtree,
}

/// What a deletion took, or its undo brought back: branch `branch` and `descendants` under it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subtree {
    pub branch: usize,
    pub descendants: usize,
}

/// Why a deletion cannot be undone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoUndo {
    NothingDeleted,
    /// A branch was made, stepped or cleared after the deletion.
    ChangedSince,
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

    /// Removes branch `j` and its subtree as the user asked, remembering them for [`Tree::undelete`].
    pub fn delete(&mut self, j: usize) -> Subtree {
        let before = self.nodes.clone();
        self.remove(j);
        let taken = Subtree {
            branch: j,
            descendants: before.len() - self.nodes.len() - 1,
        };
        self.deleted = Some(Deletion {
            before,
            after: self.nodes.clone(),
            taken,
        });
        taken
    }

    /// Puts back what the last deletion took, each branch in its old place, unless the tree
    /// changed since.
    pub fn undelete(&mut self) -> Result<Subtree, NoUndo> {
        let deletion = self.deleted.take().ok_or(NoUndo::NothingDeleted)?;
        if deletion.after != self.nodes {
            return Err(NoUndo::ChangedSince);
        }
        self.nodes = deletion.before;
        Ok(deletion.taken)
    }

    /// Drops the branches of samples a run no longer has; says how many went.
    pub fn prune(&mut self, num_samples: u32) -> usize {
        let before = self.nodes.len();
        while let Some(j) = (0..self.nodes.len()).find(|&j| self.root(j) >= num_samples) {
            self.remove(j);
        }
        before - self.nodes.len()
    }

    /// The first branch with a token a vocabulary of `vocab_size` lacks, and that token.
    pub fn token_beyond(&self, vocab_size: usize) -> Option<(usize, u32)> {
        self.nodes.iter().enumerate().find_map(|(j, node)| {
            let id = node.path.iter().find(|&&id| id as usize >= vocab_size)?;
            Some((j, *id))
        })
    }

    /// The branches hanging from `parent`, in the order made.
    pub fn children(&self, parent: Parent) -> impl Iterator<Item = usize> + '_ {
        (0..self.nodes.len()).filter(move |&j| self.nodes[j].parent == parent)
    }
}

/// The index in the run of a sample or branch.
pub fn run_index(parent: Parent, num_samples: u32) -> u32 {
    match parent {
        Parent::Sample(sample) => sample,
        Parent::Branch(j) => num_samples + u32::try_from(j).unwrap_or(u32::MAX - num_samples),
    }
}

/// A run's sample or branch from its index in the run.
pub fn parent_of(index: u32, num_samples: u32) -> Parent {
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
        // A deletion's undo would bring back branches of the old text.
        *tree = Tree::default();
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
            deleted: None,
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
            deleted: None,
        };
        assert_eq!(tree.prune(2), 2);
        assert_eq!(tree.nodes, [node(Parent::Sample(0))]);
    }

    #[test]
    fn a_deletion_is_undone_exactly_until_the_tree_changes() {
        let nodes = vec![
            node(Parent::Sample(0)),
            node(Parent::Branch(0)),
            node(Parent::Sample(1)),
            node(Parent::Branch(1)),
        ];
        let mut tree = Tree {
            nodes: nodes.clone(),
            deleted: None,
        };
        assert_eq!(tree.undelete(), Err(NoUndo::NothingDeleted));
        let taken = Subtree {
            branch: 1,
            descendants: 1,
        };
        assert_eq!(tree.delete(1), taken);
        assert_eq!(tree.nodes.len(), 2);
        assert_eq!(tree.undelete(), Ok(taken));
        assert_eq!(tree.nodes, nodes, "every branch back in its place");
        assert_eq!(tree.undelete(), Err(NoUndo::NothingDeleted), "undone once");

        tree.delete(0);
        tree.nodes.push(node(Parent::Sample(2)));
        assert_eq!(tree.undelete(), Err(NoUndo::ChangedSince));
    }
}
