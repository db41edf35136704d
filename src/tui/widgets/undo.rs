//! The prompt box's undo (Ctrl+Z): the text before each of the last edits, where characters
//! typed in a row make one edit a word long, so that undo takes back words, not letters.

use super::text::TextBuffer;

/// Edits kept; older ones are forgotten (a 3 KB paste is one).
const LIMIT: usize = 100;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Undo {
    /// The text before each kept edit, oldest first.
    before: Vec<TextBuffer>,
    /// The last character of the word being typed, which the next typed character joins.
    typing: Option<char>,
}

impl Undo {
    /// Notes an edit from `before` to `after`: a new step, unless it types one more character
    /// of the word being typed (a space after a word starts the next step).
    pub fn record(&mut self, before: TextBuffer, after: &TextBuffer) {
        let typed = typed_char(&before, after);
        let joins = matches!(
            (self.typing, typed),
            (Some(last), Some(c)) if !c.is_whitespace() || last.is_whitespace()
        );
        if !joins {
            if self.before.len() == LIMIT {
                self.before.remove(0);
            }
            self.before.push(before);
        }
        self.typing = typed;
    }

    /// A cursor move: the next typed character starts an edit of its own.
    pub fn moved(&mut self) {
        self.typing = None;
    }

    /// The text before the last kept edit, which is forgotten.
    pub fn undo(&mut self) -> Option<TextBuffer> {
        self.typing = None;
        self.before.pop()
    }
}

/// The one character that `after` has typed at `before`'s cursor, if that is the whole change.
fn typed_char(before: &TextBuffer, after: &TextBuffer) -> Option<char> {
    let at = before.cursor;
    let inserted = after.text.get(at..after.cursor)?;
    let mut chars = inserted.chars();
    let c = chars.next()?;
    let same_around = !before.selected
        && chars.next().is_none()
        && after.text.get(..at) == Some(&before.text[..at])
        && after.text.get(after.cursor..) == Some(&before.text[at..]);
    same_around.then_some(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Types `text` into `buffer`, recording each key.
    fn type_in(undo: &mut Undo, buffer: &mut TextBuffer, text: &str) {
        for c in text.chars() {
            let before = buffer.clone();
            buffer.insert(c.encode_utf8(&mut [0; 4]));
            undo.record(before, buffer);
        }
    }

    #[test]
    fn typing_is_undone_a_word_at_a_time_and_other_edits_one_by_one() {
        let mut undo = Undo::default();
        let mut buffer = TextBuffer::default();
        type_in(&mut undo, &mut buffer, "Once upon");
        let before = buffer.clone();
        buffer.delete_back();
        undo.record(before, &buffer);
        assert_eq!(buffer.text, "Once upo");
        buffer = undo.undo().unwrap();
        assert_eq!(buffer.text, "Once upon", "the delete");
        buffer = undo.undo().unwrap();
        assert_eq!(buffer.text, "Once", "the second word with its space");
        type_in(&mut undo, &mut buffer, "!");
        buffer.left();
        undo.moved();
        type_in(&mut undo, &mut buffer, "x");
        assert_eq!(buffer.text, "Oncex!");
        assert_eq!(undo.undo().unwrap().text, "Once!", "a move ends a word");
        assert_eq!(undo.undo().unwrap().text, "Once");
        assert_eq!(undo.undo().unwrap().text, "");
        assert_eq!(undo.undo(), None);
    }

    #[test]
    fn only_the_last_edits_are_kept() {
        let mut undo = Undo::default();
        let mut buffer = TextBuffer::default();
        for i in 0..LIMIT + 10 {
            let before = buffer.clone();
            buffer.insert(&format!("{i} "));
            undo.record(before, &buffer);
        }
        let mut steps = 0;
        while let Some(before) = undo.undo() {
            buffer = before;
            steps += 1;
        }
        assert_eq!(steps, LIMIT);
        assert!(
            buffer.text.starts_with("0 1 2 3 4 5 6 7 8 9 "),
            "{}",
            buffer.text
        );
    }
}
