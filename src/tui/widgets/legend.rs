//! The heatmap's legend: what the token colours mean, for the probability that colours them,
//! on the status bar where it has room and on the inspector's edge.

use crate::tui::theme::Theme;
use ratatui::text::Span;

/// The probability's `name` (`kept p`, see [`super::columns::Heat::name`]) and the theme's
/// legend: each gradient stop's probability on its colour side by side, or without colours the
/// weights that stand for them (`bold <0.1 italic <0.5`).
pub fn spans(name: &str, theme: &Theme) -> Vec<Span<'static>> {
    let mut spans = vec![Span::raw(format!("{name} "))];
    for (i, (label, style)) in theme.heat_legend().into_iter().enumerate() {
        if i > 0 && theme.gradient.is_empty() {
            spans.push(Span::raw(" "));
        }
        spans.push(Span::styled(label, style));
    }
    spans
}
