//! The conversation dialog (`c`): a system message and earlier turns that the chat template
//! gets before the prompt, which is the last user message.

use super::popup;
use crate::tui::input::keymap::{KeyMap, Mode};
use crate::tui::theme::Theme;
use crate::tui::widgets::prompt::PromptState;
use crate::tui::widgets::text::TextBuffer;
use ratatui::Frame;
use ratatui::layout::{Position, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use unicode_width::UnicodeWidthStr;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConversationDialog {
    /// The selected turn of `PromptState::history`.
    pub selected: usize,
    /// The selected turn's text while it is edited.
    pub editor: Option<TextBuffer>,
}

/// Width of the role column.
const ROLE_WIDTH: usize = 10;

/// Where the dialog goes on `screen` for `turns` earlier turns: room for each, the note above
/// them and the prompt under them.
fn popup_area(screen: Rect, turns: usize) -> Rect {
    popup::centred(
        screen,
        96,
        u16::try_from(turns).unwrap_or(u16::MAX).saturating_add(6),
    )
}

/// How many turns the dialog shows on `screen`: what PgUp/PgDn move by.
pub fn page_rows(screen: Rect, turns: usize) -> usize {
    // Less the note above the turns and the prompt under them.
    usize::from(
        popup::inside(popup_area(screen, turns))
            .height
            .saturating_sub(2),
    )
}

/// What the conversation dialog shows beside its own state.
pub struct Shown<'a> {
    pub prompt: &'a PromptState,
    /// Some model gets the conversation through its chat template.
    pub chat: bool,
    /// The reply the samples' cursor is on, as `A` would accept it: its name and text.
    pub reply: Option<(String, String)>,
}

/// The turns of `prompt.history`, then the prompt itself as the last user message, then the
/// candidate reply.
pub fn render(
    frame: &mut Frame,
    area: Rect,
    shown: &Shown,
    dialog: &ConversationDialog,
    keymap: &KeyMap,
    theme: &Theme,
) {
    let &Shown { prompt, chat, .. } = shown;
    let history = &prompt.history;
    let modes: &[Mode] = if dialog.editor.is_some() {
        &[Mode::ParamEdit, Mode::TextField]
    } else {
        &[Mode::Conversation, Mode::List, Mode::Dialog]
    };
    let hints = popup::hints(keymap, modes);
    let inner = popup::open(
        frame,
        popup_area(area, history.len()),
        "conversation",
        &hints,
        theme,
    );
    let width = usize::from(inner.width).saturating_sub(ROLE_WIDTH);
    let mut lines = Vec::new();
    let note = if chat {
        "the chat template gets these turns, then the prompt:"
    } else {
        "these turns reach the chat template in chat mode (m):"
    };
    lines.push(Line::styled(note, theme.dim));
    for (i, turn) in history.iter().enumerate() {
        let selected = i == dialog.selected;
        let text = match &dialog.editor {
            Some(editor) if selected => visible_tail(&editor.text, width),
            _ => one_line(&turn.content, width),
        };
        let style = if selected && dialog.editor.is_none() {
            theme.selected
        } else {
            theme.base
        };
        lines.push(Line::from(vec![
            Span::styled(format!("{:>9} ", turn.role), theme.value),
            Span::styled(text, style),
        ]));
    }
    if history.is_empty() {
        lines.push(Line::styled("no earlier turns: a adds one", theme.dim));
    }
    lines.push(Line::from(vec![
        Span::styled(format!("{:>9} ", "user"), theme.dim),
        Span::styled(one_line(prompt.text(), width), theme.dim),
    ]));
    if let Some((name, text)) = &shown.reply {
        let reply = format!("{name}: {text}");
        lines.push(Line::from(vec![
            Span::styled(format!("{:>9} ", "assistant"), theme.dim),
            Span::styled(one_line(&reply, width), theme.dim),
        ]));
    }
    // A long conversation scrolls to keep the selected turn (line 1 + selected) in view.
    let top = (dialog.selected + 2).saturating_sub(usize::from(inner.height));
    frame.render_widget(Paragraph::new(lines).scroll((top as u16, 0)), inner);
    if let Some(editor) = &dialog.editor {
        let before = visible_tail(&editor.text[..editor.cursor], width);
        let x = inner.x + (ROLE_WIDTH + before.width()).min(usize::from(inner.width)) as u16;
        let y = inner.y + (1 + dialog.selected - top) as u16;
        if y < inner.y + inner.height {
            frame.set_cursor_position(Position::new(x, y));
        }
    }
}

/// A turn on one line: newlines as `↵`, cut to `width` cells with `…`.
fn one_line(text: &str, width: usize) -> String {
    let flat = text.replace('\n', "↵");
    if flat.width() <= width {
        return flat;
    }
    let mut cut = String::new();
    let mut cells = 0;
    for c in flat.chars() {
        cells += unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if cells + 1 > width {
            break;
        }
        cut.push(c);
    }
    cut + "…"
}

/// The end of the text being typed, as much as fits in `width` cells (one kept for the cursor).
fn visible_tail(text: &str, width: usize) -> String {
    let flat = text.replace('\n', "↵");
    let mut cells = 0;
    let mut start = flat.len();
    for (at, c) in flat.char_indices().rev() {
        cells += unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if cells + 1 > width {
            break;
        }
        start = at;
    }
    flat[start..].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_turns_are_cut_and_typing_shows_the_end() {
        assert_eq!(one_line("a\nb", 10), "a↵b");
        assert_eq!(one_line("abcdefghij", 6), "abcde…");
        assert_eq!(visible_tail("abcdefghij", 5), "ghij");
        assert_eq!(visible_tail("ab", 5), "ab");
    }
}
