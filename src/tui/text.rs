//! A text buffer with a cursor, shared by the prompt editor and the inline value editor.

/// `cursor` is a byte offset that always sits on a char boundary.
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

    pub fn delete_back(&mut self) -> bool {
        match self.text[..self.cursor].chars().next_back() {
            Some(c) => {
                self.cursor -= c.len_utf8();
                self.text.remove(self.cursor);
                true
            }
            None => false,
        }
    }

    pub fn delete_forward(&mut self) -> bool {
        if self.cursor < self.text.len() {
            self.text.remove(self.cursor);
            true
        } else {
            false
        }
    }

    pub fn left(&mut self) {
        if let Some(c) = self.text[..self.cursor].chars().next_back() {
            self.cursor -= c.len_utf8();
        }
    }

    pub fn right(&mut self) {
        if let Some(c) = self.text[self.cursor..].chars().next() {
            self.cursor += c.len_utf8();
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

    /// (line, column in chars) of the cursor, for drawing it.
    pub fn cursor_line_col(&self) -> (usize, usize) {
        let before = &self.text[..self.cursor];
        let line = before.matches('\n').count();
        let col = before[self.line_start()..].chars().count();
        (line, col)
    }

    /// Moves to the same column on the line above (`up`) or below, clamped to that line's end.
    pub fn vertical(&mut self, up: bool) {
        let (_, col) = self.cursor_line_col();
        let start = self.line_start();
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
        let offset = line.char_indices().nth(col).map_or(line.len(), |(i, _)| i);
        self.cursor = target + offset;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
