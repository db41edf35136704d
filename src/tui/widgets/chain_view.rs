//! The inspector's chain section: for the token under the cursor, its probability after every
//! stage of the engine's chain in the order the stages ran, and for each alternative the stage
//! that removed it and the logit shifts penalties and biases gave it.

use crate::engine::TokenEvent;
use crate::sampling::StageTrace;
use crate::tui::theme::Theme;
use ratatui::text::{Line, Span};

/// The trace of one token of a column: asked for when the cursor lands on it.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenTrace {
    /// The token's index in its column.
    pub step: usize,
    /// `None` while the engine is tracing.
    pub result: Option<Result<Vec<StageTrace>, String>>,
}

/// Stages that move logits rather than cut: their shifts are shown as `DRY -2.10`.
const SHIFTING: [&str; 3] = ["penalties", "DRY", "logit_bias"];

const STAGE_WIDTH: usize = 13;

pub fn lines<'a>(token: &TokenEvent, trace: Option<&TokenTrace>, theme: &Theme) -> Vec<Line<'a>> {
    let mut lines = vec![Line::default()];
    let stages = match trace.map(|t| &t.result) {
        None => {
            lines.push(Line::styled("chain: when the sample has ended", theme.dim));
            return lines;
        }
        Some(None) => {
            lines.push(Line::styled("chain: tracing…", theme.dim));
            return lines;
        }
        Some(Some(Err(message))) => {
            lines.push(Line::styled(format!("chain: {message}"), theme.dim));
            return lines;
        }
        Some(Some(Ok(stages))) => stages,
    };
    lines.push(Line::styled("chain, in the order it ran", theme.dim));
    let ids: Vec<u32> = token.top.iter().map(|a| a.id).collect();
    if let Some(chosen) = ids.iter().position(|&id| id == token.id) {
        // Stages that left every traced token as it was (a filter that is off) are not listed.
        let acted = stages
            .iter()
            .enumerate()
            .filter(|&(i, stage)| i == 0 || stage.tokens != stages[i - 1].tokens)
            .map(|(_, stage)| stage);
        for stage in acted {
            let p = stage.tokens.get(chosen).copied().flatten();
            lines.push(Line::from(vec![
                Span::styled(format!("  {:<STAGE_WIDTH$}", stage.stage), theme.dim),
                Span::styled(
                    p.map_or_else(|| "cut".to_owned(), |(_, p)| format!("{p:.3}")),
                    theme.value,
                ),
            ]));
        }
    }
    for (index, alternative) in token.top.iter().enumerate() {
        if alternative.id == token.id {
            continue;
        }
        let fate = fate(stages, index);
        if fate.is_empty() {
            continue;
        }
        lines.push(Line::styled(
            format!("  {:?}", alternative.text),
            theme.value,
        ));
        lines.extend(
            fate.into_iter()
                .map(|part| Line::styled(format!("    {part}"), theme.dim)),
        );
    }
    lines
}

/// What the chain did to the traced token at `index`: its logit shifts and the stage that cut
/// it (`DRY -2.10`, `cut by top_p`); empty when it went through untouched.
fn fate(stages: &[StageTrace], index: usize) -> Vec<String> {
    let mut parts = Vec::new();
    for pair in stages.windows(2) {
        let (before, after) = (pair[0].tokens.get(index), pair[1].tokens.get(index));
        match (before.copied().flatten(), after.copied().flatten()) {
            (Some(_), None) => {
                parts.push(format!("cut by {}", pair[1].stage));
                break;
            }
            (Some((a, _)), Some((b, _))) if SHIFTING.contains(&pair[1].stage) && a != b => {
                parts.push(format!("{} {:+.2}", pair[1].stage, b - a));
            }
            _ => {}
        }
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(name: &'static str, tokens: &[Option<(f32, f32)>]) -> StageTrace {
        StageTrace {
            stage: name,
            tokens: tokens.to_vec(),
        }
    }

    #[test]
    fn a_fate_lists_shifts_then_the_cutting_stage() {
        let stages = [
            stage("model", &[Some((2.0, 0.5)), Some((1.0, 0.2))]),
            stage("DRY", &[Some((2.0, 0.6)), Some((-1.1, 0.05))]),
            stage("top_k", &[Some((2.0, 0.6)), Some((-1.1, 0.05))]),
            stage("top_p", &[Some((2.0, 1.0)), None]),
        ];
        assert_eq!(fate(&stages, 1), ["DRY -2.10", "cut by top_p"]);
        assert!(fate(&stages, 0).is_empty());
    }
}
