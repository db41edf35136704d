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
        for stage in StageTrace::acting(stages) {
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
        let fate = StageTrace::fate(stages, index);
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
