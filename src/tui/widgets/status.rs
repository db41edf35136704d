//! The status bar: model and its load progress, run timings, preset (with `*` when modified),
//! the newest error and key hints from the key map, fitted to the width by dropping the least
//! needed parts; and the log of every error and notice, which `l` shows whole.

use super::legend;
use super::params::ParamsState;
use crate::tui::model_slot::{ModelSlot, ModelStatus};
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use unicode_width::UnicodeWidthChar;

/// An error or a notice as the message log keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub text: String,
    pub error: bool,
}

/// The oldest messages go beyond this many.
const LOG_LIMIT: usize = 200;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct StatusState {
    /// The last run's error, until the next run starts.
    pub error: Option<String>,
    /// News about something the user did (a saved preset, a theme switch), until the next key.
    pub notice: Option<String>,
    /// Every error and notice, oldest first: the status bar has room for a line, and they
    /// go when the next thing happens.
    pub log: Vec<Message>,
}

impl StatusState {
    /// Shows `text` as the error of the moment and keeps it in the log.
    pub fn report_error(&mut self, text: String) {
        self.keep(&text, true);
        self.error = Some(text);
    }

    /// Shows `text` until the next key and keeps it in the log.
    pub fn notify(&mut self, text: String) {
        self.keep(&text, false);
        self.notice = Some(text);
    }

    /// Keeps `text` in the log only: for what a panel already shows until the next key.
    pub fn log_notice(&mut self, text: String) {
        self.keep(&text, false);
    }

    fn keep(&mut self, text: &str, error: bool) {
        if self.log.len() == LOG_LIMIT {
            self.log.remove(0);
        }
        self.log.push(Message {
            text: text.to_owned(),
            error,
        });
    }
}

const LOAD_GAUGE_WIDTH: usize = 10;

/// A piece of the status bar; when the bar is too narrow the pieces of the highest `rank` go
/// first, so the newest error (rank 0) stays and key hints and timings make room for it.
struct Part {
    /// Put before the part when another precedes it: ` · ` or ` │ ` between models.
    lead: &'static str,
    spans: Vec<Span<'static>>,
    rank: u8,
}

impl Part {
    fn new(lead: &'static str, spans: Vec<Span<'static>>, rank: u8) -> Self {
        Self { lead, spans, rank }
    }

    fn width(&self) -> usize {
        self.spans.iter().map(Span::width).sum()
    }
}

/// What the status bar shows, gathered by the view for one draw.
pub struct Bar<'a> {
    pub status: &'a StatusState,
    pub models: &'a [ModelSlot],
    pub params: &'a ParamsState,
    /// (keys, meaning) pairs drawn at the right end.
    pub hints: &'a [(String, &'a str)],
    /// The key that opens the message log, named before the error, which may be cut.
    pub log_key: Option<String>,
    /// The name of the probability the columns are coloured by (see [`super::columns::Heat::name`]), whose
    /// colours the legend explains; `None` while no sample is shown.
    pub legend: Option<&'static str>,
}

pub fn render(frame: &mut Frame, area: Rect, bar: Bar, theme: &Theme) {
    let Bar {
        status,
        models,
        params,
        hints,
        log_key,
        legend,
    } = bar;
    let on_bar = |style: Style| style.patch(theme.status);
    let mut parts = Vec::new();
    for (i, model) in models.iter().enumerate() {
        let (summary, timings) = model_spans(model, theme);
        parts.push(Part::new(if i > 0 { " │ " } else { "" }, summary, 3));
        if !timings.is_empty() {
            parts.push(Part::new(" · ", timings, 5));
        }
    }
    let preset = format!(
        "preset {}{}",
        params.preset_name,
        if params.modified() { "*" } else { "" }
    );
    parts.push(Part::new(" · ", vec![Span::raw(preset)], 2));
    if let Some(notice) = &status.notice {
        let notice = Span::styled(notice.clone(), on_bar(theme.value));
        parts.push(Part::new(" · ", vec![notice], 1));
    }
    if let Some(error) = &status.error {
        let mut spans = Vec::new();
        if let Some(key) = log_key {
            spans.push(Span::styled(format!("{key} log "), on_bar(theme.dim)));
        }
        spans.push(Span::styled(format!("error: {error}"), on_bar(theme.error)));
        parts.push(Part::new(" · ", spans, 0));
    }
    if let Some(name) = legend {
        // Last and the first to go: the inspector's edge shows it too.
        parts.push(Part::new(" · ", legend::spans(name, theme), 6));
    }
    let right: String = hints
        .iter()
        .map(|(keys, help)| format!("{keys} {help}"))
        .collect::<Vec<_>>()
        .join("  ")
        + " ";
    let hints = Part::new("", vec![Span::raw(right)], 4);
    let width = usize::from(area.width);
    let (left, hints) = fit(parts, hints, width);
    let right_width = hints.as_ref().map_or(0, Part::width) as u16;
    let left_width = area.width.saturating_sub(right_width);
    let mut spans = vec![Span::raw(" ")];
    for (i, part) in left.into_iter().enumerate() {
        if i > 0 {
            spans.push(Span::styled(part.lead, on_bar(theme.dim)));
        }
        spans.extend(part.spans);
    }
    let line = ellipsis(Line::from(spans), usize::from(left_width));
    frame.render_widget(
        Paragraph::new(line).style(theme.status),
        Rect {
            width: left_width,
            ..area
        },
    );
    if let Some(hints) = hints {
        let right_area = Rect {
            x: area.x + left_width,
            width: right_width,
            ..area
        };
        frame.render_widget(
            Paragraph::new(Line::from(hints.spans)).style(theme.status),
            right_area,
        );
    }
}

