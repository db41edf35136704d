//! The inspector: everything the sampler said about the token under the cursor, and its
//! alternatives as bars.
//!
//! It is drawn in the params panel's place while the columns have the focus: the params keys do
//! not apply then, the panel is the only one tall enough for a list of alternatives without
//! taking rows from the columns, and it sits beside the text being inspected.

use super::cells::{fit, word_wrap};
use super::chain_view;
use super::columns::{Column, Columns};
use super::legend;
use super::spark;
use crate::engine::{Alternative, TokenEvent};
use crate::params::TokenText;
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Wrap};

/// Cells for an alternative's quoted text.
const TEXT_WIDTH: usize = 10;
/// `▶ ` before the chosen alternative, blanks before the others.
const MARK_WIDTH: usize = 2;
/// ` 3`: the alternative's rank by raw probability.
const RANK_WIDTH: usize = 3;
/// ` 0.29`: one probability after the bar, raw or processed.
const NUMBER_WIDTH: usize = 5;
/// Cells before the bar: the mark, the rank, the text and a space.
const LEAD_WIDTH: usize = MARK_WIDTH + RANK_WIDTH + TEXT_WIDTH + 1;
const LABEL_WIDTH: usize = 9;

/// How an alternative's line shares the panel's width: the numbers come first (the processed
/// probability goes when the raw one alone fits), and the bar takes what is left.
struct Widths {
    bar: usize,
    kept: bool,
}

impl Widths {
    fn new(width: usize) -> Self {
        let kept = width >= LEAD_WIDTH + 2 * NUMBER_WIDTH;
        let bar = width.saturating_sub(LEAD_WIDTH + NUMBER_WIDTH * (1 + usize::from(kept)));
        Self { bar, kept }
    }

    /// The list's header: the first of `headings` that fits before the numbers' titles, which
    /// stay over their columns (`raw  kept`).
    fn header(&self, headings: &[&str]) -> String {
        let (titles, numbers) = if self.kept {
            ("raw  kept", 2 * NUMBER_WIDTH)
        } else {
            ("raw", NUMBER_WIDTH)
        };
        let room = LEAD_WIDTH + self.bar;
        let heading = headings
            .iter()
            .find(|h| h.chars().count() <= room)
            .unwrap_or(&"");
        format!("{heading:<room$}{titles:>numbers$}")
    }
}

/// Eighths of a cell, for bars finer than whole cells.
const EIGHTHS: [&str; 8] = ["", "▏", "▎", "▍", "▌", "▋", "▊", "▉"];

/// What the inspector is told beside the columns.
pub struct Context<'a> {
    /// How many alternatives the run's response keeps per token (the parameter), so that the
    /// list shows which of them a caller of the API would get.
    pub logprobs: Option<u32>,
    /// The server of the cursor column's model, when one runs it, whose numbers are raw only.
    pub served: Option<&'a str>,
    /// The tokens the cursor column's run watched, in the order of each token's `watched`.
    pub watch: &'a [TokenText],
}

