//! Values printed as Python prints them. Under transformers, `{{ x }}` and `x | string` call
//! Python's `str()`: `True`, `None`, `1.0`, `['a', 1]`, `{'k': 'v'}`; minijinja would print
//! `true`, `none` and JSON-like lists, so a template that prints a flag, an empty content or a
//! tool's arguments would render other text than the model was trained on.

use minijinja::value::ValueKind;
use minijinja::{Error, Output, State, Value};

/// minijinja's formatter for `{{ ... }}`: Python's `str()`, undefined as nothing.
pub fn format(out: &mut Output, _: &mut State, value: &Value) -> Result<(), Error> {
    out.write_str(&str(value))?;
    Ok(())
}

/// Python's `str(value)`, also the `string` filter.
pub fn str(value: &Value) -> String {
    match value.as_str() {
        Some(text) => text.to_owned(),
        None => repr(value),
    }
}

/// Python's `repr(value)`, which `str()` of a list or dict uses for the items.
pub fn repr(value: &Value) -> String {
    match value.kind() {
        ValueKind::Undefined => String::new(),
        ValueKind::None => "None".to_owned(),
        ValueKind::Bool => if value.is_true() { "True" } else { "False" }.to_owned(),
        ValueKind::Number if !value.is_integer() => match f64::try_from(value.clone()) {
            Ok(float) => float_repr(float),
            Err(_) => value.to_string(),
        },
        ValueKind::String => string_repr(value.as_str().unwrap_or_default()),
        ValueKind::Seq => {
            let items: Vec<String> = value
                .try_iter()
                .into_iter()
                .flatten()
                .map(|v| repr(&v))
                .collect();
            format!("[{}]", items.join(", "))
        }
        ValueKind::Map => {
            let entries: Vec<String> = value
                .try_iter()
                .into_iter()
                .flatten()
                .map(|key| {
                    let item = value.get_item(&key).unwrap_or_default();
                    format!("{}: {}", repr(&key), repr(&item))
                })
                .collect();
            format!("{{{}}}", entries.join(", "))
        }
        _ => value.to_string(),
    }
}

/// Python's `repr(str)`: single quotes unless the text holds `'` and no `"`.
fn string_repr(text: &str) -> String {
    let quote = if text.contains('\'') && !text.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::from(quote);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// Python's `repr(float)`: shortest digits, `.0` on whole numbers, exponent form outside
/// 1e-4..1e16, and `nan` / `inf`.
fn float_repr(value: f64) -> String {
    if value.is_nan() {
        return "nan".to_owned();
    }
    if value.is_infinite() {
        return if value > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    let scientific = format!("{value:e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if (-4..16).contains(&exponent) {
        let plain = value.to_string();
        if plain.contains('.') {
            plain
        } else {
            format!("{plain}.0")
        }
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.abs())
    }
}

/// A float as Python's `json` writes it: `repr`, with `NaN` and `Infinity` for the
/// non-finite ones.
pub fn json_float(value: f64) -> String {
    match float_repr(value).as_str() {
        "nan" => "NaN".to_owned(),
        "inf" => "Infinity".to_owned(),
        "-inf" => "-Infinity".to_owned(),
        finite => finite.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_as_python_repr() {
        assert_eq!(float_repr(1.0), "1.0");
        assert_eq!(float_repr(0.1), "0.1");
        assert_eq!(float_repr(-2.5e-7), "-2.5e-07");
        assert_eq!(float_repr(1e16), "1e+16");
        assert_eq!(float_repr(123456789012345.6), "123456789012345.6");
        assert_eq!(json_float(f64::NEG_INFINITY), "-Infinity");
    }

    #[test]
    fn strings_pick_their_quotes_as_python_does() {
        assert_eq!(string_repr("plain"), "'plain'");
        assert_eq!(string_repr("it's"), "\"it's\"");
        assert_eq!(string_repr("both ' \""), "'both \\' \"'");
        assert_eq!(string_repr("a\\b\n\u{1}é"), "'a\\\\b\\n\\x01é'");
    }
}
