//! The help overlay, generated from the key map so that it always tells the truth.

use super::keymap::{KeyMap, Mode};
use super::theme::Theme;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph};

const LEFT: [Mode; 3] = [Mode::Global, Mode::Navigate, Mode::Prompt];
const RIGHT: [Mode; 3] = [Mode::Params, Mode::ParamEdit, Mode::Help];

fn section<'a>(keymap: &KeyMap, modes: &[Mode], theme: &Theme) -> Vec<Line<'a>> {
    let mut lines = Vec::new();
    for &mode in modes {
        if !lines.is_empty() {
            lines.push(Line::default());
        }
        lines.push(Line::styled(mode.title().to_owned(), theme.title));
        for (keys, help) in keymap.describe(mode) {
            lines.push(Line::from(vec![
                Span::styled(format!(" {keys:<16}"), theme.value),
                Span::styled(help.to_owned(), theme.dim),
            ]));
        }
    }
    lines
}

pub fn render(frame: &mut Frame, area: Rect, keymap: &KeyMap, theme: &Theme) {
    let left = section(keymap, &LEFT, theme);
    let right = section(keymap, &RIGHT, theme);
    let height = (left.len().max(right.len()) as u16 + 2).min(area.height);
    let width = 76.min(area.width);
    let popup = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    };
    frame.render_widget(Clear, popup);
    let block = Block::bordered()
        .title(Span::styled(" keys ", theme.title))
        .border_style(theme.border_focused);
    let inner = block.inner(popup);
    frame.render_widget(block, popup);
    let [l, r] = Layout::horizontal([Constraint::Fill(1); 2]).areas(inner);
    frame.render_widget(Paragraph::new(left), l);
    frame.render_widget(Paragraph::new(right), r);
}
