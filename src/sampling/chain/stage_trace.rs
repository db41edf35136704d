//! A step's trace through the chain, and how it reads: the stages that acted, and what befell
//! each traced token. The playground's inspector and a rendered page say it alike.

use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// What one stage left of the traced tokens: each one's logit and probability among the
/// survivors, `None` once the stage (or an earlier one) removed it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageTrace {
    /// `model` for the logits as the model gave them, else the stage's name; owned when read
    /// back from a results file.
    pub stage: Cow<'static, str>,
    pub tokens: Vec<Option<(f32, f32)>>,
}

/// Stages that move logits rather than cut: their shifts are told as `DRY -2.10`.
const SHIFTING: [&str; 3] = ["penalties", "DRY", "logit_bias"];
/// Stages that give every logit a new value (a shift would say nothing): told by the
/// probability before and after, `adaptive_p 0.120→0.031`.
const RESHAPING: [&str; 1] = ["adaptive_p"];

impl StageTrace {
    pub fn new(stage: impl Into<Cow<'static, str>>, tokens: Vec<Option<(f32, f32)>>) -> Self {
        Self {
            stage: stage.into(),
            tokens,
        }
    }

    /// The model's stage and those that changed something for a traced token: a filter that
    /// is off leaves every token as it was, and tells nothing.
    pub fn acting(stages: &[StageTrace]) -> impl Iterator<Item = &StageTrace> {
        stages
            .iter()
            .enumerate()
            .filter(|&(i, stage)| i == 0 || stage.tokens != stages[i - 1].tokens)
            .map(|(_, stage)| stage)
    }

    /// What the chain did to the traced token at `index`: its logit shifts, the probability a
    /// reshaping stage gave it, and the stage that cut it (`DRY -2.10`, `adaptive_p
    /// 0.120→0.031`, `cut by top_p`); empty when it went through untouched.
    pub fn fate(stages: &[StageTrace], index: usize) -> Vec<String> {
        let mut parts = Vec::new();
        for pair in stages.windows(2) {
            let (before, after) = (pair[0].tokens.get(index), pair[1].tokens.get(index));
            let stage = &pair[1].stage;
            match (before.copied().flatten(), after.copied().flatten()) {
                (Some(_), None) => {
                    parts.push(format!("cut by {stage}"));
                    break;
                }
                (Some((a, _)), Some((b, _))) if SHIFTING.contains(&&**stage) && a != b => {
                    parts.push(format!("{stage} {:+.2}", b - a));
                }
                (Some((_, p)), Some((_, q))) if RESHAPING.contains(&&**stage) => {
                    parts.push(format!("{stage} {p:.3}→{q:.3}"));
                }
                _ => {}
            }
        }
        parts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fate_lists_shifts_then_the_cutting_stage() {
        let stages = [
            StageTrace::new("model", vec![Some((2.0, 0.5)), Some((1.0, 0.2))]),
            StageTrace::new("DRY", vec![Some((2.0, 0.6)), Some((-1.1, 0.05))]),
            StageTrace::new("top_k", vec![Some((2.0, 0.6)), Some((-1.1, 0.05))]),
            StageTrace::new("top_p", vec![Some((2.0, 1.0)), None]),
        ];
        assert_eq!(StageTrace::fate(&stages, 1), ["DRY -2.10", "cut by top_p"]);
        assert!(StageTrace::fate(&stages, 0).is_empty());
    }

    #[test]
    fn a_reshaping_stage_is_told_by_the_probabilities_it_gave() {
        let stages = [
            StageTrace::new("model", vec![Some((2.0, 0.6)), Some((1.0, 0.2))]),
            StageTrace::new("min_p", vec![Some((2.0, 0.75)), Some((1.0, 0.25))]),
            StageTrace::new("adaptive_p", vec![Some((0.0, 0.01)), Some((5.0, 0.99))]),
        ];
        assert_eq!(StageTrace::fate(&stages, 1), ["adaptive_p 0.250→0.990"]);
    }

    #[test]
    fn stages_that_changed_nothing_are_left_out_and_fates_stay() {
        let stages = [
            StageTrace::new("model", vec![Some((2.0, 0.5)), Some((1.0, 0.2))]),
            StageTrace::new("penalties", vec![Some((2.0, 0.5)), Some((1.0, 0.2))]),
            StageTrace::new("DRY", vec![Some((2.0, 0.6)), Some((-1.1, 0.05))]),
            StageTrace::new("top_k", vec![Some((2.0, 0.6)), Some((-1.1, 0.05))]),
            StageTrace::new("top_p", vec![Some((2.0, 1.0)), None]),
        ];
        let acting: Vec<StageTrace> = StageTrace::acting(&stages).cloned().collect();
        let names: Vec<&str> = acting.iter().map(|s| &*s.stage).collect();
        assert_eq!(names, ["model", "DRY", "top_p"]);
        assert_eq!(
            StageTrace::fate(&acting, 1),
            StageTrace::fate(&stages, 1),
            "a stage that changed nothing shifts and cuts nothing"
        );
    }
}
