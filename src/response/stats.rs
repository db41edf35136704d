//! What a run's samples are like together: how diverse, how long, how they ended, which came
//! out the same and where each parts from the first. Computed from the token ids, logprobs and
//! stop reasons alone, so a served model's runs have them too.

use super::{ConstraintStep, Trajectory};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Statistics over a run's own samples (branches are the user's picks, not draws, and are left
/// out).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunStats {
    /// Distinct n-grams of token ids over all samples divided by all n-grams, for n = 1, 2, 3;
    /// null where the samples hold no n-gram that long.
    pub distinct_1: Option<f64>,
    pub distinct_2: Option<f64>,
    pub distinct_3: Option<f64>,
    pub length: Lengths,
    /// How many samples ended for each reason.
    pub stop_reasons: BTreeMap<String, usize>,
    /// The samples grouped by equal token ids, each group in index order, groups by their first
    /// sample; a sample like no other is a group of one.
    pub identical: Vec<Vec<u32>>,
    /// For each sample, the first position where its tokens part from sample 0's (where one of
    /// the two ended, if the other goes on); null for sample 0 and for samples equal to it.
    pub divergence: Vec<Option<usize>>,
    /// The mean of every generated token's `logprobs` number (its raw logprob unless
    /// `logprobs_mode` says otherwise); null when there is none.
    pub mean_logprob: Option<f64>,
    /// With a constraint (structured outputs): per step, the mean share of the model's
    /// probability it refused, and the share of steps where it left one token; absent without.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub constraint: Option<ConstraintStats>,
    /// When models are compared: per other model, the mean per-token KL of this model's raw
    /// distributions from that one's (see [`super::disagreement::mean_kl`]); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub mean_kl: Option<BTreeMap<String, f64>>,
}

/// What a run's constraint cut, over every step of its own samples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConstraintStats {
    pub mean_refused: f64,
    pub forced_share: f64,
}

impl ConstraintStats {
    /// `None` when no sample was constrained or none took a step.
    fn of(samples: &[&Trajectory]) -> Option<Self> {
        let steps: Vec<&ConstraintStep> = samples
            .iter()
            .flat_map(|t| t.constraint.iter().flatten())
            .collect();
        let n = steps.len() as f64;
        (!steps.is_empty()).then(|| Self {
            mean_refused: steps.iter().map(|s| f64::from(s.refused)).sum::<f64>() / n,
            forced_share: steps.iter().filter(|s| s.forced()).count() as f64 / n,
        })
    }
}

/// Generated tokens per sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lengths {
    pub mean: f64,
    pub min: usize,
    pub max: usize,
}

impl RunStats {
    /// The statistics of `trajectories`' own samples (branches skipped); `None` without one.
    pub fn of(trajectories: &[Trajectory]) -> Option<Self> {
        let samples: Vec<&Trajectory> =
            trajectories.iter().filter(|t| t.branch.is_none()).collect();
        let first = samples.first()?;
        let lengths: Vec<usize> = samples.iter().map(|t| t.token_ids.len()).collect();
        let mut stop_reasons = BTreeMap::new();
        for t in &samples {
            *stop_reasons
                .entry(t.stop_reason.as_str().to_owned())
                .or_default() += 1;
        }
        let logprobs: Vec<f32> = samples
            .iter()
            .flat_map(|t| t.logprobs.iter().copied())
            .collect();
        Some(Self {
            distinct_1: distinct(&samples, 1),
            distinct_2: distinct(&samples, 2),
            distinct_3: distinct(&samples, 3),
            length: Lengths {
                mean: lengths.iter().sum::<usize>() as f64 / lengths.len() as f64,
                min: lengths.iter().copied().min().unwrap_or(0),
                max: lengths.iter().copied().max().unwrap_or(0),
            },
            stop_reasons,
            identical: identical(&samples),
            divergence: samples
                .iter()
                .map(|t| parts_at(&first.token_ids, &t.token_ids))
                .collect(),
            mean_logprob: (!logprobs.is_empty()).then(|| {
                logprobs.iter().map(|&lp| f64::from(lp)).sum::<f64>() / logprobs.len() as f64
            }),
            constraint: ConstraintStats::of(&samples),
            mean_kl: None,
        })
    }

