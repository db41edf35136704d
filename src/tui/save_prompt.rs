//! The save prompt (`s`): one line for the preset's name, its error, and the y/n question
//! when a preset of that name exists.

use super::keymap::{KeyMap, Mode};
use super::popup;
use super::text::TextBuffer;
use super::theme::Theme;
use ratatui::Frame;
use ratatui::layout::{Position, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};
use std::path::Path;

#[derive(Debug, Clone, PartialEq)]
pub struct SavePrompt {
    pub buffer: TextBuffer,
    /// Why the last Enter was refused; typing clears it.
    pub error: Option<String>,
    /// The existing preset that waits for "overwrite? y/n".
    pub confirm: Option<String>,
}

impl SavePrompt {
    pub fn new(name: &str) -> Self {
        Self {
            buffer: TextBuffer::new(name),
            error: None,
            confirm: None,
        }
    }

    /// The name as it will be saved: surrounding spaces are never meant.
    pub fn name(&self) -> &str {
        self.buffer.text.trim()
    }
}

const LABEL: &str = "name: ";

/// `dir` is where the file will go, shown so the user knows where to find it.
pub fn render(
    frame: &mut Frame,
    area: Rect,
    prompt: &SavePrompt,
    dir: &Path,
    keymap: &KeyMap,
    theme: &Theme,
) {
    let modes = match prompt.confirm {
        Some(_) => [Mode::Confirm, Mode::Dialog],
        None => [Mode::PresetName, Mode::Dialog],
    };
    let hints = popup::hints(keymap, &modes);
    let popup_area = popup::centred(area, 76, 7);
    let inner = popup::open(frame, popup_area, "save preset", &hints, theme);
    let mut lines = vec![
        Line::from(vec![
            Span::styled(LABEL, theme.dim),
            Span::styled(prompt.buffer.text.clone(), theme.editor),
        ]),
        Line::styled(format!("into {}", dir.display()), theme.dim),
    ];
    if let Some(name) = &prompt.confirm {
        lines.push(Line::styled(
            format!("`{name}` exists: overwrite it? y/n"),
            theme.error,
        ));
    } else if let Some(error) = &prompt.error {
        lines.push(Line::styled(error.clone(), theme.error));
    }
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), inner);
    let (_, col) = prompt.buffer.cursor_line_col();
    let x = (LABEL.len() + col) as u16;
    if prompt.confirm.is_none() && x < inner.width && inner.height > 0 {
        frame.set_cursor_position(Position::new(inner.x + x, inner.y));
    }
}
