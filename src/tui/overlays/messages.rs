//! The message log (`l`): every error and notice of the session, newest first and whole, for
//! what the status bar had no room for or has cleared since.

use super::popup;
use crate::tui::input::keymap::{KeyMap, Mode};
use crate::tui::theme::Theme;
use crate::tui::widgets::status::Message;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Wrap};

pub fn render(frame: &mut Frame, area: Rect, log: &[Message], keymap: &KeyMap, theme: &Theme) {
    let hints = popup::hints(keymap, &[Mode::Messages, Mode::Dialog]);
    let popup_area = popup::centred(area, 100, area.height.saturating_sub(4));
    let inner = popup::open(frame, popup_area, "messages", &hints, theme);
    let lines: Vec<Line> = if log.is_empty() {
        vec![Line::styled("no errors or notices yet", theme.dim)]
    } else {
        log.iter()
            .rev()
            .map(|m| {
                let style = if m.error { theme.error } else { theme.base };
                Line::styled(format!("• {}", m.text), style)
            })
            .collect()
    };
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), inner);
}
