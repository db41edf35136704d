//! The `tojson` filter as transformers defines it: Python's
//! `json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)`.
//! minijinja's own filter escapes `<`, `>`, `&` and `'` for HTML and spaces its output its own
//! way; tool schemas and tool-call arguments must come out as Python writes them.

use super::python::json_float;
use minijinja::value::{Kwargs, ValueKind};
use minijinja::{Error, ErrorKind, Value};

/// `value | tojson(indent=.., separators=.., sort_keys=.., ensure_ascii=..)`.
pub fn tojson(value: &Value, options: Kwargs) -> Result<Value, Error> {
    let indent = match options.get::<Option<Value>>("indent")? {
        None => None,
        Some(v) if v.is_none() => None,
        // Python indents by that many spaces, or by the string itself.
        Some(v) => Some(match v.as_str() {
            Some(text) => text.to_owned(),
            None => " ".repeat(usize::try_from(i64::try_from(v)?).unwrap_or(0)),
        }),
    };
    let separators: Option<Vec<String>> = options.get("separators")?;
    let (item, key) = match separators.as_deref() {
        Some([item, key]) => (item.clone(), key.clone()),
        Some(_) => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                "tojson separators must be two strings: (item separator, key separator)",
            ));
        }
        None if indent.is_some() => (",".to_owned(), ": ".to_owned()),
        None => (", ".to_owned(), ": ".to_owned()),
    };
    let dumper = Dumper {
        indent,
        item,
        key,
        sort_keys: options.get::<Option<bool>>("sort_keys")?.unwrap_or(false),
        ensure_ascii: options
            .get::<Option<bool>>("ensure_ascii")?
            .unwrap_or(false),
    };
    options.assert_all_used()?;
    let mut out = String::new();
    dumper.write(value, 0, &mut out)?;
    Ok(Value::from(out))
}

struct Dumper {
    indent: Option<String>,
    item: String,
    key: String,
    sort_keys: bool,
    ensure_ascii: bool,
}

impl Dumper {
    fn write(&self, value: &Value, depth: usize, out: &mut String) -> Result<(), Error> {
        match value.kind() {
            ValueKind::None => out.push_str("null"),
            ValueKind::Bool => out.push_str(if value.is_true() { "true" } else { "false" }),
            ValueKind::Number if value.is_integer() => out.push_str(&value.to_string()),
            ValueKind::Number => out.push_str(&json_float(f64::try_from(value.clone())?)),
            ValueKind::String => self.string(value.as_str().unwrap_or_default(), out),
            ValueKind::Seq | ValueKind::Iterable => {
                let items: Vec<Value> = value.try_iter()?.collect();
                self.container(('[', ']'), &items, depth, out, |item, depth, out| {
                    self.write(item, depth, out)
                })?;
            }
            ValueKind::Map => {
                let mut keys: Vec<Value> = value.try_iter()?.collect();
                if self.sort_keys {
                    keys.sort();
                }
                self.container(('{', '}'), &keys, depth, out, |key, depth, out| {
                    match key.as_str() {
                        Some(text) => self.string(text, out),
                        None => self.string(&key.to_string(), out),
                    }
                    out.push_str(&self.key);
                    self.write(&value.get_item(key)?, depth, out)
                })?;
            }
            _ => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    format!(
                        "tojson cannot write {}: Python's json has no form for it",
                        value.kind()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// `[a, b]`, or with an indent one item per line, as Python's json lays them out.
    fn container(
        &self,
        (open, close): (char, char),
        items: &[Value],
        depth: usize,
        out: &mut String,
        write_item: impl Fn(&Value, usize, &mut String) -> Result<(), Error>,
    ) -> Result<(), Error> {
        out.push(open);
        if items.is_empty() {
            out.push(close);
            return Ok(());
        }
        let newline = |depth: usize, out: &mut String| {
            if let Some(indent) = &self.indent {
                out.push('\n');
                out.push_str(&indent.repeat(depth));
            }
        };
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                out.push_str(&self.item);
            }
            newline(depth + 1, out);
            write_item(item, depth + 1, out)?;
        }
        newline(depth, out);
        out.push(close);
        Ok(())
    }

    fn string(&self, text: &str, out: &mut String) {
        out.push('"');
        for c in text.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                c if (c as u32) < 0x20 || (self.ensure_ascii && !c.is_ascii()) => {
                    let mut units = [0u16; 2];
                    for unit in c.encode_utf16(&mut units) {
                        out.push_str(&format!("\\u{unit:04x}"));
                    }
                }
                c => out.push(c),
            }
        }
        out.push('"');
    }
}
