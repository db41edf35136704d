//! How the other compared models see a column's tokens (see
//! [`crate::response::disagreement`]): the probability the disagreement heatmap colours a token
//! by, and the inspector's lines at the cursor.

use crate::response::{CrossScore, PerToken};
use crate::tui::theme::Theme;
use ratatui::text::{Line, Span};

/// The first scoring model with figures for a column's tokens: the one the heatmap shows.
fn first_with_figures(cross: &[CrossScore]) -> Option<(&CrossScore, &[f32])> {
    cross.iter().find_map(|score| {
        let logprobs = score.per_token.as_ref()?.logprobs.as_deref()?;
        Some((score, logprobs))
    })
}

/// The raw probability the first other model with per-token figures gives token `token`;
/// `None` before it scored the sample, or where it has no figures (another vocabulary).
pub fn other_prob(cross: &[CrossScore], token: usize) -> Option<f32> {
    let (_, logprobs) = first_with_figures(cross)?;
    logprobs.get(token).map(|lp| lp.exp())
}

/// The model the disagreement heatmap of a column shows.
pub fn shown_model(cross: &[CrossScore]) -> Option<&str> {
    first_with_figures(cross).map(|(score, _)| score.model.as_str())
}

/// For the inspector: per scoring model, token `token`'s logprob and rank under it and the KL
/// there, or why they are missing.
pub fn lines<'a>(cross: &[CrossScore], token: usize, theme: &Theme) -> Vec<Line<'a>> {
    let mut lines = Vec::new();
    for score in cross {
        if lines.is_empty() {
            lines.push(Line::default());
        }
        let figures = score.per_token.as_ref().map(|p| figures_at(p, token));
        let text = match figures {
            Some(Figures {
                logprob: Some(lp),
                rank: Some(rank),
                kl,
            }) => {
                let kl = kl.map_or("KL –".to_owned(), |kl| format!("KL {kl:.4}"));
                format!("lp {lp:.3}  rank {rank}  {kl}")
            }
            _ => "no per-token figures".to_owned(),
        };
        lines.push(Line::from(vec![
            Span::styled(format!("⇄{} ", score.model), theme.dim),
            Span::styled(text, theme.value),
        ]));
        if let Some(reason) = score
            .per_token
            .as_ref()
            .and_then(|p| p.null_reason.as_ref())
        {
            lines.push(Line::styled(format!("  {reason}"), theme.dim));
        }
    }
    lines
}

struct Figures {
    logprob: Option<f32>,
    rank: Option<u32>,
    kl: Option<f64>,
}

fn figures_at(per_token: &PerToken, token: usize) -> Figures {
    Figures {
        logprob: per_token
            .logprobs
            .as_ref()
            .and_then(|v| v.get(token).copied()),
        rank: per_token.ranks.as_ref().and_then(|v| v.get(token).copied()),
        kl: per_token.kl.as_ref().and_then(|v| v.get(token).copied()),
    }
}
