//! A run's `provenance` as a table of its keys and values, whatever they hold: the page lists
//! what the run's writer recorded, so a field added to provenance shows without a change here.

use super::escape;
use serde_json::Value;

/// The table, nested keys joined with dots (`model.sha256`).
pub fn table(provenance: &Value) -> String {
    let mut rows = Vec::new();
    flatten("", provenance, &mut rows);
    let body: String = rows
        .iter()
        .map(|(key, value)| {
            format!(
                "<tr><th>{}</th><td>{}</td></tr>",
                escape::text(key),
                escape::text(value)
            )
        })
        .collect();
    format!("<table class=provenance>{body}</table>")
}

/// `value`'s rows under `key`: an object's entries each under its own key (`model.source`), a
/// list of plain values joined with commas, a list of anything else item by item
/// (`model.files[0].sha256`), a string as it is, any other value as JSON.
fn flatten(key: &str, value: &Value, rows: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (name, inner) in map {
                let key = if key.is_empty() {
                    name.clone()
                } else {
                    format!("{key}.{name}")
                };
                flatten(&key, inner, rows);
            }
        }
        Value::Array(items)
            if items
                .iter()
                .all(|item| !item.is_object() && !item.is_array()) =>
        {
            let shown: Vec<String> = items.iter().map(plain).collect();
            rows.push((key.to_owned(), shown.join(", ")));
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                flatten(&format!("{key}[{i}]"), item, rows);
            }
        }
        other => rows.push((key.to_owned(), plain(other))),
    }
}

fn plain(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nested_keys_flatten_and_values_show_as_written() {
        let mut rows = Vec::new();
        flatten(
            "",
            &json!({
                "samplab": "0.1.0",
                "model": {"path": "m.gguf", "size": 1024, "sha256": null},
                "seeds": [42, 43],
                "kernels": [{"weight_type": "q4_1", "kernel": "samplab"}],
                "empty": {}
            }),
            &mut rows,
        );
        let rows: Vec<(&str, &str)> = rows.iter().map(|(k, v)| (&**k, &**v)).collect();
        assert!(rows.contains(&("samplab", "0.1.0")), "{rows:?}");
        assert!(rows.contains(&("model.path", "m.gguf")));
        assert!(rows.contains(&("model.size", "1024")));
        assert!(rows.contains(&("model.sha256", "null")));
        assert!(rows.contains(&("seeds", "42, 43")));
        assert!(rows.contains(&("kernels[0].weight_type", "q4_1")));
        assert!(rows.contains(&("empty", "{}")));
        let html = table(&json!({"<k>": "<v>"}));
        assert!(
            html.contains("<th>&lt;k&gt;</th><td>&lt;v&gt;</td>"),
            "{html}"
        );
    }
}
