//! Structured outputs: the constraint a sample's text must satisfy, in vLLM's shape
//! (`structured_outputs: {json: …}`, `{regex: …}`, `{choice: […]}`, `{grammar: …}`,
//! `{json_object: true}`) and in llama.cpp's (`grammar`, `json_schema`).

use serde::de::{self, Deserializer};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use std::path::Path;

/// The largest schema file `json` or `json_schema` reads by path.
const SCHEMA_FILE_LIMIT: u64 = 1 << 20;

/// One constraint; vLLM's `StructuredOutputsParams` holds exactly one of these.
#[derive(Debug, Clone, PartialEq)]
pub enum StructuredOutputs {
    /// A JSON schema.
    Json(Schema),
    Regex(String),
    /// The text is one of these strings.
    Choice(Vec<String>),
    /// A context-free grammar: GBNF as llama.cpp writes it (rules with `::=`), else Lark.
    Grammar(String),
    /// Any JSON object.
    JsonObject,
}

impl StructuredOutputs {
    /// The key vLLM names this kind by.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Json(_) => "json",
            Self::Regex(_) => "regex",
            Self::Choice(_) => "choice",
            Self::Grammar(_) => "grammar",
            Self::JsonObject => "json_object",
        }
    }
}

/// A JSON schema, written inline (YAML or JSON) or as the path of a file holding one, which
/// is read once, so that a preset keeps the schema itself.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Schema(pub Json);

impl<'de> Deserialize<'de> for Schema {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Json::deserialize(deserializer)?;
        let schema = match value {
            Json::String(text) if text.trim_start().starts_with('{') => serde_json::from_str(&text)
                .map_err(|e| de::Error::custom(format!("the schema is not valid JSON: {e}")))?,
            Json::String(path) => read_schema(Path::new(&path)).map_err(de::Error::custom)?,
            value => value,
        };
        if !matches!(schema, Json::Object(_) | Json::Bool(true)) {
            return Err(de::Error::custom(
                "a JSON schema must be a mapping (e.g. {type: object, properties: {…}}) or \
                 the path of a file holding one",
            ));
        }
        Ok(Schema(schema))
    }
}

/// A schema file, YAML or JSON.
fn read_schema(path: &Path) -> Result<Json, String> {
    let shown = path.display();
    let size = std::fs::metadata(path)
        .map_err(|e| {
            format!("`{shown}` is neither an inline schema nor a readable schema file: {e}")
        })?
        .len();
    if size > SCHEMA_FILE_LIMIT {
        return Err(format!(
            "the schema file `{shown}` has {size} bytes; schemas of at most 1 MiB are read"
        ));
    }
    let text = crate::regular_file::read_to_string(path)
        .map_err(|e| format!("cannot read the schema file `{shown}`: {e}"))?;
    let yaml = crate::yaml_guard::parse(&text)
        .map_err(|e| format!("the schema file `{shown}` is not YAML or JSON: {e}"))?;
    serde_yaml_ng::from_value(yaml)
        .map_err(|e| format!("the schema file `{shown}` is not a JSON schema: {e}"))
}

/// vLLM's fields, all optional: exactly one must be given.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Fields {
    json: Option<Schema>,
    regex: Option<String>,
    choice: Option<Vec<String>>,
    grammar: Option<String>,
    json_object: Option<bool>,
}

impl<'de> Deserialize<'de> for StructuredOutputs {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let fields = Fields::deserialize(deserializer)?;
        let mut given = Vec::new();
        if let Some(schema) = fields.json {
            given.push(Self::Json(schema));
        }
        if let Some(regex) = fields.regex {
            given.push(Self::Regex(regex));
        }
        if let Some(choice) = fields.choice {
            given.push(Self::Choice(choice));
        }
        if let Some(grammar) = fields.grammar {
            given.push(Self::Grammar(grammar));
        }
        if fields.json_object == Some(true) {
            given.push(Self::JsonObject);
        }
        match given.len() {
            1 => Ok(given.remove(0)),
            0 => Err(de::Error::custom(
                "give one of json (a schema), regex, choice (a list), grammar, json_object: true",
            )),
            _ => Err(de::Error::custom(format!(
                "give one kind of constraint, not {} at once",
                given
                    .iter()
                    .map(Self::kind)
                    .collect::<Vec<_>>()
                    .join(" and ")
            ))),
        }
    }
}

impl Serialize for StructuredOutputs {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(1))?;
        match self {
            Self::Json(schema) => map.serialize_entry("json", schema)?,
            Self::Regex(regex) => map.serialize_entry("regex", regex)?,
            Self::Choice(choice) => map.serialize_entry("choice", choice)?,
            Self::Grammar(grammar) => map.serialize_entry("grammar", grammar)?,
            Self::JsonObject => map.serialize_entry("json_object", &true)?,
        }
        map.end()
    }
}

/// Whether a grammar is written in GBNF (llama.cpp's `root ::= …`) rather than Lark.
pub fn is_gbnf(grammar: &str) -> bool {
    grammar.contains("::=")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<StructuredOutputs, String> {
        serde_yaml_ng::from_str(yaml).map_err(|e| e.to_string())
    }

    #[test]
    fn each_kind_reads_and_writes_back_as_vllm_names_it() {
        for yaml in [
            "json:\n  type: object\n",
            "regex: '[0-9]+'\n",
            "choice:\n- yes\n- no\n",
            "grammar: 'root ::= \"a\"'\n",
            "json_object: true\n",
        ] {
            let parsed = parse(yaml).unwrap();
            let written = serde_yaml_ng::to_string(&parsed).unwrap();
            assert_eq!(parse(&written).unwrap(), parsed, "{yaml}");
            assert_eq!(written.split(':').next(), yaml.split(':').next());
        }
    }

    #[test]
    fn none_two_or_unknown_kinds_are_refused_by_name() {
        assert!(parse("{}").unwrap_err().contains("give one of json"));
        let two = parse("{regex: a, choice: [b]}").unwrap_err();
        assert!(two.contains("regex and choice"), "{two}");
        assert!(
            parse("{lark: x}")
                .unwrap_err()
                .contains("unknown field `lark`")
        );
        assert!(
            parse("{json: 3}")
                .unwrap_err()
                .contains("must be a mapping")
        );
    }

    #[test]
    fn a_schema_is_read_from_a_file_or_from_inline_json() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("schema.yaml");
        std::fs::write(&path, "type: object\nrequired: [name]\n").unwrap();
        let from_file = parse(&format!("json: {}", path.display())).unwrap();
        let inline = parse(r#"json: '{"type": "object", "required": ["name"]}'"#).unwrap();
        assert_eq!(from_file, inline);
        let missing = parse("json: /no/such/schema.json").unwrap_err();
        assert!(missing.contains("neither an inline schema"), "{missing}");
    }
}
