//! A column's text as rows of terminal cells, built when tokens arrive (not every frame). Each
//! piece remembers its token, so that the view can draw the cursor and a click can find the
//! token under it.

use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// Text on one row; `token` indexes the column's tokens (`None`: text that is no token, such as
/// a released stop-string tail).
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    pub text: String,
    pub token: Option<usize>,
}

/// A (row, cell) position in the wrapped text.
pub type Cell = (usize, usize);

#[derive(Debug, Clone, PartialEq)]
pub struct Wrapped {
    pub lines: Vec<Vec<Segment>>,
    /// Where each token starts; one that shows no text (held back, half a character) starts
    /// where the next text would go.
    starts: Vec<Cell>,
    width: usize,
    whitespace: bool,
    /// Cells taken on the last row.
    used: usize,
}

impl Wrapped {
    /// Rows of `width` cells; `whitespace` draws spaces as `·`, tabs as `→`, newlines as `↵`.
    pub fn new(width: usize, whitespace: bool) -> Self {
        Self {
            lines: vec![Vec::new()],
            starts: Vec::new(),
            width: width.max(1),
            whitespace,
            used: 0,
        }
    }

    pub fn width(&self) -> usize {
        self.width
    }

    pub fn whitespace(&self) -> bool {
        self.whitespace
    }

    /// Appends the next token's text; its index is the number of tokens pushed before it.
    pub fn push_token(&mut self, text: &str) {
        let token = self.starts.len();
        let start = self.place(text, Some(token));
        self.starts.push(start);
    }

    /// Appends text that belongs to no token.
    pub fn push_text(&mut self, text: &str) {
        self.place(text, None);
    }

    pub fn start(&self, token: usize) -> Option<Cell> {
        self.starts.get(token).copied()
    }

    /// The token drawn at `cell` of `row`, if any.
    pub fn token_at(&self, row: usize, cell: usize) -> Option<usize> {
        let mut x = 0;
        for segment in self.lines.get(row)? {
            x += segment.text.width();
            if cell < x {
                return segment.token;
            }
        }
        None
    }

    /// The token of `row` nearest to `cell`: the one under it, else the last one before it,
    /// else the first one on the row; `None` when no token shows on the row.
    pub fn nearest(&self, row: usize, cell: usize) -> Option<usize> {
        let mut x = 0;
        let mut before = None;
        let mut after = None;
        for segment in self.lines.get(row)? {
            let Some(token) = segment.token else {
                x += segment.text.width();
                continue;
            };
            if x <= cell {
                before = Some(token);
            } else {
                after = after.or(Some(token));
            }
            x += segment.text.width();
        }
        before.or(after)
    }

    /// Token-level wrapping: a piece that does not fit starts a new row; only pieces wider than
    /// a whole row are split. A newline keeps one cell (blank, or `↵`) so that it can be seen,
    /// pointed at and coloured like any token. Returns where the text starts.
    fn place(&mut self, text: &str, token: Option<usize>) -> Cell {
        let mut first = None;
        for (i, part) in text.split('\n').enumerate() {
            if i > 0 {
                if self.used < self.width {
                    let mark = if self.whitespace { "↵" } else { " " };
                    first = first.or(Some(self.put(mark, 1, token)));
                }
                self.lines.push(Vec::new());
                self.used = 0;
            }
            let shown: String = part.chars().map(|c| self.glyph(c)).collect();
            if let Some(cell) = self.place_run(&shown, token) {
                first = first.or(Some(cell));
            }
        }
        first.unwrap_or((self.lines.len() - 1, self.used))
    }

    fn glyph(&self, c: char) -> char {
        match c {
            ' ' if self.whitespace => '·',
            '\t' if self.whitespace => '→',
            c if c.is_control() => ' ',
            c => c,
        }
    }

    /// Whether the row may break after `c`: a space or a tab, as drawn.
    fn is_break(&self, c: char) -> bool {
        matches!(c, ' ' | '\t') || (self.whitespace && matches!(c, '·' | '→'))
    }

