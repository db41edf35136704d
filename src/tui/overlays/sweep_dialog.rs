//! The sweep dialog (`g`): one line for the grid, as `samplab sweep --grid` takes it, with
//! several parameters on the line separated by spaces or `;`, and why the last one was refused.

use super::popup;
use crate::tui::input::keymap::{KeyMap, Mode};
use crate::tui::theme::Theme;
use crate::tui::widgets::text::TextBuffer;
use ratatui::Frame;
use ratatui::layout::{Position, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

#[derive(Debug, Clone, PartialEq)]
pub struct SweepDialog {
    pub buffer: TextBuffer,
    /// Why the last Enter was refused; typing clears it.
    pub error: Option<String>,
}

impl SweepDialog {
    pub fn new(text: &str) -> Self {
        Self {
            buffer: TextBuffer::new(text),
            error: None,
        }
    }
}

const LABEL: &str = "grid: ";

/// `base` says what every cell starts from (the model, the seed), so that the user knows what
/// the cells share.
pub fn render(
    frame: &mut Frame,
    area: Rect,
    dialog: &SweepDialog,
    base: &str,
    keymap: &KeyMap,
    theme: &Theme,
) {
    let hints = popup::hints(keymap, &[Mode::SweepInput, Mode::Dialog]);
    let inner = popup::open(frame, popup::centred(area, 76, 8), "sweep", &hints, theme);
    let mut lines = vec![
        Line::from(vec![
            Span::styled(LABEL, theme.dim),
            Span::styled(dialog.buffer.text.clone(), theme.editor),
        ]),
        Line::styled(
            "KEY=V1,V2,... per parameter, separated by spaces or ; (e.g. temperature=0.5,0.8 \
             top_p=0.9,1)",
            theme.dim,
        ),
        Line::styled(base.to_owned(), theme.dim),
    ];
    if let Some(error) = &dialog.error {
        lines.push(Line::styled(error.clone(), theme.error));
    }
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), inner);
    let (_, col) = dialog.buffer.cursor_line_col();
    let x = (LABEL.len() + col) as u16;
    if x < inner.width && inner.height > 0 {
        frame.set_cursor_position(Position::new(inner.x + x, inner.y));
    }
}