    /// The statistics as lines of text, one figure family per line: the playground's `i` and a
    /// rendered page show them alike. `trajectories` are the run's, for their mean entropies.
    pub fn describe(&self, trajectories: &[Trajectory]) -> Vec<String> {
        let ratio = |r: Option<f64>| r.map_or("–".to_owned(), |r| format!("{r:.2}"));
        let samples = self.divergence.len();
        let mut lines = vec![
            format!(
                "{samples} samples  length mean {:.1}  min {}  max {}",
                self.length.mean, self.length.min, self.length.max
            ),
            format!(
                "distinct n-grams  1: {}  2: {}  3: {}",
                ratio(self.distinct_1),
                ratio(self.distinct_2),
                ratio(self.distinct_3)
            ),
            format!(
                "ended  {}",
                self.stop_reasons
                    .iter()
                    .map(|(reason, n)| format!("{reason} {n}"))
                    .collect::<Vec<_>>()
                    .join(" · ")
            ),
        ];
        let same: Vec<String> = self
            .identical
            .iter()
            .filter(|group| group.len() > 1)
            .map(|group| {
                let names: Vec<String> = group.iter().map(|i| format!("#{i}")).collect();
                names.join(" = ")
            })
            .collect();
        lines.push(if same.is_empty() {
            "identical  none: every sample is its own".to_owned()
        } else {
            format!("identical  {}", same.join(" · "))
        });
        let parts: Vec<String> = self
            .divergence
            .iter()
            .enumerate()
            .skip(1)
            .map(|(i, at)| at.map_or(format!("#{i} same"), |at| format!("#{i}@{}", at + 1)))
            .collect();
        if !parts.is_empty() {
            lines.push(format!("parts from #0  {}", parts.join("  ")));
        }
        if let Some(mean) = self.mean_logprob {
            lines.push(format!(
                "mean logprob {mean:.3}  perplexity {:.2}",
                (-mean).exp()
            ));
        }
        let mean_of = |pick: fn(&Trajectory) -> Option<&Vec<f32>>| {
            let values: Vec<f32> = trajectories
                .iter()
                .filter(|t| t.branch.is_none())
                .filter_map(pick)
                .flatten()
                .copied()
                .collect();
            (!values.is_empty())
                .then(|| values.iter().map(|&h| f64::from(h)).sum::<f64>() / values.len() as f64)
        };
        if let (Some(raw), Some(kept)) = (
            mean_of(|t| t.entropy.as_ref()),
            mean_of(|t| t.kept_entropy.as_ref()),
        ) {
            lines.push(format!(
                "mean entropy  raw {raw:.2} nats  kept {kept:.2} nats"
            ));
        }
        for (model, kl) in self.mean_kl.iter().flatten() {
            lines.push(format!("mean KL from {model}  {kl:.4} nats"));
        }
        if let Some(cut) = self.constraint {
            lines.push(format!(
                "constraint  refused {:.1}% of the mass per step · forced {:.0}% of steps",
                cut.mean_refused * 100.0,
                cut.forced_share * 100.0
            ));
        }
        lines
    }
}

/// Distinct `n`-grams over all n-grams of every sample.
fn distinct(samples: &[&Trajectory], n: usize) -> Option<f64> {
    let mut seen: HashSet<&[u32]> = HashSet::new();
    let mut total = 0usize;
    for t in samples {
        for gram in t.token_ids.windows(n) {
            seen.insert(gram);
            total += 1;
        }
    }
    (total > 0).then(|| seen.len() as f64 / total as f64)
}

/// Sample indexes grouped by equal token ids, in order of each group's first sample.
fn identical(samples: &[&Trajectory]) -> Vec<Vec<u32>> {
    let mut groups: Vec<Vec<u32>> = Vec::new();
    let mut group_of: HashMap<&[u32], usize> = HashMap::new();
    for t in samples {
        match group_of.get(t.token_ids.as_slice()) {
            Some(&g) => groups[g].push(t.index),
            None => {
                group_of.insert(&t.token_ids, groups.len());
                groups.push(vec![t.index]);
            }
        }
    }
    groups
}