    /// Starts a new row.
    fn new_row(&mut self) {
        self.lines.push(Vec::new());
        self.used = 0;
    }

    /// Places text without newlines, wrapping at word boundaries: a piece that does not fit
    /// leaves its leading spaces on this row and starts its word on the next, and a piece that
    /// goes on a word (`oy` after ` b`, a `,`) takes that word along to the next row, so that
    /// rows neither break inside words nor start with punctuation. A word wider than a row is
    /// split. Returns where the text starts.
    fn place_run(&mut self, text: &str, token: Option<usize>) -> Option<Cell> {
        if text.is_empty() {
            return None;
        }
        let width = text.width();
        if self.used > 0 && self.used + width > self.width {
            let word = text.trim_start_matches(|c| self.is_break(c));
            let spaces = &text[..text.len() - word.len()];
            if !spaces.is_empty()
                && self.used + spaces.width() <= self.width
                && word.width() <= self.width
            {
                let first = self.fill(spaces, token);
                if !word.is_empty() {
                    self.new_row();
                    self.fill(word, token);
                }
                return first;
            }
            if width <= self.width && !self.carry_word(width) {
                self.new_row();
            }
        }
        self.fill(text, token)
    }

    /// Moves the word that ends the last row (what follows its last space) to a new row, when
    /// it fits there with `more` cells after it; returns whether it moved.
    fn carry_word(&mut self, more: usize) -> bool {
        let row_index = self.lines.len() - 1;
        let text: String = self.lines[row_index]
            .iter()
            .map(|s| s.text.as_str())
            .collect();
        let Some((space, c)) = text.char_indices().rev().find(|&(_, c)| self.is_break(c)) else {
            return false;
        };
        let cut = space + c.len_utf8();
        let word = &text[cut..];
        if word.is_empty() || word.width() + more > self.width {
            return false;
        }
        let cut_cells = text[..cut].width();
        let mut carried = Vec::new();
        let mut offset = 0;
        let row = &mut self.lines[row_index];
        for segment in row.iter_mut() {
            let end = offset + segment.text.len();
            if end > cut {
                let from = cut.saturating_sub(offset);
                carried.push(Segment {
                    text: segment.text[from..].to_owned(),
                    token: segment.token,
                });
                segment.text.truncate(from);
            }
            offset = end;
        }
        row.retain(|s| !s.text.is_empty());
        for start in self.starts.iter_mut().rev() {
            if start.0 != row_index || start.1 < cut_cells {
                break;
            }
            *start = (row_index + 1, start.1 - cut_cells);
        }
        self.used = word.width();
        self.lines.push(carried);
        true
    }

    /// Puts text on the rows from where the last one ends, splitting it where a row is full.
    fn fill(&mut self, text: &str, token: Option<usize>) -> Option<Cell> {
        let mut first = None;
        let mut rest = text;
        while !rest.is_empty() {
            let room = self.width - self.used;
            let mut cells = 0;
            let mut end = 0;
            for (i, c) in rest.char_indices() {
                let w = c.width().unwrap_or(0);
                if cells + w > room {
                    break;
                }
                cells += w;
                end = i + c.len_utf8();
            }
            if end == 0 {
                if self.used > 0 {
                    self.lines.push(Vec::new());
                    self.used = 0;
                    continue;
                }
                // A character wider than a whole row goes alone on its row.
                let c = rest.chars().next().unwrap_or(' ');
                end = c.len_utf8();
                cells = c.width().unwrap_or(0);
            }
            let cell = self.put(&rest[..end], cells, token);
            first = first.or(Some(cell));
            rest = &rest[end..];
        }
        first
    }

