//! Theme files: YAML that names a style per part of the screen and the heatmap's stops, read
//! over a base theme so that a user's file names only what it changes. Every mistake is an
//! error naming the file and the key, never a silently ignored line.

use super::{GradientStop, Theme};
use ratatui::style::{Color, Modifier, Style};
use serde_yaml_ng::{Mapping, Value};
use std::str::FromStr;

/// The keys a theme file may set, in the order the built-in files list them.
pub const KEYS: [&str; 14] = [
    "base",
    "border",
    "border_focused",
    "title",
    "selected",
    "gauge_filled",
    "gauge_empty",
    "value",
    "dim",
    "error",
    "editor",
    "status",
    "token",
    "heatmap",
];

const STYLE_KEYS: &str = "fg, bg, bold, italic, underlined, reversed";
const COLOUR_HELP: &str =
    "use a name such as cyan, dark_gray or light_red, a 256-colour index 0-255, or #rrggbb";

/// What is wrong with a theme, where: `origin` is the file (or built-in), `key` the dotted path.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("theme {origin}: {}{message}", key_prefix(key))]
pub struct ThemeError {
    pub origin: String,
    pub key: String,
    pub message: String,
}

fn key_prefix(key: &str) -> String {
    if key.is_empty() {
        String::new()
    } else {
        format!("`{key}`: ")
    }
}

/// Reads `text` over `base`: every key it names replaces that style (or the whole heatmap).
pub fn parse(text: &str, origin: &str, base: &Theme) -> Result<Theme, ThemeError> {
    let fail = |key: &str, message: String| ThemeError {
        origin: origin.to_owned(),
        key: key.to_owned(),
        message,
    };
    let map = match crate::yaml_guard::parse(text) {
        Ok(Value::Null) => Mapping::new(),
        Ok(Value::Mapping(map)) => map,
        Ok(_) => {
            return Err(fail(
                "",
                "a theme is a mapping of names to styles, e.g. `border: cyan`".to_owned(),
            ));
        }
        Err(e) => return Err(fail("", format!("not valid YAML: {e}"))),
    };
    let mut theme = base.clone();
    for (key, value) in map {
        let key = match key {
            Value::String(key) => key,
            other => return Err(fail(&describe(&other), unknown_key_message())),
        };
        match key.as_str() {
            "heatmap" => theme.gradient = heatmap(&value).map_err(|(k, m)| fail(&k, m))?,
            "token" => {
                let (style, auto) = style(&value, &key, true).map_err(|(k, m)| fail(&k, m))?;
                theme.token_fg = style;
                theme.token_contrast = auto;
            }
            _ => {
                let Some(slot) = slot(&mut theme, &key) else {
                    return Err(fail(&key, unknown_key_message()));
                };
                *slot = style(&value, &key, false).map_err(|(k, m)| fail(&k, m))?.0;
            }
        }
    }
    Ok(theme)
}

fn unknown_key_message() -> String {
    format!("unknown key; a theme sets {}", KEYS.join(", "))
}

/// The style a plain key names; `token` and `heatmap` are read apart.
fn slot<'a>(theme: &'a mut Theme, key: &str) -> Option<&'a mut Style> {
    Some(match key {
        "base" => &mut theme.base,
        "border" => &mut theme.border,
        "border_focused" => &mut theme.border_focused,
        "title" => &mut theme.title,
        "selected" => &mut theme.selected,
        "gauge_filled" => &mut theme.gauge_filled,
        "gauge_empty" => &mut theme.gauge_empty,
        "value" => &mut theme.value,
        "dim" => &mut theme.dim,
        "error" => &mut theme.error,
        "editor" => &mut theme.editor,
        "status" => &mut theme.status,
        _ => return None,
    })
}

/// An error at a dotted key path.
type Failure = (String, String);

/// A colour (the foreground) or a mapping of style keys; with `allow_auto`, `fg: auto` is
/// accepted and reported as the second value.
fn style(value: &Value, key: &str, allow_auto: bool) -> Result<(Style, bool), Failure> {
    let auto = |v: &Value| allow_auto && v.as_str() == Some("auto");
    match value {
        Value::Mapping(map) => {
            let mut style = Style::new();
            let mut contrast = false;
            for (name, v) in map {
                let name = name.as_str().unwrap_or_default();
                let path = format!("{key}.{name}");
                match name {
                    "fg" if auto(v) => contrast = true,
                    "fg" => style = style.fg(colour(v, &path)?),
                    "bg" => style = style.bg(colour(v, &path)?),
                    "bold" | "italic" | "underlined" | "reversed" => {
                        let on = v.as_bool().ok_or_else(|| {
                            (
                                path.clone(),
                                format!("expected true or false, got {}", describe(v)),
                            )
                        })?;
                        if on {
                            style = style.add_modifier(modifier(name));
                        }
                    }
                    _ => {
                        return Err((
                            format!("{key}.{}", describe_key(name)),
                            format!("unknown style key; use {STYLE_KEYS}"),
                        ));
                    }
                }
            }
            Ok((style, contrast))
        }
        v if auto(v) => Ok((Style::new(), true)),
        Value::String(_) | Value::Number(_) => Ok((Style::new().fg(colour(value, key)?), false)),
        other => Err((
            key.to_owned(),
            format!(
                "expected a colour or a mapping of {STYLE_KEYS}, got {}",
                describe(other)
            ),
        )),
    }
}

fn modifier(name: &str) -> Modifier {
    match name {
        "bold" => Modifier::BOLD,
        "italic" => Modifier::ITALIC,
        "underlined" => Modifier::UNDERLINED,
        _ => Modifier::REVERSED,
    }
}

