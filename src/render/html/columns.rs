//! A run's samples side by side, as the playground's columns: a title naming the sample (or the
//! branch and where it parts), the tokens on the theme's heatmap, and a footer with how it ended.

use super::colour;
use super::escape;
use super::hover::RunData;
use crate::model::text::byte_fallback;
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

/// `#0 seed 42`, or for a branch `#4 ←#0@12` (token 12 counted from 1, as the playground).
fn title(t: &Trajectory) -> String {
    match t.branch {
        Some(origin) => format!("#{} ←#{}@{}", t.index, origin.parent, origin.at + 1),
        None => format!("#{} seed {}", t.index, t.seed),
    }
}

/// The tokens, each on the heatmap colour of the probability its logprobs report (the model's
/// own unless `logprobs_mode` says processed); a run without per-token
/// texts (a file of a samplab before `alternatives`, sampled without `logprobs`) shows its
/// text whole and says why.
fn body(t: &Trajectory, data: &RunData, theme: &Theme) -> String {
    let Some(texts) = data.token_texts(t) else {
        return format!(
            "{}<p class=note>no per-token texts in this file (an older samplab kept them only \
             with logprobs): sample it again with this samplab to colour and inspect each \
             token</p>",
            escape::text(&t.text)
        );
    };
    let mut html = String::new();
    let probs = t.reported_probs();
    for (i, (text, &p)) in shown_texts(&texts).iter().zip(&probs).enumerate() {
        let style = colour::declarations(theme.token_style(p));
        let _ = write!(
            html,
            "<span class=t data-i={i} style=\"{style}\">{}</span>",
            escape::text(text)
        );
    }
    html
}

/// What each token adds to its column's text: its own text, except that byte-fallback pieces
/// (`<0x0A>`, `<0xE2>`) are the bytes they stand for, shown as the character they complete on
/// the token that completes it (those before it show nothing), as the playground's columns
/// show them; the hover still names each piece.
fn shown_texts(pieces: &[&str]) -> Vec<String> {
    let mut shown = Vec::with_capacity(pieces.len());
    let mut pending = Vec::new();
    for piece in pieces {
        let Some(byte) = byte_fallback(piece) else {
            shown.push(String::from_utf8_lossy(&pending).into_owned() + piece);
            pending.clear();
            continue;
        };
        pending.push(byte);
        match std::str::from_utf8(&pending) {
            Err(e) if e.error_len().is_none() => shown.push(String::new()),
            _ => {
                shown.push(String::from_utf8_lossy(&pending).into_owned());
                pending.clear();
            }
        }
    }
    if let (Some(last), false) = (shown.last_mut(), pending.is_empty()) {
        last.push_str(&String::from_utf8_lossy(&pending));
    }
    shown
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
        parts.push(format!("≠#0@{}", at + 1));
    }
    for score in t.cross_scores.iter().flatten() {
        parts.push(format!("⇄{} {}", score.model, score.perplexity_label()));
    }
    parts.join(" · ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_pieces_show_as_the_characters_they_spell() {
        let pieces = [" a", "<0x0A>", "<0xE2>", "<0x80>", "<0x99>", "s", "<0xE2>"];
        assert_eq!(
            shown_texts(&pieces),
            [" a", "\n", "", "", "\u{2019}", "s", "\u{FFFD}"],
            "a character ends on its last byte; one the sample never finished is a \
             replacement character"
        );
        assert_eq!(shown_texts(&["<0xE2>", "x"]), ["", "\u{FFFD}x"]);
    }
}
