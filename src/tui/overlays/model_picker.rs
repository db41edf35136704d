//! The model picker (`a`): the models compared now, and others to add at run time: GGUF files
//! and model directories in the working directory, the Hugging Face cache, or a path or Hub id
//! typed in. Finding candidates reads the disk, so the loop does it and answers with
//! `Outcome::ModelsFound`.

use super::popup;
use crate::model::source::discover::Candidate;
use crate::model::source::embedded;
use crate::model::source::hub::progress::bytes;
use crate::tui::input::keymap::{KeyMap, Mode};
use crate::tui::model_slot::{ModelSlot, ModelStatus};
use crate::tui::theme::Theme;
use crate::tui::widgets::text::TextBuffer;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Position, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelPicker {
    /// Found on disk (and the built-in model), offered to add.
    pub candidates: Vec<Candidate>,
    /// Over the loaded models first, then the candidates.
    pub selected: usize,
    /// A path or Hub id being typed; Enter adds it rather than the selection.
    pub input: TextBuffer,
    /// Why the last Enter or Del did nothing.
    pub error: Option<String>,
}

impl ModelPicker {
    /// The built-in model is always offered; what is on disk arrives with `found`.
    pub fn new() -> Self {
        Self {
            candidates: vec![Candidate {
                spec: embedded::NAME.to_owned(),
                label: format!("{} (built in)", embedded::NAME),
                size: None,
            }],
            ..Self::default()
        }
    }

    pub fn found(&mut self, candidates: Vec<Candidate>) {
        self.candidates.extend(candidates);
    }
}

const LABEL: &str = "add: ";

/// Where the picker goes on `screen` for `rows` models and candidates, `width` wide: room for
/// each row, the input line, the separator and an error line.
fn popup_area(screen: Rect, width: u16, rows: usize) -> Rect {
    popup::centred(
        screen,
        width,
        u16::try_from(rows).unwrap_or(u16::MAX).saturating_add(6),
    )
}

/// The popup's inside split into the input line, the list and the error line under it.
fn split(inner: Rect) -> [Rect; 3] {
    Layout::vertical([
        Constraint::Length(1),
        Constraint::Fill(1),
        Constraint::Length(1),
    ])
    .areas(inner)
}

/// How many rows of the list the picker shows on `screen`: what PgUp/PgDn move by.
pub fn page_rows(screen: Rect, rows: usize) -> usize {
    let [_, list, _] = split(popup::inside(popup_area(screen, screen.width, rows)));
    usize::from(list.height)
}

pub fn render(
    frame: &mut Frame,
    area: Rect,
    models: &[ModelSlot],
    picker: &ModelPicker,
    keymap: &KeyMap,
    theme: &Theme,
) {
    let hints = popup::hints(keymap, &[Mode::Models, Mode::List, Mode::Dialog]);
    let rows = models.len() + picker.candidates.len();
    let input = Line::from(vec![
        Span::styled(LABEL, theme.dim),
        Span::styled(picker.input.text.clone(), theme.editor),
        Span::styled(
            if picker.input.text.is_empty() {
                "a .gguf path, a model directory or a Hub id, or pick one below"
            } else {
                ""
            },
            theme.dim,
        ),
    ]);
    let row_style = |i: usize| {
        if i == picker.selected {
            theme.selected
        } else {
            theme.base
        }
    };
    let mut lines = Vec::new();
    for (i, model) in models.iter().enumerate() {
        let name = model.name().unwrap_or(&model.spec);
        let (status, style) = match &model.status {
            ModelStatus::Ready { .. } => ("loaded".to_owned(), row_style(i)),
            ModelStatus::Loading {
                progress, message, ..
            } => (
                format!("loading {:.0}% · {message}", progress * 100.0),
                row_style(i),
            ),
            ModelStatus::Failed(why) => (format!("failed: {why}"), row_style(i).patch(theme.error)),
        };
        // Until it loads the name is the spec: said once, so that a download's figures fit.
        let spec = if name == model.spec {
            String::new()
        } else {
            format!(" ({})", model.spec)
        };
        lines.push(Line::styled(format!(" {name:<40} {status}{spec}"), style));
    }
    let separator = lines.len();
    let loaded = models.len();
    let label_width = picker
        .candidates
        .iter()
        .map(|c| c.label.chars().count())
        .max()
        .unwrap_or(0);
    for (i, candidate) in picker.candidates.iter().enumerate() {
        let size = candidate.size.map(bytes).unwrap_or_default();
        lines.push(Line::styled(
            format!(" {:<label_width$}  {size:>8}", candidate.label),
            row_style(loaded + i),
        ));
    }
    let error = picker
        .error
        .as_ref()
        .map(|error| Line::styled(error.clone(), theme.error));
    // Wide enough for a download's figures where the screen allows.
    let widest = lines
        .iter()
        .chain([&input])
        .chain(&error)
        .map(Line::width)
        .max()
        .unwrap_or(0);
    let width = u16::try_from(widest + 2).unwrap_or(u16::MAX).max(96);
    let inner = popup::open(
        frame,
        popup_area(area, width, rows),
        "models",
        &hints,
        theme,
    );
    let [input_area, list_area, error_area] = split(inner);
    lines.insert(
        separator,
        Line::styled("─".repeat(usize::from(inner.width)), theme.dim),
    );
    // The selected row stays in view (the separator is a line above the candidates).
    let selected_line = picker.selected + usize::from(picker.selected >= loaded);
    let top = (selected_line + 1).saturating_sub(usize::from(list_area.height));
    frame.render_widget(Paragraph::new(input), input_area);
    frame.render_widget(
        Paragraph::new(lines).scroll((u16::try_from(top).unwrap_or(u16::MAX), 0)),
        list_area,
    );
    if let Some(error) = error {
        frame.render_widget(Paragraph::new(error), error_area);
    }
    let (_, col) = picker.input.cursor_line_col();
    let x = (LABEL.len() + col) as u16;
    if x < inner.width && inner.height > 0 {
        frame.set_cursor_position(Position::new(inner.x + x, inner.y));
    }
}
