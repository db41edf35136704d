//! The prompt box: a multi-line editor whose text is wrapped by grapheme clusters, by the cells
//! they take, so that the cursor can be placed exactly; or, read-only, what the model saw of it:
//! the chat template's rendering, or its tokens with the special ones marked.

use super::chat_mode::ChatModes;
use super::text::TextBuffer;
use super::theme::Theme;
use crate::engine::PromptToken;
use crate::model::chat_template::Message;
use ratatui::Frame;
use ratatui::layout::{Position, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};
use unicode_segmentation::UnicodeSegmentation;
use unicode_width::UnicodeWidthStr;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct PromptState {
    pub buffer: TextBuffer,
    /// In chat mode, special-token text typed in the message stays plain text.
    pub literal_specials: bool,
    /// A system message and earlier turns: in chat mode the template gets them before the
    /// prompt, which is the last user message.
    pub history: Vec<Message>,
    pub view: PromptView,
}

/// What the prompt box shows: `o` cycles them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PromptView {
    /// The text as typed, to edit.
    #[default]
    Typed,
    /// The chat template's rendering (the text itself for a raw prompt).
    Rendered,
    /// The rendered prompt split into the model's tokens.
    Tokens,
}

impl PromptView {
    pub fn next(self) -> Self {
        match self {
            PromptView::Typed => PromptView::Rendered,
            PromptView::Rendered => PromptView::Tokens,
            PromptView::Tokens => PromptView::Typed,
        }
    }
}

/// What a model saw of the prompt in its last run.
#[derive(Debug, Clone, PartialEq)]
pub struct SeenPrompt {
    /// The model's name.
    pub model: String,
    /// The chat template's rendering; `None` for a raw prompt.
    pub rendered: Option<String>,
    pub tokens: Vec<PromptToken>,
}

