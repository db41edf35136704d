//! Text from files (a GGUF's metadata, a preset's keys, a theme's names) reaches the terminal
//! inside messages; its control characters are written as escapes, so that a file cannot
//! retitle, clear or recolour the terminal through an error message.

use std::borrow::Cow;

/// `text` with every control character except newline and tab written as `\u{..}`.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    let is_unsafe = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.contains(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut escaped = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if is_unsafe(c) {
            escaped.extend(c.escape_unicode());
        } else {
            escaped.push(c);
        }
    }
    Cow::Owned(escaped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_are_shown_not_sent() {
        let hostile = "llama\x1b]0;PWNED\x07\x1b[2J\u{9b}31m";
        let shown = escape_controls(hostile);
        assert_eq!(shown, "llama\\u{1b}]0;PWNED\\u{7}\\u{1b}[2J\\u{9b}31m");
        assert!(!shown.chars().any(char::is_control));
        assert!(matches!(escape_controls("line\n\ttab é"), Cow::Borrowed(_)));
    }
}