pub fn render(frame: &mut Frame, area: Rect, columns: &Columns, context: &Context, theme: &Theme) {
    let &Context {
        logprobs,
        served,
        watch,
    } = context;
    let cursor = columns.cursor_token();
    let title = match cursor {
        Some((column, token)) => format!(
            " inspect #{} · token {}/{} ",
            columns.columns[column].sample,
            token + 1,
            columns.columns[column].tokens.len()
        ),
        None => " inspect ".to_owned(),
    };
    // What the token colours mean, where the eye reads the token's figures.
    let mut legend = vec![Span::raw(" ")];
    legend.extend(legend::spans(
        columns.heat_name().unwrap_or_default(),
        theme,
    ));
    legend.push(Span::raw(" "));
    let block = Block::bordered()
        .title(Span::styled(title, theme.title))
        .title_bottom(Line::from(legend))
        .border_style(theme.frame(true));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    match cursor {
        Some((column, token)) => {
            let column = &columns.columns[column];
            let event = &column.tokens[token];
            let shown = Shown {
                logprobs,
                pick: columns.pick,
                proposal: column.stepping && token + 1 == column.tokens.len(),
            };
            let width = usize::from(inner.width);
            // The token and its alternatives fit the width (the clicks find them by line);
            // what follows wraps.
            let listed = token_lines(event, &shown, width, theme);
            let listed_height = u16::try_from(listed.len()).unwrap_or(u16::MAX);
            frame.render_widget(Paragraph::new(listed), inner);
            let mut lines = Vec::new();
            if let Some(server) = served {
                let others = event.top.iter().filter(|a| a.id != event.id).count();
                lines.extend(
                    [
                        format!("served by {server}:"),
                        "raw logprobs only, kept = raw;".to_owned(),
                        format!("it listed {others} other tokens"),
                    ]
                    .map(|text| Line::styled(text, theme.dim)),
                );
            }
            lines.extend(watched_lines(
                column,
                token,
                watch,
                usize::from(inner.width),
                theme,
            ));
            lines.extend(super::disagreement::lines(&column.cross, token, theme));
            let trace = column.trace.as_ref().filter(|t| t.step == token);
            lines.extend(chain_view::lines(event, trace, theme));
            let below = Rect {
                y: inner.y + listed_height.min(inner.height),
                height: inner.height.saturating_sub(listed_height),
                ..inner
            };
            frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), below);
        }
        None => frame.render_widget(
            Paragraph::new(Line::styled("no token under the cursor yet", theme.dim))
                .wrap(Wrap { trim: false }),
            inner,
        ),
    }
}

/// How the alternatives are shown: which the response keeps, which is highlighted to branch
/// from, and whether the token is a step's proposal.
struct Shown {
    logprobs: Option<u32>,
    pick: Option<usize>,
    proposal: bool,
}

/// The place of each alternative's line among the inspector's lines, under the `head` lines
/// of the token and the list's header (a rule goes under the ones `logprobs` keeps), so that a
/// click finds the alternative it drew.
fn alternative_rows(
    count: usize,
    logprobs: Option<u32>,
    head: usize,
) -> impl Iterator<Item = usize> {
    let kept = logprobs.map_or(0, |n| n as usize);
    (0..count).map(move |i| head + 1 + i + usize::from(i >= kept))
}

/// The alternative of `token` drawn on line `row` of an inspector `width` cells wide inside.
pub fn alternative_at(
    token: &TokenEvent,
    logprobs: Option<u32>,
    width: usize,
    row: usize,
) -> Option<usize> {
    let head = head_rows(token, width).len();
    alternative_rows(token.top.len(), logprobs, head).position(|r| r == row)
}

/// The token's figures above its alternatives as (label, value) rows, a value too long for
/// the panel going on under its label.
fn head_rows(token: &TokenEvent, width: usize) -> Vec<(&'static str, String)> {
    let own_text = token
        .top
        .iter()
        .find(|a| a.id == token.id)
        .map_or(token.text.as_str(), |a| a.text.as_str());
    let mut rows = vec![
        ("id", token.id.to_string()),
        ("text", quoted(own_text)),
        ("logprob", format!("{:.3}", token.logprob)),
        ("raw p", format!("{:.3}", token.logprob.exp())),
        ("kept p", format!("{:.3}", token.prob)),
        ("rank", token.rank.to_string()),
    ];
    // What the constraint (structured outputs) cut, in the row that parts the head.
    match token.constraint {
        Some(cut) if cut.forced() => rows.push(("allowed", "this token only (forced)".into())),
        Some(cut) => rows.push((
            "allowed",
            format!(
                "{} tokens · {:.1}% of raw p refused",
                cut.allowed,
                cut.refused * 100.0
            ),
        )),
        None => rows.push(("", String::new())),
    }
    let room = width.saturating_sub(LABEL_WIDTH);
    let mut folded = Vec::new();
    for (label, value) in rows {
        // Too narrow to fold under a label: the value is cut where the panel ends.
        let pieces = if room < 8 {
            vec![value]
        } else {
            word_wrap(&value, room)
        };
        for (i, piece) in pieces.into_iter().enumerate() {
            folded.push((if i == 0 { label } else { "" }, piece));
        }
    }
    folded
}

