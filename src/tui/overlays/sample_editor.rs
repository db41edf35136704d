//! The sample editor (`E` in the samples): a sample's text to edit, from which the sample goes
//! on as a branch once Enter has it tokenized (edit and continue, see `update::edit_sample`).

use super::popup;
use crate::tui::comparison::SideId;
use crate::tui::input::keymap::{KeyMap, Mode};
use crate::tui::theme::Theme;
use crate::tui::widgets::prompt::wrap;
use crate::tui::widgets::text::TextBuffer;
use ratatui::Frame;
use ratatui::layout::{Position, Rect};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;

#[derive(Debug, Clone, PartialEq)]
pub struct SampleEditor {
    pub side: SideId,
    /// The sample's index in its run (a branch's included).
    pub sample: u32,
    /// Its tokens when the editor opened: the edit is made to them, whatever runs meanwhile.
    pub tokens: Vec<u32>,
    /// Its text then, to tell an edit from none.
    pub original: String,
    pub buffer: TextBuffer,
}

impl SampleEditor {
    pub fn new(side: SideId, sample: u32, tokens: Vec<u32>, text: String) -> Self {
        Self {
            side,
            sample,
            tokens,
            buffer: TextBuffer::new(text.clone()),
            original: text,
        }
    }
}

/// What Enter does, above the text.
const NOTE: &str = "text you keep keeps its sampled tokens; the rest is tokenized, forced, and \
                    the sample goes on after it in a new branch";

pub fn render(
    frame: &mut Frame,
    area: Rect,
    editor: &SampleEditor,
    keymap: &KeyMap,
    theme: &Theme,
) {
    let hints = popup::hints(keymap, &[Mode::ParamEdit]);
    let popup_area = popup::centred(area, 100, area.height.saturating_sub(4).max(8));
    let title = format!("edit #{}", editor.sample);
    let inner = popup::open(frame, popup_area, &title, &hints, theme);
    if inner.height < 2 || inner.width == 0 {
        return;
    }
    let note = Rect { height: 1, ..inner };
    frame.render_widget(Paragraph::new(Line::styled(NOTE, theme.dim)), note);
    let text = Rect {
        y: inner.y + 1,
        height: inner.height - 1,
        ..inner
    };
    let (rows, (row, col)) = wrap(&editor.buffer, usize::from(text.width));
    // Keep the cursor's row in view.
    let top = (row + 1).saturating_sub(usize::from(text.height));
    let lines: Vec<Line> = rows.into_iter().skip(top).map(Line::from).collect();
    frame.render_widget(Paragraph::new(lines).style(theme.editor), text);
    frame.set_cursor_position(Position::new(
        text.x + col as u16,
        text.y + (row - top) as u16,
    ));
}