fn colour(value: &Value, key: &str) -> Result<Color, Failure> {
    let text = match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        other => {
            return Err((
                key.to_owned(),
                format!("expected a colour, got {}", describe(other)),
            ));
        }
    };
    // "auto" would parse as nothing, but say where it is allowed.
    if text == "auto" {
        return Err((key.to_owned(), "`auto` is only for `token.fg`".to_owned()));
    }
    Color::from_str(&text).map_err(|_| {
        (
            key.to_owned(),
            format!("unknown colour `{text}`: {COLOUR_HELP}"),
        )
    })
}

/// `probability: "#rrggbb"` pairs, sorted; the colours must be exact RGB to be blended.
fn heatmap(value: &Value) -> Result<Vec<GradientStop>, Failure> {
    let Value::Mapping(map) = value else {
        return Err((
            "heatmap".to_owned(),
            format!(
                "expected a mapping of probability to colour, e.g. `0.5: \"#73691e\"`, got {}",
                describe(value)
            ),
        ));
    };
    let mut stops: Vec<GradientStop> = Vec::with_capacity(map.len());
    for (at, colour) in map {
        let path = format!("heatmap.{}", describe_key(&describe(at)));
        let at = at
            .as_f64()
            .filter(|p| (0.0..=1.0).contains(p))
            .ok_or_else(|| (path.clone(), "a stop is a probability in [0, 1]".to_owned()))?
            as f32;
        let rgb = match colour.as_str().map(Color::from_str) {
            Some(Ok(Color::Rgb(r, g, b))) => (r, g, b),
            _ => {
                return Err((
                    path,
                    format!(
                        "expected a colour as #rrggbb (names have no exact RGB to blend), got {}",
                        describe(colour)
                    ),
                ));
            }
        };
        if stops.iter().any(|s| s.at == at) {
            return Err((path, "two stops at the same probability".to_owned()));
        }
        stops.push(GradientStop { at, rgb });
    }
    if stops.is_empty() {
        return Err((
            "heatmap".to_owned(),
            "needs at least one stop, e.g. `0.5: \"#73691e\"`".to_owned(),
        ));
    }
    stops.sort_by(|a, b| a.at.total_cmp(&b.at));
    Ok(stops)
}

fn describe(value: &Value) -> String {
    match value {
        Value::Null => "nothing".to_owned(),
        Value::String(s) => format!("\"{s}\""),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Sequence(_) => "a list".to_owned(),
        Value::Mapping(_) => "a mapping".to_owned(),
        Value::Tagged(t) => format!("a value tagged {}", t.tag),
    }
}

/// A key as a path segment: quotes from `describe` add nothing there.
fn describe_key(key: &str) -> &str {
    key.trim_matches('"')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_err(text: &str) -> ThemeError {
        parse(text, "mine.yaml", &Theme::dark()).unwrap_err()
    }

    #[test]
    fn a_partial_file_overrides_only_what_it_names() {
        let text = "border_focused: { fg: \"#102030\", bold: true }\ntitle: red\n\
                    heatmap: { 1: \"#ffffff\", 0: \"#000000\" }\ntoken: { fg: auto }";
        let theme = parse(text, "mine.yaml", &Theme::dark()).unwrap();
        assert_eq!(
            theme.border_focused,
            Style::new()
                .fg(Color::Rgb(16, 32, 48))
                .add_modifier(Modifier::BOLD)
        );
        assert_eq!(
            theme.title,
            Style::new().fg(Color::Red),
            "replaced, not patched"
        );
        assert_eq!(theme.border, Theme::dark().border);
        assert_eq!(theme.gradient[0].rgb, (0, 0, 0), "stops are sorted");
        assert_eq!(theme.token_style(0.5).bg, Some(Color::Rgb(128, 128, 128)));
        assert!(theme.token_contrast);
        assert_eq!(parse("", "x", &Theme::plain()).unwrap(), Theme::plain());
    }

    #[test]
    fn colours_take_names_indices_and_hex() {
        let theme = parse(
            "border: Dark Gray\ndim: 244\nvalue: { bg: light-blue }",
            "x",
            &Theme::plain(),
        )
        .unwrap();
        assert_eq!(theme.border.fg, Some(Color::DarkGray));
        assert_eq!(theme.dim.fg, Some(Color::Indexed(244)));
        assert_eq!(theme.value.bg, Some(Color::LightBlue));
    }

    #[test]
    fn errors_name_the_file_the_key_and_what_would_be_right() {
        let e = parse_err("border: blu");
        assert_eq!(e.key, "border");
        let text = e.to_string();
        assert!(
            text.starts_with("theme mine.yaml: `border`: unknown colour `blu`")
                && text.contains("#rrggbb"),
            "{text}"
        );
        assert_eq!(parse_err("bordr: cyan").key, "bordr");
        assert!(parse_err("bordr: cyan").message.contains("border_focused"));
        assert_eq!(
            parse_err("title: { fg: red, blink: true }").key,
            "title.blink"
        );
        assert_eq!(parse_err("title: { bold: yes please }").key, "title.bold");
        assert_eq!(parse_err("title: [red]").key, "title");
        assert_eq!(
            parse_err("border: { fg: auto }").message,
            "`auto` is only for `token.fg`"
        );
        assert_eq!(parse_err("heatmap: { 0.5: red }").key, "heatmap.0.5");
        assert_eq!(
            parse_err("heatmap: { 1.5: \"#000000\" }").key,
            "heatmap.1.5"
        );
        assert_eq!(parse_err("heatmap: {}").key, "heatmap");
        assert_eq!(parse_err("heatmap: [1, 2]").key, "heatmap");
        assert!(parse_err("- a list").message.contains("mapping"));
        assert!(parse_err("border: [").message.contains("not valid YAML"));
    }
}
