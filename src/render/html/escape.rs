//! Everything a results file says reaches the page through here: its texts are data, never
//! markup, whatever they hold (`</script>`, `<img onerror=…>`).

use std::fmt::Write;

/// `text` for an element's content or a quoted attribute value.
pub fn text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// JSON for the inside of a `<script type="application/json">` block: `<`, `>` and `&` as
/// `\u003c`-style escapes, so that no string in it can end the block or open a comment.
pub fn script_json(value: &impl serde::Serialize) -> serde_json::Result<String> {
    let json = serde_json::to_string(value)?;
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match c {
            '<' | '>' | '&' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_in_text_stays_text() {
        assert_eq!(
            text(r#"</span><img src=x onerror="alert('1')"> & co"#),
            "&lt;/span&gt;&lt;img src=x onerror=&quot;alert(&#39;1&#39;)&quot;&gt; &amp; co"
        );
    }

    #[test]
    fn script_json_cannot_close_its_block_and_reads_back_the_same() {
        let hostile = vec!["</script><script>alert(1)</script>", "<!--", "a & b"];
        let json = script_json(&hostile).unwrap();
        assert!(!json.contains('<') && !json.contains('>') && !json.contains('&'));
        let back: Vec<String> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, hostile);
    }
}
