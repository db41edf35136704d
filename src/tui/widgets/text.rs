//! A text buffer with a cursor, shared by the prompt editor and the inline value editor.
//! The cursor moves and deletes by grapheme cluster, what the reader sees as one character:
//! `👨‍👩‍👧` or `é` written as `e` and an accent.

use unicode_segmentation::UnicodeSegmentation;
use unicode_width::UnicodeWidthStr;

/// `cursor` is a byte offset that always sits on a grapheme cluster boundary.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TextBuffer {
    pub text: String,
    pub cursor: usize,
    /// The whole text is selected: typing replaces it and a delete clears it, as in a
    /// field that has just been opened; a cursor move keeps it and deselects.
    pub selected: bool,
}

impl TextBuffer {
    /// A buffer with the cursor at the end, where typing usually continues.
    pub fn new(text: impl Into<String>) -> Self {
        let text = text.into();
        let cursor = text.len();
        Self {
            text,
            cursor,
            selected: false,
        }
    }

    /// A buffer whose whole text is selected, the cursor at its end.
    pub fn selected(text: impl Into<String>) -> Self {
        Self {
            selected: true,
            ..Self::new(text)
        }
    }

    /// Drops a selected text; whether there was one.
    fn take_selection(&mut self) -> bool {
        let had = self.selected && !self.text.is_empty();
        if self.selected {
            *self = Self::default();
        }
        had
    }

    pub fn insert(&mut self, s: &str) {
        self.take_selection();
        self.text.insert_str(self.cursor, s);
        self.cursor += s.len();
    }

    /// Where the cluster before the cursor starts.
    fn previous(&self) -> Option<usize> {
        let before = &self.text[..self.cursor];
        before.grapheme_indices(true).next_back().map(|(i, _)| i)
    }

    /// Where the cluster after the cursor ends.
    fn next(&self) -> Option<usize> {
        let after = &self.text[self.cursor..];
        after.graphemes(true).next().map(|g| self.cursor + g.len())
    }

    pub fn delete_back(&mut self) -> bool {
        if self.take_selection() {
            return true;
        }
        let Some(start) = self.previous() else {
            return false;
        };
        self.text.replace_range(start..self.cursor, "");
        self.cursor = start;
        true
    }

    pub fn delete_forward(&mut self) -> bool {
        if self.take_selection() {
            return true;
        }
        let Some(end) = self.next() else {
            return false;
        };
        self.text.replace_range(self.cursor..end, "");
        true
    }

    /// Empties the text (Ctrl+U); whether there was any.
    pub fn clear(&mut self) -> bool {
        let had = !self.text.is_empty();
        *self = Self::default();
        had
    }

    pub fn left(&mut self) {
        self.selected = false;
        if let Some(start) = self.previous() {
            self.cursor = start;
        }
    }

    pub fn right(&mut self) {
        self.selected = false;
        if let Some(end) = self.next() {
            self.cursor = end;
        }
    }

    fn line_start(&self) -> usize {
        self.text[..self.cursor].rfind('\n').map_or(0, |i| i + 1)
    }

    fn line_end(&self) -> usize {
        self.text[self.cursor..]
            .find('\n')
            .map_or(self.text.len(), |i| self.cursor + i)
    }

    pub fn home(&mut self) {
        self.selected = false;
        self.cursor = self.line_start();
    }

    pub fn end(&mut self) {
        self.selected = false;
        self.cursor = self.line_end();
    }

    /// (line, cells before it on the line) of the cursor, for drawing it: `日` takes two.
    pub fn cursor_line_col(&self) -> (usize, usize) {
        let before = &self.text[..self.cursor];
        let line = before.matches('\n').count();
        let col = before[self.line_start()..].width();
        (line, col)
    }

    /// Moves to the same column (in clusters) on the line above (`up`) or below, clamped to
    /// that line's end.
    pub fn vertical(&mut self, up: bool) {
        self.selected = false;
        let start = self.line_start();
        let col = self.text[start..self.cursor].graphemes(true).count();
        let target = if up {
            if start == 0 {
                return;
            }
            self.text[..start - 1].rfind('\n').map_or(0, |i| i + 1)
        } else {
            let end = self.line_end();
            if end == self.text.len() {
                return;
            }
            end + 1
        };
        let line = &self.text[target..];
        let line = &line[..line.find('\n').unwrap_or(line.len())];
        let offset = line
            .grapheme_indices(true)
            .nth(col)
            .map_or(line.len(), |(i, _)| i);
        self.cursor = target + offset;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_selected_text_is_replaced_by_typing_cleared_by_a_delete_and_kept_by_a_move() {
        let mut typed = TextBuffer::selected("0.70");
        typed.insert("1");
        assert_eq!((typed.text.as_str(), typed.cursor), ("1", 1));
        typed.insert("2");
        assert_eq!(typed.text, "12", "only the first key replaces");
        let mut deleted = TextBuffer::selected("0.70");
        assert!(deleted.delete_back());
        assert_eq!(deleted.text, "");
        let mut moved = TextBuffer::selected("0.70");
        moved.left();
        moved.insert("5");
        assert_eq!(moved.text, "0.750", "a move deselects; typing then inserts");
    }

    #[test]
    fn moves_and_deletes_step_over_whole_grapheme_clusters() {
        let family = "👨\u{200d}👩\u{200d}👧";
        assert_eq!(
            TextBuffer::new("日e\u{301}").cursor_line_col(),
            (0, 3),
            "in cells"
        );
        let mut b = TextBuffer::new(format!("a{family}e\u{301}"));
        b.left();
        assert_eq!(
            &b.text[b.cursor..],
            "e\u{301}",
            "an accent stays on its letter"
        );
        b.left();
        assert_eq!(b.cursor, 1, "one step over the family");
        b.right();
        assert_eq!(b.cursor, 1 + family.len());
        assert!(b.delete_back());
        assert_eq!(b.text, "ae\u{301}");
        assert!(b.delete_forward());
        assert_eq!(b.text, "a");

        let mut b = TextBuffer::new(format!("{family}x\nabc"));
        b.vertical(true);
        assert_eq!(
            &b.text[b.cursor..],
            "\nabc",
            "column 3 is past the family and x"
        );
        b.cursor = 0;
        b.right();
        b.vertical(false);
        assert_eq!(&b.text[b.cursor..], "bc", "one cluster in, one char in");
    }

    #[test]
    fn edits_respect_multibyte_characters_and_lines() {
        let mut b = TextBuffer::new("héllo\nwo");
        b.vertical(true);
        assert_eq!(b.cursor_line_col(), (0, 2));
        b.delete_back();
        assert_eq!(b.text, "hllo\nwo");
        b.end();
        b.vertical(false);
        assert_eq!(b.cursor_line_col(), (1, 2));
        b.home();
        b.insert("→");
        assert_eq!(b.text, "hllo\n→wo");
        b.left();
        assert!(b.delete_forward());
        assert_eq!(b.text, "hllo\nwo");
        b.cursor = 0;
        assert!(!b.delete_back());
    }
}
