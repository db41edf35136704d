//! The candidates of one step: the whole vocabulary held densely (index = id) until a stage
//! cuts it, then a list of survivors.

use super::super::adjust::Logits;
use super::super::constraint::Mask;
use super::super::select::{collect_top_k, key_id};
use super::super::softmax::sanitize;
use std::collections::HashMap;

/// One candidate: its token, its current logit, and its probability after the last softmax.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cand {
    pub id: u32,
    pub logit: f32,
    pub p: f32,
}

/// The candidates of one step.
#[derive(Debug, Clone, Default)]
pub struct Pool {
    /// The logit of every token by id, while no stage has listed the candidates.
    pub(in crate::sampling) dense: Vec<f32>,
    pub(in crate::sampling) listed: bool,
    pub(in crate::sampling) cands: Vec<Cand>,
    /// Whether `cands` is in descending logit order (ties to the lower id).
    pub(in crate::sampling) sorted: bool,
    /// The position of each id in `cands`, built when a sparse stage needs it.
    pub(in crate::sampling) index: HashMap<u32, usize>,
    pub(in crate::sampling) keys: Vec<u64>,
    /// Each candidate's probability as adaptive-p received it, when it ran this step: what the
    /// sample's memory learns from once the token is chosen.
    pub(in crate::sampling) adaptive_input: Vec<(u32, f32)>,
}

impl Logits for Pool {
    fn adjust(&mut self, id: u32, f: impl FnOnce(f32) -> f32) {
        if !self.listed {
            return self.dense.as_mut_slice().adjust(id, f);
        }
        if self.index.is_empty() {
            self.index = self
                .cands
                .iter()
                .enumerate()
                .map(|(i, c)| (c.id, i))
                .collect();
        }
        if let Some(&i) = self.index.get(&id) {
            self.cands[i].logit = f(self.cands[i].logit);
            self.sorted = false;
        }
    }

    fn keep_only(&mut self, allowed: &[u32]) {
        if self.listed {
            self.retain(|c| allowed.contains(&c.id));
        } else {
            self.dense.as_mut_slice().keep_only(allowed);
        }
    }

    fn keep_masked(&mut self, mask: &Mask) {
        if self.listed {
            self.retain(|c| mask.allows(c.id));
        } else {
            mask.apply(&mut self.dense);
        }
    }
}

/// Descending logit, ties to the lower id: the draw order.
fn by_logit(a: &Cand, b: &Cand) -> std::cmp::Ordering {
    b.logit.total_cmp(&a.logit).then(a.id.cmp(&b.id))
}

impl Pool {
    /// Starts a step from the model's logits (NaN read as -inf).
    pub(in crate::sampling) fn reset(&mut self, logits: &[f32]) {
        self.dense.clear();
        self.dense.extend(logits.iter().map(|&x| sanitize(x)));
        self.listed = false;
        self.cands.clear();
        self.sorted = false;
        self.index.clear();
        self.adaptive_input.clear();
    }

    pub(in crate::sampling) fn list(&mut self) {
        if !self.listed {
            self.cands = self
                .dense
                .iter()
                .enumerate()
                .map(|(id, &logit)| Cand {
                    id: id as u32,
                    logit,
                    p: 0.0,
                })
                .collect();
            self.listed = true;
        }
    }

    /// Takes `cands` as the candidates, in no particular order.
    pub(in crate::sampling) fn replace(&mut self, cands: Vec<Cand>) {
        self.cands = cands;
        self.sorted = false;
        self.index.clear();
    }

    /// Keeps the candidates `keep` says yes to.
    pub(in crate::sampling) fn retain(&mut self, keep: impl Fn(&Cand) -> bool) {
        self.cands.retain(keep);
        self.index.clear();
    }

    pub(in crate::sampling) fn truncate(&mut self, n: usize) {
        self.cands.truncate(n);
        self.index.clear();
    }

    pub(in crate::sampling) fn sort(&mut self) {
        if !self.sorted {
            self.cands.sort_unstable_by(by_logit);
            self.sorted = true;
            self.index.clear();
        }
    }

