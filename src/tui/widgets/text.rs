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
}

impl TextBuffer {
    /// A buffer with the cursor at the end, where typing usually continues.
    pub fn new(text: impl Into<String>) -> Self {
        let text = text.into();
        let cursor = text.len();
        Self { text, cursor }
    }

    pub fn insert(&mut self, s: &str) {
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
        let Some(start) = self.previous() else {
            return false;
        };
        self.text.replace_range(start..self.cursor, "");
        self.cursor = start;
        true
    }

    pub fn delete_forward(&mut self) -> bool {
        let Some(end) = self.next() else {
            return false;
        };
        self.text.replace_range(self.cursor..end, "");
        true
    }

    pub fn left(&mut self) {
        if let Some(start) = self.previous() {
            self.cursor = start;
        }
    }

    pub fn right(&mut self) {
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
        self.cursor = self.line_start();
    }

    pub fn end(&mut self) {
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
