//! A run's samples side by side, as the playground's columns: a title naming the sample (or the
//! branch and where it parts), the tokens on the theme's heatmap, and a footer with how it ended.

use super::colour;
use super::escape;
use super::hover::RunData;
use crate::response::{SampleResponse, Trajectory, stop_label};
use crate::tui::Theme;
use std::fmt::Write;

/// Every trajectory of `response` as a column; `data` holds their token texts.
pub fn columns(response: &SampleResponse, data: &RunData, theme: &Theme) -> String {
    let mut html = String::from("<div class=cols>");
    for (sample, trajectory) in response.trajectories.iter().enumerate() {
        let _ = write!(
            html,
            "<div class=col data-sample={sample}><div class=head>{}</div>\
             <div class=body>{}</div><div class=foot>{}</div></div>",
            escape::text(&title(trajectory)),
            body(trajectory, data, theme),
            escape::text(&footer(response, trajectory, data)),
        );
    }
    html.push_str("</div>");
    html
}

/// `#0 seed 42`, or for a branch `#4 ←#0@12`.
fn title(t: &Trajectory) -> String {
    match t.branch {
        Some(origin) => format!("#{} ←#{}@{}", t.index, origin.parent, origin.at),
        None => format!("#{} seed {}", t.index, t.seed),
    }
}

/// The tokens, each on the heatmap colour of its raw probability; a run without per-token
/// texts (sampled without `logprobs`) shows its text whole and says why.
fn body(t: &Trajectory, data: &RunData, theme: &Theme) -> String {
    let Some(texts) = data.token_texts(t) else {
        return format!(
            "{}<p class=note>no per-token texts in this file: sample with --set logprobs=0 \
             (or more) to colour and inspect each token</p>",
            escape::text(&t.text)
        );
    };
    let mut html = String::new();
    for (i, (text, logprob)) in texts.iter().zip(&t.logprobs).enumerate() {
        let style = colour::declarations(theme.token_style(logprob.exp()));
        let _ = write!(
            html,
            "<span class=t data-i={i} style=\"{style}\">{}</span>",
            escape::text(text)
        );
    }
    html
}

/// How the sample ended, its length, where it parts from sample 0 and what the other models
/// make of it: `stop "\n\n" · 37 tokens · ≠#0@12 · ⇄B 8.10`.
fn footer(response: &SampleResponse, t: &Trajectory, data: &RunData) -> String {
    let stop_token = match &t.stop_matched {
        Some(crate::response::StopMatched::Token(id)) => data.vocab.get(id).copied(),
        _ => None,
    };
    let mut parts = vec![
        stop_label(t.stop_reason, t.stop_matched.as_ref(), stop_token),
        format!("{} tokens", t.token_ids.len()),
    ];
    let parts_at = response
        .stats
        .as_ref()
        .and_then(|stats| stats.divergence.get(t.index as usize).copied().flatten());
    if let (None, Some(at)) = (t.branch, parts_at) {
        parts.push(format!("≠#0@{at}"));
    }
    for score in t.cross_scores.iter().flatten() {
        parts.push(format!("⇄{} {}", score.model, score.perplexity_label()));
    }
    parts.join(" · ")
}