    /// llama.cpp's softmax: probabilities from the current logits, sorting first if asked.
    pub(in crate::sampling) fn softmax(&mut self, sort: bool) {
        self.list();
        if sort {
            self.sort();
        }
        let max = self
            .cands
            .iter()
            .map(|c| c.logit)
            .fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0f64;
        for c in &mut self.cands {
            c.p = if max == f32::NEG_INFINITY {
                0.0
            } else {
                (c.logit - max).exp()
            };
            sum += f64::from(c.p);
        }
        if sum > 0.0 {
            for c in &mut self.cands {
                c.p = (f64::from(c.p) / sum) as f32;
            }
        }
    }

    pub(in crate::sampling) fn len(&self) -> usize {
        if self.listed {
            self.cands.len()
        } else {
            self.dense.len()
        }
    }

    /// Keeps the `k` largest logits (ties at the edge to the lower id); listed and sorted after.
    pub(in crate::sampling) fn top_k(&mut self, k: usize) {
        self.top_k_ties(k, false);
    }

    /// [`Pool::top_k`], keeping every token tied with the k-th when `ties` says so.
    pub(in crate::sampling) fn top_k_ties(&mut self, k: usize, ties: bool) {
        if self.listed {
            self.sort();
            match self.cands.get(k.saturating_sub(1)).map(|c| c.logit) {
                Some(edge) if ties => self.retain(|c| c.logit >= edge),
                _ => self.truncate(k),
            }
        } else {
            collect_top_k(&self.dense, k, &mut self.keys);
            self.keys.sort_unstable();
            if !ties {
                self.keys.truncate(k);
            }
            self.cands = self
                .keys
                .iter()
                .map(|&key| Cand {
                    id: key_id(key),
                    logit: self.dense[key_id(key) as usize],
                    p: 0.0,
                })
                .collect();
            self.listed = true;
            self.sorted = true;
            self.index.clear();
        }
    }

    /// The logits divided by `t`; at or below 0 only the (first) largest survives, as llama.cpp's
    /// temperature does it.
    pub(in crate::sampling) fn temperature(&mut self, t: f32) {
        if !self.listed && t > 0.0 {
            self.dense.iter_mut().for_each(|l| *l /= t);
            return;
        }
        self.list();
        if t <= 0.0 {
            if let Some(best) = self.cands.iter().enumerate().fold(
                None::<(usize, f32)>,
                |best, (i, c)| match best {
                    Some((_, l)) if c.logit <= l => best,
                    _ => Some((i, c.logit)),
                },
            ) {
                for (i, c) in self.cands.iter_mut().enumerate() {
                    if i != best.0 {
                        c.logit = f32::NEG_INFINITY;
                    }
                }
            }
            return;
        }
        for c in &mut self.cands {
            c.logit /= t;
        }
    }

    /// Sorts the survivors into draw order with their final probabilities.
    pub(in crate::sampling) fn finish(&mut self) {
        self.softmax(true);
    }

    /// The inverse CDF at `u` over the candidates in draw order; `None` when nothing is left.
    pub(in crate::sampling) fn draw(&self, u: f64) -> Option<usize> {
        let total: f64 = self.cands.iter().map(|c| f64::from(c.p)).sum();
        let target = u * total;
        let mut mass = 0.0;
        let last = self.cands.iter().rposition(|c| c.p > 0.0)?;
        Some(
            self.cands
                .iter()
                .position(|c| {
                    mass += f64::from(c.p);
                    mass > target
                })
                .unwrap_or(last)
                .min(last),
        )
    }
}

impl Pool {
    /// Each of `ids`' logit and probability over the current candidates, `None` once removed
    /// (or at -inf): what the per-stage inspector shows after each stage.
    pub(in crate::sampling) fn snapshot(&self, ids: &[u32]) -> Vec<Option<(f32, f32)>> {
        let logits: Box<dyn Iterator<Item = f32> + '_> = if self.listed {
            Box::new(self.cands.iter().map(|c| c.logit))
        } else {
            Box::new(self.dense.iter().copied())
        };
        let values: Vec<f32> = logits.collect();
        let max = values.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let sum: f64 = values.iter().map(|&l| f64::from((l - max).exp())).sum();
        let logit_of = |id: u32| -> Option<f32> {
            if self.listed {
                self.cands.iter().find(|c| c.id == id).map(|c| c.logit)
            } else {
                self.dense.get(id as usize).copied()
            }
        };
        ids.iter()
            .map(|&id| {
                logit_of(id)
                    .filter(|&l| l > f32::NEG_INFINITY && sum > 0.0)
                    .map(|l| (l, (f64::from((l - max).exp()) / sum) as f32))
            })
            .collect()
    }
}