impl PromptState {
    pub fn new(text: &str) -> Self {
        Self {
            buffer: TextBuffer::new(text),
            ..Self::default()
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

/// What the prompt box draws beside its own state.
pub struct Shown<'a> {
    pub modes: &'a ChatModes,
    /// Special-token texts, marked in a chat message.
    pub specials: &'a [&'a str],
    /// What the model of the selected side saw, for the rendered and token views.
    pub seen: Option<&'a SeenPrompt>,
    pub focused: bool,
}

/// The title says how the text reaches the model, and that `m` switches it when it can.
pub fn render(frame: &mut Frame, area: Rect, state: &PromptState, shown: &Shown, theme: &Theme) {
    let title = match (state.view, shown.seen) {
        (PromptView::Typed, _) => typed_title(state, shown),
        (_, None) => " prompt · not run yet (o: typed) ".to_owned(),
        (PromptView::Rendered, Some(seen)) => {
            format!(" prompt · as {} sees it (o: tokens) ", seen.model)
        }
        (PromptView::Tokens, Some(seen)) => format!(
            " prompt · {} tokens of {} (o: typed) ",
            seen.tokens.len(),
            seen.model
        ),
    };
    let block = Block::bordered()
        .title(Span::styled(title, theme.title))
        .border_style(theme.frame(shown.focused));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if inner.width == 0 || inner.height == 0 {
        return;
    }
    let width = usize::from(inner.width);
    let height = usize::from(inner.height);
    let lines = match (state.view, shown.seen) {
        (PromptView::Typed, _) => return render_typed(frame, inner, state, shown, theme),
        (_, None) => Vec::new(),
        (PromptView::Rendered, Some(seen)) => {
            let text = seen.rendered.as_deref().unwrap_or(state.text());
            let (rows, _) = wrap(&TextBuffer::new(text), width);
            rows.into_iter().map(Line::from).collect()
        }
        (PromptView::Tokens, Some(seen)) => token_lines(&seen.tokens, width, theme),
    };
    // The end is where the model goes on: keep it in view.
    let top = lines.len().saturating_sub(height);
    let lines: Vec<Line> = lines.into_iter().skip(top).collect();
    frame.render_widget(Paragraph::new(lines).style(theme.base), inner);
}

fn typed_title(state: &PromptState, shown: &Shown) -> String {
    // Special-token text in a chat message becomes the control token (as in transformers)
    // unless the user says otherwise: mark it either way, and say which.
    let modes = shown.modes;
    let typed = modes.chat && shown.specials.iter().any(|s| state.text().contains(s));
    let title = match (modes.chat, modes.available, typed, state.literal_specials) {
        (true, _, true, false) => " prompt · chat · marked text = control tokens (m: as text)",
        (true, _, true, true) => " prompt · chat · marked text stays text (m: raw)",
        (true, ..) => " prompt · chat template",
        (false, true, ..) => " prompt · raw (m: chat)",
        (false, false, ..) => " prompt",
    };
    let mut title = title.to_owned();
    if modes.chat && !state.history.is_empty() {
        title.push_str(&format!(" · {} earlier", state.history.len()));
    }
    if !modes.raw.is_empty() {
        title.push_str(&format!(" · raw for {}", modes.raw.join(", ")));
    }
    title + " "
}

fn render_typed(frame: &mut Frame, inner: Rect, state: &PromptState, shown: &Shown, theme: &Theme) {
    let marked = if shown.modes.chat {
        shown.specials
    } else {
        &[]
    };
    let mark = if state.literal_specials {
        theme.dim
    } else {
        theme.error
    };
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
    if shown.focused {
        frame.set_cursor_position(Position::new(
            inner.x + col as u16,
            inner.y + (row - top) as u16,
        ));
    }
}

/// Tokens laid out in rows of `width` cells, every other one underlined so that their
/// boundaries show, special tokens in the marked style; a newline inside a token shows as `↵`
/// and breaks the row after it.
fn token_lines<'a>(tokens: &[PromptToken], width: usize, theme: &Theme) -> Vec<Line<'a>> {
    let mut lines = Vec::new();
    let mut spans: Vec<Span> = Vec::new();
    let mut cells = 0;
    for (i, token) in tokens.iter().enumerate() {
        let style = if token.special {
            theme.error
        } else if i % 2 == 1 {
            theme.value.add_modifier(Modifier::UNDERLINED)
        } else {
            theme.value
        };
        for cluster in token.text.graphemes(true) {
            let newline = cluster.contains('\n');
            let shown = match cluster {
                _ if newline => "↵",
                "\t" => "→",
                other => other,
            };
            let w = shown.width();
            if cells > 0 && cells + w > width.max(1) {
                lines.push(Line::from(std::mem::take(&mut spans)));
                cells = 0;
            }
            spans.push(Span::styled(shown.to_owned(), style));
            cells += w;
            if newline {
                lines.push(Line::from(std::mem::take(&mut spans)));
                cells = 0;
            }
        }
    }
    lines.push(Line::from(spans));
    lines
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
    fn tokens_break_rows_at_newlines_and_at_the_width() {
        let token = |text: &str, special| PromptToken {
            id: 0,
            text: text.to_owned(),
            special,
        };
        let theme = Theme::plain();
        let tokens = [
            token("<|im_start|>", true),
            token("user", false),
            token("\n", false),
            token("Hello", false),
        ];
        let lines = token_lines(&tokens, 8, &theme);
        let texts: Vec<String> = lines.iter().map(ToString::to_string).collect();
        assert_eq!(texts, ["<|im_sta", "rt|>user", "↵", "Hello"]);
        assert_eq!(
            lines[0].spans[0].style, theme.error,
            "special tokens marked"
        );
        let hello = &lines[3].spans[0];
        assert!(
            hello.style.add_modifier.contains(Modifier::UNDERLINED),
            "{hello:?}"
        );
    }

    #[test]
    fn paste_normalises_line_ends() {
        let mut p = PromptState::new("x");
        p.paste("a\r\nb\rc");
        assert_eq!(p.text(), "xa\nb\nc");
    }
}