/// Drops parts, highest rank first, until the left ones and the hints fit `width`; the error
/// is never dropped (`ellipsis` cuts it when it is wider than the bar).
fn fit(mut left: Vec<Part>, hints: Part, width: usize) -> (Vec<Part>, Option<Part>) {
    let mut hints = Some(hints);
    let used = |left: &[Part], hints: &Option<Part>| {
        let leads: usize = left.iter().skip(1).map(|p| p.lead.chars().count()).sum();
        1 + leads
            + left.iter().map(Part::width).sum::<usize>()
            + hints.as_ref().map_or(0, Part::width)
    };
    while used(&left, &hints) > width {
        let worst = left
            .iter()
            .enumerate()
            .filter(|(_, p)| p.rank > 0)
            .max_by_key(|&(i, p)| (p.rank, i))
            .map(|(i, p)| (i, p.rank));
        match worst {
            Some((i, rank)) if hints.as_ref().is_none_or(|h| rank > h.rank) => {
                left.remove(i);
            }
            _ if hints.is_some() => hints = None,
            _ => break,
        }
    }
    (left, hints)
}

/// `line` cut to `width` cells, ending in `…` when cut.
fn ellipsis(line: Line<'static>, width: usize) -> Line<'static> {
    if line.width() <= width {
        return line;
    }
    let mut left = width.saturating_sub(1);
    let mut spans = Vec::new();
    for span in line.spans {
        let mut text = String::new();
        for c in span.content.chars() {
            let w = c.width().unwrap_or(0);
            if w > left {
                left = 0;
                break;
            }
            left -= w;
            text.push(c);
        }
        let full = text.len() == span.content.len();
        spans.push(Span::styled(text, span.style));
        if !full || left == 0 {
            spans.push(Span::styled("…", span.style));
            break;
        }
    }
    Line::from(spans)
}

/// `model stories260K (cpu)`, a load gauge, or why it failed; with `prefill 3 ms · 812 tok/s`
/// apart, as the first thing to go on a narrow bar.
fn model_spans(model: &ModelSlot, theme: &Theme) -> (Vec<Span<'static>>, Vec<Span<'static>>) {
    let mut summary = Vec::new();
    let mut timings = Vec::new();
    match &model.status {
        ModelStatus::Loading {
            progress, message, ..
        } => {
            let filled = ((progress.clamp(0.0, 1.0) * LOAD_GAUGE_WIDTH as f32).round()) as usize;
            summary.push(Span::raw("loading "));
            summary.push(Span::styled(
                "▮".repeat(filled),
                theme.gauge_filled.patch(theme.status),
            ));
            summary.push(Span::styled(
                "▯".repeat(LOAD_GAUGE_WIDTH - filled),
                theme.gauge_empty.patch(theme.status),
            ));
            summary.push(Span::raw(format!(" {:.0}% {message}", progress * 100.0)));
        }
        ModelStatus::Ready { name, device } => {
            summary.push(Span::raw(format!("model {name} ({device})")));
            let mut figures = Vec::new();
            if let Some(ms) = model.prefill_ms {
                figures.push(format!("prefill {ms:.0} ms"));
            }
            if let Some(rate) = model.tok_per_s {
                figures.push(format!("{rate:.0} tok/s"));
            }
            if !figures.is_empty() {
                timings.push(Span::raw(figures.join(" · ")));
            }
        }
        ModelStatus::Failed(message) => {
            summary.push(Span::styled(
                format!("model failed: {message}"),
                theme.error.patch(theme.status),
            ));
        }
    }
    (summary, timings)
}