fn token_lines<'a>(
    token: &TokenEvent,
    shown: &Shown,
    width: usize,
    theme: &Theme,
) -> Vec<Line<'a>> {
    let logprobs = shown.logprobs;
    let head = head_rows(token, width);
    let mut lines: Vec<Line> = head
        .iter()
        .map(|(label, value)| {
            Line::from(vec![
                Span::styled(format!("{label:<LABEL_WIDTH$}"), theme.dim),
                Span::styled(value.clone(), theme.value),
            ])
        })
        .collect();
    let widths = Widths::new(width);
    // The first fits the panel's usual width; the others narrower ones.
    let headings: &[&str] = if shown.proposal {
        &["Space: ▶ · Enter: pick", "Space: take ▶"]
    } else if shown.pick.is_some() {
        &["Enter: branch from it", "Enter: branch"]
    } else {
        &["alternatives · [ ] pick", "alternatives"]
    };
    lines.push(Line::styled(widths.header(headings), theme.dim));
    let rows: Vec<usize> = alternative_rows(token.top.len(), logprobs, head.len()).collect();
    for (i, a) in token.top.iter().enumerate() {
        if lines.len() < rows[i] {
            lines.push(Line::styled(kept_rule(logprobs, width), theme.dim));
        }
        let mut line = alternative_line(a, i + 1, a.id == token.id, &widths, theme);
        if shown.pick == Some(i) {
            line = line.patch_style(theme.selected);
        }
        lines.push(line);
    }
    lines
}

/// Each watched token at the cursor: its raw logprob and probability, then its probability
/// along the whole sample (`▁` to `█` up to 1), the cursor's cell lit.
fn watched_lines<'a>(
    column: &Column,
    token: usize,
    watch: &[TokenText],
    width: usize,
    theme: &Theme,
) -> Vec<Line<'a>> {
    if watch.is_empty() || column.tokens[token].watched.is_empty() {
        return Vec::new();
    }
    let numbers = 14;
    let chart_width = width.saturating_sub(TEXT_WIDTH + 1 + numbers + 1);
    let mut lines = vec![
        Line::default(),
        Line::styled(
            format!(
                "{:<w$}{:>numbers$}",
                "watched",
                "lp     p",
                w = TEXT_WIDTH + 1
            ),
            theme.dim,
        ),
    ];
    for (i, item) in watch.iter().enumerate() {
        let name = match item {
            TokenText::Text(text) => quoted(text),
            TokenText::Token(id) => format!("#{id}"),
        };
        let Some(&lp) = column.tokens[token].watched.get(i) else {
            continue;
        };
        let along: Vec<f32> = column
            .tokens
            .iter()
            .map(|t| t.watched.get(i).map_or(0.0, |lp| lp.exp()))
            .collect();
        let mut line = vec![
            Span::styled(fit(&name, TEXT_WIDTH), theme.value),
            Span::styled(format!(" {lp:>7.2} {:>5.3} ", lp.exp()), theme.value),
        ];
        if let Some((chart, at)) = spark::chart(&along, 1.0, chart_width, Some(token)) {
            let lit = theme.gauge_filled.add_modifier(Modifier::REVERSED);
            line.extend(spark::spans(&chart, at, theme.gauge_filled, lit));
        }
        lines.push(Line::from(line));
    }
    lines
}

/// The line under the alternatives the response keeps (`logprobs` asks for that many);
/// short, as the panel is narrow.
fn kept_rule(logprobs: Option<u32>, width: usize) -> String {
    let label = match logprobs {
        None | Some(0) => " logprobs off: none kept ".to_owned(),
        Some(n) => format!(" above: kept by logprobs {n} "),
    };
    let dashes = width.saturating_sub(label.chars().count()) / 2;
    format!("{}{label}{}", "┄".repeat(dashes), "┄".repeat(dashes))
}