/// The first position where `b` parts from `a`; `None` when they are equal.
pub fn parts_at(a: &[u32], b: &[u32]) -> Option<usize> {
    (a != b).then(|| a.iter().zip(b).take_while(|(x, y)| x == y).count())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::response::StopReason;

    fn sample(index: u32, ids: &[u32], logprobs: &[f32], reason: StopReason) -> Trajectory {
        Trajectory {
            token_ids: ids.to_vec(),
            logprobs: logprobs.to_vec(),
            stop_reason: reason,
            ..Trajectory::empty(index, 7, None)
        }
    }

    #[test]
    fn a_hand_made_run_gives_the_figures_worked_by_hand() {
        let runs = [
            sample(
                0,
                &[1, 2, 3, 4],
                &[-1.0, -1.0, -1.0, -1.0],
                StopReason::Length,
            ),
            sample(
                1,
                &[1, 2, 3, 4],
                &[-1.0, -1.0, -1.0, -1.0],
                StopReason::Length,
            ),
            sample(2, &[1, 2, 9], &[-1.0, -2.0, -3.0], StopReason::Stop),
            sample(3, &[5], &[-0.5], StopReason::Stop),
        ];
        let mut with_branch = runs.to_vec();
        with_branch.push(Trajectory {
            branch: Some(super::super::BranchOrigin { parent: 0, at: 1 }),
            ..sample(4, &[8, 8, 8], &[0.0; 3], StopReason::Abort)
        });
        let stats = RunStats::of(&with_branch).unwrap();
        // Unigrams: 1 2 3 4 / 1 2 3 4 / 1 2 9 / 5 → 12 in all, {1,2,3,4,9,5} distinct.
        assert_eq!(stats.distinct_1, Some(6.0 / 12.0));
        // Bigrams: 3 + 3 + 2 + 0 = 8; distinct {12, 23, 34, 29}.
        assert_eq!(stats.distinct_2, Some(4.0 / 8.0));
        // Trigrams: 2 + 2 + 1 = 5; distinct {123, 234, 129}.
        assert_eq!(stats.distinct_3, Some(3.0 / 5.0));
        assert_eq!(
            stats.length,
            Lengths {
                mean: 3.0,
                min: 1,
                max: 4
            }
        );
        assert_eq!(stats.stop_reasons["length"], 2);
        assert_eq!(stats.stop_reasons["stop"], 2);
        assert!(
            !stats.stop_reasons.contains_key("abort"),
            "the branch is left out"
        );
        assert_eq!(stats.identical, vec![vec![0, 1], vec![2], vec![3]]);
        assert_eq!(stats.divergence, vec![None, None, Some(2), Some(0)]);
        // (8 × -1 - 6 - 0.5) / 12.
        assert_eq!(stats.mean_logprob, Some(-14.5 / 12.0));
    }

    #[test]
    fn empty_samples_have_no_ngrams_and_no_mean() {
        let runs = [
            sample(0, &[], &[], StopReason::Abort),
            sample(1, &[3], &[-2.0], StopReason::Stop),
        ];
        let stats = RunStats::of(&runs).unwrap();
        assert_eq!(stats.distinct_1, Some(1.0));
        assert_eq!(stats.distinct_2, None);
        assert_eq!(stats.divergence, vec![None, Some(0)]);
        assert_eq!(RunStats::of(&runs[..1]).unwrap().mean_logprob, None);
        assert!(RunStats::of(&[]).is_none());
    }

    proptest::proptest! {
        /// Groups hold exactly the samples with equal ids, and each parting point is where the
        /// ids first differ from sample 0's.
        #[test]
        fn groups_and_parting_points_agree_with_the_token_ids(
            runs in proptest::collection::vec(proptest::collection::vec(0u32..3, 0..6), 1..8)
        ) {
            let samples: Vec<Trajectory> = runs
                .iter()
                .enumerate()
                .map(|(i, ids)| sample(i as u32, ids, &vec![-1.0; ids.len()], StopReason::Length))
                .collect();
            let stats = RunStats::of(&samples).unwrap();
            let group_of = |i: usize| stats.identical.iter().position(|g| g.contains(&(i as u32)));
            for i in 0..runs.len() {
                for j in 0..runs.len() {
                    proptest::prop_assert_eq!(group_of(i) == group_of(j), runs[i] == runs[j]);
                }
                match stats.divergence[i] {
                    None => proptest::prop_assert_eq!(&runs[i], &runs[0]),
                    Some(at) => {
                        proptest::prop_assert_eq!(&runs[i][..at], &runs[0][..at]);
                        proptest::prop_assert_ne!(runs[i].get(at), runs[0].get(at));
                    }
                }
            }
        }
    }
}
