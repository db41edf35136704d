//! Text measured, cut and wrapped in terminal cells, as the panels draw it.

use unicode_segmentation::UnicodeSegmentation;
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// `text` cut or padded to exactly `width` cells, `…` marking a cut.
pub fn fit(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut used = 0;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let w = c.width().unwrap_or(0);
        let room = if chars.peek().is_some() {
            width.saturating_sub(1)
        } else {
            width
        };
        if used + w > room {
            out.push('…');
            used += 1;
            break;
        }
        out.push(c);
        used += w;
    }
    out + &" ".repeat(width.saturating_sub(used))
}

/// `text` in rows of at most `width` cells, each line of it wrapped between words where it
/// can: what a panel shows of a message that must be read whole.
pub fn word_wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut rows = Vec::new();
    for line in text.split('\n') {
        let clusters: Vec<(usize, &str)> = line.grapheme_indices(true).collect();
        rows.extend(
            word_rows(&clusters, width)
                .into_iter()
                .map(|range| clusters[range].iter().map(|&(_, g)| g).collect::<String>()),
        );
    }
    rows
}

/// The clusters of one line cut into rows of at most `width` cells: after the last space that
/// leaves the row within its width, else before the cluster that does not fit.
pub fn word_rows(clusters: &[(usize, &str)], width: usize) -> Vec<std::ops::Range<usize>> {
    let mut rows = Vec::new();
    let (mut start, mut cells) = (0, 0);
    // Where the row can end: after its last whitespace.
    let mut after_space = None;
    for (i, &(_, cluster)) in clusters.iter().enumerate() {
        let w = cluster.width();
        while cells > 0 && cells + w > width {
            let end = after_space.filter(|&end| end > start).unwrap_or(i);
            rows.push(start..end);
            cells = clusters[end..i].iter().map(|(_, g)| g.width()).sum();
            (start, after_space) = (end, None);
        }
        cells += w;
        if cluster.chars().all(char::is_whitespace) {
            after_space = Some(i + 1);
        }
    }
    rows.push(start..clusters.len());
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_wrap_breaks_between_words_and_keeps_every_character() {
        let text = "`structured_outputs.regex` is not a valid regex: unclosed group";
        let rows = word_wrap(text, 20);
        assert!(rows.iter().all(|r| r.width() <= 20), "{rows:?}");
        assert_eq!(rows.concat(), text);
        assert_eq!(
            rows[0], "`structured_outputs.",
            "a word longer than a row is cut"
        );
        assert_eq!(rows[1], "regex` is not a ");
        assert_eq!(word_wrap("a\nb", 5), ["a", "b"]);
    }
}