/// `▶ " the"     ██████▍    0.29 0.41`: the bar's length is the raw probability; a token
/// the filters removed is dimmed, the chosen one marked.
fn alternative_line<'a>(
    a: &Alternative,
    rank: usize,
    chosen: bool,
    widths: &Widths,
    theme: &Theme,
) -> Line<'a> {
    let raw = a.logprob.exp();
    let (text, bar, numbers) = if a.prob > 0.0 {
        (theme.value, theme.gauge_filled, theme.value)
    } else {
        (theme.dim, theme.dim, theme.dim)
    };
    let emphasis = |style: Style| {
        if chosen {
            style.add_modifier(Modifier::BOLD)
        } else {
            style
        }
    };
    Line::from(vec![
        Span::styled(if chosen { "▶ " } else { "  " }, emphasis(text)),
        Span::styled(format!("{rank:>2} "), theme.dim),
        Span::styled(fit(&quoted(&a.text), TEXT_WIDTH), emphasis(text)),
        Span::raw(" "),
        Span::styled(bar_text(raw, widths.bar), bar),
        Span::styled(
            if widths.kept {
                format!(" {raw:.2} {:.2}", a.prob)
            } else {
                format!(" {raw:.2}")
            },
            emphasis(numbers),
        ),
    ])
}

/// The token's text as a Rust string literal: `" the"`, `"\n"`.
fn quoted(text: &str) -> String {
    format!("\"{}\"", text.escape_debug())
}

/// A bar of `fraction` of `width` cells, in eighths of a cell, padded to `width`.
fn bar_text(fraction: f32, width: usize) -> String {
    let eighths = (fraction.clamp(0.0, 1.0) * (width * 8) as f32).round() as usize;
    let (full, part) = (eighths / 8, eighths % 8);
    let mut bar = "█".repeat(full) + EIGHTHS[part];
    let used = full + usize::from(part > 0);
    bar.push_str(&" ".repeat(width - used));
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_are_as_long_as_the_probability_in_eighths() {
        assert_eq!(bar_text(0.5, 8), "████    ");
        assert_eq!(bar_text(1.0, 4), "████");
        assert_eq!(bar_text(0.0, 3), "   ");
        assert_eq!(bar_text(0.3, 5), "█▌   ");
        assert_eq!(bar_text(f32::NAN, 2).chars().count(), 2);
    }

    #[test]
    fn the_header_keeps_its_numbers_titles_over_their_columns_at_every_width() {
        let headings = ["alternatives · [ ] pick", "alternatives"];
        let header = |width| Widths::new(width).header(&headings);
        assert_eq!(header(34), format!("{:<24} raw  kept", headings[0]));
        assert_eq!(header(28), format!("{:<18} raw  kept", headings[1]));
        assert_eq!(header(22), format!("{:<17}  raw", headings[1]));
        for width in 0..80 {
            let widths = Widths::new(width);
            let line = LEAD_WIDTH + widths.bar + NUMBER_WIDTH * (1 + usize::from(widths.kept));
            assert_eq!(header(width).chars().count(), line, "{width}");
            assert!(line <= width.max(LEAD_WIDTH + NUMBER_WIDTH), "{width}");
        }
    }

    #[test]
    fn texts_are_quoted_escaped_and_fitted() {
        assert_eq!(quoted("\n"), r#""\n""#);
        assert_eq!(quoted(" the"), r#"" the""#);
        assert_eq!(fit(r#"" the""#, 8), r#"" the"  "#);
        assert_eq!(fit(r#""abcdefghij""#, 6), r#""abcd…"#);
        assert_eq!(fit("日本語", 5), "日本…");
        assert_eq!(fit("", 0), "");
    }
}