    /// Appends to the last row, merging with the piece before it when it is the same token.
    fn put(&mut self, text: &str, cells: usize, token: Option<usize>) -> Cell {
        let cell = (self.lines.len() - 1, self.used);
        self.used += cells;
        let row = self.lines.last_mut().expect("there is always a row");
        match row.last_mut() {
            Some(last) if last.token == token => last.text.push_str(text),
            _ => row.push(Segment {
                text: text.to_owned(),
                token,
            }),
        }
        cell
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(w: &Wrapped) -> Vec<String> {
        w.lines
            .iter()
            .map(|l| l.iter().map(|s| s.text.as_str()).collect())
            .collect()
    }

    fn wrapped(width: usize, whitespace: bool, tokens: &[&str]) -> Wrapped {
        let mut w = Wrapped::new(width, whitespace);
        for t in tokens {
            w.push_token(t);
        }
        w
    }

    #[test]
    fn tokens_wrap_whole_and_newlines_keep_a_cell() {
        let w = wrapped(8, false, &["Once", " upon", " a", "\ntime", " abcdefghijk"]);
        assert_eq!(texts(&w), ["Once ", "upon a ", "time abc", "defghijk"]);
        assert_eq!(
            w.start(3),
            Some((1, 6)),
            "the newline's cell starts the token"
        );
        assert_eq!(w.start(4), Some((2, 4)));
        assert_eq!(w.token_at(1, 6), Some(3));
        assert_eq!(w.token_at(2, 0), Some(3));
        assert_eq!(w.token_at(3, 0), Some(4));
        assert_eq!(w.token_at(0, 6), None, "past the end of the row");
    }

    #[test]
    fn rows_break_at_spaces_not_inside_words_or_before_punctuation() {
        let w = wrapped(10, false, &["a", " little", " b", "oy", ",", " and"]);
        assert_eq!(texts(&w), ["a little ", "boy, and"]);
        assert_eq!(w.start(2), Some((0, 8)), "` b` starts at its space");
        assert_eq!(w.start(3), Some((1, 1)));
        assert_eq!(w.token_at(1, 0), Some(2), "its `b` went along");
        assert_eq!(w.start(4), Some((1, 3)));
        let shown = wrapped(10, true, &["a", " little", " b", "oy"]);
        assert_eq!(
            texts(&shown),
            ["a·little·", "boy"],
            "also with visible spaces"
        );
        let long = wrapped(4, false, &["ab", "cdefgh"]);
        assert_eq!(
            texts(&long),
            ["abcd", "efgh"],
            "a word wider than a row is split"
        );
    }

    #[test]
    fn visible_whitespace_marks_spaces_tabs_and_newlines() {
        let w = wrapped(20, true, &["a b", "\tc", "\n\n", "d"]);
        assert_eq!(texts(&w), ["a·b→c↵", "↵", "d"]);
        assert_eq!(w.start(2), Some((0, 5)));
        assert_eq!(w.token_at(1, 0), Some(2));
    }

    #[test]
    fn wide_characters_take_two_cells_and_controls_one_blank() {
        let w = wrapped(5, false, &["日本", "語", "\u{7}x"]);
        assert_eq!(texts(&w), ["日本", "語 x"]);
        assert_eq!(w.token_at(0, 3), Some(0));
        assert_eq!(w.token_at(1, 1), Some(1));
        assert_eq!(w.token_at(1, 2), Some(2));
        let narrow = wrapped(1, false, &["日"]);
        assert_eq!(texts(&narrow), ["日"], "alone on its row rather than lost");
    }

    #[test]
    fn empty_tokens_start_where_the_next_text_goes_and_text_has_no_token() {
        let mut w = wrapped(10, false, &["ab", ""]);
        w.push_text("cd");
        assert_eq!(w.start(1), Some((0, 2)));
        assert_eq!(w.token_at(0, 2), None);
        assert_eq!(w.start(2), None);
    }

    #[test]
    fn nearest_finds_the_token_closest_to_a_cell() {
        let w = wrapped(6, false, &["ab", "cd", "\n", "efghij"]);
        assert_eq!(texts(&w), ["abcd ", "efghij"]);
        assert_eq!(w.nearest(0, 3), Some(1));
        assert_eq!(w.nearest(0, 5), Some(2), "past the end: the last token");
        assert_eq!(w.nearest(1, 0), Some(3));
        assert_eq!(w.nearest(2, 0), None);
    }
}
