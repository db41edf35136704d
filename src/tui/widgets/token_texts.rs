//! `stop` and `watch` as they are shown and typed in the params panel: a comma-separated list whose items are
//! quoted strings with escapes (`"\n\n"`, `"\t"`, `"\""`), token ids (`#13`), or bare words
//! (`The End`). A YAML list (`["\n\n", 13]`) is read as well.

use crate::params::{TokenText, TokenTexts};
use serde_yaml_ng::Value;

/// `"\n\n", #13`: what the panel shows and the editor starts with.
pub fn format(stop: &TokenTexts) -> String {
    stop.0
        .iter()
        .map(|item| match item {
            TokenText::Text(text) => format!("\"{}\"", escape(text)),
            TokenText::Token(id) => format!("#{id}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out
}

/// The typed list as the YAML value `SamplingParams::set` takes; the error says what was
/// expected where.
pub fn parse(text: &str) -> Result<Value, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Ok(Value::Null);
    }
    if trimmed.starts_with('[') {
        return crate::yaml_guard::parse(trimmed).map_err(|e| format!("not a YAML list: {e}"));
    }
    let mut items = Vec::new();
    let mut chars = trimmed.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let item = match chars.peek() {
            None => return Err("an item is missing after the last comma".to_owned()),
            Some('"') => {
                chars.next();
                let text = unescape_until(&mut chars, '"')?;
                if chars.next() != Some('"') {
                    return Err("a quoted stop string is not closed with \"".to_owned());
                }
                Value::String(text)
            }
            Some('#') => {
                chars.next();
                let digits: String =
                    std::iter::from_fn(|| chars.next_if(char::is_ascii_digit)).collect();
                let id: u64 = digits
                    .parse()
                    .map_err(|_| "`#` takes a token id, e.g. #13".to_owned())?;
                Value::Number(id.into())
            }
            Some(_) => Value::String(unescape_until(&mut chars, ',')?.trim_end().to_owned()),
        };
        items.push(item);
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        match chars.next() {
            None => break,
            Some(',') => {}
            Some(c) => return Err(format!("expected `,` between stop items, found `{c}`")),
        }
    }
    Ok(Value::Sequence(items))
}

/// Reads up to (not including) an unescaped `end`, turning `\n`, `\t`, `\r`, `\\`, `\"` and
/// `\,` into their characters.
fn unescape_until(
    chars: &mut std::iter::Peekable<std::str::Chars>,
    end: char,
) -> Result<String, String> {
    let mut out = String::new();
    while let Some(&c) = chars.peek() {
        if c == end {
            break;
        }
        chars.next();
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some(other @ ('\\' | '"' | ',')) => out.push(other),
            Some(other) => {
                return Err(format!(
                    "unknown escape `\\{other}`: use \\n, \\t, \\r, \\\\, \\\" or \\,"
                ));
            }
            None => return Err("a `\\` ends the text: escape it as \\\\".to_owned()),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::SamplingParams;

    fn stop_of(text: &str) -> Result<Option<TokenTexts>, String> {
        let mut params = SamplingParams::default();
        params
            .set("stop", parse(text)?)
            .map_err(|e| e.to_string())?;
        Ok(params.stop)
    }

    #[test]
    fn items_are_quoted_strings_token_ids_or_bare_words() {
        let stop = stop_of(r#""\n\n", #13, The End , "a\"b\\c", x\,y"#)
            .unwrap()
            .unwrap();
        assert_eq!(
            stop.0,
            [
                TokenText::Text("\n\n".into()),
                TokenText::Token(13),
                TokenText::Text("The End".into()),
                TokenText::Text("a\"b\\c".into()),
                TokenText::Text("x,y".into()),
            ]
        );
        assert_eq!(stop_of("").unwrap(), None);
        assert_eq!(
            stop_of(r#"["\t", 2]"#).unwrap().unwrap().0,
            [TokenText::Text("\t".into()), TokenText::Token(2)]
        );
    }

    #[test]
    fn format_reads_back_to_the_same_list() {
        let stop = TokenTexts(vec![
            TokenText::Text("\n\n".into()),
            TokenText::Token(13),
            TokenText::Text("say \"hi\", \\o/".into()),
        ]);
        let text = format(&stop);
        assert_eq!(text, r#""\n\n", #13, "say \"hi\", \\o/""#);
        assert_eq!(stop_of(&text).unwrap(), Some(stop));
    }

    #[test]
    fn mistakes_say_what_was_expected() {
        for (text, expected) in [
            (r#""open"#, "not closed"),
            ("#x", "token id"),
            ("a,", "missing after the last comma"),
            (r#""a" "b""#, "expected `,`"),
            (r"a\q", "unknown escape"),
            ("[!!binary aGVsbG8=]", "`!!binary` tags a value"),
        ] {
            let err = parse(text).unwrap_err();
            assert!(err.contains(expected), "{text}: {err}");
        }
        // A pasted nest is refused before the parser, whose time grows with its square.
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(parse(&deep).unwrap_err().contains("nested deeper"));
    }
}
