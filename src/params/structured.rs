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
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => format!(
                "the schema file `{shown}` was not found: give the path of a YAML or JSON \
                 schema file, or the schema itself (e.g. {{type: object}})"
            ),
            _ => format!("cannot read the schema file `{shown}`: {e}"),
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

/// A constraint in the two forms llama.cpp takes (`--grammar` / `grammar`, `--json-schema` /
/// `json_schema`).
#[derive(Debug, Clone, PartialEq)]
pub enum LlamaCppConstraint {
    /// GBNF.
    Grammar(String),
    JsonSchema(Json),
}

impl StructuredOutputs {
    /// The constraint as llama.cpp takes it: a choice becomes the GBNF `root ::= "a" | "b"`,
    /// `json_object` the schema of any object. `None` for a regex or a Lark grammar, which only
    /// a build with llguidance reads (as a `%llguidance` grammar), so no flag of a stock one.
    pub fn to_llama_cpp(&self) -> Option<LlamaCppConstraint> {
        match self {
            Self::Json(Schema(schema)) => Some(LlamaCppConstraint::JsonSchema(schema.clone())),
            Self::JsonObject => Some(LlamaCppConstraint::JsonSchema(
                serde_json::json!({"type": "object"}),
            )),
            Self::Grammar(grammar) if is_gbnf(grammar) => {
                Some(LlamaCppConstraint::Grammar(grammar.clone()))
            }
            Self::Choice(choice) => {
                let strings: Vec<String> = choice.iter().map(|c| quoted(c)).collect();
                Some(LlamaCppConstraint::Grammar(format!(
                    "root ::= {}",
                    strings.join(" | ")
                )))
            }
            Self::Grammar(_) | Self::Regex(_) => None,
        }
    }

    /// OpenAI's `response_format` for the constraint: a JSON schema (named, strict) or any JSON
    /// object; `None` for the kinds OpenAI's API has no place for.
    pub fn response_format(&self) -> Option<Json> {
        match self {
            Self::Json(Schema(schema)) => Some(serde_json::json!({
                "type": "json_schema",
                "json_schema": {"name": "samplab", "schema": schema, "strict": true},
            })),
            Self::JsonObject => Some(serde_json::json!({"type": "json_object"})),
            Self::Regex(_) | Self::Choice(_) | Self::Grammar(_) => None,
        }
    }
}

/// A double-quoted literal that both GBNF (llama.cpp's `parse_char`) and Python read back as
/// `text`: quotes, backslashes and control characters escaped (control characters are all
/// below U+00A0, so `\xHH` holds them), everything else (non-ASCII included) kept as written.
pub fn quoted(text: &str) -> String {
    let mut literal = String::with_capacity(text.len() + 2);
    literal.push('"');
    for c in text.chars() {
        match c {
            '"' => literal.push_str("\\\""),
            '\\' => literal.push_str("\\\\"),
            '\n' => literal.push_str("\\n"),
            '\r' => literal.push_str("\\r"),
            '\t' => literal.push_str("\\t"),
            c if c.is_control() => literal.push_str(&format!("\\x{:02x}", u32::from(c))),
            c => literal.push(c),
        }
    }
    literal.push('"');
    literal
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
    fn llama_cpp_takes_gbnf_and_schemas_and_a_choice_as_gbnf() {
        let choice = StructuredOutputs::Choice(vec!["a \"b\"".into(), "c\\\n\u{1b}é".into()]);
        assert_eq!(
            choice.to_llama_cpp(),
            Some(LlamaCppConstraint::Grammar(
                r#"root ::= "a \"b\"" | "c\\\n\x1bé""#.into()
            ))
        );
        assert_eq!(
            StructuredOutputs::JsonObject.to_llama_cpp(),
            Some(LlamaCppConstraint::JsonSchema(
                serde_json::json!({"type": "object"})
            ))
        );
        for refused in [
            StructuredOutputs::Regex("[0-9]+".into()),
            StructuredOutputs::Grammar("start: \"a\"".into()),
        ] {
            assert_eq!(refused.to_llama_cpp(), None, "{refused:?}");
        }
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
        assert!(
            missing.contains("the schema file `/no/such/schema.json` was not found"),
            "{missing}"
        );
    }
}
