//! Parsing YAML that a user's file holds (presets, themes) within bounds: a size and nesting
//! cap checked before the parser runs, whose time grows with the square of the depth, and no
//! tags, which would otherwise be dropped silently (`temperature: !custom 5` read as `5`).

use serde_yaml_ng::Value;

/// Far more than any preset or theme needs.
pub const MAX_BYTES: usize = 256 << 10;
/// Nesting levels, counting each column of indentation as one: presets and themes need three.
pub const MAX_DEPTH: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum YamlError {
    #[error("the file has {0} bytes; at most {MAX_BYTES} are read")]
    TooLarge(usize),
    #[error("the YAML is nested deeper than {MAX_DEPTH} levels")]
    TooDeep,
    #[error("{0}")]
    Syntax(String),
    #[error("`{tag}` tags a value; write plain values without tags")]
    Tagged { tag: String },
}

/// `text` as a YAML value without tags, or why not.
pub fn parse(text: &str) -> Result<Value, YamlError> {
    if text.len() > MAX_BYTES {
        return Err(YamlError::TooLarge(text.len()));
    }
    let lexed = lex(text);
    if lexed.depth > MAX_DEPTH {
        return Err(YamlError::TooDeep);
    }
    if let Some(tag) = lexed.tag {
        return Err(YamlError::Tagged { tag });
    }
    serde_yaml_ng::from_str(text).map_err(|e| YamlError::Syntax(e.to_string()))
}

/// What a pass over the text finds without parsing it.
struct Lexed {
    /// An upper bound of the nesting depth: open flow brackets, plus the deepest line's
    /// indentation and leading `- ` / `? ` indicators.
    depth: usize,
    /// The first tag: serde_yaml_ng resolves `!!binary`, `!!str` and the other core tags
    /// itself and leaves no trace of them in the value, so they are found in the text.
    tag: Option<String>,
}

/// Scans outside quotes and comments; a `!` where a node starts (at a line's start or after
/// `:`, `-`, `?`, `,`, `[` or `{`) begins a tag, one inside a plain scalar (`wow !`) does not.
fn lex(text: &str) -> Lexed {
    let (mut flow, mut deepest_flow, mut deepest_block) = (0usize, 0usize, 0usize);
    let mut tag = None;
    for line in text.lines() {
        let indent = line.len() - line.trim_start_matches([' ', '\t']).len();
        let mut rest = &line[indent..];
        let mut block = indent;
        while let Some(after) = rest.strip_prefix("- ").or_else(|| rest.strip_prefix("? ")) {
            block += 2;
            rest = after.trim_start_matches(' ');
        }
        deepest_block = deepest_block.max(block);
        let mut quote: Option<char> = None;
        let mut previous = ' ';
        // The last character outside quotes that is not a space; a line starts a node.
        let mut significant = ':';
        let mut chars = rest.char_indices();
        while let Some((at, c)) = chars.next() {
            match (quote, c) {
                (Some('"'), '\\') => {
                    chars.next();
                }
                (Some(q), c) if c == q => quote = None,
                (Some(_), _) => {}
                (None, '"' | '\'') if previous.is_whitespace() || "[{,:".contains(previous) => {
                    quote = Some(c)
                }
                (None, '#') if previous.is_whitespace() => break,
                (None, '!') if tag.is_none() && ":-?,[{".contains(significant) => {
                    let name = rest[at..].split([' ', ',', ']', '}']).next().unwrap_or("!");
                    tag = Some(name.to_owned());
                }
                (None, '[' | '{') => {
                    flow += 1;
                    deepest_flow = deepest_flow.max(flow);
                }
                (None, ']' | '}') => flow = flow.saturating_sub(1),
                _ => {}
            }
            if quote.is_none() && !c.is_whitespace() {
                significant = c;
            }
            previous = c;
        }
    }
    Lexed {
        depth: deepest_flow + deepest_block,
        tag,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn plain_presets_and_themes_parse() {
        let value = parse("temperature: 0.7\nstop: [\"\\n\", 13]\n").unwrap();
        assert_eq!(value["temperature"], Value::from(0.7));
        let theme = "heatmap:\n  - { at: 0.0, fg: '#ff0000' }\n  - at: 1\n    fg: blue # c [[[\n";
        assert!(parse(theme).is_ok());
        assert!(parse("stop: [\"[[[[[\", '{{{{']").is_ok());
        assert!(parse("stop: [\"!x\", wow !, 'don''t !']").is_ok());
    }

    #[test]
    fn deep_or_large_files_are_refused_before_parsing() {
        let start = Instant::now();
        let flow = format!("a: {}{}", "[".repeat(150_000), "]".repeat(150_000));
        assert_eq!(parse(&flow), Err(YamlError::TooLarge(flow.len())));
        let flow = format!("a: {}{}", "[".repeat(65), "]".repeat(65));
        assert_eq!(parse(&flow), Err(YamlError::TooDeep));
        let dashes = format!("{}x", "- ".repeat(50_000));
        assert_eq!(parse(&dashes), Err(YamlError::TooDeep));
        let indented: String = (0..40)
            .map(|i| format!("{}k{i}:\n", "  ".repeat(i)))
            .collect();
        assert_eq!(parse(&indented), Err(YamlError::TooDeep));
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn tagged_values_are_refused_naming_the_tag() {
        for (text, tag) in [
            ("stop: !!binary aGVsbG8=", "!!binary"),
            ("stop: [a, !!str 5]", "!!str"),
            ("- !<tag:yaml.org,2002:str> x", "!<tag:yaml.org"),
            ("temperature: !custom 5", "!custom"),
            (
                "a: !!python/object:os.system [ls]",
                "!!python/object:os.system",
            ),
            ("!t {a: 1}", "!t"),
        ] {
            match parse(text) {
                Err(YamlError::Tagged { tag: found }) => {
                    assert!(found.contains(tag), "{text}: {found}")
                }
                other => panic!("{text}: {other:?}"),
            }
        }
    }
}
