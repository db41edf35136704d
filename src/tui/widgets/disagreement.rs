//! How the other compared models see a column's tokens (see
//! [`crate::response::disagreement`]): the probability the disagreement heatmap colours a token
//! by, and the inspector's lines at the cursor. With another vocabulary a token may carry the
//! probability of a group of tokens, or none (drawn dim as not comparable).

use crate::response::{CrossScore, PerToken};
use crate::tui::theme::Theme;
use ratatui::text::{Line, Span};

/// The first scoring model with figures for a column's tokens: the one the heatmap shows.
fn first_with_figures(cross: &[CrossScore]) -> Option<(&CrossScore, &[Option<f32>])> {
    cross.iter().find_map(|score| {
        let logprobs = score.per_token.as_ref()?.logprobs.as_deref()?;
        Some((score, logprobs))
    })
}

/// The raw probability the first other model with per-token figures gives token `token`;
/// with another vocabulary, that of the group of tokens it ends (see
/// [`crate::response::alignment`]). `None` before it scored the sample, or where it has no
/// figure for the token.
pub fn other_prob(cross: &[CrossScore], token: usize) -> Option<f32> {
    let (_, logprobs) = first_with_figures(cross)?;
    logprobs.get(token).copied().flatten().map(f32::exp)
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
        let text = match score.per_token.as_ref().map(|p| figures_at(p, token)) {
            Some(Figures {
                logprob: Some(lp),
                rank,
                kl,
                covers,
            }) => {
                let rank = rank.map_or("rank –".to_owned(), |rank| format!("rank {rank}"));
                match (covers, kl) {
                    // Another vocabulary: no KL, and the logprob may be of a group.
                    (Some(n), _) if n > 1 => format!("lp {lp:.3} of {n} tokens  {rank}"),
                    (Some(_), _) => format!("lp {lp:.3}  {rank}"),
                    (None, kl) => {
                        let kl = kl.map_or("KL –".to_owned(), |kl| format!("KL {kl:.4}"));
                        format!("lp {lp:.3}  {rank}  {kl}")
                    }
                }
            }
            Some(Figures {
                covers: Some(_), ..
            }) => "not comparable here".to_owned(),
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
    /// With another vocabulary, how many tokens the logprob is of.
    covers: Option<u32>,
}

fn figures_at(per_token: &PerToken, token: usize) -> Figures {
    Figures {
        logprob: at(&per_token.logprobs, token).flatten(),
        rank: at(&per_token.ranks, token).flatten(),
        kl: at(&per_token.kl, token),
        covers: at(&per_token.covers, token),
    }
}

fn at<T: Copy>(figures: &Option<Vec<T>>, token: usize) -> Option<T> {
    figures.as_ref().and_then(|v| v.get(token).copied())
}
