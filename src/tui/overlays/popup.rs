//! The frame every overlay shares: a centred box over a `Clear`, a title, and key hints taken
//! from the key map along its bottom edge.

use crate::tui::input::keymap::{KeyMap, Mode};
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear};

/// A `width` x `height` box centred in `area`, shrunk to fit it.
pub fn centred(area: Rect, width: u16, height: u16) -> Rect {
    let width = width.min(area.width);
    let height = height.min(area.height);
    Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    }
}

/// The inside of a box drawn in `area`, as [`open`] returns it.
pub fn inside(area: Rect) -> Rect {
    Block::bordered().inner(area)
}

/// Clears `area`, draws the bordered box and returns its inside. `hints` go on the bottom edge.
pub fn open(frame: &mut Frame, area: Rect, title: &str, hints: &str, theme: &Theme) -> Rect {
    frame.render_widget(Clear, area);
    let mut block = Block::bordered()
        .title(Span::styled(format!(" {title} "), theme.title))
        .border_style(theme.border_focused)
        .style(theme.base);
    if !hints.is_empty() {
        block = block.title_bottom(Line::styled(format!(" {hints} "), theme.dim));
    }
    frame.render_widget(block, area);
    inside(area)
}

/// `↑/↓ select  Enter load  Esc close`: the bindings of `modes`, as the help lists them.
pub fn hints(keymap: &KeyMap, modes: &[Mode]) -> String {
    modes
        .iter()
        .flat_map(|&mode| keymap.describe(mode))
        .map(|(keys, help)| format!("{keys} {help}"))
        .collect::<Vec<_>>()
        .join("  ")
}
