//! The status bar: model and its load progress, run timings, preset (with `*` when modified)
//! and key hints from the key map.

use super::params::ParamsState;
use super::theme::Theme;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

#[derive(Debug, Clone, PartialEq)]
pub enum ModelStatus {
    Loading { progress: f32, message: String },
    Ready { name: String, device: String },
    Failed(String),
}

/// One loaded (or loading) model and how its last run went.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSlot {
    /// Names the model's engine for good: events carry it, and it stays valid when models
    /// before it are removed.
    pub id: usize,
    /// As given to `--model` or the model picker.
    pub spec: String,
    pub status: ModelStatus,
    pub prefill_ms: Option<f64>,
    pub tok_per_s: Option<f64>,
    /// The model has a chat template.
    pub chat_available: bool,
    /// The vocabulary fingerprint from `Event::Loaded`, sent along with samples to be scored.
    pub vocab: u64,
}

impl Default for ModelSlot {
    fn default() -> Self {
        Self {
            id: 0,
            spec: String::new(),
            status: ModelStatus::Loading {
                progress: 0.0,
                message: "starting".to_owned(),
            },
            prefill_ms: None,
            tok_per_s: None,
            chat_available: false,
            vocab: 0,
        }
    }
}

impl ModelSlot {
    pub fn ready(&self) -> bool {
        matches!(self.status, ModelStatus::Ready { .. })
    }

    pub fn name(&self) -> Option<&str> {
        match &self.status {
            ModelStatus::Ready { name, .. } => Some(name),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct StatusState {
    /// One per `--model`, in order.
    pub models: Vec<ModelSlot>,
    /// The last run's error, until the next run starts.
    pub error: Option<String>,
    /// News about something the user did (a saved preset, a theme switch), until the next key.
    pub notice: Option<String>,
}

impl Default for StatusState {
    fn default() -> Self {
        Self {
            models: vec![ModelSlot::default()],
            error: None,
            notice: None,
        }
    }
}

impl StatusState {
    /// The model exported code loads: one engine takes one model, so the first one, as given
    /// to `--model` or the picker.
    pub fn export_model(&self) -> &str {
        self.models.first().map_or("", |m| m.spec.as_str())
    }

    pub fn slot(&self, id: usize) -> Option<&ModelSlot> {
        self.models.iter().find(|m| m.id == id)
    }

    pub fn slot_mut(&mut self, id: usize) -> Option<&mut ModelSlot> {
        self.models.iter_mut().find(|m| m.id == id)
    }

    /// Whether model `id` is loaded.
    pub fn is_ready(&self, id: usize) -> bool {
        self.slot(id).is_some_and(ModelSlot::ready)
    }

    /// Every model is loaded.
    pub fn ready(&self) -> bool {
        self.models.iter().all(ModelSlot::ready)
    }

    /// Chat mode needs every compared model to have a template.
    pub fn chat_available(&self) -> bool {
        self.models.iter().all(|m| m.chat_available)
    }
}

const LOAD_GAUGE_WIDTH: usize = 10;

/// `hints` are (keys, meaning) pairs drawn at the right end.
pub fn render(
    frame: &mut Frame,
    area: Rect,
    status: &StatusState,
    params: &ParamsState,
    hints: &[(String, &str)],
    theme: &Theme,
) {
    let sep = || Span::styled(" · ", theme.dim.patch(theme.status));
    let mut left = vec![Span::raw(" ")];
    for (i, model) in status.models.iter().enumerate() {
        if i > 0 {
            left.push(Span::styled(" │ ", theme.dim.patch(theme.status)));
        }
        model_spans(&mut left, model, theme);
    }
    left.push(sep());
    left.push(Span::raw(format!(
        "preset {}{}",
        params.preset_name,
        if params.modified() { "*" } else { "" }
    )));
    if let Some(notice) = &status.notice {
        left.push(sep());
        left.push(Span::styled(
            notice.clone(),
            theme.value.patch(theme.status),
        ));
    }
    if let Some(error) = &status.error {
        left.push(sep());
        left.push(Span::styled(
            format!("error: {error}"),
            theme.error.patch(theme.status),
        ));
    }
    let right: String = hints
        .iter()
        .map(|(keys, help)| format!("{keys} {help}"))
        .collect::<Vec<_>>()
        .join("  ")
        + " ";
    let right_width = right.chars().count() as u16;
    let left_width = area.width.saturating_sub(right_width);
    frame.render_widget(
        Paragraph::new(Line::from(left)).style(theme.status),
        Rect {
            width: left_width,
            ..area
        },
    );
    if right_width <= area.width {
        let right_area = Rect {
            x: area.x + left_width,
            width: right_width,
            ..area
        };
        frame.render_widget(Paragraph::new(right).style(theme.status), right_area);
    }
}

/// `model stories260K (cpu) · prefill 3 ms · 812 tok/s`, a load gauge, or why it failed.
fn model_spans(left: &mut Vec<Span<'static>>, model: &ModelSlot, theme: &Theme) {
    let sep = || Span::styled(" · ", theme.dim.patch(theme.status));
    match &model.status {
        ModelStatus::Loading { progress, message } => {
            let filled = ((progress.clamp(0.0, 1.0) * LOAD_GAUGE_WIDTH as f32).round()) as usize;
            left.push(Span::raw("loading "));
            left.push(Span::styled(
                "▮".repeat(filled),
                theme.gauge_filled.patch(theme.status),
            ));
            left.push(Span::styled(
                "▯".repeat(LOAD_GAUGE_WIDTH - filled),
                theme.gauge_empty.patch(theme.status),
            ));
            left.push(Span::raw(format!(" {:.0}% {message}", progress * 100.0)));
        }
        ModelStatus::Ready { name, device } => {
            left.push(Span::raw(format!("model {name} ({device})")));
            if let Some(ms) = model.prefill_ms {
                left.push(sep());
                left.push(Span::raw(format!("prefill {ms:.0} ms")));
            }
            if let Some(rate) = model.tok_per_s {
                left.push(sep());
                left.push(Span::raw(format!("{rate:.0} tok/s")));
            }
        }
        ModelStatus::Failed(message) => {
            left.push(Span::styled(
                format!("model failed: {message}"),
                theme.error.patch(theme.status),
            ));
        }
    }
}
