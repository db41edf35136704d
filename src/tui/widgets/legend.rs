//! The heatmap's legend: what the token colours mean, for the probability that colours them,
//! on the status bar where it has room and on the inspector's edge.

use super::columns::Heat;
use crate::tui::theme::Theme;
use ratatui::text::Span;

/// `kept p` and the theme's legend: each gradient stop's probability on its colour side by
/// side, or without colours the weights that stand for them (`bold <0.1 italic <0.5`).
pub fn spans(heat: Heat, theme: &Theme) -> Vec<Span<'static>> {
    let name = match heat {
        Heat::Kept => "kept p ",
        Heat::Raw => "raw p ",
        Heat::Other => "other model's p ",
    };
    let mut spans = vec![Span::raw(name)];
    for (i, (label, style)) in theme.heat_legend().into_iter().enumerate() {
        if i > 0 && theme.gradient.is_empty() {
            spans.push(Span::raw(" "));
        }
        spans.push(Span::styled(label, style));
    }
    spans
}
