//! The prompt box: a multi-line editor whose text is wrapped by grapheme clusters, by the cells
//! they take, so that the cursor can be placed exactly.

use super::text::TextBuffer;
use super::theme::Theme;
use ratatui::Frame;
use ratatui::layout::{Position, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};
use unicode_segmentation::UnicodeSegmentation;
use unicode_width::UnicodeWidthStr;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct PromptState {
    pub buffer: TextBuffer,
    /// The text is one user message, framed by the model's chat template before it is run.
    pub chat: bool,
    /// In chat mode, special-token text typed in the message stays plain text.
    pub literal_specials: bool,
}

impl PromptState {
    pub fn new(text: &str) -> Self {
        Self {
            buffer: TextBuffer::new(text),
            chat: false,
            literal_specials: false,
        }
    }

    pub fn text(&self) -> &str {
        &self.buffer.text
    }

    /// Pasted text with Windows and old-Mac line ends made plain newlines.
    pub fn paste(&mut self, text: &str) {
        self.buffer
            .insert(&text.replace("\r\n", "\n").replace('\r', "\n"));
    }
}

/// Splits each line into rows of at most `width` cells, never inside a grapheme cluster; also
/// returns the cursor's (row, cell).
fn wrap(buffer: &TextBuffer, width: usize) -> (Vec<String>, (usize, usize)) {
    let width = width.max(1);
    let mut rows = Vec::new();
    let mut cursor = (0, 0);
    let mut at = 0;
    for line in buffer.text.split('\n') {
        let mut row = String::new();
        let mut cells = 0;
        for cluster in line.graphemes(true) {
            let w = cluster.width();
            if cells > 0 && cells + w > width {
                rows.push(std::mem::take(&mut row));
                cells = 0;
            }
            if at == buffer.cursor {
                cursor = (rows.len(), cells);
            }
            row.push_str(cluster);
            cells += w;
            at += cluster.len();
        }
        if at == buffer.cursor {
            if cells >= width {
                // A cursor after a full row sits at the start of the row below it.
                rows.push(std::mem::take(&mut row));
                cells = 0;
            }
            cursor = (rows.len(), cells);
        }
        rows.push(row);
        // The newline.
        at += 1;
    }
    (rows, cursor)
}

/// The title says how the text reaches the model, and that `m` switches it when it can.
pub fn render(
    frame: &mut Frame,
    area: Rect,
    state: &PromptState,
    chat_available: bool,
    specials: &[&str],
    focused: bool,
    theme: &Theme,
) {
    // Special-token text in a chat message becomes the control token (as in transformers)
    // unless the user says otherwise: mark it either way, and say which.
    let marked = if state.chat { specials } else { &[] };
    let typed = marked.iter().any(|s| state.text().contains(s));
    let title = match (state.chat, chat_available, typed, state.literal_specials) {
        (true, _, true, false) => " prompt · chat · marked text = control tokens (m: as text) ",
        (true, _, true, true) => " prompt · chat · marked text stays text (m: raw) ",
        (true, ..) => " prompt · chat template ",
        (false, true, ..) => " prompt · raw (m: chat) ",
        (false, false, ..) => " prompt ",
    };
    let mark = if state.literal_specials {
        theme.dim
    } else {
        theme.error
    };
    let block = Block::bordered()
        .title(Span::styled(title, theme.title))
        .border_style(theme.frame(focused));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if inner.width == 0 || inner.height == 0 {
        return;
    }
    let (rows, (row, col)) = wrap(&state.buffer, usize::from(inner.width));
    let height = usize::from(inner.height);
    // Keep the cursor's row in view.
    let top = (row + 1).saturating_sub(height);
    let lines: Vec<Line> = rows
        .into_iter()
        .skip(top)
        .take(height)
        .map(|row| marked_line(row, marked, mark))
        .collect();
    frame.render_widget(Paragraph::new(lines).style(theme.base), inner);
    if focused {
        frame.set_cursor_position(Position::new(
            inner.x + col as u16,
            inner.y + (row - top) as u16,
        ));
    }
}

/// A row with every occurrence of a special-token text in `mark` (longest texts first).
fn marked_line<'a>(row: String, specials: &[&str], mark: Style) -> Line<'a> {
    let mut spans = Vec::new();
    let mut rest = row.as_str();
    while let Some((at, special)) = specials
        .iter()
        .filter_map(|s| rest.find(s).map(|at| (at, *s)))
        .min_by_key(|&(at, s)| (at, std::cmp::Reverse(s.len())))
    {
        spans.push(Span::raw(rest[..at].to_owned()));
        spans.push(Span::styled(special.to_owned(), mark));
        rest = &rest[at + special.len()..];
    }
    spans.push(Span::raw(rest.to_owned()));
    Line::from(spans)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_places_the_cursor_on_the_right_row() {
        let buffer = TextBuffer::new("abcdef\ngh");
        let (rows, cursor) = wrap(&buffer, 4);
        assert_eq!(rows, ["abcd", "ef", "gh"]);
        assert_eq!(cursor, (2, 2));
        let (rows, cursor) = wrap(&TextBuffer::new("abcd"), 4);
        assert_eq!(rows, ["abcd", ""]);
        assert_eq!(cursor, (1, 0));
    }

    #[test]
    fn wide_clusters_take_their_cells_and_the_cursor_counts_cells() {
        let (rows, cursor) = wrap(&TextBuffer::new("日本x"), 3);
        assert_eq!(rows, ["日", "本x", ""]);
        assert_eq!(cursor, (2, 0));
        let mut buffer = TextBuffer::new("e\u{301}日");
        buffer.cursor = 3;
        assert_eq!(wrap(&buffer, 10), (vec!["e\u{301}日".to_owned()], (0, 1)));
        buffer.cursor = buffer.text.len();
        assert_eq!(
            wrap(&buffer, 10).1,
            (0, 3),
            "after é (one cell) and 日 (two)"
        );
    }

    #[test]
    fn paste_normalises_line_ends() {
        let mut p = PromptState::new("x");
        p.paste("a\r\nb\rc");
        assert_eq!(p.text(), "xa\nb\nc");
    }
}
